//! The decode head's tail in one op: bilinear upsampling (`align_corners = false`) of the four
//! per-stage maps to the first stage's size, their sum plus a per-channel shift, BatchNorm
//! (batch statistics when training, running statistics otherwise) and ReLU. burn-flex runs the
//! BatchNorm's per-channel broadcasts through its generic strided path and keeps every
//! intermediate for autodiff; here only the pre-norm sum is kept.

use std::sync::{Arc, Mutex};

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::math::{LANES, lanes_sq_dev, lanes_sum, multiversion};
use crate::taps::taps;
use crate::{FusedOp, dims, flex, values};

/// Inverted dropout fused into the tail's output: element `j` of plane `p` (a `[H, W]` plane
/// of the `[batch, D, H, W]` output) is kept when a hash of `(seed, p, j)` falls below
/// `keep`, and scaled by `1 / keep`. The backward pass regenerates the mask from the seed,
/// so nothing is stored, and the draw does not depend on how planes are split over threads.
#[derive(Debug, Clone, Copy)]
pub struct Dropout {
    /// Probability of keeping an element (`1 − p`), in `(0, 1]`.
    pub keep: f64,
    /// Seed of the mask (drawn from the backend's RNG by the caller).
    pub seed: u64,
}

/// murmur3's 32-bit finaliser: a bijective mix in which every input bit affects every
/// output bit (vectorises: shifts, xors and 32-bit multiplies only).
#[inline(always)]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// One plane's dropout mask, ready for the inner loops.
#[derive(Clone, Copy)]
struct PlaneMask {
    /// Mixes the seed's low half with the element index.
    lo: u32,
    /// Mixes the plane index with the seed's high half.
    key: u32,
    /// Kept when the top 24 hash bits are below this.
    threshold: u32,
    /// `1 / keep`.
    inv: f32,
}

impl Dropout {
    fn plane(self, p: usize) -> PlaneMask {
        PlaneMask {
            lo: self.seed as u32,
            key: fmix32(p as u32 ^ fmix32((self.seed >> 32) as u32)),
            threshold: (self.keep * (1u32 << 24) as f64).round() as u32,
            inv: (1.0 / self.keep) as f32,
        }
    }
}

impl PlaneMask {
    /// `1 / keep` where element `j` of the plane is kept, 0 where it is dropped.
    #[inline(always)]
    fn scale(self, j: usize) -> f32 {
        if fmix32(fmix32(j as u32 ^ self.lo) ^ self.key) >> 8 < self.threshold {
            self.inv
        } else {
            0.0
        }
    }
}

/// Which statistics normalise.
#[derive(Debug, Clone)]
pub enum Stats {
    /// Batch statistics, handed back to the caller as `(mean, biased var, count)`.
    Batch(Arc<Mutex<Option<(Vec<f32>, Vec<f32>, usize)>>>),
    /// Running statistics (inference).
    Running {
        /// Per channel, `[D]`.
        mean: Arc<[f32]>,
        /// Per channel, `[D]`.
        var: Arc<[f32]>,
    },
}

/// The decode head's tail: `relu(bn(Σ_i up(map_i) + shift))` with optional inverted dropout,
/// on the inputs `[map_0, map_1, map_2, map_3, shift, gamma, beta]` (maps `[batch, D, h_i,
/// w_i]`, the first at the output size; the rest `[D]`); the output is `[batch, D, H, W]`.
#[derive(Debug, Clone)]
pub struct DecodeTail {
    /// Which statistics normalise (and where the batch's are handed back).
    pub stats: Stats,
    /// Added to the variance.
    pub eps: f32,
    /// Inverted dropout on the output, when set.
    pub dropout: Option<Dropout>,
}

multiversion! {
/// `y = relu((z − mean)·a + b)`, times the dropout scale where `mask` is given.
fn normalize_relu(y: &mut [f32], z: &[f32], mean: f32, a: f32, b: f32, mask: Option<PlaneMask>) {
    match mask {
        None => {
            for (y, z) in y.iter_mut().zip(z) {
                *y = ((z - mean) * a + b).max(0.0);
            }
        }
        Some(m) => {
            for (j, (y, z)) in y.iter_mut().zip(z).enumerate() {
                *y = ((z - mean) * a + b).max(0.0) * m.scale(j);
            }
        }
    }
}
}

/// What the backward pass needs per channel: `(mean, 1/σ, γ, β)`.
#[derive(Clone, Copy)]
struct ChannelNorm {
    mean: f32,
    rstd: f32,
    gamma: f32,
    beta: f32,
}

impl ChannelNorm {
    /// `(x̂, dy')` of one element: the normalised input and the gradient past dropout
    /// (`scale`) and the ReLU.
    #[inline(always)]
    fn grad(self, z: f32, dy: f32, scale: f32) -> (f32, f32) {
        let xhat = (z - self.mean) * self.rstd;
        let dyp = if xhat * self.gamma + self.beta > 0.0 {
            dy * scale
        } else {
            0.0
        };
        (xhat, dyp)
    }
}

multiversion! {
/// `(Σ dy', Σ dy'·x̂)` over one plane, in 8 interleaved partial sums.
fn plane_grad_sums(z: &[f32], dy: &[f32], cn: ChannelNorm, mask: Option<PlaneMask>) -> (f32, f32) {
    let (mut s, mut sx) = ([0.0f32; LANES], [0.0f32; LANES]);
    let full = z.len() / LANES * LANES;
    for i in (0..full).step_by(LANES) {
        for l in 0..LANES {
            let j = i + l;
            let scale = mask.map_or(1.0, |m| m.scale(j));
            let (xhat, dyp) = cn.grad(z[j], dy[j], scale);
            s[l] += dyp;
            sx[l] += dyp * xhat;
        }
    }
    let (mut s, mut sx) = (s.iter().sum::<f32>(), sx.iter().sum::<f32>());
    for j in full..z.len() {
        let scale = mask.map_or(1.0, |m| m.scale(j));
        let (xhat, dyp) = cn.grad(z[j], dy[j], scale);
        s += dyp;
        sx += dyp * xhat;
    }
    (s, sx)
}
}

multiversion! {
/// `dz` of one plane: `γ/σ · (dy' − mean(dy') − x̂·mean(dy'·x̂))` with batch statistics
/// (`means` the two channel means), `γ/σ · dy'` with running ones (`means` = None).
fn plane_dz(dz: &mut [f32], z: &[f32], dy: &[f32], cn: ChannelNorm, mask: Option<PlaneMask>, means: Option<(f32, f32)>) {
    let coef = cn.gamma * cn.rstd;
    let (m, mx) = means.unwrap_or((0.0, 0.0));
    for (j, (out, (z, dy))) in dz.iter_mut().zip(z.iter().zip(dy)).enumerate() {
        let scale = mask.map_or(1.0, |m| m.scale(j));
        let (xhat, dyp) = cn.grad(*z, *dy, scale);
        *out = coef * (dyp - m - xhat * mx);
    }
}
}

/// `out += up(plane)` for one `[h, w]` plane upsampled to `[H, W]` (`out` is `[H, W]`).
///
/// Separable: each source row is interpolated along x once (into `rows`, `h × W`), then each
/// output row is a weighted sum of two of those rows, a contiguous pass the compiler
/// vectorises. The arithmetic per output pixel is the same as interpolating the four taps
/// directly (`top`, `bottom` and their blend), so the sums are identical bit for bit.
fn add_upsampled(
    out: &mut [f32],
    plane: &[f32],
    [h, w]: [usize; 2],
    ty: &[(usize, usize, f32)],
    tx: &[(usize, usize, f32)],
    rows: &mut Vec<f32>,
) {
    let width = tx.len();
    rows.clear();
    rows.resize(h * width, 0.0);
    for (src, up) in plane.chunks_exact(w).zip(rows.chunks_exact_mut(width)) {
        for (u, &(x0, x1, wx)) in up.iter_mut().zip(tx) {
            *u = src[x0] * (1.0 - wx) + src[x1] * wx;
        }
    }
    for (oy, &(y0, y1, wy)) in ty.iter().enumerate() {
        let (top, bottom) = (&rows[y0 * width..][..width], &rows[y1 * width..][..width]);
        let row = &mut out[oy * width..][..width];
        for ((o, &t), &b) in row.iter_mut().zip(top).zip(bottom) {
            *o += t * (1.0 - wy) + b * wy;
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
        let mut z = super::zeros(batch * d * hw);
        z.par_chunks_mut(hw)
            .enumerate()
            .for_each_init(Vec::new, |rows, (p, out)| {
                out.fill(shift[p % d]);
                for (i, m) in maps.iter().enumerate() {
                    let [h, w] = sizes[i];
                    let plane = &m[p * h * w..][..h * w];
                    if [h, w] == [height, width] {
                        super::add_into(out, plane);
                    } else {
                        add_upsampled(out, plane, [h, w], &ty[i], &tx[i], rows);
                    }
                }
            });
        let n = batch * hw;
        let stats: Vec<(f32, f32)> = match &self.stats {
            Stats::Batch(_) => (0..d)
                .into_par_iter()
                .map(|c| {
                    let planes = || (0..batch).map(|b| &z[(b * d + c) * hw..][..hw]);
                    let mean = planes().map(lanes_sum).sum::<f32>() / n as f32;
                    let var = planes().map(|p| lanes_sq_dev(p, mean)).sum::<f32>() / n as f32;
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
        let mut y = super::zeros(z.len());
        y.par_chunks_mut(hw)
            .zip(z.par_chunks(hw))
            .enumerate()
            .for_each(|(p, (yp, zp))| {
                let c = p % d;
                let (mean, rstd) = stats[c];
                let mask = self.dropout.map(|m| m.plane(p));
                normalize_relu(yp, zp, mean, rstd * gamma[c], beta[c], mask);
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
        let channel = |c: usize| {
            let (mean, rstd) = stats[c];
            ChannelNorm {
                mean,
                rstd,
                gamma: gv[c],
                beta: bv[c],
            }
        };
        let mask = |p: usize| self.dropout.map(|m| m.plane(p));
        // Per channel, Σ dy' and Σ dy'·x̂ with dy' = dy · dropout · relu'(.): β's and γ's
        // gradients, and with batch statistics part of dz.
        let sums: Vec<(f32, f32)> = (0..d)
            .into_par_iter()
            .map(|c| {
                (0..batch).fold((0.0f32, 0.0f32), |acc, bi| {
                    let p = bi * d + c;
                    let o = p * hw;
                    let (s, sx) =
                        plane_grad_sums(&zv[o..o + hw], &dy[o..o + hw], channel(c), mask(p));
                    (acc.0 + s, acc.1 + sx)
                })
            })
            .collect();
        // dz plane by plane, with each plane's Σ dz for the shift's gradient.
        let mut dz = super::zeros(zv.len());
        let plane_sums: Vec<f32> = dz
            .par_chunks_mut(hw)
            .enumerate()
            .map(|(p, out)| {
                let c = p % d;
                let o = p * hw;
                let means = training.then(|| (sums[c].0 / n, sums[c].1 / n));
                plane_dz(
                    out,
                    &zv[o..o + hw],
                    &dy[o..o + hw],
                    channel(c),
                    mask(p),
                    means,
                );
                lanes_sum(out)
            })
            .collect();
        let mut dshift = vec![0.0f32; d];
        for (p, v) in plane_sums.iter().enumerate() {
            dshift[p % d] += v;
        }
        let dgamma: Vec<f32> = sums.iter().map(|s| s.1).collect();
        let dbeta: Vec<f32> = sums.iter().map(|s| s.0).collect();
        // Every map's gradient from dz; the last full-size map that needs one takes dz itself.
        let owner = (0..4)
            .rev()
            .find(|&i| needed[i] && sizes[i] == [height, width]);
        let mut dmaps: [Option<FlexTensor>; 4] = std::array::from_fn(|i| {
            let [h, w] = sizes[i];
            (needed[i] && Some(i) != owner).then(|| {
                if [h, w] == [height, width] {
                    return flex(dz.clone(), &[batch, d, h, w]);
                }
                let (ty, tx) = (taps(h, height), taps(w, width));
                let mut dm = super::zeros(batch * d * h * w);
                dm.par_chunks_mut(h * w).enumerate().for_each(|(p, plane)| {
                    add_downsampled(plane, &dz[p * hw..][..hw], w, &ty, &tx);
                });
                flex(dm, &[batch, d, h, w])
            })
        });
        if let Some(i) = owner {
            dmaps[i] = Some(flex(dz, &[batch, d, height, width]));
        }
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
