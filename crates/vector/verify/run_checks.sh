#!/bin/sh
# Reproduces crates/vector/verify/gdal-check.txt: gdal_check.py on `segfit predict`'s outputs
# for a 2000² 4-band u16 scene in UTM (EPSG:32651, make_scene's grid) and the same pixels on an
# EPSG:4326 grid (to_4326.py).
#   PY=/work/venv/bin/python KEEP=/tmp/segfit-bench-predict crates/vector/verify/run_checks.sh
# PY: a Python with rasterio, shapely, pyproj, numpy. KEEP: the directory that
# crates/cli/bench/run.sh or crates/vector/bench/predict_answers.sh filled (its model KEEP/run;
# the scene KEEP/scene_2000.tif is made with make_scene where it is missing).
set -eu
cd "$(dirname "$0")/../../.."
: "${PY:?set PY to a python with rasterio, shapely, pyproj}"
keep=${KEEP:-/tmp/segfit-bench-predict}
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}${SEGFIT:-}" ] || cargo build --release -q -p segfit --bin segfit
segfit=${SEGFIT:-$target/release/segfit}
if [ ! -f "$keep/scene_2000.tif" ]; then
    [ -n "${NO_BUILD:-}" ] || cargo build --release -q -p tiles --example make_scene
    "$target/release/examples/make_scene" 2000 "$keep/scene_2000.tif"
fi
work="$keep/gdal-check"
rm -rf "$work"
mkdir -p "$work"
"$PY" crates/vector/verify/to_4326.py "$keep/scene_2000.tif" "$work/scene_4326.tif"
cp "$keep/scene_2000.tif" "$work/scene_utm.tif"
out=crates/vector/verify/gdal-check.txt
{
    echo "# crates/vector/verify/run_checks.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    for name in scene_utm scene_4326; do
        echo "== $name.tif: segfit predict --vector --vector-classes 0,1 (--vector-crs native --stats, and WGS84), then gdal_check.py"
        "$segfit" predict --model "$keep/run" --input "$work/$name.tif" --output "$work/native_$name" \
            --tile 512 --overlap 128 --vector --vector-crs native --vector-classes 0,1 \
            --stats "$work/native_$name/stats.json"
        "$segfit" predict --model "$keep/run" --input "$work/$name.tif" --output "$work/wgs84_$name" \
            --tile 512 --overlap 128 --vector --vector-classes 0,1
        "$PY" crates/vector/verify/gdal_check.py "$work/native_$name/$name.tif" \
            "$work/native_$name/$name.geojson" "$work/wgs84_$name/$name.geojson" \
            "$work/native_$name/stats.json"
    done
} 2>&1 | tee "$out"
