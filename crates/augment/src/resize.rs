//! Resampling kernels matching OpenCV's `cv2.resize` (what albumentations calls):
//! `INTER_NEAREST`, `INTER_LINEAR` (with OpenCV's 11-bit fixed point on u8) and `INTER_AREA`.

use raster::RasterData;

use crate::geometric::Dims;
use crate::pixel::{Pixel, map_samples};

/// Per-output-position source taps along one axis: `ksize` (index, weight) pairs each.
#[derive(Clone, Debug)]
pub(crate) struct Taps {
    pub ksize: usize,
    pub index: Vec<usize>,
    pub weight: Vec<f32>,
}

/// How `Resize` and the geometric transforms interpolate images (masks are always nearest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interp {
    Nearest,
    Linear,
    Area,
}

/// OpenCV's `INTER_LINEAR` source position for each output position: `(sx, fx)` with the
/// second tap at `sx + 1` (clamped), after OpenCV's edge rules (`fx = 0` at both edges).
fn linear_positions(src: usize, dst: usize) -> Vec<(usize, usize, f32)> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            // OpenCV computes the position in double and stores it as float.
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let s = f.floor();
            let (mut s, mut f) = (s as isize, f - s);
            if s < 0 {
                (s, f) = (0, 0.0);
            }
            if s >= src as isize - 1 {
                (s, f) = (src as isize - 1, 0.0);
            }
            let s = s as usize;
            (s, (s + 1).min(src - 1), f)
        })
        .collect()
}

/// Linear taps (two per output) in floating point, for u16 and f32 images.
pub(crate) fn linear_taps(src: usize, dst: usize) -> Taps {
    let mut t = Taps {
        ksize: 2,
        index: Vec::with_capacity(2 * dst),
        weight: Vec::with_capacity(2 * dst),
    };
    for (s0, s1, f) in linear_positions(src, dst) {
        t.index.extend([s0, s1]);
        t.weight.extend([1.0 - f, f]);
    }
    t
}

/// `INTER_AREA` taps: each output averages the source span it covers, edge pixels weighted by
/// the covered fraction. Only meaningful for downscaling; callers use linear when enlarging.
pub(crate) fn area_taps(src: usize, dst: usize) -> Taps {
    let scale = src as f64 / dst as f64;
    let ksize = scale.ceil() as usize + 1;
    let mut t = Taps {
        ksize,
        index: vec![0; ksize * dst],
        weight: vec![0.0; ksize * dst],
    };
    for d in 0..dst {
        let (a, b) = (d as f64 * scale, ((d + 1) as f64 * scale).min(src as f64));
        let first = a.floor() as usize;
        for k in 0..ksize {
            let s = first + k;
            let lo = a.max(s as f64);
            let hi = b.min((s + 1) as f64);
            let i = d * ksize + k;
            t.index[i] = s.min(src - 1);
            t.weight[i] = if hi > lo {
                ((hi - lo) / scale) as f32
            } else {
                0.0
            };
        }
    }
    t
}

/// Separable resampling with arbitrary taps, accumulating in f32. Output `[oh, ow, C]`.
pub(crate) fn resample<T: Pixel>(src: &[T], d: Dims, tx: &Taps, ty: &Taps) -> Vec<T> {
    let (ow, oh, c) = (tx.index.len() / tx.ksize, ty.index.len() / ty.ksize, d.c);
    // Horizontal pass: [H, W, C] -> [H, ow, C] in f32.
    let mut tmp = vec![0f32; d.h * ow * c];
    for (y, trow) in tmp.chunks_exact_mut(ow * c).enumerate() {
        let srow = &src[y * d.w * c..(y + 1) * d.w * c];
        for (x, tpx) in trow.chunks_exact_mut(c).enumerate() {
            let taps = x * tx.ksize..(x + 1) * tx.ksize;
            for (&si, &wt) in tx.index[taps.clone()].iter().zip(&tx.weight[taps]) {
                let spx = &srow[si * c..(si + 1) * c];
                for (t, s) in tpx.iter_mut().zip(spx) {
                    *t += s.to_f32() * wt;
                }
            }
        }
    }
    // Vertical pass: [H, ow, C] -> [oh, ow, C].
    let row = ow * c;
    let mut out = Vec::with_capacity(oh * row);
    let mut acc = vec![0f32; row];
    for y in 0..oh {
        acc.fill(0.0);
        let taps = y * ty.ksize..(y + 1) * ty.ksize;
        for (&si, &wt) in ty.index[taps.clone()].iter().zip(&ty.weight[taps]) {
            for (a, t) in acc.iter_mut().zip(&tmp[si * row..(si + 1) * row]) {
                *a += t * wt;
            }
        }
        out.extend(
            acc.iter()
                .map(|&v| T::from_f32(if T::INTEGER { v.clamp(0.0, T::MAX) } else { v })),
        );
    }
    out
}

/// `cv2.resize(..., INTER_LINEAR)` on u8, reproducing OpenCV's 11-bit fixed-point weights
/// (`INTER_RESIZE_COEF_BITS`) and the rounding of its SIMD vertical pass, which is what
/// opencv-python runs on x86 (its scalar `(v + 2^21) >> 22` differs by one grey level on ~13%
/// of samples). Output `[oh, ow, C]`.
pub(crate) fn linear_u8(src: &[u8], d: Dims, oh: usize, ow: usize) -> Vec<u8> {
    const ONE: f32 = 2048.0;
    let fixed = |f: f32| -> (i32, i32) {
        (
            ((1.0 - f) * ONE).round_ties_even() as i32,
            (f * ONE).round_ties_even() as i32,
        )
    };
    let xs: Vec<(usize, usize, i32, i32)> = linear_positions(d.w, ow)
        .into_iter()
        .map(|(s0, s1, f)| {
            let (a0, a1) = fixed(f);
            (s0 * d.c, s1 * d.c, a0, a1)
        })
        .collect();
    let c = d.c;
    let hpass = |y: usize, buf: &mut Vec<i32>| {
        buf.clear();
        let srow = &src[y * d.w * c..(y + 1) * d.w * c];
        for &(o0, o1, a0, a1) in &xs {
            for k in 0..c {
                buf.push(srow[o0 + k] as i32 * a0 + srow[o1 + k] as i32 * a1);
            }
        }
    };
    let scale = d.h as f64 / oh as f64;
    let mut out = Vec::with_capacity(oh * ow * c);
    // Consecutive output rows mostly share source rows: keep the last two horizontal passes.
    let (mut r0, mut r1) = (Vec::with_capacity(ow * c), Vec::with_capacity(ow * c));
    let (mut have0, mut have1) = (usize::MAX, usize::MAX);
    for y in 0..oh {
        // Rows are clamped, weights are not (OpenCV's vertical rule).
        let f = ((y as f64 + 0.5) * scale - 0.5) as f32;
        let s = f.floor();
        let (b0, b1) = fixed(f - s);
        let s = s as isize;
        let clamp = |i: isize| i.clamp(0, d.h as isize - 1) as usize;
        let (y0, y1) = (clamp(s), clamp(s + 1));
        if y0 == have1 {
            std::mem::swap(&mut r0, &mut r1);
            (have0, have1) = (have1, have0);
        }
        if y0 != have0 {
            hpass(y0, &mut r0);
            have0 = y0;
        }
        if y1 == y0 {
            r1.clone_from(&r0);
        } else if y1 != have1 {
            hpass(y1, &mut r1);
        }
        have1 = y1;
        // OpenCV's SIMD vertical step (`VResizeLinearVec_32s8u`): rows pre-shifted by 4 bits,
        // high halves of the 16-bit products, then `(v + 2) >> 2`.
        out.extend(r0.iter().zip(&r1).map(|(&p, &q)| {
            (((((p >> 4) * b0) >> 16) + (((q >> 4) * b1) >> 16) + 2) >> 2).clamp(0, 255) as u8
        }));
    }
    out
}

/// `cv2.resize(..., INTER_NEAREST)`: source index `floor(d * src / dst)`. Output `[oh, ow, C]`.
/// Used for every mask, so labels are never blended.
pub(crate) fn nearest<T: Copy>(src: &[T], d: Dims, oh: usize, ow: usize) -> Vec<T> {
    let pick = |n: usize, s: usize| -> Vec<usize> {
        let f = s as f64 / n as f64;
        (0..n)
            .map(|i| ((i as f64 * f).floor() as usize).min(s - 1))
            .collect()
    };
    let (ys, xs) = (pick(oh, d.h), pick(ow, d.w));
    let mut out = Vec::with_capacity(oh * ow * d.c);
    for &sy in &ys {
        let srow = &src[sy * d.w * d.c..(sy + 1) * d.w * d.c];
        for &sx in &xs {
            out.extend_from_slice(&srow[sx * d.c..(sx + 1) * d.c]);
        }
    }
    out
}

/// Resize image samples `[H, W, C]` to `[oh, ow, C]` with the given interpolation.
pub(crate) fn resize_data(
    data: &RasterData,
    d: Dims,
    oh: usize,
    ow: usize,
    interp: Interp,
) -> RasterData {
    match (interp, data) {
        (Interp::Linear, RasterData::U8(v)) => RasterData::U8(linear_u8(v, d, oh, ow)),
        _ => map_samples!(data, |v| resize_generic(v, d, oh, ow, interp)),
    }
}

fn resize_generic<T: Pixel>(src: &[T], d: Dims, oh: usize, ow: usize, interp: Interp) -> Vec<T> {
    match interp {
        Interp::Nearest => nearest(src, d, oh, ow),
        Interp::Linear => resample(src, d, &linear_taps(d.w, ow), &linear_taps(d.h, oh)),
        // NOTE: OpenCV's INTER_AREA only box-filters when shrinking; when enlarging it is a
        // bilinear variant. We use plain linear for enlarging axes.
        Interp::Area => {
            let tx = if ow < d.w {
                area_taps(d.w, ow)
            } else {
                linear_taps(d.w, ow)
            };
            let ty = if oh < d.h {
                area_taps(d.h, oh)
            } else {
                linear_taps(d.h, oh)
            };
            resample(src, d, &tx, &ty)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn area_taps_average_whole_blocks() {
        // Halving: each output is the mean of two inputs.
        let src: Vec<f32> = vec![0.0, 2.0, 4.0, 6.0];
        let d = Dims { h: 1, w: 4, c: 1 };
        let out = resample(&src, d, &area_taps(4, 2), &linear_taps(1, 1));
        assert_eq!(out, vec![1.0, 5.0]);
    }

    #[test]
    fn area_taps_split_fractional_pixels() {
        // 3 -> 2: output 0 covers [0, 1.5): (a + b/2) / 1.5.
        let src: Vec<f32> = vec![3.0, 6.0, 9.0];
        let d = Dims { h: 1, w: 3, c: 1 };
        let out = resample(&src, d, &area_taps(3, 2), &linear_taps(1, 1));
        assert!(
            (out[0] - (3.0 + 3.0) / 1.5).abs() < 1e-5 && (out[1] - (3.0 + 9.0) / 1.5).abs() < 1e-5,
            "{out:?}"
        );
    }

    #[test]
    fn nearest_picks_floor_of_scaled_index() {
        let src: Vec<u8> = (0..5).collect();
        let d = Dims { h: 1, w: 5, c: 1 };
        // 5 -> 3: floor(0), floor(5/3), floor(10/3)
        assert_eq!(nearest(&src, d, 1, 3), vec![0, 1, 3]);
    }
}
