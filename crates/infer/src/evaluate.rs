//! The evaluation loop: loss and streaming metrics of a model over labelled batches.

use augment::Batch;
use burn::prelude::ToElement;
use burn::tensor::backend::Backend;
use segformer::Segformer;

use crate::error::InferError;
use crate::metrics::{ConfusionMatrix, SegMetrics};
use crate::postprocess::{batch_tensors, host, predict_classes};
use crate::tta::{Tta, upsampled_logits};

/// A figure of an evaluation that picks the best checkpoint or stops a run early, as configs
/// name it: `miou`, `mean_f1`, `pixel_accuracy` (higher is better) or `val_loss` (lower is
/// better). Adding one is a variant here and its arms below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Mean IoU over the classes present ([`SegMetrics::miou`]).
    #[default]
    Miou,
    /// Mean F1 ([`SegMetrics::mean_f1`]).
    MeanF1,
    /// Pixel accuracy ([`SegMetrics::pixel_accuracy`]).
    PixelAccuracy,
    /// The validation loss ([`EvalResult::loss`]).
    ValLoss,
}

impl Metric {
    /// The name configs use (`miou`, `mean_f1`, `pixel_accuracy`, `val_loss`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Miou => "miou",
            Metric::MeanF1 => "mean_f1",
            Metric::PixelAccuracy => "pixel_accuracy",
            Metric::ValLoss => "val_loss",
        }
    }

    /// Whether a smaller value is better (only the loss).
    pub fn lower_is_better(self) -> bool {
        self == Metric::ValLoss
    }

    /// The metric's value in `eval`.
    pub fn of(self, eval: &EvalResult) -> f64 {
        match self {
            Metric::Miou => eval.metrics.miou,
            Metric::MeanF1 => eval.metrics.mean_f1,
            Metric::PixelAccuracy => eval.metrics.pixel_accuracy,
            Metric::ValLoss => eval.loss,
        }
    }

    /// Whether `value` improves on `best` by more than `min_delta` in this metric's direction;
    /// the first finite value always does, a non-finite one never.
    pub fn improves(self, value: f64, best: Option<f64>, min_delta: f64) -> bool {
        value.is_finite()
            && best.is_none_or(|best| {
                if self.lower_is_better() {
                    value < best - min_delta
                } else {
                    value > best + min_delta
                }
            })
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// The same pixels predicted with test-time augmentation ([`evaluate_tta`] with a
    /// [`Tta`] other than [`Tta::None`]); the fields above stay those of the plain model.
    pub tta: Option<TtaEval>,
}

/// Metrics of the test-time-augmented predictions of an [`evaluate_tta`] run.
#[derive(Clone, Debug)]
pub struct TtaEval {
    /// The augmentation.
    pub tta: Tta,
    /// Metrics over every labelled pixel.
    pub metrics: SegMetrics,
    /// The confusion matrix behind them.
    pub confusion: ConfusionMatrix,
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
    after_batch: impl FnMut(),
) -> Result<EvalResult, E>
where
    B: Backend,
    E: From<InferError>,
{
    evaluate_tta(model, batches, Tta::None, device, after_batch)
}

/// [`evaluate`], and with `tta` other than [`Tta::None`] also the metrics of the predictions
/// averaged over its poses ([`EvalResult::tta`]), from the same pass: the identity pose's
/// forward gives both the plain prediction and the loss, so the plain metrics are exactly
/// those of [`evaluate`].
pub fn evaluate_tta<B, E>(
    model: &Segformer<B>,
    batches: impl IntoIterator<Item = Result<Batch, E>>,
    tta: Tta,
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
    let mut averaged = (tta != Tta::None).then(|| ConfusionMatrix::new(num_classes, ignore));
    let (mut loss_sum, mut count) = (0.0f64, 0usize);
    for batch in batches {
        let batch = batch?;
        let (x, y) = batch_tensors::<B>(&batch, device);
        let logits = model.forward(x.clone());
        loss_sum += model.loss(logits.clone(), y).into_scalar().to_f64();
        count += 1;
        let labels = batch.labels.as_deref().unwrap_or(&[]);
        let size = [batch.h, batch.w];
        if let Some(averaged) = &mut averaged {
            let full = upsampled_logits(model, x, tta, Some(logits.clone()));
            let pred: Vec<i64> = host(predict_classes(full, size), "predictions")?;
            averaged.update(labels, &pred);
        }
        let pred: Vec<i64> = host(predict_classes(logits, size), "predictions")?;
        confusion.update(labels, &pred);
        after_batch();
    }
    Ok(EvalResult {
        loss: loss_sum / count.max(1) as f64,
        metrics: confusion.metrics(),
        confusion,
        batches: count,
        tta: averaged.map(|confusion| TtaEval {
            tta,
            metrics: confusion.metrics(),
            confusion,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::{Int, Tensor, TensorData};
    use segformer::SegformerConfig;

    #[test]
    fn metrics_compare_in_their_own_direction() {
        // Higher is better, by more than min_delta; the first finite value always improves.
        assert!(Metric::Miou.improves(0.5, None, 0.1));
        assert!(Metric::Miou.improves(0.62, Some(0.5), 0.1));
        assert!(!Metric::Miou.improves(0.6, Some(0.5), 0.1));
        assert!(!Metric::MeanF1.improves(0.4, Some(0.5), 0.0));
        // Lower is better for the loss.
        assert!(Metric::ValLoss.lower_is_better());
        assert!(Metric::ValLoss.improves(0.4, Some(0.5), 0.0));
        assert!(!Metric::ValLoss.improves(0.6, Some(0.5), 0.0));
        // Not finite: never.
        for m in [Metric::Miou, Metric::ValLoss] {
            assert!(!m.improves(f64::NAN, None, 0.0));
            assert!(!m.improves(f64::INFINITY, Some(0.5), 0.0));
        }
    }

    fn tiny_model() -> Segformer<Flex> {
        let mut c = SegformerConfig::mit_b0().with_num_labels(3);
        c.hidden_sizes = vec![8, 16, 24, 32];
        c.num_attention_heads = vec![1, 2, 3, 4];
        c.depths = vec![1, 1, 1, 1];
        c.decoder_hidden_size = 16;
        c.init::<Flex>(&Default::default()).unwrap()
    }

    /// Two images of `h × w` pixels, labels cycling through the 3 classes and 255.
    fn batch(seed: usize, h: usize, w: usize) -> Batch {
        let n = 2;
        Batch {
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
        }
    }

    #[test]
    fn metrics_and_loss_match_a_direct_computation() {
        let device = Default::default();
        let model = tiny_model();
        let (n, h, w) = (2, 32, 32);
        let make = |seed| batch(seed, h, w);
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
    fn tta_metrics_come_with_the_plain_ones_from_one_pass() {
        let device = Default::default();
        let model = tiny_model();
        let (h, w) = (40, 48);
        let batches = vec![batch(0, h, w), batch(1, h, w)];
        let run = |tta| {
            evaluate_tta::<Flex, InferError>(
                &model,
                batches.iter().cloned().map(Ok),
                tta,
                &device,
                || {},
            )
            .unwrap()
        };
        let plain =
            evaluate::<Flex, InferError>(&model, batches.iter().cloned().map(Ok), &device, || {})
                .unwrap();
        assert!(plain.tta.is_none() && run(Tta::None).tta.is_none());
        for tta in [Tta::Flips, Tta::D4] {
            let both = run(tta);
            assert_eq!(
                both.confusion, plain.confusion,
                "{tta}: plain metrics changed"
            );
            assert_eq!(both.loss.to_bits(), plain.loss.to_bits());
            let averaged = both.tta.unwrap();
            assert_eq!(averaged.tta, tta);
            // Direct: the mean of the poses' softmax, each put back, argmax.
            let mut direct = ConfusionMatrix::new(3, 255);
            for b in &batches {
                let (x, _) = batch_tensors::<Flex>(b, &device);
                let mut mean = Tensor::<Flex, 4>::zeros([b.n, 3, h, w], &device);
                for &pose in tta.poses() {
                    let logits = model.forward(pose.apply(x.clone()));
                    let up = segformer::resize_bilinear(logits, pose.size([h, w]));
                    mean = mean + pose.undo(burn::tensor::activation::softmax(up, 1));
                }
                let pred: Vec<i64> = host(mean.argmax(1), "classes").unwrap();
                direct.update(b.labels.as_deref().unwrap(), &pred);
            }
            // Equal up to pixels whose two best classes tie within rounding.
            let off: u64 = (0..3)
                .flat_map(|t| (0..3).map(move |p| (t, p)))
                .map(|(t, p)| direct.get(t, p).abs_diff(averaged.confusion.get(t, p)))
                .sum();
            assert!(off <= 4, "{tta}: {off} counts off the direct computation");
            let m = averaged.confusion.metrics();
            assert_eq!(
                (averaged.metrics.miou, averaged.metrics.pixels),
                (m.miou, m.pixels)
            );
            assert_ne!(averaged.confusion, plain.confusion, "{tta} changed nothing");
        }
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
