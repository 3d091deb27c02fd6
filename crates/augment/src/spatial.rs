//! Helpers that move image and mask together: permutations, warps, resizes, crops, pads.

use raster::RasterData;

use crate::AugmentError;
use crate::config::{self as cfg, BorderMode, Interpolation};
use crate::geometric::{self as geo, Border, Dims};
use crate::pixel::{Item, Pixel, map_samples};
use crate::resize::{self, Interp};
use crate::rng::SampleRng;
use crate::warp::{self, Affine};

pub(crate) fn dims(item: &Item) -> Dims {
    Dims {
        h: item.image.height,
        w: item.image.width,
        c: item.image.bands,
    }
}

/// An index permutation shared by image and mask.
#[derive(Clone, Copy)]
pub(crate) enum Perm {
    HFlip,
    VFlip,
    Transpose,
    Rot90(u8),
}

/// In-place permutations keep the buffer; the others gather into a new one.
fn perm<T: Copy>(v: &mut Vec<T>, d: Dims, p: Perm) {
    match p {
        Perm::HFlip => geo::hflip(v, d),
        Perm::VFlip => geo::vflip(v, d),
        Perm::Rot90(k) if k % 2 == 0 => {
            if k % 4 == 2 {
                geo::rot180(v, d)
            }
        }
        Perm::Rot90(k) => *v = geo::rot90_odd(v, d, k),
        Perm::Transpose => *v = geo::transpose(v, d),
    }
}

pub(crate) fn permute(item: &mut Item, p: Perm) {
    let d = dims(item);
    let swaps = matches!(p, Perm::Transpose) || matches!(p, Perm::Rot90(k) if k % 2 == 1);
    match &mut item.image.data {
        RasterData::U8(v) => perm(v, d, p),
        RasterData::U16(v) => perm(v, d, p),
        RasterData::F32(v) => perm(v, d, p),
    }
    if swaps {
        (item.image.height, item.image.width) = (d.w, d.h);
    }
    if let Some(m) = &mut item.mask {
        perm(
            &mut m.data,
            Dims {
                h: d.h,
                w: d.w,
                c: 1,
            },
            p,
        );
        if swaps {
            (m.height, m.width) = (d.w, d.h);
        }
    }
}

fn border(b: BorderMode) -> Border {
    match b {
        BorderMode::Constant => Border::Constant,
        BorderMode::Reflect101 => Border::Reflect101,
        BorderMode::Replicate => Border::Replicate,
    }
}

fn interp(i: Interpolation) -> Interp {
    match i {
        Interpolation::Nearest => Interp::Nearest,
        Interpolation::Linear => Interp::Linear,
        Interpolation::Area => Interp::Area,
    }
}

/// A fill value per band, in the image's sample type.
fn fill_px<T: Pixel>(fill: f32, bands: usize) -> Vec<T> {
    vec![
        T::from_f32(if T::INTEGER {
            fill.clamp(0.0, T::MAX)
        } else {
            fill
        });
        bands
    ]
}

/// Warp image (bilinear or nearest) and mask (nearest, `fill_mask` outside) by forward map `m`.
pub(crate) fn warp_item(
    item: &mut Item,
    m: &Affine,
    i: Interpolation,
    b: BorderMode,
    fill: f32,
    fill_mask: f32,
) {
    let inv = m.inverse();
    let (d, bd) = (dims(item), border(b));
    let bilinear = i != Interpolation::Nearest;
    item.image.data = map_samples!(&item.image.data, |v| warp::warp_image(
        v,
        d,
        &inv,
        bilinear,
        bd,
        &fill_px(fill, d.c)
    ));
    let fm = [u8::from_f32(fill_mask.clamp(0.0, 255.0))];
    item.map_mask(|v, h, w| {
        (
            warp::warp_image(v, Dims { h, w, c: 1 }, &inv, false, bd, &fm),
            h,
            w,
        )
    });
}

/// Resize image with `i` and mask with nearest to `oh × ow`.
pub(crate) fn resize_item(item: &mut Item, oh: usize, ow: usize, i: Interpolation) {
    let d = dims(item);
    if (d.h, d.w) == (oh, ow) {
        return;
    }
    let data = resize::resize_data(&item.image.data, d, oh, ow, interp(i));
    item.set_image(oh, ow, data);
    item.map_mask(|v, h, w| (resize::nearest(v, Dims { h, w, c: 1 }, oh, ow), oh, ow));
}

pub(crate) fn crop_item(item: &mut Item, y0: usize, x0: usize, ch: usize, cw: usize) {
    let d = dims(item);
    let data = map_samples!(&item.image.data, |v| geo::crop(v, d, y0, x0, ch, cw));
    item.set_image(ch, cw, data);
    item.map_mask(|v, h, w| (geo::crop(v, Dims { h, w, c: 1 }, y0, x0, ch, cw), ch, cw));
}

pub(crate) fn fits(
    transform: &'static str,
    item: &Item,
    ch: usize,
    cw: usize,
) -> Result<(), AugmentError> {
    if ch > item.image.height || cw > item.image.width {
        return Err(AugmentError::Unsupported {
            transform,
            reason: format!(
                "crop {ch}x{cw} (h x w) is larger than the {}x{} image; put a PadIfNeeded with min_height = {ch}, min_width = {cw} before it",
                item.image.height, item.image.width
            ),
        });
    }
    Ok(())
}

/// torchvision's `RandomResizedCrop.get_params`: ten tries at a random area and log-uniform
/// aspect ratio, then a centre crop clamped to the ratio range. Returns `(y0, x0, h, w)`.
pub(crate) fn resized_crop_window(
    h: usize,
    w: usize,
    c: &cfg::RandomResizedCrop,
    rng: &mut SampleRng,
) -> (usize, usize, usize, usize) {
    let area = (h * w) as f32;
    let (s0, s1) = c.scale.fixed();
    let (r0, r1) = c.ratio.fixed();
    for _ in 0..10 {
        let target = area * rng.uniform(s0, s1);
        let ratio = rng.uniform(r0.ln(), r1.ln()).exp();
        let cw = (target * ratio).sqrt().round() as usize;
        let ch = (target / ratio).sqrt().round() as usize;
        if cw > 0 && ch > 0 && cw <= w && ch <= h {
            return (rng.int(0, h - ch), rng.int(0, w - cw), ch, cw);
        }
    }
    let in_ratio = w as f32 / h as f32;
    let (ch, cw) = if in_ratio < r0 {
        (((w as f32 / r0).round() as usize).clamp(1, h), w)
    } else if in_ratio > r1 {
        (h, ((h as f32 * r1).round() as usize).clamp(1, w))
    } else {
        (h, w)
    };
    ((h - ch) / 2, (w - cw) / 2, ch, cw)
}

/// mmseg's `RandomCrop` with `cat_max_ratio`: up to 10 tries for a window in which no class
/// covers more than that fraction of the labelled (non-ignore) pixels.
pub(crate) fn random_crop_origin(
    item: &Item,
    ch: usize,
    cw: usize,
    c: &cfg::RandomCrop,
    rng: &mut SampleRng,
) -> (usize, usize) {
    let (h, w) = (item.image.height, item.image.width);
    let mut origin = (rng.int(0, h - ch), rng.int(0, w - cw));
    let Some(mask) = item.mask.as_ref().filter(|_| c.cat_max_ratio < 1.0) else {
        return origin;
    };
    for _ in 1..10 {
        let mut counts = [0u32; 256];
        for y in origin.0..origin.0 + ch {
            for &v in &mask.data[y * w + origin.1..y * w + origin.1 + cw] {
                counts[v as usize] += 1;
            }
        }
        counts[c.ignore_index as usize] = 0;
        let total: u32 = counts.iter().sum();
        let classes = counts.iter().filter(|&&n| n > 0).count();
        let max = counts.iter().copied().max().unwrap_or(0);
        if classes > 1 && (max as f32) < c.cat_max_ratio * total as f32 {
            break;
        }
        origin = (rng.int(0, h - ch), rng.int(0, w - cw));
    }
    origin
}

pub(crate) fn pad_item(item: &mut Item, c: &cfg::PadIfNeeded) {
    let d = dims(item);
    let (mh, mw) = (c.min_height.unwrap_or(0), c.min_width.unwrap_or(0));
    let (ph, pw) = (mh.saturating_sub(d.h), mw.saturating_sub(d.w));
    if ph == 0 && pw == 0 {
        return;
    }
    // Centred, the odd pixel at the bottom/right (albumentations' `position = "center"`).
    let pads = [ph / 2, ph - ph / 2, pw / 2, pw - pw / 2];
    let b = border(c.border_mode);
    let data = map_samples!(&item.image.data, |v| geo::pad(
        v,
        d,
        pads,
        b,
        &fill_px(c.fill, d.c)
    ));
    item.set_image(d.h + ph, d.w + pw, data);
    let fm = [u8::from_f32(c.fill_mask.clamp(0.0, 255.0))];
    item.map_mask(|v, h, w| {
        (
            geo::pad(v, Dims { h, w, c: 1 }, pads, b, &fm),
            h + ph,
            w + pw,
        )
    });
}
