//! Fused CPU kernels with their own backward passes, for the layers where burn-flex's generic
//! op-by-op composition spends its time in strided copies and keeps many intermediates alive
//! for autodiff: linear layers, LayerNorm, multi-head attention (scores recomputed in the
//! backward pass, never stored), the channels-last Mix-FFN depthwise conv with its activation,
//! and `[B, X, Y] → [B, Y, X]` transposes.
//!
//! These serve `Flex` (inference) and `Autodiff<Flex, _>` (training, with or without
//! activation checkpointing), on f32 tensors, each with a hand-written backward registered as
//! a custom autodiff step. Each entry returns `None` where it does not serve its inputs
//! (another backend or dtype, a layer shape it was not written for); `crate::ops` calls it
//! when the model's kernels resolve to [`KernelPath::Fused`](crate::KernelPath::Fused) and
//! falls back to the recomputing op or burn's composition.
//!
//! The model stays generic over `B: Backend`: [`route`] finds the backend type at run time
//! (`TypeId`, the table in `crate::compute`), and the primitives are moved across with `Any`
//! downcasts, so there is no `unsafe` in the dispatch and no extra trait bound on users of
//! the model.
//!
//! Each op is tested against its composition from burn ops (values and gradients) in
//! `tests.rs`, and the whole model against HF transformers in the crate's parity tests.

mod attention;
pub(crate) mod cpu;
mod decode;
mod drop_path;
mod dwconv;
mod gemm;
mod im2col;
mod layer_norm;
mod linear;
mod loss;
mod math;
mod patches;
mod transpose;

#[cfg(test)]
mod tests;

use std::fmt::Debug;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::{Flex, FlexTensor};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, TensorData};

use crate::compute::{Route, same};

pub(crate) use attention::attention;
pub(crate) use decode::{Dropout, Norm, upsample_sum_bn_relu};
pub(crate) use drop_path::drop_samples;
pub(crate) use dwconv::dwconv3x3_act;
pub(crate) use gemm::Precision;
pub(crate) use im2col::im2col;
pub(crate) use layer_norm::layer_norm;
pub(crate) use linear::{linear, linear_with};
pub(crate) use loss::upsample_cross_entropy;
pub(crate) use patches::patches;
pub(crate) use transpose::{transpose_batched, transpose12};

/// The route of backend `B` when it is a burn-flex one and every tensor in `dtypes` is f32.
pub(crate) fn route<B: Backend>(dtypes: &[DType]) -> Option<Route> {
    if dtypes.iter().any(|d| *d != DType::F32) {
        return None;
    }
    Route::of::<B>().filter(|r| {
        matches!(
            r,
            Route::Flex | Route::FlexAutodiff | Route::FlexAutodiffBalanced
        )
    })
}

/// A fused operation on f32 `Flex` tensors: a forward that returns what its backward needs,
/// and a backward that returns the gradients of the inputs that need one.
pub(crate) trait FusedOp<const N: usize>: Clone + Send + Sync + Debug + 'static {
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

/// Runs `op` on `B`'s primitives through the route found by [`route`].
pub(crate) fn apply<B: Backend, O: FusedOp<N>, const N: usize>(
    route: Route,
    op: &O,
    inputs: [FloatTensor<B>; N],
) -> FloatTensor<B> {
    match route {
        Route::Flex => {
            let inputs: [FlexTensor; N] = inputs.map(same);
            same(op.forward(inputs.each_ref(), false).0)
        }
        Route::FlexAutodiff => same(apply_autodiff::<NoCheckpointing, O, N>(
            op,
            inputs.map(same),
        )),
        Route::FlexAutodiffBalanced => same(apply_autodiff::<BalancedCheckpointing, O, N>(
            op,
            inputs.map(same),
        )),
        #[cfg(feature = "cuda")]
        Route::CudaAutodiff | Route::CudaAutodiffBalanced => {
            unreachable!("fused::route returns burn-flex routes only")
        }
        #[cfg(feature = "wgpu")]
        Route::WgpuAutodiff
        | Route::WgpuAutodiffBalanced
        | Route::WgpuUnfusedAutodiff
        | Route::WgpuUnfusedAutodiffBalanced => {
            unreachable!("fused::route returns burn-flex routes only")
        }
    }
}

fn apply_autodiff<C: CheckpointStrategy, O: FusedOp<N>, const N: usize>(
    op: &O,
    inputs: [FloatTensor<Autodiff<Flex, C>>; N],
) -> FloatTensor<Autodiff<Flex, C>> {
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    let primitives = inputs.map(|t| t.primitive);
    match FusedBackward(op.clone())
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (out, saved) = op.forward(primitives.each_ref(), true);
            prep.finish(saved.expect("a tracked forward keeps its state"), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(op.forward(primitives.each_ref(), false).0),
    }
}

#[derive(Debug)]
struct FusedBackward<O>(O);

impl<O: FusedOp<N>, const N: usize> Backward<Flex, N> for FusedBackward<O> {
    type State = O::Saved;

    fn backward(self, ops: Ops<O::Saved, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let needed = ops.parents.each_ref().map(Option::is_some);
        let input_grads = self.0.backward(ops.state, grad, needed);
        for (parent, g) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(node), Some(g)) = (parent, g) {
                grads.register::<Flex>(node.id, g);
            }
        }
    }
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
            return Values::Owned(transpose::transpose_batched(src, 1, cols, rows));
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
