//! Segmentation losses with HF's reductions, computed in a numerically stable form.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// `CrossEntropyLoss(ignore_index)`: mean NLL over the pixels whose label is a valid class.
///
/// # Shapes
/// - logits: `[batch, classes, H, W]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn cross_entropy<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore_index: i64,
) -> Tensor<B, 1> {
    let classes = logits.dims()[1] as i64;
    let valid = labels
        .clone()
        .not_equal_elem(ignore_index)
        .bool_and(labels.clone().greater_equal_elem(0))
        .bool_and(labels.clone().lower_elem(classes));
    // Invalid pixels gather class 0 and are then zeroed by the mask.
    let safe = labels.mask_fill(valid.clone().bool_not(), 0);
    let log_probs = log_softmax(logits, 1);
    // [B, C, H, W] gather [B, 1, H, W] -> [B, 1, H, W] -> [B, H, W]
    let picked = log_probs
        .gather(1, safe.unsqueeze_dim(1))
        .squeeze_dim::<3>(1);
    let mask = valid.float();
    let total = (picked * mask.clone()).sum().neg();
    let count = mask.sum().clamp_min(1.0);
    total / count
}

/// HF's `num_labels == 1` loss: `(BCEWithLogits(x, y) * valid).mean()` over all pixels,
/// valid meaning `0 <= label != ignore_index`.
///
/// # Shapes
/// - logits: `[batch, 1, H, W]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn masked_bce_with_logits<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore_index: i64,
) -> Tensor<B, 1> {
    let x = logits.squeeze_dim::<3>(1);
    let valid = labels
        .clone()
        .not_equal_elem(ignore_index)
        .bool_and(labels.clone().greater_equal_elem(0));
    let y = labels.float();
    // max(x, 0) - x*y + log(1 + exp(-|x|)): never overflows.
    let per_pixel = x.clone().clamp_min(0.0) - x.clone() * y + x.abs().neg().exp().log1p();
    (per_pixel * valid.float()).mean()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::TensorData;

    type B = Flex;

    /// Plain-f64 cross-entropy of one pixel: -log softmax(z)[y].
    fn nll(z: &[f64], y: usize) -> f64 {
        let m = z.iter().cloned().fold(f64::MIN, f64::max);
        let lse = m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        lse - z[y]
    }

    #[test]
    fn cross_entropy_skips_ignored_pixels() {
        let device = Default::default();
        // 1 image, 3 classes, 2x2 pixels; pixel (1,1) is ignored.
        let z = [
            [0.5, -1.0, 2.0, 0.0],
            [1.5, 0.2, -0.3, 9.0],
            [-2.0, 0.7, 0.1, -9.0],
        ];
        let labels = [[2i64, 0], [1, 255]];
        let flat: Vec<f32> = z.iter().flatten().map(|&v| v as f32).collect();
        let logits = Tensor::<B, 4>::from_data(TensorData::new(flat, [1, 3, 2, 2]), &device);
        let lab = Tensor::<B, 3, Int>::from_data(
            TensorData::new(
                labels.iter().flatten().copied().collect::<Vec<_>>(),
                [1, 2, 2],
            ),
            &device,
        );
        let loss = cross_entropy(logits, lab, 255).into_scalar() as f64;
        let pixel = |p: usize| [z[0][p], z[1][p], z[2][p]];
        let expected = (nll(&pixel(0), 2) + nll(&pixel(1), 0) + nll(&pixel(2), 1)) / 3.0;
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
    }

    #[test]
    fn cross_entropy_is_stable_for_huge_logits() {
        let device = Default::default();
        let logits =
            Tensor::<B, 4>::from_data(TensorData::new(vec![1e4f32, -1e4], [1, 2, 1, 1]), &device);
        let lab = Tensor::<B, 3, Int>::from_data(TensorData::new(vec![1i64], [1, 1, 1]), &device);
        let loss = cross_entropy(logits, lab, 255).into_scalar();
        assert!((loss - 2e4).abs() < 1.0, "{loss}");
    }

    #[test]
    fn all_ignored_gives_zero_not_nan() {
        let device = Default::default();
        let logits = Tensor::<B, 4>::ones([1, 2, 2, 2], &device);
        let lab = Tensor::<B, 3, Int>::full([1, 2, 2], 255, &device);
        assert_eq!(cross_entropy(logits, lab, 255).into_scalar(), 0.0);
    }

    #[test]
    fn bce_masks_invalid_pixels_and_averages_over_all() {
        let device = Default::default();
        let x = [0.3f64, -2.0, 50.0, 1.0];
        let y = [1i64, 0, 255, 1];
        let logits = Tensor::<B, 4>::from_data(
            TensorData::new(
                x.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                [1, 1, 2, 2],
            ),
            &device,
        );
        let lab = Tensor::<B, 3, Int>::from_data(TensorData::new(y.to_vec(), [1, 2, 2]), &device);
        let loss = masked_bce_with_logits(logits, lab, 255).into_scalar() as f64;
        let bce = |x: f64, y: f64| {
            -(y * (1.0 / (1.0 + (-x).exp())).ln() + (1.0 - y) * (1.0 / (1.0 + x.exp())).ln())
        };
        // HF: (loss * valid_mask).mean() -> divide by all 4 pixels, not the 3 valid ones.
        let expected = (bce(0.3, 1.0) + bce(-2.0, 0.0) + bce(1.0, 1.0)) / 4.0;
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
    }
}
