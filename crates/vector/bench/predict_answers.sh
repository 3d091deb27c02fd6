#!/bin/sh
# Reproduces crates/vector/bench-predict-answers.txt, the end-to-end table of
# crates/vector/BENCH.md: `segfit predict` on a 4000² 4-band u16 scene, without and with
# --stats/--vector, wall time and peak RSS from /usr/bin/time -v.
#   KEEP=/tmp/segfit-bench-predict crates/vector/bench/predict_answers.sh
# KEEP: the directory of crates/cli/bench/run.sh (cargo xtask bench predict --keep): its MiT-B0
# (KEEP/run) and 4000² scene (KEEP/scene_4000.tif). Where they are missing they are made here
# the way xtask makes them (make_scene; segfit prepare, 8 training steps, export). Uses the release segfit, or
# SEGFIT=/path/to/segfit.
set -eu
cd "$(dirname "$0")/../../.."
keep=${KEEP:-/tmp/segfit-bench-predict}
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}${SEGFIT:-}" ] || cargo build --release -q -p segfit --bin segfit
segfit=${SEGFIT:-$target/release/segfit}
scene="$keep/scene_4000.tif"
if [ ! -f "$scene" ]; then
    [ -n "${NO_BUILD:-}" ] || cargo build --release -q -p tiles --example make_scene
    "$target/release/examples/make_scene" 4000 "$scene"
fi
if [ ! -d "$keep/run" ]; then
    # As xtask/src/bench_predict.rs make_model.
    "$segfit" prepare --synthetic --multispectral --count 8 --size 64 --out "$keep/data"
    "$segfit" train --config configs/synthetic-quick.toml --set 'model.preset="mit-b0"' \
        --set "data.root=\"$keep/data\"" --set 'data.size=[64,64]' --set train.max_steps=8 \
        --set 'data.normalize="dataset"' --output "$keep/run"
    "$segfit" export --model "$keep/run" --output "$keep/hf"
fi
work="$keep/answers"
rm -rf "$work"
mkdir -p "$work"
out=crates/vector/bench-predict-answers.txt
run() {
    name=$1
    shift
    echo "\$ segfit predict --model KEEP/run --input KEEP/scene_4000.tif --output $name/ --tile 512 --overlap 128 $*"
    /usr/bin/time -f "$name: wall %e s, peak RSS %M KiB" "$segfit" predict --model "$keep/run" \
        --input "$scene" --output "$work/$name" --tile 512 --overlap 128 "$@"
}
{
    echo "# crates/vector/bench/predict_answers.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    echo "# segfit: $segfit"
    run map
    run stats_vector --stats "$work/s1.json" --vector --simplify 10
    run stats_vector_all --stats "$work/s2.json" --vector --vector-classes outer,rice_paddy
    echo "# polygons in stats_vector_all/scene_4000.geojson: $(grep -o '"type": *"Feature"' "$work/stats_vector_all/scene_4000.geojson" | wc -l)"
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee "$out"
