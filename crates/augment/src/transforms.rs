//! What each configured transform does to an [`Item`]. Parameters were validated by
//! `validate`, so only input-dependent problems (band counts, sizes) are reported here.

use raster::RasterData;

use crate::AugmentError;
use crate::config::{self as cfg, TransformConfig as T};
use crate::photometric as photo;
use crate::pixel::Item;
use crate::rng::SampleRng;
use crate::spatial::{
    Perm, crop_item, dims, fits, pad_item, permute, random_crop_origin, resize_item,
    resized_crop_window, warp_item,
};
use crate::validate::{blur_range, gamma_range};
use crate::warp::Affine;

impl T {
    /// The transform's probability of being applied.
    pub(crate) fn p(&self) -> f32 {
        match self {
            T::HorizontalFlip(c) | T::VerticalFlip(c) | T::RandomRotate90(c) | T::Transpose(c) => {
                c.p
            }
            T::Rotate(c) => c.p,
            T::Affine(c) => c.p,
            T::ShiftScaleRotate(c) => c.p,
            T::RandomScale(c) => c.p,
            T::RandomResizedCrop(c) => c.p,
            T::RandomCrop(c) => c.p,
            T::CenterCrop(c) => c.p,
            T::PadIfNeeded(c) => c.p,
            T::Resize(c) => c.p,
            T::RandomBrightnessContrast(c) => c.p,
            T::RandomGamma(c) => c.p,
            T::HueSaturationValue(c) => c.p,
            T::GaussNoise(c) => c.p,
            T::GaussianBlur(c) => c.p,
            T::ChannelDropout(c) => c.p,
            T::Normalize(c) => c.p,
            T::Compose(c) | T::OneOf(c) => c.p,
            T::SomeOf(c) => c.p,
        }
    }

    /// Roll for `p`, then apply.
    pub(crate) fn maybe_apply(
        &self,
        item: &mut Item,
        rng: &mut SampleRng,
    ) -> Result<(), AugmentError> {
        if rng.chance(self.p()) {
            self.apply(item, rng)
        } else {
            Ok(())
        }
    }

    /// Apply unconditionally (the `p` roll has been made).
    pub(crate) fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        match self {
            T::HorizontalFlip(_) => permute(item, Perm::HFlip),
            T::VerticalFlip(_) => permute(item, Perm::VFlip),
            T::Transpose(_) => permute(item, Perm::Transpose),
            T::RandomRotate90(_) => {
                let k = rng.int(0, 3) as u8;
                permute(item, Perm::Rot90(k));
            }
            T::Rotate(c) => {
                let (lo, hi) = c.limit.symmetric();
                let angle = rng.uniform(lo, hi) as f64;
                let (h, w) = (item.image.height as f64, item.image.width as f64);
                let m = Affine::about_center(
                    ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
                    angle,
                    1.0,
                    (0.0, 0.0),
                    (0.0, 0.0),
                );
                warp_item(
                    item,
                    &m,
                    c.interpolation,
                    c.border_mode,
                    c.fill,
                    c.fill_mask,
                );
            }
            T::Affine(c) => {
                let (s0, s1) = c.scale.fixed();
                let (t0, t1) = c.translate_percent.symmetric();
                let (r0, r1) = c.rotate.symmetric();
                let (h0, h1) = c.shear.symmetric();
                let scale = rng.uniform(s0, s1) as f64;
                let (tx, ty) = (rng.uniform(t0, t1) as f64, rng.uniform(t0, t1) as f64);
                let angle = rng.uniform(r0, r1) as f64;
                let shear = (rng.uniform(h0, h1) as f64, rng.uniform(h0, h1) as f64);
                let (h, w) = (item.image.height as f64, item.image.width as f64);
                let m = Affine::about_center(
                    ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
                    angle,
                    scale,
                    shear,
                    shift_px(tx, ty, w, h),
                );
                warp_item(
                    item,
                    &m,
                    c.interpolation,
                    c.border_mode,
                    c.fill,
                    c.fill_mask,
                );
            }
            T::ShiftScaleRotate(c) => {
                let (t0, t1) = c.shift_limit.symmetric();
                let (s0, s1) = c.scale_limit.symmetric();
                let (r0, r1) = c.rotate_limit.symmetric();
                let angle = rng.uniform(r0, r1) as f64;
                let scale = 1.0 + rng.uniform(s0, s1) as f64;
                let (tx, ty) = (rng.uniform(t0, t1) as f64, rng.uniform(t0, t1) as f64);
                let (h, w) = (item.image.height as f64, item.image.width as f64);
                let m = Affine::about_center(
                    ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
                    angle,
                    scale,
                    (0.0, 0.0),
                    shift_px(tx, ty, w, h),
                );
                warp_item(
                    item,
                    &m,
                    c.interpolation,
                    c.border_mode,
                    c.fill,
                    c.fill_mask,
                );
            }
            T::RandomScale(c) => {
                let (lo, hi) = c.scale_limit.symmetric();
                let s = 1.0 + rng.uniform(lo, hi);
                let oh = ((item.image.height as f32 * s).round() as usize).max(1);
                let ow = ((item.image.width as f32 * s).round() as usize).max(1);
                resize_item(item, oh, ow, c.interpolation);
            }
            T::RandomResizedCrop(c) => {
                let (y0, x0, ch, cw) =
                    resized_crop_window(item.image.height, item.image.width, c, rng);
                crop_item(item, y0, x0, ch, cw);
                resize_item(
                    item,
                    c.height.unwrap_or(1),
                    c.width.unwrap_or(1),
                    c.interpolation,
                );
            }
            T::RandomCrop(c) => {
                let (ch, cw) = (c.height.unwrap_or(1), c.width.unwrap_or(1));
                fits("RandomCrop", item, ch, cw)?;
                let (y0, x0) = random_crop_origin(item, ch, cw, c, rng);
                crop_item(item, y0, x0, ch, cw);
            }
            T::CenterCrop(c) => {
                let (ch, cw) = (c.height.unwrap_or(1), c.width.unwrap_or(1));
                fits("CenterCrop", item, ch, cw)?;
                let (y0, x0) = ((item.image.height - ch) / 2, (item.image.width - cw) / 2);
                crop_item(item, y0, x0, ch, cw);
            }
            T::PadIfNeeded(c) => pad_item(item, c),
            T::Resize(c) => resize_item(
                item,
                c.height.unwrap_or(1),
                c.width.unwrap_or(1),
                c.interpolation,
            ),
            T::RandomBrightnessContrast(c) => {
                let (b0, b1) = c.brightness_limit.symmetric();
                let (c0, c1) = c.contrast_limit.symmetric();
                let alpha = 1.0 + rng.uniform(c0, c1);
                let beta = rng.uniform(b0, b1);
                let max = item.image.kind().max_value();
                let shift = if c.brightness_by_max {
                    beta * max
                } else {
                    beta * photo::mean(&item.image.data)
                };
                // albumentations truncates integer results (`clip(...).astype(uint8)`); so do we.
                let truncate = item.image.kind() != raster::SampleKind::F32;
                photo::map_values(&mut item.image.data, item.image.bands, |_, x| {
                    let v = x * alpha + shift;
                    if truncate { v.floor() } else { v }
                });
            }
            T::RandomGamma(c) => {
                let (lo, hi) = gamma_range(c.gamma_limit);
                let g = rng.uniform(lo, hi) / 100.0;
                let max = item.image.kind().max_value();
                // Truncated on integer images, as albumentations' lookup table is.
                let truncate = item.image.kind() != raster::SampleKind::F32;
                photo::map_values(&mut item.image.data, item.image.bands, |_, x| {
                    let v = max * (x.max(0.0) / max).powf(g);
                    if truncate { v.floor() } else { v }
                });
            }
            T::HueSaturationValue(c) => {
                if item.image.bands != 3 {
                    return Err(AugmentError::Unsupported {
                        transform: "HueSaturationValue",
                        reason: format!(
                            "needs a 3-band RGB image, got {} bands; drop it from the pipeline for multispectral data or use RandomBrightnessContrast/RandomGamma",
                            item.image.bands
                        ),
                    });
                }
                let (h0, h1) = c.hue_shift_limit.symmetric();
                let (s0, s1) = c.sat_shift_limit.symmetric();
                let (v0, v1) = c.val_shift_limit.symmetric();
                let (hue, sat, val) = (
                    rng.uniform(h0, h1) * 2.0,
                    rng.uniform(s0, s1) / 255.0,
                    rng.uniform(v0, v1) / 255.0,
                );
                photo::hsv_shift(&mut item.image.data, hue, sat, val);
            }
            T::GaussNoise(c) => {
                let max = item.image.kind().max_value();
                let (s0, s1) = c.std_range.fixed();
                let (m0, m1) = c.mean_range.symmetric();
                let (std, mean) = (rng.uniform(s0, s1) * max, rng.uniform(m0, m1) * max);
                photo::gauss_noise(
                    &mut item.image.data,
                    item.image.bands,
                    mean,
                    std,
                    c.per_channel,
                    rng,
                );
            }
            T::GaussianBlur(c) => {
                let (lo, hi) = blur_range(c.blur_limit);
                // Odd sizes in [lo, hi]; validation guarantees at least one.
                let first = (lo as usize) | 1;
                let n_odd = (hi as usize).saturating_sub(first) / 2 + 1;
                let k = first + 2 * rng.int(0, n_odd - 1);
                let (s0, s1) = c.sigma_limit.fixed();
                let sigma = rng.uniform(s0, s1);
                let sigma = if sigma > 0.0 {
                    sigma
                } else {
                    photo::default_sigma(k)
                };
                let d = dims(item);
                item.image.data = photo::gaussian_blur(&item.image.data, d, k, sigma);
            }
            T::ChannelDropout(c) => {
                let bands = item.image.bands;
                let (lo, hi) = c.channel_drop_range;
                if hi >= bands {
                    return Err(AugmentError::Unsupported {
                        transform: "ChannelDropout",
                        reason: format!(
                            "channel_drop_range = [{lo}, {hi}] could drop every band of a {bands}-band image; keep hi below {bands}"
                        ),
                    });
                }
                let n = rng.int(lo, hi);
                let drop = rng.choose(bands, n);
                photo::drop_bands(&mut item.image.data, bands, &drop, c.fill);
            }
            T::Normalize(c) => normalize_item(item, c)?,
            T::Compose(g) => {
                for t in &g.transforms {
                    t.maybe_apply(item, rng)?;
                }
            }
            T::OneOf(g) => {
                // Weighted by the children's p, as albumentations does; the chosen one is forced.
                let total: f32 = g.transforms.iter().map(|t| t.p()).sum();
                let mut r = rng.uniform(0.0, total);
                let pick = g.transforms.iter().find(|t| {
                    r -= t.p();
                    r <= 0.0 && t.p() > 0.0
                });
                if let Some(t) = pick.or_else(|| g.transforms.iter().rev().find(|t| t.p() > 0.0)) {
                    t.apply(item, rng)?;
                }
            }
            T::SomeOf(s) => {
                let mut chosen = rng.choose(s.transforms.len(), s.n.unwrap_or(0));
                // Keep the written order, like albumentations.
                chosen.sort_unstable();
                for i in chosen {
                    s.transforms[i].maybe_apply(item, rng)?;
                }
            }
        }
        Ok(())
    }
}

fn normalize_item(item: &mut Item, c: &cfg::Normalize) -> Result<(), AugmentError> {
    let bands = item.image.bands;
    let (mean, std) = per_band("Normalize", &c.mean, &c.std, bands)?;
    let max = c
        .max_pixel_value
        .unwrap_or_else(|| item.image.kind().max_value());
    item.image.data = RasterData::F32(photo::normalize(&item.image.data, &mean, &std, max));
    Ok(())
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

/// A shift given as fractions of the size, in whole pixels: albumentations converts
/// `translate_percent` with Python's `int()` (truncation toward zero) before warping. The
/// fractions arrive as f32, so allow for their representation error before truncating
/// (0.05 × 50 must give 2, not 2.0000001 → 2, and 0.7 × 10 must give 7, not 6.9999998 → 6).
fn shift_px(tx: f64, ty: f64, w: f64, h: f64) -> (f64, f64) {
    let int = |v: f64| v.signum() * (v.abs() + 1e-3).floor();
    (int(tx * w), int(ty * h))
}
