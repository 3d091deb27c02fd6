//! Multi-head scaled dot-product attention on `[B, N, C]` tensors, heads read in place with
//! strided gemm (no head split/merge copies). The backward pass recomputes the scores block by
//! block from Q and K, so the `heads·N·M` probabilities are never kept between the passes.

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::gemm::{Precision, Rhs, View};
use crate::math::{exp, lanes_dot, lanes_max, lanes_sum, multiversion};
use crate::{FusedOp, dims, flex, sum_in_order, values};

/// `softmax(Q·Kᵀ/√d)·V` per head on `[batch, N, C]` queries and `[batch, M, C]` keys and
/// values, heads interleaved in the channels (`C = heads · d`); the output is `[batch, N, C]`.
/// The scores are recomputed in the backward pass, never stored.
#[derive(Debug, Clone)]
pub struct AttentionOp {
    /// Number of heads.
    pub heads: usize,
    /// Arithmetic of the products (forward and backward); the softmax is f32.
    pub precision: Precision,
}

/// Shapes of one attention call.
#[derive(Clone, Copy)]
struct Geometry {
    batch: usize,
    n: usize,
    m: usize,
    c: usize,
    d: usize,
    heads: usize,
    /// Query rows per block (a block's scores fit in L2).
    block: usize,
    scale: f32,
}

impl Geometry {
    fn new(q: &FlexTensor, k: &FlexTensor, heads: usize) -> Self {
        let [batch, n, c] = <[usize; 3]>::try_from(dims(q)).expect("rank 3");
        let m = dims(k)[1];
        let d = c / heads;
        Self {
            batch,
            n,
            m,
            c,
            d,
            heads,
            block: ((1 << 14) / m.max(1)).clamp(4, 256),
            scale: 1.0 / (d as f32).sqrt(),
        }
    }
}

multiversion! {
/// Row-wise softmax of a row-major `[rows, m]` block, in place.
fn softmax_rows(s: &mut [f32], m: usize) {
    for row in s.chunks_exact_mut(m) {
        let max = lanes_max(row);
        for v in row.iter_mut() {
            *v = exp(*v - max);
        }
        let inv = 1.0 / lanes_sum(row);
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}
}

multiversion! {
/// `dP ← P ∘ (dP − rowsum(P ∘ dP))` per row: the softmax backward.
fn softmax_backward_rows(p: &[f32], dp: &mut [f32], m: usize) {
    for (pr, dpr) in p.chunks_exact(m).zip(dp.chunks_exact_mut(m)) {
        let dot = lanes_dot(pr, dpr);
        for (x, p) in dpr.iter_mut().zip(pr) {
            *x = p * (*x - dot);
        }
    }
}
}

impl FusedOp<3> for AttentionOp {
    type Saved = (FlexTensor, FlexTensor, FlexTensor);

    fn forward(
        &self,
        [q, k, v]: [&FlexTensor; 3],
        keep: bool,
    ) -> (FlexTensor, Option<Self::Saved>) {
        let g = Geometry::new(q, k, self.heads);
        let (qv, kv, vv) = (values(q), values(k), values(v));
        let mut out = super::zeros(g.batch * g.n * g.c);
        for b in 0..g.batch {
            let (qo, ko) = (b * g.n * g.c, b * g.m * g.c);
            // Kᵀ and V of each head, packed once for every block of queries.
            let kv_heads: Vec<(Rhs, Rhs)> = (0..g.heads)
                .map(|h| {
                    let kh = View::rows(&kv, ko + h * g.d, g.m, g.d, g.c);
                    let vh = View::rows(&vv, ko + h * g.d, g.m, g.d, g.c);
                    let p = self.precision;
                    (Rhs::new(p, kh.t()), Rhs::new(p, vh))
                })
                .collect();
            out[qo..qo + g.n * g.c]
                .par_chunks_mut(g.block * g.c)
                .enumerate()
                .for_each(|(t, oc)| {
                    let rows = oc.len() / g.c;
                    let r0 = t * g.block;
                    let mut s = vec![0.0f32; rows * g.m];
                    for (h, (kt, vh)) in kv_heads.iter().enumerate() {
                        let qh = View::rows(&qv, qo + r0 * g.c + h * g.d, rows, g.d, g.c);
                        kt.matmul(&mut s, 0, g.m, qh, g.scale, false);
                        softmax_rows(&mut s, g.m);
                        let p = View::rows(&s, 0, rows, g.m, g.m);
                        vh.matmul(oc, h * g.d, g.c, p, 1.0, false);
                    }
                });
        }
        let saved = keep.then(|| (q.clone(), k.clone(), v.clone()));
        (flex(out, &[g.batch, g.n, g.c]), saved)
    }

    fn backward(
        &self,
        (q, k, v): Self::Saved,
        grad: FlexTensor,
        _: [bool; 3],
    ) -> [Option<FlexTensor>; 3] {
        let g = Geometry::new(&q, &k, self.heads);
        let (qv, kv, vv, dov) = (values(&q), values(&k), values(&v), values(&grad));
        let mut dq = super::zeros(g.batch * g.n * g.c);
        let mut dk = Vec::with_capacity(g.batch * g.m * g.c);
        let mut dv = Vec::with_capacity(g.batch * g.m * g.c);
        // A fixed number of row groups per image, each accumulating its own dK/dV, summed in
        // group order: bounded memory and a result independent of the thread schedule.
        const GROUPS: usize = 16;
        let group_rows = g.n.div_ceil(GROUPS).div_ceil(g.block).max(1) * g.block;
        let kvlen = g.m * g.c;
        let precision = self.precision;
        for b in 0..g.batch {
            let (qo, ko) = (b * g.n * g.c, b * g.m * g.c);
            // Kᵀ, Vᵀ and K of each head, packed once for every block of queries.
            let kv_heads: Vec<[Rhs; 3]> = (0..g.heads)
                .map(|h| {
                    let kh = View::rows(&kv, ko + h * g.d, g.m, g.d, g.c);
                    let vh = View::rows(&vv, ko + h * g.d, g.m, g.d, g.c);
                    [kh.t(), vh.t(), kh].map(|b| Rhs::new(precision, b))
                })
                .collect();
            let partials: Vec<Vec<f32>> = dq[qo..qo + g.n * g.c]
                .par_chunks_mut(group_rows * g.c)
                .enumerate()
                .map(|(grp, dqg)| {
                    // [dK | dV] for this group.
                    let mut acc = vec![0.0f32; 2 * kvlen];
                    let (dk_acc, dv_acc) = acc.split_at_mut(kvlen);
                    let mut s = vec![0.0f32; g.block * g.m];
                    let mut dp = vec![0.0f32; g.block * g.m];
                    for (blk, dqc) in dqg.chunks_mut(g.block * g.c).enumerate() {
                        let rows = dqc.len() / g.c;
                        let r0 = grp * group_rows + blk * g.block;
                        let (s, dp) = (&mut s[..rows * g.m], &mut dp[..rows * g.m]);
                        for (h, [kt, vt, kh]) in kv_heads.iter().enumerate() {
                            let col = h * g.d;
                            let qh = View::rows(&qv, qo + r0 * g.c + col, rows, g.d, g.c);
                            let doh = View::rows(&dov, qo + r0 * g.c + col, rows, g.d, g.c);
                            kt.matmul(s, 0, g.m, qh, g.scale, false);
                            softmax_rows(s, g.m);
                            // dV += Pᵀ·dO
                            let p = View::rows(s, 0, rows, g.m, g.m);
                            precision.matmul(dv_acc, col, g.c, p.t(), doh, 1.0, true, false);
                            // dP = dO·Vᵀ, dS = P ∘ (dP − rowsum(P ∘ dP))
                            vt.matmul(dp, 0, g.m, doh, 1.0, false);
                            softmax_backward_rows(s, dp, g.m);
                            let ds = View::rows(dp, 0, rows, g.m, g.m);
                            // dQ = scale·dS·K, dK += scale·dSᵀ·Q
                            kh.matmul(dqc, col, g.c, ds, g.scale, false);
                            precision.matmul(dk_acc, col, g.c, ds.t(), qh, g.scale, true, false);
                        }
                    }
                    acc
                })
                .collect();
            let sums = sum_in_order(partials, 2 * kvlen);
            dk.extend_from_slice(&sums[..kvlen]);
            dv.extend_from_slice(&sums[kvlen..]);
        }
        [
            Some(flex(dq, &[g.batch, g.n, g.c])),
            Some(flex(dk, &[g.batch, g.m, g.c])),
            Some(flex(dv, &[g.batch, g.m, g.c])),
        ]
    }
}
