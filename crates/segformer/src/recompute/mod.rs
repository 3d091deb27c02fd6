//! Memory-saving ops for every backend (burn-cuda above all): the two places where burn's
//! op-by-op graph keeps the most for the backward pass get a custom autodiff step that keeps
//! only the op's inputs and recomputes the rest, in bounded chunks, when the gradient comes:
//! - multi-head attention keeps `Q, K, V`, never the `heads·N·M` scores and probabilities
//!   (about two thirds of a MiT-B0 step at 1024² under burn's composition);
//! - the loss keeps the quarter-resolution logits, never the `labels·H·W` upsampled ones nor
//!   their log-softmax.
//!
//! Unlike [`crate::fused`] (hand-written f32 loops for burn-flex), these are composed from burn
//! tensor ops on the inner backend, so one implementation serves `Autodiff<I, C>` for any inner
//! backend `I`. Autodiff backends are matched by type (`TypeId`, as in [`crate::fused::route`]):
//! burn-flex and, with the `cuda` feature, burn-cuda, each with and without activation
//! checkpointing. A backend without autodiff runs the chunked forward directly; an autodiff
//! backend not listed returns `None` and its caller composes the op from burn ops.
//!
//! Setting `SEGFORMER_RECOMPUTE=0` in the environment turns these ops off (burn's plain
//! composition, for the memory benchmark's comparison).

mod attention;
mod loss;

#[cfg(test)]
mod tests;

use std::any::TypeId;
use std::fmt::Debug;
use std::sync::OnceLock;

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

use crate::fused::same;

/// Whether the memory-saving ops that recompute attention scores and upsampled logits in the
/// backward pass serve the backends without fused kernels (burn-cuda; burn-flex with
/// `SEGFORMER_FUSED=0`): yes unless the environment sets `SEGFORMER_RECOMPUTE=0` (read once).
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("SEGFORMER_RECOMPUTE").map_or(true, |v| v != "0"))
}

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
/// module docs, directly where `B` has no autodiff, and `None` elsewhere or when [`enabled`]
/// is false.
pub(crate) fn apply<B: Backend, O: RecomputeOp<N>, const N: usize>(
    op: &O,
    inputs: [FloatTensor<B>; N],
) -> Option<FloatTensor<B>> {
    if !enabled() {
        return None;
    }
    macro_rules! autodiff_of {
        ($inner:ty, $strategy:ty) => {
            if TypeId::of::<B>() == TypeId::of::<Autodiff<$inner, $strategy>>() {
                return Some(same(apply_autodiff::<$inner, $strategy, O, N>(
                    op,
                    inputs.map(same),
                )));
            }
        };
    }
    autodiff_of!(Flex, NoCheckpointing);
    autodiff_of!(Flex, BalancedCheckpointing);
    #[cfg(feature = "cuda")]
    {
        autodiff_of!(burn::backend::Cuda, NoCheckpointing);
        autodiff_of!(burn::backend::Cuda, BalancedCheckpointing);
    }
    if !B::ad_enabled(&B::float_device(&inputs[0])) {
        return Some(op.forward::<B>(inputs));
    }
    None
}

fn apply_autodiff<I: Backend, C: CheckpointStrategy, O: RecomputeOp<N>, const N: usize>(
    op: &O,
    inputs: [FloatTensor<Autodiff<I, C>>; N],
) -> FloatTensor<Autodiff<I, C>> {
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    let primitives = inputs.map(|t| t.primitive);
    match RecomputeBackward(op.clone())
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let out = op.forward::<I>(primitives.clone());
            prep.finish(primitives, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(op.forward::<I>(primitives)),
    }
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
