#!/usr/bin/env bash
# The README's "your GeoTIFFs in five commands", run end to end on synthetic scenes:
#   docs/walkthrough.sh [SEGFIT] [MIT_B0_DIR] > docs/walkthrough.txt
# SEGFIT: the segfit binary (default: target/release/segfit, else target/debug/segfit).
# MIT_B0_DIR: an HF directory shaped like nvidia/mit-b0 (default: the shared fixture
# `mit-b0-encoder`, random weights of that shape: the figures below are not a pretrained run's).
# Every command the README shows is run here verbatim; the lines before them make the inputs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
segfit="${1:-}"
if [ -z "$segfit" ]; then
  for c in "$root/target/release/segfit" "$root/target/debug/segfit"; do
    [ -x "$c" ] && { segfit="$c"; break; }
  done
fi
segfit="$(realpath "$segfit" 2>/dev/null || true)"
[ -x "$segfit" ] || { echo "build segfit first: cargo build --release -p segfit" >&2; exit 1; }
encoder="$(realpath "${2:-${SEGFIT_FIXTURES:-$root/../shared/fixtures}/mit-b0-encoder}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p bin models && ln -s "$segfit" bin/segfit && ln -s "$encoder" models/mit-b0
cp -r "$root/configs" configs
export PATH="$work/bin:$PATH"

# "Your scenes": six 512² 4-band u16 GeoTIFFs (UTM 51N, 10 m) with their label rasters.
segfit prepare --synthetic --multispectral --count 6 --size 512 --seed 7 --out made >/dev/null
mkdir -p scenes labels
i=1
for f in made/images/*/*.tif; do
  stem="$(basename "$f" .tif)"
  cp "$f" "scenes/s$i.tif"
  cp "made/masks/$(basename "$(dirname "$f")")/$stem.png" "labels/s$i.png"
  i=$((i + 1))
done

# The commands: the `sh` blocks of the README's "Your GeoTIFFs in five commands", in order,
# so the README cannot name a flag segfit no longer has (.ci/run runs this script).
blocks="$work/blocks"
mkdir -p "$blocks"
awk -v dir="$blocks" '
  /^## / { on = ($0 == "## Your GeoTIFFs in five commands") }
  on && /^```sh$/ { n++; inb = 1; next }
  inb && /^```$/ { inb = 0; next }
  inb { print > (dir "/" sprintf("%02d", n) ".sh") }
' "$root/README.md"
count=$(ls "$blocks" | wc -l)
[ "$count" -ge 5 ] || { echo "README.md: expected the five commands' sh blocks, found $count" >&2; exit 1; }
for b in "$blocks"/*.sh; do
  echo "\$ $(sed 's/^ *//' "$b" | tr -d '\\\n' | tr -s ' ')"
  bash -euo pipefail "$b" 2>&1
  echo
done
ls pred
