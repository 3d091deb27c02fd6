#!/usr/bin/env bash
# The figures of crates/geom/BENCH.md: 100 000 fields (FlatGeobuf, WGS84) burned onto a
# 20000x20000 UTM scene in bands of 256 rows, both rules. Writes bench/bench-labels.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
cargo build --release -p geom --example labels_bench
bin=target/release/examples/labels_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "# crates/geom/bench/run.sh at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bin" make "$work/fields.fgb" 100000 20000
  echo "layer file: $(du -m "$work/fields.fgb" | cut -f1) MiB"
  for args in "256" "256 --all-touched" "64" "1024"; do
    echo
    echo "\$ labels_bench run fields.fgb 20000 $args"
    # shellcheck disable=SC2086
    "$bin" run "$work/fields.fgb" 20000 $args
  done
} 2>&1 | tee "$here/bench-labels.txt"
