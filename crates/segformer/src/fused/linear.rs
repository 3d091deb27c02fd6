//! `y = x·W + b` over the last dimension, with one gemm per pass and no broadcast copies.

use burn::nn::Linear;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::{LinearOp, Precision};

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// `nn.Linear` on the last dimension (burn's weight layout `[d_input, d_output]`), its three
/// products (forward, input and weight gradients) in `precision`, or `None` without a bias or
/// a fused route for the tensors.
///
/// # Shapes
/// - x: `[..., d_input]`
/// - output: `[..., d_output]`
pub(crate) fn linear<B: Backend, const D: usize>(
    layer: &Linear<B>,
    x: &Tensor<B, D>,
    precision: Precision,
) -> Option<Tensor<B, D>> {
    let bias = layer.bias.as_ref()?;
    linear_with(x, layer.weight.val(), bias.val(), precision)
}

/// [`linear`] with the weight `[d_input, d_output]` and bias `[d_output]` given as tensors.
pub(crate) fn linear_with<B: Backend, const D: usize>(
    x: &Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Tensor<B, 1>,
    precision: Precision,
) -> Option<Tensor<B, D>> {
    let route = route::<B>(&[x.dtype(), weight.dtype(), bias.dtype()])?;
    let out = apply::<B, _, 3>(
        route,
        &LinearOp { precision },
        [primitive(x.clone()), primitive(weight), primitive(bias)],
    );
    Some(tensor(out))
}
