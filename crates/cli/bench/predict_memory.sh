#!/bin/sh
# The calibration of segfit predict's memory prediction (train::InferenceEstimate, which picks
# the batch from --memory-budget): each batch and window size is one `segfit predict` process
# on the same scene, its peak RSS (VmHWM through /usr/bin/time's %M) next to the prediction
# (`inference_memory` example). Writes crates/cli/bench-predict-memory.txt.
#   SEGFIT=target/release/segfit KEEP=/tmp/segfit-bench-predict crates/cli/bench/predict_memory.sh
# KEEP: a folder from `cargo xtask bench predict --keep` (its run/ model and a scene), made
# first when missing.
set -eu
cd "$(dirname "$0")/../../.."
segfit=${SEGFIT:-target/release/segfit}
keep=${KEEP:-/tmp/segfit-bench-predict}
scene=$keep/scene_1947x1933.tif
[ -f "$scene" ] || cargo xtask bench predict --sizes 1947x1933 --python none --keep "$keep" --segfit "$segfit"
cargo build --release -q -p train --example inference_memory
estimate=target/release/examples/inference_memory
out=crates/cli/bench-predict-memory.txt
{
    echo "# crates/cli/bench/predict_memory.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; MiT-B0, 2 classes, 4-band 1947x1933 scene; peak RSS in MiB"
    echo "| tile | overlap | batch | measured peak RSS | predicted | error | seconds |"
    echo "|---|---|---|---|---|---|---|"
    for tile in 256 512; do
        overlap=$((tile / 4))
        for batch in 1 2 4 8 16; do
            rm -rf "$keep/mem_out"
            line=$(/usr/bin/time -f "%M %e" "$segfit" predict --model "$keep/run" --input "$scene" \
                --output "$keep/mem_out" --tile $tile --overlap $overlap --batch-size $batch 2>&1 >/dev/null | tail -1)
            kib=${line% *}
            secs=${line#* }
            predicted=$("$estimate" mit-b0 4 2 $tile $overlap $batch 1947 | sed 's/.*"total_mib": \([0-9.]*\).*/\1/')
            awk -v t=$tile -v o=$overlap -v b=$batch -v m="$kib" -v p="$predicted" -v s="$secs" 'BEGIN {
                mib = m / 1024; printf "| %d | %d | %d | %.1f | %.1f | %+.1f%% | %s |\n", t, o, b, mib, p, 100 * (p - mib) / mib, s }'
        done
    done
} 2>&1 | tee "$out"
