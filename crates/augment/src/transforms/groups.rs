//! Groups of nested transforms (`Compose`, `OneOf`, `SomeOf`), albumentations' composition
//! blocks.

use serde::{Deserialize, Serialize};

use super::options::one;
use super::{Transform, TransformConfig, check};
use crate::AugmentError;
use crate::pixel::Item;
use crate::rng::SampleRng;

/// `Compose`: apply the nested transforms in order (each with its own `p`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compose {
    /// Probability (default 1).
    #[serde(default = "one")]
    pub p: f32,
    /// The nested transforms.
    #[serde(default)]
    pub transforms: Vec<TransformConfig>,
}

impl Transform for Compose {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        validate_nested(key, &self.transforms)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        for t in &self.transforms {
            t.maybe_apply(item, rng)?;
        }
        Ok(())
    }
}

/// `OneOf`: apply exactly one nested transform, chosen with probability proportional to its `p`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneOf {
    /// Probability (default 1).
    /// NOTE: albumentations' `OneOf` defaults to 0.5; a group that silently does nothing half
    /// the time is a surprise, so write `p` explicitly when you want that.
    #[serde(default = "one")]
    pub p: f32,
    /// The nested transforms.
    #[serde(default)]
    pub transforms: Vec<TransformConfig>,
}

impl Transform for OneOf {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        if self.transforms.is_empty() {
            return Err(check::bad(
                key,
                "transforms",
                "[]",
                "OneOf needs at least one nested transform",
            ));
        }
        if self.transforms.iter().all(|c| c.p() == 0.0) {
            return Err(check::bad(
                key,
                "transforms",
                "all p = 0",
                "OneOf picks by the nested `p`; at least one must be positive",
            ));
        }
        validate_nested(key, &self.transforms)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        // Weighted by the children's p, as albumentations does; the chosen one is forced.
        let ts = &self.transforms;
        let total: f32 = ts.iter().map(|t| t.p()).sum();
        let mut r = rng.uniform(0.0, total);
        let pick = ts.iter().find(|t| {
            r -= t.p();
            r <= 0.0 && t.p() > 0.0
        });
        if let Some(t) = pick.or_else(|| ts.iter().rev().find(|t| t.p() > 0.0)) {
            t.apply(item, rng)?;
        }
        Ok(())
    }
}

/// `SomeOf`: apply `n` distinct nested transforms chosen uniformly, each then with its own `p`.
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

impl Transform for SomeOf {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let n = check::size(key, "n", self.n)?;
        if n > self.transforms.len() {
            let reason = format!(
                "only {} nested transforms to choose from",
                self.transforms.len()
            );
            return Err(check::bad(key, "n", n, reason));
        }
        validate_nested(key, &self.transforms)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let mut chosen = rng.choose(self.transforms.len(), self.n.unwrap_or(0));
        // Keep the written order, like albumentations.
        chosen.sort_unstable();
        for i in chosen {
            self.transforms[i].maybe_apply(item, rng)?;
        }
        Ok(())
    }
}

/// Validate the children of the group at `key` (`{key}.transforms[i]`).
fn validate_nested(key: &str, transforms: &[TransformConfig]) -> Result<(), AugmentError> {
    for (i, t) in transforms.iter().enumerate() {
        t.validate(&format!("{key}.transforms[{i}]"))?;
    }
    Ok(())
}
