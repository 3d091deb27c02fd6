//! `--model M`: a run directory, a checkpoint directory or an HF model directory, and the
//! preprocessing that goes with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use augment::SegformerProcessor;
use burn::tensor::backend::Backend;
use segformer::Segformer;
use tiles::{DatasetMeta, LabelMap};
use train::TrainConfig;

/// Where a model's weights are and the run config it was trained with, when known.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// The HF directory (config.json + model.safetensors | pytorch_model.bin).
    pub weights: PathBuf,
    /// The run's `config.toml`, when the model comes from a segfit run.
    pub run_config: Option<TrainConfig>,
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
            return Ok(Self {
                weights,
                run_config,
            });
        }
        if path.join("config.json").is_file() {
            // A checkpoint inside a run: <run>/checkpoints/<name>/.
            let run_config = match path.parent().and_then(Path::parent) {
                Some(run) if path.join("trainer_state.json").is_file() => {
                    read_run_config(&run.join("config.toml"))?
                }
                _ => None,
            };
            return Ok(Self {
                weights: path.to_path_buf(),
                run_config,
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

    /// The training window `[height, width]`: the run's `data.size`, else `default`.
    pub fn window(&self, default: usize) -> [usize; 2] {
        self.run_config
            .as_ref()
            .map(|c| c.data.size)
            .unwrap_or([default, default])
    }

    /// The label map the run trained with, if it set one explicitly.
    pub fn labels(&self) -> Option<LabelMap> {
        self.run_config
            .as_ref()
            .and_then(|c| c.data.classes.clone())
    }

    /// The processor that normalises like training did: the run's `data.normalize` (ImageNet
    /// mean/std, or the dataset's band statistics), HF's ImageNet defaults without a run.
    /// `size` as given (`None` keeps the input size).
    pub fn processor(&self, size: Option<(usize, usize)>) -> Result<SegformerProcessor> {
        let mut p = SegformerProcessor {
            size,
            ..Default::default()
        };
        let Some(cfg) = &self.run_config else {
            return Ok(p);
        };
        if cfg.data.normalize == "dataset" {
            let root = &cfg.data.root;
            let meta = DatasetMeta::load(root)
                .with_context(|| format!("reading the band statistics of {}", root.display()))?
                .with_context(|| {
                    format!(
                        "the run normalises with dataset statistics but {} has no dataset.json; \
                         keep the training dataset in place (data.root in the run's config.toml)",
                        root.display()
                    )
                })?;
            train::normalize_with_dataset_stats(&mut p, &meta);
        }
        Ok(p)
    }
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
