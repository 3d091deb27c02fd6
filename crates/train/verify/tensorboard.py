"""Load a segfit run's TensorBoard log (RUN/tb) with TensorBoard's own reader and check it
against the run's metrics.jsonl.

Uses tensorboard.backend.event_processing.event_accumulator.EventAccumulator (what
`tensorboard --logdir` uses without its Rust data server): lists every scalar tag with its
number of points, steps and last value, the images with their size, and checks that each
step and epoch scalar of metrics.jsonl (per-class IoU aside) is in the log at its step with the same value (as float32), and no
step appears twice. Exits 1 on a mismatch.

Usage: python tensorboard.py RUN_DIR
"""
import json
import math
import struct
import sys
from pathlib import Path

# This file is named tensorboard.py: its directory, first on sys.path, would shadow the package.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from tensorboard.backend.event_processing import event_accumulator as ea

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def expected(run):
    """(tag, step) -> value that metrics.jsonl says the log holds."""
    want = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        v = json.loads(line)
        step = v["step"]
        if v["kind"] == "step":
            want[("train/loss", step)] = v["loss"]
            want[("lr", step)] = v["lr"]
            want[("train/images_per_s", step)] = v["images_per_s"]
            want[("train/step_seconds", step)] = v["step_seconds"]
            if "host_rss_mib" in v:
                want[("memory/host_rss_mib", step)] = v["host_rss_mib"]
        else:
            want[("train/epoch_loss", step)] = v["train_loss"]
            want[("val/loss", step)] = v["val_loss"]
            want[("val/miou", step)] = v["metrics"]["miou"]
            want[("val/pixel_accuracy", step)] = v["metrics"]["pixel_accuracy"]
    return want


def main():
    run = Path(sys.argv[1])
    acc = ea.EventAccumulator(str(run / "tb"), size_guidance={ea.SCALARS: 0, ea.IMAGES: 0})
    acc.Reload()
    tags = acc.Tags()
    files = sorted(p.name for p in (run / "tb").iterdir())
    print(f"run {run.name}: {len(files)} event file(s) in tb/")
    for f in files:
        print(f"  {f}")
    print(f"{'scalar tag':<28} {'points':>6} {'first':>6} {'last':>6} {'last value':>12}")
    bad = 0
    for tag in sorted(tags["scalars"]):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if len(set(steps)) != len(steps) or steps != sorted(steps):
            print(f"MISMATCH {tag}: steps not increasing once each: {steps}")
            bad += 1
        print(f"{tag:<28} {len(events):>6} {steps[0]:>6} {steps[-1]:>6} {events[-1].value:>12.6g}")
    for tag in sorted(tags["images"]):
        for im in acc.Images(tag):
            png = im.encoded_image_string
            is_png = png[:8] == PNG_SIGNATURE
            print(f"image {tag} step {im.step}: {im.width}x{im.height}, {len(png)} bytes, "
                  f"PNG signature {is_png}")
            bad += not is_png
    got = {(tag, e.step): e.value for tag in tags["scalars"] for e in acc.Scalars(tag)}
    want = expected(run)
    # One learning rate, or one per parameter group (the encoder's is the base rate).
    lr = "train/lr" if "train/lr" in tags["scalars"] else "train/lr/encoder"
    want = {((lr if t == "lr" else t), s): v for (t, s), v in want.items()}
    checked = 0
    for (tag, step), value in want.items():
        if (tag, step) not in got:
            print(f"MISMATCH {tag} step {step}: in metrics.jsonl, not in tb/")
            bad += 1
            continue
        v = got[(tag, step)]
        same = (value is None and math.isnan(v)) or (value is not None and f32(value) == v)
        if not same:
            print(f"MISMATCH {tag} step {step}: metrics.jsonl {value}, tb/ {v}")
            bad += 1
        checked += 1
    print(f"{checked} values of metrics.jsonl found in tb/ at their steps, {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
