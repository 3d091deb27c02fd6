//! Image and mask IO for segfit: reading PNG/JPEG/GeoTIFF rasters, pairing images with masks,
//! auditing a dataset, tiling big scenes and generating a synthetic satellite dataset (and a
//! texture task that only spatial context solves, [`prepare_texture`]).
//!
//! Everything that touches files for training lives here, so `augment` and `segformer` stay pure.
//! Scenes are read a window at a time ([`WindowSource`]): a GeoTIFF from disk or by URL
//! (`https://`, `s3://`, `gs://`, `az://`: range requests through [`Remote`]) with
//! [`ChunkedReader`], or a STAC item's assets stacked band by band with [`BandStack`];
//! [`SceneInput`] lists the scenes an argument names and opens each.
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
//!
//! A [`SegDataset`] is also a burn-dataset [`Dataset`] of [`SampleResult`]s (re-exported here
//! as [`Dataset`]: burn's `burn::data::dataset::Dataset` is the same trait), so burn's
//! transforms compose it, and burn's `DataLoaderBuilder` (burn's `dataset` feature) can load it.
//! A file that fails to decode is an `Err` item, not a missing one.
//!
//! ```
//! use burn_dataset::transform::{ComposedDataset, Mapper, MapperDataset, PartialDataset, ShuffledDataset};
//! use tiles::{Dataset, SampleResult, SegDataset, SyntheticOptions, prepare_synthetic};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let opts = SyntheticOptions { count: 10, size: 32, out: dir.path().to_path_buf(), ..Default::default() };
//! prepare_synthetic(&opts).unwrap();
//! let train = SegDataset::open(dir.path(), "train").unwrap();
//! let val = SegDataset::open(dir.path(), "val").unwrap();
//! let (n_train, n_val) = (train.len(), val.len());
//!
//! // Both splits, in a seeded order; the first 4 of them.
//! let all = ComposedDataset::new(vec![train, val]);
//! let shuffled = ShuffledDataset::new(all, 42);
//! let first4 = PartialDataset::new(shuffled, 0, 4);
//! assert_eq!(first4.len(), 4);
//!
//! // A mapper that keeps what a model needs: the fraction of pixels of class 1.
//! struct PaddyShare;
//! impl Mapper<SampleResult, Result<f32, tiles::SampleError>> for PaddyShare {
//!     fn map(&self, item: &SampleResult) -> Result<f32, tiles::SampleError> {
//!         let sample = item.as_ref().map_err(Clone::clone)?;
//!         let mask = sample.mask.as_ref().expect("a prepared split has masks");
//!         Ok(mask.data.iter().filter(|&&c| c == 1).count() as f32 / mask.data.len() as f32)
//!     }
//! }
//! let shares = MapperDataset::new(first4, PaddyShare);
//! for share in shares.iter() {
//!     assert!((0.0..=1.0).contains(&share.unwrap()));
//! }
//! assert_eq!(n_train + n_val, 10);
//! ```
#![deny(missing_docs)]

mod audit;
mod chunk_cache;
mod cog;
mod dataset;
mod error;
mod fsutil;
mod input;
mod io;
mod labels;
mod listing;
mod meta;
mod pairs;
mod prepare;
mod scenes;
mod stac;
mod stats;
mod synthetic;
mod texture;
mod tiff_read;
mod tiff_write;
mod window;

pub use audit::{AuditReport, SplitAudit};
pub use burn_dataset::Dataset;
pub use cog::{BandInfo, ClassLegend, CogOptions, CogWriter, OverviewResampling};
pub use dataset::{SampleError, SampleResult, SegDataset};
pub use error::TilesError;
pub use input::SceneInput;
pub use io::{is_tiff, read_image, read_mask, write_mask_png, write_png};
pub use labels::{LabelClass, LabelMap};
pub use listing::list_images;
pub use meta::{DATASET_JSON, DatasetMeta, TileRecord};
pub use prepare::{FolderOptions, PrepareReport, audit, audit_prepared, prepare_folder};
pub use raster::{GeoRef, Mask, Raster, RasterData, Sample, SampleKind};
pub use remote::{FetchStats, Remote, RemoteError, RemoteOptions, is_url};
pub use scenes::{
    LabellerError, ProgressHook, SceneLabeller, SceneOptions, SceneProgress,
    prepare_labelled_scenes, prepare_scenes,
};
pub use stac::{
    BandName, BandStack, StacAsset, StacItem, StackBand, StackOptions, parse_stac, read_stac,
};
pub use stats::{BandStats, StatsAccumulator, nodata_pixels};
pub use synthetic::{SyntheticOptions, generate_sample, prepare_synthetic};
pub use texture::{TextureOptions, generate_texture_sample, prepare_texture};
pub use tiff_read::{ChunkedReader, read_window};
pub use tiff_write::{
    Compression, RasterShape, TiffOptions, write_geotiff, write_geotiff_rows, write_geotiff_with,
};
pub use window::WindowSource;
