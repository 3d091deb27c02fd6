//! `Limit`: a parameter range written either as one number or as `[lo, hi]`.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parameter range, written in TOML as one number (`limit = 30`) or as a pair
/// (`limit = [-10, 30]`), like albumentations' `float | tuple[float, float]` arguments.
///
/// What a single number means depends on the parameter (usually `[-x, x]`); each field's
/// documentation says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// One number.
    Scalar(f32),
    /// An explicit `[lo, hi]`.
    Range(f32, f32),
}

impl Limit {
    /// `[-|x|, |x|]` for a scalar, the pair itself otherwise.
    pub(crate) fn symmetric(self) -> (f32, f32) {
        match self {
            Limit::Scalar(x) => (-x.abs(), x.abs()),
            Limit::Range(a, b) => (a, b),
        }
    }

    /// `[x, x]` for a scalar, the pair itself otherwise.
    pub(crate) fn fixed(self) -> (f32, f32) {
        match self {
            Limit::Scalar(x) => (x, x),
            Limit::Range(a, b) => (a, b),
        }
    }

    /// How the value was written, for error messages.
    pub(crate) fn written(self) -> String {
        match self {
            Limit::Scalar(x) => format!("{x}"),
            Limit::Range(a, b) => format!("[{a}, {b}]"),
        }
    }
}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Limit::Scalar(x) => s.serialize_f32(x),
            Limit::Range(a, b) => (a, b).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Limit;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or a pair of numbers `[lo, hi]`")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Limit, E> {
                Ok(Limit::Scalar(v as f32))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
                Ok(Limit::Scalar(v as f32))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
                Ok(Limit::Scalar(v as f32))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Limit, A::Error> {
                let lo: f32 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let hi: f32 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<f32>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(Limit::Range(lo, hi))
            }
        }
        d.deserialize_any(V)
    }
}
