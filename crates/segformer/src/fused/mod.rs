//! Fused CPU kernels with their own backward passes, for the layers where burn-flex's generic
//! op-by-op composition spends its time in strided copies and keeps many intermediates alive
//! for autodiff: linear layers, LayerNorm, multi-head attention (scores recomputed in the
//! backward pass, never stored), the channels-last Mix-FFN depthwise conv with its activation,
//! and `[B, X, Y] → [B, Y, X]` transposes.
//!
//! The kernels themselves (each a `kernels::FusedOp`: forward, backward, on f32 burn-flex
//! tensors) are the `kernels` crate, which knows nothing of burn's generic `Backend` and is
//! built optimised even in test builds; this module is the model's side: which layer and
//! backend each serves, and their registration as autodiff steps.
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
mod decode;
mod drop_path;
mod dwconv;
mod im2col;
mod layer_norm;
mod linear;
mod loss;
mod patches;
mod transpose;

#[cfg(test)]
mod tests;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::{Flex, FlexTensor};
use burn::tensor::DType;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use kernels::FusedOp;

use crate::compute::{Route, same, split};

pub(crate) use attention::attention;
pub(crate) use decode::{Dropout, Norm, upsample_sum_bn_relu};
pub(crate) use drop_path::drop_samples;
pub(crate) use dwconv::dwconv3x3_act;
pub(crate) use im2col::im2col;
pub(crate) use kernels::{Precision, cpu, transpose_batched};
pub(crate) use layer_norm::layer_norm;
pub(crate) use linear::{linear, linear_with};
pub(crate) use loss::upsample_cross_entropy;
pub(crate) use patches::patches;
pub(crate) use transpose::transpose12;

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
    // The inputs' reference counts live until the output is registered (see `split`).
    let (primitives, alive) = split(inputs);
    let out = match FusedBackward(op.clone())
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (out, saved) = op.forward(primitives.each_ref(), true);
            prep.finish(saved.expect("a tracked forward keeps its state"), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(op.forward(primitives.each_ref(), false).0),
    };
    drop(alive);
    out
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
