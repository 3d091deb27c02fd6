//! albumentations-style joint image/mask augmentation and HF's SegFormer image processor, in
//! pure Rust.
//!
//! A [`Pipeline`] is built from a TOML [`PipelineConfig`] and applied per sample with a
//! [`SampleRng`] derived from `(seed, epoch, index)`, so a run is reproducible whatever the
//! number of loader threads. Geometric transforms move image and mask together (masks with
//! nearest neighbour, 255 where new pixels appear); photometric ones touch the image only.
//! Images are [`raster::Raster`]s of u8, u16 or f32 samples with any number of bands.
//! A [`SegformerProcessor`] then turns the sample into channels-first `pixel_values` and a
//! label map, and [`collate`] stacks those into a [`Batch`].
//!
//! ```
//! use augment::{Pipeline, SegformerProcessor, collate};
//! use raster::{Mask, Raster, RasterData};
//!
//! let pipeline = Pipeline::from_toml_str(r#"
//!     [[transforms]]
//!     name = "HorizontalFlip"
//!     p = 0.3
//!
//!     [[transforms]]
//!     name = "RandomRotate90"
//!     p = 0.3
//! "#)?;
//!
//! // A 4×6 RGB tile and its mask.
//! let image = Raster::new(6, 4, 3, RasterData::U8((0..72).map(|v| v as u8).collect())).unwrap();
//! let mask = Mask::new(6, 4, vec![1; 24]).unwrap();
//!
//! // Sample 7 of epoch 2 under seed 42: the same result on every run and thread.
//! let (image, mask) = pipeline.apply_seeded(image, Some(mask), 42, 2, 7)?;
//!
//! let processor = SegformerProcessor { size: Some((8, 8)), ..Default::default() };
//! let processed = processor.process(&image, mask.as_ref())?;
//! assert_eq!(processed.pixel_values.len(), 3 * 8 * 8); // [C, H, W]
//!
//! let batch = collate(&[processed.clone(), processed])?;
//! assert_eq!((batch.n, batch.c, batch.h, batch.w), (2, 3, 8, 8));
//! # Ok::<(), augment::AugmentError>(())
//! ```
//!
//! # Adding a transform
//!
//! A transform is a parameter struct (what its TOML table deserialises into, documented field
//! by field with its default) that implements the crate-private `Transform` trait: `p`, a
//! `validate` run once when the [`Pipeline`] is built (out-of-range values are
//! [`AugmentError::InvalidParameter`] naming `transforms[i].field`), and `apply`, which draws
//! its random parameters from the [`SampleRng`] and changes the image and mask. Write both in
//! the file of its family under `src/transforms/` (`flips`, `affine`, `crop`, `scale`,
//! `color`, `noise`, `groups`), next to the transforms it resembles, embedding
//! [`WarpOptions`] with `#[serde(flatten)]` if it warps. Then register it with one line,
//! `family::Name`, in the `registry!` list of `src/transforms/mod.rs`: that makes it a
//! [`TransformConfig`] variant, selected by `name = "…"`, and exports the struct.
#![deny(missing_docs)]

mod error;
mod geometric;
mod hsv;
mod limit;
mod photometric;
mod pil;
mod pipeline;
mod pixel;
mod processor;
mod resize;
mod rng;
mod transforms;
mod warp;

pub use error::AugmentError;
pub use limit::Limit;
pub use pipeline::{Pipeline, PipelineConfig};
pub use processor::{Batch, Processed, Resample, SegformerProcessor, collate};
pub use rng::SampleRng;
// The pipeline schema: `TransformConfig`, each transform's parameter struct, their shared options.
pub use transforms::*;
