//! The memory planner against real training steps (a counting global allocator measures the
//! peak live heap of a child process that runs the measuring test alone), plus the budget
//! fitting and size parsing rules.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use segformer::Kernels;
use train::{
    Allocator, KernelPath, MemoryPlan, PlanInput, PlanInputTemplate, Precision, fit_budget,
    parse_bytes,
};

use crate::common::{alone, check, measured_peak, predicted_for};

/// The prediction for the path the measured models take: `Kernels::Auto` on the CPU.
fn predicted(size: usize, batch: usize, precision: Precision, checkpointing: bool) -> u64 {
    let path = train::Device::Cpu.kernel_path(Kernels::Auto);
    assert_eq!(path, KernelPath::Fused);
    predicted_for(path, size, batch, precision, checkpointing)
}

#[test]
fn prediction_is_within_ten_percent_of_real_f32_steps() {
    alone!(prediction_is_within_ten_percent_of_real_f32_steps);
    // 64² is the optimizer step's peak alone; at 256² the activations are a third of it.
    for (size, batch) in [(64, 1), (64, 2), (128, 1), (128, 2), (256, 1)] {
        let m = measured_peak::<Autodiff<Flex>>(Kernels::Auto, size, batch, false);
        check(
            m,
            predicted(size, batch, Precision::F32, false),
            &format!("{size}² b{batch} f32"),
        );
    }
}

#[test]
fn prediction_is_within_ten_percent_for_bf16_and_checkpointing() {
    alone!(prediction_is_within_ten_percent_for_bf16_and_checkpointing);
    let m = measured_peak::<Autodiff<Flex>>(Kernels::Auto, 128, 2, true);
    check(m, predicted(128, 2, Precision::Bf16, false), "128² b2 bf16");
    let m = measured_peak::<Autodiff<Flex, BalancedCheckpointing>>(Kernels::Auto, 128, 2, false);
    check(
        m,
        predicted(128, 2, Precision::F32, true),
        "128² b2 f32 checkpointed",
    );
}

#[test]
fn prediction_grows_with_batch_size_and_labels() {
    let p1 = predicted(512, 1, Precision::F32, false);
    let p2 = predicted(512, 2, Precision::F32, false);
    assert!(p2 > p1);
    let c150 = train::preset("mit-b0").unwrap().with_num_labels(150);
    let at_512 = |kernels| {
        MemoryPlan::predict(&PlanInput {
            kernels,
            config: &c150,
            height: 512,
            width: 512,
            batch: 1,
            precision: Precision::F32,
            checkpointing: false,
            allocator: Allocator::Heap,
            loss: None,
        })
    };
    let e = at_512(KernelPath::Fused);
    // The fused loss keeps 150 quarter-resolution logit maps at most, never full-resolution ones.
    assert!(e.logits <= 150 * 128 * 128 * 4, "{e}");
    assert!(e.peak_bytes() > p1);
    assert!(e.to_string().contains("logits for the loss"));
    // burn's composition keeps the full-resolution logits several times over, and the
    // attention scores.
    let composed = at_512(KernelPath::Composed);
    assert!(composed.logits >= 150 * 512 * 512 * 4, "{composed}");
    assert!(composed.stages[0].attention > 0 && e.stages[0].attention == 0);
    assert!(composed.peak_bytes() > e.peak_bytes());
    // With segformer's recomputing attention and loss (what burn-cuda runs) neither is kept:
    // the loss holds the logits upsampled along the width and their gradient (a quarter of the
    // full resolution each) and one band of 4 Mi logits: about a quarter of burn's 16 B per
    // full-resolution logit here.
    let recompute = at_512(KernelPath::Recompute);
    assert!(
        recompute.stages.iter().all(|s| s.attention == 0),
        "{recompute}"
    );
    assert!(recompute.logits < composed.logits / 3, "{recompute}");
    assert!(recompute.peak_bytes() < composed.peak_bytes());
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["stages"].as_array().unwrap().len(), 4);
}

fn template(config: &segformer::SegformerConfig, size: usize) -> PlanInputTemplate<'_> {
    template_for(KernelPath::Fused, config, size)
}

fn template_for(
    kernels: KernelPath,
    config: &segformer::SegformerConfig,
    size: usize,
) -> PlanInputTemplate<'_> {
    PlanInputTemplate {
        config,
        height: size,
        width: size,
        precision: Precision::F32,
        reduced: Some(Precision::Bf16),
        checkpointing: false,
        kernels,
        allocator: Allocator::Heap,
        loss: None,
    }
}

#[test]
fn fit_takes_the_largest_divisor_that_fits() {
    let config = train::preset("mit-b0").unwrap().with_num_labels(2);
    let t = template(&config, 512);
    let p = |b| predicted(512, b, Precision::F32, false);
    // A budget just above batch 4's peak, effective batch 16: 4 × 4.
    let c = fit_budget(p(4) + 1, 16, &t).unwrap();
    assert_eq!((c.micro_batch, c.accumulation_steps), (4, 4));
    assert_eq!((c.precision, c.checkpointing), (Precision::F32, false));
    assert!(
        c.reason()
            .starts_with("batch 4 × 4 steps in f32: predicted"),
        "{}",
        c.reason()
    );
    // Effective 12 with room for 5 images: 5 does not divide 12, so 4 × 3.
    let c = fit_budget(p(5) + 1, 12, &t).unwrap();
    assert_eq!((c.micro_batch, c.accumulation_steps), (4, 3));
    // Effective 7 (prime) with room for 4: 1 × 7.
    let c = fit_budget(p(4) + 1, 7, &t).unwrap();
    assert_eq!((c.micro_batch, c.accumulation_steps), (1, 7));
    // Plenty of room: no accumulation.
    let c = fit_budget(u64::MAX / 2, 8, &t).unwrap();
    assert_eq!((c.micro_batch, c.accumulation_steps), (8, 1));
}

#[test]
fn fit_falls_back_to_bf16_then_checkpointing_then_both() {
    let config = train::preset("mit-b0").unwrap().with_num_labels(2);
    // Composed kernels (CUDA) gain from every fallback; with the fused ones bf16 and
    // checkpointing save nothing, so only the f32 mode is ever chosen there.
    let mut fallbacks_taken = 0;
    for kernels in [
        KernelPath::Composed,
        KernelPath::Recompute,
        KernelPath::Fused,
    ] {
        let t = template_for(kernels, &config, 512);
        let p = |precision, ckpt| predicted_for(kernels, 512, 1, precision, ckpt);
        let order = [
            (p(Precision::F32, false), Precision::F32, false),
            (p(Precision::Bf16, false), Precision::Bf16, false),
            (p(Precision::F32, true), Precision::F32, true),
            (p(Precision::Bf16, true), Precision::Bf16, true),
        ];
        // Each mode is chosen once the budget is below every earlier mode's batch-1 peak.
        for (i, &(peak, precision, ckpt)) in order.iter().enumerate() {
            let earlier_min = order[..i].iter().map(|o| o.0).min().unwrap_or(u64::MAX);
            if peak >= earlier_min {
                continue; // this mode is never needed: an earlier one is already smaller
            }
            fallbacks_taken += usize::from(i > 0);
            let c = fit_budget(peak, 4, &t).unwrap();
            assert_eq!((c.micro_batch, c.accumulation_steps), (1, 4));
            assert_eq!(
                (c.precision, c.checkpointing),
                (precision, ckpt),
                "{kernels:?}: {}",
                c.reason()
            );
        }
        let smallest = order.iter().map(|o| o.0).min().unwrap();
        let e = fit_budget(smallest - 1, 4, &t).unwrap_err();
        assert!(
            e.contains("too small") && e.contains("smallest predicted peak"),
            "{e}"
        );
    }
    assert!(fallbacks_taken >= 1, "the composed plan never fell back");
    let t = template(&config, 512);
    let e = fit_budget(1024 * 1024, 4, &t).unwrap_err();
    assert!(e.contains("1 MiB"), "{e}");
    assert!(
        fit_budget(1 << 40, 0, &t)
            .unwrap_err()
            .contains("at least 1")
    );
}

#[test]
fn parses_memory_sizes() {
    let gib = 1u64 << 30;
    for (text, bytes) in [
        ("8GiB", 8 * gib),
        ("7.5G", 15 * gib / 2),
        ("512MiB", 512 << 20),
        ("8000MB", 8_000_000_000),
        (" 16 gb ", 16_000_000_000),
        ("1048576", 1 << 20),
        ("2k", 2048),
        ("1.5TiB", 3 << 39),
    ] {
        assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
    }
    for bad in ["", "GiB", "8 parsecs", "-1G", "0", "1.2.3G"] {
        let e = parse_bytes(bad).unwrap_err();
        assert!(
            e.contains(&format!("`{bad}`")) && e.contains("8GiB"),
            "{bad}: {e}"
        );
    }
}
