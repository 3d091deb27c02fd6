//! `dataset.json`: what a prepared dataset holds, written at its root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use raster::SampleKind;

use crate::error::TilesError;
use crate::labels::LabelMap;
use crate::stats::BandStats;

/// The file name of the metadata at a prepared dataset's root.
pub const DATASET_JSON: &str = "dataset.json";

/// Contents of `dataset.json`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DatasetMeta {
    /// Format version (1).
    pub version: u32,
    /// How it was made: `folder`, `scenes`, `synthetic` or `texture`.
    pub source: String,
    /// Class names in index order.
    pub classes: Vec<String>,
    /// How stored mask values map to classes (applied when samples are loaded).
    pub labels: LabelMap,
    /// Image sample type.
    pub sample_kind: SampleKind,
    /// Image band count.
    pub bands: usize,
    /// Samples per split.
    pub splits: BTreeMap<String, usize>,
    /// Per-band statistics over the training split.
    pub band_stats: Vec<crate::stats::BandStats>,
    /// For tiled scenes: where every tile came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiles: Vec<TileRecord>,
}

/// One tile of a scene: the manifest entry.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TileRecord {
    /// Sample id (file stem of the tile).
    pub id: String,
    /// Split the tile went to.
    pub split: String,
    /// Source scene.
    pub scene: PathBuf,
    /// Source label raster.
    pub mask: PathBuf,
    /// Left column of the window in the scene.
    pub x: usize,
    /// Top row of the window in the scene.
    pub y: usize,
    /// Window width.
    pub width: usize,
    /// Window height.
    pub height: usize,
    /// Geotransform of the tile (origin shifted to its top-left pixel), when the scene has one.
    pub transform: Option<[f64; 6]>,
}

impl DatasetMeta {
    pub(crate) fn new(
        source: &str,
        labels: &LabelMap,
        kind: SampleKind,
        bands: usize,
        band_stats: Vec<BandStats>,
    ) -> Self {
        Self {
            version: 1,
            source: source.into(),
            classes: labels.class_names(),
            labels: labels.clone(),
            sample_kind: kind,
            bands,
            splits: BTreeMap::new(),
            band_stats,
            tiles: Vec::new(),
        }
    }

    /// Reads `root/dataset.json`; `Ok(None)` when there is none.
    pub fn load(root: &Path) -> Result<Option<Self>, TilesError> {
        let path = root.join(DATASET_JSON);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(TilesError::io(&path, e)),
        };
        let meta: Self = serde_json::from_str(&text).map_err(|e| TilesError::Metadata {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        meta.labels.validate()?;
        Ok(Some(meta))
    }

    /// Writes `root/dataset.json` atomically.
    pub fn save(&self, root: &Path) -> Result<(), TilesError> {
        let path = root.join(DATASET_JSON);
        let text = serde_json::to_string_pretty(self).map_err(|e| TilesError::Metadata {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Ok(fsio::write_atomic(&path, text.as_bytes())?)
    }
}
