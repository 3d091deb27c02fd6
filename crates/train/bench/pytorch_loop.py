"""The PyTorch side of `cargo xtask bench speed`'s end-to-end case: a plain PyTorch +
HF transformers fine-tuning loop doing the work `segfit train` does on the same prepared
dataset (`segfit prepare --synthetic --multispectral`: 4-band u16 GeoTIFF tiles, PNG masks).

usage: python pytorch_loop.py DATA_DIR OUT_DIR [--epochs N] [--batch B] [--eval-every N]
                              [--lr LR] [--workers N] [--seed S]
needs: torch, transformers, numpy, tifffile, pillow
prints: one JSON line (wall seconds of the loop, optimizer steps, eval passes, best mIoU,
peak RSS of the process).

What it does, as segfit's run does: MiT-B0 from scratch (num_channels = the dataset's bands,
2 labels), per-band normalisation with dataset.json's band statistics, HorizontalFlip,
VerticalFlip and RandomRotate90 at p = 0.5 each, batch B with the last short batch kept,
AdamW (weight decay 0.01) at a poly (power 1) schedule without warm-up, HF's loss
(`labels=`), validation loss and mIoU every `--eval-every` epochs and at the last, and the
checkpoints a careful user keeps: model + optimizer state to `last.pt` every epoch and to
`best.pt` when mIoU improves.
"""
import argparse
import json
import os
import resource
import time

import numpy as np
import tifffile
import torch
from PIL import Image
from transformers import SegformerConfig, SegformerForSemanticSegmentation


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()
    started = time.perf_counter()
    torch.manual_seed(a.seed)
    meta = json.load(open(os.path.join(a.data, "dataset.json")))
    mean = np.array([b["mean"] for b in meta["band_stats"]], np.float32)
    std = np.array([b["std"] for b in meta["band_stats"]], np.float32)
    classes = len(meta["classes"])

    class Tiles(torch.utils.data.Dataset):
        def __init__(self, split, augment):
            d = os.path.join(a.data, "images", split)
            self.names = sorted(os.listdir(d))
            self.split, self.augment = split, augment

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            name = self.names[i]
            x = tifffile.imread(os.path.join(a.data, "images", self.split, name))
            stem = os.path.splitext(name)[0]
            y = np.array(Image.open(os.path.join(a.data, "masks", self.split, stem + ".png")))
            x = (x.astype(np.float32) - mean) / std
            if self.augment:
                rng = np.random.default_rng()
                if rng.random() < 0.5:
                    x, y = x[:, ::-1], y[:, ::-1]
                if rng.random() < 0.5:
                    x, y = x[::-1], y[::-1]
                if rng.random() < 0.5:
                    k = int(rng.integers(0, 4))
                    x, y = np.rot90(x, k), np.rot90(y, k)
            x = torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))
            return x, torch.from_numpy(np.ascontiguousarray(y).astype(np.int64))

    def loader(split, train):
        return torch.utils.data.DataLoader(
            Tiles(split, train), batch_size=a.batch, shuffle=train,
            num_workers=a.workers, persistent_workers=a.workers > 0)

    train_dl, val_dl = loader("train", True), loader("val", False)
    cfg = SegformerConfig(num_labels=classes, num_channels=len(mean))
    model = SegformerForSemanticSegmentation(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    total = a.epochs * len(train_dl)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / total))
    os.makedirs(a.out, exist_ok=True)
    steps, evals, best = 0, 0, -1.0
    for epoch in range(a.epochs):
        model.train()
        for x, y in train_dl:
            opt.zero_grad(set_to_none=True)
            loss = model(pixel_values=x, labels=y).loss
            loss.backward()
            opt.step()
            sched.step()
            steps += 1
        if (epoch + 1) % a.eval_every == 0 or epoch + 1 == a.epochs:
            model.eval()
            conf = torch.zeros(classes, classes, dtype=torch.int64)
            val_loss = 0.0
            with torch.no_grad():
                for x, y in val_dl:
                    out = model(pixel_values=x, labels=y)
                    val_loss += out.loss.item() * len(x)
                    logits = torch.nn.functional.interpolate(
                        out.logits, size=y.shape[-2:], mode="bilinear", align_corners=False)
                    pred = logits.argmax(1)
                    keep = y != 255
                    conf += torch.bincount(y[keep] * classes + pred[keep],
                                           minlength=classes * classes).view(classes, classes)
            inter = conf.diag().double()
            union = conf.sum(0).double() + conf.sum(1).double() - inter
            miou = (inter / union.clamp(min=1)).mean().item()
            evals += 1
        else:
            miou = best
        state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
        if miou > best:
            best = miou
            torch.save(state, os.path.join(a.out, "best.pt"))
        torch.save(state, os.path.join(a.out, "last.pt"))
    wall = time.perf_counter() - started
    print(json.dumps({"impl": "pytorch-hf", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "epochs": a.epochs,
                      "batch": a.batch, "workers": a.workers, "steps": steps,
                      "eval_passes": evals, "wall_s": round(wall, 2),
                      "best_miou": round(best, 4),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
