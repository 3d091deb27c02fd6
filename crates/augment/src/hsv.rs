//! `HueSaturationValue`'s kernel. u8 images follow albumentations 2.0.8 (`shift_hsv`) on
//! OpenCV exactly: 8-bit `cvtColor(RGB2HSV)` (hue in 2° steps, `[0, 180)`, fixed-point
//! divisions through tables), a lookup table per channel for the shifts, and 8-bit `HSV2RGB`
//! back, whose two code paths (SIMD blocks, scalar row tail) round differently. Other sample
//! types shift in float HSV.

use raster::RasterData;

use crate::pixel::Pixel;

/// Shift hue by `hue` OpenCV hue units (2° each), and add `sat` and `val` (in 1/255 of full
/// scale) to saturation and value, on a 3-band RGB image `[H, W, 3]` with rows of `width`
/// pixels.
pub(crate) fn hsv_shift(data: &mut RasterData, width: usize, hue: f32, sat: f32, val: f32) {
    // albumentations returns the image untouched when nothing is shifted: no lossy round trip.
    if hue == 0.0 && sat == 0.0 && val == 0.0 {
        return;
    }
    match data {
        RasterData::U8(v) => shift_u8(v, width, hue, sat, val),
        RasterData::U16(v) => shift_float(v, hue * 2.0, sat / 255.0, val / 255.0),
        RasterData::F32(v) => shift_float(v, hue * 2.0, sat / 255.0, val / 255.0),
    }
}

/// OpenCV's `hsv_shift` fixed-point precision (`color_hsv.simd.hpp`).
const HSV_SHIFT: u32 = 12;

/// OpenCV's hue scale for `HSV2RGB` on u8 (`6.0f / 180`, in f32).
const HSCALE: f32 = 6.0 / 180.0;

/// Pixels per step of OpenCV's SIMD `HSV2RGB_b`: four vectors of f32 lanes, 8 lanes on AVX2.
/// Each row converts its first `width / SIMD_BLOCK` blocks on that path and the rest with
/// the scalar code.
///
/// NOTE: OpenCV's results depend on the CPU it runs on: the block (16 pixels on SSE/NEON, 64
/// on AVX-512) and whether `1 - s * f` is fused (see `tab`). We follow AVX2 with FMA3, the
/// common x86 case; albumentations elsewhere can differ from us by a level at the end of rows
/// whose width is not a multiple of the block and, without FMA, on rare pixels anywhere.
/// Usual tile widths (256, 512) are multiples of 64: every row goes the SIMD way on any CPU.
const SIMD_BLOCK: usize = 32;

/// OpenCV's fixed-point division tables for RGB → HSV on u8 (`sdiv[i] = (255 << 12) / i`,
/// `hdiv[i] = (180 << 12) / (6 i)`, 0 at 0); `saturate_cast<int>` rounds to nearest, ties to
/// even.
fn division_tables() -> ([i32; 256], [i32; 256]) {
    let div = |num: u32, den: f64| {
        if den == 0.0 {
            0
        } else {
            ((num << HSV_SHIFT) as f64 / den).round_ties_even() as i32
        }
    };
    (
        std::array::from_fn(|i| div(255, i as f64)),
        std::array::from_fn(|i| div(180, 6.0 * i as f64)),
    )
}

/// albumentations' `shift_hsv` on u8: RGB → 8-bit HSV; hue through the table
/// `(i + hue) mod 180` (in f64, truncated); saturation and value plus the shift truncated to a
/// whole level (`int(shift)`), saturated to `[0, 255]`; pixels of saturation 0 (grey, black,
/// white) keep saturation 0; then HSV → RGB.
fn shift_u8(v: &mut [u8], width: usize, hue: f32, sat: f32, val: f32) {
    let (sdiv, hdiv) = division_tables();
    // `np.mod(arange + hue, 180).astype(uint8)`; may give 180 when `i + hue` is a hair below
    // 0, which `HSV2RGB` wraps to red as OpenCV does.
    let hue_lut: [u8; 256] =
        std::array::from_fn(|i| (i as f64 + hue as f64).rem_euclid(180.0) as u8);
    let add = |shift: f32| -> [u8; 256] {
        let shift = shift.trunc() as i32;
        std::array::from_fn(|i| (i as i32 + shift).clamp(0, 255) as u8)
    };
    let (mut sat_lut, val_lut) = (add(sat), add(val));
    // "These should remain grayscale regardless of saturation change" (albumentations): at
    // S = 0 `HSV2RGB` gives V in all three channels, whatever the hue.
    sat_lut[0] = 0;
    let shifted = |px: &[u8; 3]| {
        let (h, s, v) = rgb_to_hsv_u8(px, &sdiv, &hdiv);
        (
            hue_lut[h as usize],
            sat_lut[s as usize],
            val_lut[v as usize],
        )
    };
    let simd = width / SIMD_BLOCK * SIMD_BLOCK;
    for row in v.chunks_exact_mut(width.max(1) * 3) {
        let (block, tail) = row.split_at_mut(simd * 3);
        for px in block.as_chunks_mut::<3>().0 {
            let (h, s, v) = shifted(px);
            *px = hsv_to_rgb_block(h, s, v);
        }
        for px in tail.as_chunks_mut::<3>().0 {
            let (h, s, v) = shifted(px);
            *px = hsv_to_rgb_tail(h, s, v);
        }
    }
}

/// OpenCV's `RGB2HSV_b` (its SIMD and scalar paths agree): `(h, s, v)` with `h` in `[0, 180)`.
fn rgb_to_hsv_u8(px: &[u8; 3], sdiv: &[i32; 256], hdiv: &[i32; 256]) -> (u8, u8, u8) {
    let (r, g, b) = (px[0] as i32, px[1] as i32, px[2] as i32);
    let v = r.max(g).max(b);
    let diff = v - r.min(g).min(b);
    let round = 1 << (HSV_SHIFT - 1);
    let s = (diff * sdiv[v as usize] + round) >> HSV_SHIFT;
    let h = if v == r {
        g - b
    } else if v == g {
        b - r + 2 * diff
    } else {
        r - g + 4 * diff
    };
    // `>>` on i32 floors, as OpenCV's arithmetic shift does.
    let mut h = (h * hdiv[diff as usize] + round) >> HSV_SHIFT;
    if h < 0 {
        h += 180;
    }
    (h as u8, s as u8, v as u8)
}

/// OpenCV's `sector_data`: which of `tab` is b, g, r in each 60° sector.
const SECTOR: [[usize; 3]; 6] = [
    [1, 3, 0],
    [1, 0, 2],
    [3, 0, 1],
    [0, 2, 1],
    [0, 1, 3],
    [2, 1, 0],
];

/// OpenCV's table of channel values for hue fraction `f` in a sector. Its AVX2 build (FMA3)
/// computes `1 - s * f` with one rounding, in the SIMD and the scalar code alike: the compiler
/// contracts the multiply and subtract into a fused multiply-add.
fn tab(f: f32, s: f32, v: f32) -> [f32; 4] {
    [
        v,
        v * (1.0 - s),
        v * (-s).mul_add(f, 1.0),
        v * (-s).mul_add(1.0 - f, 1.0),
    ]
}

/// OpenCV's SIMD `HSV2RGB_b` (`HSV2RGB_simd`), in f32: the sector from truncations, no case
/// for S = 0 (every entry of `tab` is V then), results truncated.
fn hsv_to_rgb_block(h: u8, s: u8, v: u8) -> [u8; 3] {
    let (s, v) = (s as f32 * (1.0 / 255.0), v as f32 * (1.0 / 255.0));
    let h = h as f32 * HSCALE;
    // `h` >= 0, so `as` truncates like `v_trunc`; OpenCV's sector is that mod 6 (hue 180 is 0).
    let pre = h as usize;
    let tab = tab(h - pre as f32, s, v);
    let [b, g, r] = SECTOR[pre % 6];
    // `as u8` truncates and saturates, as `v_trunc` then `v_pack_u` and `v_pack` do.
    let level = |i: usize| (tab[i] * 255.0) as u8;
    [level(r), level(g), level(b)]
}

/// OpenCV's scalar `HSV2RGB_b` (`HSV2RGB_native`) for the tail of a row, in f32, rounded to
/// nearest, ties to even (`saturate_cast<uchar>`; `as u8` saturates).
fn hsv_to_rgb_tail(h: u8, s: u8, v: u8) -> [u8; 3] {
    let (s, v) = (s as f32 * (1.0 / 255.0), v as f32 * (1.0 / 255.0));
    let level = |x: f32| (x * 255.0).round_ties_even() as u8;
    if s == 0.0 {
        return [level(v); 3];
    }
    // `fmod(h, 6)`: only hue 180, from the shift table, reaches 6.
    let mut h = h as f32 * HSCALE;
    if h >= 6.0 {
        h -= 6.0;
    }
    let sector = h as usize; // floor, `h` >= 0
    let tab = tab(h - sector as f32, s, v);
    let [b, g, r] = SECTOR[sector];
    [level(tab[r]), level(tab[g]), level(tab[b])]
}

/// Float HSV shift: `hue_deg` degrees, `sat` and `val` fractions of full scale; grey pixels
/// (S = 0) stay grey, as on u8.
///
/// NOTE: albumentations 2.0.8 quantises float images to u8 for this transform (`@uint8_io`:
/// `rint(x * 255)`, the u8 path, `/ 255`); we keep u16 and f32 samples at their precision.
fn shift_float<T: Pixel>(v: &mut [T], hue_deg: f32, sat: f32, val: f32) {
    let scale = T::MAX;
    for px in v.as_chunks_mut::<3>().0 {
        let (h, s, vv) = rgb_to_hsv(
            px[0].to_f32() / scale,
            px[1].to_f32() / scale,
            px[2].to_f32() / scale,
        );
        let (r, g, b) = hsv_to_rgb(
            (h + hue_deg).rem_euclid(360.0),
            if s == 0.0 {
                0.0
            } else {
                (s + sat).clamp(0.0, 1.0)
            },
            (vv + val).clamp(0.0, 1.0),
        );
        for (o, c) in px.iter_mut().zip([r, g, b]) {
            *o = T::from_f32(if T::INTEGER {
                (c * scale).clamp(0.0, scale)
            } else {
                c * scale
            });
        }
    }
}

/// RGB (each in `[0, 1]`) to HSV with hue in degrees `[0, 360)`.
fn rgb_to_hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let delta = max - min;
    let h = if delta == 0.0 {
        0.0
    } else if max == r {
        60.0 * ((g - b) / delta)
    } else if max == g {
        60.0 * ((b - r) / delta) + 120.0
    } else {
        60.0 * ((r - g) / delta) + 240.0
    };
    let s = if max == 0.0 { 0.0 } else { delta / max };
    (h.rem_euclid(360.0), s, max)
}

fn hsv_to_rgb(h: f32, s: f32, v: f32) -> (f32, f32, f32) {
    let c = v * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp.rem_euclid(2.0) - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    (r + m, g + m, b + m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsv_round_trips_primary_and_grey_colours() {
        for rgb in [
            (1.0, 0.0, 0.0),
            (0.2, 0.8, 0.4),
            (0.5, 0.5, 0.5),
            (0.1, 0.2, 0.9),
        ] {
            let (h, s, v) = rgb_to_hsv(rgb.0, rgb.1, rgb.2);
            let back = hsv_to_rgb(h, s, v);
            assert!(
                (back.0 - rgb.0).abs() < 1e-5
                    && (back.1 - rgb.1).abs() < 1e-5
                    && (back.2 - rgb.2).abs() < 1e-5,
                "{rgb:?} -> {back:?}"
            );
        }
        // Pure red rotated by 60 hue units (120°) is pure green.
        let mut d = RasterData::U8(vec![255, 0, 0]);
        hsv_shift(&mut d, 1, 60.0, 0.0, 0.0);
        assert_eq!(d, RasterData::U8(vec![0, 255, 0]));
    }

    #[test]
    fn grey_stays_grey_when_saturation_shifts() {
        // Issue 31's pixel, [47, 47, 47] with sat +15 and val -10: albumentations gives
        // [37, 37, 37] (S = 0 is kept, and V is returned in all channels), not [37, 36, 35].
        // Rows of 1 pixel are a scalar tail, rows of 32 one SIMD block.
        for width in [1, SIMD_BLOCK] {
            let mut d = RasterData::U8([47; 3].repeat(width));
            hsv_shift(&mut d, width, 10.0, 15.0, -10.0);
            assert_eq!(d, RasterData::U8([37; 3].repeat(width)), "rows of {width}");
        }
        // Float images too, and an empty image is no panic.
        let mut d = RasterData::F32(vec![0.5; 3]);
        hsv_shift(&mut d, 1, 10.0, 15.0, 0.0);
        assert_eq!(d, RasterData::F32(vec![0.5; 3]));
        hsv_shift(&mut RasterData::U8(vec![]), 0, 10.0, 15.0, -10.0);
    }

    #[test]
    fn eight_bit_hsv_is_the_float_hsv_rounded() {
        // Independent of OpenCV's tables: hue/2 and 255·s from the float formula, over a grid
        // of colours; the fixed-point divisions may land one step off where the exact value
        // is within rounding distance of a half.
        let (sdiv, hdiv) = division_tables();
        for r in (0..=255u8).step_by(15) {
            for g in (0..=255u8).step_by(17) {
                for b in (0..=255u8).step_by(51) {
                    let (h, s, v) = rgb_to_hsv_u8(&[r, g, b], &sdiv, &hdiv);
                    let (fh, fs, fv) =
                        rgb_to_hsv(r as f32 / 255.0, g as f32 / 255.0, b as f32 / 255.0);
                    let want_h = (fh / 2.0).round() as i32 % 180;
                    let dh = (h as i32 - want_h).rem_euclid(180);
                    assert!(dh.min(180 - dh) <= 1, "{r},{g},{b}: h {h} vs {want_h}");
                    assert!(
                        (s as f32 - fs * 255.0).abs() <= 1.0,
                        "{r},{g},{b}: s {s} vs {}",
                        fs * 255.0
                    );
                    assert_eq!(v as f32, (fv * 255.0).round(), "{r},{g},{b}: v");
                    // And back: hue in 2° steps is off by up to 1°, which moves a channel by up
                    // to 255 / 60 ≈ 4.3 levels.
                    let back = hsv_to_rgb_tail(h, s, v);
                    for (x, y) in back.iter().zip([r, g, b]) {
                        assert!(x.abs_diff(y) <= 5, "{r},{g},{b} -> {back:?}");
                    }
                }
            }
        }
    }
}
