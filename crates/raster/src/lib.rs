//! segfit's in-memory raster types: images of u8/u16/f32 samples with any number of bands,
//! class masks and georeferencing, with no codec behind them.
//!
//! `tiles` reads and writes these from PNG/JPEG/GeoTIFF; `augment` transforms them. A crate
//! that only wants the types depends on this one and pulls in no image codec.
//!
//! ```
//! use raster::{GeoRef, Mask, Raster, RasterData, SampleKind};
//!
//! // A 2×3 RGB image, `[H, W, C]`, and its mask.
//! let image = Raster::new(3, 2, 3, RasterData::U8((0..18).collect())).unwrap();
//! assert_eq!((image.kind(), image.get_f32(1, 2, 0)), (SampleKind::U8, 15.0));
//! let mask = Mask::new(3, 2, vec![0, 1, 1, 0, Mask::IGNORE, 1]).unwrap();
//! assert_eq!(mask.data.len(), image.width * image.height);
//!
//! // 10 m pixels, north up: the window at column 4, row 2 starts 40 m east, 20 m south.
//! let geo = GeoRef {
//!     transform: [500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0],
//!     geo_key_directory: None,
//!     geo_double_params: None,
//!     geo_ascii_params: None,
//!     nodata: None,
//! };
//! assert_eq!(geo.shifted(4, 2).pixel_to_world(0.0, 0.0), (500_040.0, 3_999_980.0));
//! ```
#![deny(missing_docs)]

mod geo;
mod raster;

pub use geo::GeoRef;
pub use raster::{Mask, Raster, RasterData, Sample, SampleKind};
