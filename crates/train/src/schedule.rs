//! Learning-rate schedules, stepped once per optimizer step.

use serde::{Deserialize, Serialize};

/// The shape of the schedule after warmup.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Polynomial decay to `min_lr` (`power` 1.0 is the SegFormer paper's schedule).
    #[default]
    Poly,
    /// Cosine annealing to `min_lr` over the remaining steps (PyTorch's `CosineAnnealingLR`
    /// with `T_max` = the post-warmup steps and `eta_min` = `min_lr`).
    Cosine,
    /// The base learning rate throughout.
    Constant,
}

/// A learning-rate schedule: linear warmup from `warmup_ratio * base_lr`, then [`ScheduleKind`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// Decay shape after warmup.
    pub kind: ScheduleKind,
    /// Number of optimizer steps of linear warmup.
    pub warmup_steps: usize,
    /// Learning-rate factor at step 0 of the warmup (mmseg uses 1e-6).
    pub warmup_ratio: f64,
    /// Exponent of the polynomial decay.
    pub power: f64,
    /// Learning rate reached at the last step.
    pub min_lr: f64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            kind: ScheduleKind::Poly,
            warmup_steps: 0,
            warmup_ratio: 1e-6,
            power: 1.0,
            min_lr: 0.0,
        }
    }
}

impl ScheduleConfig {
    /// The learning rate for optimizer step `step` (0-based) of `total_steps`, given `base_lr`.
    pub fn lr(&self, base_lr: f64, step: usize, total_steps: usize) -> f64 {
        let warmup = self.warmup_steps.min(total_steps);
        if step < warmup {
            let alpha = step as f64 / warmup as f64;
            return base_lr * (self.warmup_ratio + (1.0 - self.warmup_ratio) * alpha);
        }
        let span = total_steps.saturating_sub(warmup).max(1) as f64;
        let t = ((step - warmup) as f64 / span).min(1.0);
        match self.kind {
            ScheduleKind::Constant => base_lr,
            ScheduleKind::Poly => {
                (base_lr - self.min_lr) * (1.0 - t).powf(self.power) + self.min_lr
            }
            ScheduleKind::Cosine => {
                self.min_lr
                    + (base_lr - self.min_lr) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ScheduleKind, warmup_steps: usize) -> ScheduleConfig {
        ScheduleConfig {
            kind,
            warmup_steps,
            ..Default::default()
        }
    }

    #[test]
    fn poly_power_one_is_linear_decay() {
        let s = cfg(ScheduleKind::Poly, 0);
        assert_eq!(s.lr(1.0, 0, 10), 1.0);
        assert!((s.lr(1.0, 5, 10) - 0.5).abs() < 1e-12);
        assert!((s.lr(1.0, 9, 10) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn cosine_matches_pytorch_closed_form() {
        // CosineAnnealingLR: eta_min + (base - eta_min) * (1 + cos(pi * t / T_max)) / 2
        let s = ScheduleConfig {
            kind: ScheduleKind::Cosine,
            min_lr: 0.1,
            ..Default::default()
        };
        for step in 0..20 {
            let want = 0.1 + 0.9 * (1.0 + (std::f64::consts::PI * step as f64 / 20.0).cos()) / 2.0;
            assert!((s.lr(1.0, step, 20) - want).abs() < 1e-12, "step {step}");
        }
    }

    #[test]
    fn warmup_rises_linearly_then_hands_over() {
        let s = ScheduleConfig {
            warmup_ratio: 0.0,
            ..cfg(ScheduleKind::Constant, 4)
        };
        let lrs: Vec<f64> = (0..6).map(|i| s.lr(2.0, i, 10)).collect();
        assert_eq!(lrs, vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.0]);
        let p = ScheduleConfig {
            warmup_ratio: 0.0,
            ..cfg(ScheduleKind::Poly, 2)
        };
        assert_eq!(p.lr(1.0, 2, 10), 1.0);
        assert!((p.lr(1.0, 6, 10) - 0.5).abs() < 1e-12);
    }
}
