//! SegFormer (MiT-B0…B5 encoder + all-MLP decode head) in burn, numerically identical to
//! HF transformers' `SegformerForSemanticSegmentation`, with HF checkpoint loading/saving.
//!
//! ```
//! use burn::backend::Flex;
//! use burn::tensor::{Int, Tensor};
//! use segformer::SegformerConfig;
//!
//! let device = Default::default();
//! // A 4-band (RGB + NIR) MiT-B0 with 3 classes.
//! let config = SegformerConfig::mit_b0().with_num_channels(4).with_num_labels(3);
//! let model = config.init::<Flex>(&device).unwrap();
//!
//! let pixels = Tensor::<Flex, 4>::zeros([1, 4, 64, 64], &device);
//! let logits = model.forward(pixels);
//! assert_eq!(logits.dims(), [1, 3, 16, 16]); // a quarter of the input resolution
//!
//! let labels = Tensor::<Flex, 3, Int>::zeros([1, 64, 64], &device);
//! let loss = model.loss(logits, labels);
//! assert_eq!(loss.dims(), [1]);
//! ```
#![deny(missing_docs)]

#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod autotune;
mod batch_norm;
mod bilinear;
mod compute;
mod config;
mod encoder;
mod fused;
#[cfg(all(debug_assertions, not(test)))]
mod instances;
mod layers;
mod losses;
mod model;
mod ops;
mod recompute;
#[cfg(test)]
mod test_support;
mod weights;
#[cfg(feature = "wgpu")]
mod wgpu_device;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub use autotune::{Autotune, AutotuneError, AutotuneLevel, set_autotune};
pub use bilinear::resize_bilinear;
#[cfg(feature = "wgpu")]
pub use compute::WgpuUnfused;
pub use compute::{BackendKind, KernelPath, Kernels};
pub use config::{ConfigError, SegformerConfig};
#[cfg(all(debug_assertions, not(test)))]
#[doc(hidden)]
pub use instances::instances;
pub use losses::{LossKind, LossTerm, SegLoss, median_frequency_weights};
pub use model::Segformer;
pub use recompute::loss_band_elements;
pub use weights::{
    Adapted, InputAdapt, LoadReport, WeightsError, hf_gradients, hf_state_dict,
    hf_state_dict_original, load_hf_dir, load_pretrained, load_pretrained_adapted, read_config,
    save_hf_dir,
};
#[cfg(feature = "wgpu")]
pub use wgpu_device::{WgpuAdapter, WgpuError, wgpu_adapter};

/// Runs `f` on a thread of the pool that burn-flex's ops and the fused CPU kernels split their
/// work on (rayon's global pool) when `B` is burn-flex, and on this thread otherwise.
///
/// A model driven from a thread outside that pool hands every parallel op over to the pool and
/// sleeps until the op is done, then wakes: thousands of hand-overs per scene. Driven from
/// inside the pool, each op starts on its own thread and the others join in. The results are
/// the same either way.
pub fn on_cpu_pool<B: burn::tensor::backend::Backend, R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if fused::route::<B>(&[]).is_some() {
        rayon::scope(|_| f())
    } else {
        f()
    }
}

/// Whether this CPU runs the fused kernels' bf16 products (AVX512-BF16, detected at run time).
/// A bf16 model ([`Segformer::with_compute_dtype`]) on burn-flex multiplies bf16 operands with
/// f32 sums in its linear layers, patch convs and attention where it does, and computes in f32
/// where it does not.
pub fn cpu_has_bf16_kernels() -> bool {
    fused::cpu::has_bf16()
}
