"""Copies a GeoTIFF scene onto an EPSG:4326 grid (same pixels, 0.0001° pixels from 105°E 14°N)
for run_checks.sh's geographic case:  python to_4326.py IN.tif OUT.tif"""
import sys

import rasterio
from rasterio.transform import from_origin

src_path, dst_path = sys.argv[1:3]
with rasterio.open(src_path) as src:
    data, profile = src.read(), src.profile
profile.update(crs="EPSG:4326", transform=from_origin(105.0, 14.0, 1e-4, 1e-4), driver="GTiff")
with rasterio.open(dst_path, "w", **profile) as dst:
    dst.write(data)
