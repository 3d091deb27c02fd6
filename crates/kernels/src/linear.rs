//! `y = x·W + b` over the last dimension, with one gemm per pass and no broadcast copies.

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::gemm::{Precision, View};
use crate::{FusedOp, add_into, dims, flex, rows_per_task, sum_in_order, values};

/// `x·W + b` on the last dimension, inputs `[x [..., d_in], W [d_in, d_out], b [d_out]]`
/// (burn's weight layout); the output is `[..., d_out]`.
#[derive(Debug, Clone)]
pub struct LinearOp {
    /// Arithmetic of the three products (forward, input and weight gradients).
    pub precision: Precision,
}

impl FusedOp<3> for LinearOp {
    /// The input and the weight.
    type Saved = (FlexTensor, FlexTensor);

    fn forward(
        &self,
        [x, w, b]: [&FlexTensor; 3],
        keep: bool,
    ) -> (FlexTensor, Option<Self::Saved>) {
        let mut shape = dims(x);
        let [d_in, d_out] = [dims(w)[0], dims(w)[1]];
        let rows = x.layout().num_elements() / d_in;
        let (xv, wv, bv) = (values(x), values(w), values(b));
        let mut out = Vec::with_capacity(rows * d_out);
        for _ in 0..rows {
            out.extend_from_slice(&bv);
        }
        self.precision.matmul(
            &mut out,
            0,
            d_out,
            View::rows(&xv, 0, rows, d_in, d_in),
            View::rows(&wv, 0, d_in, d_out, d_out),
            1.0,
            true,
            true,
        );
        *shape.last_mut().unwrap() = d_out;
        let saved = keep.then(|| (x.clone(), w.clone()));
        (flex(out, &shape), saved)
    }

    fn backward(
        &self,
        (x, w): Self::Saved,
        grad: FlexTensor,
        [need_x, need_w, need_b]: [bool; 3],
    ) -> [Option<FlexTensor>; 3] {
        let [d_in, d_out] = [dims(&w)[0], dims(&w)[1]];
        let rows = x.layout().num_elements() / d_in;
        let g = values(&grad);
        let dx = need_x.then(|| {
            let wv = values(&w);
            let mut dx = vec![0.0; rows * d_in];
            let dy = View::rows(&g, 0, rows, d_out, d_out);
            self.precision.matmul(
                &mut dx,
                0,
                d_in,
                dy,
                View::rows(&wv, 0, d_in, d_out, d_out).t(),
                1.0,
                false,
                true,
            );
            flex(dx, &dims(&x))
        });
        let dw = need_w.then(|| {
            let xv = values(&x);
            let mut dw = vec![0.0; d_in * d_out];
            let xt = View::rows(&xv, 0, rows, d_in, d_in).t();
            self.precision.matmul(
                &mut dw,
                0,
                d_out,
                xt,
                View::rows(&g, 0, rows, d_out, d_out),
                1.0,
                false,
                true,
            );
            flex(dw, &[d_in, d_out])
        });
        let db = need_b.then(|| flex(column_sums(&g, d_out), &[d_out]));
        [dx, dw, db]
    }
}

/// Sum over rows of a row-major `[rows, cols]` matrix, in a fixed order (bit-reproducible
/// whatever the thread scheduling).
pub(crate) fn column_sums(m: &[f32], cols: usize) -> Vec<f32> {
    let chunk = rows_per_task(cols, 1 << 16) * cols;
    let partials: Vec<Vec<f32>> = m
        .par_chunks(chunk)
        .map(|block| {
            let mut acc = vec![0.0f32; cols];
            for row in block.chunks_exact(cols) {
                add_into(&mut acc, row);
            }
            acc
        })
        .collect();
    sum_in_order(partials, cols)
}
