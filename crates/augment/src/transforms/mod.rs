//! The transforms a pipeline is made of. Each one is a parameter struct (what its TOML table
//! deserialises into) implementing `Transform` in the file of its family; the `registry!`
//! list below maps the TOML `name` to that struct, so adding a transform is one struct, one
//! `impl Transform` and one line here.

mod affine;
mod check;
mod color;
mod crop;
mod flips;
mod groups;
mod noise;
mod options;
mod scale;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};

use crate::AugmentError;
use crate::pixel::Item;
use crate::rng::SampleRng;

pub use options::{BorderMode, Interpolation, WarpOptions};

/// What every transform does: its probability, its parameter check and its effect on a sample.
pub(crate) trait Transform {
    /// Probability of being applied (`p`).
    fn p(&self) -> f32;

    /// Check the parameters once, before any sample is seen. `key` locates the transform in
    /// the config (`transforms[1].transforms[0]`) for [`AugmentError::InvalidParameter`];
    /// `p` itself is checked by the caller.
    fn validate(&self, _key: &str) -> Result<(), AugmentError> {
        Ok(())
    }

    /// Apply unconditionally (the `p` roll has been made). Parameters were validated, so only
    /// input-dependent problems (band counts, sizes) are errors. The draws from `rng` and
    /// their order are part of the transform's behaviour: seeded results and the
    /// albumentations parity fixtures depend on them.
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError>;
}

/// Declares [`TransformConfig`] with one variant per listed parameter struct (`family::Name`),
/// named after it (the TOML `name`), re-exports the struct, and writes the one `match` that
/// dispatches a variant to its [`Transform`].
macro_rules! registry {
    ($($family:ident::$name:ident),* $(,)?) => {
        $(pub use $family::$name;)*

        /// One transform, selected by its albumentations name (`name = "HorizontalFlip"`), with
        /// the parameters of that transform's struct in the same table.
        ///
        /// Images are `[H, W, C]`, masks `[H, W]`; a transform keeps the shape unless its
        /// documentation says otherwise, and the mask always gets the image's new `H × W`.
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "name")]
        pub enum TransformConfig {
            $(
                #[doc = concat!("`name = \"", stringify!($name), "\"`: see [`", stringify!($name), "`].")]
                $name($name),
            )*
        }

        impl TransformConfig {
            /// Every valid `name`, in the order of the registry.
            const NAMES: &[&str] = &[$(stringify!($name)),*];

            fn transform(&self) -> &dyn Transform {
                match self {
                    $(Self::$name(t) => t,)*
                }
            }

            /// The transform called `name`, with the parameters in `table`.
            fn parse<E: de::Error>(name: &str, table: toml::Table) -> Result<Self, E> {
                match name {
                    $(stringify!($name) => parse_params(table).map(Self::$name),)*
                    _ => Err(E::unknown_variant(name, Self::NAMES)),
                }
            }
        }
    };
}

registry! {
    flips::HorizontalFlip,
    flips::VerticalFlip,
    flips::RandomRotate90,
    flips::Transpose,
    affine::Rotate,
    affine::Affine,
    affine::ShiftScaleRotate,
    scale::RandomScale,
    crop::RandomResizedCrop,
    crop::RandomCrop,
    crop::CenterCrop,
    crop::PadIfNeeded,
    scale::Resize,
    color::RandomBrightnessContrast,
    color::RandomGamma,
    color::HueSaturationValue,
    noise::GaussNoise,
    noise::GaussianBlur,
    noise::ChannelDropout,
    color::Normalize,
    groups::Compose,
    groups::OneOf,
    groups::SomeOf,
}

impl TransformConfig {
    /// The transform's probability of being applied.
    pub(crate) fn p(&self) -> f32 {
        self.transform().p()
    }

    /// Check `p` and every parameter; `key` is where the transform sits (`transforms[2]`).
    pub(crate) fn validate(&self, key: &str) -> Result<(), AugmentError> {
        check::prob(key, self.p())?;
        self.transform().validate(key)
    }

    /// Roll for `p` (always one draw), then apply.
    pub(crate) fn maybe_apply(
        &self,
        item: &mut Item,
        rng: &mut SampleRng,
    ) -> Result<(), AugmentError> {
        if rng.chance(self.p()) {
            self.apply(item, rng)
        } else {
            Ok(())
        }
    }

    /// Apply unconditionally (the `p` roll has been made).
    pub(crate) fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        self.transform().apply(item, rng)
    }
}

impl<'de> Deserialize<'de> for TransformConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TableVisitor)
    }
}

/// Reads a transform's table: the `name` (checked where it is written, so a TOML error points
/// at it) and the other keys, the parameters, handed to that transform's struct.
struct TableVisitor;

impl<'de> de::Visitor<'de> for TableVisitor {
    type Value = TransformConfig;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a transform table with a `name`")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<TransformConfig, A::Error> {
        let (mut name, mut params) = (None, toml::Table::new());
        while let Some(key) = map.next_key::<String>()? {
            if key == "name" {
                name = Some(map.next_value::<Name>()?.0);
            } else {
                let value = map.next_value::<toml::Value>()?;
                params.insert(key, value);
            }
        }
        let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
        TransformConfig::parse(name, params)
    }
}

/// A registered transform name.
struct Name(&'static str);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        let known = TransformConfig::NAMES.iter().find(|n| **n == name);
        known
            .map(|n| Name(n))
            .ok_or_else(|| de::Error::unknown_variant(&name, TransformConfig::NAMES))
    }
}

/// A transform's parameters from its table (`name` removed).
fn parse_params<T: DeserializeOwned + Serialize, E: de::Error>(table: toml::Table) -> Result<T, E> {
    T::deserialize(toml::Value::Table(table)).map_err(|e| {
        let msg = e.message();
        // NOTE: serde lists the valid keys with an unknown one except in structs with a
        // flattened part (`WarpOptions`), where it says only "unknown field `x`": list them
        // from the keys the defaults serialise to (such structs hold no `Option`, which TOML
        // would leave out).
        match msg.strip_prefix("unknown field ") {
            Some(rest) if !rest.contains("expected") => {
                E::custom(format!("{msg}, expected one of {}", default_keys::<T>()))
            }
            _ => E::custom(msg),
        }
    })
}

/// "`a`, `b`, `c`": the keys of `T`'s defaults (what an empty table deserialises to), in
/// declaration order, as serde would list them. Read from the TOML text, which keeps that
/// order (a `toml::Table` sorts its keys); the structs this serves are flat.
fn default_keys<T: DeserializeOwned + Serialize>() -> String {
    let defaults = toml::Value::Table(toml::Table::new()).try_into::<T>();
    let text = defaults.ok().and_then(|t| toml::to_string(&t).ok());
    let keys: Vec<String> = text
        .iter()
        .flat_map(|t| t.lines())
        .filter_map(|line| line.split_once(" = "))
        .map(|(k, _)| format!("`{k}`"))
        .collect();
    keys.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TransformConfig, String> {
        #[derive(Deserialize)]
        struct One {
            t: TransformConfig,
        }
        toml::from_str::<One>(text)
            .map(|o| o.t)
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn every_registered_transform_parses_with_defaults_and_round_trips() {
        for name in TransformConfig::NAMES {
            let t = parse(&format!("[t]\nname = '{name}'")).unwrap();
            let text = toml::to_string(&toml::Table::from_iter([(
                "t".to_string(),
                toml::Value::try_from(&t).unwrap(),
            )]))
            .unwrap();
            assert_eq!(parse(&text).unwrap(), t, "{name}: {text}");
        }
    }

    #[test]
    fn unknown_keys_are_named_with_the_valid_ones_for_every_transform() {
        for name in TransformConfig::NAMES {
            let err = parse(&format!("[t]\nname = '{name}'\nbogus = 1")).unwrap_err();
            assert!(
                err.starts_with("unknown field `bogus`, expected") && err.contains("`p`"),
                "{name}: {err}"
            );
        }
        // The flattened warp options are listed with the transform's own keys.
        let err = parse("[t]\nname = 'Affine'\nfil = 1").unwrap_err();
        for key in ["`scale`", "`shear`", "`interpolation`", "`fill_mask`"] {
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn warp_options_keep_their_keys_in_the_transform_table() {
        let t = parse("[t]\nname = 'Rotate'\nlimit = 10\nborder_mode = 'reflect_101'\nfill = 3")
            .unwrap();
        let TransformConfig::Rotate(r) = t else {
            panic!("{t:?}")
        };
        assert_eq!(r.warp.border_mode, BorderMode::Reflect101);
        assert_eq!((r.warp.fill, r.warp.fill_mask), (3.0, 255.0));
        assert_eq!(r.warp.interpolation, Interpolation::Linear);
        let err = parse("[t]\nname = 'Rotate'\nborder_mode = 'wrap'").unwrap_err();
        assert!(err.contains("wrap") && err.contains("reflect101"), "{err}");
        let err = parse("[t]\np = 1").unwrap_err();
        assert!(err.contains("missing field `name`"), "{err}");
    }
}
