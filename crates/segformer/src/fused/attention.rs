//! Multi-head scaled dot-product attention on `[B, N, C]` tensors, heads read in place with
//! strided gemm (no head split/merge copies). The backward pass recomputes the scores block by
//! block from Q and K, so the `heads·N·M` probabilities are never kept between the passes.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::{AttentionOp, Precision};

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// `softmax(Q·Kᵀ/√d)·V` per head, heads interleaved in the channel dimension
/// (`C = heads · d`, head `h` owning channels `h·d..(h+1)·d`), the products (forward and
/// backward) in `precision` and the softmax in f32, or `None` without a fused route for the
/// tensors.
///
/// # Shapes
/// - query: `[batch, N, C]`, key and value: `[batch, M, C]`
/// - output: `[batch, N, C]`
pub(crate) fn attention<B: Backend>(
    query: &Tensor<B, 3>,
    key: &Tensor<B, 3>,
    value: &Tensor<B, 3>,
    heads: usize,
    precision: Precision,
) -> Option<Tensor<B, 3>> {
    let route = route::<B>(&[query.dtype(), key.dtype(), value.dtype()])?;
    let inputs = [query, key, value].map(|t| primitive(t.clone()));
    Some(tensor(apply::<B, _, 3>(
        route,
        &AttentionOp { heads, precision },
        inputs,
    )))
}
