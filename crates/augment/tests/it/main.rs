//! augment's integration tests, one binary (linked once) with a module per behaviour.

mod albumentations_parity;
mod albumentations_parity_extra;
mod colour_special_cases;
mod common;
mod pipeline;
mod processor;
mod processor_parity;
mod resampling;
mod transforms;
