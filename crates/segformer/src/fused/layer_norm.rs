//! LayerNorm over the last dimension: one pass per row forward, one backward, keeping only the
//! input and the per-row mean and 1/σ (burn's composition keeps five full-size tensors).

use burn::nn::LayerNorm;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::LayerNormOp;

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// `nn.LayerNorm(C, eps)` on the last dimension, or `None` without a bias or a fused route for
/// the tensors.
///
/// # Shapes
/// - x: `[..., C]`
/// - output: `[..., C]`
pub(crate) fn layer_norm<B: Backend, const D: usize>(
    norm: &LayerNorm<B>,
    x: &Tensor<B, D>,
    eps: f64,
) -> Option<Tensor<B, D>> {
    let beta = norm.beta.as_ref()?;
    let (gamma, beta) = (norm.gamma.val(), beta.val());
    let route = route::<B>(&[x.dtype(), gamma.dtype(), beta.dtype()])?;
    let op = LayerNormOp { eps: eps as f32 };
    Some(tensor(apply::<B, _, 3>(
        route,
        &op,
        [primitive(x.clone()), primitive(gamma), primitive(beta)],
    )))
}
