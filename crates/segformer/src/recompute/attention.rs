//! Multi-head attention that keeps only `Q, K, V` for the backward pass and runs both passes
//! over blocks of query rows, so at most one block's scores exist at a time.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{FloatDType, Tensor};

use super::{RecomputeOp, apply, chunks};
use crate::compute::{primitive, tensor};

/// `softmax(Q·Kᵀ/√d)·V` per head (`C = heads · d`, head `h` owning channels `h·d..(h+1)·d`),
/// in blocks of query rows holding about `chunk` scores each ([`super::CHUNK_ELEMENTS`]), with
/// the matmuls in `compute` where set (autocast: softmax stays in the inputs' dtype), on the
/// backends the module docs list.
///
/// # Shapes
/// - query: `[batch, N, C]`, key and value: `[batch, M, C]`
/// - output: `[batch, N, C]`
pub(crate) fn attention<B: Backend>(
    query: Tensor<B, 3>,
    key: Tensor<B, 3>,
    value: Tensor<B, 3>,
    heads: usize,
    compute: Option<FloatDType>,
    chunk: usize,
) -> Tensor<B, 3> {
    let op = AttentionOp {
        heads,
        compute,
        chunk,
    };
    tensor(apply::<B, _, 3>(
        &op,
        [primitive(query), primitive(key), primitive(value)],
    ))
}

#[derive(Debug, Clone)]
struct AttentionOp {
    heads: usize,
    compute: Option<FloatDType>,
    /// Scores per block.
    chunk: usize,
}

impl AttentionOp {
    /// `a·b`, in the compute dtype where set, returned in `a`'s dtype.
    fn mm<I: Backend>(&self, a: Tensor<I, 4>, b: Tensor<I, 4>) -> Tensor<I, 4> {
        match self.compute {
            Some(dt) => {
                let out = FloatDType::from(a.dtype());
                a.cast(dt).matmul(b.cast(dt)).cast(out)
            }
            None => a.matmul(b),
        }
    }

    /// `[B, L, C] → [B, heads, L, d]`.
    fn split<I: Backend>(&self, t: Tensor<I, 3>) -> Tensor<I, 4> {
        let [batch, len, c] = t.dims();
        t.reshape([batch, len, self.heads, c / self.heads])
            .swap_dims(1, 2)
    }

    /// `[B, heads, L, d] → [B, L, C]`.
    fn merge<I: Backend>(&self, t: Tensor<I, 4>) -> Tensor<I, 3> {
        let [batch, heads, len, d] = t.dims();
        t.swap_dims(1, 2).reshape([batch, len, heads * d])
    }

    /// Query rows per block: a block's `[B, heads, rows, M]` scores hold about `chunk`.
    fn rows(&self, batch: usize, m: usize) -> usize {
        self.chunk / (batch * self.heads * m).max(1)
    }

    fn scale(&self, c: usize) -> f64 {
        1.0 / ((c / self.heads) as f64).sqrt()
    }

    /// The probabilities of a block of query rows: `[B, R, C]` → `[B, heads, R, M]`.
    fn probs<I: Backend>(&self, q: Tensor<I, 3>, k_t: Tensor<I, 4>, scale: f64) -> Tensor<I, 4> {
        softmax(self.mm(self.split(q), k_t) * scale, 3)
    }
}

impl RecomputeOp<3> for AttentionOp {
    fn forward<I: Backend>(&self, [q, k, v]: [FloatTensor<I>; 3]) -> FloatTensor<I> {
        let (q, k, v) = (tensor::<I, 3>(q), tensor::<I, 3>(k), tensor::<I, 3>(v));
        let [batch, n, c] = q.dims();
        let m = k.dims()[1];
        let scale = self.scale(c);
        // [B, heads, d, M], [B, heads, M, d]
        let k_t = self.split(k).swap_dims(2, 3);
        let v = self.split(v);
        let blocks: Vec<Tensor<I, 3>> = chunks(n, self.rows(batch, m))
            .map(|rows| {
                let q = q.clone().slice([0..batch, rows, 0..c]);
                let p = self.probs(q, k_t.clone(), scale);
                self.merge(self.mm(p, v.clone()))
            })
            .collect();
        primitive(Tensor::cat(blocks, 1))
    }

    fn backward<I: Backend>(
        &self,
        [q, k, v]: [FloatTensor<I>; 3],
        grad: FloatTensor<I>,
        needed: [bool; 3],
    ) -> [Option<FloatTensor<I>>; 3] {
        let (q, k, v) = (tensor::<I, 3>(q), tensor::<I, 3>(k), tensor::<I, 3>(v));
        let grad = tensor::<I, 3>(grad);
        let [batch, n, c] = q.dims();
        let m = k.dims()[1];
        let scale = self.scale(c);
        let k = self.split(k); // [B, heads, M, d]
        let k_t = k.clone().swap_dims(2, 3);
        let v_t = self.split(v).swap_dims(2, 3); // [B, heads, d, M]
        let mut dq = Vec::new();
        let mut dk = Tensor::<I, 4>::zeros(k.dims(), &k.device());
        let mut dv = Tensor::<I, 4>::zeros(k.dims(), &k.device());
        for rows in chunks(n, self.rows(batch, m)) {
            let q = q.clone().slice([0..batch, rows.clone(), 0..c]);
            let p = self.probs(q.clone(), k_t.clone(), scale); // [B, heads, R, M]
            let g = self.split(grad.clone().slice([0..batch, rows, 0..c])); // [B, heads, R, d]
            if needed[2] {
                dv = dv + self.mm(p.clone().swap_dims(2, 3), g.clone());
            }
            if !(needed[0] || needed[1]) {
                continue;
            }
            // Softmax backward: dS = P ⊙ (dP − Σ_j P·dP), with the 1/√d of the scores.
            let dp = self.mm(g, v_t.clone());
            let row_dot = (p.clone() * dp.clone()).sum_dim(3);
            let ds = p * (dp - row_dot) * scale;
            if needed[0] {
                dq.push(self.merge(self.mm(ds.clone(), k.clone())));
            }
            if needed[1] {
                dk = dk + self.mm(ds.swap_dims(2, 3), self.split(q));
            }
        }
        [
            needed[0].then(|| primitive(Tensor::cat(dq, 1))),
            needed[1].then(|| primitive(self.merge(dk))),
            needed[2].then(|| primitive(self.merge(dv))),
        ]
    }
}
