//! `[B, X, Y] → [B, Y, X]` as a cache-blocked copy (burn-flex copies strided views element by
//! element through a generic index iterator).

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::{FusedOp, dims, flex, values};

/// `[B, X, Y] → [B, Y, X]` into a contiguous tensor.
#[derive(Debug, Clone)]
pub struct Transpose;

impl FusedOp<1> for Transpose {
    type Saved = ();

    fn forward(&self, [x]: [&FlexTensor; 1], keep: bool) -> (FlexTensor, Option<()>) {
        let [b, rows, cols] = <[usize; 3]>::try_from(dims(x)).expect("rank 3");
        (
            flex(
                transpose_batched(&values(x), b, rows, cols),
                &[b, cols, rows],
            ),
            keep.then_some(()),
        )
    }

    fn backward(&self, _: (), grad: FlexTensor, _: [bool; 1]) -> [Option<FlexTensor>; 1] {
        let [b, cols, rows] = <[usize; 3]>::try_from(dims(&grad)).expect("rank 3");
        [Some(flex(
            transpose_batched(&values(&grad), b, cols, rows),
            &[b, rows, cols],
        ))]
    }
}

/// Each `[rows, cols]` matrix of `x` (row-major, `batch` of them) transposed to `[cols, rows]`.
pub fn transpose_batched(x: &[f32], batch: usize, rows: usize, cols: usize) -> Vec<f32> {
    const TILE: usize = 32;
    let mut out = vec![0.0f32; x.len()];
    if x.is_empty() {
        return out;
    }
    let n = rows * cols;
    out.par_chunks_mut(n)
        .zip(x.par_chunks(n))
        .for_each(|(ob, xb)| {
            // Output rows (input columns) in tiles, each task writing its own rows.
            ob.par_chunks_mut(TILE * rows)
                .enumerate()
                .for_each(|(t, otile)| {
                    let c0 = t * TILE;
                    let tc = otile.len() / rows;
                    for r0 in (0..rows).step_by(TILE) {
                        let r1 = (r0 + TILE).min(rows);
                        for c in 0..tc {
                            let orow = &mut otile[c * rows..][..rows];
                            for r in r0..r1 {
                                orow[r] = xb[r * cols + c0 + c];
                            }
                        }
                    }
                });
        });
    debug_assert_eq!(out.len(), batch * n);
    out
}
