//! `--device cpu|cuda[:N]|wgpu[:N]`: which backend runs the model; `--kernels auto|recompute|composed`:
//! which implementation of its layers.

use std::str::FromStr;

use anyhow::{Result, bail};

/// Where the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceArg {
    /// burn's CPU backend (`Flex`).
    #[default]
    Cpu,
    /// CUDA GPU number `N`.
    Cuda(usize),
    /// wgpu adapter number `N` (burn-wgpu on Vulkan, Metal or DX12).
    Wgpu(usize),
}

impl DeviceArg {
    /// The same device for `train`.
    pub fn train_device(self) -> train::Device {
        match self {
            DeviceArg::Cpu => train::Device::Cpu,
            DeviceArg::Cuda(index) => train::Device::Cuda(index),
            DeviceArg::Wgpu(index) => train::Device::Wgpu(index),
        }
    }
}

impl FromStr for DeviceArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "cpu" => Ok(DeviceArg::Cpu),
            "cuda" | "gpu" => Ok(DeviceArg::Cuda(0)),
            "wgpu" => Ok(DeviceArg::Wgpu(0)),
            other => {
                let index = |prefix: &str| other.strip_prefix(prefix)?.parse::<usize>().ok();
                index("cuda:")
                    .map(DeviceArg::Cuda)
                    .or_else(|| index("wgpu:").map(DeviceArg::Wgpu))
                    .ok_or_else(|| {
                        format!(
                            "`{s}` is not a device; use cpu, cuda, cuda:N, wgpu or wgpu:N (e.g. cuda:1)"
                        )
                    })
            }
        }
    }
}

impl std::fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceArg::Cpu => write!(f, "cpu"),
            DeviceArg::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceArg::Wgpu(n) => write!(f, "wgpu:{n}"),
        }
    }
}

/// `--kernels`: the model's [`segformer::Kernels`], `auto` (the fastest the backend has),
/// `recompute` (no fused CPU kernels) or `composed` (burn's plain composition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KernelsArg(pub segformer::Kernels);

impl FromStr for KernelsArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        use segformer::Kernels;
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(KernelsArg(Kernels::Auto)),
            "recompute" => Ok(KernelsArg(Kernels::Recompute)),
            "composed" => Ok(KernelsArg(Kernels::Composed)),
            _ => Err(format!(
                "`{s}` is not a kernel choice; use auto, recompute or composed"
            )),
        }
    }
}

/// `auto`, `recompute` or `composed`, as [`FromStr`] reads it.
impl std::fmt::Display for KernelsArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The CUDA device `index`, after checking that this build and this machine can use it.
#[cfg(feature = "cuda")]
pub fn cuda_device(index: usize) -> Result<burn::backend::cuda::CudaDevice> {
    // The driver is loaded lazily and panics when absent: look for it first, so the user gets
    // a sentence instead of a backtrace.
    if cfg!(target_os = "linux") && !std::path::Path::new("/dev/nvidiactl").exists() {
        bail!(
            "--device cuda:{index}: no NVIDIA GPU found on this machine (no /dev/nvidiactl); use --device cpu"
        );
    }
    Ok(burn::backend::cuda::CudaDevice::new(index))
}

/// Refuses CUDA in a build without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub fn no_cuda(index: usize) -> Result<std::convert::Infallible> {
    bail!(
        "--device cuda:{index}: this segfit was built without CUDA support; rebuild with \
         `cargo build --release -p segfit --features cuda` or use --device cpu"
    )
}

/// wgpu adapter `index`, set up for burn-wgpu; its name goes to stderr, with a note when it is a
/// software adapter (lavapipe), which is far slower than `--device cpu`.
#[cfg(feature = "wgpu")]
pub fn wgpu_device(index: usize) -> Result<burn::backend::wgpu::WgpuDevice> {
    let adapter = segformer::wgpu_adapter(index)
        .map_err(|e| anyhow::anyhow!("--device wgpu:{index}: {e}; or use --device cpu"))?;
    let note = if adapter.is_software() {
        " (a software adapter: correct but slower than --device cpu)"
    } else {
        ""
    };
    eprintln!("wgpu:{index}: {adapter}{note}");
    Ok(adapter.device)
}

/// Refuses wgpu in a build without the `wgpu` feature.
#[cfg(not(feature = "wgpu"))]
pub fn no_wgpu(index: usize) -> Result<std::convert::Infallible> {
    bail!(
        "--device wgpu:{index}: this segfit was built without wgpu support; rebuild with the \
         default features (`cargo build --release -p segfit`) or use --device cpu"
    )
}

/// Calls `f::<B>(args…, &device)` with the inference backend `B` that `--device` names.
macro_rules! on_device {
    ($device:expr, $f:ident ( $($arg:expr),* )) => {
        match $device {
            $crate::device::DeviceArg::Cpu => $f::<burn::backend::Flex>($($arg,)* &Default::default()),
            $crate::device::DeviceArg::Cuda(index) => {
                #[cfg(feature = "cuda")]
                {
                    let device = $crate::device::cuda_device(index)?;
                    $f::<burn::backend::Cuda>($($arg,)* &device)
                }
                #[cfg(not(feature = "cuda"))]
                {
                    match $crate::device::no_cuda(index)? {}
                }
            }
            $crate::device::DeviceArg::Wgpu(index) => {
                #[cfg(feature = "wgpu")]
                {
                    let device = $crate::device::wgpu_device(index)?;
                    $f::<burn::backend::Wgpu>($($arg,)* &device)
                }
                #[cfg(not(feature = "wgpu"))]
                {
                    match $crate::device::no_wgpu(index)? {}
                }
            }
        }
    };
}
pub(crate) use on_device;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices() {
        let check =
            |s: &str, d: Option<DeviceArg>| assert_eq!(s.parse::<DeviceArg>().ok(), d, "{s}");
        check("cpu", Some(DeviceArg::Cpu));
        check("CUDA", Some(DeviceArg::Cuda(0)));
        check("cuda:3", Some(DeviceArg::Cuda(3)));
        check("wgpu", Some(DeviceArg::Wgpu(0)));
        check("WGPU:2", Some(DeviceArg::Wgpu(2)));
        check("wgpu:", None);
        for d in [DeviceArg::Cpu, DeviceArg::Cuda(1), DeviceArg::Wgpu(2)] {
            check(&d.to_string(), Some(d));
        }
        check("cuda:x", None);
        check("tpu", None);
    }

    #[test]
    fn parses_kernel_choices() {
        use segformer::Kernels;
        for k in [Kernels::Auto, Kernels::Recompute, Kernels::Composed] {
            let arg = KernelsArg(k);
            assert_eq!(arg.to_string().parse::<KernelsArg>(), Ok(arg));
        }
        assert_eq!(" Composed".parse(), Ok(KernelsArg(Kernels::Composed)));
        let e = "fused".parse::<KernelsArg>().unwrap_err();
        assert_eq!(
            e,
            "`fused` is not a kernel choice; use auto, recompute or composed"
        );
    }
}
