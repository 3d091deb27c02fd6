"""albumentations 2.0.8 references for the colour transforms (HueSaturationValue, RandomGamma,
RandomBrightnessContrast, Normalize) on grey, black, white and fully saturated pixels, and on a
crop of real-looking imagery (issue 31).

Writes `albumentations-colour.safetensors` and `albumentations-colour.json` beside this file.
Run with albumentations==2.0.8, opencv-python-headless, numpy and safetensors from PyPI:
    python make_albumentations_colour.py

OpenCV's u8 HSV -> RGB rounds differently in its SIMD blocks (truncation) and in the scalar
tail of each row (round to nearest), and the block is 4 vectors of float32 lanes of the CPU it
runs on. These references pin AVX2's 32-pixel blocks (the script checks, and on an AVX-512 CPU
asks OpenCV not to use AVX-512); the all-colour digests use rows of 4096 pixels (all SIMD on
any CPU) and of 8 pixels (all scalar on any CPU).

Inputs (u8 RGB, HWC), widths with a tail after their 32-pixel blocks:
- `extremes.image`: every grey level, black, white, fully saturated colours at every hue and
  at many values, near-greys (one channel one level off) and a few random colours.
- `real.image`: a smooth gradient with noise standing in for a stretched satellite crop: roads
  and water in exact or near grey, clouds clipped to white, dark shadows clipped to black,
  bare soil and fields of low saturation.

Every case is one transform with fixed parameters (p = 1): `<case>.<input>` is the output and
`<case>.params` the parameters as float32, so a test can pass the same values (the random ones
are drawn here within albumentations' default limits and rounded to float32 first, so that
both sides see the same numbers). `<case>.cube` is, for the HueSaturationValue cases, a
digest of the output over all 2^24 RGB colours (see `cube_digests`), as `<case>.cube_wide`
and `<case>.cube_narrow`.
"""
import json
import os

# Before OpenCV loads: its dispatcher would use 64-pixel blocks on an AVX-512 CPU.
if os.path.exists("/proc/cpuinfo") and " avx512f" in open("/proc/cpuinfo").read():
    os.environ.setdefault("OPENCV_CPU_DISABLE", "AVX512-SKX,AVX512-CLX,AVX512-ICL")

import albumentations as A
import cv2
import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def extremes():
    """40 x 56 pixels of the colours where an HSV round trip has special cases."""
    px = []
    px += [(g, g, g) for g in range(256)]  # every grey, black and white among them
    for v in range(0, 256, 17):  # the six fully saturated primaries/secondaries at 16 values
        px += [(v, 0, 0), (0, v, 0), (0, 0, v), (v, v, 0), (0, v, v), (v, 0, v)]
    for t in range(0, 256, 5):  # fully saturated, full value, every hue sector
        px += [(255, t, 0), (255 - t, 255, 0), (0, 255, t), (0, 255 - t, 255), (t, 0, 255), (255, 0, 255 - t)]
    for v in range(0, 256, 4):  # near-greys: one channel one level off
        lo, hi = max(v - 1, 0), min(v + 1, 255)
        px += [(hi, v, v), (v, hi, v), (v, v, hi), (lo, v, v), (v, lo, v), (v, v, lo)]
    px += [(255, 255, 254), (254, 255, 255), (255, 254, 255), (0, 0, 1), (1, 0, 0), (0, 1, 0), (1, 1, 0)]
    rng = np.random.default_rng(31)
    n = 40 * 56
    rest = rng.integers(0, 256, (n - len(px), 3))
    img = np.concatenate([np.array(px), rest]).astype(np.uint8)
    # Shuffle so that every row mixes kinds of pixel (a row-wise bug would not hide in one place).
    img = img[rng.permutation(n)]
    return img.reshape(40, 56, 3)


def real_looking(h=64, w=90, seed=31):
    """A stretched 'satellite' crop: smooth land cover of low saturation, noise shared by the
    bands (so greys stay grey) plus a little per-band noise, then one 2-98 % stretch for all
    bands, which clips shadows to black and clouds to white."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    lum = 90 + 40 * np.sin(xx / 17) * np.cos(yy / 23) + 0.6 * xx - 0.3 * yy
    tint = np.zeros((h, w, 3))
    tint[:] = (0, 0, 0)  # grey by default: roads, bare rock, haze
    soil = (xx + 2 * yy) % 40 < 14
    tint[soil] = (9, 3, -6)  # bare soil: a little warm
    field = ((xx // 24 + yy // 16) % 3 == 0) & ~soil
    tint[field] = (-7, 8, -5)  # fields: a little green
    water = (xx - 70) ** 2 / 300 + (yy - 45) ** 2 / 120 < 1
    lum[water] = 35 + 4 * np.sin(xx[water] / 3)
    tint[water] = (-2, 0, 3)  # water: dark, slightly blue
    road = np.abs(yy - 0.4 * xx - 10) < 1.5
    lum[road] = 150
    tint[road] = 0
    cloud = np.exp(-((xx - 25) ** 2 + (yy - 15) ** 2) / 120)
    lum = lum + 260 * cloud
    shadow = (xx - 40) ** 2 + (yy - 35) ** 2 < 30
    lum[shadow] = 8
    img = lum[..., None] + tint
    img += rng.normal(0, 4, (h, w, 1))  # noise shared by the bands keeps greys grey
    chroma = rng.normal(0, 1.5, (h, w, 3)) * (rng.random((h, w, 1)) < 0.4)  # some pixels only
    img += chroma
    lo, hi = np.percentile(img, [2, 98])
    img = (img - lo) / (hi - lo) * 255
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def f32(x):
    """`x` rounded to float32, as a Python float (what a TOML `f32` limit will hold)."""
    return float(np.float32(x))


def hsv_cases():
    cases = {f"HueSaturationValue_{h}_{s}_{v}": (h, s, v)
             for h, s, v in [(10, 15, -10), (0, 15, 0), (10, 0, 0), (0, 0, -10),
                             (0, 0, 0), (-20, -30, 20), (20, 30, -20), (-0.5, -0.5, 0.75)]}
    # Random shifts within the default limits (20, 30, 20): fractional, either sign.
    rng = np.random.default_rng(310)
    for k in range(6):
        cases[f"HueSaturationValue_random{k}"] = (f32(rng.uniform(-20, 20)), f32(rng.uniform(-30, 30)),
                                                  f32(rng.uniform(-20, 20)))
    return {name: (A.HueSaturationValue(hue_shift_limit=(h, h), sat_shift_limit=(s, s),
                                        val_shift_limit=(v, v), p=1), [h, s, v])
            for name, (h, s, v) in cases.items()}


def gamma_cases():
    rng = np.random.default_rng(311)
    gammas = {f"RandomGamma_{g}": g for g in (80, 120, 150, 100)}
    gammas |= {f"RandomGamma_random{k}": f32(rng.uniform(80, 120)) for k in range(4)}
    return {name: (A.RandomGamma(gamma_limit=(g, g), p=1), [g]) for name, g in gammas.items()}


def brightness_contrast_cases():
    rng = np.random.default_rng(312)
    pairs = {f"{b}_{c}": (b, c) for b, c in [(0.2, 0.1), (-0.2, 0.2), (0.1, -0.2), (-0.2, -0.2)]}
    pairs |= {f"random{k}": (f32(rng.uniform(-0.2, 0.2)), f32(rng.uniform(-0.2, 0.2))) for k in range(4)}
    cases = {}
    for by_max in (True, False):
        for label, (b, c) in pairs.items():
            name = f"RandomBrightnessContrast_{label}" + ("" if by_max else "_by_mean")
            cases[name] = (A.RandomBrightnessContrast(brightness_limit=(b, b), contrast_limit=(c, c),
                                                      brightness_by_max=by_max, p=1), [b, c, float(by_max)])
    return cases


def normalize_cases():
    t = A.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), max_pixel_value=255.0, p=1)
    return {"Normalize_imagenet": (t, [0.485, 0.456, 0.406, 0.229, 0.224, 0.225, 255.0])}


def cube_digests(img):
    """Digest of an output over the 4096 x 4096 image of all 2^24 colours (pixel `i` is
    `(i >> 16, (i >> 8) & 255, i & 255)`): one u64 per red level `r` (its 16 rows), the
    wrapping sum of `byte_j * (2 j + 1)` over the plane's bytes `j`, stored as int64 bits."""
    planes = img.reshape(256, -1).astype(np.uint64)
    weights = np.arange(planes.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    return (planes * weights).sum(axis=1, dtype=np.uint64).view(np.int64)


def all_colours(width):
    i = np.arange(1 << 24, dtype=np.uint32)
    return np.stack([i >> 16, (i >> 8) & 255, i & 255], -1).astype(np.uint8).reshape(-1, width, 3)


def simd_pixels(width=56):
    """How many pixels of a row of `width` OpenCV's u8 HSV -> RGB converts on its SIMD path
    here: a colour whose truncated (SIMD) and rounded (scalar) conversions differ, repeated.
    56 pixels are one block and a tail of 24 on AVX2, three blocks and a tail of 8 on SSE or
    NEON (16-pixel blocks), all tail on AVX-512 (64-pixel blocks)."""
    hsv = cv2.cvtColor(np.full((1, width, 3), (65, 60, 52), np.uint8), cv2.COLOR_RGB2HSV)
    hsv[..., 2] -= 10
    g = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, :, 1]  # 50 truncated, 51 rounded
    return int((g == 50).sum())


def require_avx2():
    """Stop unless OpenCV converts HSV in AVX2's 32-pixel blocks, which the references pin."""
    if simd_pixels() != 32:
        raise SystemExit(f"OpenCV converts {simd_pixels()} of 56 pixels on its SIMD path here, not the 32 of "
                         "AVX2: run on an AVX2 CPU, or set OPENCV_CPU_DISABLE so that OpenCV dispatches AVX2")


def main():
    require_avx2()
    inputs = {"extremes": extremes(), "real": real_looking()}
    tensors = {f"{k}.image": v for k, v in inputs.items()}
    cubes = {"wide": all_colours(4096), "narrow": all_colours(8)}
    manifest = {}
    for group in (hsv_cases(), gamma_cases(), brightness_contrast_cases(), normalize_cases()):
        for name, (t, params) in group.items():
            for key, img in inputs.items():
                r = A.Compose([t], seed=0)(image=img)
                tensors[f"{name}.{key}"] = np.ascontiguousarray(r["image"])
            tensors[f"{name}.params"] = np.array(params, dtype=np.float32)
            if isinstance(t, A.HueSaturationValue):
                for key, cube in cubes.items():
                    tensors[f"{name}.cube_{key}"] = cube_digests(A.Compose([t], seed=0)(image=cube)["image"])
            manifest[name] = {"transform": repr(t), "params": params}
    stats = {}
    for key, img in inputs.items():
        flat = img.reshape(-1, 3).astype(int)
        grey = (flat[:, 0] == flat[:, 1]) & (flat[:, 1] == flat[:, 2])
        spread = flat.max(1) - flat.min(1)
        stats[key] = {"shape": list(img.shape), "grey_pixels": int(grey.sum()),
                      "near_grey_pixels (max - min <= 3)": int((spread <= 3).sum()),
                      "black": int((flat.max(1) == 0).sum()), "white": int((flat.min(1) == 255).sum())}
    save_file(tensors, os.path.join(HERE, "albumentations-colour.safetensors"))
    with open(os.path.join(HERE, "albumentations-colour.json"), "w") as f:
        json.dump({"albumentations": A.__version__, "opencv": cv2.__version__, "numpy": np.__version__,
                   "opencv_hsv2rgb_simd_block": 32, "inputs": stats, "cases": manifest}, f, indent=1)


if __name__ == "__main__":
    main()
