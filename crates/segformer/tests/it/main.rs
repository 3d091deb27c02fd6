//! segformer's integration tests, one binary (linked once) with a module per behaviour.

mod common;
mod cpu_pool;
mod input_adapt;
mod loading;
mod mixed_precision;
mod parity_b0;
mod parity_recompute;
mod parity_tiny;
mod side_by_side;
mod wgpu;
