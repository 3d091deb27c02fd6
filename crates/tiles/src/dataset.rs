//! A lazy dataset over a prepared split layout: samples are decoded on demand, through its own
//! [`SegDataset::get`] or burn-dataset's [`Dataset`](burn_dataset::Dataset) trait.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raster::Sample;

use crate::error::TilesError;
use crate::io::{read_image, read_mask};
use crate::labels::LabelMap;
use crate::listing::list_images;
use crate::meta::DatasetMeta;

/// One split of a prepared dataset (`root/images/<split>/`, `root/masks/<split>/`).
///
/// Holds only file names and the label map; [`SegDataset::get`] decodes one sample at a time,
/// so the dataset can be any size. `Send + Sync`: loader threads can share it by reference.
///
/// It is also a burn-dataset [`Dataset`](burn_dataset::Dataset) of [`SampleResult`]s, so it
/// composes with burn's `ShuffledDataset`, `PartialDataset`, `ComposedDataset` and
/// `MapperDataset` and feeds burn's data loader (see the crate docs).
#[derive(Clone, Debug)]
pub struct SegDataset {
    items: Vec<(String, PathBuf, PathBuf)>,
    labels: LabelMap,
    meta: Option<DatasetMeta>,
}

const MASK_EXTS: [&str; 3] = ["png", "tif", "tiff"];

impl SegDataset {
    /// Opens `split` (`train` or `val`) of a dataset prepared by `prepare_*`, using the label map
    /// in its `dataset.json`.
    pub fn open(root: &Path, split: &str) -> Result<Self, TilesError> {
        let meta = DatasetMeta::load(root)?.ok_or_else(|| TilesError::Metadata {
            path: root.join(crate::meta::DATASET_JSON),
            reason: "not found; run `segfit prepare` first, or open the folder with SegDataset::open_with_labels".into(),
        })?;
        let mut ds = Self::open_with_labels(root, split, meta.labels.clone())?;
        ds.meta = Some(meta);
        Ok(ds)
    }

    /// Opens `split` of a split-layout folder that has no `dataset.json`; masks are
    /// `masks/<split>/<image stem>.{png,tif,tiff}`.
    pub fn open_with_labels(
        root: &Path,
        split: &str,
        labels: LabelMap,
    ) -> Result<Self, TilesError> {
        labels.validate()?;
        let image_dir = root.join("images").join(split);
        let mask_dir = root.join("masks").join(split);
        let mut items = Vec::new();
        let mut missing = Vec::new();
        // Notes, sidecars (`.aux.xml`) and interrupted atomic writes (`.segfit-*.tmp`) are not
        // images by their extension; hidden files are skipped too.
        for image in list_images(&image_dir)? {
            let Some(stem) = image.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            if stem.starts_with('.') {
                continue;
            }
            match MASK_EXTS
                .iter()
                .map(|e| mask_dir.join(format!("{stem}.{e}")))
                .find(|m| m.is_file())
            {
                Some(mask) => items.push((stem, image, mask)),
                None => missing.push(image),
            }
        }
        if !missing.is_empty() {
            missing.sort();
            return Err(TilesError::MissingMasks {
                images: missing,
                mask_dir,
            });
        }
        if items.is_empty() {
            return Err(TilesError::EmptySplit {
                split: split.into(),
                location: image_dir,
            });
        }
        items.sort();
        Ok(Self {
            items,
            labels,
            meta: None,
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when the split has no samples (never, for an opened dataset).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The label map applied to masks.
    pub fn labels(&self) -> &LabelMap {
        &self.labels
    }

    /// The prepared dataset's metadata, when it has `dataset.json`.
    pub fn meta(&self) -> Option<&DatasetMeta> {
        self.meta.as_ref()
    }

    /// Sample ids (file stems) in index order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|(id, _, _)| id.as_str())
    }

    /// Decodes sample `index`: the image (`[H, W, C]`), its label-mapped mask (`[H, W]`, class
    /// indices or 255) and its georeferencing.
    pub fn get(&self, index: usize) -> Result<Sample, TilesError> {
        let (id, image_path, mask_path) =
            self.items.get(index).ok_or(TilesError::IndexOutOfRange {
                index,
                len: self.items.len(),
            })?;
        let (image, geo) = read_image(image_path)?;
        let raw = read_mask(mask_path)?;
        crate::audit::check_size(image_path, mask_path, (image.width, image.height), &raw)?;
        let mask = self.labels.apply(&raw, mask_path)?;
        Ok(Sample {
            id: id.clone(),
            image,
            mask: Some(mask),
            geo,
        })
    }
}

/// A decoded sample, or why it could not be decoded: the item of [`SegDataset`] as a
/// burn-dataset [`Dataset`](burn_dataset::Dataset).
///
/// A failed decode (IO error, corrupt file, size mismatch) is an `Err` item, never a missing
/// one: `get` returns `None` only past the end.
pub type SampleResult = Result<Sample, SampleError>;

/// A [`TilesError`] behind an [`Arc`], so that a [`SampleResult`] is `Clone`, as burn's dataset
/// transforms (`ShuffledDataset`, `PartialDataset`, `ComposedDataset`) and data loader require.
/// Displays as the error it holds.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct SampleError(Arc<TilesError>);

impl SampleError {
    /// The error.
    pub fn error(&self) -> &TilesError {
        &self.0
    }

    /// The error itself when this is its only handle (the usual case: transforms forward items
    /// without copying them), or `self` back when a clone of it is still alive.
    pub fn into_inner(self) -> Result<TilesError, Self> {
        Arc::try_unwrap(self.0).map_err(Self)
    }
}

impl From<TilesError> for SampleError {
    fn from(e: TilesError) -> Self {
        Self(Arc::new(e))
    }
}

impl burn_dataset::Dataset<SampleResult> for SegDataset {
    /// Decodes sample `index` ([`SegDataset::get`]); `None` only when `index >= len()`.
    fn get(&self, index: usize) -> Option<SampleResult> {
        (index < self.len()).then(|| SegDataset::get(self, index).map_err(SampleError::from))
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn_dataset::Dataset;

    #[test]
    fn the_dataset_trait_yields_errors_as_items_and_none_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::SyntheticOptions {
            count: 5,
            size: 32,
            out: dir.path().to_path_buf(),
            ..Default::default()
        };
        crate::prepare_synthetic(&opts).unwrap();
        let ds = SegDataset::open(dir.path(), "train").unwrap();
        let n = Dataset::len(&ds);
        assert_eq!(n, ds.len());
        let first = Dataset::get(&ds, 0).unwrap().unwrap();
        assert_eq!(first, SegDataset::get(&ds, 0).unwrap());
        assert!(Dataset::get(&ds, n).is_none());
        // a corrupt file is an error item naming it, not a missing item
        let (_, image, _) = &ds.items[0];
        std::fs::write(image, b"not a png").unwrap();
        let err = Dataset::get(&ds, 0).unwrap().unwrap_err();
        assert!(err.to_string().contains(&*image.to_string_lossy()), "{err}");
        assert!(err.clone().into_inner().is_err(), "a clone is alive");
        let message = err.to_string();
        assert_eq!(err.into_inner().unwrap().to_string(), message);
    }
}
