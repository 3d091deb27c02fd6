//! Pillow's `Image.resize` for `BILINEAR` and `NEAREST`, the resampling HF's SegFormer image
//! processor (PIL backend) uses. Pillow's bilinear is antialiased: a triangle filter whose
//! support widens with the downscale factor, so shrinking averages every covered pixel.

use crate::geometric::Dims;
use crate::resize::{Taps, resample};

/// Pillow's `precompute_coeffs` (`libImaging/Resample.c`) for the triangle filter, in f64,
/// normalised to sum 1: the taps of output `i` are `first[i] .. first[i] + len[i]`.
fn bilinear_coeffs(in_size: usize, out_size: usize) -> (usize, Vec<usize>, Vec<usize>, Vec<f64>) {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filterscale; // the triangle filter's support is 1
    let ksize = support.ceil() as usize * 2 + 1;
    let (mut first, mut len, mut k) = (
        Vec::with_capacity(out_size),
        Vec::with_capacity(out_size),
        vec![0f64; out_size * ksize],
    );
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's `(int)` truncates toward zero, then Pillow clamps.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let w = &mut k[xx * ksize..xx * ksize + xmax];
        for (x, wt) in w.iter_mut().enumerate() {
            *wt = (1.0 - (((x + xmin) as f64 - center + 0.5) * ss).abs()).max(0.0);
        }
        let ww: f64 = w.iter().sum();
        if ww != 0.0 {
            w.iter_mut().for_each(|v| *v /= ww);
        }
        first.push(xmin);
        len.push(xmax);
    }
    (ksize, first, len, k)
}

/// Taps for the floating-point path (u16 and f32 images): Pillow's 32-bit float resampling.
fn float_taps(in_size: usize, out_size: usize) -> Taps {
    let (ksize, first, len, k) = bilinear_coeffs(in_size, out_size);
    let mut t = Taps {
        ksize,
        index: Vec::with_capacity(ksize * out_size),
        weight: Vec::with_capacity(ksize * out_size),
    };
    for i in 0..out_size {
        for j in 0..ksize {
            // Unused taps get weight 0 and a valid index.
            t.index
                .push((first[i] + j.min(len[i].saturating_sub(1))).min(in_size - 1));
            t.weight.push(if j < len[i] {
                k[i * ksize + j] as f32
            } else {
                0.0
            });
        }
    }
    t
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Fixed-point 8-bit coefficients (`normalize_coeffs_8bpc`): round half away from zero.
fn fixed(k: &[f64]) -> Vec<i32> {
    let one = (1i64 << PRECISION_BITS) as f64;
    k.iter()
        .map(|&v| {
            if v < 0.0 {
                (-0.5 + v * one) as i32
            } else {
                (0.5 + v * one) as i32
            }
        })
        .collect()
}

/// Pillow's `clip8`: drop the fraction bits, saturate to 0..=255.
#[inline(always)]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Pillow's 8-bit horizontal pass with precomputed fixed-point taps.
struct Horizontal {
    in_w: usize,
    ks: usize,
    first: Vec<usize>,
    len: Vec<usize>,
    k: Vec<i32>,
}

impl Horizontal {
    /// Band count known at compile time: one `[i32; N]` accumulator per output pixel.
    fn run<const N: usize>(&self, src: &[u8]) -> Vec<u8> {
        let px = src.as_chunks::<N>().0;
        let ow = self.first.len();
        let mut out = Vec::with_capacity(px.len() / self.in_w * ow * N);
        for row in px.chunks_exact(self.in_w) {
            for x in 0..ow {
                let (f, n) = (self.first[x], self.len[x]);
                let mut ss = [1i32 << (PRECISION_BITS - 1); N];
                for (p, &w) in row[f..f + n]
                    .iter()
                    .zip(&self.k[x * self.ks..x * self.ks + n])
                {
                    for b in 0..N {
                        ss[b] += p[b] as i32 * w;
                    }
                }
                out.extend(ss.map(clip8));
            }
        }
        out
    }

    fn run_dyn(&self, src: &[u8], c: usize) -> Vec<u8> {
        let ow = self.first.len();
        let mut out = Vec::with_capacity(src.len() / self.in_w * ow);
        for srow in src.chunks_exact(self.in_w * c) {
            for x in 0..ow {
                let (f, taps) = (
                    self.first[x],
                    &self.k[x * self.ks..x * self.ks + self.len[x]],
                );
                for b in 0..c {
                    let mut ss: i32 = 1 << (PRECISION_BITS - 1);
                    for (j, &w) in taps.iter().enumerate() {
                        ss += srow[(f + j) * c + b] as i32 * w;
                    }
                    out.push(clip8(ss));
                }
            }
        }
        out
    }
}

/// `Image.resize((ow, oh), BILINEAR)` on u8 `[H, W, C]`: horizontal pass then vertical, each
/// rounding to u8, exactly as Pillow's 8-bit path does. Output `[oh, ow, C]`.
pub(crate) fn bilinear_u8(src: &[u8], d: Dims, oh: usize, ow: usize) -> Vec<u8> {
    let c = d.c;
    // Horizontal pass (skipped when the width is unchanged, as Pillow does).
    let (tmp, tw) = if ow != d.w {
        let (ks, first, len, k) = bilinear_coeffs(d.w, ow);
        let h = Horizontal {
            in_w: d.w,
            ks,
            first,
            len,
            k: fixed(&k),
        };
        let tmp = match c {
            1 => h.run::<1>(src),
            3 => h.run::<3>(src),
            4 => h.run::<4>(src),
            _ => h.run_dyn(src, c),
        };
        (tmp, ow)
    } else {
        (src.to_vec(), d.w)
    };
    if oh == d.h {
        return tmp;
    }
    let (ks, first, len, k) = bilinear_coeffs(d.h, oh);
    let k = fixed(&k);
    let row = tw * c;
    let mut out = Vec::with_capacity(oh * row);
    let mut acc = vec![0i32; row];
    for y in 0..oh {
        acc.fill(1 << (PRECISION_BITS - 1));
        for (j, &w) in k[y * ks..y * ks + len[y]].iter().enumerate() {
            let r = (first[y] + j) * row;
            for (a, &s) in acc.iter_mut().zip(&tmp[r..r + row]) {
                *a += s as i32 * w;
            }
        }
        out.extend(acc.iter().map(|&v| clip8(v)));
    }
    out
}

/// Pillow's bilinear on float samples `[H, W, C]` (no intermediate rounding). Output `[oh, ow, C]`.
pub(crate) fn bilinear_f32(src: &[f32], d: Dims, oh: usize, ow: usize) -> Vec<f32> {
    resample(src, d, &float_taps(d.w, ow), &float_taps(d.h, oh))
}

/// Pillow's `NEAREST` resize (`ImagingScaleAffine`): source index `floor(x0 + (i + 0.5) * s)`
/// with the position accumulated in f64 step by step, as Pillow does. Output `[oh, ow, C]`.
pub(crate) fn nearest<T: Copy>(src: &[T], d: Dims, oh: usize, ow: usize) -> Vec<T> {
    let positions = |n_out: usize, n_in: usize| -> Vec<usize> {
        let a = n_in as f64 / n_out as f64;
        let mut pos = a * 0.5;
        (0..n_out)
            .map(|_| {
                let i = (pos as usize).min(n_in - 1);
                pos += a;
                i
            })
            .collect()
    };
    let (ys, xs) = (positions(oh, d.h), positions(ow, d.w));
    let mut out = Vec::with_capacity(oh * ow * d.c);
    for &sy in &ys {
        let srow = &src[sy * d.w * d.c..(sy + 1) * d.w * d.c];
        for &sx in &xs {
            out.extend_from_slice(&srow[sx * d.c..(sx + 1) * d.c]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscale_by_two_averages_with_triangle_weights() {
        // 4 -> 2: support 2, output 0 centred at 1.0 sees x = 0, 1, 2 with weights
        // tri((x - 1 + 0.5) / 2) = 0.75, 0.75, 0.25 (normalised by 1.75).
        let (ks, first, len, k) = bilinear_coeffs(4, 2);
        assert_eq!((first[0], len[0]), (0, 3));
        let w = &k[..3];
        assert!(
            (w[0] - 0.75 / 1.75).abs() < 1e-12 && (w[2] - 0.25 / 1.75).abs() < 1e-12,
            "{w:?} ks {ks}"
        );
    }

    #[test]
    fn same_size_coefficients_are_the_identity() {
        let (_, first, len, k) = bilinear_coeffs(5, 5);
        let ks = k.len() / 5;
        for i in 0..5 {
            let taps = &k[i * ks..i * ks + len[i]];
            // The tap at the pixel itself has weight 1, every other tap 0.
            for (j, w) in taps.iter().enumerate() {
                assert_eq!(*w, if first[i] + j == i { 1.0 } else { 0.0 }, "output {i}");
            }
        }
    }

    #[test]
    fn nearest_matches_pillow_centres() {
        // 5 -> 2: positions 1.25 and 3.75.
        let src: Vec<u8> = (0..5).collect();
        assert_eq!(nearest(&src, Dims { h: 1, w: 5, c: 1 }, 1, 2), vec![1, 3]);
    }
}
