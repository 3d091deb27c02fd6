//! The Mix-FFN's 3×3 depthwise conv (stride 1, zero padding 1, bias) and its activation, fused
//! and run channels-last on the `[B, h·w, C]` token layout, so neither the `[B, N, C] ↔
//! [B, C, h, w]` round trip nor the pre-activation map is materialised: the backward pass
//! recomputes the pre-activation from the kept input.

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::math::{erf, exp, multiversion};
use crate::{FusedOp, dims, flex, rows_per_task, sum_in_order, values};

/// The activation inside the Mix-FFN, parsed from `hidden_act`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// Exact erf GELU (HF "gelu").
    Gelu,
    /// tanh-approximated GELU (HF "gelu_new" / "gelu_pytorch_tanh").
    GeluTanh,
    /// ReLU.
    Relu,
    /// SiLU / swish.
    Silu,
}

/// The Mix-FFN's 3×3 depthwise conv (padding 1) and its activation on a channels-last
/// `[batch, h·w, C]` sequence, with inputs `[x, weight [C, 1, 3, 3], bias [C]]`; the output
/// is `[batch, h·w, C]`.
#[derive(Debug, Clone)]
pub struct DwConvOp {
    /// Map height.
    pub h: usize,
    /// Map width.
    pub w: usize,
    /// The activation after the conv.
    pub act: Activation,
}

const SQRT_1_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// 1/√(2π)
const INV_SQRT_2PI: f32 = 0.398_942_3;
/// √(2/π)
const SQRT_2_PI: f32 = 0.797_884_6;

/// The activation and its derivative at `z`.
#[inline(always)]
fn act_and_grad(act: Activation, z: f32) -> (f32, f32) {
    match act {
        Activation::Gelu => {
            let cdf = 0.5 * (1.0 + erf(z * SQRT_1_2));
            (z * cdf, cdf + z * INV_SQRT_2PI * exp(-0.5 * z * z))
        }
        Activation::GeluTanh => {
            let inner = SQRT_2_PI * (z + 0.044715 * z * z * z);
            let t = inner.tanh();
            let dinner = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * z * z);
            (
                0.5 * z * (1.0 + t),
                0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * dinner,
            )
        }
        Activation::Relu => (z.max(0.0), if z > 0.0 { 1.0 } else { 0.0 }),
        Activation::Silu => {
            let s = 1.0 / (1.0 + exp(-z));
            (z * s, s * (1.0 + z * (1.0 - s)))
        }
    }
}

/// The conv weight `[C, 1, 3, 3]` as `[9, C]` (tap-major, channels contiguous).
fn taps(weight: &[f32], c: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; 9 * c];
    for ch in 0..c {
        for k in 0..9 {
            t[k * c + ch] = weight[ch * 9 + k];
        }
    }
    t
}

/// Runs `$body` with `$a` bound to a constant copy of `$act`: one loop per activation, so the
/// activation is known inside each loop and it vectorises (a `match` per element, with
/// `tanh`'s libm call in one arm, keeps the whole loop scalar).
macro_rules! per_activation {
    ($act:expr, $a:ident => $body:block) => {
        match $act {
            Activation::Gelu => {
                const $a: Activation = Activation::Gelu;
                $body
            }
            Activation::GeluTanh => {
                const $a: Activation = Activation::GeluTanh;
                $body
            }
            Activation::Relu => {
                const $a: Activation = Activation::Relu;
                $body
            }
            Activation::Silu => {
                const $a: Activation = Activation::Silu;
                $body
            }
        }
    };
}

multiversion! {
    /// `row = act(row)`.
    fn activate_row(act: Activation, row: &mut [f32]) {
        per_activation!(act, A => {
            for v in row.iter_mut() {
                *v = act_and_grad(A, *v).0;
            }
        })
    }
}

multiversion! {
    /// `row = dy · act'(row)`.
    fn act_grad_row(act: Activation, row: &mut [f32], dy: &[f32]) {
        per_activation!(act, A => {
            for (v, g) in row.iter_mut().zip(dy) {
                *v = g * act_and_grad(A, *v).1;
            }
        })
    }
}

multiversion! {
/// One output row of the depthwise conv (pre-activation): `row` is `[w, C]` at image row `y`.
fn conv_row(x: &[f32], taps: &[f32], bias: &[f32], y: usize, h: usize, w: usize, row: &mut [f32]) {
    let c = bias.len();
    for px in row.chunks_exact_mut(c) {
        px.copy_from_slice(bias);
    }
    for ky in 0..3 {
        let Some(yy) = (y + ky).checked_sub(1).filter(|&yy| yy < h) else {
            continue;
        };
        let src = &x[yy * w * c..][..w * c];
        for kx in 0..3 {
            let tap = &taps[(ky * 3 + kx) * c..][..c];
            for xo in 0..w {
                let Some(xi) = (xo + kx).checked_sub(1).filter(|&xi| xi < w) else {
                    continue;
                };
                let (o, s) = (&mut row[xo * c..][..c], &src[xi * c..][..c]);
                for ((o, s), t) in o.iter_mut().zip(s).zip(tap) {
                    *o += s * t;
                }
            }
        }
    }
}
}

impl FusedOp<3> for DwConvOp {
    /// Input, weight and bias.
    type Saved = (FlexTensor, FlexTensor, FlexTensor);

    fn forward(
        &self,
        [x, wt, b]: [&FlexTensor; 3],
        keep: bool,
    ) -> (FlexTensor, Option<Self::Saved>) {
        let shape = dims(x);
        let c = shape[2];
        let (h, w) = (self.h, self.w);
        let (xv, bv) = (values(x), values(b));
        let taps = taps(&values(wt), c);
        let mut out = super::zeros(xv.len());
        out.par_chunks_mut(w * c).enumerate().for_each(|(r, row)| {
            let (img, y) = (r / h, r % h);
            conv_row(
                &xv[img * h * w * c..][..h * w * c],
                &taps,
                &bv,
                y,
                h,
                w,
                row,
            );
            activate_row(self.act, row);
        });
        let saved = keep.then(|| (x.clone(), wt.clone(), b.clone()));
        (flex(out, &shape), saved)
    }

    fn backward(
        &self,
        (x, wt, b): Self::Saved,
        grad: FlexTensor,
        [need_x, need_w, need_b]: [bool; 3],
    ) -> [Option<FlexTensor>; 3] {
        let shape = dims(&x);
        let c = shape[2];
        let (h, w) = (self.h, self.w);
        let plane = h * w * c;
        let (xv, bv, dy) = (values(&x), values(&b), values(&grad));
        let taps = taps(&values(&wt), c);
        // dz = dy · act'(z), with z = conv(x) + bias recomputed row by row.
        let mut dz = super::zeros(xv.len());
        dz.par_chunks_mut(w * c).enumerate().for_each(|(r, row)| {
            let (img, y) = (r / h, r % h);
            conv_row(&xv[img * plane..][..plane], &taps, &bv, y, h, w, row);
            act_grad_row(self.act, row, &dy[r * w * c..][..w * c]);
        });
        // dx[y, x] = Σ_taps w[ky, kx] · dz[y + 1 − ky, x + 1 − kx]: the same conv with the
        // kernel flipped, gathered per input row.
        let dx = need_x.then(|| {
            let mut flipped = vec![0.0f32; 9 * c];
            for k in 0..9 {
                flipped[(8 - k) * c..][..c].copy_from_slice(&taps[k * c..][..c]);
            }
            let zeros = vec![0.0f32; c];
            let mut dx = super::zeros(xv.len());
            dx.par_chunks_mut(w * c).enumerate().for_each(|(r, row)| {
                let (img, y) = (r / h, r % h);
                conv_row(&dz[img * plane..][..plane], &flipped, &zeros, y, h, w, row);
            });
            flex(dx, &shape)
        });
        // dW[ky, kx] = Σ dz[y, x] · x[y + ky − 1, x + kx − 1], dB = Σ dz; per block of rows,
        // summed in block order.
        let (dw, db) = if need_w || need_b {
            let rows_per = rows_per_task(w * c, 1 << 15);
            let partials: Vec<Vec<f32>> = dz
                .par_chunks(rows_per * w * c)
                .enumerate()
                .map(|(t, block)| {
                    let mut acc = vec![0.0f32; 10 * c];
                    for (i, dzr) in block.chunks_exact(w * c).enumerate() {
                        let r = t * rows_per + i;
                        let (img, y) = (r / h, r % h);
                        for px in dzr.chunks_exact(c) {
                            for (a, g) in acc[9 * c..].iter_mut().zip(px) {
                                *a += g;
                            }
                        }
                        for ky in 0..3 {
                            let Some(yy) = (y + ky).checked_sub(1).filter(|&yy| yy < h) else {
                                continue;
                            };
                            let src = &xv[img * plane + yy * w * c..][..w * c];
                            for kx in 0..3 {
                                let a = &mut acc[(ky * 3 + kx) * c..][..c];
                                for xo in 0..w {
                                    let Some(xi) = (xo + kx).checked_sub(1).filter(|&xi| xi < w)
                                    else {
                                        continue;
                                    };
                                    let (g, s) = (&dzr[xo * c..][..c], &src[xi * c..][..c]);
                                    for ((a, g), s) in a.iter_mut().zip(g).zip(s) {
                                        *a += g * s;
                                    }
                                }
                            }
                        }
                    }
                    acc
                })
                .collect();
            let sums = sum_in_order(partials, 10 * c);
            let mut dw = vec![0.0f32; 9 * c];
            for ch in 0..c {
                for k in 0..9 {
                    dw[ch * 9 + k] = sums[k * c + ch];
                }
            }
            (
                need_w.then(|| flex(dw, &[c, 1, 3, 3])),
                need_b.then(|| flex(sums[9 * c..].to_vec(), &[c])),
            )
        } else {
            (None, None)
        };
        [dx, dw, db]
    }
}
