//! Image and mask IO for segfit: reading PNG/JPEG/GeoTIFF rasters, pairing images with masks,
//! auditing a dataset, tiling big scenes and generating a synthetic satellite dataset.
#![deny(missing_docs)]

mod geo;
mod raster;

pub use geo::GeoRef;
pub use raster::{Mask, Raster, RasterData, Sample, SampleKind};
