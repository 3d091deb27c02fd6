#!/bin/sh
# The figures of crates/cli/BENCH-predict.md's "Pipelined scene prediction" section, in one
# run: a 1947x1933 4-band scene (the size of a Sentinel-2 scene that issue #29 measured) with
# 512-pixel windows (25 windows) and with 128-pixel windows (256 windows, as issue #29 counted),
# segfit next to PyTorch + transformers (crates/cli/bench/pytorch_predict.py: same windows,
# overlap, Hann weights and batch), then an 8000² COG predicted from a local HTTP server against
# the same file read locally. Writes crates/cli/bench-pipeline.txt.
#   PY=/path/to/python SEGFIT=target/release/segfit KEEP=/tmp/segfit-bench-predict \
#       crates/cli/bench/pipeline.sh
# PY: a Python with torch, transformers, tifffile and numpy. SEGFIT: the binary to measure
# (default: xtask's release build). BASELINE: another segfit binary (e.g. the commit before
# the pipeline) measured the same way, for a before/after row.
set -eu
cd "$(dirname "$0")/../../.."
: "${PY:?set PY to a python with torch, transformers, tifffile, numpy}"
keep=${KEEP:-/tmp/segfit-bench-predict}
out=crates/cli/bench-pipeline.txt
bench() {
    echo "\$ cargo xtask bench predict $*"
    cargo xtask bench predict --python "$PY" --keep "$keep" ${SEGFIT:+--segfit "$SEGFIT"} "$@"
}
{
    echo "# crates/cli/bench/pipeline.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); load average before: $(cat /proc/loadavg)"
    echo "# torch $("$PY" -c 'import torch; print(torch.__version__)'), $("$PY" -c 'import torch; print(torch.get_num_threads())') threads"
    if [ -n "${BASELINE:-}" ]; then
        echo "## baseline: $BASELINE"
        SEGFIT=$BASELINE bench --sizes 1947x1933 --tile 512 --batch 4 --python none
        SEGFIT=$BASELINE bench --sizes 1947x1933 --tile 128 --overlap 4 --batch 4 --python none
    fi
    echo "## 512-pixel windows"
    bench --sizes 1947x1933 --tile 512 --batch 4
    bench --sizes 1947x1933 --tile 512 --batch 8 --python none
    echo "## 128-pixel windows, 256 of them"
    bench --sizes 1947x1933 --tile 128 --overlap 4 --batch 4
    bench --sizes 1947x1933 --tile 128 --overlap 4 --batch 16 --python none
    echo "## 8000² COG by URL (local HTTP server) and read locally"
    bench --sizes 8000 --tile 512 --batch 4 --python none --http
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee "$out"
