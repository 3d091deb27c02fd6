//! Each loss against a direct f64 computation written out here (values), and burn's autodiff
//! gradient against central finite differences of that computation.

use super::*;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;

use crate::test_support::random;

type B = Flex;
type A = Autodiff<Flex>;

const IGNORE: i64 = 255;

/// A small case: `[2, 3, 4, 5]` logits, labels with every class, an ignored pixel and one
/// out-of-range label (both skipped).
fn case() -> (Vec<f64>, Vec<i64>, [usize; 4]) {
    let shape = [2, 3, 4, 5];
    let logits: Vec<f64> = random::<B, 4>(shape, 7)
        .mul_scalar(2.0)
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    let n = shape[0] * shape[2] * shape[3];
    let mut labels: Vec<i64> = (0..n).map(|i| [0, 0, 1, 2, 0, 1][i % 6]).collect();
    labels[3] = IGNORE;
    labels[11] = 7;
    (logits, labels, shape)
}

/// Softmax probabilities per pixel: `p[pixel][class]`, pixels in (b, y, x) order.
fn probs(logits: &[f64], [b, c, h, w]: [usize; 4]) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    for bi in 0..b {
        for i in 0..h * w {
            let z: Vec<f64> = (0..c).map(|k| logits[(bi * c + k) * h * w + i]).collect();
            let m = z.iter().cloned().fold(f64::MIN, f64::max);
            let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
            out.push(z.iter().map(|v| (v - m).exp() / s).collect());
        }
    }
    out
}

fn is_valid(y: i64, c: usize) -> bool {
    y != IGNORE && y >= 0 && (y as usize) < c
}

/// Σ w_y (1 − p_y)^γ (−log p_y) / Σ w_y over valid pixels.
fn ref_focal(
    logits: &[f64],
    labels: &[i64],
    shape: [usize; 4],
    gamma: f64,
    w: Option<&[f32]>,
) -> f64 {
    let p = probs(logits, shape);
    let (mut num, mut den) = (0.0, 0.0);
    for (pix, &y) in p.iter().zip(labels) {
        if !is_valid(y, shape[1]) {
            continue;
        }
        let py = pix[y as usize];
        let wy = w.map_or(1.0, |w| w[y as usize] as f64);
        num += wy * (1.0 - py).powf(gamma) * -py.ln();
        den += wy;
    }
    num / den
}

/// smp DiceLoss(multiclass, from_logits, smooth): mean over all classes of
/// (1 − dice_c)·[class c in the labels].
fn ref_dice(logits: &[f64], labels: &[i64], shape: [usize; 4], smooth: f64) -> f64 {
    let c = shape[1];
    let p = probs(logits, shape);
    let mut total = 0.0;
    for k in 0..c {
        let (mut inter, mut card, mut count) = (0.0, 0.0, 0.0);
        for (pix, &y) in p.iter().zip(labels) {
            if !is_valid(y, c) {
                continue;
            }
            let t = if y as usize == k { 1.0 } else { 0.0 };
            inter += pix[k] * t;
            card += pix[k] + t;
            count += t;
        }
        let score = (2.0 * inter + smooth) / (card + smooth).max(1e-7);
        if count > 0.0 {
            total += 1.0 - score;
        }
    }
    total / c as f64
}

/// Berman et al.'s lovasz_softmax_flat with classes="present", written from the paper.
#[allow(clippy::needless_range_loop)] // index loops read like the paper's formulas
fn ref_lovasz(logits: &[f64], labels: &[i64], shape: [usize; 4]) -> f64 {
    let c = shape[1];
    let p = probs(logits, shape);
    let pixels: Vec<usize> = (0..labels.len())
        .filter(|&i| is_valid(labels[i], c))
        .collect();
    let (mut sum, mut present) = (0.0, 0);
    for k in 0..c {
        let fg: Vec<f64> = pixels
            .iter()
            .map(|&i| (labels[i] as usize == k) as u8 as f64)
            .collect();
        if fg.iter().sum::<f64>() == 0.0 {
            continue;
        }
        present += 1;
        let err: Vec<f64> = pixels
            .iter()
            .zip(&fg)
            .map(|(&i, f)| (f - p[i][k]).abs())
            .collect();
        let mut order: Vec<usize> = (0..err.len()).collect();
        order.sort_by(|&a, &b| err[b].total_cmp(&err[a]));
        let gts: f64 = fg.iter().sum();
        // Jaccard index of the top-k set, then its discrete derivative.
        let (mut cum_fg, mut cum_bg, mut prev) = (0.0, 0.0, 0.0);
        for &i in &order {
            cum_fg += fg[i];
            cum_bg += 1.0 - fg[i];
            let jac = 1.0 - (gts - cum_fg) / (gts + cum_bg);
            sum += err[i] * (jac - prev);
            prev = jac;
        }
    }
    sum / present as f64
}

fn tensors<Bk: burn::tensor::backend::Backend>(
    logits: &[f64],
    labels: &[i64],
    shape: [usize; 4],
) -> (Tensor<Bk, 4>, Tensor<Bk, 3, Int>) {
    let device = Default::default();
    let x = Tensor::from_data(
        TensorData::new(logits.iter().map(|&v| v as f32).collect::<Vec<_>>(), shape),
        &device,
    );
    let y = Tensor::from_data(
        TensorData::new(labels.to_vec(), [shape[0], shape[2], shape[3]]),
        &device,
    );
    (x, y)
}

/// Checks `kind` against `reference`: the value, and the autodiff gradient against central
/// differences of the reference at every logit.
fn check(loss: &SegLoss, kind: LossKind, reference: impl Fn(&[f64]) -> f64) {
    let (logits, labels, shape) = case();
    let (x, y) = tensors::<B>(&logits, &labels, shape);
    let value = loss.term(&kind, x, y, IGNORE).into_scalar() as f64;
    let want = reference(&logits);
    assert!(
        (value - want).abs() <= 1e-5 * want.abs().max(1.0),
        "{kind:?}: {value} vs reference {want}"
    );

    let (x, y) = tensors::<A>(&logits, &labels, shape);
    let x = x.require_grad();
    let grads = loss.term(&kind, x.clone(), y, IGNORE).backward();
    let grad: Vec<f32> = x.grad(&grads).unwrap().into_data().into_vec().unwrap();
    let eps = 1e-4;
    let (mut worst, mut scale) = (0f64, 0f64);
    for i in 0..logits.len() {
        let mut plus = logits.clone();
        plus[i] += eps;
        let mut minus = logits.clone();
        minus[i] -= eps;
        let fd = (reference(&plus) - reference(&minus)) / (2.0 * eps);
        worst = worst.max((grad[i] as f64 - fd).abs());
        scale = scale.max(fd.abs());
    }
    assert!(
        scale > 1e-3,
        "{kind:?}: the gradient is trivially small ({scale:e})"
    );
    assert!(
        worst <= 1e-4 * scale,
        "{kind:?}: gradient off by {worst:e} (largest {scale:e})"
    );
}

#[test]
fn cross_entropy_matches_direct_computation() {
    let (_, labels, shape) = case();
    check(&SegLoss::default(), LossKind::CrossEntropy, |z| {
        ref_focal(z, &labels, shape, 0.0, None)
    });
}

#[test]
fn class_weighted_cross_entropy_matches_torch_weight_semantics() {
    let (_, labels, shape) = case();
    let w = vec![0.5f32, 2.0, 4.0];
    let loss = SegLoss {
        class_weights: Some(w.clone()),
        ..Default::default()
    };
    check(&loss, LossKind::CrossEntropy, |z| {
        ref_focal(z, &labels, shape, 0.0, Some(&w))
    });
}

#[test]
fn focal_matches_direct_computation() {
    let (_, labels, shape) = case();
    check(&SegLoss::default(), LossKind::Focal { gamma: 2.0 }, |z| {
        ref_focal(z, &labels, shape, 2.0, None)
    });
    let w = vec![1.0f32, 3.0, 0.25];
    let weighted = SegLoss {
        class_weights: Some(w.clone()),
        ..Default::default()
    };
    check(&weighted, LossKind::Focal { gamma: 1.5 }, |z| {
        ref_focal(z, &labels, shape, 1.5, Some(&w))
    });
}

#[test]
fn dice_matches_smp_definition() {
    let (_, labels, shape) = case();
    for smooth in [0.0, 1.0] {
        check(&SegLoss::default(), LossKind::Dice { smooth }, |z| {
            ref_dice(z, &labels, shape, smooth)
        });
    }
}

#[test]
fn dice_zeroes_classes_absent_from_the_labels() {
    // Class 2 never occurs: its term is 0 but it still counts in the mean (smp).
    let (logits, mut labels, shape) = case();
    for l in labels.iter_mut() {
        if *l == 2 {
            *l = 1;
        }
    }
    let (x, y) = tensors::<B>(&logits, &labels, shape);
    let v = SegLoss::default()
        .term(&LossKind::Dice { smooth: 0.0 }, x, y, IGNORE)
        .into_scalar() as f64;
    assert!((v - ref_dice(&logits, &labels, shape, 0.0)).abs() < 1e-5);
}

#[test]
fn lovasz_matches_berman_reference() {
    let (_, labels, shape) = case();
    check(&SegLoss::default(), LossKind::Lovasz, |z| {
        ref_lovasz(z, &labels, shape)
    });
}

#[test]
fn every_loss_ignores_ignored_pixels() {
    // Changing the logits of an ignored pixel changes no loss.
    let (mut logits, labels, shape) = case();
    let loss = SegLoss::default();
    let kinds = [
        LossKind::CrossEntropy,
        LossKind::Focal { gamma: 2.0 },
        LossKind::Dice { smooth: 1.0 },
        LossKind::Lovasz,
    ];
    let eval = |z: &[f64]| -> Vec<f32> {
        kinds
            .iter()
            .map(|k| {
                let (x, y) = tensors::<B>(z, &labels, shape);
                loss.term(k, x, y, IGNORE).into_scalar()
            })
            .collect()
    };
    let before = eval(&logits);
    let [_, c, h, w] = shape;
    for k in 0..c {
        logits[k * h * w + 3] += 5.0; // pixel 3 of image 0 is ignored
        logits[k * h * w + 11] -= 3.0; // pixel 11 has an out-of-range label
    }
    assert_eq!(before, eval(&logits));
}

#[test]
fn median_frequency_weights_follow_the_formula() {
    // f = [0.7, 0.2, 0.1, 0]: median of the present classes 0.2.
    let w = median_frequency_weights(&[700, 200, 100, 0]);
    let want = [0.2 / 0.7, 1.0, 2.0, 1.0];
    for (a, b) in w.iter().zip(want) {
        assert!((*a as f64 - b).abs() < 1e-6, "{w:?}");
    }
}

#[test]
fn model_loss_with_uses_the_upsample_ce_op_and_adds_terms() {
    let _rng = crate::test_support::rng_lock();
    // Quarter-resolution logits: the CE term is Segformer::loss (the fused op here), the Dice
    // term runs on the bilinearly upsampled logits; gradients agree with burn's composition.
    use crate::{Kernels, SegformerConfig, resize_bilinear};
    let mut config = SegformerConfig::mit_b0().with_num_labels(3);
    config.hidden_sizes = vec![8, 16, 24, 32];
    config.num_attention_heads = vec![1, 2, 3, 4];
    config.depths = vec![1, 1, 1, 1];
    config.decoder_hidden_size = 16;
    let device = Default::default();
    let model = config.init::<A>(&device).unwrap();
    let (_, labels, _) = case();
    let labels = Tensor::<A, 3, Int>::from_data(TensorData::new(labels, [2, 4, 5]), &device);
    let logits = random::<A, 4>([2, 3, 2, 3], 3).require_grad();
    let loss = SegLoss {
        terms: vec![
            LossTerm {
                kind: LossKind::CrossEntropy,
                weight: 1.0,
            },
            LossTerm {
                kind: LossKind::Dice { smooth: 0.0 },
                weight: 0.5,
            },
        ],
        class_weights: None,
    };
    let sum = model.loss_with(logits.clone(), labels.clone(), &loss);
    let full = resize_bilinear(logits.clone(), [4, 5]);
    let want = model.loss(logits.clone(), labels.clone())
        + loss
            .term(
                &LossKind::Dice { smooth: 0.0 },
                full,
                labels.clone(),
                IGNORE,
            )
            .mul_scalar(0.5);
    let (a, b) = (sum.clone().into_scalar(), want.into_scalar());
    assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    let g_fused = logits.grad(&sum.backward()).unwrap();
    let composed = model.clone().with_kernels(Kernels::Composed);
    let g_composed = logits
        .grad(&composed.loss_with(logits.clone(), labels, &loss).backward())
        .unwrap();
    crate::test_support::assert_close("logits grad", g_fused, g_composed, 1e-5);
    // The plain default is exactly Segformer::loss.
    assert!(SegLoss::default().ce_is_fused() && !SegLoss::default().keeps_full_logits());
    assert!(loss.keeps_full_logits());
}
