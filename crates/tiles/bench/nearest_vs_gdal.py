"""GDAL's nearest resampling against the rule `BandStack` implements for `resample_to`.

Verification, not a test of the Rust code: rasterio's `reproject` (GDAL's warper,
`Resampling.nearest`, i.e. `gdalwarp -r near`) on same-CRS north-up grids against "each target
pixel takes the source pixel that contains its centre", on upsampling with offset grids (the
case `tests/remote.rs` asserts with the integer formula `(x - 1) / 2`), 60 m -> 10 m, and
downsampling where target centres fall exactly on source pixel edges.

    /work/venv/bin/python crates/tiles/bench/nearest_vs_gdal.py
"""
import numpy as np
from rasterio.warp import reproject, Resampling
from rasterio.transform import Affine
from rasterio.crs import CRS

crs = CRS.from_epsg(32648)
def gdal(src, st, dst_shape, dt, nodata):
    dst = np.full(dst_shape, 12345, dtype=src.dtype)
    reproject(src, dst, src_transform=st, src_crs=crs, dst_transform=dt, dst_crs=crs,
              resampling=Resampling.nearest, src_nodata=nodata, dst_nodata=nodata)
    return dst

def rule(src, st, dst_shape, dt, nodata):
    h, w = dst_shape
    out = np.full(dst_shape, nodata, dtype=src.dtype)
    for y in range(h):
        for x in range(w):
            X = dt.c + (x + 0.5) * dt.a
            Y = dt.f + (y + 0.5) * dt.e
            sx = (X - st.c) / st.a
            sy = (Y - st.f) / st.e
            if 0 <= sx < src.shape[1] and 0 <= sy < src.shape[0]:
                out[y, x] = src[int(sy), int(sx)]
    return out

rng = np.random.default_rng(0)
cases = {
    # the Rust test: 20 m grid 10 m east and south of the 10 m corner
    "20m->10m offset": ((24, 32), Affine(20, 0, 600010, 0, -20, 1099990), (48, 64), Affine(10, 0, 600000, 0, -10, 1100000)),
    "60m->10m offset": ((10, 12), Affine(60, 0, 599990, 0, -60, 1100030), (48, 64), Affine(10, 0, 600000, 0, -10, 1100000)),
    "20m->10m aligned": ((24, 32), Affine(20, 0, 600000, 0, -20, 1100000), (48, 64), Affine(10, 0, 600000, 0, -10, 1100000)),
    "10m->20m (centres on edges)": ((48, 64), Affine(10, 0, 600000, 0, -10, 1100000), (24, 32), Affine(20, 0, 600000, 0, -20, 1100000)),
}
for name, (ss, st, ds, dt) in cases.items():
    src = rng.integers(1, 9000, ss).astype(np.uint16)
    g = gdal(src, st, ds, dt, 9999)
    r = rule(src, st, ds, dt, 9999)
    # the Rust test's integer form of the rule for its case
    print(f"{name}: GDAL == centre rule on {np.mean(g == r) * 100:.2f}% of {g.size} pixels")
    if name == "20m->10m offset":
        exp = np.full(ds, 9999, np.uint16)
        for y in range(1, ds[0]):
            for x in range(1, ds[1]):
                exp[y, x] = src[(y - 1) // 2, (x - 1) // 2]
        print(f"  GDAL == the test's (x - 1) / 2 formula: {np.array_equal(g, exp)}")
