//! Transforms that degrade the signal (image only): Gaussian noise, Gaussian blur and band
//! dropout.

use serde::{Deserialize, Serialize};

use super::options::{half, yes, zero};
use super::{Transform, check};
use crate::AugmentError;
use crate::limit::Limit;
use crate::photometric as photo;
use crate::pixel::Item;
use crate::rng::SampleRng;

/// `GaussNoise`: additive Gaussian noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussNoise {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Standard deviation as a fraction of full scale (default `[0.2, 0.44]`).
    #[serde(default = "std_range")]
    pub std_range: Limit,
    /// Mean as a fraction of full scale (default 0).
    #[serde(default = "zero")]
    pub mean_range: Limit,
    /// Independent noise per band (default `true`) or one draw per pixel.
    #[serde(default = "yes")]
    pub per_channel: bool,
}
fn std_range() -> Limit {
    Limit::Range(0.2, 0.44)
}

impl Transform for GaussNoise {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (s, m) = (self.std_range, self.mean_range);
        check::within(key, "std_range", s, s.fixed(), 0.0, 1.0)?;
        check::within(key, "mean_range", m, m.symmetric(), -1.0, 1.0)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let max = item.image.kind().max_value();
        let (s0, s1) = self.std_range.fixed();
        let (m0, m1) = self.mean_range.symmetric();
        let (std, mean) = (rng.uniform(s0, s1) * max, rng.uniform(m0, m1) * max);
        let bands = item.image.bands;
        photo::gauss_noise(
            &mut item.image.data,
            bands,
            mean,
            std,
            self.per_channel,
            rng,
        );
        Ok(())
    }
}

/// `GaussianBlur`: Gaussian blur with a random odd kernel size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianBlur {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// Kernel size range (odd sizes are drawn); a number `k` means `[3, k]` (default `[3, 7]`).
    #[serde(default = "blur_limit")]
    pub blur_limit: Limit,
    /// Sigma range; 0 means OpenCV's sigma for the kernel size (default 0).
    #[serde(default = "zero")]
    pub sigma_limit: Limit,
}
fn blur_limit() -> Limit {
    Limit::Range(3.0, 7.0)
}

impl GaussianBlur {
    /// `blur_limit` as a `[lo, hi]` range of kernel sizes.
    fn range(&self) -> (f32, f32) {
        match self.blur_limit {
            Limit::Scalar(k) => (3.0, k),
            Limit::Range(a, b) => (a, b),
        }
    }
}

impl Transform for GaussianBlur {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (lo, hi) = self.range();
        if lo < 3.0
            || hi < lo
            || lo.fract() != 0.0
            || hi.fract() != 0.0
            || (lo == hi && lo % 2.0 == 0.0)
        {
            return Err(check::bad(
                key,
                "blur_limit",
                self.blur_limit.written(),
                "expected whole kernel sizes >= 3 with lo <= hi, containing an odd size",
            ));
        }
        let s = self.sigma_limit;
        check::within(key, "sigma_limit", s, s.fixed(), 0.0, 100.0)
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let (lo, hi) = self.range();
        // Odd sizes in [lo, hi]; validation guarantees at least one.
        let first = (lo as usize) | 1;
        let n_odd = (hi as usize).saturating_sub(first) / 2 + 1;
        let k = first + 2 * rng.int(0, n_odd - 1);
        let (s0, s1) = self.sigma_limit.fixed();
        let sigma = rng.uniform(s0, s1);
        let sigma = if sigma > 0.0 {
            sigma
        } else {
            photo::default_sigma(k)
        };
        let d = item.dims();
        item.image.data = photo::gaussian_blur(&item.image.data, d, k, sigma);
        Ok(())
    }
}

/// `ChannelDropout`: set a random subset of bands to `fill`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelDropout {
    /// Probability (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
    /// How many bands to drop (default `[1, 1]`); must stay below the band count.
    #[serde(default = "drop_range")]
    pub channel_drop_range: (usize, usize),
    /// Value written into dropped bands, in sample units (default 0).
    #[serde(default)]
    pub fill: f32,
}
fn drop_range() -> (usize, usize) {
    (1, 1)
}

impl Transform for ChannelDropout {
    fn p(&self) -> f32 {
        self.p
    }
    fn validate(&self, key: &str) -> Result<(), AugmentError> {
        let (lo, hi) = self.channel_drop_range;
        if lo == 0 || hi < lo {
            return Err(check::bad(
                key,
                "channel_drop_range",
                format!("[{lo}, {hi}]"),
                "expected 1 <= lo <= hi",
            ));
        }
        Ok(())
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let bands = item.image.bands;
        let (lo, hi) = self.channel_drop_range;
        if hi >= bands {
            return Err(AugmentError::Unsupported {
                transform: "ChannelDropout",
                reason: format!(
                    "channel_drop_range = [{lo}, {hi}] could drop every band of a {bands}-band image; keep hi below {bands}"
                ),
            });
        }
        let n = rng.int(lo, hi);
        let drop = rng.choose(bands, n);
        photo::drop_bands(&mut item.image.data, bands, &drop, self.fill);
        Ok(())
    }
}
