//! Memory-saving ops for every backend (burn-cuda above all): the two places where burn's
//! op-by-op graph keeps the most for the backward pass get a custom autodiff step that keeps
//! only the op's inputs and recomputes the rest, in bounded chunks, when the gradient comes:
//! - multi-head attention keeps `Q, K, V`, never the `heads·N·M` scores and probabilities
//!   (about two thirds of a MiT-B0 step at 1024² under burn's composition);
//! - the loss keeps the quarter-resolution logits, never the `labels·H·W` upsampled ones nor
//!   their log-softmax.
//!
//! Unlike `crate::fused` (hand-written f32 loops for burn-flex), these are composed from burn
//! tensor ops on the inner backend, so one implementation serves `Autodiff<I, C>` for any inner
//! backend `I`. Autodiff backends are matched by type (the `TypeId` table of
//! `crate::compute::Route`): burn-flex and, with the `cuda` / `wgpu` features, burn-cuda and
//! burn-wgpu (with burn-fusion, which fuses the element-wise chains of these ops too; burn-wgpu
//! also without it), each with and without activation checkpointing. A backend without autodiff
//! runs the chunked forward directly. `crate::ops` calls these where the model's kernels resolve to
//! [`KernelPath::Recompute`](crate::KernelPath::Recompute) (or to `Fused` where no fused
//! kernel serves the inputs), which [`Kernels::path`](crate::Kernels::path) grants exactly
//! on the backends listed here.

mod attention;
mod loss;

#[cfg(test)]
mod tests;

use std::fmt::Debug;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;

pub(crate) use attention::attention;
pub use loss::loss_band_elements;
pub(crate) use loss::upsample_cross_entropy;

use crate::compute::{Route, same, split};

/// Elements of the largest intermediate one chunk of the recomputing ops materialises (the
/// scores of a block of query rows, the upsampled logits of a band of label rows): 4 Mi f32 =
/// 16 MiB, still thousands of GPU threads per kernel.
pub(crate) const CHUNK_ELEMENTS: usize = 1 << 22;

/// An op whose backward recomputes its intermediates from its inputs, written once for every
/// backend in burn tensor ops.
pub(crate) trait RecomputeOp<const N: usize>: Clone + Send + Sync + Debug + 'static {
    /// The output, computed on the inner backend (no graph).
    fn forward<I: Backend>(&self, inputs: [FloatTensor<I>; N]) -> FloatTensor<I>;

    /// Gradients of the inputs from the output's gradient; `None` where `needed` is false.
    fn backward<I: Backend>(
        &self,
        inputs: [FloatTensor<I>; N],
        grad: FloatTensor<I>,
        needed: [bool; N],
    ) -> [Option<FloatTensor<I>>; N];
}

/// Runs `op` on `B`: through a custom autodiff step on the autodiff backends listed in the
/// module docs, directly where `B` has no autodiff.
///
/// # Panics
/// On an autodiff backend not listed: [`Kernels::path`](crate::Kernels::path) resolves those
/// to burn's composition, so the ops never call this for them.
pub(crate) fn apply<B: Backend, O: RecomputeOp<N>, const N: usize>(
    op: &O,
    inputs: [FloatTensor<B>; N],
) -> FloatTensor<B> {
    match Route::of::<B>() {
        Some(Route::FlexAutodiff) => same(apply_autodiff::<Flex, NoCheckpointing, O, N>(
            op,
            inputs.map(same),
        )),
        Some(Route::FlexAutodiffBalanced) => {
            same(apply_autodiff::<Flex, BalancedCheckpointing, O, N>(
                op,
                inputs.map(same),
            ))
        }
        #[cfg(feature = "cuda")]
        Some(Route::CudaAutodiff) => {
            same(apply_autodiff::<burn::backend::Cuda, NoCheckpointing, O, N>(op, inputs.map(same)))
        }
        #[cfg(feature = "cuda")]
        Some(Route::CudaAutodiffBalanced) => same(apply_autodiff::<
            burn::backend::Cuda,
            BalancedCheckpointing,
            O,
            N,
        >(op, inputs.map(same))),
        #[cfg(feature = "wgpu")]
        Some(Route::WgpuAutodiff) => {
            same(apply_autodiff::<burn::backend::Wgpu, NoCheckpointing, O, N>(op, inputs.map(same)))
        }
        #[cfg(feature = "wgpu")]
        Some(Route::WgpuAutodiffBalanced) => same(apply_autodiff::<
            burn::backend::Wgpu,
            BalancedCheckpointing,
            O,
            N,
        >(op, inputs.map(same))),
        #[cfg(feature = "wgpu")]
        Some(Route::WgpuUnfusedAutodiff) => same(apply_autodiff::<
            crate::compute::WgpuUnfused,
            NoCheckpointing,
            O,
            N,
        >(op, inputs.map(same))),
        #[cfg(feature = "wgpu")]
        Some(Route::WgpuUnfusedAutodiffBalanced) => same(apply_autodiff::<
            crate::compute::WgpuUnfused,
            BalancedCheckpointing,
            O,
            N,
        >(op, inputs.map(same))),
        Some(Route::Flex) | None => {
            assert!(
                !B::ad_enabled(&B::float_device(&inputs[0])),
                "no recomputing autodiff step for this backend: its kernels resolve to burn's composition"
            );
            op.forward::<B>(inputs)
        }
    }
}

fn apply_autodiff<I: Backend, C: CheckpointStrategy, O: RecomputeOp<N>, const N: usize>(
    op: &O,
    inputs: [FloatTensor<Autodiff<I, C>>; N],
) -> FloatTensor<Autodiff<I, C>> {
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    // The inputs' reference counts live until the output is registered (see `split`).
    let (primitives, alive) = split(inputs);
    let out = match RecomputeBackward(op.clone())
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let out = op.forward::<I>(primitives.clone());
            prep.finish(primitives, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(op.forward::<I>(primitives)),
    };
    drop(alive);
    out
}

#[derive(Debug)]
struct RecomputeBackward<O>(O);

impl<I: Backend, O: RecomputeOp<N>, const N: usize> Backward<I, N> for RecomputeBackward<O> {
    /// The op's inputs: everything else is recomputed from them.
    type State = [FloatTensor<I>; N];

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<I>(&ops.node);
        let needed = ops.parents.each_ref().map(Option::is_some);
        let input_grads = self.0.backward::<I>(ops.state, grad, needed);
        for (parent, g) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(node), Some(g)) = (parent, g) {
                grads.register::<I>(node.id, g);
            }
        }
    }
}

/// `0..len` in chunks of `chunk` (the last one shorter).
fn chunks(len: usize, chunk: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let chunk = chunk.max(1);
    (0..len)
        .step_by(chunk)
        .map(move |start| start..(start + chunk).min(len))
}
