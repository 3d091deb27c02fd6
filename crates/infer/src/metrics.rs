//! Streaming confusion matrix and the segmentation metrics derived from it.

use serde::Serialize;

/// A `num_classes × num_classes` confusion matrix (rows: ground truth, columns: prediction),
/// accumulated batch by batch; pixels whose label is `ignore_index` are not counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfusionMatrix {
    num_classes: usize,
    ignore_index: i64,
    counts: Vec<u64>,
}

/// Per-class and mean metrics of a [`ConfusionMatrix`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegMetrics {
    /// Intersection over union per class (`NaN` for a class absent from both truth and prediction).
    pub iou: Vec<f64>,
    /// Mean IoU over classes present in truth or prediction.
    pub miou: f64,
    /// F1 (Dice) per class.
    pub f1: Vec<f64>,
    /// Mean F1 over classes with a defined value.
    pub mean_f1: f64,
    /// Precision per class.
    pub precision: Vec<f64>,
    /// Recall per class.
    pub recall: Vec<f64>,
    /// Fraction of counted pixels predicted correctly.
    pub pixel_accuracy: f64,
    /// Number of counted (non-ignored) pixels.
    pub pixels: u64,
}

impl ConfusionMatrix {
    /// An empty matrix for `num_classes` classes.
    pub fn new(num_classes: usize, ignore_index: i64) -> Self {
        Self {
            num_classes,
            ignore_index,
            counts: vec![0; num_classes * num_classes],
        }
    }

    /// Number of classes.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// Adds one pixel per `(label, prediction)` pair. Labels equal to the ignore index are skipped;
    /// labels or predictions outside `0..num_classes` are skipped too (and counted in the return value).
    pub fn update(&mut self, labels: &[i64], predictions: &[i64]) -> usize {
        debug_assert_eq!(labels.len(), predictions.len());
        let n = self.num_classes as i64;
        let mut out_of_range = 0;
        for (&t, &p) in labels.iter().zip(predictions) {
            if t == self.ignore_index {
                continue;
            }
            if !(0..n).contains(&t) || !(0..n).contains(&p) {
                out_of_range += 1;
                continue;
            }
            self.counts[(t * n + p) as usize] += 1;
        }
        out_of_range
    }

    /// Adds another matrix of the same shape.
    pub fn merge(&mut self, other: &ConfusionMatrix) {
        assert_eq!(
            self.num_classes, other.num_classes,
            "confusion matrices of different sizes"
        );
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Count of pixels with ground truth `truth` predicted as `pred`.
    pub fn get(&self, truth: usize, pred: usize) -> u64 {
        self.counts[truth * self.num_classes + pred]
    }

    /// The matrix as rows (ground truth) of columns (prediction).
    pub fn rows(&self) -> Vec<Vec<u64>> {
        self.counts
            .chunks(self.num_classes.max(1))
            .map(|r| r.to_vec())
            .collect()
    }

    /// Metrics derived from the counts so far.
    pub fn metrics(&self) -> SegMetrics {
        let n = self.num_classes;
        let mut iou = Vec::with_capacity(n);
        let mut f1 = Vec::with_capacity(n);
        let mut precision = Vec::with_capacity(n);
        let mut recall = Vec::with_capacity(n);
        let mut correct = 0u64;
        let total: u64 = self.counts.iter().sum();
        for c in 0..n {
            let tp = self.get(c, c) as f64;
            let truth: f64 = (0..n).map(|p| self.get(c, p) as f64).sum();
            let pred: f64 = (0..n).map(|t| self.get(t, c) as f64).sum();
            correct += self.get(c, c);
            let (fp, fn_) = (pred - tp, truth - tp);
            iou.push(ratio(tp, tp + fp + fn_));
            f1.push(ratio(2.0 * tp, 2.0 * tp + fp + fn_));
            precision.push(ratio(tp, pred));
            recall.push(ratio(tp, truth));
        }
        SegMetrics {
            miou: nan_mean(&iou),
            mean_f1: nan_mean(&f1),
            iou,
            f1,
            precision,
            recall,
            pixel_accuracy: ratio(correct as f64, total as f64),
            pixels: total,
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// Mean of the non-NaN values (NaN when there are none), like mmseg's `nanmean`.
fn nan_mean(v: &[f64]) -> f64 {
    let kept: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if kept.is_empty() {
        f64::NAN
    } else {
        kept.iter().sum::<f64>() / kept.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// IoU of class `c` computed directly from the pixel lists, set-wise.
    fn direct_iou(labels: &[i64], preds: &[i64], c: i64, ignore: i64) -> f64 {
        let (mut inter, mut union) = (0u64, 0u64);
        for (&t, &p) in labels.iter().zip(preds) {
            if t == ignore {
                continue;
            }
            inter += (t == c && p == c) as u64;
            union += (t == c || p == c) as u64;
        }
        if union == 0 {
            f64::NAN
        } else {
            inter as f64 / union as f64
        }
    }

    #[test]
    fn streaming_equals_direct_computation() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let labels: Vec<i64> = (0..5000)
            .map(|_| {
                if rng.random_bool(0.1) {
                    255
                } else {
                    rng.random_range(0..3)
                }
            })
            .collect();
        let preds: Vec<i64> = labels
            .iter()
            .map(|&t| {
                if t != 255 && rng.random_bool(0.7) {
                    t
                } else {
                    rng.random_range(0..3)
                }
            })
            .collect();
        let mut cm = ConfusionMatrix::new(3, 255);
        for (l, p) in labels.chunks(777).zip(preds.chunks(777)) {
            cm.update(l, p);
        }
        let m = cm.metrics();
        let kept: Vec<usize> = (0..labels.len()).filter(|&i| labels[i] != 255).collect();
        let acc =
            kept.iter().filter(|&&i| labels[i] == preds[i]).count() as f64 / kept.len() as f64;
        assert_eq!(m.pixels, kept.len() as u64);
        assert!((m.pixel_accuracy - acc).abs() < 1e-12);
        let mut sum = 0.0;
        for c in 0..3 {
            let want = direct_iou(&labels, &preds, c as i64, 255);
            assert!(
                (m.iou[c] - want).abs() < 1e-12,
                "class {c}: {} vs {want}",
                m.iou[c]
            );
            // Dice = 2|A∩B| / (|A|+|B|), precision = |A∩B|/|B|, recall = |A∩B|/|A|
            let a = kept.iter().filter(|&&i| labels[i] == c as i64).count() as f64;
            let b = kept.iter().filter(|&&i| preds[i] == c as i64).count() as f64;
            let ab = kept
                .iter()
                .filter(|&&i| labels[i] == c as i64 && preds[i] == c as i64)
                .count() as f64;
            assert!((m.f1[c] - 2.0 * ab / (a + b)).abs() < 1e-12);
            assert!((m.precision[c] - ab / b).abs() < 1e-12);
            assert!((m.recall[c] - ab / a).abs() < 1e-12);
            sum += want;
        }
        assert!((m.miou - sum / 3.0).abs() < 1e-12);
    }

    #[test]
    fn absent_class_is_nan_and_excluded_from_mean() {
        let mut cm = ConfusionMatrix::new(3, 255);
        cm.update(&[0, 0, 1, 1, 255], &[0, 1, 1, 1, 2]);
        let m = cm.metrics();
        assert!(m.iou[2].is_nan());
        assert!((m.iou[0] - 0.5).abs() < 1e-12);
        assert!((m.iou[1] - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.miou - (0.5 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
        assert_eq!(m.pixels, 4);
    }
}
