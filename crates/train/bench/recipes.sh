#!/bin/sh
# Reproduces crates/train/recipes-runs.txt and crates/train/recipes.json, the figures of
# crates/train/RECIPES.md: three losses x three seeds on the synthetic multi-class set.
#   WORK=/tmp/segfit-recipes [SEEDS="42 7 123"] crates/train/bench/recipes.sh
# APPEND=1 adds runs (more SEEDS) to an earlier invocation's WORK and log; the summary covers
# every run in WORK.
# Uses the release segfit (NO_BUILD=1: as already built), or SEGFIT=/path/to/segfit. recipes-runs.txt keeps each run's log lines that carry figures
# (class weights, epoch summaries); recipes.json the final validation evaluation of every run
# (metrics.jsonl's last epoch record) and the per-loss means.
set -eu
cd "$(dirname "$0")/../../.."
work=${WORK:-/tmp/segfit-recipes}
seeds=${SEEDS:-42 7 123}
target=${CARGO_TARGET_DIR:-target}
[ -n "${NO_BUILD:-}${SEGFIT:-}" ] || cargo build --release -q -p segfit --bin segfit
segfit=${SEGFIT:-$target/release/segfit}
[ -n "${APPEND:-}" ] || rm -rf "$work"
mkdir -p "$work"
out=crates/train/recipes-runs.txt
{
    echo "# crates/train/bench/recipes.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD)"
    echo "# $(nproc) cores; load average before: $(cat /proc/loadavg)"
    echo "# segfit: $segfit"
    [ -d "$work/data" ] ||
        "$segfit" prepare --synthetic --multi-class --count 80 --size 128 --seed 1 --out "$work/data" >/dev/null
    for seed in $seeds; do
        for loss in ce ce_auto ce_dice; do
            case $loss in
            ce) extra="" ;;
            ce_auto) extra='loss.class_weights="auto"' ;;
            ce_dice) extra='loss.terms=[{ kind = "ce", weight = 1.0 }, { kind = "dice", weight = 1.0 }]' ;;
            esac
            echo "== $loss seed $seed: segfit train --config configs/synthetic-quick.toml --set data.root=WORK/data --set train.epochs=6 --set train.batch_size=4 --set train.eval_every=6 --set train.seed=$seed ${extra:+--set '$extra'}"
            start=$(date +%s)
            "$segfit" train --config configs/synthetic-quick.toml --output "$work/runs/${loss}_$seed" \
                --set "data.root=\"$work/data\"" --set train.epochs=6 --set train.batch_size=4 \
                --set train.eval_every=6 --set train.progress=false --set "train.seed=$seed" \
                ${extra:+--set "$extra"} >"$work/${loss}_$seed.log" 2>&1
            grep -i -E "weight|^epoch" "$work/${loss}_$seed.log" || true
            echo "   ($(($(date +%s) - start)) s wall)"
        done
    done
    echo "# load average after: $(cat /proc/loadavg)"
} 2>&1 | tee ${APPEND:+-a} "$out"
python3 - "$work/runs" crates/train/recipes.json <<'PY'
import json, os, sys
runs_dir, out = sys.argv[1], sys.argv[2]
runs, means = {}, {}
for name in sorted(os.listdir(runs_dir)):
    rec = [json.loads(l) for l in open(os.path.join(runs_dir, name, "metrics.jsonl"))]
    last = [r for r in rec if r.get("kind") == "epoch"][-1]
    runs[name] = {"step": last["step"], "metrics": last["metrics"]}
seeds = sorted({n.rsplit("_", 1)[1] for n in runs}, key=lambda s: ["42", "7", "123"].index(s) if s in ["42", "7", "123"] else 99)
for loss in ("ce", "ce_auto", "ce_dice"):
    ms = [runs[f"{loss}_{s}"]["metrics"] for s in seeds]
    means[loss] = {
        "seeds": [int(s) for s in seeds],
        "miou": sum(m["miou"] for m in ms) / len(ms),
        "iou": [sum(m["iou"][i] for m in ms) / len(ms) for i in range(len(ms[0]["iou"]))],
        "miou_per_seed": [m["miou"] for m in ms],
    }
json.dump({"runs": runs, "means": means}, open(out, "w"), indent=1)
for loss, m in means.items():
    print(loss, "mIoU %.3f" % m["miou"], "IoU", " ".join("%.3f" % v for v in m["iou"]),
          "per seed", " ".join("%.3f" % v for v in m["miou_per_seed"]))
PY
