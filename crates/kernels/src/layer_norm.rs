//! LayerNorm over the last dimension: one pass per row forward, one backward, keeping only the
//! input and the per-row mean and 1/σ (burn's composition keeps five full-size tensors).

use std::sync::Arc;

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::{FusedOp, dims, flex, rows_per_task, sum_in_order, values};

/// LayerNorm over the last dimension, inputs `[x [..., C], gamma [C], beta [C]]`; the output
/// is `[..., C]`.
#[derive(Debug, Clone)]
pub struct LayerNormOp {
    /// Added to the variance.
    pub eps: f32,
}

/// Input, gamma, and per row `(mean, 1/σ)`.
type Saved = (FlexTensor, FlexTensor, Arc<[(f32, f32)]>);

impl FusedOp<3> for LayerNormOp {
    type Saved = Saved;

    fn forward(&self, [x, g, b]: [&FlexTensor; 3], keep: bool) -> (FlexTensor, Option<Saved>) {
        let shape = dims(x);
        let c = *shape.last().unwrap();
        let (xv, gv, bv) = (values(x), values(g), values(b));
        let mut out = super::zeros(xv.len());
        let chunk = rows_per_task(c, 1 << 14) * c;
        let stats: Vec<Vec<(f32, f32)>> = out
            .par_chunks_mut(chunk)
            .zip(xv.par_chunks(chunk))
            .map(|(oc, xc)| {
                let mut stats = Vec::with_capacity(xc.len() / c);
                for (o, row) in oc.chunks_exact_mut(c).zip(xc.chunks_exact(c)) {
                    let mean = row.iter().sum::<f32>() / c as f32;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / c as f32;
                    let rstd = 1.0 / (var + self.eps).sqrt();
                    for (((o, v), g), b) in o.iter_mut().zip(row).zip(gv.iter()).zip(bv.iter()) {
                        *o = (v - mean) * rstd * g + b;
                    }
                    stats.push((mean, rstd));
                }
                stats
            })
            .collect();
        let saved = keep.then(|| (x.clone(), g.clone(), stats.concat().into()));
        (flex(out, &shape), saved)
    }

    fn backward(
        &self,
        (x, g, stats): Saved,
        grad: FlexTensor,
        [need_x, need_g, need_b]: [bool; 3],
    ) -> [Option<FlexTensor>; 3] {
        let shape = dims(&x);
        let c = *shape.last().unwrap();
        let (xv, gv, dy) = (values(&x), values(&g), values(&grad));
        let mut dx = super::zeros(xv.len());
        let rows_per = rows_per_task(c, 1 << 14);
        let chunk = rows_per * c;
        // Per task: the partial sums of dy·x̂ (for gamma) and dy (for beta).
        let partials: Vec<Vec<f32>> = dx
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(t, dxc)| {
                let mut sums = vec![0.0f32; 2 * c];
                let start = t * chunk;
                let end = (start + chunk).min(xv.len());
                let mut ghat = vec![0.0f32; c];
                for (r, row) in xv[start..end].chunks_exact(c).enumerate() {
                    let (mean, rstd) = stats[t * rows_per + r];
                    let dyr = &dy[start + r * c..][..c];
                    let (mut m1, mut m2) = (0.0f32, 0.0f32);
                    for i in 0..c {
                        let xhat = (row[i] - mean) * rstd;
                        sums[i] += dyr[i] * xhat;
                        sums[c + i] += dyr[i];
                        ghat[i] = dyr[i] * gv[i];
                        m1 += ghat[i];
                        m2 += ghat[i] * xhat;
                    }
                    let (m1, m2) = (m1 / c as f32, m2 / c as f32);
                    for i in 0..c {
                        let xhat = (row[i] - mean) * rstd;
                        dxc[r * c + i] = rstd * (ghat[i] - m1 - xhat * m2);
                    }
                }
                sums
            })
            .collect();
        let sums = sum_in_order(partials, 2 * c);
        [
            need_x.then(|| flex(dx, &shape)),
            need_g.then(|| flex(sums[..c].to_vec(), &[c])),
            need_b.then(|| flex(sums[c..].to_vec(), &[c])),
        ]
    }
}
