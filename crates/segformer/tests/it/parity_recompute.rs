//! Parity with HF transformers through the paths other than the fused CPU kernels, on
//! burn-flex: `Kernels::Recompute` (burn's ops with segformer's recomputing attention and loss,
//! the path burn-cuda takes) and `Kernels::Composed` (burn's plain composition).

use segformer::Kernels;

use crate::common;

#[test]
fn tiny_train_step_matches_hf_without_fused_kernels() {
    let dir = testkit::fixture("segformer-tiny");
    common::check_eval(&dir, Kernels::Recompute);
    common::check_train(&dir, Kernels::Recompute);
}

#[testkit::needs_fixtures]
#[test]
fn b0_train_step_matches_hf_without_fused_kernels() {
    let dir = testkit::fixture("segformer-b0");
    common::check_train(&dir, Kernels::Recompute);
}

#[test]
fn tiny_train_step_matches_hf_with_burns_composition() {
    let dir = testkit::fixture("segformer-tiny");
    common::check_eval(&dir, Kernels::Composed);
    common::check_train(&dir, Kernels::Composed);
}
