#!/bin/sh
# Reproduces crates/augment/bench-throughput.txt, the figures of crates/augment/BENCH.md:
#   PY=/path/to/venv/bin/python crates/augment/bench/run.sh
# PY: a Python with albumentations 2.0.8 and opencv-python-headless
# (`pip install albumentations==2.0.8 opencv-python-headless`). Both sides run pinned to one
# core (`taskset -c 1`), alternately, twice each, BENCH_SECS=3 per case.
set -eu
cd "$(dirname "$0")/../../.."
: "${PY:?set PY to a python with albumentations 2.0.8}"
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p augment --example bench
out=crates/augment/bench-throughput.txt
{
    echo "# crates/augment/bench/run.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    for run in 1 2; do
        echo "== run $run: augment (Rust), BENCH_SECS=3 taskset -c 1 $target/release/examples/bench"
        BENCH_SECS=3 taskset -c 1 "$target/release/examples/bench"
        echo "== run $run: albumentations, BENCH_SECS=3 OMP_NUM_THREADS=1 taskset -c 1 python crates/augment/bench/albu_bench.py"
        BENCH_SECS=3 OMP_NUM_THREADS=1 taskset -c 1 "$PY" crates/augment/bench/albu_bench.py
    done
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee "$out"
