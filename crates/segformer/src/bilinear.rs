//! Bilinear resizing with PyTorch's `align_corners = false`: the tensor op, and the source
//! taps the fused and recomputing kernels interpolate with (a leaf module, like `compute`).

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};

/// Bilinear resize with PyTorch's `align_corners = False` (burn defaults to `true`).
///
/// # Shapes
/// - input: `[batch, channels, h, w]`
/// - output: `[batch, channels, size[0], size[1]]`
pub fn resize_bilinear<B: Backend>(x: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    if [h, w] == size {
        // Half-pixel bilinear at scale 1 is the identity.
        return x;
    }
    let options = InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(false);
    interpolate(x, size, options)
}

/// Per output coordinate: `(low, high, weight of high)`.
pub(crate) type Taps = Vec<(usize, usize, f32)>;

/// Source taps of bilinear upsampling (`align_corners = false`) for each output coordinate:
/// `(low, high, weight of high)`, the same arithmetic as burn's and PyTorch's kernels.
pub(crate) fn taps(input: usize, output: usize) -> Taps {
    let ratio = input as f64 / output as f64;
    (0..output)
        .map(|o| {
            let src = (o as f64 + 0.5) * ratio - 0.5;
            let lo = src.floor().max(0.0) as usize;
            let hi = (lo + 1).min(input - 1);
            (lo, hi, (src - lo as f64).max(0.0) as f32)
        })
        .collect()
}
