#!/usr/bin/env bash
# segfit's GPU benchmark, run on the GPU machine from the archive `cargo xtask bench gpu` packs
# (release binaries built with `--features cuda,wgpu` for CUDA 13.0, these scripts, no Rust
# needed there). Prints one markdown table for crates/train/BENCH-gpu.md:
#   (a) one MiT-B0 training step (forward, loss, backward, AdamW) at 1024² b2 and 512² b8, f32
#       and bf16, on burn-cuda and burn-wgpu (`bench_memory`: median of --steps after --warmup,
#       CubeCL's pool after the steps) beside PyTorch + transformers (torch_steps.py: median of 10
#       after 3, max_memory_reserved / allocated);
#   (b) a whole `segfit train --device cuda` on a prepared 512² 4-band set against torch_loop.py
#       on the same data and settings: wall time, best val mIoU;
#   (c) `segfit predict --device cuda` on a 3000² 4-band scene: its time, and the share of pixels
#       of the class map that agree with `--device cpu`'s.
# Every row also gets the card's peak memory.used, sampled with nvidia-smi every 100 ms while
# that process ran (the card's idle figure is printed above the table).
#
# usage: bash run.sh [--python PY] [--out DIR] [--parts abc] [--budget S] [--smoke]
#   --python PY  the Python with torch + transformers (default python3; torch_loop.py also needs
#                numpy, tifffile and pillow); its rows say why when it lacks them
#   --out DIR    where data, runs, logs and results go (default ./out beside this script)
#   --parts abc  which of (a), (b), (c) to run (default all three)
#   --budget S   stop after S seconds in all: the process running then is stopped (`timeout`),
#                the ones after it are skipped, and the table says which; for a machine lent
#                for a fixed time. A TERM or INT to this script also ends it with the table.
#   --smoke      the same flow at toy sizes on --device wgpu, for a machine without a GPU
#                (lavapipe): what `cargo xtask bench gpu --smoke` runs
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
python=python3
out=$here/out
parts=abc
budget=""
smoke=0
while [ $# -gt 0 ]; do
  case $1 in
    --python) python=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    *) echo "run.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ $smoke = 1 ]; then
  gpu=wgpu
  step_devices=(wgpu)
  cases=(64:2:f32:full:2)
  warmup=1 steps=2
  tiles=10 size=64 epochs=1 batch=2 workers=2
  scene=192 tile=128 overlap=32
else
  gpu=cuda
  step_devices=(cuda wgpu)
  cases=(1024:2:f32:full:2 1024:2:bf16:full:2 512:8:f32:full:2 512:8:bf16:full:2)
  warmup=3 steps=5
  tiles=400 size=512 epochs=3 batch=8 workers=8
  scene=3000 tile=512 overlap=128
fi
export SEGFIT_AUTOTUNE_CACHE=$out/autotune

# The table of what has run (also written when a signal ends this script).
table() {
  "$python" "$here/table.py" "$out" --gpu "$gpu" --build "$here/BUILD.txt" \
    --loop "tiles=$tiles size=$size epochs=$epochs batch=$batch workers=$workers" \
    --scene "$scene" --tile "$tile" --overlap "$overlap" --warmup "$warmup" --steps "$steps" \
    | tee "$out/table.md"
}
: > "$out/runs.jsonl"

have_smi=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  have_smi=1
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv \
    > "$out/gpu.csv" 2>&1
fi

sampler=""
sample_start() {
  : > "$1"
  if [ $have_smi = 1 ]; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 \
      > "$1" 2>/dev/null &
    sampler=$!
  fi
}
sample_stop() {
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    sampler=""
  fi
}

# Seconds since START (a `date +%s.%N`), to the millisecond.
since() {
  awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'
}

# A TERM or INT (a lent machine's time running out) stops the process running, records it,
# and prints the table of what ran.
child="" current="" started=""
on_signal() {
  trap - TERM INT
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null
    wait "$child" 2>/dev/null
    echo "{\"name\": \"$current\", \"rc\": null, \"wall_s\": $(since "$started"), \"stopped\": \"by a signal to run.sh\"}" \
      >> "$out/runs.jsonl"
  fi
  sample_stop
  echo "== stopped by a signal; the table of what ran:" >&2
  table
  exit 143
}
trap on_signal TERM INT

# timed NAME CMD…: runs CMD with its output in $out/NAME.out and .err, the card sampled into
# $out/NAME.smi, and one JSON line (exit status, wall seconds) appended to runs.jsonl. Under
# --budget, CMD gets what is left of it (`timeout`), and is skipped when nothing is.
timed() {
  local name=$1
  shift
  if [ -n "$budget" ] && [ $((budget - SECONDS)) -le 0 ]; then
    echo "== $name: skipped, the budget of $budget s is spent" >&2
    echo "{\"name\": \"$name\", \"rc\": null, \"wall_s\": 0, \"skipped\": \"the budget of $budget s was spent\"}" \
      >> "$out/runs.jsonl"
    return 1
  fi
  echo "== $name: $*" >&2
  # The leader of a process group of its own, so that its children (bench_memory runs one per
  # case) stop with it: timeout leads one, and stops all of it when the budget runs out.
  if [ -n "$budget" ]; then
    set -- timeout --kill-after=10 "$((budget - SECONDS))" "$@"
  else
    set -- setsid "$@"
  fi
  sample_start "$out/$name.smi"
  local rc wall stopped=""
  started=$(date +%s.%N)
  # In the background and waited for, so that a TERM to this script is handled at once.
  "$@" > "$out/$name.out" 2> "$out/$name.err" &
  child=$! current=$name
  wait "$child"
  rc=$?
  child=""
  wall=$(since "$started")
  sample_stop
  if [ -n "$budget" ] && { [ $rc = 124 ] || [ $rc = 137 ]; }; then
    stopped=", \"stopped\": \"at the end of the budget of $budget s\""
  fi
  echo "{\"name\": \"$name\", \"rc\": $rc, \"wall_s\": $wall$stopped}" >> "$out/runs.jsonl"
  if [ $rc != 0 ]; then
    echo "   failed ($rc): $(tail -n 3 "$out/$name.err" | tr '\n' ' ')" >&2
  fi
  return $rc
}

# Why `$python` cannot run a PyTorch row (empty when it can).
torch_missing() {
  local modules=$1
  if ! command -v "$python" >/dev/null; then
    echo "no $python"
    return
  fi
  "$python" - "$modules" <<'PY' 2>&1 | tail -n 1
import importlib, sys
missing = []
for m in sys.argv[1].split(","):
    try:
        importlib.import_module(m)
    except Exception:
        missing.append(m)
if missing:
    print("%s lacks %s" % (sys.executable, ", ".join(missing)))
else:
    import torch
    if not torch.cuda.is_available():
        print("torch %s sees no CUDA device" % torch.__version__)
PY
}
echo "{\"torch_steps\": \"$(torch_missing torch,transformers)\", \
\"torch_loop\": \"$(torch_missing torch,transformers,numpy,tifffile,PIL)\"}" > "$out/python.json"

if [[ $parts == *a* ]]; then
  for case in "${cases[@]}"; do
    for dev in "${step_devices[@]}"; do
      timed "steps-$dev-$case" "$bin/bench_memory" "--$dev" --warmup "$warmup" --steps "$steps" \
        --autotune-cache "$out/autotune" --json "$out/steps-$dev-$case.json" "$case"
    done
    if [ -z "$(torch_missing torch,transformers)" ]; then
      timed "steps-torch-$case" "$python" "$here/torch_steps.py" "$case"
    fi
  done
fi

if [[ $parts == *b* || $parts == *c* ]]; then
  if [ ! -f "$out/data/dataset.json" ]; then
    timed prepare "$bin/segfit" prepare --synthetic --multispectral --count "$tiles" \
      --size "$size" --out "$out/data"
  fi
  # torch_loop.py's settings: MiT-B0 from scratch, per-band dataset normalisation, flips and
  # rot90 at p = 0.5, AdamW lr 6e-4 with weight decay 0.01, poly (power 1) without warm-up,
  # val mIoU every epoch, a checkpoint every epoch.
  cat > "$out/loop.toml" <<EOF
[model]
preset = "mit-b0"

[data]
root = "$out/data"
size = [$size, $size]
normalize = "dataset"

[[augment.transforms]]
name = "HorizontalFlip"
p = 0.5

[[augment.transforms]]
name = "VerticalFlip"
p = 0.5

[[augment.transforms]]
name = "RandomRotate90"
p = 0.5

[optimizer]
lr = 6e-4
weight_decay = 0.01

[schedule]
kind = "poly"
power = 1.0
warmup_steps = 0

[train]
epochs = $epochs
batch_size = $batch
workers = $workers
eval_every = 1
progress = false
EOF
fi

if [[ $parts == *b* ]]; then
  rm -rf "$out/run-segfit" "$out/run-torch"
  timed train-segfit "$bin/segfit" train --config "$out/loop.toml" --device "$gpu" \
    --output "$out/run-segfit"
  if [ -z "$(torch_missing torch,transformers,numpy,tifffile,PIL)" ]; then
    timed train-torch "$python" "$here/torch_loop.py" "$out/data" "$out/run-torch" \
      --epochs "$epochs" --batch "$batch" --workers "$workers"
  fi
fi

if [[ $parts == *c* ]]; then
  if [ ! -f "$out/run-segfit/checkpoints/best/model.safetensors" ] \
    && [ ! -f "$out/run-segfit/checkpoints/last/model.safetensors" ]; then
    # (c) needs a model: a short run when (b) was left out.
    timed train-for-predict "$bin/segfit" train --config "$out/loop.toml" --device "$gpu" \
      --set train.max_steps=8 --output "$out/run-segfit"
  fi
  [ -f "$out/scene.tif" ] || timed scene "$bin/make_scene" "$scene" "$out/scene.tif"
  rm -rf "$out/predict-$gpu" "$out/predict-cpu"
  timed "predict-$gpu" "$bin/segfit" predict --model "$out/run-segfit" --input "$out/scene.tif" \
    --output "$out/predict-$gpu" --device "$gpu" --tile "$tile" --overlap "$overlap"
  timed predict-cpu "$bin/segfit" predict --model "$out/run-segfit" --input "$out/scene.tif" \
    --output "$out/predict-cpu" --device cpu --tile "$tile" --overlap "$overlap"
  timed agreement "$bin/xtask" class-agreement "$out/predict-$gpu/scene.tif" \
    "$out/predict-cpu/scene.tif"
fi

table
