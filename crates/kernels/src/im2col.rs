//! The patches of a strided, zero-padded conv gathered into rows (im2col), so that the conv
//! is one matrix product through the fused linear; the backward pass scatters the rows'
//! gradients back onto the input (col2im). Used by the overlapping patch embeddings, whose
//! output the encoder wants channels-last anyway: the product gives `[batch, h·w, C_out]`
//! directly, without burn-flex's generic conv and the transpose after it.

use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

use crate::{FusedOp, dims, flex, values};

/// The `k × k` patches (stride `stride`, `pad` zeros on every side) of a channels-first
/// `[batch, C, H, W]` map, one row per output position, each patch as `(c, ky, kx)`: the
/// output is `[batch, h·w, C·k·k]`.
#[derive(Debug, Clone)]
pub struct Im2col {
    /// Kernel size.
    pub k: usize,
    /// Stride.
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
}

impl Im2col {
    /// Output size of an `[h, w]` input.
    fn out(&self, h: usize, w: usize) -> (usize, usize) {
        let o = |n: usize| (n + 2 * self.pad - self.k) / self.stride + 1;
        (o(h), o(w))
    }

    /// The input index of output coordinate `o` and kernel tap `t`, when inside the map.
    #[inline(always)]
    fn source(&self, o: usize, t: usize, n: usize) -> Option<usize> {
        (o * self.stride + t)
            .checked_sub(self.pad)
            .filter(|&i| i < n)
    }
}

impl FusedOp<1> for Im2col {
    /// The input's `[batch, C, H, W]`.
    type Saved = [usize; 4];

    fn forward(&self, [x]: [&FlexTensor; 1], keep: bool) -> (FlexTensor, Option<[usize; 4]>) {
        let [batch, c, h, w] = <[usize; 4]>::try_from(dims(x)).expect("rank 4");
        let (ho, wo) = self.out(h, w);
        let k = self.k;
        let row = c * k * k;
        let xv = values(x);
        let mut out = super::zeros(batch * ho * wo * row);
        // One task per output row of one image: `wo` patch rows.
        out.par_chunks_mut((wo * row).max(1))
            .enumerate()
            .for_each(|(t, rows)| {
                let (b, oy) = (t / ho, t % ho);
                let image = &xv[b * c * h * w..][..c * h * w];
                for (ox, patch) in rows.chunks_exact_mut(row).enumerate() {
                    for ci in 0..c {
                        let plane = &image[ci * h * w..][..h * w];
                        for ky in 0..k {
                            let Some(iy) = self.source(oy, ky, h) else {
                                continue;
                            };
                            let dst = &mut patch[(ci * k + ky) * k..][..k];
                            for (kx, d) in dst.iter_mut().enumerate() {
                                if let Some(ix) = self.source(ox, kx, w) {
                                    *d = plane[iy * w + ix];
                                }
                            }
                        }
                    }
                }
            });
        (
            flex(out, &[batch, ho * wo, row]),
            keep.then_some([batch, c, h, w]),
        )
    }

    fn backward(
        &self,
        [batch, c, h, w]: [usize; 4],
        grad: FlexTensor,
        _: [bool; 1],
    ) -> [Option<FlexTensor>; 1] {
        let (ho, wo) = self.out(h, w);
        let k = self.k;
        let row = c * k * k;
        let gv = values(&grad);
        let mut dx = super::zeros(batch * c * h * w);
        // One task per input plane: the patches overlap, so each plane gathers the sum of
        // every tap that read it, in a fixed order.
        dx.par_chunks_mut((h * w).max(1))
            .enumerate()
            .for_each(|(p, plane)| {
                let (b, ci) = (p / c, p % c);
                let g = &gv[b * ho * wo * row..][..ho * wo * row];
                for oy in 0..ho {
                    for ky in 0..k {
                        let Some(iy) = self.source(oy, ky, h) else {
                            continue;
                        };
                        for ox in 0..wo {
                            let taps = &g[(oy * wo + ox) * row + (ci * k + ky) * k..][..k];
                            for (kx, v) in taps.iter().enumerate() {
                                if let Some(ix) = self.source(ox, kx, w) {
                                    plane[iy * w + ix] += v;
                                }
                            }
                        }
                    }
                }
            });
        [Some(flex(dx, &[batch, c, h, w]))]
    }
}
