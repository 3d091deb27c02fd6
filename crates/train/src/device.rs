//! The device a model runs on (`cpu`, `cuda[:N]`, `wgpu[:N]`): how it is named, what its
//! backend runs, whether this build and machine can use it, and its memory.
//!
//! The one parser of `--device` (the binary's flag type) and the one availability check; a new
//! device is a variant here and its arms.

use std::str::FromStr;

use segformer::{BackendKind, KernelPath, Kernels};

use crate::config::Precision;
use crate::error::TrainError;
use crate::plan::Allocator;

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

/// `cpu`, `cuda`, `cuda:N`, `wgpu` or `wgpu:N` (any case; `gpu` is `cuda`).
impl FromStr for Device {
    type Err = String;

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
                        format!(
                            "`{s}` is not a device; use cpu, cuda, cuda:N, wgpu or wgpu:N (e.g. cuda:1)"
                        )
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

/// The devices a run trains on: one, or several of one kind for data-parallel training
/// (`cuda:0,cuda:1`), each holding a replica of the model that steps on the all-reduced
/// gradients of the group ([`crate::train_data_parallel`]). The first is the primary: it
/// evaluates, and its replica is the one checkpointed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Devices(Vec<Device>);

/// A comma-separated list of [`Device`]s of one kind, each once: `cuda:0,cuda:1`, `wgpu:0,wgpu:1`.
impl FromStr for Devices {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let list = s
            .split(',')
            .map(str::parse::<Device>)
            .collect::<Result<Vec<_>, _>>()?;
        Devices::new(list).map_err(|e| format!("`{s}`: {e}"))
    }
}

/// `cuda:0,cuda:1`, as [`FromStr`] reads it.
impl std::fmt::Display for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.iter().map(Device::to_string).collect();
        f.write_str(&names.join(","))
    }
}

impl From<Device> for Devices {
    fn from(device: Device) -> Self {
        Devices(vec![device])
    }
}

impl Devices {
    /// `list` as a run's devices: at least one, all of one kind, none twice (the CPU is one
    /// device: several CPU peers exist only through [`crate::train_data_parallel`], for tests).
    pub fn new(list: Vec<Device>) -> Result<Self, String> {
        let Some(&first) = list.first() else {
            return Err("no device given; use e.g. cuda:0 or cuda:0,cuda:1".into());
        };
        if let Some(other) = list
            .iter()
            .find(|d| d.backend_kind() != first.backend_kind())
        {
            return Err(format!(
                "{first} and {other} are different kinds of device; data-parallel training \
                 runs on devices of one kind (e.g. cuda:0,cuda:1)"
            ));
        }
        for (i, d) in list.iter().enumerate() {
            if list[..i].contains(d) {
                return Err(format!(
                    "{d} is named twice; each device holds one replica (e.g. cuda:0,cuda:1)"
                ));
            }
        }
        Ok(Devices(list))
    }

    /// The primary device: it evaluates, and its replica is checkpointed.
    pub fn primary(&self) -> Device {
        self.0[0]
    }

    /// How many devices: the replicas of the model, and the factor between the micro-batch
    /// and one round of the group.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a run has at least one device.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The devices, the primary first.
    pub fn iter(&self) -> impl Iterator<Item = Device> + '_ {
        self.0.iter().copied()
    }

    /// Checks every device ([`Device::check_available`]).
    pub fn check_available(&self) -> Result<(), TrainError> {
        self.iter().try_for_each(Device::check_available)
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

    /// Whether this build and this machine can use the device: the backend compiled in, and
    /// for CUDA an NVIDIA driver present (burn-cuda loads it lazily and panics without one).
    /// A wgpu adapter is looked up when it is opened ([`wgpu_adapter`]).
    pub fn check_available(self) -> Result<(), TrainError> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(_) if !cfg!(feature = "cuda") => Err(self.not_built()),
            Device::Cuda(_)
                if cfg!(target_os = "linux")
                    && !std::path::Path::new("/dev/nvidiactl").exists() =>
            {
                Err(self.unavailable(
                    "no NVIDIA GPU found on this machine (no /dev/nvidiactl); use --device cpu",
                ))
            }
            Device::Wgpu(_) if !cfg!(feature = "wgpu") => Err(self.not_built()),
            Device::Cuda(_) | Device::Wgpu(_) => Ok(()),
        }
    }

    /// The error for a device whose backend this build lacks: which feature to rebuild with.
    /// A binary whose own features decide its dispatch reports it the same way.
    pub fn not_built(self) -> TrainError {
        self.unavailable(match self {
            Device::Cpu => "the CPU backend is always built",
            Device::Cuda(_) => {
                "this segfit was built without CUDA support; rebuild with `--features cuda` (e.g. \
                 `cargo install --path crates/cli --features cuda`) or use --device cpu"
            }
            Device::Wgpu(_) => {
                "this segfit was built without wgpu support; rebuild with `--features wgpu` (the \
                 default) or use --device cpu"
            }
        })
    }

    fn unavailable(self, reason: &str) -> TrainError {
        TrainError::Device {
            device: self.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// The CUDA device `index`, after [`Device::check_available`].
#[cfg(feature = "cuda")]
pub fn cuda_device(index: usize) -> Result<burn::backend::cuda::CudaDevice, TrainError> {
    Device::Cuda(index).check_available()?;
    Ok(burn::backend::cuda::CudaDevice::new(index))
}

/// wgpu adapter `index` set up for burn-wgpu ([`segformer::wgpu_adapter`]'s numbering); its
/// name goes to stderr, with a note when it is a software adapter (lavapipe), which is far
/// slower than the CPU backend.
#[cfg(feature = "wgpu")]
pub fn wgpu_adapter(index: usize) -> Result<segformer::WgpuAdapter, TrainError> {
    let device = Device::Wgpu(index);
    device.check_available()?;
    let adapter = segformer::wgpu_adapter(index)
        .map_err(|e| device.unavailable(&format!("{e}; or use --device cpu")))?;
    let note = if adapter.is_software() {
        " (a software adapter: correct but slower than --device cpu)"
    } else {
        ""
    };
    eprintln!("{device}: {adapter}{note}");
    Ok(adapter)
}

/// Refuses a precision the wgpu adapter cannot compute in, naming the adapter and what works.
#[cfg(feature = "wgpu")]
pub(crate) fn check_precision(
    precision: Precision,
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

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

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
        for bad in ["tpu", "wgpu:", "cuda:x"] {
            let e = bad.parse::<Device>().unwrap_err();
            assert!(e.contains(bad) && e.contains("wgpu:N"), "{e}");
        }
    }

    #[test]
    fn parses_device_lists() {
        let two: Devices = "cuda:0,cuda:1".parse().unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two.primary(), Device::Cuda(0));
        assert_eq!(two.to_string(), "cuda:0,cuda:1");
        assert_eq!(two.to_string().parse::<Devices>().unwrap(), two);
        let one: Devices = "wgpu".parse().unwrap();
        assert_eq!(one, Devices::from(Device::Wgpu(0)));
        for (bad, says) in [
            ("cuda:0,wgpu:0", "different kinds"),
            ("cuda:1,cuda:1", "cuda:1 is named twice"),
            ("cpu,cpu", "cpu is named twice"),
            ("cuda:0,tpu", "`tpu` is not a device"),
        ] {
            let e = bad.parse::<Devices>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
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

    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_without_a_driver_says_so() {
        let available = Device::Cuda(0).check_available();
        if cfg!(target_os = "linux") && !std::path::Path::new("/dev/nvidiactl").exists() {
            let e = available.unwrap_err().to_string();
            assert!(e.starts_with("device cuda:0: "), "{e}");
            assert!(e.contains("no NVIDIA GPU found"), "{e}");
        } else {
            assert!(available.is_ok(), "{available:?}");
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_so() {
        let e = Device::Cuda(0).check_available().unwrap_err().to_string();
        assert!(e.starts_with("device cuda:0: "), "{e}");
        assert!(
            e.contains("without CUDA") && e.contains("--features cuda"),
            "{e}"
        );
    }
}
