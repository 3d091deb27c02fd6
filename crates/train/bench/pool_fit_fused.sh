#!/usr/bin/env bash
# The planner's CubeCL pool term for segfit's GPU builds (burn-fusion on), fitted on the first
# wgpu adapter (Mesa's lavapipe where there is no GPU): ten MiT-B0 training steps, 64²–256²,
# batch 1/2, 2 and 150 labels, checkpointing off and on, each in its own process (three warm-up
# steps, then two measured), then the least-squares line reserved ≈ scale × live + base over
# them (`bench_memory --fit-pool`). Output: crates/train/bench/pool-fit-fused.txt and .json.
#   crates/train/bench/pool_fit_fused.sh        (PROFILE=dev by default: the test build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
profile=${PROFILE:-dev}
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cargo build --profile "$profile" -p train --features wgpu --example bench_memory
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
out=crates/train/bench/pool-fit-fused
{
  echo "# crates/train/bench/pool_fit_fused.sh ($profile build) at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  target/$dir/examples/bench_memory --wgpu --warmup 3 --steps 2 --autotune-cache "$cache" \
    --fit-pool --json "$out.json" \
    64:1:f32:full:2 64:2:f32:full:2 128:1:f32:full:2 128:2:f32:full:2 128:2:f32:ckpt:2 \
    128:2:f32:full:150 192:1:f32:full:2 192:2:f32:full:2 256:1:f32:full:2 256:2:f32:full:2 \
    2>&1 | grep -v XDG_RUNTIME_DIR
} | tee "$out.txt"
