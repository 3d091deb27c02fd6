//! Choosing the backend a run uses: the device, and whether activations are checkpointed.

use std::str::FromStr;

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};

use crate::config::TrainConfig;
use crate::error::TrainError;
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

impl Device {
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
            let guarded = |f: &dyn Fn() -> Result<RunSummary, TrainError>| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    if msg.to_ascii_lowercase().contains("out of memory") || msg.contains("OutOfMemory") {
                        Err(TrainError::OutOfMemory {
                            what: format!("training on cuda:{index} at batch {}, {:?}", cfg.train.batch_size, cfg.data.size),
                            detail: format!(
                                "{msg}; lower train.batch_size and raise train.accumulation_steps, set train.precision = \"bf16\", \
                                 or enable train.checkpointing (see `segfit plan`)"
                            ),
                        })
                    } else {
                        std::panic::resume_unwind(panic)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
        let e = "tpu".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("tpu") && e.contains("cuda:N"), "{e}");
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
