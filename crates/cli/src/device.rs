//! `--device cpu|cuda[:N]`: which backend runs the model; `--kernels auto|recompute|composed`:
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
}

impl DeviceArg {
    /// The same device for `train`.
    pub fn train_device(self) -> train::Device {
        match self {
            DeviceArg::Cpu => train::Device::Cpu,
            DeviceArg::Cuda(index) => train::Device::Cuda(index),
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
            other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(DeviceArg::Cuda(n)),
                _ => Err(format!(
                    "`{s}` is not a device; use cpu, cuda or cuda:N (e.g. cuda:1)"
                )),
            },
        }
    }
}

impl std::fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceArg::Cpu => write!(f, "cpu"),
            DeviceArg::Cuda(n) => write!(f, "cuda:{n}"),
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
