//! tiles' integration tests, one binary (linked once) with a module per behaviour.

mod burn_dataset;
mod cog;
mod cog_layout;
mod common;
mod folder;
mod fuzz_images;
mod hf_reference;
mod labels;
mod masks;
mod nodata;
mod remote;
mod scene_splits;
mod scenes;
mod stats;
mod synthetic;
mod texture;
mod tiff_io;
