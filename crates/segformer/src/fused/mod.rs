//! Fused CPU kernels with their own backward passes, for the layers where burn-flex's generic
//! op-by-op composition spends its time in strided copies and keeps many intermediates alive
//! for autodiff: linear layers, LayerNorm, multi-head attention (scores recomputed in the
//! backward pass, never stored), the channels-last Mix-FFN depthwise conv with its activation,
//! and `[B, X, Y] → [B, Y, X]` transposes.
//!
//! Every op has two implementations:
//! - the generic one, composed from burn tensor ops, for any backend (burn-cuda included;
//!   for attention and the loss that is [`crate::recompute`]'s memory-saving autodiff step
//!   where it serves the backend);
//! - a fused one for `Flex` (inference) and `Autodiff<Flex, _>` (training, with or without
//!   activation checkpointing), on f32 tensors, with a hand-written backward registered as a
//!   custom autodiff step.
//!
//! The model stays generic over `B: Backend`: [`route`] picks the fused path from the backend
//! type at run time (`TypeId`), and the primitives are moved across with `Any` downcasts, so
//! there is no `unsafe` in the dispatch and no extra trait bound on users of the model.
//! Setting `SEGFORMER_FUSED=0` in the environment forces the generic path (for comparisons).
//!
//! Each op is tested against its generic composition (values and gradients) in `tests.rs`,
//! and the whole model against HF transformers in the crate's parity tests.

mod attention;
mod decode;
mod dwconv;
mod gemm;
mod layer_norm;
mod linear;
mod loss;
mod math;
mod transpose;

#[cfg(test)]
mod tests;

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::sync::OnceLock;

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
use burn::tensor::{DType, Tensor, TensorData, TensorPrimitive};

pub(crate) use attention::attention;
#[cfg(test)]
pub(crate) use attention::attention_generic;
pub(crate) use decode::{taps, upsample_sum_bn_relu};
pub(crate) use dwconv::dwconv3x3_act;
pub(crate) use layer_norm::layer_norm;
pub(crate) use linear::linear;
pub(crate) use loss::upsample_cross_entropy;
pub(crate) use transpose::transpose12;

/// Which fused implementation serves backend `B`, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `Flex`: forward only.
    Inference,
    /// `Autodiff<Flex>`.
    Autodiff,
    /// `Autodiff<Flex, BalancedCheckpointing>`.
    AutodiffBalanced,
}

/// Whether the fused CPU kernels serve `Flex` and `Autodiff<Flex, _>` in this process: yes
/// unless the environment sets `SEGFORMER_FUSED=0` (read once). Other backends always run
/// burn's composition of ops.
pub fn fused_kernels_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("SEGFORMER_FUSED").map_or(true, |v| v != "0"))
}

/// The fused route for backend `B` when every tensor in `dtypes` is f32.
pub(crate) fn route<B: Backend>(dtypes: &[DType]) -> Option<Route> {
    if !fused_kernels_enabled() || dtypes.iter().any(|d| *d != DType::F32) {
        return None;
    }
    let id = TypeId::of::<B>();
    if id == TypeId::of::<Flex>() {
        Some(Route::Inference)
    } else if id == TypeId::of::<Autodiff<Flex, NoCheckpointing>>() {
        Some(Route::Autodiff)
    } else if id == TypeId::of::<Autodiff<Flex, BalancedCheckpointing>>() {
        Some(Route::AutodiffBalanced)
    } else {
        None
    }
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

/// Moves a value between two types known (by [`route`]) to be the same.
pub(crate) fn same<T: 'static, U: 'static>(value: T) -> U {
    *(Box::new(value) as Box<dyn Any>)
        .downcast::<U>()
        .expect("fused route checked the backend type")
}

/// Runs `op` on `B`'s primitives through the route found by [`route`].
pub(crate) fn apply<B: Backend, O: FusedOp<N>, const N: usize>(
    route: Route,
    op: &O,
    inputs: [FloatTensor<B>; N],
) -> FloatTensor<B> {
    match route {
        Route::Inference => {
            let inputs: [FlexTensor; N] = inputs.map(same);
            same(op.forward(inputs.each_ref(), false).0)
        }
        Route::Autodiff => same(apply_autodiff::<NoCheckpointing, O, N>(
            op,
            inputs.map(same),
        )),
        Route::AutodiffBalanced => same(apply_autodiff::<BalancedCheckpointing, O, N>(
            op,
            inputs.map(same),
        )),
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

/// The primitive of a float tensor.
pub(crate) fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

/// A float tensor from its primitive.
pub(crate) fn tensor<B: Backend, const D: usize>(p: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

/// The f32 values of a `Flex` tensor in row-major order (a copy only if it is a strided view).
pub(crate) fn values(t: &FlexTensor) -> std::borrow::Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(t.to_contiguous().as_slice::<f32>().unwrap().to_vec()),
    }
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
