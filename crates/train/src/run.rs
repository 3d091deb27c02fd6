//! Running a training config on its devices: the backend type chosen once from the
//! [`Devices`]' kind and the checkpointing setting, with a backend's out-of-memory panic turned
//! into the planner's report.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use segformer::Kernels;

use crate::budget::{fit_memory, planned_model, template};
use crate::config::TrainConfig;
use crate::device::{Device, Devices};
use crate::error::TrainError;
use crate::plan::fit_budget;
use crate::trainer::{RunOptions, RunSummary, train_data_parallel as train};

/// Trains on `devices` (one, or several of one kind for data-parallel training:
/// [`crate::train_data_parallel`]), with Burn's balanced activation checkpointing when the
/// config asks.
///
/// The devices are checked first, then the config is fitted to their memory ([`fit_memory`]:
/// `[memory] budget`, the machine's cores and RAM when `cfg.memory.host` is set), before any
/// data or model is loaded: an unusable device or an oversized setting is one error.
pub fn run(
    cfg: &TrainConfig,
    opts: &RunOptions,
    devices: impl Into<Devices>,
) -> Result<RunSummary, TrainError> {
    run_on(cfg, opts, devices.into())
}

/// [`run`] on its devices. Not generic, so that the training loop's instantiations for every
/// backend are compiled once, here, and not again in each crate that calls [`run`] (the
/// `segfit` binary, this crate's tests): they were most of those crates' build time.
fn run_on(
    cfg: &TrainConfig,
    opts: &RunOptions,
    devices: Devices,
) -> Result<RunSummary, TrainError> {
    devices.check_available()?;
    let mut fitted = cfg.clone();
    if let Some(reason) = fit_memory(&mut fitted, &devices, opts.kernels)? {
        eprintln!("memory: {reason}");
    }
    let cfg = &fitted;
    let device = devices.primary();
    match device {
        Device::Cpu if cfg.train.checkpointing => {
            train::<Autodiff<Flex, BalancedCheckpointing>>(cfg, opts, &[Default::default()])
        }
        Device::Cpu => train::<Autodiff<Flex>>(cfg, opts, &[Default::default()]),
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => {
            use burn::backend::Cuda;
            let indices: Vec<usize> = devices
                .iter()
                .filter_map(|d| match d {
                    Device::Cuda(i) => Some(i),
                    _ => None,
                })
                .collect();
            let d = indices
                .iter()
                .map(|&i| crate::device::cuda_device(i))
                .collect::<Result<Vec<_>, _>>()?;
            // The device that ran out is not known: the most used one is reported.
            let measured = || {
                indices
                    .iter()
                    .filter_map(|&i| crate::device::cuda_memory(i))
                    .max()
            };
            if cfg.train.checkpointing {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Cuda, BalancedCheckpointing>>(cfg, opts, &d)
                })
            } else {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Cuda>>(cfg, opts, &d)
                })
            }
        }
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => Err(device.not_built()),
        #[cfg(feature = "wgpu")]
        Device::Wgpu(_) => {
            use burn::backend::Wgpu;
            let adapters = devices
                .iter()
                .filter_map(|d| match d {
                    Device::Wgpu(i) => Some(crate::device::wgpu_adapter(i)),
                    _ => None,
                })
                .collect::<Result<Vec<_>, _>>()?;
            for adapter in &adapters {
                crate::device::check_precision(cfg.train.precision, adapter)?;
            }
            let d: Vec<_> = adapters.iter().map(|a| a.device.clone()).collect();
            let measured = || d.iter().filter_map(crate::device::wgpu_memory).max();
            if cfg.train.checkpointing {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Wgpu, BalancedCheckpointing>>(cfg, opts, &d)
                })
            } else {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Wgpu>>(cfg, opts, &d)
                })
            }
        }
        #[cfg(not(feature = "wgpu"))]
        Device::Wgpu(_) => Err(device.not_built()),
    }
}

/// Runs `f`, turning a backend's out-of-memory panic into [`TrainError::OutOfMemory`] with the
/// planner's figures and the device memory `measured` after the failure; any other panic goes
/// on unwinding. burn-cuda and burn-wgpu both report a failed allocation by panicking.
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
fn guarded(
    cfg: &TrainConfig,
    device: Device,
    kernels: Kernels,
    measured: impl Fn() -> Option<(u64, u64)>,
    f: &dyn Fn() -> Result<RunSummary, TrainError>,
) -> Result<RunSummary, TrainError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        match out_of_memory(&msg, cfg, device, kernels, measured()) {
            Some(e) => Err(e),
            None => std::panic::resume_unwind(panic),
        }
    })
}

/// The report for a run on `device` that failed with `message`, if the message is a backend's
/// out-of-memory error: the backend's own words, the device memory measured after the failure
/// (`(in use, reserved)`, where known), the predicted peak of the micro-batch that failed, and
/// the planner's next option (the largest configuration, at the same effective batch,
/// predicted below the one that failed).
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
pub(crate) fn out_of_memory(
    message: &str,
    cfg: &TrainConfig,
    device: Device,
    kernels: Kernels,
    measured: Option<(u64, u64)>,
) -> Option<TrainError> {
    let lower = message.to_ascii_lowercase();
    if !(lower.contains("out of memory")
        || lower.contains("out-of-memory")
        || message.contains("OutOfMemory"))
    {
        return None;
    }
    // The backend's first line names the failure; the rest is a backtrace.
    let cause = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case("backtrace"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let (batch, steps) = (cfg.train.batch_size, cfg.train.accumulation_steps);
    let what = format!(
        "training on {device} with a micro-batch of {batch} at {}x{}",
        cfg.data.size[0], cfg.data.size[1]
    );
    let advice = match planned_model(cfg) {
        Ok(model) => {
            let loss = cfg.loss.for_planning(model.num_labels());
            let t = template(cfg, &model, &loss, device, kernels);
            let predicted = crate::plan::MemoryPlan::predict(&t.at(batch)).peak_bytes();
            let next = match fit_budget(predicted.saturating_sub(1), batch * steps, &t) {
                Ok(c) => format!(
                    "the planner's next option is {} (train.batch_size = {}, \
                     train.accumulation_steps = {}, train.precision = \"{}\", \
                     train.checkpointing = {}), or set memory.budget to the card's free memory",
                    c.reason(),
                    c.micro_batch,
                    c.accumulation_steps,
                    c.precision.name(),
                    c.checkpointing
                ),
                Err(e) => format!("no smaller configuration is predicted to fit: {e}"),
            };
            let measured = match measured {
                Some((in_use, reserved)) => format!(
                    "measured after the failure {} in use, {} reserved; ",
                    crate::plan::human(in_use),
                    crate::plan::human(reserved)
                ),
                None => String::new(),
            };
            format!(
                "{measured}predicted peak for this step {}; {next}",
                crate::plan::human(predicted)
            )
        }
        Err(e) => format!("(no prediction: {e}); lower train.batch_size or set memory.budget"),
    };
    Some(TrainError::OutOfMemory {
        what,
        detail: format!("{cause}; {advice}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::synthetic_config;

    #[test]
    fn out_of_memory_reports_the_prediction_and_the_next_option() {
        let (_dir, text) = synthetic_config(
            "size = [1024, 1024]",
            "batch_size = 4\naccumulation_steps = 2",
        );
        let cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
        // The shape of cubecl's `LaunchError::OutOfMemory` as burn-cuda panics with it.
        let message = "An out-of-memory error happened during launch\nCaused by:\n  \
                       Unable to reserve 2147483648 bytes\nBacktrace\n   0: cubecl_runtime::...";
        let measured = Some((7 << 30, 15 << 29));
        let e = out_of_memory(message, &cfg, Device::Cuda(1), Kernels::Auto, measured)
            .expect("an out-of-memory report")
            .to_string();
        assert!(
            e.starts_with(
                "out of memory at training on cuda:1 with a micro-batch of 4 at 1024x1024"
            ),
            "{e}"
        );
        assert!(e.contains("Unable to reserve 2147483648 bytes"), "{e}");
        assert!(
            e.contains("measured after the failure 7 GiB in use, 7.5 GiB reserved"),
            "{e}"
        );
        assert!(
            !e.contains("cubecl_runtime::"),
            "the backtrace is left out: {e}"
        );
        // The prediction for batch 4, and the next option keeps the effective batch of 8.
        let model = planned_model(&cfg).unwrap();
        let loss = cfg.loss.for_planning(model.num_labels());
        let t = template(&cfg, &model, &loss, Device::Cuda(1), Kernels::Auto);
        let predicted = crate::plan::MemoryPlan::predict(&t.at(4)).peak_bytes();
        assert!(
            e.contains(&format!(
                "predicted peak for this step {}",
                crate::plan::human(predicted)
            )),
            "{e}"
        );
        assert!(e.contains("next option is batch 2 × 4 steps in f32"), "{e}");
        assert!(
            e.contains("train.batch_size = 2, train.accumulation_steps = 4"),
            "{e}"
        );
        // burn-wgpu's shape: wgpu's default error handler panics with the error.
        let wgpu = "wgpu error: Out of Memory\n";
        let e = out_of_memory(wgpu, &cfg, Device::Wgpu(0), Kernels::Auto, None)
            .expect("an out-of-memory report")
            .to_string();
        assert!(
            e.contains("on wgpu:0") && e.contains("Out of Memory"),
            "{e}"
        );
        assert!(e.contains("next option is batch 2 × 4 steps"), "{e}");
        // Other failures are not mistaken for it.
        assert!(
            out_of_memory(
                "index out of bounds: the len is 3",
                &cfg,
                Device::Cuda(0),
                Kernels::Auto,
                None
            )
            .is_none()
        );
    }
}
