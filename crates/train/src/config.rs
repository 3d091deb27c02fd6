//! The training configuration (TOML), with `--set key=value` overrides.

use std::path::PathBuf;

use augment::PipelineConfig;
use serde::{Deserialize, Serialize};
use tiles::LabelMap;

use crate::early_stop::EarlyStopping;
use crate::error::TrainError;
use crate::loss::LossConfig;
use crate::optim::AdamWConfig;
use crate::schedule::ScheduleConfig;

/// A whole training run, as written in `configs/*.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Which model to train.
    pub model: ModelConfig,
    /// Where the data is and how it is preprocessed.
    pub data: DataConfig,
    /// The augmentation pipeline (`[[augment.transforms]]` tables).
    #[serde(default)]
    pub augment: PipelineConfig,
    /// AdamW hyper-parameters.
    #[serde(default)]
    pub optimizer: AdamWConfig,
    /// Learning-rate schedule.
    #[serde(default)]
    pub schedule: ScheduleConfig,
    /// Loop settings.
    #[serde(default)]
    pub train: LoopConfig,
    /// Memory budget for the planner.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// The training loss (`[loss]`; default HF's cross-entropy).
    #[serde(default)]
    pub loss: LossConfig,
}

/// The model: a preset architecture, optionally initialised from an HF checkpoint directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// `mit-b0` … `mit-b5`, or `tiny` (a 4-block toy for tests). Ignored for the architecture
    /// when `pretrained` is given (its config.json wins), but still names the family.
    #[serde(default = "default_preset")]
    pub preset: String,
    /// An HF model directory (e.g. a downloaded `nvidia/mit-b0`): the encoder (and the head,
    /// when its shapes fit) are loaded from it.
    #[serde(default)]
    pub pretrained: Option<PathBuf>,
    /// Stochastic-depth rate override.
    #[serde(default)]
    pub drop_path_rate: Option<f64>,
    /// Decode-head dropout override.
    #[serde(default)]
    pub classifier_dropout_prob: Option<f64>,
    /// How a `pretrained` first kernel meets a dataset whose band count differs from the
    /// checkpoint's: `repeat` (timm: the RGB kernels cycled over the bands, scaled by 3/C),
    /// `mean` (the mean RGB kernel, scaled by 3/C) or `random` (that one tensor initialised).
    #[serde(default = "default_input_adapt")]
    pub input_adapt: String,
}

fn default_input_adapt() -> String {
    "repeat".into()
}

fn default_preset() -> String {
    "mit-b0".into()
}

/// The data: a prepared dataset directory (see `segfit prepare`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// The prepared dataset (split layout + `dataset.json`).
    pub root: PathBuf,
    /// Training split name.
    #[serde(default = "default_train_split")]
    pub train_split: String,
    /// Validation split name.
    #[serde(default = "default_val_split")]
    pub val_split: String,
    /// Processor output size `[height, width]` (HF's default is 512×512).
    #[serde(default = "default_size")]
    pub size: [usize; 2],
    /// Label mapping; when absent, the one in `dataset.json`.
    #[serde(default)]
    pub classes: Option<LabelMap>,
    /// `imagenet` (HF's default mean/std) or `dataset` (per-band statistics from `dataset.json`,
    /// for 16-bit and multispectral imagery).
    #[serde(default = "default_normalize")]
    pub normalize: String,
    /// The stored images' bands the model sees, in this order (0-based), e.g. `[3, 2, 1, 7]`;
    /// all bands in stored order when absent. With a pretrained RGB encoder the first three
    /// selected bands get its R, G and B kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bands: Option<Vec<usize>>,
}

fn default_train_split() -> String {
    "train".into()
}
fn default_val_split() -> String {
    "val".into()
}
fn default_size() -> [usize; 2] {
    [512, 512]
}
fn default_normalize() -> String {
    "imagenet".into()
}

/// Numerical precision of the forward and backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Full f32.
    #[default]
    F32,
    /// bfloat16 matmuls and convolutions, f32 norms/softmax/loss and master weights.
    Bf16,
    /// float16 like bf16, with dynamic loss scaling.
    F16,
}

/// Loop settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopConfig {
    /// Passes over the training split.
    pub epochs: usize,
    /// Stop after this many optimizer steps (all epochs), when set.
    pub max_steps: Option<usize>,
    /// Micro-batch size.
    pub batch_size: usize,
    /// Micro-batches per optimizer step (gradient accumulation).
    pub accumulation_steps: usize,
    /// `f32`, `bf16` or `f16`.
    pub precision: Precision,
    /// Recompute activations in backward instead of keeping them (Burn's balanced checkpointing).
    pub checkpointing: bool,
    /// Seed of everything random (init, order, augmentation, dropout).
    pub seed: u64,
    /// Loader threads.
    pub workers: usize,
    /// Samples decoded ahead of the model.
    pub prefetch: usize,
    /// Evaluate every N epochs.
    pub eval_every: usize,
    /// Log (and write `metrics.jsonl`) every N optimizer steps.
    pub log_every: usize,
    /// Write the `last` checkpoint every N optimizer steps (0: at epoch ends only).
    pub checkpoint_every: usize,
    /// Metric that picks `best`: `miou`, `mean_f1`, `pixel_accuracy` or `val_loss`.
    pub best_metric: String,
    /// Consecutive non-finite steps before the run stops.
    pub max_bad_steps: u32,
    /// Validation tiles shown in the overlay grid.
    pub overlay_samples: usize,
    /// Show a progress bar.
    pub progress: bool,
    /// Stop after `patience` evaluations without improvement of `metric` by `min_delta`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stopping: Option<EarlyStopping>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            epochs: 10,
            max_steps: None,
            batch_size: 2,
            accumulation_steps: 1,
            precision: Precision::F32,
            checkpointing: false,
            seed: 42,
            workers: 2,
            prefetch: 8,
            eval_every: 1,
            log_every: 10,
            checkpoint_every: 0,
            best_metric: "miou".into(),
            max_bad_steps: 5,
            overlay_samples: 4,
            progress: true,
            early_stopping: None,
        }
    }
}

/// Memory budget for the planner (`segfit plan`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Device memory available, e.g. `"8GiB"`; the planner picks micro-batch and accumulation to fit.
    pub budget: Option<String>,
    /// Effective batch size (micro-batch × accumulation) to keep when a budget is given.
    pub effective_batch: Option<usize>,
}

impl TrainConfig {
    /// Parses a config from TOML text, applying `overrides` (`key.path=value`) first.
    /// Errors name the key (unknown keys list the valid ones) and the line.
    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self, TrainError> {
        let mut value: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| TrainError::Config(e.to_string()))?;
        for o in overrides {
            apply_override(&mut value, o)?;
        }
        let cfg: TrainConfig = toml::Value::Table(value)
            .try_into()
            .map_err(|e: toml::de::Error| TrainError::Config(e.message().to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config as TOML, as the run directory keeps it.
    pub fn to_toml_string(&self) -> String {
        toml::to_string_pretty(self)
            .unwrap_or_else(|e| format!("# could not serialise config: {e}\n"))
    }

    /// Checks values the types cannot.
    pub fn validate(&self) -> Result<(), TrainError> {
        let t = &self.train;
        let bad = |k: &str, why: &str| Err(TrainError::Config(format!("`{k}` {why}")));
        if t.batch_size == 0 {
            return bad("train.batch_size", "must be at least 1");
        }
        if t.accumulation_steps == 0 {
            return bad("train.accumulation_steps", "must be at least 1");
        }
        if t.epochs == 0 {
            return bad("train.epochs", "must be at least 1");
        }
        if !["miou", "mean_f1", "pixel_accuracy", "val_loss"].contains(&t.best_metric.as_str()) {
            return bad(
                "train.best_metric",
                "must be one of miou, mean_f1, pixel_accuracy, val_loss",
            );
        }
        if !["imagenet", "dataset"].contains(&self.data.normalize.as_str()) {
            return bad("data.normalize", "must be `imagenet` or `dataset`");
        }
        if self.data.size[0] == 0 || self.data.size[1] == 0 {
            return bad("data.size", "must be [height, width] with both > 0");
        }
        if !(self.optimizer.lr > 0.0 && self.optimizer.lr.is_finite()) {
            return bad("optimizer.lr", "must be a positive number");
        }
        if segformer::InputAdapt::from_name(&self.model.input_adapt).is_none() {
            return Err(TrainError::Config(format!(
                "`model.input_adapt` = \"{}\" is not a rule; use repeat, mean or random",
                self.model.input_adapt
            )));
        }
        if let Some(b) = &self.data.bands
            && let Some(e) = crate::bands::check_selection(b)
        {
            return Err(TrainError::Config(e));
        }
        if let Some(es) = &t.early_stopping {
            es.validate()?;
        }
        self.loss.validate()
    }
}

/// Sets `a.b.c = value` in a TOML table; `value` is parsed as TOML (`3`, `true`, `"x"`, `[1, 2]`),
/// or taken as a string when it does not parse.
fn apply_override(root: &mut toml::Table, assignment: &str) -> Result<(), TrainError> {
    let (key, raw) = assignment.split_once('=').ok_or_else(|| {
        TrainError::Config(format!(
            "override `{assignment}` is not key=value (e.g. train.epochs=3)"
        ))
    })?;
    let key = key.trim();
    let value = format!("v = {}", raw.trim())
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(TrainError::Config(format!(
            "override key `{key}` is empty or has an empty part"
        )));
    }
    let mut table = root;
    for p in &parts[..parts.len() - 1] {
        let entry = table
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| TrainError::Config(format!("override `{key}`: `{p}` is not a table")))?;
    }
    table.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[model]\npreset = \"mit-b0\"\n[data]\nroot = \"data/x\"\n";

    #[test]
    fn minimal_config_gets_defaults_and_overrides_apply() {
        let c = TrainConfig::from_toml_str(MINIMAL, &[]).unwrap();
        assert_eq!(c.train.batch_size, 2);
        assert_eq!(c.data.size, [512, 512]);
        let c = TrainConfig::from_toml_str(
            MINIMAL,
            &[
                "train.epochs=3".into(),
                "train.precision=bf16".into(),
                "optimizer.lr=1e-3".into(),
                "data.size=[64, 64]".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            (
                c.train.epochs,
                c.train.precision,
                c.optimizer.lr,
                c.data.size
            ),
            (3, Precision::Bf16, 1e-3, [64, 64])
        );
    }

    #[test]
    fn unknown_keys_are_named_with_the_valid_ones() {
        let e = TrainConfig::from_toml_str(MINIMAL, &["train.epoch=3".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("epoch") && e.contains("epochs") && e.contains("batch_size"),
            "{e}"
        );
        let e = TrainConfig::from_toml_str(&format!("{MINIMAL}[optimiser]\nlr = 1\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("optimiser") && e.contains("optimizer"), "{e}");
        let e = TrainConfig::from_toml_str(MINIMAL, &["train.batch_size=0".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("train.batch_size"), "{e}");
        let e = TrainConfig::from_toml_str(MINIMAL, &["nonsense".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("key=value"), "{e}");
    }

    #[test]
    fn recipe_keys_parse_and_bad_values_name_the_key() {
        let text = include_str!("../../../configs/sentinel2-b0.toml");
        let c = TrainConfig::from_toml_str(text, &[]).unwrap();
        assert_eq!(c.data.bands, Some(vec![3, 2, 1, 7]));
        assert_eq!(c.model.input_adapt, "repeat");
        let es = c.train.early_stopping.clone().unwrap();
        assert_eq!(
            (es.metric.as_str(), es.patience, es.min_delta),
            ("miou", 5, 0.001)
        );
        assert_eq!(c.loss.terms.as_ref().unwrap().len(), 2);
        let back = TrainConfig::from_toml_str(&c.to_toml_string(), &[]).unwrap();
        assert_eq!(c, back);
        for (o, want) in [
            (
                "model.input_adapt=\"copy\"",
                "`model.input_adapt` = \"copy\"",
            ),
            ("data.bands=[]", "`data.bands` = []"),
            ("data.bands=[1, 1]", "band 1 twice"),
            (
                "train.early_stopping.patience=0",
                "train.early_stopping.patience",
            ),
        ] {
            let e = TrainConfig::from_toml_str(text, &[o.to_string()])
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{o}: {e}");
        }
    }

    #[test]
    fn round_trips_through_toml() {
        let c = TrainConfig::from_toml_str(MINIMAL, &["train.epochs=4".into()]).unwrap();
        let back = TrainConfig::from_toml_str(&c.to_toml_string(), &[]).unwrap();
        assert_eq!(c, back);
    }
}
