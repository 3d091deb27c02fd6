//! segformer's fused CPU kernels: the forward and backward passes of the layers where
//! burn-flex's op-by-op composition spends its time in strided copies and keeps many
//! intermediates alive for autodiff (linear layers, LayerNorm, multi-head attention with the
//! scores recomputed in the backward pass, the Mix-FFN depthwise conv with its activation, the
//! decode head's tail, the segmentation loss, patch gathers and transposes), on contiguous
//! f32 burn-flex tensors.
//!
//! Each op is a [`FusedOp`]: a forward that returns what its backward needs, and a backward.
//! `segformer` routes its layers here on burn-flex backends and registers each op as a custom
//! autodiff step; this crate knows nothing of burn's generic `Backend`, so everything in it is
//! compiled once, optimised (the workspace builds it at opt-level 3 even in test builds, while
//! the model code that monomorphises burn builds unoptimised), and the kernels' speed does not
//! depend on which crate instantiates the model. Each op is tested against burn's
//! composition of the same maths (values and gradients) in `segformer`'s tests.

#![deny(missing_docs)]

mod attention;
pub mod cpu;
mod decode;
mod dwconv;
pub mod gemm;
mod im2col;
mod layer_norm;
mod linear;
mod loss;
mod math;
mod patches;
mod taps;
mod transpose;

use std::fmt::Debug;

use burn::backend::flex::FlexTensor;
use burn::tensor::{DType, TensorData};

pub use attention::AttentionOp;
pub use decode::{DecodeTail, Dropout, Stats};
pub use dwconv::{Activation, DwConvOp};
pub use gemm::Precision;
pub use im2col::Im2col;
pub use layer_norm::LayerNormOp;
pub use linear::LinearOp;
pub use loss::CrossEntropy;
pub use patches::Patches;
pub use taps::{Taps, taps};
pub use transpose::{Transpose, transpose_batched};

/// A fused operation on f32 `Flex` tensors: a forward that returns what its backward needs,
/// and a backward that returns the gradients of the inputs that need one.
pub trait FusedOp<const N: usize>: Clone + Send + Sync + Debug + 'static {
    /// What the forward pass keeps for the backward pass.
    type Saved: Clone + Send + Sync + Debug + 'static;

    /// Computes the output; `Some(saved)` only when `keep` (a tracked autodiff graph).
    fn forward(&self, inputs: [&FlexTensor; N], keep: bool) -> (FlexTensor, Option<Self::Saved>);

    /// Gradients of the inputs from the output's gradient; `None` where `needed` is false.
    fn backward(
        &self,
        saved: Self::Saved,
        grad: FlexTensor,
        needed: [bool; N],
    ) -> [Option<FlexTensor>; N];
}

/// The f32 values of a `Flex` tensor in row-major order: its own storage when contiguous,
/// else one contiguous copy. A transposed matrix (burn's linear weights loaded from PyTorch's
/// `[out, in]` are such views) is copied by the blocked transpose: burn-flex's generic strided
/// copy of every weight on every forward was a sixth of a small-window scene prediction's time.
///
/// The products read these row-major copies, never the strided views themselves: with a
/// column-major right-hand side, the `gemm` crate's rounding depends on the number of rows,
/// and a window's logits would change with the batch it is predicted in.
pub(crate) fn values(t: &FlexTensor) -> Values<'_> {
    if let Some(s) = t.as_slice::<f32>() {
        return Values::Borrowed(s);
    }
    let layout = t.layout();
    let shape = layout.shape();
    if shape.num_dims() == 2 && t.dtype() == DType::F32 {
        let (rows, cols) = (shape[0], shape[1]);
        if layout.strides() == [1, rows as isize] {
            // The storage holds the row-major `[cols, rows]` transpose.
            let src = &t.storage::<f32>()[layout.start_offset()..][..rows * cols];
            return Values::Owned(transpose_batched(src, 1, cols, rows));
        }
    }
    Values::Copied(t.to_contiguous())
}

/// What [`values`] returns: a borrowed slice, or the contiguous copy that holds the values.
pub(crate) enum Values<'a> {
    /// The tensor's own storage.
    Borrowed(&'a [f32]),
    /// A transposed matrix's values, transposed back.
    Owned(Vec<f32>),
    /// A contiguous copy (one pass over the strided view).
    Copied(FlexTensor),
}

impl std::ops::Deref for Values<'_> {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match self {
            Self::Borrowed(s) => s,
            Self::Owned(v) => v,
            Self::Copied(t) => t.as_slice::<f32>().expect("a contiguous f32 copy"),
        }
    }
}

/// `len` zeros written by rayon's threads. A large `vec![0.0; len]` is a memset on the
/// model's thread while the pool waits (with freed memory kept for reuse, the allocator
/// cannot hand out fresh zeroed pages): for output buffers that the parallel pass then fills.
/// Below 64 Ki floats (256 KiB) it stays a plain memset: a threshold chosen, not measured.
pub(crate) fn zeros(len: usize) -> Vec<f32> {
    use rayon::iter::ParallelExtend;
    if len < 1 << 16 {
        return vec![0.0; len];
    }
    let mut v = Vec::with_capacity(len);
    v.par_extend(rayon::iter::repeat_n(0.0f32, len));
    v
}

/// A contiguous f32 `Flex` tensor owning `data`.
pub(crate) fn flex(data: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(data, shape.to_vec()))
}

/// The dimensions of a `Flex` tensor.
pub(crate) fn dims(t: &FlexTensor) -> Vec<usize> {
    t.layout().shape().to_vec()
}

/// Rows per parallel task so that each task touches about `target` floats.
pub(crate) fn rows_per_task(row_len: usize, target: usize) -> usize {
    (target / row_len.max(1)).max(1)
}

/// `acc += v`, element-wise.
pub(crate) fn add_into(acc: &mut [f32], v: &[f32]) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a += x;
    }
}

/// The element-wise sum of per-task partial results, added in task order so that the result
/// does not depend on which thread ran which task.
pub(crate) fn sum_in_order(partials: Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    let mut total = vec![0.0f32; len];
    for p in &partials {
        add_into(&mut total, p);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`values`] of strided matrices: the transposed view (the blocked transpose) and others (a
    /// contiguous copy) in row-major order, element by element.
    #[test]
    fn values_of_strided_matrices_are_row_major() {
        let t = flex((0..35).map(|v| v as f32 * 0.5).collect(), &[5, 7]);
        let flipped = t.clone().with_layout(t.layout().flip(&[1]));
        let at = |m: &FlexTensor, i: usize, j: usize| {
            let l = m.layout();
            let idx = l.start_offset() as isize
                + i as isize * l.strides()[0]
                + j as isize * l.strides()[1];
            m.storage::<f32>()[idx as usize]
        };
        for (case, m) in [t.transpose(0, 1), t.narrow(1, 2, 3), flipped]
            .iter()
            .enumerate()
        {
            let v = values(m);
            let [rows, cols] = [dims(m)[0], dims(m)[1]];
            assert_eq!(v.len(), rows * cols, "case {case}");
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(v[i * cols + j], at(m, i, j), "case {case} ({i}, {j})");
                }
            }
        }
        assert!(matches!(values(&t.transpose(0, 1)), Values::Owned(_)));
    }
}
