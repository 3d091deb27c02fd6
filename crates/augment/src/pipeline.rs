//! The pipeline schema ([`PipelineConfig`], what a TOML pipeline deserialises into) and
//! [`Pipeline`], a validated one ready to augment samples.
//!
//! Every transform is a table with a `name` and its parameters; unknown names and unknown
//! parameters are errors that list the valid ones. Defaults follow albumentations 2.0.8 except
//! where a `NOTE:` says otherwise.

use raster::{Mask, Raster};
use serde::{Deserialize, Serialize};

use crate::AugmentError;
use crate::pixel::Item;
use crate::rng::SampleRng;
use crate::transforms::TransformConfig;

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

/// A validated sequence of transforms (albumentations' `Compose`).
#[derive(Clone, Debug)]
pub struct Pipeline {
    transforms: Vec<TransformConfig>,
}

impl Pipeline {
    /// Check every parameter of `config` and build the pipeline.
    ///
    /// # Errors
    /// [`AugmentError::InvalidParameter`] naming the first bad key (`transforms[2].p`) and value.
    pub fn new(config: &PipelineConfig) -> Result<Self, AugmentError> {
        for (i, t) in config.transforms.iter().enumerate() {
            t.validate(&format!("transforms[{i}]"))?;
        }
        Ok(Self {
            transforms: config.transforms.clone(),
        })
    }

    /// Parse TOML text and build the pipeline in one step.
    ///
    /// # Errors
    /// As [`PipelineConfig::from_toml_str`] and [`Pipeline::new`].
    pub fn from_toml_str(text: &str) -> Result<Self, AugmentError> {
        Self::new(&PipelineConfig::from_toml_str(text)?)
    }

    /// Augment one sample with the random stream `rng`.
    ///
    /// # Shapes
    /// `image` is `[H, W, C]` (any band count, u8/u16/f32), `mask` `[H, W]`. Geometric transforms
    /// may change `H`/`W` (crops, pads, resizes, odd quarter turns); the mask always follows the
    /// image. `Normalize` turns the image into f32.
    ///
    /// # Errors
    /// [`AugmentError::Shape`] when image and mask disagree; [`AugmentError::Unsupported`] when a
    /// transform cannot handle this input (e.g. `HueSaturationValue` on 4 bands).
    pub fn apply(
        &self,
        image: Raster,
        mask: Option<Mask>,
        rng: &mut SampleRng,
    ) -> Result<(Raster, Option<Mask>), AugmentError> {
        let mut item = Item::new(image, mask)?;
        for t in &self.transforms {
            t.maybe_apply(&mut item, rng)?;
        }
        Ok((item.image, item.mask))
    }

    /// [`Pipeline::apply`] with the stream of sample `index` in `epoch` under `seed`
    /// ([`SampleRng::new`]), so results do not depend on thread count or order.
    ///
    /// # Errors
    /// As [`Pipeline::apply`].
    pub fn apply_seeded(
        &self,
        image: Raster,
        mask: Option<Mask>,
        seed: u64,
        epoch: u64,
        index: u64,
    ) -> Result<(Raster, Option<Mask>), AugmentError> {
        self.apply(image, mask, &mut SampleRng::new(seed, epoch, index))
    }

    /// True when the pipeline has no transforms (it returns samples unchanged).
    pub fn is_empty(&self) -> bool {
        self.transforms.is_empty()
    }
}
