#!/usr/bin/env bash
# Compares geom's rasterisation with GDAL's (rasterio) and writes verify/compare-gdal.txt.
# Needs a Python with rasterio, fiona, shapely, pyproj (PYTHON, default /work/venv/bin/python).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=${PYTHON:-/work/venv/bin/python}
cd "$root"
cargo build -p geom --example burn --example reproject
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "# crates/geom/verify/run.sh at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)"
  "$python" "$here/compare_gdal.py" "$root/target/debug/examples/burn" "$root/target/debug/examples/reproject" "$work"
} 2>&1 | tee "$here/compare-gdal.txt"
