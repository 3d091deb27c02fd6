//! Bilinear resizing with PyTorch's `align_corners = false`: the tensor op, from the source
//! taps the fused and recomputing kernels interpolate with (`kernels::taps`; a leaf module,
//! like `compute`).

use burn::tensor::backend::Backend;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Int, Tensor, TensorData};

pub(crate) use kernels::taps;

use crate::compute::Route;

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
    let flex = matches!(
        Route::of::<B>(),
        Some(Route::Flex | Route::FlexAutodiff | Route::FlexAutodiffBalanced)
    );
    if B::ad_enabled(&x.device()) && !flex {
        // NOTE: burn-cubecl (burn-cuda, burn-wgpu) has no backward for `interpolate` ("bilinear
        // interpolation backward is not supported by JIT backend"): on autodiff backends other
        // than burn-flex the resize is composed of gathers, whose backward every backend has.
        return resize_separable(x, size);
    }
    let options = InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(false);
    interpolate(x, size, options)
}

/// [`resize_bilinear`] as two 1-D interpolations (width, then height), each two gathers of
/// source rows/columns and a weighted sum: the same taps and weights as PyTorch's kernel.
fn resize_separable<B: Backend>(x: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    let x = if w == size[1] {
        x
    } else {
        along(x, 3, w, size[1])
    };
    if h == size[0] {
        x
    } else {
        along(x, 2, h, size[0])
    }
}

/// Bilinear interpolation of `x` along `dim` from `input` to `output` positions.
fn along<B: Backend>(x: Tensor<B, 4>, dim: usize, input: usize, output: usize) -> Tensor<B, 4> {
    let t = taps(input, output);
    let device = x.device();
    let index = |f: fn(&(usize, usize, f32)) -> usize| {
        let v: Vec<i64> = t.iter().map(|x| f(x) as i64).collect();
        Tensor::<B, 1, Int>::from_data(TensorData::new(v, [output]), &device)
    };
    let mut shape = [1; 4];
    shape[dim] = output;
    let weight: Vec<f32> = t.iter().map(|x| x.2).collect();
    let weight = Tensor::<B, 1>::from_data(TensorData::new(weight, [output]), &device)
        .cast(x.dtype())
        .reshape(shape);
    let low = x.clone().select(dim, index(|x| x.0));
    let high = x.select(dim, index(|x| x.1));
    low.clone() + (high - low) * weight
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;
    use crate::test_support::{assert_close, forward_backward, random};

    /// The gathers against burn-flex's interpolation kernel: values and the input gradient,
    /// upsampling (the decode head's ×2, ×4, ×8) and an odd ratio.
    #[test]
    fn separable_resize_matches_the_interpolation_kernel() {
        type A = Autodiff<Flex>;
        for (from, to) in [([8, 8], [16, 16]), ([4, 6], [16, 24]), ([5, 7], [17, 23])] {
            let x = random::<A, 4>([2, 3, from[0], from[1]], 3);
            let (ko, kg) = forward_backward(&[x.clone()], |t| resize_bilinear(t[0].clone(), to));
            let (so, sg) = forward_backward(&[x], |t| resize_separable(t[0].clone(), to));
            assert_close("out", so, ko, 1e-6);
            assert_close("dx", sg[0].clone(), kg[0].clone(), 1e-5);
        }
    }
}
