//! Image and mask IO for segfit: reading PNG/JPEG/GeoTIFF rasters, pairing images with masks,
//! auditing a dataset, tiling big scenes and generating a synthetic satellite dataset.
//!
//! Everything that touches files for training lives here, so `augment` and `segformer` stay pure.
//!
//! ```
//! use tiles::{LabelMap, SegDataset, SyntheticOptions, prepare_synthetic};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let opts = SyntheticOptions { count: 4, size: 64, out: dir.path().to_path_buf(), ..Default::default() };
//! let report = prepare_synthetic(&opts).unwrap();
//! assert_eq!(report.meta.classes, ["outer", "rice_paddy"]);
//!
//! let train = SegDataset::open(dir.path(), "train").unwrap();
//! let sample = train.get(0).unwrap();
//! assert_eq!((sample.image.width, sample.image.bands), (64, 3));
//! assert!(sample.mask.unwrap().data.iter().all(|&c| c <= 1));
//! # let _ = LabelMap::identity(&["outer", "rice_paddy"]);
//! ```
#![deny(missing_docs)]

mod audit;
mod dataset;
mod error;
mod fsutil;
mod io;
mod labels;
mod meta;
mod pairs;
mod prepare;
mod scenes;
mod stats;
mod synthetic;
mod tiff_read;
mod tiff_write;

pub use audit::{AuditReport, SplitAudit};
pub use dataset::SegDataset;
pub use error::TilesError;
pub use io::{read_image, read_mask, write_mask_png, write_png};
pub use labels::{LabelClass, LabelMap};
pub use meta::{DATASET_JSON, DatasetMeta, TileRecord};
pub use prepare::{FolderOptions, PrepareReport, audit, audit_prepared, prepare_folder};
pub use raster::{GeoRef, Mask, Raster, RasterData, Sample, SampleKind};
pub use scenes::{SceneOptions, prepare_scenes};
pub use stats::{BandStats, StatsAccumulator};
pub use synthetic::{SyntheticOptions, generate_sample, prepare_synthetic};
pub use tiff_read::{ChunkedReader, read_window};
pub use tiff_write::{
    Compression, RasterShape, TiffOptions, write_geotiff, write_geotiff_rows, write_geotiff_with,
};
