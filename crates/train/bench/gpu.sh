#!/usr/bin/env bash
# The GPU benchmark, for the day a GPU is lent: segfit on burn-cuda and on burn-wgpu (Vulkan on
# NVIDIA) against PyTorch + transformers on the same card, MiT-B0 training steps (forward, loss,
# backward, AdamW) at 512² and 1024², batch 2, f32 and bf16: seconds per step, peak memory, and
# the planner's prediction, in one table. A few minutes in all.
#
# Build here, run there (the GPU machine needs no Rust toolchain, only the NVIDIA driver with its
# Vulkan ICD, and a Python with torch + transformers for the PyTorch rows):
#   cargo build --release -p train --features cuda,wgpu --example bench_memory
#   bash crates/train/bench/gpu.sh [PYTHON] [CASE...]
# with target/release/examples/bench_memory (or $BENCH_MEMORY) carried to the GPU machine.
# CASE = SIZE:BATCH:f32|bf16:ckpt|full:LABELS (default: 512 and 1024, batch 2, f32 and bf16).
#
# Memory columns: segfit reports CubeCL's pool after the measured step (bytes reserved bound the
# step's peak from above, the figure to set beside PyTorch's max_memory_reserved; bytes in use
# after the step), PyTorch its max_memory_reserved / max_memory_allocated. burn-wgpu has no
# bf16 arithmetic (WGSL has no bf16 type): its bf16 rows say so instead of running.
set -uo pipefail
cd "$(dirname "$0")/../../.."
python=${1:-python3}
shift || true
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(512:2:f32:full:2 512:2:bf16:full:2 1024:2:f32:full:2 1024:2:bf16:full:2)
fi
bin=${BENCH_MEMORY:-target/release/examples/bench_memory}
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true

"$bin" --cuda --json "$out/segfit-cuda.json" "${cases[@]}" | tee "$out/segfit-cuda.txt"
"$bin" --wgpu --json "$out/segfit-wgpu.json" "${cases[@]}" | tee "$out/segfit-wgpu.txt"
"$python" crates/train/bench/pytorch_cuda_memory.py "${cases[@]}" | tee "$out/pytorch-cuda.jsonl"

"$python" - "$out" "${cases[@]}" <<'PY'
import json, os, sys
out, cases = sys.argv[1], sys.argv[2:]

def spec(c):
    return "{}:{}:{}:{}:{}".format(c["size"], c["batch"], "bf16" if c["bf16"] else "f32",
                                   "ckpt" if c["ckpt"] else "full", c["labels"])

def ours(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return {}
    return {spec(m["case"]): m for m in json.load(open(path))}

cuda, wgpu = ours("segfit-cuda.json"), ours("segfit-wgpu.json")
torch_rows = {}
path = os.path.join(out, "pytorch-cuda.jsonl")
if os.path.exists(path):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "error" not in r:
            torch_rows[r["case"]] = r
mib = lambda b: "%.0f" % (b / 2**20)
print()
print("| case | backend | s/step | peak reserved MiB | allocated / in use MiB |")
print("|---|---|---|---|---|")
for case in cases:
    for name, rows in (("segfit burn-cuda", cuda), ("segfit burn-wgpu (Vulkan)", wgpu)):
        m = rows.get(case)
        if m and m.get("device_reserved") is not None:
            print("| %s | %s | %.3f | %s | %s (after the step) |" % (
                case, name, m["step_s"], mib(m["device_reserved"]), mib(m["device_in_use"])))
        elif "bf16" in case and "wgpu" in name:
            print("| %s | %s | n/a: no bf16 on wgpu | | |" % (case, name))
        else:
            print("| %s | %s | failed (see above) | | |" % (case, name))
    t = torch_rows.get(case)
    if t:
        print("| %s | PyTorch + transformers | %.3f | %s | %s (peak) |" % (
            case, t["step_s"], mib(t["reserved"]), mib(t["allocated"])))
    else:
        print("| %s | PyTorch + transformers | failed (see above) | | |" % case)
PY
