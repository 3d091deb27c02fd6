//! `[B, X, Y] → [B, Y, X]` as a cache-blocked copy (burn-flex copies strided views element by
//! element through a generic index iterator).

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::Transpose;

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// Swaps the last two dimensions into a contiguous tensor.
///
/// # Shapes
/// - x: `[batch, X, Y]`
/// - output: `[batch, Y, X]`
pub(crate) fn transpose12<B: Backend>(x: &Tensor<B, 3>) -> Option<Tensor<B, 3>> {
    let route = route::<B>(&[x.dtype()])?;
    Some(tensor(apply::<B, _, 1>(
        route,
        &Transpose,
        [primitive(x.clone())],
    )))
}
