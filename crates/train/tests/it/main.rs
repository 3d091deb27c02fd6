//! train's integration tests, one binary (linked once) with a module per behaviour. The tests
//! run on threads of one process; those that must not share it (burn-flex's RNG is
//! process-wide, and the planner tests count the process's allocations) rerun themselves alone
//! in a child process: `common::alone!`.

mod adamw_parity;
mod common;
mod config_reference;
mod data_parallel;
mod memory_plan;
mod memory_plan_recompute;
mod mixed_precision;
mod numerics;
mod presets;
mod recipes;
mod steps;
mod tensorboard;
mod texture;
mod training;
mod wgpu;
