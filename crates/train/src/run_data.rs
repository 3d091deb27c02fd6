//! A run's data, resolved from its config: the train and validation splits with their
//! augmentation and preprocessing, the class names and the band count.

use std::sync::Arc;

use augment::{Pipeline, PipelineConfig, SegformerProcessor};
use tiles::SegDataset;

use crate::config::TrainConfig;
use crate::data::SampleSource;
use crate::error::TrainError;

/// Datasets and preprocessing of a run, resolved from its config.
pub(crate) struct RunData {
    pub train: Arc<SampleSource>,
    pub val: Arc<SampleSource>,
    pub class_names: Vec<String>,
    pub bands: usize,
    pub audit: Option<tiles::AuditReport>,
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
    let bands = first.image.bands;
    let [h, w] = cfg.data.size;
    let mut processor = SegformerProcessor {
        size: Some((h, w)),
        ..Default::default()
    };
    if cfg.data.normalize == "dataset" {
        let meta = train.meta().filter(|m| m.band_stats.len() == bands).ok_or_else(|| {
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
    })
}

/// Sets the processor's mean/std to the dataset's per-band statistics, in rescaled units (the
/// processor divides by the sample type's maximum first).
pub fn normalize_with_dataset_stats(processor: &mut SegformerProcessor, meta: &tiles::DatasetMeta) {
    let max = meta.sample_kind.max_value() as f64;
    processor.image_mean = meta
        .band_stats
        .iter()
        .map(|s| (s.mean / max) as f32)
        .collect();
    processor.image_std = meta
        .band_stats
        .iter()
        .map(|s| (s.std.max(1e-6) / max) as f32)
        .collect();
}
