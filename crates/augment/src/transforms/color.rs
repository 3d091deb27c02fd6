//! Colour transforms (image only; masks never change): brightness/contrast, gamma, HSV shifts
//! and normalisation, over the lookup-table kernels of `photometric`.

use raster::{RasterData, SampleKind};
use serde::{Deserialize, Serialize};

use super::options::{half, one, yes};
use super::{Transform, check};
use crate::AugmentError;
use crate::limit::Limit;
use crate::photometric::{self as photo, imagenet_mean, imagenet_std, per_band};
use crate::pixel::Item;
use crate::rng::SampleRng;

/// `RandomBrightnessContrast`: `x * (1 + c) + b * max`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomBrightnessContrast {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Brightness offset as a fraction of full scale; a number `x` means `[-x, x]` (default 0.2).
    #[serde(default = "fifth")]
    pub brightness_limit: Limit,
    /// Contrast gain minus one; a number `x` means a gain in `[1 - x, 1 + x]` (default 0.2).
    #[serde(default = "fifth")]
    pub contrast_limit: Limit,
    /// Brightness relative to full scale (default `true`) rather than to the image mean.
    #[serde(default = "yes")]
    pub brightness_by_max: bool,
}
fn fifth() -> Limit {
    Limit::Scalar(0.2)
}

impl Transform for RandomBrightnessContrast {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (b, c) = (self.brightness_limit, self.contrast_limit);
        check::within(key, "brightness_limit", b, b.symmetric(), -1.0, 1.0)?;
        check::within(key, "contrast_limit", c, c.symmetric(), -1.0, 10.0)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (b0, b1) = self.brightness_limit.symmetric();
        let (c0, c1) = self.contrast_limit.symmetric();
        let alpha = 1.0 + rng.uniform(c0, c1);
        let beta = rng.uniform(b0, b1);
        let max = item.image.kind().max_value();
        // `beta * mean` in f64 as albumentations has it, rounded to f32 where its table is.
        let shift = if self.brightness_by_max {
            beta * max
        } else {
            (beta as f64 * photo::mean(&item.image.data)) as f32
        };
        // albumentations truncates integer results (`clip(...).astype(uint8)`); so do we.
        let truncate = item.image.kind() != SampleKind::F32;
        photo::map_values(&mut item.image.data, item.image.bands, |_, x| {
            let v = x * alpha + shift;
            if truncate { v.floor() } else { v }
        });
        Ok(())
    }
}

/// `RandomGamma`: `max * (x / max) ^ (gamma / 100)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomGamma {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Gamma × 100; a number `x` means `[100 - x, 100 + x]` (default `[80, 120]`).
    #[serde(default = "gamma_limit")]
    pub gamma_limit: Limit,
}
fn gamma_limit() -> Limit {
    Limit::Range(80.0, 120.0)
}

impl RandomGamma {
    /// `gamma_limit` as a `[lo, hi]` range of gamma × 100.
    fn range(&self) -> (f32, f32) {
        match self.gamma_limit {
            Limit::Scalar(x) => (100.0 - x.abs(), 100.0 + x.abs()),
            Limit::Range(a, b) => (a, b),
        }
    }
}

impl Transform for RandomGamma {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::within(key, "gamma_limit", self.gamma_limit, self.range(), 1.0, 1e4)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (lo, hi) = self.range();
        let g = rng.uniform(lo, hi) as f64 / 100.0;
        let max = item.image.kind().max_value() as f64;
        // albumentations' u8 table, `(arange(0, 256 / 255, 1 / 255) ** gamma) * 255` in f64 and
        // truncated: `x * (1 / 255)`, not `x / 255`, and f64 throughout, or gamma 1 would not
        // map 33 to 32 as it does there. Integer images truncate alike; f32 ones do not.
        let truncate = item.image.kind() != SampleKind::F32;
        photo::map_values(&mut item.image.data, item.image.bands, |_, x| {
            let v = (x.max(0.0) as f64 * (1.0 / max)).powf(g) * max;
            (if truncate { v.floor() } else { v }) as f32
        });
        Ok(())
    }
}

/// `HueSaturationValue`: random hue, saturation and value shifts (3-band RGB images only), in
/// OpenCV's 8-bit HSV units for every sample type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HueSaturationValue {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Hue shift in units of 2° (OpenCV's 0–180 hue); a number `x` means `[-x, x]` (default 20).
    #[serde(default = "twenty")]
    pub hue_shift_limit: Limit,
    /// Saturation shift in 1/255 of full scale; a number `x` means `[-x, x]` (default 30).
    #[serde(default = "thirty")]
    pub sat_shift_limit: Limit,
    /// Value shift in 1/255 of full scale; a number `x` means `[-x, x]` (default 20).
    #[serde(default = "twenty")]
    pub val_shift_limit: Limit,
}
fn twenty() -> Limit {
    Limit::Scalar(20.0)
}
fn thirty() -> Limit {
    Limit::Scalar(30.0)
}

impl Transform for HueSaturationValue {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (h, s, v) = (
            self.hue_shift_limit,
            self.sat_shift_limit,
            self.val_shift_limit,
        );
        check::ordered(key, "hue_shift_limit", h, h.symmetric())?;
        check::within(key, "sat_shift_limit", s, s.symmetric(), -255.0, 255.0)?;
        check::within(key, "val_shift_limit", v, v.symmetric(), -255.0, 255.0)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        if item.image.bands != 3 {
            return Err(AugmentError::Unsupported {
                transform: "HueSaturationValue",
                reason: format!(
                    "needs a 3-band RGB image, got {} bands; drop it from the pipeline for multispectral data or use RandomBrightnessContrast/RandomGamma",
                    item.image.bands
                ),
            });
        }
        let (h0, h1) = self.hue_shift_limit.symmetric();
        let (s0, s1) = self.sat_shift_limit.symmetric();
        let (v0, v1) = self.val_shift_limit.symmetric();
        let (hue, sat, val) = (
            rng.uniform(h0, h1),
            rng.uniform(s0, s1),
            rng.uniform(v0, v1),
        );
        crate::hsv::hsv_shift(&mut item.image.data, item.image.width, hue, sat, val);
        Ok(())
    }
}

/// `Normalize`: `(x - mean * max_pixel_value) / (std * max_pixel_value)` per band; the image
/// becomes f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Per-band means in `[0, 1]` units (one value, or one per band; default ImageNet RGB).
    #[serde(default = "imagenet_mean")]
    pub mean: Vec<f32>,
    /// Per-band standard deviations (one value, or one per band; default ImageNet RGB).
    #[serde(default = "imagenet_std")]
    pub std: Vec<f32>,
    /// The sample value that means 1.0.
    /// NOTE: albumentations defaults to 255; we default to the sample type's maximum
    /// (255 for u8, 65535 for u16, 1 for f32) so 16-bit imagery works unchanged.
    #[serde(default)]
    pub max_pixel_value: Option<f32>,
}

impl Transform for Normalize {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        if self.mean.is_empty() || self.mean.len() != self.std.len() {
            return Err(check::bad(
                key,
                "mean",
                format!("{:?}", self.mean),
                format!(
                    "needs as many values as `std` ({}), one per band or a single value",
                    self.std.len()
                ),
            ));
        }
        if let Some(s) = self.std.iter().find(|s| !s.is_finite() || **s <= 0.0) {
            return Err(check::bad(
                key,
                "std",
                s,
                "standard deviations must be positive",
            ));
        }
        if let Some(m) = self.max_pixel_value.filter(|m| m.is_nan() || *m <= 0.0) {
            return Err(check::bad(key, "max_pixel_value", m, "must be positive"));
        }
        Ok(())
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        let bands = item.image.bands;
        let (mean, std) = per_band("Normalize", &self.mean, &self.std, bands)?;
        let max = self
            .max_pixel_value
            .unwrap_or_else(|| item.image.kind().max_value());
        item.image.data = RasterData::F32(photo::normalize(&item.image.data, &mean, &std, max));
        Ok(())
    }
}
