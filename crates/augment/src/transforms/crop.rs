//! Windows of image and mask together: crops (`RandomResizedCrop`, `RandomCrop`,
//! `CenterCrop`) and centred padding (`PadIfNeeded`).

use serde::{Deserialize, Serialize};

use super::options::{BorderMode, Interpolation, constant, fill_mask_default, linear, one};
use super::scale::resize_item;
use super::{Transform, check};
use crate::AugmentError;
use crate::geometric::{self as geo, Dims};
use crate::limit::Limit;
use crate::pixel::{Item, Pixel, fill_px, map_samples};
use crate::rng::SampleRng;

/// `RandomResizedCrop` (torchvision's algorithm): crop a random area and aspect ratio, then
/// resize, `[H, W, C]` → `[height, width, C]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomResizedCrop {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Output height (required).
    pub height: Option<usize>,
    /// Output width (required).
    pub width: Option<usize>,
    /// Crop area as a fraction of the image area (default `[0.08, 1]`).
    #[serde(default = "rrc_scale")]
    pub scale: Limit,
    /// Crop aspect ratio w/h, drawn log-uniformly (default `[0.75, 1.3333]`).
    #[serde(default = "rrc_ratio")]
    pub ratio: Limit,
    /// Image interpolation (default `linear`).
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
}
fn rrc_scale() -> Limit {
    Limit::Range(0.08, 1.0)
}
fn rrc_ratio() -> Limit {
    Limit::Range(0.75, 4.0 / 3.0)
}

impl Transform for RandomResizedCrop {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::size(key, "height", self.height)?;
        check::size(key, "width", self.width)?;
        check::within(key, "scale", self.scale, self.scale.fixed(), 1e-6, 1.0)?;
        check::within(key, "ratio", self.ratio, self.ratio.fixed(), 1e-3, 1e3)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (y0, x0, ch, cw) = self.window(item.image.height, item.image.width, rng);
        crop_item(item, y0, x0, ch, cw);
        let (h, w) = (self.height.unwrap_or(1), self.width.unwrap_or(1));
        resize_item(item, h, w, self.interpolation);
        Ok(())
    }
}

impl RandomResizedCrop {
    /// torchvision's `RandomResizedCrop.get_params`: ten tries at a random area and log-uniform
    /// aspect ratio, then a centre crop clamped to the ratio range. Returns `(y0, x0, h, w)`.
    fn window(&self, h: usize, w: usize, rng: &mut SampleRng) -> (usize, usize, usize, usize) {
        let area = (h * w) as f32;
        let (s0, s1) = self.scale.fixed();
        let (r0, r1) = self.ratio.fixed();
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
}

/// `RandomCrop`: crop a random window (optionally not dominated by one class),
/// `[H, W, C]` → `[height, width, C]`. An image smaller than the window is an error (put
/// `PadIfNeeded` first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomCrop {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Crop height (required).
    pub height: Option<usize>,
    /// Crop width (required).
    pub width: Option<usize>,
    /// mmseg's `cat_max_ratio`: retry (up to 10 times) while one class covers more than this
    /// fraction of the crop's labelled pixels; 1 disables (default).
    #[serde(default = "one")]
    pub cat_max_ratio: f32,
    /// Mask value left out of the class counts (default 255).
    #[serde(default = "ignore_default")]
    pub ignore_index: u8,
}
fn ignore_default() -> u8 {
    255
}

impl Transform for RandomCrop {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::size(key, "height", self.height)?;
        check::size(key, "width", self.width)?;
        let r = self.cat_max_ratio;
        if r.is_nan() || r <= 0.0 || r > 1.0 {
            return Err(check::bad(
                key,
                "cat_max_ratio",
                r,
                "must lie in (0, 1]; 1 disables the check",
            ));
        }
        Ok(())
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (ch, cw) = (self.height.unwrap_or(1), self.width.unwrap_or(1));
        fits("RandomCrop", item, ch, cw)?;
        let (y0, x0) = self.origin(item, ch, cw, rng);
        crop_item(item, y0, x0, ch, cw);
        Ok(())
    }
}

impl RandomCrop {
    /// mmseg's `RandomCrop` with `cat_max_ratio`: up to 10 tries for a window in which no class
    /// covers more than that fraction of the labelled (non-ignore) pixels.
    fn origin(&self, item: &Item, ch: usize, cw: usize, rng: &mut SampleRng) -> (usize, usize) {
        let (h, w) = (item.image.height, item.image.width);
        let mut origin = (rng.int(0, h - ch), rng.int(0, w - cw));
        let Some(mask) = item.mask.as_ref().filter(|_| self.cat_max_ratio < 1.0) else {
            return origin;
        };
        for _ in 1..10 {
            let mut counts = [0u32; 256];
            for y in origin.0..origin.0 + ch {
                for &v in &mask.data[y * w + origin.1..y * w + origin.1 + cw] {
                    counts[v as usize] += 1;
                }
            }
            counts[self.ignore_index as usize] = 0;
            let total: u32 = counts.iter().sum();
            let classes = counts.iter().filter(|&&n| n > 0).count();
            let max = counts.iter().copied().max().unwrap_or(0);
            if classes > 1 && (max as f32) < self.cat_max_ratio * total as f32 {
                break;
            }
            origin = (rng.int(0, h - ch), rng.int(0, w - cw));
        }
        origin
    }
}

/// `CenterCrop`: crop the central window, `[H, W, C]` → `[height, width, C]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CenterCrop {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Crop height (required).
    pub height: Option<usize>,
    /// Crop width (required).
    pub width: Option<usize>,
}

impl Transform for CenterCrop {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::size(key, "height", self.height)?;
        check::size(key, "width", self.width)?;
        Ok(())
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        let (ch, cw) = (self.height.unwrap_or(1), self.width.unwrap_or(1));
        fits("CenterCrop", item, ch, cw)?;
        let (y0, x0) = ((item.image.height - ch) / 2, (item.image.width - cw) / 2);
        crop_item(item, y0, x0, ch, cw);
        Ok(())
    }
}

/// `PadIfNeeded`: pad (centred, the odd pixel going bottom/right) up to at least
/// `min_height × min_width`, → `[max(H, min_height), max(W, min_width), C]`.
///
/// The border keys mean what they mean in [`WarpOptions`](super::WarpOptions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PadIfNeeded {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Minimum output height (required).
    pub min_height: Option<usize>,
    /// Minimum output width (required).
    pub min_width: Option<usize>,
    /// Border mode (default `constant`).
    #[serde(default = "constant")]
    pub border_mode: BorderMode,
    /// Image fill for `constant` borders (default 0).
    #[serde(default)]
    pub fill: f32,
    /// Mask fill for `constant` borders (default 255).
    #[serde(default = "fill_mask_default")]
    pub fill_mask: f32,
}

impl Transform for PadIfNeeded {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::size(key, "min_height", self.min_height)?;
        check::size(key, "min_width", self.min_width)?;
        Ok(())
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        let d = item.dims();
        let (mh, mw) = (self.min_height.unwrap_or(0), self.min_width.unwrap_or(0));
        let (ph, pw) = (mh.saturating_sub(d.h), mw.saturating_sub(d.w));
        if ph == 0 && pw == 0 {
            return Ok(());
        }
        // Centred, the odd pixel at the bottom/right (albumentations' `position = "center"`).
        let pads = [ph / 2, ph - ph / 2, pw / 2, pw - pw / 2];
        let b = self.border_mode.border();
        let data = map_samples!(&item.image.data, |v| geo::pad(
            v,
            d,
            pads,
            b,
            &fill_px(self.fill, d.c)
        ));
        item.set_image(d.h + ph, d.w + pw, data);
        let fm = [u8::from_f32(self.fill_mask.clamp(0.0, 255.0))];
        item.map_mask(|v, h, w| {
            (
                geo::pad(v, Dims { h, w, c: 1 }, pads, b, &fm),
                h + ph,
                w + pw,
            )
        });
        Ok(())
    }
}

fn crop_item(item: &mut Item, y0: usize, x0: usize, ch: usize, cw: usize) {
    let d = item.dims();
    let data = map_samples!(&item.image.data, |v| geo::crop(v, d, y0, x0, ch, cw));
    item.set_image(ch, cw, data);
    item.map_mask(|v, h, w| (geo::crop(v, Dims { h, w, c: 1 }, y0, x0, ch, cw), ch, cw));
}

/// A crop of `ch × cw` must fit in the image.
fn fits(transform: &'static str, item: &Item, ch: usize, cw: usize) -> Result<(), AugmentError> {
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
