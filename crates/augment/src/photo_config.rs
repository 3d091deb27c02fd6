//! Parameters of the photometric transforms (image only), part of the pipeline schema.

use serde::{Deserialize, Serialize};

use crate::config::{half, one, zero};
use crate::limit::Limit;

/// `RandomBrightnessContrast` parameters.
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
fn yes() -> bool {
    true
}

/// `RandomGamma` parameters.
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

/// `HueSaturationValue` parameters, in OpenCV's 8-bit HSV units for every sample type.
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

/// `GaussNoise` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussNoise {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Standard deviation as a fraction of full scale (default `[0.2, 0.44]`).
    #[serde(default = "std_range")]
    pub std_range: Limit,
    /// Mean as a fraction of full scale (default 0).
    #[serde(default = "zero")]
    pub mean_range: Limit,
    /// Independent noise per band (default `true`) or one draw per pixel.
    #[serde(default = "yes")]
    pub per_channel: bool,
}
fn std_range() -> Limit {
    Limit::Range(0.2, 0.44)
}

/// `GaussianBlur` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianBlur {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Kernel size range (odd sizes are drawn); a number `k` means `[3, k]` (default `[3, 7]`).
    #[serde(default = "blur_limit")]
    pub blur_limit: Limit,
    /// Sigma range; 0 means OpenCV's sigma for the kernel size (default 0).
    #[serde(default = "zero")]
    pub sigma_limit: Limit,
}
fn blur_limit() -> Limit {
    Limit::Range(3.0, 7.0)
}

/// `ChannelDropout` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelDropout {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// How many bands to drop (default `[1, 1]`); must stay below the band count.
    #[serde(default = "drop_range")]
    pub channel_drop_range: (usize, usize),
    /// Value written into dropped bands, in sample units (default 0).
    #[serde(default)]
    pub fill: f32,
}
fn drop_range() -> (usize, usize) {
    (1, 1)
}

/// `Normalize` parameters.
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
/// ImageNet RGB means, HF's `IMAGENET_DEFAULT_MEAN`.
pub(crate) fn imagenet_mean() -> Vec<f32> {
    vec![0.485, 0.456, 0.406]
}
/// ImageNet RGB standard deviations, HF's `IMAGENET_DEFAULT_STD`.
pub(crate) fn imagenet_std() -> Vec<f32> {
    vec![0.229, 0.224, 0.225]
}
