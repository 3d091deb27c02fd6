"""GDAL's view of CogWriter's maps (made by the cog_samples example, described in its
manifest.json): rio-cogeo's cog_validate (strict: warnings count as errors), the checks of
GDAL's validate_cloud_optimized_geotiff.py reproduced with rasterio (ghost header, IFD and
data order, and the full check of every tile's leader and trailer), every pixel of every
level against the manifest's formula, and the legend and band metadata as GDAL itself
reports them (libgdal through ctypes: category names, colour table, scale, descriptions).

usage: python cog.py DIR
"""

import ctypes
import glob
import json
import os
import struct
import sys

import numpy as np
import rasterio
from rio_cogeo.cogeo import cog_validate


def gdal_lib():
    """The libgdal rasterio ships (already loaded by it), for what rasterio does not expose."""
    libs = os.path.join(os.path.dirname(rasterio.__file__), "..", "rasterio.libs")
    path = glob.glob(os.path.join(libs, "libgdal-*.so*"))[0]
    lib = ctypes.CDLL(path)
    lib.GDALAllRegister()
    lib.GDALOpen.restype = ctypes.c_void_p
    lib.GDALOpen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.GDALGetRasterBand.restype = ctypes.c_void_p
    lib.GDALGetRasterBand.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.GDALGetRasterCategoryNames.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.GDALGetRasterCategoryNames.argtypes = [ctypes.c_void_p]
    lib.GDALGetRasterScale.restype = ctypes.c_double
    lib.GDALGetRasterScale.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.GDALGetRasterOffset.restype = ctypes.c_double
    lib.GDALGetRasterOffset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.GDALGetDescription.restype = ctypes.c_char_p
    lib.GDALGetDescription.argtypes = [ctypes.c_void_p]
    lib.GDALClose.argtypes = [ctypes.c_void_p]
    lib.GDALGetFileList.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.GDALGetFileList.argtypes = [ctypes.c_void_p]
    lib.CSLDestroy.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    return lib


def category_names(lib, path):
    ds = lib.GDALOpen(path.encode(), 0)
    assert ds, f"GDAL cannot open {path}"
    # As gdalinfo (and QGIS) do first: GDAL 3.10's GTiff driver loads the PAM sidecar lazily,
    # on the first dataset-level query, not on GetCategoryNames itself.
    files = lib.GDALGetFileList(ds)
    lib.CSLDestroy(files)
    band = lib.GDALGetRasterBand(ds, 1)
    names = lib.GDALGetRasterCategoryNames(band)
    out = []
    i = 0
    while names and names[i] is not None:
        out.append(names[i].decode())
        i += 1
    scales = []
    for b in range(1, 1 + rasterio.open(path).count):
        band = lib.GDALGetRasterBand(ds, b)
        scales.append(
            (
                lib.GDALGetRasterScale(band, None),
                lib.GDALGetRasterOffset(band, None),
                lib.GDALGetDescription(band).decode(),
            )
        )
    lib.GDALClose(ds)
    return out, scales


def gdal_validator(path):
    """validate_cloud_optimized_geotiff.py's checks (full check on), with rasterio."""
    errors = []
    with rasterio.open(path) as src:
        ovr = src.overviews(1)
        ifd = [int(src.get_tag_item("IFD_OFFSET", "TIFF", bidx=1))]
        ifd += [int(src.get_tag_item("IFD_OFFSET", "TIFF", bidx=1, ovr=i)) for i in range(len(ovr))]
    with open(path, "rb") as f:
        raw = f.read()
    big = raw[:4] in (b"II\x2b\x00", b"MM\x00\x2b")
    pos = 16 if big else 8
    pattern = "GDAL_STRUCTURAL_METADATA_SIZE=%06d bytes\n" % 0
    got = raw[pos : pos + len(pattern)].decode("latin1")
    assert got.startswith("GDAL_STRUCTURAL_METADATA_SIZE="), "no ghost header"
    size = int(got[len("GDAL_STRUCTURAL_METADATA_SIZE=") :][:6])
    md = raw[pos + len(pattern) : pos + len(pattern) + size].decode("latin1")
    flags = {
        k: k in md
        for k in [
            "LAYOUT=IFDS_BEFORE_DATA",
            "BLOCK_ORDER=ROW_MAJOR",
            "BLOCK_LEADER=SIZE_AS_UINT4",
            "BLOCK_TRAILER=LAST_4_BYTES_REPEATED",
            "KNOWN_INCOMPATIBLE_EDITION=NO",
        ]
    }
    if not all(flags.values()):
        errors.append(f"ghost header lacks {[k for k, v in flags.items() if not v]}")
    expected = pos + len(pattern) + size
    expected += expected % 2
    if ifd[0] != expected:
        errors.append(f"main IFD at {ifd[0]}, expected {expected}")
    for a, b in zip(ifd, ifd[1:]):
        if b < a:
            errors.append("IFD offsets not increasing")
    firsts = []
    n_tiles = 0
    for level in range(len(ifd)):
        kw = {} if level == 0 else {"OVERVIEW_LEVEL": level - 1}
        with rasterio.open(path, **kw) as src:
            bw, bh = src.block_shapes[0][1], src.block_shapes[0][0]
            last = 0
            first = None
            for y in range((src.height + bh - 1) // bh):
                for x in range((src.width + bw - 1) // bw):
                    off = int(src.get_tag_item(f"BLOCK_OFFSET_{x}_{y}", "TIFF", bidx=1) or 0)
                    cnt = int(src.get_tag_item(f"BLOCK_SIZE_{x}_{y}", "TIFF", bidx=1) or 0)
                    if off == 0:
                        continue
                    n_tiles += 1
                    first = off if first is None else first
                    if off < last:
                        errors.append(f"level {level}: block ({x}, {y}) before the previous one")
                    last = off
                    if struct.unpack("<I", raw[off - 4 : off])[0] != cnt:
                        errors.append(f"level {level}: block ({x}, {y}) leader is wrong")
                    if raw[off + cnt - 4 : off + cnt] != raw[off + cnt : off + cnt + 4]:
                        errors.append(f"level {level}: block ({x}, {y}) trailer is wrong")
            firsts.append(first)
    if firsts[-1] < ifd[-1]:
        errors.append("the smallest level's data comes before its IFD")
    for i in range(len(firsts) - 1):
        if firsts[i] < firsts[i + 1]:
            errors.append(f"level {i}'s data comes before level {i + 1}'s")
    return errors, n_tiles


def expected_levels(m):
    w, h, nb = m["width"], m["height"], m["bands"]
    y, x, b = np.meshgrid(np.arange(h), np.arange(w), np.arange(nb), indexing="ij")
    v = x * 3 + y * 5 + b * 7
    kind = m["kind"]
    if kind == "u8" and m["legend"]:
        a = np.where((x + 2 * y) % 29 == 0, 255, (x // 37 + y // 23) % 3).astype(np.uint8)
    elif kind == "u8":
        a = (v % 251).astype(np.uint8)
    elif kind == "u16":
        a = (v * 11 % 65000).astype(np.uint16)
    else:
        a = ((v % 4001) * 0.25).astype(np.float32)
    levels = [a]
    while max(a.shape[0], a.shape[1]) > 256:
        a = decimate(a, m["average"], m["nodata"])
        levels.append(a)
    return levels


def decimate(a, average, nodata):
    """CogWriter's rule: top-left sample, or the mean of the valid samples of each 2x2 block
    (integers rounded half up), the top-left one where none is valid."""
    h, w, nb = a.shape
    h2, w2 = (h + 1) // 2, (w + 1) // 2
    first = a[::2, ::2]
    if not average:
        return first.copy()
    pad = np.full((h2 * 2, w2 * 2, nb), np.nan)
    pad[:h, :w] = a.astype(np.float64)
    if nodata is not None:
        pad[pad == nodata] = np.nan
    blocks = pad.reshape(h2, 2, w2, 2, nb)
    n = (~np.isnan(blocks)).sum(axis=(1, 3))
    s = np.nansum(blocks, axis=(1, 3))
    if a.dtype == np.float32:
        mean = np.where(n > 0, s / np.maximum(n, 1), np.nan).astype(np.float32)
    else:
        mean = ((s.astype(np.int64) + n // 2) // np.maximum(n, 1)).astype(a.dtype)
    return np.where(n > 0, mean, first)


def main(d):
    lib = gdal_lib()
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    failed = False
    print(f"rasterio {rasterio.__version__}, GDAL {rasterio.__gdal_version__}")
    for m in manifest:
        path = os.path.join(d, m["file"])
        valid, errs, warns = cog_validate(path, strict=True, quiet=True)
        gdal_errs, n_tiles = gdal_validator(path)
        levels = expected_levels(m)
        pixel_errs = []
        with rasterio.open(path) as src:
            ovr = src.overviews(1)
            if len(ovr) != len(levels) - 1:
                pixel_errs.append(f"{len(ovr)} overviews, expected {len(levels) - 1}")
            profile = f"{src.width}x{src.height}x{src.count} {src.dtypes[0]} {src.compression.value}, blocks {src.block_shapes[0]}, overviews {ovr}, crs {src.crs}, nodata {src.nodata}"
        for i, want in enumerate(levels):
            kw = {} if i == 0 else {"OVERVIEW_LEVEL": i - 1}
            with rasterio.open(path, **kw) as src:
                got = np.moveaxis(src.read(), 0, -1)
            same = np.array_equal(got, want, equal_nan=True) if got.shape == want.shape else False
            if not same:
                pixel_errs.append(f"level {i}: pixels differ")
        print(f"== {m['file']}: {profile}")
        print(f"   rio-cogeo cog_validate(strict): valid={valid} errors={errs} warnings={warns}")
        print(f"   GDAL validator logic (full check of {n_tiles} tiles): errors={gdal_errs}")
        print(f"   pixels of {len(levels)} level(s) as written: {'identical' if not pixel_errs else pixel_errs}")
        names, scales = category_names(lib, path)
        with rasterio.open(path) as src:
            if m["legend"]:
                cmap = src.colormap(1)
                first = [cmap[i] for i in range(len(m["colours"]))]
                want = [tuple(c) + (255,) for c in m["colours"]]
                legend_ok = first == want and cmap[255][3] == 0 and names == m["classes"]
                print(f"   rasterio colormap(1)[0..{len(first)}] = {first}, [255] = {cmap[255]}")
                print(f"   GDAL category names = {names}")
                print(f"   QGIS style: {os.path.exists(path[:-4] + '.qml')}")
            else:
                want_scale = m["scale"] if m["scale"] is not None else 1.0
                legend_ok = all(
                    abs(s - want_scale) < 1e-15 and o == 0.0 and dsc == n
                    for (s, o, dsc), n in zip(scales, m["band_names"])
                )
                print(f"   GDAL (scale, offset, description) per band = {scales}")
                print(f"   rasterio scales {src.scales}, descriptions {src.descriptions}")
        ok = valid and not errs and not warns and not gdal_errs and not pixel_errs and legend_ok
        print(f"   => {'OK' if ok else 'FAILED'}")
        failed |= not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1])
