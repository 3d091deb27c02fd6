//! `HueSaturationValue`'s kernel. u8 images follow albumentations 2.0.8 exactly: OpenCV's
//! 8-bit `cvtColor(RGB2HSV)` (hue in 2° steps, `[0, 180)`, fixed-point divisions through
//! tables), a lookup table per channel for the shifts, and OpenCV's `HSV2RGB` back (in f32,
//! rounded to nearest, ties to even). Other sample types shift in float HSV, as albumentations
//! does for float images.

use raster::RasterData;

use crate::pixel::Pixel;

/// Shift hue by `hue` OpenCV hue units (2° each), and add `sat` and `val` (in 1/255 of full
/// scale) to saturation and value, on a 3-band RGB image `[H, W, 3]`.
pub(crate) fn hsv_shift(data: &mut RasterData, hue: f32, sat: f32, val: f32) {
    match data {
        RasterData::U8(v) => shift_u8(v, hue, sat, val),
        RasterData::U16(v) => shift_float(v, hue * 2.0, sat / 255.0, val / 255.0),
        RasterData::F32(v) => shift_float(v, hue * 2.0, sat / 255.0, val / 255.0),
    }
}

/// OpenCV's `hsv_shift` fixed-point precision (`color_hsv.simd.hpp`).
const HSV_SHIFT: u32 = 12;

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

/// albumentations' `_shift_hsv_uint8`: RGB → 8-bit HSV, `hue = (h + shift) mod 180` and
/// `sat`/`val` clipped to `[0, 255]`, each truncated to u8 through a lookup table; then
/// HSV → RGB.
///
/// NOTE: the fixture (`HueSaturationValue_10_20_-15`) checks whole-level shifts on pixels that
/// all have some saturation; truncation of fractional shifts follows albumentations' source
/// (`np.clip(lut + shift, 0, 255).astype(uint8)`), not a fixture.
fn shift_u8(v: &mut [u8], hue: f32, sat: f32, val: f32) {
    let (sdiv, hdiv) = division_tables();
    // albumentations' tables, `arange(256)` plus the shift in f64, truncated by `astype`.
    let hue_lut: [u8; 256] =
        std::array::from_fn(|i| (i as f64 + hue as f64).rem_euclid(180.0) as u8);
    let add = |shift: f32| -> [u8; 256] {
        std::array::from_fn(|i| (i as f64 + shift as f64).clamp(0.0, 255.0) as u8)
    };
    let (sat_lut, val_lut) = (add(sat), add(val));
    for px in v.as_chunks_mut::<3>().0 {
        let (h, s, vv) = rgb_to_hsv_u8(px, &sdiv, &hdiv);
        *px = hsv_to_rgb_u8(
            hue_lut[h as usize],
            sat_lut[s as usize],
            val_lut[vv as usize],
        );
    }
}

/// OpenCV's `RGB2HSV_b`: `(h, s, v)` with `h` in `[0, 180)`.
fn rgb_to_hsv_u8(px: &[u8; 3], sdiv: &[i32; 256], hdiv: &[i32; 256]) -> (u8, u8, u8) {
    let [r, g, b] = px.map(i32::from);
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

/// OpenCV's `HSV2RGB_b`: `h` in `[0, 180)`, the arithmetic in f32 as OpenCV does it.
fn hsv_to_rgb_u8(h: u8, s: u8, v: u8) -> [u8; 3] {
    let (s, v) = (s as f32 * (1.0 / 255.0), v as f32 * (1.0 / 255.0));
    let (r, g, b) = if s == 0.0 {
        (v, v, v)
    } else {
        let h = h as f32 * (6.0 / 180.0);
        let sector = h.floor();
        let f = h - sector;
        let tab = [
            v,
            v * (1.0 - s),
            v * (1.0 - s * f),
            v * (1.0 - s * (1.0 - f)),
        ];
        // OpenCV's `sector_data`: which of `tab` is b, g, r in each 60° sector.
        const SECTOR: [[usize; 3]; 6] = [
            [1, 3, 0],
            [1, 0, 2],
            [3, 0, 1],
            [0, 2, 1],
            [0, 1, 3],
            [2, 1, 0],
        ];
        let [b, g, r] = SECTOR[(sector as usize).min(5)].map(|i| tab[i]);
        (r, g, b)
    };
    [r, g, b].map(|c| (c * 255.0).round_ties_even().clamp(0.0, 255.0) as u8)
}

/// Float HSV shift: `hue_deg` degrees, `sat` and `val` fractions of full scale.
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
            (s + sat).clamp(0.0, 1.0),
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
        hsv_shift(&mut d, 60.0, 0.0, 0.0);
        assert_eq!(d, RasterData::U8(vec![0, 255, 0]));
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
                    let back = hsv_to_rgb_u8(h, s, v);
                    for (x, y) in back.iter().zip([r, g, b]) {
                        assert!(x.abs_diff(y) <= 5, "{r},{g},{b} -> {back:?}");
                    }
                }
            }
        }
    }
}
