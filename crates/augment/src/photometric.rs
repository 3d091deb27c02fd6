//! Photometric kernels (image only; masks never change). Integer images are rounded and
//! clamped to their range; f32 images are left unclamped, since reflectances or already
//! normalised values need not lie in `[0, 1]`.

use raster::RasterData;

use crate::AugmentError;
use crate::geometric::{Border, Dims, border_index};
use crate::pixel::{Pixel, map_samples};
use crate::rng::SampleRng;

/// Apply `f(band, value)` (in sample units, as f32) to every sample. u8 and u16 go through a
/// lookup table per band, so the cost per sample is one load whatever `f` is.
pub(crate) fn map_values(data: &mut RasterData, bands: usize, f: impl Fn(usize, f32) -> f32) {
    match data {
        RasterData::U8(v) => {
            let luts: Vec<[u8; 256]> = (0..bands)
                .map(|b| std::array::from_fn(|i| u8::from_f32(f(b, i as f32).clamp(0.0, 255.0))))
                .collect();
            apply_luts(v, &luts);
        }
        RasterData::U16(v) => {
            // A 64 Ki-entry table per band beats `powf` per sample for anything but tiny images.
            if v.len() < 65536 * bands {
                for (i, s) in v.iter_mut().enumerate() {
                    *s = u16::from_f32(f(i % bands, *s as f32).clamp(0.0, 65535.0));
                }
            } else {
                let luts: Vec<Vec<u16>> = (0..bands)
                    .map(|b| {
                        (0..65536)
                            .map(|i| u16::from_f32(f(b, i as f32).clamp(0.0, 65535.0)))
                            .collect()
                    })
                    .collect();
                apply_luts(v, &luts);
            }
        }
        RasterData::F32(v) => {
            for px in v.chunks_exact_mut(bands) {
                for (b, s) in px.iter_mut().enumerate() {
                    *s = f(b, *s);
                }
            }
        }
    }
}

fn apply_luts<T: Copy + PartialEq + Into<usize>, L: AsRef<[T]>>(v: &mut [T], luts: &[L]) {
    let bands = luts.len();
    if luts.windows(2).all(|w| w[0].as_ref() == w[1].as_ref()) {
        let lut = luts[0].as_ref();
        for s in v.iter_mut() {
            *s = lut[(*s).into()];
        }
    } else {
        for px in v.chunks_exact_mut(bands) {
            for (s, lut) in px.iter_mut().zip(luts) {
                *s = lut.as_ref()[(*s).into()];
            }
        }
    }
}

/// Mean of all samples (for brightness relative to the image mean).
pub(crate) fn mean(data: &RasterData) -> f64 {
    fn m<T: Pixel>(v: &[T]) -> f64 {
        v.iter().map(|s| s.to_f32() as f64).sum::<f64>() / v.len().max(1) as f64
    }
    match data {
        RasterData::U8(v) => m(v),
        RasterData::U16(v) => m(v),
        RasterData::F32(v) => m(v),
    }
}

/// Add Gaussian noise with standard deviation `std` and mean `mean` (both in sample units);
/// one draw per sample when `per_channel`, else one per pixel shared by its bands.
pub(crate) fn gauss_noise(
    data: &mut RasterData,
    bands: usize,
    mean: f32,
    std: f32,
    per_channel: bool,
    rng: &mut SampleRng,
) {
    fn run<T: Pixel>(
        v: &mut [T],
        bands: usize,
        mean: f32,
        std: f32,
        per_channel: bool,
        rng: &mut SampleRng,
    ) {
        let clamp = |x: f32| if T::INTEGER { x.clamp(0.0, T::MAX) } else { x };
        for px in v.chunks_exact_mut(bands) {
            let shared = mean + std * rng.normal();
            for s in px.iter_mut() {
                let n = if per_channel {
                    mean + std * rng.normal()
                } else {
                    shared
                };
                *s = T::from_f32(clamp(s.to_f32() + n));
            }
        }
    }
    match data {
        RasterData::U8(v) => run(v, bands, mean, std, per_channel, rng),
        RasterData::U16(v) => run(v, bands, mean, std, per_channel, rng),
        RasterData::F32(v) => run(v, bands, mean, std, per_channel, rng),
    }
}

/// OpenCV's default sigma for a kernel size when none is given.
pub(crate) fn default_sigma(ksize: usize) -> f32 {
    0.3 * ((ksize as f32 - 1.0) * 0.5 - 1.0) + 0.8
}

/// Separable Gaussian blur with an odd `ksize` and `sigma`, reflect-101 borders (OpenCV's
/// default). Input and output `[H, W, C]`.
pub(crate) fn gaussian_blur(data: &RasterData, d: Dims, ksize: usize, sigma: f32) -> RasterData {
    let r = (ksize / 2) as isize;
    let mut k: Vec<f32> = (-r..=r)
        .map(|i| (-(i * i) as f32 / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f32 = k.iter().sum();
    k.iter_mut().for_each(|w| *w /= sum);
    fn run<T: Pixel>(src: &[T], d: Dims, k: &[f32], r: isize) -> Vec<T> {
        let c = d.c;
        let mut tmp = vec![0f32; src.len()];
        for y in 0..d.h {
            let row = &src[y * d.w * c..(y + 1) * d.w * c];
            for x in 0..d.w {
                for (t, &w) in k.iter().enumerate() {
                    let sx = border_index(x as isize + t as isize - r, d.w, Border::Reflect101)
                        .unwrap_or(0);
                    for b in 0..c {
                        tmp[(y * d.w + x) * c + b] += row[sx * c + b].to_f32() * w;
                    }
                }
            }
        }
        let row_len = d.w * c;
        let mut out = Vec::with_capacity(src.len());
        let mut acc = vec![0f32; row_len];
        for y in 0..d.h {
            acc.fill(0.0);
            for (t, &w) in k.iter().enumerate() {
                let sy =
                    border_index(y as isize + t as isize - r, d.h, Border::Reflect101).unwrap_or(0);
                for (a, s) in acc.iter_mut().zip(&tmp[sy * row_len..(sy + 1) * row_len]) {
                    *a += s * w;
                }
            }
            out.extend(
                acc.iter()
                    .map(|&v| T::from_f32(if T::INTEGER { v.clamp(0.0, T::MAX) } else { v })),
            );
        }
        out
    }
    map_samples!(data, |v| run(v, d, &k, r))
}

/// Set the listed bands of every pixel to `fill`.
pub(crate) fn drop_bands(data: &mut RasterData, bands: usize, drop: &[usize], fill: f32) {
    fn run<T: Pixel>(v: &mut [T], bands: usize, drop: &[usize], fill: T) {
        for px in v.chunks_exact_mut(bands) {
            for &b in drop {
                px[b] = fill;
            }
        }
    }
    match data {
        RasterData::U8(v) => run(v, bands, drop, u8::from_f32(fill)),
        RasterData::U16(v) => run(v, bands, drop, u16::from_f32(fill)),
        RasterData::F32(v) => run(v, bands, drop, fill),
    }
}

/// `(x - mean * max_pixel) / (std * max_pixel)` per band, as albumentations' `Normalize`:
/// the per-band offset and reciprocal are folded once so each sample is one multiply-add.
/// Input `[H, W, C]` of any type, output `[H, W, C]` f32.
pub(crate) fn normalize(data: &RasterData, mean: &[f32], std: &[f32], max_pixel: f32) -> Vec<f32> {
    let scale: Vec<f32> = std.iter().map(|s| 1.0 / (s * max_pixel)).collect();
    let offset: Vec<f32> = mean.iter().map(|m| m * max_pixel).collect();
    fn run<T: Pixel>(v: &[T], offset: &[f32], scale: &[f32]) -> Vec<f32> {
        match offset.len() {
            1 => fixed::<T, 1>(v, offset, scale),
            2 => fixed::<T, 2>(v, offset, scale),
            3 => fixed::<T, 3>(v, offset, scale),
            4 => fixed::<T, 4>(v, offset, scale),
            c => {
                let mut out = Vec::with_capacity(v.len());
                for px in v.chunks_exact(c) {
                    out.extend(
                        px.iter()
                            .zip(offset.iter().zip(scale))
                            .map(|(p, (o, s))| (p.to_f32() - o) * s),
                    );
                }
                out
            }
        }
    }
    /// Band count known at compile time: a straight, vectorisable loop over `[T; N]` pixels.
    fn fixed<T: Pixel, const N: usize>(v: &[T], offset: &[f32], scale: &[f32]) -> Vec<f32> {
        let o: [f32; N] = std::array::from_fn(|b| offset[b]);
        let s: [f32; N] = std::array::from_fn(|b| scale[b]);
        let mut out = vec![0f32; v.len()];
        for (dst, px) in out
            .as_chunks_mut::<N>()
            .0
            .iter_mut()
            .zip(v.as_chunks::<N>().0)
        {
            for b in 0..N {
                dst[b] = (px[b].to_f32() - o[b]) * s[b];
            }
        }
        out
    }
    match data {
        RasterData::U8(v) => run(v, &offset, &scale),
        RasterData::U16(v) => run(v, &offset, &scale),
        RasterData::F32(v) => run(v, &offset, &scale),
    }
}

/// Broadcast one value to every band, or check there is one per band.
pub(crate) fn per_band(
    transform: &'static str,
    mean: &[f32],
    std: &[f32],
    bands: usize,
) -> Result<(Vec<f32>, Vec<f32>), AugmentError> {
    let spread = |v: &[f32], what: &str| -> Result<Vec<f32>, AugmentError> {
        match v.len() {
            1 => Ok(vec![v[0]; bands]),
            n if n == bands => Ok(v.to_vec()),
            n => Err(AugmentError::Unsupported {
                transform,
                reason: format!(
                    "{what} has {n} values but the image has {bands} bands; give one value per band (the statistics computed for the prepared dataset) or a single value"
                ),
            }),
        }
    };
    Ok((spread(mean, "mean")?, spread(std, "std")?))
}

/// ImageNet RGB means, HF's `IMAGENET_DEFAULT_MEAN`.
pub(crate) fn imagenet_mean() -> Vec<f32> {
    vec![0.485, 0.456, 0.406]
}

/// ImageNet RGB standard deviations, HF's `IMAGENET_DEFAULT_STD`.
pub(crate) fn imagenet_std() -> Vec<f32> {
    vec![0.229, 0.224, 0.225]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blur_keeps_constant_images_and_mass() {
        let d = Dims { h: 5, w: 6, c: 2 };
        let flat = RasterData::U16(vec![1000; 60]);
        assert_eq!(gaussian_blur(&flat, d, 5, default_sigma(5)), flat);
        // A single impulse spreads but keeps its total (away from the borders).
        let mut v = vec![0f32; 7 * 7];
        v[3 * 7 + 3] = 1.0;
        let out = gaussian_blur(&RasterData::F32(v), Dims { h: 7, w: 7, c: 1 }, 3, 0.8);
        let RasterData::F32(o) = out else {
            unreachable!()
        };
        assert!((o.iter().sum::<f32>() - 1.0).abs() < 1e-5 && o[3 * 7 + 3] < 1.0);
    }

    #[test]
    fn u16_luts_match_direct_evaluation() {
        // Large enough to take the table path; compare with the direct formula.
        let vals: Vec<u16> = (0..70_000u32).map(|i| (i * 7 % 65536) as u16).collect();
        let mut d = RasterData::U16(vals.clone());
        map_values(&mut d, 1, |_, x| 65535.0 * (x / 65535.0).powf(0.8));
        let RasterData::U16(out) = d else {
            unreachable!()
        };
        for (o, v) in out.iter().zip(&vals) {
            assert_eq!(
                *o,
                (65535.0 * (*v as f32 / 65535.0).powf(0.8)).round() as u16
            );
        }
    }
}
