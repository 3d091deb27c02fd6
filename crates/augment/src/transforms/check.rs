//! Parameter checks shared by the transforms' `validate`, so bad values fail at start-up with
//! the key that holds them rather than mid-epoch. `key` is where the transform sits
//! (`transforms[1].transforms[0]`), `field` the parameter.

use crate::AugmentError;
use crate::limit::Limit;

/// An [`AugmentError::InvalidParameter`] for `key.field`.
pub(crate) fn bad(
    key: &str,
    field: &str,
    value: impl ToString,
    reason: impl Into<String>,
) -> AugmentError {
    AugmentError::InvalidParameter {
        key: format!("{key}.{field}"),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// `p` lies in `[0, 1]`.
pub(crate) fn prob(key: &str, p: f32) -> Result<(), AugmentError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(bad(key, "p", p, "a probability must lie in [0, 1]"))
    }
}

/// The largest side a transform may produce: one 16384² 4-band f32 image is already 4 GiB,
/// and a larger one would abort the process on allocation instead of failing here.
pub(crate) const MAX_SIDE: usize = 16384;

/// A required size is given, at least 1 and at most [`MAX_SIDE`].
pub(crate) fn size(key: &str, field: &str, v: Option<usize>) -> Result<usize, AugmentError> {
    match v {
        None => Err(bad(
            key,
            field,
            "missing",
            "this transform needs it, e.g. `height = 512`",
        )),
        Some(0) => Err(bad(key, field, 0, "must be at least 1")),
        Some(n) if n > MAX_SIDE => Err(bad(
            key,
            field,
            n,
            format!("must be at most {MAX_SIDE} pixels"),
        )),
        Some(n) => Ok(n),
    }
}

/// The range `(lo, hi)` that `lim` stands for is finite and ordered.
pub(crate) fn ordered(
    key: &str,
    field: &str,
    lim: Limit,
    (lo, hi): (f32, f32),
) -> Result<(), AugmentError> {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return Err(bad(
            key,
            field,
            lim.written(),
            "expected finite numbers with lo <= hi",
        ));
    }
    Ok(())
}

/// As [`ordered`], and inside `[min, max]`.
pub(crate) fn within(
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
            key,
            field,
            lim.written(),
            format!("values must lie in [{min}, {max}]"),
        ));
    }
    Ok(())
}
