//! The decode head's tail in one op: bilinear upsampling (`align_corners = false`) of the four
//! per-stage maps to the first stage's size, their sum plus a per-channel shift, BatchNorm
//! (batch statistics when training, running statistics otherwise) and ReLU. burn-flex runs the
//! BatchNorm's per-channel broadcasts through its generic strided path and keeps every
//! intermediate for autodiff; here only the pre-norm sum is kept.

use std::sync::{Arc, Mutex};

use burn::backend::flex::FlexTensor;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rayon::prelude::*;

use super::{FusedOp, apply, dims, flex, route, values};
use crate::bilinear::taps;
use crate::compute::{primitive, tensor};

/// The decode head's BatchNorm as the fused tail reads it.
pub(crate) struct Norm<B: Backend> {
    /// Scale, `[D]`.
    pub gamma: Tensor<B, 1>,
    /// Shift, `[D]`.
    pub beta: Tensor<B, 1>,
    /// `(running mean, running var)`, each `[D]`, to normalise with; `None` normalises with
    /// the batch statistics (training).
    pub running: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    /// Added to the variance.
    pub eps: f64,
}

/// A batch's per-channel `(mean, unbiased variance)`, each `[D]`, for the running statistics.
pub(crate) type BatchStats<B> = (Tensor<B, 1>, Tensor<B, 1>);

/// `relu(bn(Σ_i up(maps[i]) + shift))` and, when `norm` has no running statistics, the
/// batch's statistics; `None` for another number of maps than four or without a fused route
/// for the tensors.
///
/// # Shapes
/// - maps: `[batch, D, h_i, w_i]`, the first at the output size `[H, W]`
/// - shift: `[D]`
/// - output: `[batch, D, H, W]`
pub(crate) fn upsample_sum_bn_relu<B: Backend>(
    maps: &[Tensor<B, 4>],
    shift: &Tensor<B, 1>,
    norm: Norm<B>,
) -> Option<(Tensor<B, 4>, Option<BatchStats<B>>)> {
    let [m0, m1, m2, m3] = maps else {
        return None;
    };
    let Norm {
        gamma,
        beta,
        running,
        eps,
    } = norm;
    let dtypes = [
        m0.dtype(),
        m1.dtype(),
        m2.dtype(),
        m3.dtype(),
        shift.dtype(),
        gamma.dtype(),
    ];
    let route = route::<B>(&dtypes)?;
    let stats = match running {
        None => Stats::Batch(Arc::default()),
        Some((mean, var)) => {
            let host = |t: Tensor<B, 1>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();
            Stats::Running {
                mean: host(mean).into(),
                var: host(var).into(),
            }
        }
    };
    let op = DecodeTail {
        stats: stats.clone(),
        eps: eps as f32,
    };
    let inputs = [
        primitive(m0.clone()),
        primitive(m1.clone()),
        primitive(m2.clone()),
        primitive(m3.clone()),
        primitive(shift.clone()),
        primitive(gamma),
        primitive(beta),
    ];
    let out = tensor(apply::<B, _, 7>(route, &op, inputs));
    let Stats::Batch(batch) = &stats else {
        return Some((out, None));
    };
    let (mean, var, n) = batch
        .lock()
        .unwrap()
        .take()
        .expect("forward stored its statistics");
    let device = m0.device();
    let d = mean.len();
    let to = |v: Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(v, [d]), &device);
    let unbiased: Vec<f32> = var
        .iter()
        .map(|v| {
            if n > 1 {
                v * n as f32 / (n - 1) as f32
            } else {
                *v
            }
        })
        .collect();
    Some((out, Some((to(mean), to(unbiased)))))
}

/// Which statistics normalise.
#[derive(Debug, Clone)]
enum Stats {
    /// Batch statistics, handed back to the caller as `(mean, biased var, count)`.
    Batch(Arc<Mutex<Option<(Vec<f32>, Vec<f32>, usize)>>>),
    /// Running statistics (inference).
    Running { mean: Arc<[f32]>, var: Arc<[f32]> },
}

#[derive(Debug, Clone)]
struct DecodeTail {
    stats: Stats,
    eps: f32,
}

/// `out += up(plane)` for one `[h, w]` plane upsampled to `[H, W]` (`out` is `[H, W]`).
fn add_upsampled(
    out: &mut [f32],
    plane: &[f32],
    [h, w]: [usize; 2],
    ty: &[(usize, usize, f32)],
    tx: &[(usize, usize, f32)],
) {
    let width = tx.len();
    for (oy, &(y0, y1, wy)) in ty.iter().enumerate() {
        let (r0, r1) = (&plane[y0 * w..][..w], &plane[y1 * w..][..w]);
        let row = &mut out[oy * width..][..width];
        for (o, &(x0, x1, wx)) in row.iter_mut().zip(tx) {
            let top = r0[x0] * (1.0 - wx) + r0[x1] * wx;
            let bottom = r1[x0] * (1.0 - wx) + r1[x1] * wx;
            *o += top * (1.0 - wy) + bottom * wy;
        }
    }
    debug_assert_eq!(plane.len(), h * w);
}

/// The adjoint of [`add_upsampled`]: `plane += upᵀ(grad)`.
fn add_downsampled(
    plane: &mut [f32],
    grad: &[f32],
    w: usize,
    ty: &[(usize, usize, f32)],
    tx: &[(usize, usize, f32)],
) {
    let width = tx.len();
    for (oy, &(y0, y1, wy)) in ty.iter().enumerate() {
        let row = &grad[oy * width..][..width];
        for (&g, &(x0, x1, wx)) in row.iter().zip(tx) {
            let (top, bottom) = (g * (1.0 - wy), g * wy);
            plane[y0 * w + x0] += top * (1.0 - wx);
            plane[y0 * w + x1] += top * wx;
            plane[y1 * w + x0] += bottom * (1.0 - wx);
            plane[y1 * w + x1] += bottom * wx;
        }
    }
}

/// Saved for backward: the pre-norm sum, gamma, beta, per-channel mean and 1/σ, input sizes.
type Saved = (
    FlexTensor,
    FlexTensor,
    FlexTensor,
    Arc<[(f32, f32)]>,
    [[usize; 2]; 4],
);

impl FusedOp<7> for DecodeTail {
    type Saved = Saved;

    fn forward(&self, inputs: [&FlexTensor; 7], keep: bool) -> (FlexTensor, Option<Saved>) {
        let [batch, d, height, width] = <[usize; 4]>::try_from(dims(inputs[0])).expect("rank 4");
        let hw = height * width;
        let sizes: [[usize; 2]; 4] = std::array::from_fn(|i| {
            let s = dims(inputs[i]);
            [s[2], s[3]]
        });
        let maps: Vec<_> = inputs[..4].iter().map(|t| values(t)).collect();
        let (shift, gamma, beta) = (values(inputs[4]), values(inputs[5]), values(inputs[6]));
        let ty: Vec<_> = sizes.iter().map(|s| taps(s[0], height)).collect();
        let tx: Vec<_> = sizes.iter().map(|s| taps(s[1], width)).collect();
        // z = Σ up(maps) + shift, plane by plane.
        let mut z = vec![0.0f32; batch * d * hw];
        z.par_chunks_mut(hw).enumerate().for_each(|(p, out)| {
            out.fill(shift[p % d]);
            for (i, m) in maps.iter().enumerate() {
                let [h, w] = sizes[i];
                let plane = &m[p * h * w..][..h * w];
                if [h, w] == [height, width] {
                    super::add_into(out, plane);
                } else {
                    add_upsampled(out, plane, [h, w], &ty[i], &tx[i]);
                }
            }
        });
        let n = batch * hw;
        let stats: Vec<(f32, f32)> = match &self.stats {
            Stats::Batch(_) => (0..d)
                .into_par_iter()
                .map(|c| {
                    let planes = || (0..batch).map(|b| &z[(b * d + c) * hw..][..hw]);
                    let mean = planes().map(|p| p.iter().sum::<f32>()).sum::<f32>() / n as f32;
                    let var = planes()
                        .map(|p| p.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>())
                        .sum::<f32>()
                        / n as f32;
                    (mean, var)
                })
                .collect(),
            Stats::Running { mean, var } => mean.iter().copied().zip(var.iter().copied()).collect(),
        };
        if let Stats::Batch(out) = &self.stats {
            *out.lock().unwrap() = Some((
                stats.iter().map(|s| s.0).collect(),
                stats.iter().map(|s| s.1).collect(),
                n,
            ));
        }
        let stats: Arc<[(f32, f32)]> = stats
            .iter()
            .map(|&(mean, var)| (mean, 1.0 / (var + self.eps).sqrt()))
            .collect();
        let mut y = vec![0.0f32; z.len()];
        y.par_chunks_mut(hw)
            .zip(z.par_chunks(hw))
            .enumerate()
            .for_each(|(p, (yp, zp))| {
                let c = p % d;
                let (mean, rstd) = stats[c];
                let (a, b) = (rstd * gamma[c], beta[c]);
                for (y, z) in yp.iter_mut().zip(zp) {
                    *y = ((z - mean) * a + b).max(0.0);
                }
            });
        let saved = keep.then(|| {
            (
                flex(z, &[batch, d, height, width]),
                inputs[5].clone(),
                inputs[6].clone(),
                stats,
                sizes,
            )
        });
        (flex(y, &[batch, d, height, width]), saved)
    }

    fn backward(
        &self,
        (z, gamma, beta, stats, sizes): Saved,
        grad: FlexTensor,
        needed: [bool; 7],
    ) -> [Option<FlexTensor>; 7] {
        let [batch, d, height, width] = <[usize; 4]>::try_from(dims(&z)).expect("rank 4");
        let hw = height * width;
        let n = (batch * hw) as f32;
        let (zv, dy, gv, bv) = (values(&z), values(&grad), values(&gamma), values(&beta));
        let training = matches!(self.stats, Stats::Batch(_));
        // Per channel: Σ dy' and Σ dy'·x̂ with dy' = dy · relu'(.), then dz.
        let per_channel: Vec<(f32, f32, Vec<f32>)> = (0..d)
            .into_par_iter()
            .map(|c| {
                let (mean, rstd) = stats[c];
                let (g, b) = (gv[c], bv[c]);
                let (mut sum, mut sum_x) = (0.0f32, 0.0f32);
                for bi in 0..batch {
                    let o = (bi * d + c) * hw;
                    for (zv, dy) in zv[o..o + hw].iter().zip(&dy[o..o + hw]) {
                        let xhat = (zv - mean) * rstd;
                        if xhat * g + b > 0.0 {
                            sum += dy;
                            sum_x += dy * xhat;
                        }
                    }
                }
                let mut dz = vec![0.0f32; batch * hw];
                for bi in 0..batch {
                    let o = (bi * d + c) * hw;
                    let out = &mut dz[bi * hw..][..hw];
                    for ((dz, zv), dy) in out.iter_mut().zip(&zv[o..o + hw]).zip(&dy[o..o + hw]) {
                        let xhat = (zv - mean) * rstd;
                        let dyp = if xhat * g + b > 0.0 { *dy } else { 0.0 };
                        *dz = if training {
                            g * rstd * (dyp - sum / n - xhat * sum_x / n)
                        } else {
                            g * rstd * dyp
                        };
                    }
                }
                (sum, sum_x, dz)
            })
            .collect();
        let mut dz = vec![0.0f32; zv.len()];
        dz.par_chunks_mut(hw).enumerate().for_each(|(p, out)| {
            let (b, c) = (p / d, p % d);
            out.copy_from_slice(&per_channel[c].2[b * hw..][..hw]);
        });
        let dshift: Vec<f32> = per_channel
            .iter()
            .map(|(_, _, dz)| dz.iter().sum())
            .collect();
        let dgamma: Vec<f32> = per_channel.iter().map(|(_, s, _)| *s).collect();
        let dbeta: Vec<f32> = per_channel.iter().map(|(s, _, _)| *s).collect();
        drop(per_channel);
        let dmaps: [Option<FlexTensor>; 4] = std::array::from_fn(|i| {
            let [h, w] = sizes[i];
            needed[i].then(|| {
                if [h, w] == [height, width] {
                    return flex(dz.clone(), &[batch, d, h, w]);
                }
                let (ty, tx) = (taps(h, height), taps(w, width));
                let mut dm = vec![0.0f32; batch * d * h * w];
                dm.par_chunks_mut(h * w).enumerate().for_each(|(p, plane)| {
                    add_downsampled(plane, &dz[p * hw..][..hw], w, &ty, &tx);
                });
                flex(dm, &[batch, d, h, w])
            })
        });
        let [m0, m1, m2, m3] = dmaps;
        [
            m0,
            m1,
            m2,
            m3,
            needed[4].then(|| flex(dshift, &[d])),
            needed[5].then(|| flex(dgamma, &[d])),
            needed[6].then(|| flex(dbeta, &[d])),
        ]
    }
}
