//! `--model M`: a run directory, a checkpoint directory or an HF model directory, and the
//! preprocessing that goes with it.
//!
//! Where the preprocessing comes from, first found wins:
//! 1. a run's `preprocessing.json` (written when training starts: the exact processor used);
//! 2. an HF directory's `preprocessor_config.json` (HF `SegformerImageProcessor` keys, read by
//!    `hf_preprocessor.rs`);
//! 3. for runs made before `preprocessing.json`: the run's `config.toml` (`data.size`,
//!    `data.normalize`) and, for `normalize = "dataset"`, the dataset's `dataset.json`;
//! 4. HF's defaults (ImageNet mean/std, 512×512).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use augment::SegformerProcessor;
use burn::tensor::backend::Backend;
use segformer::Segformer;
use tiles::{DatasetMeta, LabelMap, SampleKind};
use train::{RunPreprocessing, TrainConfig};

use crate::hf_preprocessor::{HF_PREPROCESSOR_CONFIG, read_hf_preprocessor_config};

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
        band_indices: cfg.data.bands.clone(),
        ..Default::default()
    };
    if cfg.data.normalize == train::Normalize::Dataset {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hf_preprocessor::tests::hf_formula;
    use augment::Resample;
    use tiles::{Mask, Raster, RasterData};

    /// A directory `resolve` takes for an HF model (the weights are not read), with `preprocessor`
    /// as its preprocessor_config.json.
    fn hf_dir(preprocessor: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        std::fs::write(dir.path().join(HF_PREPROCESSOR_CONFIG), preprocessor).unwrap();
        dir
    }

    fn error_of(preprocessor: &str) -> String {
        let dir = hf_dir(preprocessor);
        format!("{:#}", ModelSource::resolve(dir.path()).unwrap_err())
    }

    #[test]
    fn hf_preprocessor_config_sets_size_rescale_mean_std_resample_and_label_reduction() {
        let dir = hf_dir(
            r#"{"feature_extractor_type": "SegformerFeatureExtractor", "size": {"height": 4, "width": 6},
                "resample": 0, "rescale_factor": 0.01, "image_mean": [0.1, 0.2, 0.3],
                "image_std": [0.5, 0.25, 0.125], "do_reduce_labels": true, "crop_pct": 0.9}"#,
        );
        let source = ModelSource::resolve(dir.path()).unwrap();
        assert_eq!(source.input_size(), Some((4, 6)));
        assert_eq!(source.window(512), [4, 6]);

        // No resize (predict's sliding window): the formula, pixel by pixel.
        let (mean, std) = ([0.1, 0.2, 0.3], [0.5, 0.25, 0.125]);
        let samples: Vec<u8> = (0..2 * 3 * 3).map(|i| (i * 13) as u8).collect();
        let image = Raster::new(3, 2, 3, RasterData::U8(samples.clone())).unwrap();
        let out = source
            .processor(None)
            .unwrap()
            .process(&image, None)
            .unwrap();
        assert_eq!((out.height, out.width), (2, 3));
        for (i, &x) in samples.iter().enumerate() {
            let (px, band) = (i / 3, i % 3);
            let want = hf_formula(x as f64, 0.01, mean[band], std[band]);
            let got = out.pixel_values[band * 6 + px] as f64;
            assert!((got - want).abs() < 1e-6, "sample {i}: {got} vs {want}");
        }

        // eval's resize to `size`, nearest: every source pixel becomes a 2×2 block; labels
        // reduced (0 -> 255, l -> l - 1).
        let mask = Mask::new(3, 2, vec![0, 1, 2, 255, 3, 1]).unwrap();
        let out = source
            .processor(source.input_size())
            .unwrap()
            .process(&image, Some(&mask))
            .unwrap();
        assert_eq!((out.height, out.width), (4, 6));
        let (y, x) = (3, 5); // from source pixel (1, 2)
        let want = hf_formula(samples[(3 + 2) * 3] as f64, 0.01, 0.1, 0.5);
        assert!((out.pixel_values[y * 6 + x] as f64 - want).abs() < 1e-6);
        let labels = out.labels.unwrap();
        assert_eq!(&labels[..6], &[255, 255, 0, 0, 1, 1]);
        assert_eq!(&labels[18..], &[255, 255, 2, 2, 0, 0]);
    }

    #[test]
    fn hf_defaults_and_legacy_keys() {
        let source = ModelSource::resolve(hf_dir("{}").path()).unwrap();
        let p = source.processor(None).unwrap();
        assert_eq!(source.input_size(), Some((512, 512)));
        assert_eq!(p.rescale_factor, Some(1.0f32 / 255.0));
        assert_eq!(p.image_mean, vec![0.485, 0.456, 0.406]);
        assert_eq!(p.image_std, vec![0.229, 0.224, 0.225]);
        assert!(!p.do_reduce_labels && p.do_rescale && p.do_normalize);
        assert_eq!(p.resample, Resample::Bilinear);

        // nvidia/mit-b0's file: `size` one number, the legacy `reduce_labels` winning over
        // `do_reduce_labels` as in HF's `from_dict`, one mean/std for every band.
        let dir = hf_dir(
            r#"{"size": 32, "reduce_labels": true, "do_reduce_labels": false, "image_mean": 0.5,
                "image_std": 0.25, "do_resize": true}"#,
        );
        let p = ModelSource::resolve(dir.path())
            .unwrap()
            .processor(Some((32, 32)))
            .unwrap();
        assert_eq!((p.size, p.do_reduce_labels), (Some((32, 32)), true));
        assert_eq!((p.image_mean, p.image_std), (vec![0.5], vec![0.25]));

        let no_resize = hf_dir(r#"{"do_resize": false}"#);
        assert_eq!(
            ModelSource::resolve(no_resize.path()).unwrap().input_size(),
            None
        );
        // Without a preprocessor_config.json: HF's defaults, no resize in eval (as before).
        let bare = tempfile::tempdir().unwrap();
        std::fs::write(bare.path().join("config.json"), "{}").unwrap();
        let source = ModelSource::resolve(bare.path()).unwrap();
        assert_eq!((source.input_size(), source.window(64)), (None, [64, 64]));
        assert_eq!(source.processor(None).unwrap().rescale_factor, None);
    }

    #[test]
    fn unsupported_hf_settings_are_one_line_errors_naming_the_key() {
        for (json, words) in [
            (r#"{"resample": 3}"#, &["resample is 3", "BILINEAR (2)"][..]),
            (
                r#"{"size": {"shortest_edge": 512}}"#,
                &["size is", "height"],
            ),
            (
                r#"{"image_processor_type": "DetrImageProcessor"}"#,
                &["DetrImageProcessor"],
            ),
            (r#"{"image_std": [0.5, 0]}"#, &["image_std holds 0"]),
            (r#"{"image_mean": "x"}"#, &["image_mean is \"x\""]),
            (
                r#"{"do_rescale": 1}"#,
                &["do_rescale is 1", "true or false"],
            ),
            ("not json", &["not JSON"]),
        ] {
            let e = error_of(json);
            assert!(e.contains(HF_PREPROCESSOR_CONFIG), "{json}: {e}");
            assert!(!e.contains('\n'), "{json}: {e}");
            for w in words {
                assert!(e.contains(w), "{json}: {e}");
            }
        }
    }

    /// A run directory whose dataset does not exist: checkpoints/last and a config.toml that
    /// normalises with dataset statistics.
    fn run_without_dataset() -> tempfile::TempDir {
        let run = tempfile::tempdir().unwrap();
        let last = run.path().join("checkpoints/last");
        std::fs::create_dir_all(&last).unwrap();
        std::fs::write(last.join("config.json"), "{}").unwrap();
        let root = run.path().join("gone");
        std::fs::write(
            run.path().join("config.toml"),
            format!(
                "[model]\npreset = \"mit-b0\"\n[data]\nroot = \"{}\"\nsize = [8, 8]\nnormalize = \"dataset\"\n",
                root.display()
            ),
        )
        .unwrap();
        run
    }

    #[test]
    fn a_run_predicts_from_its_preprocessing_json_without_its_dataset() {
        let run = run_without_dataset();
        std::fs::write(
            run.path().join(RunPreprocessing::FILE),
            r#"{"version": 1, "sample_kind": "u16", "bands": 2, "processor": {
                "size": [8, 8], "resample": "bilinear", "do_rescale": true, "rescale_factor": null,
                "do_normalize": true, "image_mean": [0.25, 0.5], "image_std": [0.125, 0.0625],
                "do_reduce_labels": false}}"#,
        )
        .unwrap();
        let source = ModelSource::resolve(run.path()).unwrap();
        assert_eq!(source.input_size(), Some((8, 8)));
        let pre = source.preprocessing().unwrap();
        assert_eq!(pre.sample_kind, Some(SampleKind::U16));
        let image = Raster::new(1, 1, 2, RasterData::U16(vec![30000, 65535])).unwrap();
        let out = source
            .processor(None)
            .unwrap()
            .process(&image, None)
            .unwrap();
        let want = [
            (30000.0 / 65535.0 - 0.25) / 0.125,
            (65535.0 / 65535.0 - 0.5) / 0.0625,
        ];
        for (got, want) in out.pixel_values.iter().zip(want) {
            assert!((*got as f64 - want).abs() < 1e-5, "{got} vs {want}");
        }
    }

    #[test]
    fn an_old_run_without_its_dataset_says_what_to_restore() {
        let run = run_without_dataset();
        let source = ModelSource::resolve(run.path()).unwrap();
        let e = format!("{:#}", source.processor(None).unwrap_err());
        assert!(
            e.contains("preprocessing.json") && e.contains("gone") && e.contains("data.root"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
}
