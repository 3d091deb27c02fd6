//! The training configuration (TOML), with `--set key=value` overrides.

use std::path::PathBuf;

use augment::PipelineConfig;
use infer::Metric;
use segformer::InputAdapt;
use serde::{Deserialize, Serialize};
use tiles::LabelMap;

use crate::early_stop::EarlyStopping;
use crate::error::TrainError;
use crate::loss::LossConfig;
use crate::optim::AdamWConfig;
use crate::schedule::ScheduleConfig;

mod read;

pub(crate) use read::from_name;

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
    #[serde(default)]
    pub input_adapt: InputAdapt,
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
    #[serde(default)]
    pub normalize: Normalize,
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
/// `data.normalize`: where the processor's mean and standard deviation come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    /// HF's default ImageNet mean/std (RGB only).
    #[default]
    Imagenet,
    /// The dataset's per-band statistics from `dataset.json` (16-bit and multispectral imagery).
    Dataset,
}

/// Numerical precision of the forward and backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Full f32.
    #[default]
    #[serde(alias = "fp32")]
    F32,
    /// bfloat16 matmuls and convolutions, f32 norms/softmax/loss and master weights.
    Bf16,
    /// float16 like bf16, with dynamic loss scaling.
    #[serde(alias = "fp16")]
    F16,
}

impl Precision {
    /// The config name: `f32`, `bf16` or `f16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// The dtype the model computes in ([`segformer::Segformer::with_compute_dtype`]; `None`:
    /// f32).
    pub fn compute_dtype(self) -> Option<burn::tensor::FloatDType> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(burn::tensor::FloatDType::BF16),
            Precision::F16 => Some(burn::tensor::FloatDType::F16),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `f32`, `bf16` or `f16` (any case; `fp32`/`fp16` too), the words `train.precision` takes.
impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        from_name(s)
    }
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
    pub best_metric: Metric,
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
            best_metric: Metric::Miou,
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
    /// Memory for the whole training process, e.g. `"8GiB"` (on a GPU: the device's memory);
    /// the planner picks micro-batch and accumulation to fit.
    pub budget: Option<String>,
    /// Effective batch size (micro-batch × accumulation) to keep when a budget is given.
    pub effective_batch: Option<usize>,
    /// The machine the run is on, which the binary measures and passes in (never read from
    /// TOML): with it, worker counts are bounded by its cores and the run's predicted memory
    /// by its RAM before anything is allocated ([`crate::fit_memory`]).
    #[serde(skip)]
    pub host: Option<Host>,
}

/// The machine a run is on: what bounds the loader's threads and the run's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// CPU cores available to the process.
    pub cores: usize,
    /// Physical memory, in bytes (e.g. `MemTotal` of `/proc/meminfo`).
    pub memory: u64,
}

/// The largest side, in pixels, of `data.size` (and of the planner's inputs): far above any
/// machine's memory, it only keeps the arithmetic on sizes exact; what fits is decided by the
/// memory planner against [`Host::memory`].
pub const MAX_SIDE: usize = 1 << 20;
/// The largest micro-batch, accumulation or effective batch accepted.
pub const MAX_BATCH: usize = 1 << 16;
/// Loader threads per core at most (and [`MAX_WORKERS`] whatever the machine).
pub const WORKERS_PER_CORE: usize = 4;
/// Loader threads at most, on any machine.
pub const MAX_WORKERS: usize = 1024;
/// Samples decoded ahead at most (what fits is also checked against the machine's memory).
pub const MAX_PREFETCH: usize = 4096;
/// Validation tiles in the overlay grid at most.
pub const MAX_OVERLAYS: usize = 256;
/// Passes over the training split at most.
pub const MAX_EPOCHS: usize = 1 << 20;

impl TrainConfig {
    /// Checks values the types cannot, and bounds every count and size before anything is
    /// allocated (what fits the machine's memory is [`crate::fit_memory`]'s check).
    pub fn validate(&self) -> Result<(), TrainError> {
        let t = &self.train;
        let bad = |k: &str, why: &str| Err(TrainError::Config(format!("`{k}` {why}")));
        for (key, value, max) in [
            ("train.batch_size", t.batch_size, MAX_BATCH),
            ("train.accumulation_steps", t.accumulation_steps, MAX_BATCH),
            ("train.epochs", t.epochs, MAX_EPOCHS),
            ("train.workers", t.workers, MAX_WORKERS),
            ("train.prefetch", t.prefetch, MAX_PREFETCH),
            ("train.eval_every", t.eval_every, MAX_EPOCHS),
            ("train.log_every", t.log_every, usize::MAX),
        ] {
            check_count(key, value, 1, max)?;
        }
        check_count("train.overlay_samples", t.overlay_samples, 0, MAX_OVERLAYS)?;
        if t.max_bad_steps == 0 {
            return bad(
                "train.max_bad_steps",
                "= 0 would stop at the first step; use 1 or more (default 5)",
            );
        }
        if let Some(n) = self.memory.effective_batch {
            check_count("memory.effective_batch", n, 1, MAX_BATCH)?;
        }
        if t.batch_size * t.accumulation_steps > MAX_BATCH {
            return Err(TrainError::Config(format!(
                "`train.batch_size` × `train.accumulation_steps` = {} × {} is more than {MAX_BATCH} \
                 images per step; lower one of them",
                t.batch_size, t.accumulation_steps
            )));
        }
        for (key, p) in [
            ("model.drop_path_rate", self.model.drop_path_rate),
            (
                "model.classifier_dropout_prob",
                self.model.classifier_dropout_prob,
            ),
        ] {
            if let Some(p) = p
                && !(0.0..1.0).contains(&p)
            {
                return Err(TrainError::Config(format!(
                    "`{key}` = {p} is not a probability; expected a number in [0, 1)"
                )));
            }
        }
        validate_numbers(self)?;
        augment::Pipeline::new(&self.augment)
            .map_err(|e| TrainError::Config(format!("[augment] {e}")))?;
        let [h, w] = self.data.size;
        if h == 0 || w == 0 || h > MAX_SIDE || w > MAX_SIDE {
            return Err(TrainError::Config(format!(
                "`data.size` = [{h}, {w}] is not a size; expected [height, width] with both \
                 between 1 and {MAX_SIDE} (e.g. [512, 512])"
            )));
        }
        if !(self.optimizer.lr > 0.0 && self.optimizer.lr.is_finite()) {
            return bad("optimizer.lr", "must be a positive number");
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

/// The optimizer's and the schedule's numbers are finite and in range (`optimizer.lr` is
/// checked with the rest of [`TrainConfig::validate`]).
fn validate_numbers(cfg: &TrainConfig) -> Result<(), TrainError> {
    let (o, s) = (&cfg.optimizer, &cfg.schedule);
    let unit = |x: f64| (0.0..1.0).contains(&x);
    let non_negative = |x: f64| x.is_finite() && x >= 0.0;
    let positive = |x: f64| x.is_finite() && x > 0.0;
    for (key, value, ok, expected) in [
        (
            "optimizer.betas[0]",
            o.betas.0,
            unit(o.betas.0),
            "a number in [0, 1)",
        ),
        (
            "optimizer.betas[1]",
            o.betas.1,
            unit(o.betas.1),
            "a number in [0, 1)",
        ),
        (
            "optimizer.eps",
            o.eps,
            positive(o.eps),
            "a finite number > 0",
        ),
        (
            "optimizer.weight_decay",
            o.weight_decay,
            non_negative(o.weight_decay),
            "a finite number >= 0",
        ),
        (
            "optimizer.head_lr_mult",
            o.head_lr_mult,
            positive(o.head_lr_mult),
            "a finite number > 0",
        ),
        (
            "optimizer.clip_grad_norm",
            o.clip_grad_norm.unwrap_or(1.0),
            o.clip_grad_norm.is_none_or(positive),
            "a finite number > 0",
        ),
        (
            "schedule.warmup_ratio",
            s.warmup_ratio,
            non_negative(s.warmup_ratio) && s.warmup_ratio <= 1.0,
            "a number in [0, 1]",
        ),
        (
            "schedule.power",
            s.power,
            non_negative(s.power),
            "a finite number >= 0",
        ),
        (
            "schedule.min_lr",
            s.min_lr,
            non_negative(s.min_lr),
            "a finite number >= 0",
        ),
    ] {
        if !ok {
            return Err(TrainError::Config(format!(
                "`{key}` = {value} is out of range; expected {expected}"
            )));
        }
    }
    Ok(())
}

/// `key` = `value` lies in `[min, max]`, or the error says so.
fn check_count(key: &str, value: usize, min: usize, max: usize) -> Result<(), TrainError> {
    if value < min {
        return Err(TrainError::Config(format!(
            "`{key}` = {value} is too small; expected at least {min}"
        )));
    }
    if value > max {
        return Err(TrainError::Config(format!(
            "`{key}` = {value} is too large; expected at most {max}"
        )));
    }
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
        let text = include_str!("../../../../configs/sentinel2-b0.toml");
        let c = TrainConfig::from_toml_str(text, &[]).unwrap();
        assert_eq!(c.data.bands, Some(vec![3, 2, 1, 7]));
        assert_eq!(c.model.input_adapt, InputAdapt::Repeat);
        let es = c.train.early_stopping.clone().unwrap();
        assert_eq!(
            (es.metric, es.patience, es.min_delta),
            (Metric::Miou, 5, 0.001)
        );
        assert_eq!(c.loss.terms.as_ref().unwrap().len(), 2);
        let back = TrainConfig::from_toml_str(&c.to_toml_string(), &[]).unwrap();
        assert_eq!(c, back);
        for (o, want) in [
            (
                "model.input_adapt=\"copy\"",
                "`model.input_adapt = \"copy\"`: unknown variant `copy`, expected one of `repeat`, `mean`, `random`",
            ),
            (
                "train.best_metric=\"iou\"",
                "`train.best_metric = \"iou\"`: unknown variant `iou`, expected one of `miou`, `mean_f1`, `pixel_accuracy`, `val_loss`",
            ),
            (
                "data.normalize=\"minmax\"",
                "`data.normalize = \"minmax\"`: unknown variant `minmax`, expected `imagenet` or `dataset`",
            ),
            ("data.bands=[]", "`data.bands` = []"),
            ("data.bands=[1, 1]", "band 1 twice"),
            (
                "train.early_stopping.patience=0",
                "train.early_stopping.patience",
            ),
            (
                "train.early_stopping.metric=\"iou\"",
                "`train.early_stopping.metric = \"iou\"`: unknown variant `iou`",
            ),
        ] {
            let e = TrainConfig::from_toml_str(text, &[o.to_string()])
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{o}: {e}");
        }
    }

    #[test]
    fn precision_flags_take_the_config_words() {
        for p in [Precision::F32, Precision::Bf16, Precision::F16] {
            assert_eq!(p.name().parse(), Ok(p));
            assert_eq!(p.to_string().to_uppercase().parse(), Ok(p));
        }
        assert_eq!("fp16".parse(), Ok(Precision::F16));
        let e = "f64".parse::<Precision>().unwrap_err();
        assert!(e.contains("`f64`") && e.contains("`bf16`"), "{e}");
    }

    #[test]
    fn round_trips_through_toml() {
        let c = TrainConfig::from_toml_str(MINIMAL, &["train.epochs=4".into()]).unwrap();
        let back = TrainConfig::from_toml_str(&c.to_toml_string(), &[]).unwrap();
        assert_eq!(c, back);
    }
}
