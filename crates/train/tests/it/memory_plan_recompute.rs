//! The planner's recompute factors (what burn-cuda runs) against real training steps: the
//! models here run `Kernels::Recompute` (burn's ops with segformer's recomputing attention and
//! loss, no fused CPU kernels), and the counting allocator of `common` measures them in a child
//! process of their own.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use segformer::Kernels;
use train::{KernelPath, Precision};

use crate::common::{alone, check, measured_peak, predicted_for};

const KERNELS: Kernels = Kernels::Recompute;

#[test]
fn recompute_prediction_is_within_ten_percent_of_real_steps() {
    alone!(recompute_prediction_is_within_ten_percent_of_real_steps);
    assert_eq!(
        train::Device::Cpu.kernel_path(KERNELS),
        KernelPath::Recompute
    );
    let predicted = |size, batch, precision, ckpt| {
        predicted_for(KernelPath::Recompute, size, batch, precision, ckpt)
    };
    for (size, batch) in [(128, 2), (256, 1)] {
        let m = measured_peak::<Autodiff<Flex>>(KERNELS, size, batch, false);
        let p = predicted(size, batch, Precision::F32, false);
        check(m, p, &format!("{size}² b{batch} f32"));
    }
    let m = measured_peak::<Autodiff<Flex>>(KERNELS, 256, 1, true);
    check(m, predicted(256, 1, Precision::Bf16, false), "256² b1 bf16");
    let m = measured_peak::<Autodiff<Flex, BalancedCheckpointing>>(KERNELS, 256, 1, false);
    let p = predicted(256, 1, Precision::F32, true);
    check(m, p, "256² b1 f32 checkpointed");
}
