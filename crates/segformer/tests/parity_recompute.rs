//! Parity with HF transformers through the path burn-cuda takes: the fused CPU kernels off
//! (`SEGFORMER_FUSED=0`), so the model runs burn's composed ops with segformer's recomputing
//! attention and loss (`crate::recompute`) on `Autodiff<Flex>`. The environment is set before
//! the model first reads it, in every test of this binary (its own process).

mod common;

fn composed_path() {
    // SAFETY: every test of this binary sets the same value before anything reads the
    // environment, and nothing else in the process writes it.
    unsafe { std::env::set_var("SEGFORMER_FUSED", "0") };
    assert!(!segformer::fused_kernels_enabled());
    assert!(segformer::recompute_enabled());
}

#[test]
fn tiny_train_step_matches_hf_without_fused_kernels() {
    composed_path();
    let Some(dir) = common::fixture("segformer-tiny") else {
        return;
    };
    common::check_eval(&dir);
    common::check_train(&dir);
}

#[test]
fn b0_train_step_matches_hf_without_fused_kernels() {
    composed_path();
    let Some(dir) = common::fixture("segformer-b0") else {
        return;
    };
    common::check_train(&dir);
}
