#!/usr/bin/env bash
# What burn-fusion changes on burn-wgpu, measured on the first wgpu adapter (Mesa's lavapipe
# where there is no GPU): kernel launches per MiT-B0 training step (CubeCL's launch log), step
# time and CubeCL's pool reserve, fused (segfit's build) against unfused (`--unfused`), at two
# sizes. Each row is its own process: three warm-up steps (autotune times its candidates and burn-fusion settles its plans there),
# then the median of three measured steps. Output: crates/train/bench/fusion-lavapipe.txt.
#   crates/train/bench/fusion_lavapipe.sh            (PROFILE=dev by default: the test build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
profile=${PROFILE:-dev}
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cargo build --profile "$profile" -p train --features wgpu --example bench_memory
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
out=crates/train/bench/fusion-lavapipe.txt
{
  echo "# crates/train/bench/fusion_lavapipe.sh ($profile build) at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for size in 128 256; do
    for mode in "" --unfused; do
      target/$dir/examples/bench_memory --wgpu $mode --launches --warmup 3 --steps 3 --autotune-cache "$cache" \
        "$size:2:f32:full:2" 2>&1 | grep -v XDG_RUNTIME_DIR
    done
  done
} | tee "$out"
