//! `train.early_stopping`: stop a run after `patience` evaluations without improvement.

use infer::Metric;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// `train.early_stopping = { metric = "miou", patience = 5, min_delta = 0.001 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EarlyStopping {
    /// `miou`, `mean_f1`, `pixel_accuracy` (higher is better) or `val_loss` (lower is better).
    #[serde(default)]
    pub metric: Metric,
    /// Evaluations without improvement before the run stops.
    #[serde(default = "default_patience")]
    pub patience: u32,
    /// The smallest change that counts as an improvement.
    #[serde(default)]
    pub min_delta: f64,
}

fn default_patience() -> u32 {
    5
}

/// Where early stopping stands, kept in `trainer_state.json` so a resumed run counts on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EarlyStopState {
    /// The best value of the metric so far.
    pub best: Option<f64>,
    /// Evaluations since it last improved by more than `min_delta`.
    pub evals_without_improvement: u32,
}

impl EarlyStopping {
    /// Checks the numbers (the metric's name is checked when the config is read).
    pub fn validate(&self) -> Result<(), TrainError> {
        if self.patience == 0 {
            return Err(TrainError::Config(
                "`train.early_stopping.patience` = 0 would stop at the first evaluation; use 1 or more".into(),
            ));
        }
        if !(self.min_delta.is_finite() && self.min_delta >= 0.0) {
            return Err(TrainError::Config(format!(
                "`train.early_stopping.min_delta` = {} must be a finite number >= 0",
                self.min_delta
            )));
        }
        Ok(())
    }

    /// Records one evaluation's `value`; returns why the run stops, when it does.
    pub fn observe(&self, state: &mut EarlyStopState, value: f64) -> Option<String> {
        if self.metric.improves(value, state.best, self.min_delta) {
            state.best = Some(value);
            state.evals_without_improvement = 0;
            return None;
        }
        state.evals_without_improvement += 1;
        (state.evals_without_improvement >= self.patience).then(|| {
            format!(
                "early stopping: {} did not improve by more than {} for {} evaluations (best {})",
                self.metric,
                self.min_delta,
                self.patience,
                state.best.map_or("none".to_string(), |b| format!("{b:.4}"))
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `values` in order; the index of the evaluation that stops the run, if any.
    fn stops_at(es: &EarlyStopping, values: &[f64]) -> Option<usize> {
        let mut state = EarlyStopState::default();
        values
            .iter()
            .position(|&v| es.observe(&mut state, v).is_some())
    }

    fn es(metric: Metric, patience: u32, min_delta: f64) -> EarlyStopping {
        EarlyStopping {
            metric,
            patience,
            min_delta,
        }
    }

    #[test]
    fn stops_after_patience_evaluations_without_improvement() {
        let miou = es(Metric::Miou, 3, 0.001);
        // Improves, then three evaluations within min_delta of the best (0.5005 is not > 0.501).
        assert_eq!(stops_at(&miou, &[0.3, 0.5, 0.5005, 0.49, 0.4]), Some(4));
        // An improvement resets the count.
        assert_eq!(stops_at(&miou, &[0.3, 0.2, 0.2, 0.4, 0.3, 0.3]), None);
        assert_eq!(
            stops_at(&miou, &[0.3, 0.2, 0.2, 0.4, 0.3, 0.3, 0.3]),
            Some(6)
        );
        // NaN never improves.
        assert_eq!(stops_at(&es(Metric::Miou, 1, 0.0), &[f64::NAN]), Some(0));
        // Lower is better for the validation loss.
        let loss = es(Metric::ValLoss, 2, 0.0);
        assert_eq!(stops_at(&loss, &[1.0, 0.8, 0.7, 0.75, 0.7]), Some(4));
        let mut state = EarlyStopState::default();
        for v in [1.0, 0.9] {
            assert!(loss.observe(&mut state, v).is_none());
        }
        assert_eq!(state.best, Some(0.9));
        let why = loss
            .observe(&mut state, 0.95)
            .or_else(|| loss.observe(&mut state, 0.95));
        let why = why.unwrap();
        assert!(
            why.contains("val_loss") && why.contains("2 evaluations"),
            "{why}"
        );
    }

    #[test]
    fn bad_settings_name_the_key() {
        for (e, key) in [
            (es(Metric::Miou, 0, 0.0), "patience"),
            (es(Metric::Miou, 5, -1.0), "min_delta"),
        ] {
            let msg = e.validate().unwrap_err().to_string();
            assert!(
                msg.contains(&format!("train.early_stopping.{key}")),
                "{msg}"
            );
        }
    }
}
