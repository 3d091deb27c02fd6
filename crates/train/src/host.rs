//! A run against the machine it is on: the loader's threads against its cores, the predicted
//! memory against its RAM, checked before anything is allocated so that an oversized setting
//! is one clear error instead of an aborted allocation.

use crate::config::{Host, MAX_SIDE, TrainConfig, WORKERS_PER_CORE};
use crate::error::TrainError;
use crate::plan::{
    Allocator, LoaderInput, MemoryPlan, PlanInputTemplate, human, loader_bytes, process_baseline,
};

/// `train.workers` is at most [`WORKERS_PER_CORE`] × the machine's cores.
pub(crate) fn check_workers(cfg: &TrainConfig, host: &Host) -> Result<(), TrainError> {
    let max = WORKERS_PER_CORE * host.cores.max(1);
    let workers = cfg.train.workers;
    if workers > max {
        return Err(TrainError::Config(format!(
            "`train.workers` = {workers} is more than {WORKERS_PER_CORE} threads per core on this \
             machine's {} cores; use at most {max} (the default 2 keeps up with most runs)",
            host.cores
        )));
    }
    Ok(())
}

/// The host memory of a run of `template` at micro-batch `batch` with `prefetch` samples read
/// ahead: on the CPU the whole process (the step's tensors live there); on a GPU the process
/// baseline and the loader's samples, the step's tensors being on the device.
fn host_bytes(
    template: &PlanInputTemplate<'_>,
    batch: usize,
    workers: usize,
    prefetch: usize,
) -> u64 {
    let input = template.at(batch);
    let loader = LoaderInput { workers, prefetch };
    match template.allocator {
        Allocator::Heap => MemoryPlan::predict(&input)
            .with_process(&input, &loader)
            .whole_process_bytes(),
        Allocator::CubeclPool => process_baseline(0) + loader_bytes(&input, &loader),
    }
}

/// The largest `n` in `[1, max]` for which `fits(n)` holds (`fits` grows with `n`), or `None`.
fn largest(max: usize, fits: impl Fn(usize) -> bool) -> Option<usize> {
    if max == 0 || !fits(1) {
        return None;
    }
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    Some(lo)
}

/// The run's predicted host memory fits the machine's; otherwise an error naming the first
/// value that does not fit (`data.size` at batch 1, else `train.batch_size`, else
/// `train.prefetch`), what it needs, and the largest value that fits.
pub(crate) fn check_memory(
    cfg: &TrainConfig,
    template: &PlanInputTemplate<'_>,
    host: &Host,
) -> Result<(), TrainError> {
    let t = &cfg.train;
    let (batch, workers, prefetch) = (t.batch_size, t.workers, t.prefetch);
    let need = host_bytes(template, batch, workers, prefetch);
    if need <= host.memory {
        return Ok(());
    }
    let has = human(host.memory);
    let at_size = |h: usize, w: usize| PlanInputTemplate {
        height: h,
        width: w,
        ..*template
    };
    let [h, w] = cfg.data.size;
    let smallest_here = host_bytes(template, 1, workers, 1);
    if smallest_here > host.memory {
        // Keep the aspect ratio: scale the longer side down until batch 1 fits.
        let long = h.max(w);
        let scaled = |side: usize| {
            let (sh, sw) = (
                (h * side).div_ceil(long).max(1),
                (w * side).div_ceil(long).max(1),
            );
            (sh, sw)
        };
        let fits = |side| {
            let (sh, sw) = scaled(side);
            host_bytes(&at_size(sh, sw), 1, workers, 1) <= host.memory
        };
        let advice = match largest(long.min(MAX_SIDE), fits) {
            Some(side) => {
                let (sh, sw) = scaled(side);
                format!("the largest size that fits is [{sh}, {sw}]")
            }
            None => "no input size fits: this machine is too small for the model".into(),
        };
        return Err(TrainError::Config(format!(
            "`data.size` = [{h}, {w}] needs {} for the whole run even at train.batch_size = 1 \
             (predicted by the memory planner), and this machine has {has}; {advice}",
            human(smallest_here)
        )));
    }
    let at_batch = host_bytes(template, batch, workers, 1);
    if at_batch > host.memory {
        let fits = |b| host_bytes(template, b, workers, 1) <= host.memory;
        let most = largest(batch, fits).unwrap_or(1);
        return Err(TrainError::Config(format!(
            "`train.batch_size` = {batch} needs {} at {h}x{w} (predicted by the memory planner), \
             and this machine has {has}; the largest micro-batch that fits is {most} (keep the \
             effective batch with train.accumulation_steps, or set memory.budget)",
            human(at_batch)
        )));
    }
    let fits = |p| host_bytes(template, batch, workers, p) <= host.memory;
    let most = largest(prefetch, fits).unwrap_or(1);
    Err(TrainError::Config(format!(
        "`train.prefetch` = {prefetch} needs {} with {workers} workers at batch {batch} and \
         {h}x{w} (predicted by the memory planner), and this machine has {has}; the largest \
         prefetch that fits is {most}",
        human(need)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_finds_the_boundary() {
        assert_eq!(largest(100, |n| n <= 37), Some(37));
        assert_eq!(largest(100, |n| n <= 1000), Some(100));
        assert_eq!(largest(100, |_| false), None);
        assert_eq!(largest(1, |n| n == 1), Some(1));
    }
}
