//! Checking a parsed [`PipelineConfig`] once, before any sample is seen, so bad values fail at
//! start-up with the key that holds them rather than mid-epoch.

use crate::AugmentError;
use crate::config::{PipelineConfig, TransformConfig as T};
use crate::limit::Limit;

fn bad(key: &str, value: impl ToString, reason: impl Into<String>) -> AugmentError {
    AugmentError::InvalidParameter {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn prob(key: &str, p: f32) -> Result<(), AugmentError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(bad(
            &format!("{key}.p"),
            p,
            "a probability must lie in [0, 1]",
        ))
    }
}

fn size(key: &str, field: &str, v: Option<usize>) -> Result<usize, AugmentError> {
    match v {
        None => Err(bad(
            &format!("{key}.{field}"),
            "missing",
            "this transform needs it, e.g. `height = 512`",
        )),
        Some(0) => Err(bad(&format!("{key}.{field}"), 0, "must be at least 1")),
        Some(n) => Ok(n),
    }
}

fn ordered(key: &str, field: &str, lim: Limit, (lo, hi): (f32, f32)) -> Result<(), AugmentError> {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return Err(bad(
            &format!("{key}.{field}"),
            lim.written(),
            "expected finite numbers with lo <= hi",
        ));
    }
    Ok(())
}

fn within(
    key: &str,
    field: &str,
    lim: Limit,
    r: (f32, f32),
    min: f32,
    max: f32,
) -> Result<(), AugmentError> {
    ordered(key, field, lim, r)?;
    if r.0 < min || r.1 > max {
        return Err(bad(
            &format!("{key}.{field}"),
            lim.written(),
            format!("values must lie in [{min}, {max}]"),
        ));
    }
    Ok(())
}

/// Check every transform of `cfg`, recursively. Keys look like `transforms[1].transforms[0].p`.
pub(crate) fn validate(cfg: &PipelineConfig) -> Result<(), AugmentError> {
    for (i, t) in cfg.transforms.iter().enumerate() {
        transform(&format!("transforms[{i}]"), t)?;
    }
    Ok(())
}

fn transform(key: &str, t: &T) -> Result<(), AugmentError> {
    prob(key, t.p())?;
    match t {
        T::HorizontalFlip(_) | T::VerticalFlip(_) | T::RandomRotate90(_) | T::Transpose(_) => {}
        T::Rotate(r) => ordered(key, "limit", r.limit, r.limit.symmetric())?,
        T::Affine(a) => {
            within(key, "scale", a.scale, a.scale.fixed(), 1e-3, 1e3)?;
            within(
                key,
                "translate_percent",
                a.translate_percent,
                a.translate_percent.symmetric(),
                -1.0,
                1.0,
            )?;
            ordered(key, "rotate", a.rotate, a.rotate.symmetric())?;
            within(key, "shear", a.shear, a.shear.symmetric(), -80.0, 80.0)?;
        }
        T::ShiftScaleRotate(s) => {
            within(
                key,
                "shift_limit",
                s.shift_limit,
                s.shift_limit.symmetric(),
                -1.0,
                1.0,
            )?;
            within(
                key,
                "scale_limit",
                s.scale_limit,
                s.scale_limit.symmetric(),
                -0.999,
                1e3,
            )?;
            ordered(
                key,
                "rotate_limit",
                s.rotate_limit,
                s.rotate_limit.symmetric(),
            )?;
        }
        T::RandomScale(s) => within(
            key,
            "scale_limit",
            s.scale_limit,
            s.scale_limit.symmetric(),
            -0.999,
            1e3,
        )?,
        T::RandomResizedCrop(r) => {
            size(key, "height", r.height)?;
            size(key, "width", r.width)?;
            within(key, "scale", r.scale, r.scale.fixed(), 1e-6, 1.0)?;
            within(key, "ratio", r.ratio, r.ratio.fixed(), 1e-3, 1e3)?;
        }
        T::RandomCrop(r) => {
            size(key, "height", r.height)?;
            size(key, "width", r.width)?;
            if r.cat_max_ratio.is_nan() || r.cat_max_ratio <= 0.0 || r.cat_max_ratio > 1.0 {
                return Err(bad(
                    &format!("{key}.cat_max_ratio"),
                    r.cat_max_ratio,
                    "must lie in (0, 1]; 1 disables the check",
                ));
            }
        }
        T::CenterCrop(c) => {
            size(key, "height", c.height)?;
            size(key, "width", c.width)?;
        }
        T::PadIfNeeded(pd) => {
            size(key, "min_height", pd.min_height)?;
            size(key, "min_width", pd.min_width)?;
        }
        T::Resize(r) => {
            size(key, "height", r.height)?;
            size(key, "width", r.width)?;
        }
        T::RandomBrightnessContrast(b) => {
            within(
                key,
                "brightness_limit",
                b.brightness_limit,
                b.brightness_limit.symmetric(),
                -1.0,
                1.0,
            )?;
            within(
                key,
                "contrast_limit",
                b.contrast_limit,
                b.contrast_limit.symmetric(),
                -1.0,
                10.0,
            )?;
        }
        T::RandomGamma(g) => within(
            key,
            "gamma_limit",
            g.gamma_limit,
            gamma_range(g.gamma_limit),
            1.0,
            1e4,
        )?,
        T::HueSaturationValue(h) => {
            ordered(
                key,
                "hue_shift_limit",
                h.hue_shift_limit,
                h.hue_shift_limit.symmetric(),
            )?;
            within(
                key,
                "sat_shift_limit",
                h.sat_shift_limit,
                h.sat_shift_limit.symmetric(),
                -255.0,
                255.0,
            )?;
            within(
                key,
                "val_shift_limit",
                h.val_shift_limit,
                h.val_shift_limit.symmetric(),
                -255.0,
                255.0,
            )?;
        }
        T::GaussNoise(g) => {
            within(key, "std_range", g.std_range, g.std_range.fixed(), 0.0, 1.0)?;
            within(
                key,
                "mean_range",
                g.mean_range,
                g.mean_range.symmetric(),
                -1.0,
                1.0,
            )?;
        }
        T::GaussianBlur(b) => {
            let (lo, hi) = blur_range(b.blur_limit);
            let written = b.blur_limit.written();
            if lo < 3.0
                || hi < lo
                || lo.fract() != 0.0
                || hi.fract() != 0.0
                || (lo == hi && lo % 2.0 == 0.0)
            {
                return Err(bad(
                    &format!("{key}.blur_limit"),
                    written,
                    "expected whole kernel sizes >= 3 with lo <= hi, containing an odd size",
                ));
            }
            within(
                key,
                "sigma_limit",
                b.sigma_limit,
                b.sigma_limit.fixed(),
                0.0,
                100.0,
            )?;
        }
        T::ChannelDropout(c) => {
            let (lo, hi) = c.channel_drop_range;
            if lo == 0 || hi < lo {
                return Err(bad(
                    &format!("{key}.channel_drop_range"),
                    format!("[{lo}, {hi}]"),
                    "expected 1 <= lo <= hi",
                ));
            }
        }
        T::Normalize(n) => {
            if n.mean.is_empty() || n.mean.len() != n.std.len() {
                return Err(bad(
                    &format!("{key}.mean"),
                    format!("{:?}", n.mean),
                    format!(
                        "needs as many values as `std` ({}), one per band or a single value",
                        n.std.len()
                    ),
                ));
            }
            if let Some(s) = n
                .std
                .iter()
                .find(|s| !s.is_finite() || **s <= 0.0 || s.is_nan())
            {
                return Err(bad(
                    &format!("{key}.std"),
                    s,
                    "standard deviations must be positive",
                ));
            }
            if let Some(m) = n.max_pixel_value.filter(|m| m.is_nan() || *m <= 0.0) {
                return Err(bad(
                    &format!("{key}.max_pixel_value"),
                    m,
                    "must be positive",
                ));
            }
        }
        T::Compose(g) | T::OneOf(g) => {
            if g.transforms.is_empty() && matches!(t, T::OneOf(_)) {
                return Err(bad(
                    &format!("{key}.transforms"),
                    "[]",
                    "OneOf needs at least one nested transform",
                ));
            }
            if matches!(t, T::OneOf(_)) && g.transforms.iter().all(|c| c.p() == 0.0) {
                return Err(bad(
                    &format!("{key}.transforms"),
                    "all p = 0",
                    "OneOf picks by the nested `p`; at least one must be positive",
                ));
            }
            for (i, c) in g.transforms.iter().enumerate() {
                transform(&format!("{key}.transforms[{i}]"), c)?;
            }
        }
        T::SomeOf(s) => {
            let n = size(key, "n", s.n)?;
            if n > s.transforms.len() {
                return Err(bad(
                    &format!("{key}.n"),
                    n,
                    format!(
                        "only {} nested transforms to choose from",
                        s.transforms.len()
                    ),
                ));
            }
            for (i, c) in s.transforms.iter().enumerate() {
                transform(&format!("{key}.transforms[{i}]"), c)?;
            }
        }
    }
    Ok(())
}

/// `gamma_limit` as a `[lo, hi]` range of gamma × 100.
pub(crate) fn gamma_range(l: Limit) -> (f32, f32) {
    match l {
        Limit::Scalar(x) => (100.0 - x.abs(), 100.0 + x.abs()),
        Limit::Range(a, b) => (a, b),
    }
}

/// `blur_limit` as a `[lo, hi]` range of kernel sizes.
pub(crate) fn blur_range(l: Limit) -> (f32, f32) {
    match l {
        Limit::Scalar(k) => (3.0, k),
        Limit::Range(a, b) => (a, b),
    }
}
