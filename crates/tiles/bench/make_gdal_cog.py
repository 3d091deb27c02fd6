"""A cloud-optimised GeoTIFF made by GDAL (rio-cogeo: IFDs first, ghost header, 512² Deflate
tiles with leader/trailer bytes, overviews), and the sum of its full-resolution samples as
rasterio reads them: what `examples/read_remote.rs` must print as its checksum, read locally
and over HTTP.

    /work/venv/bin/python crates/tiles/bench/make_gdal_cog.py /tmp/gdal_cog.tif 3000
    cargo run -p tiles --example read_remote -- http /tmp/gdal_cog.tif
"""
import os
import sys

import numpy as np
import rasterio
from rasterio.transform import Affine
from rio_cogeo.cogeo import cog_translate, cog_validate
from rio_cogeo.profiles import cog_profiles

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gdal_cog.tif"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
plain = out + ".plain.tif"
y, x = np.mgrid[0:n, 0:n]
rng = np.random.default_rng(1)
data = np.stack([
    ((x // 9 + y // 13) % 300 * 7 + b * 900 + rng.integers(0, 200, (n, n))).astype(np.uint16)
    for b in range(4)
])
profile = dict(driver="GTiff", width=n, height=n, count=4, dtype="uint16", crs="EPSG:32648",
               transform=Affine(10, 0, 600000, 0, -10, 1200000), nodata=0)
with rasterio.open(plain, "w", **profile) as d:
    d.write(data)
cog = cog_profiles.get("deflate")
cog.update(blockxsize=512, blockysize=512)
cog_translate(plain, out, cog, quiet=True)
os.remove(plain)
valid, errors, warnings = cog_validate(out)
with rasterio.open(out) as d:
    total = int(d.read().astype(np.uint64).sum())
    print(f"{out}: valid COG {valid}, {n}x{n}x4 u16, tiles {d.profile['blockxsize']}², "
          f"overviews {d.overviews(1)}, sum of samples {total}")
