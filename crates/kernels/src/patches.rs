//! Non-overlapping `s × s` patches of a channels-last sequence gathered into rows: the input
//! of a kernel = stride conv written as a matrix product. Each patch row is `s` contiguous
//! runs of `s·C` floats, so the gather is a sequence of slice copies (burn-flex would copy the
//! equivalent 6-d permutation element by element), and its backward the matching scatter.

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::{FusedOp, dims, flex, values};

/// The non-overlapping `s × s` patches of each `h × w` map of a channels-last `[batch, h·w,
/// C]` sequence, row-major, each patch as `(ky, kx, c)`; the output is `[batch, (h/s)·(w/s),
/// s·s·C]` (rows and columns past the last whole patch are left out).
#[derive(Debug, Clone)]
pub struct Patches {
    /// Map height.
    pub h: usize,
    /// Map width.
    pub w: usize,
    /// Patch size and stride.
    pub s: usize,
}

impl Patches {
    /// Calls `f(patch_row_offset, input_offset)` for every run of `s·C` floats of one image's
    /// patch matrix (`ho·wo` rows of `s·s·C`), in order.
    fn runs(&self, c: usize, mut f: impl FnMut(usize, usize)) {
        let (s, w) = (self.s, self.w);
        let (ho, wo) = (self.h / s, w / s);
        let run = s * c;
        for i in 0..ho {
            for j in 0..wo {
                let row = (i * wo + j) * s * run;
                for ky in 0..s {
                    f(row + ky * run, ((i * s + ky) * w + j * s) * c);
                }
            }
        }
    }
}

impl FusedOp<1> for Patches {
    type Saved = usize;

    fn forward(&self, [x]: [&FlexTensor; 1], keep: bool) -> (FlexTensor, Option<usize>) {
        let [batch, n, c] = <[usize; 3]>::try_from(dims(x)).expect("rank 3");
        let (s, rows) = (self.s, (self.h / self.s) * (self.w / self.s));
        let xv = values(x);
        let per = rows * s * s * c;
        let mut out = super::zeros(batch * per);
        out.par_chunks_mut(per.max(1))
            .zip(xv.par_chunks((n * c).max(1)))
            .for_each(|(o, xb)| {
                self.runs(c, |dst, src| {
                    o[dst..dst + s * c].copy_from_slice(&xb[src..src + s * c]);
                });
            });
        (flex(out, &[batch, rows, s * s * c]), keep.then_some(n))
    }

    fn backward(&self, n: usize, grad: FlexTensor, _: [bool; 1]) -> [Option<FlexTensor>; 1] {
        let [batch, rows, k] = <[usize; 3]>::try_from(dims(&grad)).expect("rank 3");
        let c = k / (self.s * self.s);
        let s = self.s;
        let gv = values(&grad);
        let mut dx = super::zeros(batch * n * c);
        dx.par_chunks_mut((n * c).max(1))
            .zip(gv.par_chunks((rows * k).max(1)))
            .for_each(|(d, g)| {
                // Patches do not overlap: every input run receives one gradient run.
                self.runs(c, |src, dst| {
                    d[dst..dst + s * c].copy_from_slice(&g[src..src + s * c]);
                });
            });
        [Some(flex(dx, &[batch, n, c]))]
    }
}
