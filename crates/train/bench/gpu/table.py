"""The one table of segfit's GPU benchmark, from what run.sh left in OUT (standard library only).

usage: python table.py OUT --gpu cuda|wgpu --build BUILD.txt --loop "tiles=… size=… …"
                       --scene N --tile N --overlap N --warmup N --steps N
Prints markdown for crates/train/BENCH-gpu.md and writes OUT/results.json (the same figures)."""
import argparse
import glob
import json
import os

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--gpu", default="cuda")
p.add_argument("--build")
p.add_argument("--loop", default="")
p.add_argument("--scene", type=int)
p.add_argument("--tile", type=int)
p.add_argument("--overlap", type=int)
p.add_argument("--warmup", type=int)
p.add_argument("--steps", type=int)
a = p.parse_args()
out = a.out
MIB = 2.0 ** 20


def read(name):
    path = os.path.join(out, name)
    return open(path).read() if os.path.exists(path) else ""


runs = {}
for line in read("runs.jsonl").splitlines():
    try:
        r = json.loads(line)
    except ValueError:
        continue
    runs[r["name"]] = r
python = json.loads(read("python.json") or "{}")


def smi_peak(name):
    """The largest memory.used nvidia-smi sampled while run NAME ran, in MiB."""
    values = []
    for line in read(name + ".smi").splitlines():
        try:
            values.append(float(line.strip()))
        except ValueError:
            pass
    return max(values) if values else None


def last_json(name):
    for line in reversed(read(name + ".out").splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def why_failed(name):
    r = runs.get(name)
    if r is None:
        return "not run"
    if r.get("skipped"):
        return "skipped: " + r["skipped"]
    if r.get("stopped"):
        return "stopped after %.0f s, %s (see %s.err)" % (r["wall_s"], r["stopped"], name)
    lines = [l.strip() for l in read(name + ".err").splitlines() if l.strip()]
    tail = lines[-1] if lines else ""
    return "failed (exit %s: %s; see %s.err)" % (r["rc"], tail[:160], name)


def fmt(v, digits=0):
    return "-" if v is None else ("%.*f" % (digits, v))


rows = []  # (part, case, implementation, seconds, memory, result)
results = {"rows": []}


def add(part, case, impl, seconds, memory, result, **extra):
    rows.append((part, case, impl, seconds, memory, result))
    results["rows"].append(dict(part=part, case=case, implementation=impl, seconds=seconds,
                                memory=memory, result=result, **extra))


# (a) training steps
names = sorted({n.split("-", 2)[2] for n in runs if n.startswith("steps-")},
               key=lambda c: (-int(c.split(":")[0]), c))
for case in names:
    size, batch, prec = case.split(":")[:3]
    label = "%s² b%s %s" % (size, batch, prec)
    for dev, impl in (("cuda", "segfit burn-cuda"), ("wgpu", "segfit burn-wgpu")):
        name = "steps-%s-%s" % (dev, case)
        if name not in runs:
            continue
        path = os.path.join(out, name + ".json")
        m = json.load(open(path))[0] if runs[name]["rc"] == 0 and os.path.exists(path) else None
        if m is None:
            err = read(name + ".err")
            reason = ("no bf16 on wgpu (WGSL has none)" if "no bf16" in err else why_failed(name))
            add("(a) step", label, impl, "-", "-", reason)
            continue
        peak = smi_peak(name)
        add("(a) step", label, impl,
            "%.4f (median of %s)" % (m["step_s"], m.get("steps") or 1),
            "pool %s reserved, %s in use; card %s" % (
                fmt(m["device_reserved"] / MIB), fmt(m["device_in_use"] / MIB), fmt(peak)),
            "planner %s" % fmt(m["predicted_peak"] / MIB) if m.get("predicted_peak") else "",
            raw=m, card_peak_mib=peak)
    name = "steps-torch-" + case
    if name in runs:
        t = last_json(name)
        if runs[name]["rc"] == 0 and t and "median_s" in t:
            peak = smi_peak(name)
            add("(a) step", label, "PyTorch + transformers",
                "%.4f (median of 10)" % t["median_s"],
                "max reserved %s, allocated %s; card %s" % (
                    fmt(t["reserved"] / MIB), fmt(t["allocated"] / MIB), fmt(peak)),
                "", raw=t, card_peak_mib=peak)
        else:
            add("(a) step", label, "PyTorch + transformers", "-", "-", why_failed(name))
    elif python.get("torch_steps"):
        add("(a) step", label, "PyTorch + transformers", "-", "-",
            "skipped: " + python["torch_steps"])

# (b) the whole training loop
loop = dict(kv.split("=") for kv in a.loop.split()) if a.loop else {}
loop_case = "%s² 4-band, %s tiles, %s %s b%s" % (
    loop.get("size"), loop.get("tiles"), loop.get("epochs"),
    "epoch" if loop.get("epochs") == "1" else "epochs", loop.get("batch"))
if "train-segfit" in runs:
    r = runs["train-segfit"]
    best = None
    for line in read("run-segfit/metrics.jsonl").splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("kind") == "epoch":
            miou = (v.get("metrics") or {}).get("miou")
            if miou is not None:
                best = miou if best is None else max(best, miou)
    if r["rc"] == 0:
        add("(b) train", loop_case, "segfit train --device " + a.gpu, "%.1f wall" % r["wall_s"],
            "card %s" % fmt(smi_peak("train-segfit")), "best val mIoU %s" % fmt(best, 4),
            wall_s=r["wall_s"], best_miou=best, card_peak_mib=smi_peak("train-segfit"))
    else:
        add("(b) train", loop_case, "segfit train --device " + a.gpu, "-", "-",
            why_failed("train-segfit"))
    if "train-torch" in runs:
        t = last_json("train-torch")
        r = runs["train-torch"]
        if r["rc"] == 0 and t:
            add("(b) train", loop_case, "torch_loop.py", "%.1f wall" % r["wall_s"],
                "card %s (max reserved %s)" % (fmt(smi_peak("train-torch")),
                                               t.get("max_reserved_mib")),
                "best val mIoU %s" % fmt(t.get("best_miou"), 4),
                wall_s=r["wall_s"], raw=t, card_peak_mib=smi_peak("train-torch"))
        else:
            add("(b) train", loop_case, "torch_loop.py", "-", "-", why_failed("train-torch"))
    elif python.get("torch_loop"):
        add("(b) train", loop_case, "torch_loop.py", "-", "-", "skipped: " + python["torch_loop"])

# (c) whole-scene prediction
scene = "%s² 4-band scene, window %s overlap %s" % (a.scene, a.tile, a.overlap)
gpu_run = "predict-" + a.gpu
if gpu_run in runs:
    agree = last_json("agreement") if runs.get("agreement", {}).get("rc") == 0 else None
    cpu = runs.get("predict-cpu")
    for name, impl in ((gpu_run, "segfit predict --device " + a.gpu),
                       ("predict-cpu", "segfit predict --device cpu")):
        r = runs.get(name)
        if r is None or r["rc"] != 0:
            add("(c) predict", scene, impl, "-", "-", why_failed(name))
            continue
        if name == gpu_run:
            result = ("%s of %s pixels (%.4f %%) agree with --device cpu" % (
                agree["same"], agree["pixels"], agree["agree_percent"]) if agree
                else "agreement " + why_failed("agreement"))
        else:
            result = "the reference"
        add("(c) predict", scene, impl, "%.1f wall" % r["wall_s"],
            "card %s" % fmt(smi_peak(name)) if name == gpu_run else "-", result,
            wall_s=r["wall_s"], agreement=agree if name == gpu_run else None)

print("segfit GPU benchmark (`cargo xtask bench gpu`)")
if a.build and os.path.exists(a.build):
    for line in open(a.build).read().strip().splitlines():
        print("- " + line)
gpu_csv = read("gpu.csv").strip().splitlines()
if len(gpu_csv) > 1:
    print("- card: " + "; ".join(gpu_csv[1:]) + " (" + gpu_csv[0] + ")")
else:
    print("- card: none (nvidia-smi absent): no card memory sampled")
if a.steps:
    print("- (a): %s warm-up and %s measured steps per case, each case in its own process; "
          "segfit's pool figures are CubeCL's after the steps; card = peak memory.used (MiB) "
          "sampled every 100 ms while that process ran" % (a.warmup, a.steps))
print()
print("| part | case | implementation | seconds | memory (MiB) | result |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
results["build"] = open(a.build).read() if a.build and os.path.exists(a.build) else ""
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
