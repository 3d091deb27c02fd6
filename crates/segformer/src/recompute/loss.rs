//! HF's segmentation loss (bilinear upsampling with `align_corners = false`, then
//! cross-entropy over the valid pixels) that keeps only the quarter-resolution logits: both
//! passes upsample the logits to the label size a band of rows at a time, as two gathers and
//! a blend per axis (the taps of `crate::bilinear::taps`), and the backward pass scatters each
//! band's gradient back through the same taps.

use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use super::{RecomputeOp, apply, chunks};
use crate::bilinear::taps;
use crate::compute::{primitive, tensor};

/// Mean cross-entropy over the valid label pixels (`0 <= label < classes`, `!= ignore`) of the
/// logits upsampled to the labels' size, in bands of rows holding about `chunk` upsampled
/// logits each ([`super::CHUNK_ELEMENTS`]), on the backends the module docs list. All pixels
/// ignored gives 0.
///
/// # Shapes
/// - logits: `[batch, classes, h, w]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn upsample_cross_entropy<B: Backend>(
    logits: &Tensor<B, 4>,
    labels: &Tensor<B, 3, Int>,
    ignore: i64,
    chunk: usize,
) -> Tensor<B, 1> {
    // Labels travel as an untracked float input (exact below 2^24), so the op needs no
    // integer state of its own backend type.
    let labels = labels.clone().float();
    let op = CrossEntropy { ignore, chunk };
    tensor(apply::<B, _, 2>(
        &op,
        [primitive(logits.clone()), primitive(labels)],
    ))
}

/// Upsampled logits in the first band of [`upsample_cross_entropy`] with the default chunk
/// ([`super::CHUNK_ELEMENTS`]) for `[batch, labels, height, width]` logits: the most that one
/// band materialises at a time.
pub fn loss_band_elements(batch: usize, labels: usize, height: usize, width: usize) -> usize {
    band_rows(super::CHUNK_ELEMENTS, batch * labels * width).min(height) * batch * labels * width
}

/// Whole label rows of `row` logits per band of about `chunk` logits: at least one.
fn band_rows(chunk: usize, row: usize) -> usize {
    (chunk / row.max(1)).max(1)
}

#[derive(Debug, Clone)]
struct CrossEntropy {
    ignore: i64,
    /// Upsampled logits per band.
    chunk: usize,
}

/// One axis's taps as device tensors: low and high source indices and the high weight.
struct Axis<I: Backend> {
    low: Tensor<I, 1, Int>,
    high: Tensor<I, 1, Int>,
    weight: Tensor<I, 1>,
}

impl<I: Backend> Axis<I> {
    fn new(input: usize, output: usize, device: &I::Device) -> Self {
        let t = taps(input, output);
        let ints = |f: fn(&(usize, usize, f32)) -> usize| {
            let v: Vec<i64> = t.iter().map(|x| f(x) as i64).collect();
            Tensor::from_data(TensorData::new(v, [output]), device)
        };
        let w: Vec<f32> = t.iter().map(|x| x.2).collect();
        Axis {
            low: ints(|x| x.0),
            high: ints(|x| x.1),
            weight: Tensor::<I, 1>::from_data(TensorData::new(w, [output]), device),
        }
    }

    /// The output positions `range` of this axis.
    fn part(&self, range: std::ops::Range<usize>) -> Axis<I> {
        Axis {
            low: self.low.clone().slice(range.clone()),
            high: self.high.clone().slice(range.clone()),
            weight: self.weight.clone().slice(range),
        }
    }

    /// The weight as a `[.., n, ..]` tensor broadcasting along `dim` of a rank-4 tensor.
    fn weight4(&self, dim: usize) -> Tensor<I, 4> {
        let n = self.weight.dims()[0];
        let mut shape = [1; 4];
        shape[dim] = n;
        self.weight.clone().reshape(shape)
    }

    /// Bilinear interpolation of `x` along `dim` at this axis's output positions.
    fn interpolate(&self, x: Tensor<I, 4>, dim: usize) -> Tensor<I, 4> {
        let w = self.weight4(dim);
        let low = x.clone().select(dim, self.low.clone());
        let high = x.select(dim, self.high.clone());
        low.clone() + (high - low) * w
    }

    /// `acc += interpolateᵀ(g)`: scatters `g` (this axis's output positions along `dim`)
    /// back to the source positions of `acc`.
    fn scatter(&self, acc: Tensor<I, 4>, g: Tensor<I, 4>, dim: usize) -> Tensor<I, 4> {
        let high = g.clone() * self.weight4(dim);
        let low = g - high.clone();
        acc.select_assign(dim, self.low.clone(), low, IndexingUpdateOp::Add)
            .select_assign(dim, self.high.clone(), high, IndexingUpdateOp::Add)
    }
}

/// What both passes derive from the inputs.
struct Prepared<I: Backend> {
    /// The logits upsampled along the width: `[B, L, h, W]`.
    wide: Tensor<I, 4>,
    cols: Axis<I>,
    rows: Axis<I>,
    /// Labels with invalid pixels set to class 0: `[B, H, W]`.
    safe: Tensor<I, 3, Int>,
    /// 1 where a pixel counts, else 0: `[B, H, W]`.
    valid: Tensor<I, 3>,
    /// `max(1, Σ valid)`: `[1]`.
    count: Tensor<I, 1>,
    /// Label rows per band.
    band: usize,
}

impl CrossEntropy {
    fn prepare<I: Backend>(&self, logits: &Tensor<I, 4>, labels: Tensor<I, 3>) -> Prepared<I> {
        let [batch, classes, h, w] = logits.dims();
        let [_, height, width] = labels.dims();
        let device = logits.device();
        let valid = labels
            .clone()
            .not_equal_elem(self.ignore as f64)
            .bool_and(labels.clone().greater_equal_elem(0.0))
            .bool_and(labels.clone().lower_elem(classes as f64));
        let safe = labels.int().mask_fill(valid.clone().bool_not(), 0);
        let valid = valid.float();
        let count = valid.clone().sum().clamp_min(1.0);
        let cols = Axis::new(w, width, &device);
        Prepared {
            wide: cols.interpolate(logits.clone(), 3),
            cols,
            rows: Axis::new(h, height, &device),
            safe,
            valid,
            count,
            band: band_rows(self.chunk, batch * classes * width),
        }
    }
}

impl<I: Backend> Prepared<I> {
    /// Per band of label rows: the band's upsampled logits `[B, L, R, W]`, its labels
    /// `[B, 1, R, W]` and its valid mask `[B, 1, R, W]`.
    fn bands(
        &self,
    ) -> impl Iterator<Item = (Axis<I>, Tensor<I, 4>, Tensor<I, 4, Int>, Tensor<I, 4>)> + '_ {
        let [batch, height, width] = self.safe.dims();
        chunks(height, self.band).map(move |r| {
            let rows = self.rows.part(r.clone());
            let z = rows.interpolate(self.wide.clone(), 2);
            let label = self.safe.clone().slice([0..batch, r.clone(), 0..width]);
            let valid = self.valid.clone().slice([0..batch, r, 0..width]);
            (rows, z, label.unsqueeze_dim(1), valid.unsqueeze_dim(1))
        })
    }
}

impl RecomputeOp<2> for CrossEntropy {
    fn forward<I: Backend>(&self, [logits, labels]: [FloatTensor<I>; 2]) -> FloatTensor<I> {
        let p = self.prepare(&tensor::<I, 4>(logits), tensor(labels));
        let total = p
            .bands()
            .map(|(_, z, label, valid)| (log_softmax(z, 1).gather(1, label) * valid).sum())
            .reduce(|a, b| a + b)
            .expect("labels have at least one row");
        primitive(total.neg() / p.count)
    }

    fn backward<I: Backend>(
        &self,
        [logits, labels]: [FloatTensor<I>; 2],
        grad: FloatTensor<I>,
        needed: [bool; 2],
    ) -> [Option<FloatTensor<I>>; 2] {
        if !needed[0] {
            return [None, None];
        }
        let logits = tensor::<I, 4>(logits);
        let p = self.prepare(&logits, tensor(labels));
        // d loss / d z = (softmax(z) − onehot(label)) · valid · grad / count
        let scale = (tensor::<I, 1>(grad) / p.count.clone()).reshape([1, 1, 1, 1]);
        let device = logits.device();
        let mut d_wide = Tensor::<I, 4>::zeros(p.wide.dims(), &device);
        for (rows, z, label, valid) in p.bands() {
            let weight = valid * scale.clone(); // [B, 1, R, W]
            let onehot = Tensor::zeros(z.dims(), &device).scatter(
                1,
                label,
                weight.clone(),
                IndexingUpdateOp::Add,
            );
            let g = softmax(z, 1) * weight - onehot;
            d_wide = rows.scatter(d_wide, g, 2);
        }
        let d_logits = p
            .cols
            .scatter(Tensor::zeros(logits.dims(), &device), d_wide, 3);
        [Some(primitive(d_logits)), None]
    }
}
