//! How the layers compute: the kernel choice ([`Kernels`]), the path it resolves to on a
//! backend ([`KernelPath`]), the autocast dtype ([`Compute`]) and the Mix-FFN [`Activation`];
//! plus the one table of backend types segformer has its own kernels for ([`Route`]) and the
//! helpers that move tensors across it.
//!
//! This is the crate's leaf module: it imports nothing from the crate, and `fused`,
//! `recompute`, `ops` and the layers import it.

use std::any::{Any, TypeId};
use std::fmt;

use burn::backend::autodiff::checkpoint::strategy::{BalancedCheckpointing, NoCheckpointing};
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{FloatDType, Tensor, TensorPrimitive};
use serde::Serialize;

// The activation inside the Mix-FFN, parsed from `hidden_act`; the fused depthwise conv
// applies it too.
pub(crate) use kernels::Activation;

/// Which implementation of the layers a model runs: the caller's choice, set with
/// [`Segformer::with_kernels`](crate::Segformer::with_kernels) and resolved per backend by
/// [`Kernels::path`]. Every choice computes the same function (up to float rounding); they
/// differ in speed and in what the backward pass keeps in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kernels {
    /// The fastest the backend has: segformer's fused CPU kernels on burn-flex (f32), else its
    /// recomputing attention and loss where they serve the backend, else burn's composition.
    #[default]
    Auto,
    /// Never the fused kernels: burn's ops with segformer's recomputing attention and loss
    /// (what burn-cuda runs; on the CPU, for comparison).
    Recompute,
    /// burn's plain op-by-op composition everywhere (for comparison).
    Composed,
}

/// The implementation a [`Kernels`] choice resolves to on one backend ([`Kernels::path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelPath {
    /// segformer's fused CPU kernels (burn-flex, f32 tensors) with their own backward passes;
    /// attention probabilities and full-resolution logits are recomputed, never kept. An op
    /// without a fused kernel for its inputs falls back to the recomputing op, then burn's.
    Fused,
    /// burn's op-by-op composition with segformer's recomputing attention and loss: attention
    /// scores and full-resolution logits are recomputed in bounded chunks, never kept.
    Recompute,
    /// burn's plain op-by-op composition: attention scores and full-resolution logits are
    /// kept for the backward pass.
    Composed,
}

/// A backend as kernel resolution sees it, for callers that plan for a backend they do not
/// name as a type (a device whose backend is not compiled in); [`BackendKind::of`] classifies
/// a backend type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// burn-flex: `Flex`, `Autodiff<Flex>`, `Autodiff<Flex, BalancedCheckpointing>`.
    Flex,
    /// burn-cuda: `Cuda`, `Autodiff<Cuda>`, `Autodiff<Cuda, BalancedCheckpointing>`, as a build
    /// with segformer's `cuda` feature runs them: with burn-fusion and autotune, so `Cuda` is
    /// `Fusion<CubeBackend<CudaRuntime, f32, i32, u8>>` (without the feature,
    /// [`BackendKind::of`] sees `Autodiff<Cuda>` as [`BackendKind::OtherAutodiff`]).
    Cuda,
    /// burn-wgpu (Vulkan, Metal, DX12): `Wgpu`, `Autodiff<Wgpu>`,
    /// `Autodiff<Wgpu, BalancedCheckpointing>`, as a build with segformer's `wgpu` feature runs
    /// them (with burn-fusion and autotune: `Wgpu` is `Fusion<CubeBackend<WgpuRuntime, …>>`),
    /// and the same without burn-fusion ([`WgpuUnfused`], for comparisons). Without the
    /// feature [`BackendKind::of`] sees `Autodiff<Wgpu>` as [`BackendKind::OtherAutodiff`].
    /// The same CubeCL kernels and memory pool as burn-cuda.
    Wgpu,
    /// Any other backend without autodiff (inference).
    Other,
    /// Any other autodiff backend.
    OtherAutodiff,
}

impl BackendKind {
    /// The kind of backend `B` (tensors on `device`).
    pub fn of<B: Backend>(device: &B::Device) -> Self {
        match Route::of::<B>() {
            Some(Route::Flex | Route::FlexAutodiff | Route::FlexAutodiffBalanced) => Self::Flex,
            #[cfg(feature = "cuda")]
            Some(Route::CudaAutodiff | Route::CudaAutodiffBalanced) => Self::Cuda,
            #[cfg(feature = "wgpu")]
            Some(
                Route::WgpuAutodiff
                | Route::WgpuAutodiffBalanced
                | Route::WgpuUnfusedAutodiff
                | Route::WgpuUnfusedAutodiffBalanced,
            ) => Self::Wgpu,
            None if B::ad_enabled(device) => Self::OtherAutodiff,
            None => Self::Other,
        }
    }
}

impl Kernels {
    /// The path this choice takes on a backend of kind `backend`: the one rule, used by the
    /// layers at run time and by planners ahead of it.
    ///
    /// The fused kernels exist for burn-flex only; the recomputing ops serve every backend
    /// without autodiff and the autodiff backends segformer matches by type (burn-flex, and
    /// burn-cuda with the `cuda` feature, burn-wgpu with the `wgpu` feature).
    pub fn path(self, backend: BackendKind) -> KernelPath {
        use BackendKind as K;
        match (self, backend) {
            (Kernels::Auto, K::Flex) => KernelPath::Fused,
            (Kernels::Auto | Kernels::Recompute, K::Flex | K::Cuda | K::Wgpu | K::Other) => {
                KernelPath::Recompute
            }
            (_, K::OtherAutodiff) | (Kernels::Composed, _) => KernelPath::Composed,
        }
    }

    /// The path this choice takes on backend `B` (tensors on `device`).
    pub fn path_for<B: Backend>(self, device: &B::Device) -> KernelPath {
        self.path(BackendKind::of::<B>(device))
    }
}

/// `auto`, `recompute` or `composed`.
impl fmt::Display for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kernels::Auto => "auto",
            Kernels::Recompute => "recompute",
            Kernels::Composed => "composed",
        })
    }
}

/// `auto`, `recompute` or `composed` (any case), as [`Kernels`]' `Display` writes them: the
/// words of `--kernels`.
impl std::str::FromStr for Kernels {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Kernels::Auto, Kernels::Recompute, Kernels::Composed]
            .into_iter()
            .find(|k| k.to_string().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("`{s}` is not a kernel choice; use auto, recompute or composed"))
    }
}

/// `fused`, `recompute` or `composed`.
impl fmt::Display for KernelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelPath::Fused => "fused",
            KernelPath::Recompute => "recompute",
            KernelPath::Composed => "composed",
        })
    }
}

/// What every layer receives: the kernel choice, and autocast-style mixed precision: where
/// `dtype` is set, every Linear, Conv2d and attention matmul runs on inputs and weights cast
/// to it, and its result is cast back to the input's dtype, so LayerNorm, BatchNorm, softmax
/// and the loss stay in full precision (PyTorch autocast's rules for these ops).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Compute {
    /// The autocast dtype, if any.
    pub dtype: Option<FloatDType>,
    /// The implementation of the layers.
    pub kernels: Kernels,
}

impl Compute {
    /// The path the layers take on backend `B` (tensors on `device`).
    pub(crate) fn path<B: Backend>(self, device: &B::Device) -> KernelPath {
        self.kernels.path_for::<B>(device)
    }
}

/// burn-wgpu without burn-fusion: the same CubeCL kernels as [`burn::backend::Wgpu`], each op
/// launched on its own with its own output, as burn-wgpu runs without its `fusion` feature.
/// segformer's builds with the `wgpu` feature turn burn-fusion on, so `Wgpu` is
/// `Fusion<WgpuUnfused>`; this type is there to measure what fusion changes (`bench_memory
/// --wgpu --unfused`).
#[cfg(feature = "wgpu")]
pub type WgpuUnfused =
    burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;

/// The backend types segformer has its own kernels for, matched by `TypeId`: the fused
/// kernels serve the burn-flex ones, the recomputing ops the autodiff ones. Primitives move
/// across with [`same`] (an `Any` downcast), so there is no `unsafe` in the dispatch and no
/// extra trait bound on users of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `Flex`: forward only.
    Flex,
    /// `Autodiff<Flex>`.
    FlexAutodiff,
    /// `Autodiff<Flex, BalancedCheckpointing>`.
    FlexAutodiffBalanced,
    /// `Autodiff<Cuda>`.
    #[cfg(feature = "cuda")]
    CudaAutodiff,
    /// `Autodiff<Cuda, BalancedCheckpointing>`.
    #[cfg(feature = "cuda")]
    CudaAutodiffBalanced,
    /// `Autodiff<Wgpu>`.
    #[cfg(feature = "wgpu")]
    WgpuAutodiff,
    /// `Autodiff<Wgpu, BalancedCheckpointing>`.
    #[cfg(feature = "wgpu")]
    WgpuAutodiffBalanced,
    /// `Autodiff<WgpuUnfused>`.
    #[cfg(feature = "wgpu")]
    WgpuUnfusedAutodiff,
    /// `Autodiff<WgpuUnfused, BalancedCheckpointing>`.
    #[cfg(feature = "wgpu")]
    WgpuUnfusedAutodiffBalanced,
}

impl Route {
    /// The route of backend `B`, if it is one of the listed types.
    pub(crate) fn of<B: Backend>() -> Option<Route> {
        let is = |id: TypeId| TypeId::of::<B>() == id;
        if is(TypeId::of::<Flex>()) {
            return Some(Route::Flex);
        }
        if is(TypeId::of::<Autodiff<Flex, NoCheckpointing>>()) {
            return Some(Route::FlexAutodiff);
        }
        if is(TypeId::of::<Autodiff<Flex, BalancedCheckpointing>>()) {
            return Some(Route::FlexAutodiffBalanced);
        }
        #[cfg(feature = "cuda")]
        {
            use burn::backend::Cuda;
            if is(TypeId::of::<Autodiff<Cuda, NoCheckpointing>>()) {
                return Some(Route::CudaAutodiff);
            }
            if is(TypeId::of::<Autodiff<Cuda, BalancedCheckpointing>>()) {
                return Some(Route::CudaAutodiffBalanced);
            }
        }
        #[cfg(feature = "wgpu")]
        {
            use burn::backend::Wgpu;
            if is(TypeId::of::<Autodiff<Wgpu, NoCheckpointing>>()) {
                return Some(Route::WgpuAutodiff);
            }
            if is(TypeId::of::<Autodiff<Wgpu, BalancedCheckpointing>>()) {
                return Some(Route::WgpuAutodiffBalanced);
            }
            if is(TypeId::of::<Autodiff<WgpuUnfused, NoCheckpointing>>()) {
                return Some(Route::WgpuUnfusedAutodiff);
            }
            if is(TypeId::of::<Autodiff<WgpuUnfused, BalancedCheckpointing>>()) {
                return Some(Route::WgpuUnfusedAutodiffBalanced);
            }
        }
        None
    }
}

/// Moves a value between two types known (by [`Route::of`]) to be the same.
pub(crate) fn same<T: 'static, U: 'static>(value: T) -> U {
    *(Box::new(value) as Box<dyn Any>)
        .downcast::<U>()
        .expect("the route checked the backend type")
}

/// The primitive of a float tensor.
pub(crate) fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

/// A float tensor from its primitive.
pub(crate) fn tensor<B: Backend, const D: usize>(p: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

/// The primitives of a custom autodiff step's inputs, and what keeps the inputs' graph nodes
/// referenced: drop the second only after `prep.finish` has registered the step's output.
/// (Any checkpoint strategy: its autodiff tensors are one type, named here through the
/// default one.)
///
/// burn's own ops hold their input tensors until the output is registered. Taking only the
/// primitives drops the inputs' reference counts first, and while the op computes, a graph
/// whose tensors are all gone looks unused. One that ends in the op's input alone (a weight's
/// reshape and transpose ahead of a fused linear, once an earlier backward pass has cleaned
/// the weight itself out of burn-autodiff's graph index) is then freed by the cleanup that
/// ends every backward pass, on any thread: the weight gets no gradient. Data-parallel
/// replicas lost a convolution weight's gradient that way in about one run in four of the
/// two-peer test; segformer's `tests/it/side_by_side.rs` loses one in every run without this.
pub(crate) fn split<I: Backend, const N: usize>(
    inputs: [FloatTensor<Autodiff<I>>; N],
) -> ([FloatTensor<I>; N], impl Sized) {
    let alive = inputs.each_ref().map(|t| t.rc.clone());
    (inputs.map(|t| t.primitive), alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    type A = Autodiff<Flex>;
    type AC = Autodiff<Flex, BalancedCheckpointing>;

    #[test]
    fn backend_types_have_their_kind() {
        let device = Default::default();
        assert_eq!(BackendKind::of::<Flex>(&device), BackendKind::Flex);
        assert_eq!(BackendKind::of::<A>(&device), BackendKind::Flex);
        assert_eq!(BackendKind::of::<AC>(&device), BackendKind::Flex);
        assert_eq!(Route::of::<AC>(), Some(Route::FlexAutodiffBalanced));
    }

    /// The GPU builds run burn-fusion: `Wgpu` is the fused type, not `WgpuUnfused`, and both
    /// (with autodiff) are burn-wgpu to kernel resolution.
    #[cfg(feature = "wgpu")]
    #[test]
    fn wgpu_is_fused_and_both_wgpu_types_have_its_kind() {
        use burn::backend::Wgpu;
        assert_ne!(
            TypeId::of::<Wgpu>(),
            TypeId::of::<WgpuUnfused>(),
            "burn-wgpu was built without burn-fusion"
        );
        let device = Default::default();
        assert_eq!(
            BackendKind::of::<Autodiff<Wgpu>>(&device),
            BackendKind::Wgpu
        );
        assert_eq!(
            BackendKind::of::<Autodiff<WgpuUnfused, BalancedCheckpointing>>(&device),
            BackendKind::Wgpu
        );
        assert_eq!(
            Route::of::<Autodiff<WgpuUnfused>>(),
            Some(Route::WgpuUnfusedAutodiff)
        );
    }

    #[test]
    fn kernel_choices_parse_as_they_print() {
        for k in [Kernels::Auto, Kernels::Recompute, Kernels::Composed] {
            assert_eq!(k.to_string().parse(), Ok(k));
        }
        assert_eq!(" Composed".parse(), Ok(Kernels::Composed));
        assert_eq!(
            "fused".parse::<Kernels>(),
            Err("`fused` is not a kernel choice; use auto, recompute or composed".to_string())
        );
    }

    #[test]
    fn each_choice_resolves_per_backend_kind() {
        use BackendKind as K;
        use KernelPath as P;
        let check = |k: Kernels, expected: [P; 5]| {
            let found = [K::Flex, K::Cuda, K::Wgpu, K::Other, K::OtherAutodiff].map(|b| k.path(b));
            assert_eq!(found, expected, "{k}");
        };
        check(
            Kernels::Auto,
            [
                P::Fused,
                P::Recompute,
                P::Recompute,
                P::Recompute,
                P::Composed,
            ],
        );
        check(
            Kernels::Recompute,
            [
                P::Recompute,
                P::Recompute,
                P::Recompute,
                P::Recompute,
                P::Composed,
            ],
        );
        check(Kernels::Composed, [P::Composed; 5]);
        assert_eq!(
            Kernels::default().path_for::<A>(&Default::default()),
            P::Fused
        );
    }
}
