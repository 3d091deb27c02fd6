#!/bin/sh
# Reproduces crates/cli/bench-predict.txt and crates/cli/bench-predict.json, the figures of
# crates/cli/BENCH-predict.md:
#   PY=/path/to/python KEEP=/tmp/bp crates/cli/bench/run.sh [SIZES]
# PY: a Python with torch, transformers, tifffile and numpy (without them the PyTorch columns
# are skipped). SIZES: comma-separated scene sides, default 2000,4000. KEEP: where the model,
# scenes and outputs stay (crates/vector/bench/predict_answers.sh reuses the 4000² scene).
# SEGFIT: a segfit binary to measure instead of xtask's release build (--segfit).
set -eu
cd "$(dirname "$0")/../../.."
: "${PY:?set PY to a python with torch, transformers, tifffile, numpy}"
sizes=${1:-2000,4000}
keep=${KEEP:-/tmp/segfit-bench-predict}
out=crates/cli/bench-predict.txt
{
    echo "# crates/cli/bench/run.sh $sizes, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    echo "\$ cargo xtask bench predict --sizes $sizes --python PY --keep $keep --json crates/cli/bench-predict.json ${SEGFIT:+--segfit $SEGFIT}"
    cargo xtask bench predict --sizes "$sizes" --python "$PY" --keep "$keep" \
        --json crates/cli/bench-predict.json ${SEGFIT:+--segfit "$SEGFIT"}
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee "$out"
