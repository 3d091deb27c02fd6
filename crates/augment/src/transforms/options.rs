//! What several transforms share: how new pixels are filled, how images are resampled, and the
//! defaults of their parameters.

use serde::{Deserialize, Serialize};

use crate::geometric::Border;
use crate::limit::Limit;
use crate::resize::Interp;

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

impl BorderMode {
    /// The kernels' border rule.
    pub(crate) fn border(self) -> Border {
        match self {
            BorderMode::Constant => Border::Constant,
            BorderMode::Reflect101 => Border::Reflect101,
            BorderMode::Replicate => Border::Replicate,
        }
    }
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

impl Interpolation {
    /// The resize kernels' interpolation.
    pub(crate) fn interp(self) -> Interp {
        match self {
            Interpolation::Nearest => Interp::Nearest,
            Interpolation::Linear => Interp::Linear,
            Interpolation::Area => Interp::Area,
        }
    }
}

/// How the warping transforms ([`Rotate`](super::Rotate), [`Affine`](super::Affine),
/// [`ShiftScaleRotate`](super::ShiftScaleRotate)) resample the image and fill the pixels
/// that come from outside it.
///
/// The keys are written in the transform's own table (`border_mode = "reflect101"`), not in a
/// sub-table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarpOptions {
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

// Defaults shared by the parameter structs (serde wants functions).
pub(crate) fn half() -> f32 {
    0.5
}
pub(crate) fn one() -> f32 {
    1.0
}
pub(crate) fn zero() -> Limit {
    Limit::Scalar(0.0)
}
pub(crate) fn tenth() -> Limit {
    Limit::Scalar(0.1)
}
pub(crate) fn yes() -> bool {
    true
}
pub(crate) fn linear() -> Interpolation {
    Interpolation::Linear
}
pub(crate) fn constant() -> BorderMode {
    BorderMode::Constant
}
pub(crate) fn fill_mask_default() -> f32 {
    255.0
}
