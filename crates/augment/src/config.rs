//! The pipeline schema: what a TOML pipeline deserialises into.
//!
//! Every transform is a table with a `name` and its parameters; unknown names and unknown
//! parameters are errors that list the valid ones (serde's `deny_unknown_fields`). Defaults
//! follow albumentations 2.0.8 except where a `NOTE:` says otherwise.

use serde::{Deserialize, Serialize};

use crate::AugmentError;
use crate::limit::Limit;
pub use crate::photo_config::{
    ChannelDropout, GaussNoise, GaussianBlur, HueSaturationValue, Normalize,
    RandomBrightnessContrast, RandomGamma,
};

/// A whole pipeline: the transforms applied in order, each with its own probability `p`.
///
/// Embeddable in a larger config as a table (`[[augment.transforms]]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// The transforms, applied in order.
    #[serde(default)]
    pub transforms: Vec<TransformConfig>,
}

impl PipelineConfig {
    /// Parse a pipeline from TOML text (top-level `[[transforms]]` tables).
    ///
    /// # Errors
    /// [`AugmentError::Config`] naming the line, the unknown transform or parameter and the
    /// valid alternatives.
    pub fn from_toml_str(text: &str) -> Result<Self, AugmentError> {
        toml::from_str(text).map_err(|e| AugmentError::Config(e.to_string().trim_end().to_string()))
    }
}

/// One transform, selected by its albumentations name (`name = "HorizontalFlip"`).
///
/// Images are `[H, W, C]`, masks `[H, W]`; a transform keeps the shape unless its
/// documentation says otherwise, and the mask always gets the image's new `H × W`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name")]
pub enum TransformConfig {
    /// Mirror left-right (image and mask).
    HorizontalFlip(Prob),
    /// Mirror top-bottom (image and mask).
    VerticalFlip(Prob),
    /// Rotate by a random number (0–3) of counter-clockwise quarter turns, like `np.rot90`.
    /// `[H, W, C]` → `[W, H, C]` for odd turns.
    RandomRotate90(Prob),
    /// Swap rows and columns: `[H, W, C]` → `[W, H, C]`.
    Transpose(Prob),
    /// Rotate by a random angle about the centre, keeping the size.
    Rotate(Rotate),
    /// Random scale, translation, rotation and shear about the centre, keeping the size.
    Affine(Affine),
    /// albumentations' `ShiftScaleRotate`: an [`TransformConfig::Affine`] with symmetric limits.
    ShiftScaleRotate(ShiftScaleRotate),
    /// Resize by a random factor `s`: `[H, W, C]` → `[round(sH), round(sW), C]`.
    RandomScale(RandomScale),
    /// Crop a random area and aspect ratio, then resize: `[H, W, C]` → `[height, width, C]`.
    RandomResizedCrop(RandomResizedCrop),
    /// Crop a random window (optionally not dominated by one class): → `[height, width, C]`.
    /// An image smaller than the window is an error (put `PadIfNeeded` first).
    RandomCrop(RandomCrop),
    /// Crop the central window: `[H, W, C]` → `[height, width, C]`.
    CenterCrop(CenterCrop),
    /// Pad (centred) up to at least `min_height × min_width`:
    /// → `[max(H, min_height), max(W, min_width), C]`.
    PadIfNeeded(PadIfNeeded),
    /// Resize: `[H, W, C]` → `[height, width, C]`.
    Resize(Resize),
    /// Random brightness and contrast: `x * (1 + c) + b * max`.
    RandomBrightnessContrast(RandomBrightnessContrast),
    /// Random gamma: `max * (x / max) ^ (gamma / 100)`.
    RandomGamma(RandomGamma),
    /// Random hue, saturation and value shifts (3-band RGB images only).
    HueSaturationValue(HueSaturationValue),
    /// Additive Gaussian noise.
    GaussNoise(GaussNoise),
    /// Gaussian blur with a random odd kernel size.
    GaussianBlur(GaussianBlur),
    /// Set a random subset of bands to `fill`.
    ChannelDropout(ChannelDropout),
    /// `(x - mean * max_pixel_value) / (std * max_pixel_value)` per band; the image becomes f32.
    Normalize(Normalize),
    /// Apply the nested transforms in order (each with its own `p`).
    Compose(Group),
    /// Apply exactly one nested transform, chosen with probability proportional to its `p`.
    OneOf(Group),
    /// Apply `n` distinct nested transforms chosen uniformly, each then with its own `p`.
    SomeOf(SomeOf),
}

/// How pixels that come from outside the image are filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BorderMode {
    /// A constant: `fill` for the image, `fill_mask` (default 255, ignored) for the mask.
    Constant,
    /// Mirror without repeating the edge pixel (`gfedcb|abcdefgh|gfedcba`, OpenCV `BORDER_REFLECT_101`).
    #[serde(alias = "reflect_101")]
    Reflect101,
    /// Repeat the edge pixel (OpenCV `BORDER_REPLICATE`).
    Replicate,
}

/// Image interpolation (masks are always nearest-neighbour).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// Nearest neighbour (`cv2.INTER_NEAREST`).
    Nearest,
    /// Bilinear (`cv2.INTER_LINEAR`, OpenCV's fixed-point rounding on u8).
    #[serde(alias = "bilinear")]
    Linear,
    /// Pixel-area averaging when shrinking (`cv2.INTER_AREA`), linear when enlarging.
    Area,
}

pub(crate) fn half() -> f32 {
    0.5
}
pub(crate) fn one() -> f32 {
    1.0
}
fn fill_mask_default() -> f32 {
    255.0
}
fn linear() -> Interpolation {
    Interpolation::Linear
}

/// Parameters of a transform that has nothing but a probability.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prob {
    /// Probability of applying (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
}

/// `Rotate` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rotate {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Angle range in degrees, counter-clockwise; a number `x` means `[-x, x]` (default 90).
    #[serde(default = "rotate_limit")]
    pub limit: Limit,
    /// Image interpolation, `nearest` or `linear` (default).
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
    /// Border mode (default `constant`).
    #[serde(default = "constant")]
    pub border_mode: BorderMode,
    /// Image fill for `constant` borders, in sample units (default 0).
    #[serde(default)]
    pub fill: f32,
    /// Mask fill for `constant` borders (default 255, ignored).
    /// NOTE: albumentations defaults to 0; new pixels must not count as class 0 in the loss.
    #[serde(default = "fill_mask_default")]
    pub fill_mask: f32,
}
fn rotate_limit() -> Limit {
    Limit::Scalar(90.0)
}
fn constant() -> BorderMode {
    BorderMode::Constant
}

/// `Affine` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Affine {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Zoom factor range; a number means exactly that factor (default 1).
    #[serde(default = "unit")]
    pub scale: Limit,
    /// Shift as a fraction of width/height; a number `x` means `[-x, x]` (default 0). Like
    /// albumentations, the shift is truncated to whole pixels (`int(fraction * size)`).
    #[serde(default = "zero")]
    pub translate_percent: Limit,
    /// Rotation in degrees; a number `x` means `[-x, x]` (default 0).
    #[serde(default = "zero")]
    pub rotate: Limit,
    /// Shear in degrees (both axes); a number `x` means `[-x, x]` (default 0).
    #[serde(default = "zero")]
    pub shear: Limit,
    /// Image interpolation (default `linear`).
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
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
fn unit() -> Limit {
    Limit::Scalar(1.0)
}
pub(crate) fn zero() -> Limit {
    Limit::Scalar(0.0)
}

/// `ShiftScaleRotate` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShiftScaleRotate {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Shift as a fraction of the size, truncated to whole pixels; a number `x` means `[-x, x]`
    /// (default 0.0625).
    #[serde(default = "shift_limit")]
    pub shift_limit: Limit,
    /// Zoom minus one; a number `x` means a factor in `[1 - x, 1 + x]` (default 0.1).
    #[serde(default = "tenth")]
    pub scale_limit: Limit,
    /// Rotation in degrees; a number `x` means `[-x, x]` (default 45).
    #[serde(default = "rotate_limit_45")]
    pub rotate_limit: Limit,
    /// Image interpolation (default `linear`).
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
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
fn shift_limit() -> Limit {
    Limit::Scalar(0.0625)
}
fn tenth() -> Limit {
    Limit::Scalar(0.1)
}
fn rotate_limit_45() -> Limit {
    Limit::Scalar(45.0)
}

/// `RandomScale` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomScale {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Zoom minus one; a number `x` means a factor in `[1 - x, 1 + x]` (default 0.1).
    #[serde(default = "tenth")]
    pub scale_limit: Limit,
    /// Image interpolation (default `linear`).
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
}

/// `RandomResizedCrop` parameters (torchvision's algorithm).
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

/// `RandomCrop` parameters.
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

/// `CenterCrop` parameters.
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

/// `PadIfNeeded` parameters (padding is centred, the odd pixel going bottom/right).
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

/// `Resize` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// Output height (required).
    pub height: Option<usize>,
    /// Output width (required).
    pub width: Option<usize>,
    /// Image interpolation: `nearest`, `linear` (default) or `area`.
    #[serde(default = "linear")]
    pub interpolation: Interpolation,
}

/// `Compose` / `OneOf` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Probability (default 1 for `Compose`, and for `OneOf`).
    /// NOTE: albumentations' `OneOf` defaults to 0.5; a group that silently does nothing half
    /// the time is a surprise, so write `p` explicitly when you want that.
    #[serde(default = "one")]
    pub p: f32,
    /// The nested transforms.
    #[serde(default)]
    pub transforms: Vec<TransformConfig>,
}

/// `SomeOf` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SomeOf {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// How many distinct nested transforms to pick (required).
    pub n: Option<usize>,
    /// The nested transforms.
    #[serde(default)]
    pub transforms: Vec<TransformConfig>,
}
