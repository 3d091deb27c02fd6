"""Extra albumentations 2.0.8 references for transforms the shared fixtures do not cover.

Writes `albumentations-extra.safetensors` and `albumentations-extra.json` beside this file.
Run with albumentations==2.0.8, opencv-python-headless, numpy and safetensors from PyPI:
    python make_albumentations_extra.py
Each case is one transform with fixed parameters (p = 1) applied to `input.image` / `input.mask`.
"""
import json
import os

# Before OpenCV loads (it pins OpenCV's HSV -> RGB to AVX2's 32-pixel SIMD blocks; see there).
from make_albumentations_colour import require_avx2

import albumentations as A
import cv2
import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
BORDER = dict(border_mode=cv2.BORDER_CONSTANT, fill=0, fill_mask=255)


def synthetic(h=40, w=50, seed=1):
    """A smooth RGB gradient with noise (so interpolation errors show) and a blocky 3-class mask."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 5, yy * 6, (xx + yy) * 3], -1).clip(0, 255)
    img = np.clip(img + rng.integers(-10, 10, img.shape), 0, 255).astype(np.uint8)
    mask = ((xx // 7 + yy // 5) % 3).astype(np.uint8)
    return img, mask


CASES = {
    "Rotate_30": A.Rotate(limit=(30, 30), p=1, **BORDER),
    "Affine_s1.2_r15_t0.1": A.Affine(scale=(1.2, 1.2), rotate=(15, 15), translate_percent=(0.1, 0.1), p=1, **BORDER),
    "Affine_t0.05": A.Affine(translate_percent=(0.05, 0.05), p=1, **BORDER),
    "ShiftScaleRotate_0.05_0.1_20": A.ShiftScaleRotate(shift_limit=(0.05, 0.05), scale_limit=(0.1, 0.1),
                                                       rotate_limit=(20, 20), p=1, **BORDER),
    "RandomGamma_150": A.RandomGamma(gamma_limit=(150, 150), p=1),
    "GaussianBlur_5_s1.2": A.GaussianBlur(blur_limit=(5, 5), sigma_limit=(1.2, 1.2), p=1),
    "Resize_20x25_area": A.Resize(20, 25, interpolation=cv2.INTER_AREA, p=1),
    "Resize_13x17_area": A.Resize(13, 17, interpolation=cv2.INTER_AREA, p=1),
    "Resize_33x71_nearest": A.Resize(33, 71, interpolation=cv2.INTER_NEAREST, p=1),
    "HueSaturationValue_10_20_-15": A.HueSaturationValue(hue_shift_limit=(10, 10), sat_shift_limit=(20, 20),
                                                         val_shift_limit=(-15, -15), p=1),
}


def main():
    require_avx2()
    img, mask = synthetic()
    tensors = {"input.image": img, "input.mask": mask}
    manifest = {}
    for name, t in CASES.items():
        r = A.Compose([t], seed=0)(image=img, mask=mask)
        tensors[f"{name}.image"] = np.ascontiguousarray(r["image"])
        tensors[f"{name}.mask"] = np.ascontiguousarray(r["mask"])
        manifest[name] = repr(t)
    save_file(tensors, os.path.join(HERE, "albumentations-extra.safetensors"))
    with open(os.path.join(HERE, "albumentations-extra.json"), "w") as f:
        json.dump({"albumentations": A.__version__, "opencv": cv2.__version__, "cases": manifest}, f, indent=1)


if __name__ == "__main__":
    main()
