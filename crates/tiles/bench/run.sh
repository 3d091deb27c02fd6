#!/bin/sh
# Reproduces crates/tiles/bench-tiling.txt, the figures of crates/tiles/BENCH.md:
#   crates/tiles/bench/run.sh [SIZE] [LAYOUTS]
# SIZE: the scene's side, default 20000; LAYOUTS: default "tiled striped". Each run writes the
# scene (4-band u16) and its labels to a temp dir, tiles them and removes them.
set -eu
cd "$(dirname "$0")/../../.."
size=${1:-20000}
layouts=${2:-tiled striped}
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p tiles --example bench_tiling
out=crates/tiles/bench-tiling.txt
{
    echo "# crates/tiles/bench/run.sh $size \"$layouts\", $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    for layout in $layouts; do
        echo "\$ bench_tiling $size $layout"
        "$target/release/examples/bench_tiling" "$size" "$layout"
        echo "# load average: $(cat /proc/loadavg)"
    done
} 2>&1 | tee "$out"
