//! Affine warps of image and mask together (`Rotate`, `Affine`, `ShiftScaleRotate`), each a
//! random matrix about the centre handed to the `cv2.warpAffine` equivalent in `warp`.

use serde::{Deserialize, Serialize};

use super::options::{WarpOptions, half, tenth, zero};
use super::{Transform, check};
use crate::AugmentError;
use crate::geometric::Dims;
use crate::limit::Limit;
use crate::pixel::{Item, Pixel, fill_px, map_samples};
use crate::rng::SampleRng;
use crate::warp;

/// `Rotate`: rotate by a random angle about the centre, keeping the size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rotate {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Angle range in degrees, counter-clockwise; a number `x` means `[-x, x]` (default 90).
    #[serde(default = "rotate_limit")]
    pub limit: Limit,
    /// Interpolation and borders.
    #[serde(flatten)]
    pub warp: WarpOptions,
}
fn rotate_limit() -> Limit {
    Limit::Scalar(90.0)
}

impl Transform for Rotate {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::ordered(key, "limit", self.limit, self.limit.symmetric())
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (lo, hi) = self.limit.symmetric();
        let angle = rng.uniform(lo, hi) as f64;
        let (h, w) = (item.image.height as f64, item.image.width as f64);
        let m = warp::Affine::about_center(
            ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
            angle,
            1.0,
            (0.0, 0.0),
            (0.0, 0.0),
        );
        warp_item(item, &m, &self.warp);
        Ok(())
    }
}

/// `Affine`: random scale, translation, rotation and shear about the centre, keeping the size.
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
    /// Interpolation and borders.
    #[serde(flatten)]
    pub warp: WarpOptions,
}
fn unit() -> Limit {
    Limit::Scalar(1.0)
}

impl Transform for Affine {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let t = self.translate_percent;
        check::within(key, "scale", self.scale, self.scale.fixed(), 1e-3, 1e3)?;
        check::within(key, "translate_percent", t, t.symmetric(), -1.0, 1.0)?;
        check::ordered(key, "rotate", self.rotate, self.rotate.symmetric())?;
        check::within(
            key,
            "shear",
            self.shear,
            self.shear.symmetric(),
            -80.0,
            80.0,
        )
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (s0, s1) = self.scale.fixed();
        let (t0, t1) = self.translate_percent.symmetric();
        let (r0, r1) = self.rotate.symmetric();
        let (h0, h1) = self.shear.symmetric();
        let scale = rng.uniform(s0, s1) as f64;
        let (tx, ty) = (rng.uniform(t0, t1) as f64, rng.uniform(t0, t1) as f64);
        let angle = rng.uniform(r0, r1) as f64;
        let shear = (rng.uniform(h0, h1) as f64, rng.uniform(h0, h1) as f64);
        let (h, w) = (item.image.height as f64, item.image.width as f64);
        let m = warp::Affine::about_center(
            ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
            angle,
            scale,
            shear,
            shift_px(tx, ty, w, h),
        );
        warp_item(item, &m, &self.warp);
        Ok(())
    }
}

/// `ShiftScaleRotate`: albumentations' [`Affine`] with symmetric limits.
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
    /// Interpolation and borders.
    #[serde(flatten)]
    pub warp: WarpOptions,
}
fn shift_limit() -> Limit {
    Limit::Scalar(0.0625)
}
fn rotate_limit_45() -> Limit {
    Limit::Scalar(45.0)
}

impl Transform for ShiftScaleRotate {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (t, s, r) = (self.shift_limit, self.scale_limit, self.rotate_limit);
        check::within(key, "shift_limit", t, t.symmetric(), -1.0, 1.0)?;
        check::within(key, "scale_limit", s, s.symmetric(), -0.999, 1e3)?;
        check::ordered(key, "rotate_limit", r, r.symmetric())
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (t0, t1) = self.shift_limit.symmetric();
        let (s0, s1) = self.scale_limit.symmetric();
        let (r0, r1) = self.rotate_limit.symmetric();
        let angle = rng.uniform(r0, r1) as f64;
        let scale = 1.0 + rng.uniform(s0, s1) as f64;
        let (tx, ty) = (rng.uniform(t0, t1) as f64, rng.uniform(t0, t1) as f64);
        let (h, w) = (item.image.height as f64, item.image.width as f64);
        let m = warp::Affine::about_center(
            ((w - 1.0) / 2.0, (h - 1.0) / 2.0),
            angle,
            scale,
            (0.0, 0.0),
            shift_px(tx, ty, w, h),
        );
        warp_item(item, &m, &self.warp);
        Ok(())
    }
}

/// A shift given as fractions of the size, in whole pixels: albumentations converts
/// `translate_percent` with Python's `int()` (truncation toward zero) before warping. The
/// fractions arrive as f32, so allow for their representation error before truncating
/// (0.05 × 50 must give 2, not 2.0000001 → 2, and 0.7 × 10 must give 7, not 6.9999998 → 6).
fn shift_px(tx: f64, ty: f64, w: f64, h: f64) -> (f64, f64) {
    let int = |v: f64| v.signum() * (v.abs() + 1e-3).floor();
    (int(tx * w), int(ty * h))
}

/// Warp image (bilinear or nearest) and mask (nearest, `fill_mask` outside) by forward map `m`.
fn warp_item(item: &mut Item, m: &warp::Affine, o: &WarpOptions) {
    let inv = m.inverse();
    let (d, bd) = (item.dims(), o.border_mode.border());
    let bilinear = o.interpolation != super::Interpolation::Nearest;
    item.image.data = map_samples!(&item.image.data, |v| warp::warp_image(
        v,
        d,
        &inv,
        bilinear,
        bd,
        &fill_px(o.fill, d.c)
    ));
    let fm = [u8::from_f32(o.fill_mask.clamp(0.0, 255.0))];
    item.map_mask(|v, h, w| {
        (
            warp::warp_image(v, Dims { h, w, c: 1 }, &inv, false, bd, &fm),
            h,
            w,
        )
    });
}
