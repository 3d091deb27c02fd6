//! What `losses_tests.rs` leaves to chance, found by cargo-mutants (issue #17,
//! `crates/train/bench/mutants.sh`): the routing of [`SegLoss::sum`], the all-ignored
//! Lovász case, the median of an even number of classes, and the config names.

use super::*;
use burn::backend::Flex;

type B = Flex;

const IGNORE: i64 = 255;

/// `[1, 3, 2, 3]` logits and `[1, 2, 3]` labels (every class, one ignored pixel).
fn small(labels: [i64; 6]) -> (Tensor<B, 4>, Tensor<B, 3, Int>) {
    let device = Default::default();
    let z: Vec<f32> = (0..18).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
    (
        Tensor::from_data(TensorData::new(z, [1, 3, 2, 3]), &device),
        Tensor::from_data(TensorData::new(labels.to_vec(), [1, 2, 3]), &device),
    )
}

fn scalar(t: Tensor<B, 1>) -> f64 {
    t.into_scalar() as f64
}

#[test]
fn config_names() {
    let names: Vec<&str> = [
        LossKind::CrossEntropy,
        LossKind::Dice { smooth: 0.0 },
        LossKind::Focal { gamma: 2.0 },
        LossKind::Lovasz,
    ]
    .iter()
    .map(LossKind::name)
    .collect();
    assert_eq!(names, ["ce", "dice", "focal", "lovasz"]);
}

#[test]
fn only_unweighted_cross_entropy_is_fused_and_keeps_no_full_logits() {
    let term = |kind| LossTerm { kind, weight: 1.0 };
    let ce = SegLoss::default();
    assert!(ce.ce_is_fused() && !ce.keeps_full_logits());
    let weighted = SegLoss {
        class_weights: Some(vec![1.0, 2.0, 3.0]),
        ..SegLoss::default()
    };
    assert!(!weighted.ce_is_fused() && weighted.keeps_full_logits());
    let with_dice = SegLoss {
        terms: vec![
            term(LossKind::CrossEntropy),
            term(LossKind::Dice { smooth: 1.0 }),
        ],
        class_weights: None,
    };
    assert!(with_dice.ce_is_fused() && with_dice.keeps_full_logits());
}

#[test]
fn sum_routes_fused_cross_entropy_to_the_op_and_weights_every_term() {
    let (x, y) = small([0, 1, 2, IGNORE, 1, 0]);
    let dice = LossKind::Dice { smooth: 1.0 };
    let focal = LossKind::Focal { gamma: 2.0 };
    let plain = SegLoss {
        terms: vec![
            LossTerm {
                kind: LossKind::CrossEntropy,
                weight: 1.0,
            },
            LossTerm {
                kind: dice.clone(),
                weight: 0.5,
            },
            LossTerm {
                kind: focal.clone(),
                weight: 3.0,
            },
        ],
        class_weights: None,
    };
    // The fused op stands in as a constant: the sum must use it for the CE term, and build
    // the full-resolution logits once for the other two.
    let (mut ce_calls, mut full_calls) = (0, 0);
    let got = scalar(plain.sum(
        || {
            full_calls += 1;
            x.clone()
        },
        y.clone(),
        IGNORE,
        || {
            ce_calls += 1;
            Tensor::from_data([10.0f32], &Default::default())
        },
    ));
    assert_eq!((ce_calls, full_calls), (1, 1));
    let d = scalar(plain.term(&dice, x.clone(), y.clone(), IGNORE));
    let f = scalar(plain.term(&focal, x.clone(), y.clone(), IGNORE));
    let want = 10.0 + 0.5 * d + 3.0 * f;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");

    // With class weights the CE term is burn's weighted composition, not the op.
    let weighted = SegLoss {
        class_weights: Some(vec![0.5, 1.0, 2.0]),
        ..plain.clone()
    };
    let got = scalar(weighted.sum(|| x.clone(), y.clone(), IGNORE, || unreachable!()));
    let ce = scalar(weighted.term(&LossKind::CrossEntropy, x.clone(), y.clone(), IGNORE));
    let d = scalar(weighted.term(&dice, x.clone(), y.clone(), IGNORE));
    let f = scalar(weighted.term(&focal, x.clone(), y.clone(), IGNORE));
    let want = ce + 0.5 * d + 3.0 * f;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");

    // No terms: zero.
    let none = SegLoss {
        terms: vec![],
        class_weights: None,
    };
    let got = scalar(none.sum(|| x.clone(), y, IGNORE, || unreachable!()));
    assert_eq!(got, 0.0);
}

#[test]
fn lovasz_of_a_batch_without_valid_pixels_is_zero() {
    // Berman's lovasz_softmax_flat: `if probas.numel() == 0: return probas * 0.`
    let (x, y) = small([IGNORE, IGNORE, 9, IGNORE, -1, IGNORE]);
    let v = scalar(SegLoss::default().term(&LossKind::Lovasz, x, y, IGNORE));
    assert_eq!(v, 0.0);
}

#[test]
fn lovasz_of_one_pixel_per_class_is_its_error() {
    // With a single valid pixel of class k, the Jaccard loss extension is |1 - p_k|.
    let (x, y) = small([IGNORE, 1, IGNORE, IGNORE, IGNORE, IGNORE]);
    let p = burn::tensor::activation::softmax(x.clone(), 1);
    let p1: Vec<f32> = p.into_data().into_vec().unwrap();
    // pixel 1 of a [1, 3, 2, 3] tensor: class k at k * 6 + 1
    let want = 1.0 - p1[6 + 1] as f64;
    let v = scalar(SegLoss::default().term(&LossKind::Lovasz, x, y, IGNORE));
    assert!((v - want).abs() < 1e-6, "{v} vs {want}");
}

#[test]
fn median_frequency_of_an_even_number_of_classes_averages_the_middle_two() {
    // f = [1/12, 3/12, 0, 6/12, 2/12]: sorted 1/12, 2/12, 3/12, 6/12, median 2.5/12.
    let w = median_frequency_weights(&[100, 300, 0, 600, 200]);
    let f = [1.0 / 12.0, 3.0 / 12.0, 0.0, 6.0 / 12.0, 2.0 / 12.0];
    for (c, (&got, fc)) in w.iter().zip(f).enumerate() {
        let want = if fc == 0.0 { 1.0 } else { 2.5 / 12.0 / fc };
        assert!((got as f64 - want).abs() < 1e-6, "class {c}: {w:?}");
    }
    assert_eq!(median_frequency_weights(&[0, 0, 0]), vec![1.0; 3]);
    // a single present class is its own median
    assert_eq!(median_frequency_weights(&[0, 40]), vec![1.0, 1.0]);
}

#[test]
fn an_ignore_index_that_is_also_a_class_id_only_marks_pixels() {
    // Datasets that ignore class 0: pixels labelled 0 must count nowhere, exactly as if they
    // were labelled 255 with ignore 255 (class 0 is then absent, also for Lovász's
    // "present" classes and Dice's mean).
    let (x, y0) = small([0, 1, 2, 1, 0, 2]);
    let (_, y255) = small([255, 1, 2, 1, 255, 2]);
    let loss = SegLoss::default();
    for kind in [
        LossKind::CrossEntropy,
        LossKind::Focal { gamma: 2.0 },
        LossKind::Dice { smooth: 1.0 },
        LossKind::Lovasz,
    ] {
        let a = scalar(loss.term(&kind, x.clone(), y0.clone(), 0));
        let b = scalar(loss.term(&kind, x.clone(), y255.clone(), 255));
        assert!((a - b).abs() < 1e-6, "{kind:?}: {a} vs {b}");
    }
}
