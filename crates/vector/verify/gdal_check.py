"""Checks `segfit predict --stats --vector` outputs with GDAL's eyes (rasterio, shapely, pyproj).

Not part of the tests (they stay in Rust); run by hand in a venv with rasterio, shapely, pyproj:

    segfit predict --model M --input scene.tif --output native --vector --vector-crs native \
        --vector-classes 0,1,... --stats native/stats.json
    segfit predict --model M --input scene.tif --output wgs84 --vector --vector-classes 0,1,...
    python gdal_check.py native/scene.tif native/scene.geojson wgs84/scene.geojson native/stats.json

Prints, per class: polygons and areas from GDAL's polygonize (4-connectivity) on the written
class map next to segfit's, their validity and symmetric difference; the worst difference
between segfit's WGS84 coordinates and pyproj's transform of its native ones; whether the
statistics' pixel counts and areas agree with the class map (per-row ellipsoidal areas from
pyproj.Geod for geographic CRSs).
"""
import json
import sys

import numpy as np
import rasterio
import rasterio.features
from pyproj import CRS, Geod, Transformer
from shapely.geometry import shape
from shapely.ops import unary_union

classes_tif, native_json, wgs84_json, stats_json = sys.argv[1:5]
with rasterio.open(classes_tif) as d:
    cls, tr, crs = d.read(1), d.transform, d.crs
native = json.load(open(native_json))
wgs84 = json.load(open(wgs84_json))
stats = json.load(open(stats_json))["inputs"][0]

for k in sorted({f["properties"]["class_index"] for f in native["features"]}):
    gdal = [shape(g) for g, v in rasterio.features.shapes(cls, mask=cls == k, connectivity=4, transform=tr) if v == k]
    ours = [shape(f["geometry"]) for f in native["features"] if f["properties"]["class_index"] == k]
    same = sorted(round(p.area, 3) for p in gdal) == sorted(round(p.area, 3) for p in ours)
    sym = unary_union(gdal).symmetric_difference(unary_union(ours)).area
    print(f"class {k}: GDAL {len(gdal)} polygons, segfit {len(ours)}; areas equal {same}; "
          f"all valid {all(p.is_valid for p in ours)}; symmetric difference {sym:.6f}; "
          f"holes GDAL {sum(len(p.interiors) for p in gdal)} segfit {sum(len(p.interiors) for p in ours)}")

to_wgs84 = Transformer.from_crs(crs, 4326, always_xy=True)
worst = 0.0
for fn, fw in zip(native["features"], wgs84["features"]):
    for rn, rw in zip(fn["geometry"]["coordinates"], fw["geometry"]["coordinates"]):
        a, b = np.array(rn), np.array(rw)
        lon, lat = to_wgs84.transform(a[:, 0], a[:, 1])
        worst = max(worst, np.abs(lon - b[:, 0]).max(), np.abs(lat - b[:, 1]).max())
ccw = all(shape(f["geometry"]).exterior.is_ccw and not any(i.is_ccw for i in shape(f["geometry"]).interiors)
          for f in wgs84["features"])
print(f"WGS84: worst |segfit - pyproj| {worst:.2e} deg; RFC 7946 winding {ccw}")

if CRS(crs).is_geographic:
    geod = Geod(ellps="WGS84")
    row_area = []
    for r in range(cls.shape[0]):
        (x0, y0), (x1, y1) = tr * (0, r), tr * (1, r + 1)
        row_area.append(abs(geod.polygon_area_perimeter([x0, x1, x1, x0], [y0, y0, y1, y1])[0]))
    row_area = np.array(row_area)
else:
    row_area = np.full(cls.shape[0], abs(tr.a * tr.e - tr.b * tr.d))
for c in stats["classes"] + [stats["nodata"]]:
    k = c["class_index"]
    n = int((cls == k).sum())
    area = float(((cls == k).sum(axis=1) * row_area).sum())
    rel = abs(c["area_m2"] - area) / max(area, 1e-9) if c["area_m2"] is not None else float("nan")
    print(f"stats class {k}: pixels {c['pixels']} vs {n}; area {c['area_m2']} vs {area:.3f} m2 (rel {rel:.1e})")
