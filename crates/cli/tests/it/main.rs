//! segfit's integration tests, one binary (linked once) with a module per behaviour; most run
//! the real `segfit` binary, each in its own process.

mod answers;
mod common;
mod faults;
mod gis;
mod hostile;
mod labels;
mod nodata;
mod plan_json;
mod preprocessing;
mod recipes;
mod remote_inputs;
mod streaming;
mod tta;
mod wgpu;
mod workflow;
mod zones;
