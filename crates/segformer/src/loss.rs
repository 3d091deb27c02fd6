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
