//! Each recomputing op against burn's composition of the same maths: outputs and the
//! gradients of every input, on `Autodiff<Flex>` with and without activation checkpointing,
//! in f32 and under bf16 autocast, with more rows than one chunk; and on `Autodiff<Wgpu>`
//! (lavapipe in CI), where both sides run burn-wgpu's kernels.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{FloatDType, Int, Tensor, TensorData};

use super::{CHUNK_ELEMENTS, attention, upsample_cross_entropy};
use crate::ops::attention_composed;
use crate::test_support::{assert_close, forward_backward, random_on};

type A = Autodiff<Flex>;
type AC = Autodiff<Flex, BalancedCheckpointing>;

/// Attention on `[2, n, 8·heads]` queries and `[2, m, 8·heads]` keys, blocks of `chunk` scores.
fn attention_case<B: AutodiffBackend>(
    heads: usize,
    [n, m]: [usize; 2],
    compute: Option<FloatDType>,
    chunk: usize,
    tol: f32,
) {
    attention_case_on::<B>(heads, [n, m], compute, chunk, tol, &Default::default());
}

fn attention_case_on<B: AutodiffBackend>(
    heads: usize,
    [n, m]: [usize; 2],
    compute: Option<FloatDType>,
    chunk: usize,
    tol: f32,
    device: &B::Device,
) {
    let q = random_on::<B, 3>([2, n, 8 * heads], 7, device);
    let k = random_on::<B, 3>([2, m, 8 * heads], 8, device) * 2.0;
    let v = random_on::<B, 3>([2, m, 8 * heads], 9, device);
    let inputs = [q, k, v];
    let (ro, rg) = forward_backward(&inputs, |t| {
        let (q, k, v) = (t[0].clone(), t[1].clone(), t[2].clone());
        attention(q, k, v, heads, compute, chunk)
    });
    let (go, gg) = forward_backward(&inputs, |t| {
        attention_composed(t[0].clone(), t[1].clone(), t[2].clone(), heads, compute)
    });
    assert_close("out", ro, go, tol);
    for (name, (r, g)) in ["dq", "dk", "dv"].into_iter().zip(rg.into_iter().zip(gg)) {
        assert_close(name, r, g, 10.0 * tol);
    }
}

#[test]
fn attention_matches_the_composition_across_chunks() {
    // 2 images × 2 heads × 37 keys: blocks of 13 query rows, the last one shorter.
    attention_case::<A>(2, [100, 37], None, 2 * 2 * 37 * 13, 1e-5);
    // One block (the default size).
    attention_case::<A>(1, [64, 64], None, CHUNK_ELEMENTS, 1e-5);
}

#[test]
fn attention_with_activation_checkpointing() {
    attention_case::<AC>(3, [300, 20], None, 2 * 3 * 20 * 50, 1e-5);
}

#[test]
fn attention_under_bf16_autocast_matches_the_composition() {
    // Both sides round the same matmul inputs to bf16; what differs is only the order of the
    // f32 accumulations inside the matmuls.
    let bf16 = Some(FloatDType::BF16);
    attention_case::<A>(2, [300, 40], bf16, 2 * 2 * 40 * 70, 2e-2);
}

#[test]
fn attention_without_autodiff_runs_the_chunked_forward() {
    let device = Default::default();
    let q = random_on::<Flex, 3>([1, 130, 32], 12, &device);
    let k = random_on::<Flex, 3>([1, 17, 32], 13, &device);
    let v = random_on::<Flex, 3>([1, 17, 32], 14, &device);
    let r = attention(q.clone(), k.clone(), v.clone(), 2, None, CHUNK_ELEMENTS);
    let g = attention_composed(q, k, v, 2, None);
    assert_close("out", r, g, 1e-5);
}

fn labels(size: [usize; 2], batch: usize) -> Vec<i64> {
    // Every class, the ignore index and out-of-range labels (both signs).
    (0..batch * size[0] * size[1])
        .map(|i| [0, 1, 2, 3, 4, 255, 7, 1, -1][(i * 7 + i / 3) % 9])
        .collect()
}

/// The loss of 5-class `[2, 5, logit_size]` logits against `[2, label_size]` labels, bands of
/// `rows` label rows.
fn cross_entropy_case<B: AutodiffBackend>(
    logit_size: [usize; 2],
    label_size: [usize; 2],
    rows: usize,
) {
    cross_entropy_case_on::<B>(logit_size, label_size, rows, &Default::default());
}

fn cross_entropy_case_on<B: AutodiffBackend>(
    logit_size: [usize; 2],
    label_size: [usize; 2],
    rows: usize,
    device: &B::Device,
) {
    let classes = 5;
    let logits = random_on::<B, 4>([2, classes, logit_size[0], logit_size[1]], 60, device) * 3.0;
    let labels = Tensor::<B, 3, Int>::from_data(
        TensorData::new(labels(label_size, 2), [2, label_size[0], label_size[1]]),
        device,
    );
    let (ro, rg) = forward_backward::<B, 4, 1>(&[logits.clone()], |t| {
        let chunk = 2 * classes * label_size[1] * rows;
        upsample_cross_entropy(&t[0], &labels, 255, chunk)
    });
    let (go, gg) = forward_backward::<B, 4, 1>(&[logits], |t| {
        let up = crate::bilinear::resize_bilinear(t[0].clone(), label_size);
        crate::ops::cross_entropy(up, labels.clone(), 255)
    });
    assert_close("loss", ro, go, 1e-5);
    assert_close("dlogits", rg[0].clone(), gg[0].clone(), 1e-4);
}

#[test]
fn cross_entropy_matches_upsample_then_loss() {
    // One band.
    cross_entropy_case::<A>([7, 6], [28, 24], 28);
    cross_entropy_case::<A>([6, 4], [6, 4], 6);
    // Bands of 5 rows, the last one shorter; at 4× and odd ratios neighbouring bands share
    // source rows.
    cross_entropy_case::<A>([7, 6], [28, 24], 5);
    cross_entropy_case::<A>([5, 5], [17, 23], 5);
    cross_entropy_case::<AC>([7, 6], [28, 24], 3);
}

#[test]
fn cross_entropy_of_all_ignored_pixels_is_zero() {
    let logits = random_on::<A, 4>([1, 3, 2, 2], 1, &Default::default()).require_grad();
    let labels = Tensor::<A, 3, Int>::full([1, 8, 8], 255, &Default::default());
    let loss = upsample_cross_entropy(&logits, &labels, 255, CHUNK_ELEMENTS);
    assert_eq!(loss.clone().into_scalar(), 0.0);
    let grads = loss.backward();
    let g = logits.grad(&grads).unwrap();
    assert_eq!(g.abs().max().into_scalar(), 0.0);
}

/// The same cases on burn-wgpu, where the recomputing ops run through their `Autodiff<Wgpu>`
/// routes and burn's composition through burn-wgpu's own kernels.
#[cfg(feature = "wgpu")]
mod wgpu {
    use burn::backend::Wgpu;

    use super::*;
    use crate::test_support::wgpu_device;

    type W = Autodiff<Wgpu>;
    type WC = Autodiff<Wgpu, BalancedCheckpointing>;

    #[test]
    fn attention_matches_the_composition_on_wgpu() {
        let Some(device) = wgpu_device() else { return };
        assert_eq!(
            crate::compute::Route::of::<W>(),
            Some(crate::compute::Route::WgpuAutodiff)
        );
        attention_case_on::<W>(2, [100, 37], None, 2 * 2 * 37 * 13, 1e-5, &device);
        attention_case_on::<WC>(3, [300, 20], None, 2 * 3 * 20 * 50, 1e-5, &device);
    }

    /// burn-wgpu without burn-fusion (the type the fusion benchmark compares against) takes
    /// the recomputing route too.
    #[test]
    fn attention_matches_the_composition_on_unfused_wgpu() {
        let Some(device) = wgpu_device() else { return };
        type U = Autodiff<crate::WgpuUnfused>;
        assert_eq!(
            crate::compute::Route::of::<U>(),
            Some(crate::compute::Route::WgpuUnfusedAutodiff)
        );
        attention_case_on::<U>(2, [100, 37], None, 2 * 2 * 37 * 13, 1e-5, &device);
        cross_entropy_case_on::<U>([7, 6], [28, 24], 5, &device);
    }

    #[test]
    fn cross_entropy_matches_upsample_then_loss_on_wgpu() {
        let Some(device) = wgpu_device() else { return };
        cross_entropy_case_on::<W>([7, 6], [28, 24], 5, &device);
        cross_entropy_case_on::<W>([5, 5], [17, 23], 5, &device);
        cross_entropy_case_on::<WC>([7, 6], [28, 24], 3, &device);
    }
}
