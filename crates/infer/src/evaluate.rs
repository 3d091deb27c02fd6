//! The evaluation loop: loss and streaming metrics of a model over labelled batches.

use augment::Batch;
use burn::prelude::ToElement;
use burn::tensor::backend::Backend;
use segformer::Segformer;

use crate::error::InferError;
use crate::metrics::{ConfusionMatrix, SegMetrics};
use crate::postprocess::{batch_tensors, host, predict_classes};

/// Loss and metrics of a model over a set of batches.
#[derive(Clone, Debug)]
pub struct EvalResult {
    /// Mean of the per-batch losses (HF's loss, as in training).
    pub loss: f64,
    /// Metrics over every labelled pixel.
    pub metrics: SegMetrics,
    /// The confusion matrix behind them.
    pub confusion: ConfusionMatrix,
    /// Batches evaluated.
    pub batches: usize,
}

/// Runs `model` over every batch (inference only: call it with a backend without autodiff, or
/// the model's `valid()` copy), accumulating the loss and a confusion matrix of the predictions
/// at label resolution ([`predict_classes`]); `after_batch` is called after each batch (a
/// progress bar). Pixels labelled `semantic_loss_ignore_index` are left out of both. The first
/// error of `batches` stops the loop and is returned.
pub fn evaluate<B, E>(
    model: &Segformer<B>,
    batches: impl IntoIterator<Item = Result<Batch, E>>,
    device: &B::Device,
    mut after_batch: impl FnMut(),
) -> Result<EvalResult, E>
where
    B: Backend,
    E: From<InferError>,
{
    let num_classes = model.num_labels().max(2);
    let ignore = model.config().semantic_loss_ignore_index;
    let mut confusion = ConfusionMatrix::new(num_classes, ignore);
    let (mut loss_sum, mut count) = (0.0f64, 0usize);
    for batch in batches {
        let batch = batch?;
        let (x, y) = batch_tensors::<B>(&batch, device);
        let logits = model.forward(x);
        loss_sum += model.loss(logits.clone(), y).into_scalar().to_f64();
        count += 1;
        let pred: Vec<i64> = host(predict_classes(logits, [batch.h, batch.w]), "predictions")?;
        confusion.update(batch.labels.as_deref().unwrap_or(&[]), &pred);
        after_batch();
    }
    Ok(EvalResult {
        loss: loss_sum / count.max(1) as f64,
        metrics: confusion.metrics(),
        confusion,
        batches: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::{Int, Tensor, TensorData};
    use segformer::SegformerConfig;

    #[test]
    fn metrics_and_loss_match_a_direct_computation() {
        let mut c = SegformerConfig::mit_b0().with_num_labels(3);
        c.hidden_sizes = vec![8, 16, 24, 32];
        c.num_attention_heads = vec![1, 2, 3, 4];
        c.depths = vec![1, 1, 1, 1];
        c.decoder_hidden_size = 16;
        let device = Default::default();
        let model = c.init::<Flex>(&device).unwrap();
        let (n, h, w) = (2, 32, 32);
        let make = |seed: usize| Batch {
            pixel_values: (0..n * 3 * h * w)
                .map(|i| ((i * 31 + seed * 7) % 97) as f32 / 48.0 - 1.0)
                .collect(),
            labels: Some(
                (0..n * h * w)
                    .map(|i| [0, 1, 2, 255][(i + seed) % 4])
                    .collect(),
            ),
            n,
            c: 3,
            h,
            w,
        };
        let batches = vec![make(0), make(1)];
        let mut calls = 0;
        let result =
            evaluate::<Flex, InferError>(&model, batches.iter().cloned().map(Ok), &device, || {
                calls += 1
            })
            .unwrap();
        assert_eq!((calls, result.batches), (2, 2));
        // Direct: forward each batch, argmax of the upsampled logits, count agreements.
        let (mut correct, mut counted, mut loss) = (0u64, 0u64, 0.0f64);
        for b in &batches {
            let x = Tensor::<Flex, 4>::from_data(
                TensorData::new(b.pixel_values.clone(), [n, 3, h, w]),
                &device,
            );
            let logits = model.forward(x);
            let labels = b.labels.clone().unwrap();
            let y = Tensor::<Flex, 3, Int>::from_data(
                TensorData::new(labels.clone(), [n, h, w]),
                &device,
            );
            loss += model.loss(logits.clone(), y).into_scalar() as f64;
            let up: Vec<f32> = host(segformer::resize_bilinear(logits, [h, w]), "l").unwrap();
            for img in 0..n {
                let plane = &up[img * 3 * h * w..(img + 1) * 3 * h * w];
                let classes = crate::classes_of(plane, 3, h * w);
                for (p, &t) in classes.iter().zip(&labels[img * h * w..(img + 1) * h * w]) {
                    if t != 255 {
                        counted += 1;
                        correct += u64::from(*p as i64 == t);
                    }
                }
            }
        }
        assert_eq!(result.metrics.pixels, counted);
        let acc = correct as f64 / counted as f64;
        assert!((result.metrics.pixel_accuracy - acc).abs() < 1e-12);
        assert!(
            (result.loss - loss / 2.0).abs() < 1e-6,
            "{} vs {}",
            result.loss,
            loss / 2.0
        );
    }

    #[test]
    fn the_first_batch_error_stops_the_loop() {
        let c = SegformerConfig::mit_b0().with_num_labels(2);
        let model = c.init::<Flex>(&Default::default()).unwrap();
        let batches = vec![Err(InferError::Shape("broken sample".into()))];
        let err =
            evaluate::<Flex, InferError>(&model, batches, &Default::default(), || {}).unwrap_err();
        assert_eq!(err.to_string(), "broken sample");
    }
}
