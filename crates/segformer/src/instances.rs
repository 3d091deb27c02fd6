//! The model compiled once for the backends the workspace runs it on, in dev builds.
//!
//! rustc shares generic instantiations between crates built at opt-level 0 or 1 (its
//! `share-generics` default): a crate that calls `Segformer::<Flex>::forward` links to the copy
//! an upstream crate compiled instead of compiling its own. The model is generic over the
//! backend, so without a copy here every dependent compiled it afresh: each test binary, each
//! doctest, `infer`, `train` and the cli (a doctest that builds a MiT-B0 on burn-flex took 25 s
//! to compile). [`instances`] names the model's entry points on each backend, which makes
//! this crate compile them and offer them to its dependents.
//!
//! Only in builds with debug assertions (the dev and test profiles): at opt-level 2 and 3 rustc
//! does not share generics, so a release build would compile copies nobody links to. Not in this
//! crate's own unit-test build either: nothing links to it, and its tests instantiate what they
//! use.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;

use crate::{Segformer, SegformerConfig, weights};

/// The entry points of the model on one backend: building it, loading and saving its weights,
/// the forward passes and the losses.
macro_rules! model_on {
    ($b:ty) => {
        [
            SegformerConfig::init::<$b> as *const (),
            Segformer::<$b>::forward as *const (),
            Segformer::<$b>::forward_with_hidden_states as *const (),
            Segformer::<$b>::loss as *const (),
            Segformer::<$b>::loss_with as *const (),
            Segformer::<$b>::replica as *const (),
            weights::load_hf_dir::<$b> as *const (),
            weights::load_pretrained_adapted::<$b> as *const (),
            weights::hf_state_dict::<$b> as *const (),
            weights::save_hf_dir::<$b> as *const (),
        ]
    };
}

/// What training adds on an autodiff backend: the backward pass and the gradients by name.
macro_rules! training_on {
    ($b:ty) => {
        [
            Tensor::<$b, 1>::backward as *const (),
            weights::hf_gradients::<$b> as *const (),
        ]
    };
}

/// The addresses of the model's entry points on burn-flex (inference, and training with and
/// without balanced checkpointing) and, with the `wgpu` feature, on burn-wgpu. Nothing calls
/// it: it exists so that this crate compiles those instantiations (see the module's comment).
#[doc(hidden)]
pub fn instances() -> Vec<*const ()> {
    let mut all = Vec::new();
    all.extend(model_on!(Flex));
    all.extend(model_on!(Autodiff<Flex>));
    all.extend(training_on!(Autodiff<Flex>));
    all.extend(model_on!(Autodiff<Flex, BalancedCheckpointing>));
    all.extend(training_on!(Autodiff<Flex, BalancedCheckpointing>));
    #[cfg(feature = "wgpu")]
    {
        use burn::backend::Wgpu;
        all.extend(model_on!(Wgpu));
        all.extend(model_on!(Autodiff<Wgpu>));
        all.extend(training_on!(Autodiff<Wgpu>));
        all.extend(model_on!(Autodiff<Wgpu, BalancedCheckpointing>));
        all.extend(training_on!(Autodiff<Wgpu, BalancedCheckpointing>));
    }
    all
}
