//! The planner's recompute factors (what burn-cuda runs) against real training steps: this
//! binary turns the fused CPU kernels off (`SEGFORMER_FUSED=0`), so the model runs burn's ops
//! with segformer's recomputing attention and loss, and the counting allocator of `common`
//! measures them.

mod common;

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use common::{check, measured_peak, predicted_for, serial};
use train::{Kernels, Precision};

fn recompute_path() {
    // SAFETY: every test of this binary sets the same value before anything reads the
    // environment, and nothing else in the process writes it.
    unsafe { std::env::set_var("SEGFORMER_FUSED", "0") };
    assert_eq!(Kernels::for_device(train::Device::Cpu), Kernels::Recompute);
}

#[test]
fn recompute_prediction_is_within_ten_percent_of_real_steps() {
    recompute_path();
    let _serial = serial();
    let predicted = |size, batch, precision, ckpt| {
        predicted_for(Kernels::Recompute, size, batch, precision, ckpt)
    };
    for (size, batch) in [(128, 2), (256, 1)] {
        let m = measured_peak::<Autodiff<Flex>>(size, batch, false);
        let p = predicted(size, batch, Precision::F32, false);
        check(m, p, &format!("{size}² b{batch} f32"));
    }
    let m = measured_peak::<Autodiff<Flex>>(256, 1, true);
    check(m, predicted(256, 1, Precision::Bf16, false), "256² b1 bf16");
    let m = measured_peak::<Autodiff<Flex, BalancedCheckpointing>>(256, 1, false);
    let p = predicted(256, 1, Precision::F32, true);
    check(m, p, "256² b1 f32 checkpointed");
}
