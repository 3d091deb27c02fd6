//! Non-overlapping `s × s` patches of a channels-last sequence gathered into rows: the input
//! of a kernel = stride conv written as a matrix product. Each patch row is `s` contiguous
//! runs of `s·C` floats, so the gather is a sequence of slice copies (burn-flex would copy the
//! equivalent 6-d permutation element by element), and its backward the matching scatter.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::Patches;

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// The `s × s` patches of each `h × w` map, row-major, each patch as `(ky, kx, c)`; rows and
/// columns past the last whole patch are left out, as a conv without padding leaves them.
///
/// # Shapes
/// - x: `[batch, h·w, C]`
/// - output: `[batch, (h/s)·(w/s), s·s·C]`
pub(crate) fn patches<B: Backend>(
    x: &Tensor<B, 3>,
    hw: [usize; 2],
    s: usize,
) -> Option<Tensor<B, 3>> {
    let route = route::<B>(&[x.dtype()])?;
    let [h, w] = hw;
    (s > 0 && h >= s && w >= s && x.dims()[1] == h * w).then_some(())?;
    Some(tensor(apply::<B, _, 1>(
        route,
        &Patches { h, w, s },
        [primitive(x.clone())],
    )))
}
