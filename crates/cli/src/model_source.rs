//! `--model M`: a run directory, a checkpoint directory or an HF model directory, and the
//! preprocessing that goes with it.
//!
//! Where the preprocessing comes from, first found wins:
//! 1. a run's `preprocessing.json` (written when training starts: the exact processor used);
//! 2. an HF directory's `preprocessor_config.json` (HF `SegformerImageProcessor` keys);
//! 3. for runs made before `preprocessing.json`: the run's `config.toml` (`data.size`,
//!    `data.normalize`) and, for `normalize = "dataset"`, the dataset's `dataset.json`;
//! 4. HF's defaults (ImageNet mean/std, 512×512).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use augment::{Resample, SegformerProcessor};
use burn::tensor::backend::Backend;
use segformer::Segformer;
use serde_json::{Map, Value};
use tiles::{DatasetMeta, LabelMap, SampleKind};
use train::{RunPreprocessing, TrainConfig};

/// HF's `preprocessor_config.json` file name.
pub const HF_PREPROCESSOR_CONFIG: &str = "preprocessor_config.json";

/// Where a model's weights are and the run config it was trained with, when known.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// The HF directory (config.json + model.safetensors | pytorch_model.bin).
    pub weights: PathBuf,
    /// The run's `config.toml`, when the model comes from a segfit run.
    pub run_config: Option<TrainConfig>,
    /// The preprocessing stored next to the weights, when there is one.
    stored: Option<Stored>,
}

/// Preprocessing read from a file at `resolve` time.
#[derive(Clone, Debug)]
enum Stored {
    /// The run's `preprocessing.json`.
    Run(RunPreprocessing),
    /// The HF directory's `preprocessor_config.json`.
    Hf(SegformerProcessor),
}

/// A model's processor and, when known, the sample type it was made for.
#[derive(Clone, Debug)]
pub struct Preprocessing {
    /// The processor; `size` is the training (or HF) input size.
    pub processor: SegformerProcessor,
    /// The training images' sample type (what a `rescale_factor` of `None` divides by).
    pub sample_kind: Option<SampleKind>,
}

impl ModelSource {
    /// Resolves `path`: a run directory (its `checkpoints/best`, else `checkpoints/last`), a
    /// checkpoint directory inside a run, or any HF model directory.
    pub fn resolve(path: &Path) -> Result<Self> {
        if !path.exists() {
            bail!(
                "--model {}: no such directory; give a run directory, a checkpoint or an HF model directory",
                path.display()
            );
        }
        let checkpoints = path.join("checkpoints");
        if checkpoints.is_dir() {
            let weights = ["best", "last"]
                .iter()
                .map(|c| checkpoints.join(c))
                .find(|d| d.join("config.json").is_file())
                .with_context(|| {
                    format!(
                        "--model {}: the run has no checkpoints/best or checkpoints/last yet",
                        path.display()
                    )
                })?;
            let run_config = read_run_config(&path.join("config.toml"))?;
            let stored = RunPreprocessing::load(path)?.map(Stored::Run);
            return Ok(Self {
                weights,
                run_config,
                stored,
            });
        }
        if path.join("config.json").is_file() {
            // A checkpoint inside a run: <run>/checkpoints/<name>/.
            let (run_config, stored) = match path.parent().and_then(Path::parent) {
                Some(run) if path.join("trainer_state.json").is_file() => (
                    read_run_config(&run.join("config.toml"))?,
                    RunPreprocessing::load(run)?.map(Stored::Run),
                ),
                _ => (None, None),
            };
            let hf = path.join(HF_PREPROCESSOR_CONFIG);
            let stored = match stored {
                None if run_config.is_none() && hf.is_file() => {
                    Some(Stored::Hf(read_hf_preprocessor_config(&hf)?))
                }
                s => s,
            };
            return Ok(Self {
                weights: path.to_path_buf(),
                run_config,
                stored,
            });
        }
        bail!(
            "--model {}: not a model; expected a run directory (with checkpoints/) or a directory with config.json and model.safetensors",
            path.display()
        )
    }

    /// Loads the weights on `device`.
    pub fn load<B: Backend>(&self, device: &B::Device) -> Result<Segformer<B>> {
        let (model, _) = segformer::load_hf_dir::<B>(&self.weights, device)
            .with_context(|| format!("loading the model in {}", self.weights.display()))?;
        Ok(model)
    }

    /// The size the model's inputs were resized to: the run's `data.size`, the HF
    /// preprocessor's `size` (when `do_resize`), else `None` (no resize).
    pub fn input_size(&self) -> Option<(usize, usize)> {
        match &self.stored {
            Some(Stored::Run(r)) => r.processor.size,
            Some(Stored::Hf(p)) => p.size,
            None => self
                .run_config
                .as_ref()
                .map(|c| (c.data.size[0], c.data.size[1])),
        }
    }

    /// The sliding window `[height, width]`: [`ModelSource::input_size`], else `default`.
    pub fn window(&self, default: usize) -> [usize; 2] {
        self.input_size()
            .map(|(h, w)| [h, w])
            .unwrap_or([default, default])
    }

    /// The label map the run trained with, if it set one explicitly.
    pub fn labels(&self) -> Option<LabelMap> {
        self.run_config
            .as_ref()
            .and_then(|c| c.data.classes.clone())
    }

    /// The processor that preprocesses like training did (see the module docs for where it
    /// comes from), with `size` as given (`None` keeps the input size).
    pub fn processor(&self, size: Option<(usize, usize)>) -> Result<SegformerProcessor> {
        let mut p = self.preprocessing()?.processor;
        p.size = size;
        Ok(p)
    }

    /// The model's processor (with its training size) and the sample type it was made for.
    pub fn preprocessing(&self) -> Result<Preprocessing> {
        match &self.stored {
            Some(Stored::Run(r)) => Ok(Preprocessing {
                processor: r.processor.clone(),
                sample_kind: Some(r.sample_kind),
            }),
            Some(Stored::Hf(p)) => Ok(Preprocessing {
                processor: p.clone(),
                sample_kind: None,
            }),
            None => match &self.run_config {
                Some(cfg) => legacy_run_preprocessing(cfg),
                None => Ok(Preprocessing {
                    processor: SegformerProcessor::default(),
                    sample_kind: None,
                }),
            },
        }
    }
}

/// A run without `preprocessing.json` (made by an older segfit): rebuilt from its config and,
/// for dataset statistics, the dataset it was trained on.
fn legacy_run_preprocessing(cfg: &TrainConfig) -> Result<Preprocessing> {
    let root = &cfg.data.root;
    let meta = DatasetMeta::load(root)
        .with_context(|| format!("reading the band statistics of {}", root.display()))?;
    let mut processor = SegformerProcessor {
        size: Some((cfg.data.size[0], cfg.data.size[1])),
        ..Default::default()
    };
    if cfg.data.normalize == "dataset" {
        let meta = meta.as_ref().with_context(|| {
            format!(
                "the run has no {} (made by an older segfit) and normalises with dataset statistics, \
                 but {} has no dataset.json; put the training dataset back at data.root (the run's config.toml)",
                RunPreprocessing::FILE,
                root.display()
            )
        })?;
        train::normalize_with_dataset_stats(&mut processor, meta);
    }
    Ok(Preprocessing {
        processor,
        sample_kind: meta.map(|m| m.sample_kind),
    })
}

fn read_run_config(path: &Path) -> Result<Option<TrainConfig>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg =
        TrainConfig::from_toml_str(&text, &[]).with_context(|| format!("{}", path.display()))?;
    Ok(Some(cfg))
}

/// PIL's resampling codes, as HF stores them in `resample`.
const PIL_NEAREST: u64 = 0;
const PIL_BILINEAR: u64 = 2;

/// HF keys that carry no preprocessing.
const HF_METADATA_KEYS: [&str; 3] = [
    "image_processor_type",
    "feature_extractor_type",
    "processor_class",
];

/// Reads an HF `preprocessor_config.json` as a [`SegformerProcessor`], with HF's defaults for
/// missing keys (`do_resize`, 512×512, bilinear, rescale 1/255, ImageNet mean/std, no label
/// reduction). Keys `SegformerImageProcessor` does not use are ignored with a note.
pub fn read_hf_preprocessor_config(path: &Path) -> Result<SegformerProcessor> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON; fix or delete the file", path.display()))?;
    let Value::Object(map) = json else {
        bail!(
            "{}: expected a JSON object of SegformerImageProcessor settings, found {json}",
            path.display()
        );
    };
    let (p, ignored) = processor_from_hf(&map).with_context(|| format!("{}", path.display()))?;
    if !ignored.is_empty() {
        eprintln!(
            "note: {}: ignoring keys SegformerImageProcessor does not use: {}",
            path.display(),
            ignored.join(", ")
        );
    }
    Ok(p)
}

/// The processor the HF keys describe, and the keys it ignored.
fn processor_from_hf(map: &Map<String, Value>) -> Result<(SegformerProcessor, Vec<String>)> {
    let defaults = SegformerProcessor::default();
    for key in ["image_processor_type", "feature_extractor_type"] {
        if let Some(t) = map.get(key)
            && !t.as_str().is_some_and(|t| t.starts_with("Segformer"))
        {
            bail!(
                "{key} is {t}; segfit reads SegformerImageProcessor settings only; \
                 delete the file to use HF's defaults"
            );
        }
    }
    let bool_key = |key: &str, default: bool| -> Result<bool> {
        match map.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .with_context(|| format!("{key} is {v}; expected true or false")),
        }
    };
    let do_resize = bool_key("do_resize", true)?;
    let size = match map.get("size") {
        None => (512, 512),
        Some(v) => hf_size(v)?,
    };
    let resample = match map.get("resample") {
        None => Resample::Bilinear,
        Some(v) => match v.as_u64() {
            Some(PIL_NEAREST) => Resample::Nearest,
            Some(PIL_BILINEAR) => Resample::Bilinear,
            _ => bail!(
                "resample is {v}; segfit resizes with PIL's NEAREST ({PIL_NEAREST}) or BILINEAR ({PIL_BILINEAR}) only; set one of them"
            ),
        },
    };
    let rescale_factor = match map.get("rescale_factor") {
        None => 1.0 / 255.0,
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite())
            .with_context(|| format!("rescale_factor is {v}; expected a number such as 1/255"))?,
    };
    let floats = |key: &str, default: &[f32]| -> Result<Vec<f32>> {
        let bad = |v: &Value| format!("{key} is {v}; expected a number or a list of numbers");
        match map.get(key) {
            None => Ok(default.to_vec()),
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32).with_context(|| bad(x)))
                .collect(),
            Some(v) => v.as_f64().map(|f| vec![f as f32]).with_context(|| bad(v)),
        }
    };
    let image_mean = floats("image_mean", &defaults.image_mean)?;
    let image_std = floats("image_std", &defaults.image_std)?;
    if let Some(s) = image_std.iter().find(|s| !(**s > 0.0 && s.is_finite())) {
        bail!("image_std holds {s}; every standard deviation must be positive");
    }
    // HF's `from_dict` lets the legacy `reduce_labels` override `do_reduce_labels`.
    let do_reduce_labels = match map.get("reduce_labels") {
        Some(_) => bool_key("reduce_labels", false)?,
        None => bool_key("do_reduce_labels", false)?,
    };
    let processor = SegformerProcessor {
        size: do_resize.then_some(size),
        resample,
        do_rescale: bool_key("do_rescale", true)?,
        rescale_factor: Some(rescale_factor as f32),
        do_normalize: bool_key("do_normalize", true)?,
        image_mean,
        image_std,
        do_reduce_labels,
    };
    const USED: [&str; 11] = [
        "do_resize",
        "size",
        "resample",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_reduce_labels",
        "reduce_labels",
        "image_processor_type",
    ];
    let ignored = map
        .keys()
        .filter(|k| !USED.contains(&k.as_str()) && !HF_METADATA_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok((processor, ignored))
}

/// HF's `size`: `{"height": H, "width": W}`, or one number for a square (older configs).
fn hf_size(v: &Value) -> Result<(usize, usize)> {
    let side = |x: Option<&Value>| x.and_then(Value::as_u64).filter(|&n| n > 0);
    let hw = match v {
        Value::Object(m) => side(m.get("height")).zip(side(m.get("width"))),
        n => side(Some(n)).map(|n| (n, n)),
    };
    hw.map(|(h, w)| (h as usize, w as usize)).with_context(|| {
        format!(
            "size is {v}; SegformerImageProcessor takes {{\"height\": H, \"width\": W}} (or one number for a square)"
        )
    })
}

/// HF `SegformerImageProcessor` settings under which `((x * rescale_factor) - mean) / std`
/// (after resizing to `size`) gives `p`'s pixel values for images of `kind`.
pub fn hf_preprocessor_config(p: &SegformerProcessor, kind: SampleKind) -> Value {
    // `p.size` is `None` only for an HF source with `do_resize: false`; the size is then unused.
    let (h, w) = p.size.unwrap_or((512, 512));
    let rescale_factor = match p.rescale_factor {
        Some(f) => f as f64,
        None => 1.0 / kind.max_value() as f64,
    };
    serde_json::json!({
        "image_processor_type": "SegformerImageProcessor",
        "do_resize": p.size.is_some(),
        "size": { "height": h, "width": w },
        "resample": match p.resample {
            Resample::Nearest => PIL_NEAREST,
            Resample::Bilinear => PIL_BILINEAR,
        },
        "do_rescale": p.do_rescale,
        "rescale_factor": rescale_factor,
        "do_normalize": p.do_normalize,
        "image_mean": p.image_mean,
        "image_std": p.image_std,
        "do_reduce_labels": p.do_reduce_labels,
    })
}
