//! tiles' integration tests, one binary (linked once) with a module per behaviour.

mod burn_dataset;
mod cog;
mod common;
mod folder;
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
