//! Choosing the backend a run uses: the device, and whether activations are checkpointed.

use std::str::FromStr;

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use segformer::{BackendKind, KernelPath, Kernels};

use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::model::model_config;
use crate::plan::{PlanInputTemplate, fit_budget, parse_bytes};
use crate::trainer::{RunOptions, RunSummary, train};

/// Where to train: `cpu`, `cuda` (GPU 0) or `cuda:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The CPU (burn-flex).
    #[default]
    Cpu,
    /// CUDA GPU `N` (burn-cuda; needs the `cuda` feature).
    Cuda(usize),
}

impl FromStr for Device {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    TrainError::Config(format!("device `{s}` is not one of cpu, cuda, cuda:N"))
                }),
        }
    }
}

/// `cpu` or `cuda:N`, as [`FromStr`] reads it.
impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl Device {
    /// The implementation of the layers a model with `kernels` runs when training here:
    /// segformer's resolution for this device's backend (burn-flex on the CPU, burn-cuda on a
    /// GPU, as a build with the `cuda` feature runs it).
    pub fn kernel_path(self, kernels: Kernels) -> KernelPath {
        let backend = match self {
            Device::Cpu => BackendKind::Flex,
            Device::Cuda(_) => BackendKind::Cuda,
        };
        kernels.path(backend)
    }

    /// Whether this build can use the device at all.
    pub fn check_available(self) -> Result<(), TrainError> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(_) if cfg!(feature = "cuda") => Ok(()),
            Device::Cuda(_) => Err(TrainError::Config(
                "this segfit was built without CUDA support; rebuild with `--features cuda` (e.g. \
                 `cargo install --path crates/cli --features cuda`) or use --device cpu"
                    .into(),
            )),
        }
    }
}

/// Trains on `device`, with Burn's balanced activation checkpointing when the config asks.
pub fn run(cfg: &TrainConfig, opts: &RunOptions, device: Device) -> Result<RunSummary, TrainError> {
    device.check_available()?;
    let mut fitted = cfg.clone();
    if let Some(reason) = fit_memory(&mut fitted, device, opts.kernels)? {
        eprintln!("memory: {reason}");
    }
    let cfg = &fitted;
    match device {
        Device::Cpu if cfg.train.checkpointing => {
            train::<Autodiff<Flex, BalancedCheckpointing>>(cfg, opts, &Default::default())
        }
        Device::Cpu => train::<Autodiff<Flex>>(cfg, opts, &Default::default()),
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => {
            use burn::backend::Cuda;
            use burn::backend::cuda::CudaDevice;
            let d = CudaDevice::new(index);
            // burn-cuda reports an allocation failure by panicking: catch it and turn it into
            // a report with the planner's figures; any other panic goes on unwinding.
            let guarded = |f: &dyn Fn() -> Result<RunSummary, TrainError>| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    match out_of_memory(&msg, cfg, device, opts.kernels, cuda_memory(index)) {
                        Some(e) => Err(e),
                        None => std::panic::resume_unwind(panic),
                    }
                })
            };
            if cfg.train.checkpointing {
                guarded(&|| train::<Autodiff<Cuda, BalancedCheckpointing>>(cfg, opts, &d))
            } else {
                guarded(&|| train::<Autodiff<Cuda>>(cfg, opts, &d))
            }
        }
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => unreachable!("check_available rejects CUDA without the feature"),
    }
}

/// Applies `[memory] budget`: picks micro-batch, accumulation, precision and checkpointing so
/// the predicted peak fits and the effective batch (`memory.effective_batch`, else
/// `batch_size × accumulation_steps`) is kept, for a model whose layers run `kernels`.
/// Returns why, or `None` without a budget.
pub fn fit_memory(
    cfg: &mut TrainConfig,
    device: Device,
    kernels: Kernels,
) -> Result<Option<String>, TrainError> {
    let Some(budget) = cfg.memory.budget.clone() else {
        return Ok(None);
    };
    let bytes =
        parse_bytes(&budget).map_err(|e| TrainError::Config(format!("`memory.budget`: {e}")))?;
    let model = planned_model(cfg)?;
    let effective = cfg
        .memory
        .effective_batch
        .unwrap_or(cfg.train.batch_size * cfg.train.accumulation_steps);
    let path = device.kernel_path(kernels);
    let choice = fit_budget(bytes, effective, &template(cfg, &model, path))
        .map_err(|e| TrainError::Config(format!("`memory.budget`: {e}")))?;
    cfg.train.batch_size = choice.micro_batch;
    cfg.train.accumulation_steps = choice.accumulation_steps;
    cfg.train.precision = choice.precision;
    cfg.train.checkpointing = choice.checkpointing;
    Ok(Some(choice.reason()))
}

/// The model a run trains, as the planner needs it: the architecture, the dataset's classes
/// and bands.
fn planned_model(cfg: &TrainConfig) -> Result<segformer::SegformerConfig, TrainError> {
    let meta = tiles::DatasetMeta::load(&cfg.data.root)?;
    let class_names = match (&cfg.data.classes, &meta) {
        (Some(l), _) => l.class_names(),
        (None, Some(m)) => m.classes.clone(),
        (None, None) => vec!["class_0".into(), "class_1".into()],
    };
    let bands = meta.as_ref().map(|m| m.bands).unwrap_or(3);
    model_config(&cfg.model, &class_names, bands)
}

fn template<'a>(
    cfg: &TrainConfig,
    model: &'a segformer::SegformerConfig,
    kernels: KernelPath,
) -> PlanInputTemplate<'a> {
    PlanInputTemplate {
        config: model,
        height: cfg.data.size[0],
        width: cfg.data.size[1],
        precision: cfg.train.precision,
        checkpointing: cfg.train.checkpointing,
        kernels,
    }
}

/// CubeCL's device memory pool on CUDA GPU `index` now: `(bytes in use, bytes reserved)`.
/// The pool keeps what it has reserved, so after a step the reserved bytes bound the step's
/// peak from above. `None` when the device cannot be queried.
#[cfg(feature = "cuda")]
pub fn cuda_memory(index: usize) -> Option<(u64, u64)> {
    use cubecl::Runtime;
    let device = burn::backend::cuda::CudaDevice::new(index);
    let usage = cubecl::cuda::CudaRuntime::client(&device)
        .memory_usage()
        .ok()?;
    Some((usage.bytes_in_use, usage.bytes_reserved))
}

/// The report for a run on `device` that failed with `message`, if the message is a backend's
/// out-of-memory error: the backend's own words, the device memory measured after the failure
/// (`(in use, reserved)`, where known), the predicted peak of the micro-batch that failed, and
/// the planner's next option (the largest configuration, at the same effective batch,
/// predicted below the one that failed).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
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
            let t = template(cfg, &model, device.kernel_path(kernels));
            let predicted = crate::plan::MemoryPlan::predict(&t.at(batch)).peak_bytes();
            let next = match fit_budget(predicted.saturating_sub(1), batch * steps, &t) {
                Ok(c) => format!(
                    "the planner's next option is {} (train.batch_size = {}, \
                     train.accumulation_steps = {}, train.precision = \"{}\", \
                     train.checkpointing = {}), or set memory.budget to the card's free memory",
                    c.reason(),
                    c.micro_batch,
                    c.accumulation_steps,
                    crate::plan::precision_name(c.precision),
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

    #[test]
    fn parses_devices() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
        for d in [Device::Cpu, Device::Cuda(3)] {
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
        }
        let e = "tpu".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("tpu") && e.contains("cuda:N"), "{e}");
    }

    /// A synthetic dataset on disk and a config training MiT-B0 on it, with `data` and
    /// `train` lines added; the directory lives as long as the returned guard.
    fn synthetic_config(data: &str, train: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiles::SyntheticOptions {
            count: 4,
            size: 32,
            out: dir.path().to_path_buf(),
            ..Default::default()
        };
        tiles::prepare_synthetic(&opts).unwrap();
        let text = format!(
            "[model]\npreset = \"mit-b0\"\n[data]\nroot = {:?}\n{data}\n[train]\n{train}\n",
            dir.path().to_str().unwrap()
        );
        (dir, text)
    }

    #[test]
    fn memory_budget_rewrites_batch_and_accumulation() {
        let (_dir, text) = synthetic_config(
            "size = [512, 512]",
            "batch_size = 8\n[memory]\nbudget = \"1GiB\"",
        );
        let mut cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
        let reason = fit_memory(&mut cfg, Device::Cpu, Kernels::Auto)
            .unwrap()
            .expect("a budget was given");
        assert_eq!(
            cfg.train.batch_size * cfg.train.accumulation_steps,
            8,
            "{reason}"
        );
        assert!(cfg.train.batch_size < 8, "{reason}");
        assert!(reason.contains("1 GiB"), "{reason}");
        // burn-cuda runs burn's composed ops (with the recomputing attention and loss), which
        // keep more than the fused CPU kernels: the same budget holds fewer images there.
        let mut on_gpu = TrainConfig::from_toml_str(&text, &[]).unwrap();
        let gpu_reason = fit_memory(&mut on_gpu, Device::Cuda(0), Kernels::Auto)
            .unwrap()
            .unwrap();
        assert_eq!(on_gpu.train.batch_size * on_gpu.train.accumulation_steps, 8);
        assert!(
            on_gpu.train.batch_size < cfg.train.batch_size,
            "cpu: {reason}; cuda: {gpu_reason}"
        );
        cfg.memory.budget = Some("a lot".into());
        let e = fit_memory(&mut cfg, Device::Cpu, Kernels::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.budget") && e.contains("a lot"), "{e}");
    }

    #[test]
    fn devices_resolve_the_kernel_choice_through_segformer() {
        assert_eq!(Device::Cpu.kernel_path(Kernels::Auto), KernelPath::Fused);
        assert_eq!(
            Device::Cpu.kernel_path(Kernels::Recompute),
            KernelPath::Recompute
        );
        assert_eq!(
            Device::Cuda(0).kernel_path(Kernels::Auto),
            KernelPath::Recompute
        );
        assert_eq!(
            Device::Cuda(0).kernel_path(Kernels::Composed),
            KernelPath::Composed
        );
        // The CPU's kind is what segformer sees on the backend the CPU trains with.
        let device = Default::default();
        for k in [Kernels::Auto, Kernels::Recompute, Kernels::Composed] {
            assert_eq!(
                Device::Cpu.kernel_path(k),
                k.path_for::<Autodiff<Flex>>(&device)
            );
        }
    }

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
        let t = template(&cfg, &model, KernelPath::Recompute);
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

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_so() {
        let e = Device::Cuda(0).check_available().unwrap_err().to_string();
        assert!(
            e.contains("without CUDA") && e.contains("--features cuda"),
            "{e}"
        );
    }
}
