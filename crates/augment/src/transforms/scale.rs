//! Resizes of image and mask together (`Resize`, `RandomScale`): the image with its
//! interpolation, the mask with nearest neighbour.

use serde::{Deserialize, Serialize};

use super::options::{Interpolation, half, linear, one, tenth};
use super::{Transform, check};
use crate::AugmentError;
use crate::geometric::Dims;
use crate::limit::Limit;
use crate::pixel::Item;
use crate::resize;
use crate::rng::SampleRng;

/// `Resize`: `[H, W, C]` → `[height, width, C]`.
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

impl Transform for Resize {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::size(key, "height", self.height)?;
        check::size(key, "width", self.width)?;
        Ok(())
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        let (h, w) = (self.height.unwrap_or(1), self.width.unwrap_or(1));
        resize_item(item, h, w, self.interpolation);
        Ok(())
    }
}

/// `RandomScale`: resize by a random factor `s`, `[H, W, C]` → `[round(sH), round(sW), C]`.
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

impl Transform for RandomScale {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let s = self.scale_limit;
        check::within(key, "scale_limit", s, s.symmetric(), -0.999, 1e3)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (lo, hi) = self.scale_limit.symmetric();
        let s = 1.0 + rng.uniform(lo, hi);
        let oh = ((item.image.height as f32 * s).round() as usize).max(1);
        let ow = ((item.image.width as f32 * s).round() as usize).max(1);
        resize_item(item, oh, ow, self.interpolation);
        Ok(())
    }
}

/// Resize image with `i` and mask with nearest to `oh × ow`.
pub(super) fn resize_item(item: &mut Item, oh: usize, ow: usize, i: Interpolation) {
    let d = item.dims();
    if (d.h, d.w) == (oh, ow) {
        return;
    }
    let data = resize::resize_data(&item.image.data, d, oh, ow, i.interp());
    item.set_image(oh, ow, data);
    item.map_mask(|v, h, w| (resize::nearest(v, Dims { h, w, c: 1 }, oh, ow), oh, ow));
}
