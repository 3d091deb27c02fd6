//! From logits to answers: HF's post-processing (upsample, then argmax), softmax
//! probabilities, and the batch → tensor conversion every caller of the model needs.

use augment::Batch;
use burn::tensor::backend::Backend;
use burn::tensor::{Element, Int, Tensor, TensorData};

use crate::error::InferError;

/// The label value that marks "no label here" (HF's `semantic_loss_ignore_index` default);
/// unlabelled batches get it everywhere.
const NO_LABEL: i64 = 255;

/// Class index per pixel at `size`: the logits upsampled bilinearly like HF's
/// `post_process_semantic_segmentation` (`align_corners = false`), then argmax over classes;
/// for a single-logit model, `logit > 0`. The same rule as [`classes_of`], on the device.
///
/// # Shapes
/// - logits: `[batch, classes, h, w]`
/// - output: `[batch, size[0], size[1]]`
pub fn predict_classes<B: Backend>(logits: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 3, Int> {
    let up = segformer::resize_bilinear(logits, size);
    let [n, c, h, w] = up.dims();
    if c == 1 {
        return up.greater_elem(0.0).int().reshape([n, h, w]);
    }
    up.argmax(1).reshape([n, h, w])
}

/// Class index per pixel of logits already at full resolution: argmax over classes (the first
/// class wins ties), or `logit > 0` for a single-logit model. The same rule as
/// [`predict_classes`], on the host.
///
/// # Shapes
/// - logits: `[classes, height, width]` (`plane = height · width`)
/// - output: `[height, width]`
pub fn classes_of(logits: &[f32], classes: usize, plane: usize) -> Vec<u8> {
    (0..plane)
        .map(|i| {
            if classes == 1 {
                return u8::from(logits[i] > 0.0);
            }
            let mut best = 0;
            for c in 1..classes {
                if logits[c * plane + i] > logits[best * plane + i] {
                    best = c;
                }
            }
            best as u8
        })
        .collect()
}

/// Softmax over classes per pixel (the sigmoid for a single-logit model).
///
/// # Shapes
/// - logits: `[classes, height, width]` (`plane = height · width`)
/// - output: `[classes, height, width]`
pub fn probabilities(logits: &[f32], classes: usize, plane: usize) -> Vec<f32> {
    let mut out = vec![0.0; logits.len()];
    for i in 0..plane {
        if classes == 1 {
            out[i] = 1.0 / (1.0 + (-logits[i]).exp());
            continue;
        }
        let max = (0..classes)
            .map(|c| logits[c * plane + i])
            .fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = (0..classes)
            .map(|c| (logits[c * plane + i] - max).exp())
            .sum();
        for c in 0..classes {
            out[c * plane + i] = (logits[c * plane + i] - max).exp() / total;
        }
    }
    out
}

/// A collated batch as model input and labels, on `device`.
///
/// # Shapes
/// - pixel values: `[n, c, h, w]`
/// - labels: `[n, h, w]` (255, ignored by the loss and the metrics, where the batch has none)
pub fn batch_tensors<B: Backend>(
    batch: &Batch,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 3, Int>) {
    let x = Tensor::from_data(
        TensorData::new(
            batch.pixel_values.clone(),
            [batch.n, batch.c, batch.h, batch.w],
        ),
        device,
    );
    let labels = batch
        .labels
        .clone()
        .unwrap_or_else(|| vec![NO_LABEL; batch.n * batch.h * batch.w]);
    let y = Tensor::from_data(TensorData::new(labels, [batch.n, batch.h, batch.w]), device);
    (x, y)
}

/// A tensor's values on the host, in row-major order.
pub(crate) fn host<B: Backend, const D: usize, K, E: Element>(
    t: Tensor<B, D, K>,
    what: &'static str,
) -> Result<Vec<E>, InferError>
where
    K: burn::tensor::BasicOps<B>,
{
    t.into_data()
        .convert::<E>()
        .to_vec()
        .map_err(|e| InferError::Readback {
            what,
            reason: format!("{e:?}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn host_and_device_argmax_agree() {
        // 2 classes × 2 × 2, logits at full resolution (the resize is the identity).
        let logits = [0.0, 2.0, 1.0, -1.0, 0.5, 0.5, 3.0, -2.0];
        let device = Default::default();
        let t =
            Tensor::<Flex, 4>::from_data(TensorData::new(logits.to_vec(), [1, 2, 2, 2]), &device);
        let on_device: Vec<i64> = host(predict_classes(t, [2, 2]), "classes").unwrap();
        let on_host: Vec<i64> = classes_of(&logits, 2, 4)
            .iter()
            .map(|&c| c as i64)
            .collect();
        assert_eq!(on_host, [1, 0, 1, 0]);
        assert_eq!(on_device, on_host);
    }

    #[test]
    fn classes_and_probabilities() {
        let logits = [0.0, 2.0, 1.0, -1.0]; // 2 classes × 2 pixels
        assert_eq!(classes_of(&logits, 2, 2), [1, 0]);
        let p = probabilities(&logits, 2, 2);
        let expect = 1.0 / (1.0 + 1f32.exp());
        assert!((p[0] + p[2] - 1.0).abs() < 1e-6 && (p[0] - expect).abs() < 1e-6);
        assert_eq!(classes_of(&[0.3, -0.2], 1, 2), [1, 0]);
        let s = probabilities(&[0.0, 2.0], 1, 2);
        assert!((s[0] - 0.5).abs() < 1e-6 && (s[1] - 1.0 / (1.0 + (-2f32).exp())).abs() < 1e-6);
    }

    #[test]
    fn single_logit_models_threshold_at_zero_after_upsampling() {
        let device = Default::default();
        // [1, 1, 1, 2]: -1 | +1, upsampled to 1 × 4 (half-pixel: -1, -0.5, 0.5, 1).
        let t = Tensor::<Flex, 4>::from_data(
            TensorData::new(vec![-1.0f32, 1.0], [1, 1, 1, 2]),
            &device,
        );
        let c: Vec<i64> = host(predict_classes(t, [1, 4]), "classes").unwrap();
        assert_eq!(c, [0, 0, 1, 1]);
    }

    #[test]
    fn unlabelled_batches_are_ignored_everywhere() {
        let batch = Batch {
            pixel_values: vec![0.0; 2 * 3 * 4],
            labels: None,
            n: 2,
            c: 1,
            h: 3,
            w: 4,
        };
        let (x, y) = batch_tensors::<Flex>(&batch, &Default::default());
        assert_eq!(x.dims(), [2, 1, 3, 4]);
        let y: Vec<i64> = host(y, "labels").unwrap();
        assert!(y.len() == 24 && y.iter().all(|&v| v == NO_LABEL));
    }
}
