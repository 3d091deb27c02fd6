//! Non-overlapping `s × s` patches of a channels-last sequence gathered into rows: the input
//! of a kernel = stride conv written as a matrix product. Each patch row is `s` contiguous
//! runs of `s·C` floats, so the gather is a sequence of slice copies (burn-flex would copy the
//! equivalent 6-d permutation element by element), and its backward the matching scatter.

use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use rayon::prelude::*;

use super::{FusedOp, apply, dims, flex, route, values};
use crate::compute::{primitive, tensor};

/// The `s × s` patches of each `h × w` map, row-major, each patch as `(ky, kx, c)`; rows and
/// columns past the last whole patch are left out, as a conv without padding leaves them.
///
/// # Shapes
/// - x: `[batch, h·w, C]`
/// - output: `[batch, (h/s)·(w/s), s·s·C]`
pub(crate) fn patches<B: Backend>(
    x: &Tensor<B, 3>,
    hw: [usize; 2],
    s: usize,
) -> Option<Tensor<B, 3>> {
    let route = route::<B>(&[x.dtype()])?;
    let [h, w] = hw;
    (s > 0 && h >= s && w >= s && x.dims()[1] == h * w).then_some(())?;
    Some(tensor(apply::<B, _, 1>(
        route,
        &Patches { h, w, s },
        [primitive(x.clone())],
    )))
}

#[derive(Debug, Clone)]
pub(crate) struct Patches {
    h: usize,
    w: usize,
    s: usize,
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
