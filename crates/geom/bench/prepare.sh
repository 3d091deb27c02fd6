#!/usr/bin/env bash
# Peak RSS of the whole `segfit prepare --scenes … --labels …` command (issue #28's bound: a
# 20000x20000 scene with 100 000 field polygons within 500 MiB): 100 000 fields (FlatGeobuf,
# WGS84, from labels_bench) over a 20000x20000 1-band UTM 48N scene at 10 m (tiled Deflate
# GeoTIFF, written by rasterio in windows), cut into 512-pixel tiles. Peak RSS is GNU time's
# "Maximum resident set size" of the segfit process. Writes bench/bench-prepare.txt.
#
#   crates/geom/bench/prepare.sh            (PYTHON=/work/venv/bin/python by default)
#   PROFILE=dev crates/geom/bench/prepare.sh  (the test build's profile: dependencies at opt-level
#                                             3, segfit's crates at 1; no release build needed)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
python=${PYTHON:-/work/venv/bin/python}
profile=${PROFILE:-release}
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cargo build --profile "$profile" -p geom --example labels_bench
cargo build --profile "$profile" -p segfit
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "# crates/geom/bench/prepare.sh ($profile build) at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  target/$dir/examples/labels_bench make "$work/fields.fgb" 100000 20000
  "$python" - "$work/scene.tif" <<'PY'
import sys
import numpy as np
import rasterio
from rasterio.transform import Affine
from rasterio.windows import Window

side = 20000
profile = dict(driver="GTiff", width=side, height=side, count=1, dtype="uint8",
               crs="EPSG:32648", transform=Affine(10, 0, 300000, 0, -10, 1700000),
               tiled=True, blockxsize=512, blockysize=512, compress="deflate")
with rasterio.open(sys.argv[1], "w", **profile) as dst:
    cols = (np.arange(side, dtype=np.uint32) * 7 % 251).astype(np.uint8)
    for y in range(0, side, 512):
        h = min(512, side - y)
        rows = (np.arange(y, y + h, dtype=np.uint32)[:, None] * 3 % 5).astype(np.uint8)
        dst.write((cols[None, :] + rows)[None], window=Window(0, y, side, h))
print(f"wrote a {side}x{side} 1-band u8 scene in EPSG:32648")
PY
  echo "scene file: $(du -m "$work/scene.tif" | cut -f1) MiB, layer file: $(du -m "$work/fields.fgb" | cut -f1) MiB"
  echo
  echo "\$ segfit prepare --scenes scene.tif --labels fields.fgb --class-field crop --class outer=fallow --class rice_paddy=rice --class maize=maize --background outer --tile-size 512 --out data"
  /usr/bin/time -v target/$dir/segfit prepare --scenes "$work/scene.tif" \
    --labels "$work/fields.fgb" --class-field crop --class outer=fallow \
    --class rice_paddy=rice --class maize=maize --background outer --tile-size 512 \
    --out "$work/data" 2> "$work/time.txt"
  grep -E "Elapsed|Maximum resident" "$work/time.txt"
  kib=$(grep "Maximum resident" "$work/time.txt" | awk '{print $NF}')
  echo "peak RSS $(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }') MiB"
} 2>&1 | tee "$here/bench-prepare.txt"
