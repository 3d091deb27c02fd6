//! Stochastic depth's per-sample scaling without a broadcast: on the CPU a `[B, N, C] ×
//! [B, 1, 1]` product takes burn-flex's slow strided path, so each sample's contiguous slice
//! is scaled (or zeroed) on its own.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use super::route;

/// `x · mask / keep` sample by sample, or `None` without a fused route for `x`.
///
/// # Shapes
/// - x: `[batch, seq, channels]`; mask: `[batch, 1, 1]` of 0 and 1
/// - output: `[batch, seq, channels]`
pub(crate) fn drop_samples<B: Backend>(
    x: &Tensor<B, 3>,
    mask: &Tensor<B, 3>,
    keep: f64,
) -> Option<Tensor<B, 3>> {
    route::<B>(&[x.dtype()])?;
    let mask = mask
        .clone()
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default();
    let samples = (0..x.dims()[0])
        .map(|i| {
            let sample = x.clone().narrow(0, i, 1);
            if mask.get(i).copied().unwrap_or(1.0) > 0.5 {
                sample.mul_scalar(1.0 / keep)
            } else {
                sample.zeros_like()
            }
        })
        .collect();
    Some(Tensor::cat(samples, 0))
}
