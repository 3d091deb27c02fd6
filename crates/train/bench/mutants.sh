#!/usr/bin/env bash
# Mutation score of the numeric core (issue #17, item 5): cargo-mutants on AdamW, the schedules,
# GradScaler, the confusion-matrix metrics, the SegFormer processor with both resamplers
# (Pillow's in pil.rs, OpenCV's in resize.rs) and the losses. Writes the raw outcome lists to
# crates/train/bench/mutants/<group>/ and prints the per-file table of BENCH-mutants.md.
# Not part of CI: about 900 mutants, each an incremental rebuild of one crate.
#
# Usage: crates/train/bench/mutants.sh [GROUP...]   (default: all five)
#        crates/train/bench/mutants.sh --table      (only the table, from the stored lists)
#   train       optim.rs, schedule.rs, scaler.rs   (117 mutants)
#   infer       metrics.rs                         (60)
#   processor   augment's processor.rs             (100)
#   resampling  augment's resize.rs and pil.rs     (466)
#   losses      segformer's losses.rs              (170)
#
# Environment:
#   MUTANTS_WORKTREE   clean checkout mutated in place (default: $TMPDIR/segfit-mutants-wt);
#                      created with `git worktree add`, moved to HEAD on every run. The tree
#                      you edit is never mutated.
#   CARGO_TARGET_DIR   build directory (default: target/mutants). Seed it with hard links from a
#                      built target to skip the dependency build:
#                        mkdir -p target/mutants/debug && (cd target/debug && cp -al deps build .fingerprint ../mutants/debug/)
#   MUTANTS_SHARD      e.g. `0/3`: only every third mutant (round-robin, 0-based), for a sampled
#                      score when a full run does not fit the time at hand.
#   MUTANTS_TIMEOUT    per-test timeout in seconds (default 120).
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
out_dir="$root/crates/train/bench/mutants"
wt=${MUTANTS_WORKTREE:-${TMPDIR:-/tmp}/segfit-mutants-wt}
scratch=${TMPDIR:-/tmp}/segfit-mutants-out
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/mutants}
# Workspace crates unoptimised and without debug info: each mutant rebuilds one crate, so its
# compile time is what counts. Dependencies keep their `[profile.dev.package."*"]` settings
# (opt-level 3, no debug info), so their build artifacts are reused as they are.
export CARGO_PROFILE_DEV_OPT_LEVEL=0 CARGO_PROFILE_DEV_DEBUG=false

prepare_worktree() {
    if [ ! -e "$wt/.git" ]; then
        git -C "$root" worktree add --detach "$wt" HEAD
    fi
    git -C "$wt" checkout --quiet --force --detach "$(git -C "$root" rev-parse HEAD)"
}

# Every cargo call gets the same arguments (`-C`: build and test): the extra `--package`s only
# make Cargo resolve the dependencies' features as in a workspace build (wgpu on, as the
# dev-dependencies of train and segformer ask), so they are not rebuilt in a second feature
# set; `--test=it` builds each package's one test target, and the filters after `-- --` pick
# the modules that run per mutant (tiles and segformer depend on neither augment nor infer, so
# their `it` targets are built once, and no test of theirs matches those filters).
common=(--in-place --baseline skip --timeout "${MUTANTS_TIMEOUT:-120}" --colors never
    -C --config=profile.dev.package.segformer.opt-level=0)
if [ -n "${MUTANTS_SHARD:-}" ]; then
    common+=(--shard "$MUTANTS_SHARD" --sharding round-robin)
fi

run() {
    local group=$1
    shift
    echo "== $group: cargo mutants $*" >&2
    prepare_worktree
    (cd "$wt" && cargo mutants "${common[@]}" -o "$scratch/$group" "$@") || true
    mkdir -p "$out_dir/$group"
    for f in caught missed timeout unviable; do
        sort "$scratch/$group/mutants.out/$f.txt" >"$out_dir/$group/$f.txt"
    done
}

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(train infer processor resampling losses)
[ "${groups[0]}" != --table ] || groups=()
for g in "${groups[@]}"; do
    case $g in
    train)
        run train -p train \
            -f crates/train/src/optim.rs -f crates/train/src/schedule.rs -f crates/train/src/scaler.rs \
            -C --test=it -- -- numerics::
        ;;
    infer)
        run infer -p infer -f crates/infer/src/metrics.rs \
            -C --package=tiles -C --package=segformer -C --test=it -- -- metrics::
        ;;
    processor | resampling)
        if [ "$g" = processor ]; then
            files=(-f crates/augment/src/processor.rs)
        else
            files=(-f crates/augment/src/resize.rs -f crates/augment/src/pil.rs)
        fi
        run "$g" -p augment "${files[@]}" \
            -C --package=tiles -C --package=segformer \
            -C --test=it -- -- resampling:: albumentations_parity:: \
            albumentations_parity_extra:: processor_parity::
        ;;
    losses)
        # The losses' own unit tests (losses_tests.rs, losses_mutants_tests.rs); the filter
        # keeps tiles' unit tests, built once, from running.
        run losses -p segformer -f crates/segformer/src/losses.rs \
            -C --package=tiles -C --lib -- -- losses::
        ;;
    *)
        echo "unknown group $g (train, infer, processor, resampling, losses)" >&2
        exit 2
        ;;
    esac
done

# The per-file table: caught / missed / unviable / timeout, and the score
# (caught + timeout) / (caught + missed + timeout), cargo-mutants' convention of counting a
# timeout as caught (the mutant changed behaviour: the tests did not finish).
echo "| file | caught | missed | unviable | timeout | score |"
echo "|---|---:|---:|---:|---:|---:|"
for f in crates/train/src/optim.rs crates/train/src/schedule.rs crates/train/src/scaler.rs \
    crates/infer/src/metrics.rs crates/augment/src/processor.rs crates/augment/src/resize.rs \
    crates/augment/src/pil.rs crates/segformer/src/losses.rs; do
    count() { cat "$out_dir"/*/"$1.txt" 2>/dev/null | grep -c "^$f:" || true; }
    c=$(count caught) m=$(count missed) u=$(count unviable) t=$(count timeout)
    [ $((c + m + t)) -gt 0 ] || continue
    awk -v f="$f" -v c="$c" -v m="$m" -v u="$u" -v t="$t" \
        'BEGIN { printf "| %s | %d | %d | %d | %d | %.1f %% |\n", f, c, m, u, t, 100 * (c + t) / (c + m + t) }'
done
