//! HF's segmentation loss without the full-resolution logits: each label pixel's logits are
//! interpolated (bilinear, `align_corners = false`) from the quarter-resolution map on the fly,
//! in bands of rows, forward and backward. burn's composition keeps `classes × H × W` floats
//! several times over (upsampled logits, log-softmax, their gradients): 150 MiB per 512² image
//! and copy for ADE20K's 150 classes.

use std::sync::Arc;

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::math::exp;
use crate::taps::{Taps, taps};
use crate::{FusedOp, dims, flex, values};

/// Output rows per parallel task.
const BAND: usize = 16;

/// Mean cross-entropy over the valid pixels of `[batch, H, W]` labels of `[batch, classes,
/// h, w]` logits upsampled (bilinear, `align_corners = false`) to `[H, W]`; the output is `[1]`.
#[derive(Debug, Clone)]
pub struct CrossEntropy {
    /// Class per label pixel, `-1` where the pixel does not count.
    labels: Arc<[i32]>,
    size: [usize; 2],
}

impl CrossEntropy {
    /// The loss against `labels` (`[H, W]` per image, row-major, `size = [H, W]`): pixels
    /// labelled `ignore` or outside `0..classes` do not count.
    pub fn new(labels: &[i64], size: [usize; 2], classes: usize, ignore: i64) -> Self {
        let classes = classes as i64;
        let labels = labels
            .iter()
            .map(|&l| {
                if l == ignore || !(0..classes).contains(&l) {
                    -1
                } else {
                    l as i32
                }
            })
            .collect();
        Self { labels, size }
    }
}

/// The geometry of one call.
struct Grid {
    batch: usize,
    classes: usize,
    h: usize,
    w: usize,
    height: usize,
    width: usize,
    ty: Taps,
    tx: Taps,
}

impl CrossEntropy {
    fn grid(&self, logits: &FlexTensor) -> Grid {
        let [batch, classes, h, w] = <[usize; 4]>::try_from(dims(logits)).expect("rank 4");
        let [height, width] = self.size;
        Grid {
            batch,
            classes,
            h,
            w,
            height,
            width,
            ty: taps(h, height),
            tx: taps(w, width),
        }
    }

    /// Calls `f(image, row, column, label, logits)` for every counted pixel of a band of rows,
    /// with the pixel's interpolated logits in `z`.
    fn each_pixel(
        &self,
        g: &Grid,
        zv: &[f32],
        b: usize,
        rows: std::ops::Range<usize>,
        mut f: impl FnMut(usize, usize, usize, &[f32]),
    ) {
        let plane = g.h * g.w;
        let mut z = vec![0.0f32; g.classes];
        for oy in rows {
            let (y0, y1, wy) = g.ty[oy];
            for (ox, &(x0, x1, wx)) in g.tx.iter().enumerate() {
                let label = self.labels[(b * g.height + oy) * g.width + ox];
                if label < 0 {
                    continue;
                }
                for (l, z) in z.iter_mut().enumerate() {
                    let p = &zv[(b * g.classes + l) * plane..][..plane];
                    let top = p[y0 * g.w + x0] * (1.0 - wx) + p[y0 * g.w + x1] * wx;
                    let bottom = p[y1 * g.w + x0] * (1.0 - wx) + p[y1 * g.w + x1] * wx;
                    *z = top * (1.0 - wy) + bottom * wy;
                }
                f(oy, ox, label as usize, &z);
            }
        }
    }

    fn count(&self) -> usize {
        self.labels.iter().filter(|l| **l >= 0).count()
    }
}

/// `(log Σ exp z, max z)`.
fn log_sum_exp(z: &[f32]) -> (f32, f32) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (
        max + z.iter().map(|v| (v - max).exp()).sum::<f32>().ln(),
        max,
    )
}

impl FusedOp<1> for CrossEntropy {
    type Saved = FlexTensor;

    fn forward(&self, [logits]: [&FlexTensor; 1], keep: bool) -> (FlexTensor, Option<FlexTensor>) {
        let g = self.grid(logits);
        let zv = values(logits);
        let bands: Vec<(usize, usize)> = (0..g.batch)
            .flat_map(|b| (0..g.height).step_by(BAND).map(move |r| (b, r)))
            .collect();
        let sums: Vec<f64> = bands
            .par_iter()
            .map(|&(b, r0)| {
                let mut total = 0.0f64;
                self.each_pixel(
                    &g,
                    &zv,
                    b,
                    r0..(r0 + BAND).min(g.height),
                    |_, _, label, z| {
                        total += f64::from(log_sum_exp(z).0 - z[label]);
                    },
                );
                total
            })
            .collect();
        let loss = sums.iter().sum::<f64>() / self.count().max(1) as f64;
        (flex(vec![loss as f32], &[1]), keep.then(|| logits.clone()))
    }

    fn backward(
        &self,
        logits: FlexTensor,
        grad: FlexTensor,
        _: [bool; 1],
    ) -> [Option<FlexTensor>; 1] {
        let g = self.grid(&logits);
        let zv = values(&logits);
        let scale = values(&grad)[0] / self.count().max(1) as f32;
        let plane = g.h * g.w;
        let mut dz = vec![0.0f32; zv.len()];
        for b in 0..g.batch {
            // Each band scatters into the quarter-resolution rows its taps reach; the partial
            // results are added in band order.
            let partials: Vec<(usize, Vec<f32>)> = (0..g.height)
                .step_by(BAND)
                .collect::<Vec<_>>()
                .into_par_iter()
                .map(|r0| {
                    let r1 = (r0 + BAND).min(g.height);
                    let lo = g.ty[r0].0;
                    let hi = g.ty[r1 - 1].1;
                    let n = hi + 1 - lo;
                    let mut part = vec![0.0f32; g.classes * n * g.w];
                    let mut p = vec![0.0f32; g.classes];
                    self.each_pixel(&g, &zv, b, r0..r1, |oy, ox, label, z| {
                        let (lse, _) = log_sum_exp(z);
                        for (p, z) in p.iter_mut().zip(z) {
                            *p = exp(z - lse) * scale;
                        }
                        p[label] -= scale;
                        let ((y0, y1, wy), (x0, x1, wx)) = (g.ty[oy], g.tx[ox]);
                        for (l, &d) in p.iter().enumerate() {
                            let q = &mut part[l * n * g.w..][..n * g.w];
                            let (top, bottom) = (d * (1.0 - wy), d * wy);
                            q[(y0 - lo) * g.w + x0] += top * (1.0 - wx);
                            q[(y0 - lo) * g.w + x1] += top * wx;
                            q[(y1 - lo) * g.w + x0] += bottom * (1.0 - wx);
                            q[(y1 - lo) * g.w + x1] += bottom * wx;
                        }
                    });
                    (lo, part)
                })
                .collect();
            for (lo, part) in partials {
                let n = part.len() / (g.classes * g.w);
                for l in 0..g.classes {
                    let dst = &mut dz[(b * g.classes + l) * plane + lo * g.w..][..n * g.w];
                    super::add_into(dst, &part[l * n * g.w..][..n * g.w]);
                }
            }
        }
        [Some(flex(dz, &dims(&logits)))]
    }
}
