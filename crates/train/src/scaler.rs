//! Dynamic loss scaling for f16 training, with PyTorch `GradScaler` semantics.

use serde::{Deserialize, Serialize};

/// Dynamic loss scale: multiply the loss by [`GradScaler::scale`] before backward, unscale the
/// gradients, and report whether they were finite with [`GradScaler::update`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradScaler {
    scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u32,
    clean_steps: u32,
    skipped: u64,
}

impl Default for GradScaler {
    /// PyTorch's defaults: initial scale 2^16, ×2 after 2000 clean steps, ×0.5 on overflow.
    fn default() -> Self {
        Self {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            clean_steps: 0,
            skipped: 0,
        }
    }
}

impl GradScaler {
    /// The factor the loss is multiplied by before backward.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Steps skipped because of non-finite gradients so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Records the outcome of one step. Returns `true` when the optimizer step should be taken
    /// (`grads_finite`); on overflow the scale backs off and the step is skipped.
    pub fn update(&mut self, grads_finite: bool) -> bool {
        if grads_finite {
            self.clean_steps += 1;
            if self.clean_steps >= self.growth_interval {
                self.scale *= self.growth_factor;
                self.clean_steps = 0;
            }
        } else {
            self.scale *= self.backoff_factor;
            self.clean_steps = 0;
            self.skipped += 1;
        }
        grads_finite
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_halves_and_skips_growth_doubles_after_interval() {
        let mut s = GradScaler::default();
        assert_eq!(s.scale(), 65536.0);
        assert!(!s.update(false));
        assert_eq!(s.scale(), 32768.0);
        assert_eq!(s.skipped(), 1);
        for _ in 0..1999 {
            assert!(s.update(true));
        }
        assert_eq!(s.scale(), 32768.0);
        s.update(true);
        assert_eq!(s.scale(), 65536.0);
        // an overflow resets the clean-step count
        for _ in 0..1000 {
            s.update(true);
        }
        s.update(false);
        for _ in 0..1999 {
            s.update(true);
        }
        assert_eq!(s.scale(), 32768.0);
    }
}
