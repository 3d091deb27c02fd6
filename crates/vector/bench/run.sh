#!/bin/sh
# Reproduces crates/vector/bench-polygonize.txt, the polygonizer table of crates/vector/BENCH.md:
#   crates/vector/bench/run.sh
# Each line is one run of the polygonize_bench example (release build):
#   polygonize_bench WIDTH HEIGHT all|one SIMPLIFY_M noise|fields
set -eu
cd "$(dirname "$0")/../../.."
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p vector --example polygonize_bench
bench="$target/release/examples/polygonize_bench"
out=crates/vector/bench-polygonize.txt
{
    echo "# crates/vector/bench/run.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    for args in "4000 4000 all 0 noise" "4000 4000 one 0 noise" "4000 4000 all 15 noise" \
        "8000 8000 one 0 noise" "4000 4000 all 0 fields" "20000 20000 one 0 fields" \
        "20000 20000 all 0 fields" "20000 20000 all 15 fields"; do
        echo "\$ polygonize_bench $args"
        # shellcheck disable=SC2086
        "$bench" $args
    done
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee "$out"
