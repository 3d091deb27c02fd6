#!/usr/bin/env bash
# CUDA memory, segfit (burn-cuda) and PyTorch side by side on the same GPU, in one run.
#
# Build here, run there (the GPU machine needs no Rust toolchain):
#   cargo build --release -p train --features cuda --example bench_memory
#   bash crates/train/bench/cuda_memory.sh [PYTHON] [CASE...]
# with target/release/examples/bench_memory carried to the GPU machine. Default cases: the
# issue's targets (MiT-B0, batch 2 at 1024², 2 labels, bf16 and f32) and their neighbours.
# segfit's rows report CubeCL's pool after the measured step (reserved bytes bound the peak
# from above; set them beside PyTorch's max_memory_reserved) next to the planner's prediction.
set -euo pipefail
cd "$(dirname "$0")/../../.."
python=${1:-python3}
shift || true
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(1024:2:bf16:full:2 1024:2:f32:full:2 1024:2:bf16:ckpt:2 512:2:f32:full:2 512:2:f32:full:150)
fi
bin=target/release/examples/bench_memory
out=${OUT:-/tmp}
"$bin" --cuda --json "$out/segfit-cuda-memory.json" "${cases[@]}" | tee "$out/segfit-cuda-memory.txt"
"$python" crates/train/bench/pytorch_cuda_memory.py "${cases[@]}" | tee "$out/pytorch-cuda-memory.jsonl"
"$python" - "$out/segfit-cuda-memory.json" "$out/pytorch-cuda-memory.jsonl" <<'PY'
import json, sys
ours = {"{}:{}:{}:{}:{}".format(m["case"]["size"], m["case"]["batch"], "bf16" if m["case"]["bf16"] else "f32",
        "ckpt" if m["case"]["ckpt"] else "full", m["case"]["labels"]): m for m in json.load(open(sys.argv[1]))}
theirs = {r["case"]: r for r in map(json.loads, open(sys.argv[2])) if "error" not in r}
mib = lambda b: b / 2**20
print("| case | segfit reserved MiB | segfit in use after MiB | PyTorch max reserved MiB | PyTorch max allocated MiB | reserved ratio | segfit step s | PyTorch step s |")
print("|---|---|---|---|---|---|---|---|")
for case, m in ours.items():
    t = theirs.get(case)
    ratio = "%.2f" % (m["device_reserved"] / t["reserved"]) if t else "n/a"
    print("| %s | %.0f | %.0f | %s | %s | %s | %.3f | %s |" % (case, mib(m["device_reserved"]), mib(m["device_in_use"]),
          "%.0f" % mib(t["reserved"]) if t else "n/a", "%.0f" % mib(t["allocated"]) if t else "n/a", ratio,
          m["step_s"], t["step_s"] if t else "n/a"))
PY
