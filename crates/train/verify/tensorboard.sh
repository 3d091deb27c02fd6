#!/usr/bin/env bash
# Loads a run's tb/ with TensorBoard's own reader and checks it against metrics.jsonl; writes
# verify/tensorboard.txt. Usage: tensorboard.sh [RUN_DIR] (default: the run that
# `cargo test -p train --test it tensorboard` leaves with SEGFIT_KEEP_TB, made here).
# Needs a Python with tensorboard (PYTHON, default /work/venv/bin/python).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=${PYTHON:-/work/venv/bin/python}
cd "$root"
run=${1:-}
if [ -z "$run" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  run="$work/run"
  SEGFIT_KEEP_TB="$run" cargo test -p train --test it tensorboard -- --quiet >/dev/null 2>&1
  what="the run of cargo test -p train --test it tensorboard (1 epoch, resumed to 2, resumed again from epoch 1)"
else
  what="$run"
fi
{
  echo "# crates/train/verify/tensorboard.sh at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# run: $what"
  "$python" "$here/tensorboard.py" "$run"
} 2>&1 | tee "$here/tensorboard.txt"
