#!/bin/sh
# Reproduces crates/tiles/verify/cog.txt: CogWriter's maps (the cog_samples example: class maps
# with a legend, with and without overviews, odd sizes, f32 and u16 multi-band, scaled u8
# probabilities) checked by rio-cogeo, GDAL's COG validator logic, pixel by pixel, and GDAL's
# reading of the legend and band metadata (cog.py).
#   PY=/work/venv/bin/python crates/tiles/verify/cog.sh
# PY: a Python with rasterio, rio-cogeo and numpy.
set -eu
cd "$(dirname "$0")/../../.."
: "${PY:?set PY to a python with rasterio, rio-cogeo and numpy}"
target=${CARGO_TARGET_DIR:-target}
work=${WORK:-/tmp/segfit-verify-cog}
[ -n "${NO_BUILD:-}" ] || cargo build -q -p tiles --example cog_samples
rm -rf "$work"
"$target/debug/examples/cog_samples" "$work" 2>/dev/null
out=crates/tiles/verify/cog.txt
{
    echo "# crates/tiles/verify/cog.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    "$PY" crates/tiles/verify/cog.py "$work"
} 2>&1 | tee "$out"
