"""albumentations 2.0.8 side of crates/augment/examples/bench.rs: the original flips/rot90
pipeline (+ Normalize) on 512x512 tiles, one thread. Run:
    OMP_NUM_THREADS=1 python albu_bench.py
"""
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import albumentations as A  # noqa: E402

cv2.setNumThreads(1)
SECS = float(os.environ.get("BENCH_SECS", "2"))


def rate(fn):
    for _ in range(20):
        fn()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < SECS:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def flips():
    return [A.HorizontalFlip(p=0.3), A.VerticalFlip(p=0.3), A.RandomRotate90(p=0.3)]


h = w = 512
idx = np.arange(h * w * 3)
rgb = ((idx * 31) % 251).astype(np.uint8).reshape(h, w, 3)
u16 = ((np.arange(h * w * 4) * 997) % 65536).astype(np.uint16).reshape(h, w, 4)
mask = (np.arange(h * w) % 7).astype(np.uint8).reshape(h, w)

cases = [
    ("rgb u8   flips/rot90 (image+mask)", A.Compose(flips(), seed=0), rgb),
    ("rgb u8   flips/rot90 + Normalize", A.Compose(flips() + [A.Normalize()], seed=0), rgb),
    ("u16 x4   flips/rot90 (image+mask)", A.Compose(flips(), seed=0), u16),
    ("u16 x4   flips/rot90 + Normalize",
     A.Compose(flips() + [A.Normalize(mean=(0.1, 0.2, 0.3, 0.4), std=(0.2,) * 4, max_pixel_value=65535.0)], seed=0), u16),
]
print(f"albumentations {A.__version__} bench: 512x512 tiles, one thread, {SECS:.1f} s per case, tiles/s")
for name, pipe, img in cases:
    print(f"{name:<44} {rate(lambda: pipe(image=img, mask=mask)):>8.0f}")
