//! The patches of a strided, zero-padded conv gathered into rows (im2col), so that the conv
//! is one matrix product through the fused linear; the backward pass scatters the rows'
//! gradients back onto the input (col2im). Used by the overlapping patch embeddings, whose
//! output the encoder wants channels-last anyway: the product gives `[batch, h·w, C_out]`
//! directly, without burn-flex's generic conv and the transpose after it.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::Im2col;

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// The `k × k` patches (stride `stride`, `pad` zeros on every side) of a channels-first map,
/// one row per output position, each patch as `(c, ky, kx)`: the row layout of a conv weight
/// `[C_out, C, k, k]` reshaped to `[C_out, C·k·k]`.
///
/// # Shapes
/// - x: `[batch, C, H, W]`
/// - output: `[batch, h·w, C·k·k]` with `h = (H + 2·pad − k) / stride + 1` (likewise `w`)
pub(crate) fn im2col<B: Backend>(
    x: &Tensor<B, 4>,
    k: usize,
    stride: usize,
    pad: usize,
) -> Option<Tensor<B, 3>> {
    let route = route::<B>(&[x.dtype()])?;
    let [_, _, h, w] = x.dims();
    (k > 0 && stride > 0 && h + 2 * pad >= k && w + 2 * pad >= k).then_some(())?;
    Some(tensor(apply::<B, _, 1>(
        route,
        &Im2col { k, stride, pad },
        [primitive(x.clone())],
    )))
}
