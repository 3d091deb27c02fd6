"""PyTorch + transformers sliding-window prediction, the reference for `cargo xtask bench predict`.

    python pytorch_predict.py HF_DIR SCENE.tif OUT.npy [--tile 512] [--overlap 128]
        [--batch 4] [--threads 2]

Does what `segfit predict` does, the way a typical PyTorch script would:

- loads `SegformerForSemanticSegmentation.from_pretrained(HF_DIR)` (eval mode,
  `torch.inference_mode`, `--threads` intra-op threads);
- reads the whole scene into memory with `tifffile` (pip install tifffile numpy; page 0 of a
  [H, W, C] or [C, H, W] GeoTIFF, any integer or float type) and keeps it whole: no streaming;
- preprocesses each window with the HF directory's preprocessor_config.json,
  `((x * rescale_factor) - image_mean) / image_std` (each step only where `do_rescale` /
  `do_normalize` ask for it; never resized, as segfit's windows are not);
- slides segfit's windows: origins every `tile - overlap` pixels along each axis, the last one
  flush with the end (crates/infer/src/window.rs `origins`), the window clipped to the image
  where the image is smaller; `--batch` windows run at once;
- upsamples each window's logits bilinearly (`align_corners=False`) to the window, weights them
  by the 2-D Hann window `hann(y) * hann(x)`, `hann(i) = sin^2(pi (i + 1/2) / n)`, accumulates
  them in a full-size float32 `[classes, H, W]` sum, divides by the accumulated weight and takes
  the argmax;
- writes the class map as a uint8 `[H, W]` .npy (no georeferencing) and prints one JSON line:
  `{"seconds", "megapixels_per_s", "peak_rss_mib", "height", "width", "windows"}`, where
  seconds is the whole run after the imports (model load, read, inference, write) and the peak
  RSS is `resource.getrusage(RUSAGE_SELF).ru_maxrss`.
"""

import argparse
import json
import math
import resource
import time

import numpy as np
import tifffile
import torch
import torch.nn.functional as F
from transformers import SegformerForSemanticSegmentation


def origins(length, tile, overlap):
    """segfit's window origins along one axis (crates/infer/src/window.rs `origins`)."""
    tile = min(tile, length)
    stride = max(tile - overlap, 1)
    out, p = [], 0
    while p + tile < length:
        out.append(p)
        p += stride
    out.append(length - tile)
    return out


def hann(n):
    i = np.arange(n, dtype=np.float64)
    return (np.sin(math.pi * (i + 0.5) / n) ** 2).astype(np.float32)


def read_scene(path, channels):
    """The scene as an [H, W, C] array of its own dtype."""
    image = tifffile.imread(path, key=0)
    if image.ndim == 2:
        image = image[:, :, None]
    if image.shape[-1] != channels and image.shape[0] == channels:
        image = np.moveaxis(image, 0, -1)
    if image.shape[-1] != channels:
        raise SystemExit(f"{path}: shape {image.shape}, the model wants {channels} bands")
    return image


def preprocessor(hf_dir, channels):
    """A function from an [H, W, C] window to a float32 [C, H, W] tensor, per the HF config."""
    with open(f"{hf_dir}/preprocessor_config.json") as f:
        cfg = json.load(f)
    scale = float(cfg.get("rescale_factor", 1 / 255)) if cfg.get("do_rescale", True) else 1.0
    if cfg.get("do_normalize", True):
        mean = np.asarray(cfg["image_mean"], dtype=np.float32).reshape(-1)
        std = np.asarray(cfg["image_std"], dtype=np.float32).reshape(-1)
    else:
        mean, std = np.zeros(channels, np.float32), np.ones(channels, np.float32)
    if mean.size == 1:
        mean, std = np.repeat(mean, channels), np.repeat(std, channels)
    scale = np.float32(scale)

    def run(window):
        x = (window.astype(np.float32) * scale - mean) / std
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))

    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("scene")
    ap.add_argument("out", help="class map, uint8 [H, W] .npy")
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--overlap", type=int, default=None, help="default: tile // 4 (segfit's)")
    ap.add_argument("--batch", type=int, default=4, help="windows per forward (segfit's default)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    overlap = args.tile // 4 if args.overlap is None else args.overlap

    t0 = time.perf_counter()
    torch.set_num_threads(args.threads)
    model = SegformerForSemanticSegmentation.from_pretrained(args.hf_dir).eval()
    channels = model.config.num_channels
    classes = model.config.num_labels
    prep = preprocessor(args.hf_dir, channels)
    image = read_scene(args.scene, channels)
    h, w = image.shape[:2]

    th, tw = min(args.tile, h), min(args.tile, w)
    weight = torch.from_numpy(np.outer(hann(th), hann(tw)))  # [th, tw]
    logit_sum = torch.zeros(classes, h, w)
    weight_sum = torch.zeros(h, w)
    spots = [(y, x) for y in origins(h, th, overlap) for x in origins(w, tw, overlap)]
    with torch.inference_mode():
        for i in range(0, len(spots), args.batch):
            batch = spots[i : i + args.batch]
            pixels = torch.stack([prep(image[y : y + th, x : x + tw]) for y, x in batch])
            logits = model(pixel_values=pixels).logits  # [B, classes, th/4, tw/4]
            logits = F.interpolate(logits, size=(th, tw), mode="bilinear", align_corners=False)
            for (y, x), win in zip(batch, logits):
                logit_sum[:, y : y + th, x : x + tw] += win * weight
                weight_sum[y : y + th, x : x + tw] += weight
        classes_map = (logit_sum / weight_sum).argmax(dim=0).to(torch.uint8).numpy()
    np.save(args.out, classes_map)
    seconds = time.perf_counter() - t0
    # ru_maxrss is in KiB on Linux.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": round(seconds, 3),
                "megapixels_per_s": round(h * w / 1e6 / seconds, 4),
                "peak_rss_mib": round(peak, 1),
                "height": h,
                "width": w,
                "windows": len(spots),
            }
        )
    )


if __name__ == "__main__":
    main()
