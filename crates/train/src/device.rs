//! Choosing the backend a run uses: the device, and whether activations are checkpointed.

use std::str::FromStr;

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use segformer::{BackendKind, KernelPath, Kernels};

use crate::config::{Precision, TrainConfig};
use crate::error::TrainError;
use crate::model::model_config;
use crate::plan::{
    Allocator, LoaderInput, PlanInputTemplate, fit_budget, fit_whole_process, parse_bytes,
};
use crate::trainer::{RunOptions, RunSummary, train};

/// Where to train: `cpu`, `cuda` (GPU 0), `cuda:N`, `wgpu` (adapter 0) or `wgpu:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The CPU (burn-flex).
    #[default]
    Cpu,
    /// CUDA GPU `N` (burn-cuda; needs the `cuda` feature).
    Cuda(usize),
    /// wgpu adapter `N` (burn-wgpu on Vulkan, Metal or DX12, numbered as
    /// `segformer::wgpu_adapter` does; needs the `wgpu` feature).
    Wgpu(usize),
}

impl FromStr for Device {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            "wgpu" => Ok(Device::Wgpu(0)),
            other => {
                let index = |prefix: &str| other.strip_prefix(prefix).and_then(|n| n.parse().ok());
                index("cuda:")
                    .map(Device::Cuda)
                    .or_else(|| index("wgpu:").map(Device::Wgpu))
                    .ok_or_else(|| {
                        TrainError::Config(format!(
                            "device `{s}` is not one of cpu, cuda, cuda:N, wgpu, wgpu:N"
                        ))
                    })
            }
        }
    }
}

/// `cpu`, `cuda:N` or `wgpu:N`, as [`FromStr`] reads it.
impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Wgpu(i) => write!(f, "wgpu:{i}"),
        }
    }
}

impl Device {
    /// The implementation of the layers a model with `kernels` runs when training here:
    /// segformer's resolution for this device's backend (burn-flex on the CPU, burn-cuda or
    /// burn-wgpu on a GPU, as a build with the `cuda` / `wgpu` feature runs them).
    pub fn kernel_path(self, kernels: Kernels) -> KernelPath {
        kernels.path(self.backend_kind())
    }

    /// The kind of backend that runs on this device.
    pub fn backend_kind(self) -> BackendKind {
        match self {
            Device::Cpu => BackendKind::Flex,
            Device::Cuda(_) => BackendKind::Cuda,
            Device::Wgpu(_) => BackendKind::Wgpu,
        }
    }

    /// Where tensors live on this device: the heap on the CPU, CubeCL's pool on the GPUs.
    pub fn allocator(self) -> Allocator {
        match self {
            Device::Cpu => Allocator::Heap,
            Device::Cuda(_) | Device::Wgpu(_) => Allocator::CubeclPool,
        }
    }

    /// The half precision the memory planner may switch an f32 run to here: bf16, but f16 on
    /// wgpu, which has no bf16 arithmetic (it still needs an adapter with shader-f16, checked
    /// when the run starts).
    pub fn reduced_precision(self) -> Option<Precision> {
        match self {
            Device::Cpu | Device::Cuda(_) => Some(Precision::Bf16),
            Device::Wgpu(_) => Some(Precision::F16),
        }
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
            Device::Wgpu(_) if cfg!(feature = "wgpu") => Ok(()),
            Device::Wgpu(_) => Err(TrainError::Config(
                "this segfit was built without wgpu support; rebuild with `--features wgpu` (the \
                 default) or use --device cpu"
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
            let measured = || cuda_memory(index);
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
        Device::Cuda(_) => unreachable!("check_available rejects CUDA without the feature"),
        #[cfg(feature = "wgpu")]
        Device::Wgpu(index) => {
            use burn::backend::Wgpu;
            let adapter = segformer::wgpu_adapter(index)
                .map_err(|e| TrainError::Config(format!("--device {device}: {e}")))?;
            check_precision(cfg.train.precision, &adapter)?;
            let d = adapter.device.clone();
            let measured = || wgpu_memory(&d);
            if cfg.train.checkpointing {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Wgpu, BalancedCheckpointing>>(cfg, opts, &adapter.device)
                })
            } else {
                guarded(cfg, device, opts.kernels, measured, &|| {
                    train::<Autodiff<Wgpu>>(cfg, opts, &adapter.device)
                })
            }
        }
        #[cfg(not(feature = "wgpu"))]
        Device::Wgpu(_) => unreachable!("check_available rejects wgpu without the feature"),
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

/// Refuses a precision the wgpu adapter cannot compute in, naming the adapter and what works.
#[cfg(feature = "wgpu")]
pub(crate) fn check_precision(
    precision: crate::config::Precision,
    adapter: &segformer::WgpuAdapter,
) -> Result<(), TrainError> {
    use burn::tensor::DType;
    let (dtype, name) = match precision {
        Precision::F32 => return Ok(()),
        Precision::Bf16 => (DType::BF16, "bf16"),
        Precision::F16 => (DType::F16, "f16"),
    };
    if adapter.supports(dtype) {
        return Ok(());
    }
    let alternative = if precision == Precision::Bf16 && adapter.supports(DType::F16) {
        "use train.precision = \"f16\" (with its loss scaling) or \"f32\""
    } else {
        "use train.precision = \"f32\""
    };
    let why = if precision == Precision::Bf16 {
        "burn-wgpu has no bf16 arithmetic (WGSL has no bf16 type)"
    } else {
        "the adapter lacks the shader-f16 feature"
    };
    Err(TrainError::Config(format!(
        "train.precision = \"{name}\" is not available on wgpu adapter {adapter}: {why}; \
         {alternative}, or --device cuda on an NVIDIA GPU"
    )))
}

/// CubeCL's device memory pool on wgpu `device` now: `(bytes in use, bytes reserved)`, as
/// [`cuda_memory`] reads it for CUDA (the same CubeCL memory management).
#[cfg(feature = "wgpu")]
pub fn wgpu_memory(device: &burn::backend::wgpu::WgpuDevice) -> Option<(u64, u64)> {
    use cubecl::Runtime;
    let usage = cubecl::wgpu::WgpuRuntime::client(device)
        .memory_usage()
        .ok()?;
    Some((usage.bytes_in_use, usage.bytes_reserved))
}

/// Applies `[memory] budget`: picks micro-batch, accumulation, precision and checkpointing so
/// the predicted peak of the whole process (the step, the process baseline and the loader's
/// samples: [`fit_whole_process`]) fits and the effective batch (`memory.effective_batch`,
/// else `batch_size × accumulation_steps`) is kept, for a model whose layers run `kernels`.
/// Returns why, or `None` without a budget.
///
/// With `memory.host` (the machine, which the binary passes in), it then checks the run
/// against the machine before anything is allocated: `train.workers` against its cores, and
/// the predicted memory against its RAM, naming the value that does not fit
/// (`data.size`, `train.batch_size` or `train.prefetch`) with the largest that does.
pub fn fit_memory(
    cfg: &mut TrainConfig,
    device: Device,
    kernels: Kernels,
) -> Result<Option<String>, TrainError> {
    if let Some(host) = cfg.memory.host {
        crate::host::check_workers(cfg, &host)?;
    }
    let reason = fit_budget_of(cfg, device, kernels)?;
    if let Some(host) = cfg.memory.host {
        let model = planned_model(cfg)?;
        let loss = cfg.loss.for_planning(model.num_labels());
        let t = template(cfg, &model, &loss, device, kernels);
        crate::host::check_memory(cfg, &t, &host)?;
    }
    Ok(reason)
}

fn fit_budget_of(
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
    let loss = cfg.loss.for_planning(model.num_labels());
    let choice = fit_whole_process(
        bytes,
        effective,
        &template(cfg, &model, &loss, device, kernels),
        &loader_input(cfg),
    )
    .map_err(|e| TrainError::Config(format!("`memory.budget`: {e}")))?;
    cfg.train.batch_size = choice.micro_batch;
    cfg.train.accumulation_steps = choice.accumulation_steps;
    cfg.train.precision = choice.precision;
    cfg.train.checkpointing = choice.checkpointing;
    Ok(Some(choice.reason()))
}

/// The loader a run feeds its steps with.
pub(crate) fn loader_input(cfg: &TrainConfig) -> LoaderInput {
    LoaderInput {
        workers: cfg.train.workers,
        prefetch: cfg.train.prefetch,
    }
}

/// The model a run trains, as the planner needs it: the architecture, the dataset's classes
/// and bands.
pub(crate) fn planned_model(cfg: &TrainConfig) -> Result<segformer::SegformerConfig, TrainError> {
    let meta = tiles::DatasetMeta::load(&cfg.data.root)?;
    let class_names = match (&cfg.data.classes, &meta) {
        (Some(l), _) => l.class_names(),
        (None, Some(m)) => m.classes.clone(),
        (None, None) => vec!["class_0".into(), "class_1".into()],
    };
    let bands = meta.as_ref().map(|m| m.bands).unwrap_or(3);
    model_config(&cfg.model, &class_names, bands)
}

pub(crate) fn template<'a>(
    cfg: &TrainConfig,
    model: &'a segformer::SegformerConfig,
    loss: &'a segformer::SegLoss,
    device: Device,
    kernels: Kernels,
) -> PlanInputTemplate<'a> {
    PlanInputTemplate {
        config: model,
        height: cfg.data.size[0],
        width: cfg.data.size[1],
        precision: cfg.train.precision,
        reduced: device.reduced_precision(),
        checkpointing: cfg.train.checkpointing,
        kernels: device.kernel_path(kernels),
        allocator: device.allocator(),
        loss: Some(loss),
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
        assert_eq!("wgpu".parse::<Device>().unwrap(), Device::Wgpu(0));
        assert_eq!("WGPU:1".parse::<Device>().unwrap(), Device::Wgpu(1));
        for d in [Device::Cpu, Device::Cuda(3), Device::Wgpu(2)] {
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
        }
        let e = "tpu".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("tpu") && e.contains("wgpu:N"), "{e}");
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
        assert_eq!(
            Device::Wgpu(0).kernel_path(Kernels::Auto),
            KernelPath::Recompute
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
