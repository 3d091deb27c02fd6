//! A run's data, resolved from its config: the train and validation splits with their
//! augmentation and preprocessing, the class names and the band count.

use std::path::Path;
use std::sync::Arc;

use augment::{Pipeline, PipelineConfig, SegformerProcessor};
use serde::{Deserialize, Serialize};
use tiles::{SampleKind, SegDataset};

use crate::config::{Normalize, TrainConfig};
use crate::data::SampleSource;
use crate::error::TrainError;

/// Datasets and preprocessing of a run, resolved from its config.
pub(crate) struct RunData {
    pub train: Arc<SampleSource>,
    pub val: Arc<SampleSource>,
    pub class_names: Vec<String>,
    pub bands: usize,
    pub audit: Option<tiles::AuditReport>,
    /// The name of the train split (`data.train_split`).
    pub train_split: String,
    /// What the run writes to `preprocessing.json`.
    pub preprocessing: RunPreprocessing,
}

impl RunData {
    /// Pixels per class in the train split: the audit's counts, else counted over the split's
    /// masks (what `loss.class_weights = "auto"` weighs by).
    pub fn train_class_pixels(&self) -> Result<Vec<u64>, TrainError> {
        if let Some(split) = self
            .audit
            .as_ref()
            .and_then(|a| a.splits.get(&self.train_split))
        {
            return Ok(split.class_pixels.clone());
        }
        let split = &self.train.dataset;
        let mut counts = vec![0u64; self.class_names.len()];
        for i in 0..split.len() {
            if let Some(mask) = split.get(i)?.mask {
                for &v in &mask.data {
                    if let Some(c) = counts.get_mut(v as usize) {
                        *c += 1;
                    }
                }
            }
        }
        Ok(counts)
    }
}

/// The preprocessing a run trained with, kept in the run as `preprocessing.json` (written when
/// training starts) so that the run predicts, evaluates and exports without its dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPreprocessing {
    /// Format version (1).
    pub version: u32,
    /// The training images' sample type: what a `processor.rescale_factor` of `None` divides
    /// by (255 for u8, 65535 for u16, 1 for f32).
    pub sample_kind: SampleKind,
    /// The bands the model sees: the training images' band count, or the length of
    /// `processor.band_indices` (`data.bands`).
    pub bands: usize,
    /// The processor every training and validation sample went through (after augmentation):
    /// `image_mean`/`image_std` are in rescaled units.
    pub processor: SegformerProcessor,
}

impl RunPreprocessing {
    /// The file name inside a run directory.
    pub const FILE: &str = "preprocessing.json";

    /// The factor samples were multiplied by: the processor's `rescale_factor`, else
    /// `1 / max` of the training sample type; 1 without `do_rescale`.
    pub fn rescale_factor(&self) -> f32 {
        match (self.processor.do_rescale, self.processor.rescale_factor) {
            (false, _) => 1.0,
            (true, Some(f)) => f,
            (true, None) => 1.0 / self.sample_kind.max_value(),
        }
    }

    /// Reads `<run_dir>/preprocessing.json`; `None` when the run has none (runs made before it
    /// existed).
    ///
    /// # Errors
    /// [`TrainError::Io`] naming the file when it cannot be read or is not such a file.
    pub fn load(run_dir: &Path) -> Result<Option<Self>, TrainError> {
        let path = run_dir.join(Self::FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
        let p: Self = serde_json::from_str(&text).map_err(|e| {
            let msg = format!("not a segfit preprocessing file ({e}); delete it to fall back to the dataset's dataset.json");
            TrainError::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, msg))
        })?;
        if p.version != 1 {
            let msg = format!(
                "version {} is not 1; this segfit reads version 1",
                p.version
            );
            return Err(TrainError::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, msg),
            ));
        }
        Ok(Some(p))
    }

    /// Writes `<run_dir>/preprocessing.json` atomically.
    pub(crate) fn save(&self, run_dir: &Path) -> Result<(), TrainError> {
        let path = run_dir.join(Self::FILE);
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| TrainError::io(&path, std::io::Error::other(e)))?;
        crate::io::write_atomic(&path, json.as_bytes()).map_err(|e| TrainError::io(&path, e))
    }
}

pub(crate) fn resolve_data(cfg: &TrainConfig) -> Result<RunData, TrainError> {
    let open = |split: &str| match &cfg.data.classes {
        Some(l) => SegDataset::open_with_labels(&cfg.data.root, split, l.clone()),
        None => SegDataset::open(&cfg.data.root, split),
    };
    // Catch data mistakes (unpaired files, unmapped mask values, size mismatches) before any
    // compute is spent; the prepared dataset's own label map is what gets audited.
    let audit = match &cfg.data.classes {
        None => Some(tiles::audit_prepared(&cfg.data.root)?),
        Some(_) => None,
    };
    let train = open(&cfg.data.train_split)?;
    let val = open(&cfg.data.val_split)?;
    if train.is_empty() {
        return Err(TrainError::Config(format!(
            "the `{}` split of {} is empty; prepare data with `segfit prepare`",
            cfg.data.train_split,
            cfg.data.root.display()
        )));
    }
    let class_names = train.labels().class_names();
    let first = train.get(0)?;
    let stored = first.image.bands;
    if let Some(b) = &cfg.data.bands {
        crate::bands::check_against(b, stored).map_err(TrainError::Config)?;
    }
    let [h, w] = cfg.data.size;
    let mut processor = SegformerProcessor {
        size: Some((h, w)),
        band_indices: cfg.data.bands.clone(),
        ..Default::default()
    };
    // The bands the model sees (`data.bands` picks and orders them in the processor).
    let bands = processor.output_bands(stored);
    if cfg.data.normalize == Normalize::Dataset {
        let meta = train.meta().filter(|m| m.band_stats.len() == stored).ok_or_else(|| {
            TrainError::Config(format!(
                "`data.normalize = \"dataset\"` needs per-band statistics in {}/dataset.json; re-run `segfit prepare`",
                cfg.data.root.display()
            ))
        })?;
        normalize_with_dataset_stats(&mut processor, meta);
    } else if bands != 3 {
        return Err(TrainError::Config(format!(
            "the images have {bands} bands but `data.normalize = \"imagenet\"` has statistics for 3; \
             set data.normalize = \"dataset\""
        )));
    }
    let pipeline = Pipeline::new(&cfg.augment)?;
    let seed = cfg.train.seed;
    let preprocessing = RunPreprocessing {
        version: 1,
        sample_kind: first.image.kind(),
        bands,
        processor: processor.clone(),
    };
    Ok(RunData {
        train: Arc::new(SampleSource {
            dataset: train,
            pipeline,
            processor: processor.clone(),
            seed,
        }),
        val: Arc::new(SampleSource {
            dataset: val,
            pipeline: Pipeline::new(&PipelineConfig::default())?,
            processor,
            seed,
        }),
        class_names,
        bands,
        audit,
        train_split: cfg.data.train_split.clone(),
        preprocessing,
    })
}

/// Sets the processor's mean/std to the dataset's per-band statistics, in rescaled units (the
/// processor divides by the sample type's maximum first), for the bands of
/// `processor.band_indices` in that order (all when `None`).
pub fn normalize_with_dataset_stats(processor: &mut SegformerProcessor, meta: &tiles::DatasetMeta) {
    let max = meta.sample_kind.max_value() as f64;
    let stats: Vec<&tiles::BandStats> = match &processor.band_indices {
        Some(b) => b.iter().filter_map(|&i| meta.band_stats.get(i)).collect(),
        None => meta.band_stats.iter().collect(),
    };
    processor.image_mean = stats.iter().map(|s| (s.mean / max) as f32).collect();
    processor.image_std = stats
        .iter()
        .map(|s| (s.std.max(1e-6) / max) as f32)
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_bands_reach_the_model_input_in_the_chosen_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        let opts = tiles::SyntheticOptions {
            count: 4,
            size: 16,
            seed: 1,
            out: root.clone(),
            multispectral: true,
            ..Default::default()
        };
        tiles::prepare_synthetic(&opts).unwrap();
        let text = format!(
            "[model]\npreset = \"mit-tiny\"\n[data]\nroot = {:?}\nsize = [16, 16]\nnormalize = \"dataset\"\nbands = [3, 0]\n",
            root.to_str().unwrap()
        );
        let cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
        let data = resolve_data(&cfg).unwrap();
        assert_eq!(data.bands, 2);
        assert_eq!(data.preprocessing.processor.band_indices, Some(vec![3, 0]));
        // The model built for the run takes the two selected bands.
        let model = crate::model::model_config(&cfg.model, &data.class_names, data.bands).unwrap();
        assert_eq!(model.num_channels, 2);

        // Pixel values: channel 0 is stored band 3 (NIR), channel 1 band 0 (red), each
        // normalised with its own band's statistics from dataset.json.
        let raw = data.train.dataset.get(0).unwrap().image;
        let meta = data.train.dataset.meta().unwrap().clone();
        let processed = data.train.load(0, 0).unwrap();
        let hw = raw.width * raw.height;
        let max = meta.sample_kind.max_value() as f64;
        for (channel, band) in [(0usize, 3usize), (1, 0)] {
            let (mean, std) = (
                meta.band_stats[band].mean,
                meta.band_stats[band].std.max(1e-6),
            );
            for p in [0, 5, hw - 1] {
                let x = raw.get_f32(p / raw.width, p % raw.width, band) as f64;
                let want = ((x / max) - mean / max) / (std / max);
                let got = processed.pixel_values[channel * hw + p] as f64;
                assert!(
                    (got - want).abs() < 1e-4,
                    "channel {channel} pixel {p}: {got} vs {want}"
                );
            }
        }

        // A band the images do not have is named with the fix.
        let bad = TrainConfig::from_toml_str(&text, &["data.bands=[4, 0]".into()]).unwrap();
        let e = resolve_data(&bad).err().unwrap().to_string();
        assert!(
            e.contains("data.bands") && e.contains("band 4") && e.contains("4 bands"),
            "{e}"
        );
    }

    #[test]
    fn preprocessing_json_round_trips_and_bad_files_name_themselves() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RunPreprocessing::load(dir.path()).unwrap(), None);
        let p = RunPreprocessing {
            version: 1,
            sample_kind: SampleKind::U16,
            bands: 4,
            processor: SegformerProcessor {
                size: Some((32, 48)),
                image_mean: vec![0.1, 0.2, 0.3, 0.4],
                image_std: vec![0.5, 0.25, 0.125, 0.0625],
                ..Default::default()
            },
        };
        p.save(dir.path()).unwrap();
        assert_eq!(RunPreprocessing::load(dir.path()).unwrap(), Some(p.clone()));
        assert_eq!(p.rescale_factor(), 1.0 / 65535.0);

        let path = dir.path().join(RunPreprocessing::FILE);
        for (text, want) in [
            ("{\"version\": 1}", "not a segfit preprocessing file"),
            (
                &std::fs::read_to_string(&path)
                    .unwrap()
                    .replace("\"version\": 1", "\"version\": 2"),
                "version 2 is not 1",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = RunPreprocessing::load(dir.path()).unwrap_err().to_string();
            assert!(
                e.contains(RunPreprocessing::FILE) && e.contains(want),
                "{e}"
            );
        }
    }
}
