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

# The commands: every `sh` block right after a `<!-- runnable -->` line, in README.md (its
# "Your GeoTIFFs in five commands") and then in the guide pages below, in this order and in one
# working directory, so that a later block may use what an earlier one made. .ci/run runs this
# script: a renamed flag or a changed output name fails CI, not a user who copies the command.
pages=(README.md docs/guide/data.md docs/guide/predict.md docs/guide/scale-out.md
  docs/guide/export-and-library.md docs/guide/training.md)
marked=$(cd "$root" && grep -rl --include='*.md' -e '^<!-- runnable -->$' README.md docs | sort)
listed=$(printf '%s\n' "${pages[@]}" | sort)
for f in $marked; do
  grep -qx "$f" <<<"$listed" || { echo "$f has runnable blocks: add it to pages in $0" >&2; exit 1; }
done
blocks="$work/blocks"
mkdir -p "$blocks"
n=0
for page in "${pages[@]}"; do
  n=$(awk -v dir="$blocks" -v n="$n" -v page="$page" '
    /^<!-- runnable -->$/ { armed = 1; next }
    armed && /^```sh$/ { n++; inb = 1; armed = 0; print page > (dir "/" sprintf("%03d", n) ".page"); next }
    { armed = 0 }
    inb && /^```$/ { inb = 0; next }
    inb { print > (dir "/" sprintf("%03d", n) ".sh") }
    END { print n }
  ' "$root/$page")
done
readme=$(grep -lx README.md "$blocks"/*.page | wc -l)
[ "$readme" -ge 5 ] || { echo "README.md: expected the five commands' runnable blocks, found $readme" >&2; exit 1; }
page=""
for b in "$blocks"/*.sh; do
  this="$(cat "${b%.sh}.page")"
  if [ "$this" != "$page" ]; then
    [ "$this" = README.md ] || printf '## %s\n\n' "$this"
    page="$this"
  fi
  # Each command as the reader would type it (continuation lines joined, comments cut), run
  # on its own after its `$` line so that its output follows it.
  sed -e 's/[[:space:]]*#.*$//' "$b" | awk '
    { line = line $0 }
    /\\$/ { sub(/\\$/, "", line); next }
    line != "" { gsub(/[[:space:]]+/, " ", line); sub(/^ /, "", line); print line }
    { line = "" }' >"$b.lines"
  while IFS= read -r cmd; do
    echo "\$ $cmd"
    bash -euo pipefail -c "$cmd" 2>&1 </dev/null
  done <"$b.lines"
  echo
done
ls pred
