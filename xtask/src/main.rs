//! `cargo xtask`: the project's own commands (rust-analyzer style: this file only parses flags
//! and dispatches to one module per command).
//!
//! - `cargo xtask prepare [segfit prepare flags…]`: the synthetic set into `data/synthetic`
//!   (the same code as `segfit prepare`; other flags are passed through).
//! - `cargo xtask train [--config FILE] [--set K=V…] [--device D]`: prepares the synthetic set
//!   when the config's data is missing, then trains into `runs/<config name>`.
//! - `cargo xtask bench speed|memory|pipeline|predict|train|gpu [ARGS…]`: the benchmarks (in
//!   release, but `train`, which times `cargo xtask train`'s own dev build).
//! - `cargo xtask class-agreement A B`: how many pixels two class maps (u8 GeoTIFF or .npy)
//!   agree on, as one JSON line (the GPU benchmark runs it on the GPU machine).
//! - `cargo xtask autotune-seed`: the autotune choices of the last test run on lavapipe as the
//!   committed seed of the tests' CubeCL cache (`crates/testkit/autotune`).

mod autotune_seed;
mod bench;
mod bench_budgets;
mod bench_gpu;
mod bench_loop;
mod bench_predict;
mod bench_train;
mod class_map;
mod prepare;
mod segfit;
mod train;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    match command.as_deref() {
        Some("prepare") => prepare::run(&rest),
        Some("train") => train::run(&rest),
        Some("bench") => bench::run(&rest),
        Some("class-agreement") => class_map::run(&rest),
        Some("autotune-seed") => autotune_seed::run(&rest),
        Some("-h" | "--help") | None => {
            println!("{}", HELP);
            Ok(())
        }
        Some(other) => bail!("unknown xtask `{other}`\n\n{HELP}"),
    }
}

const HELP: &str = "\
usage: cargo xtask <command> [flags]

commands:
  prepare [FLAGS…]   write the synthetic dataset to data/synthetic (flags: those of
                     `segfit prepare`, e.g. --count 200 --size 256 --out data/other)
  train [--config FILE] [--set KEY=VALUE…] [--output RUN_DIR] [--device cpu|cuda[:N]|wgpu[:N]]
                     prepare the synthetic data if missing, then train (default config
                     configs/synthetic-quick.toml) into runs/<config name>
  bench speed [CASE…] [--steps N] [--json FILE] [--pytorch crates/train/bench/pytorch_ref.py]
                     MiT-B0 train/inference throughput (release build), with PyTorch side by side
                     when a Python with torch + transformers is given
  bench speed --loop [--epochs N] [--pytorch] [--json FILE] [--keep DIR]
                     the end-to-end case: a whole `segfit train` (4-band u16 GeoTIFF tiles, 256²,
                     batch 4, 30 epochs) against steps × the step benchmark's times + eval
                     forwards, and against crates/train/bench/pytorch_loop.py ($PYTHON)
  bench memory [ARGS…]
                     peak memory of real training steps, measured vs the planner's prediction
  bench memory --budgets 120MiB,200MiB,… [--calibrate] [--steps N] [--json FILE]
                     `segfit train --memory-budget B --effective-batch 8` (MiT-B0, 256²): the
                     chosen configuration, the predicted whole-process peak and the measured
                     peak RSS of each run, and whether it stayed within the budget
  bench pipeline     augmentation + processor throughput on 512² tiles (augment/BENCH.md)
  bench predict [--sizes 2000,1947x1933,…] [--tile N] [--overlap N] [--batch N] [--repeat N]
                [--http] [--python PY] [--keep DIR] [--json FILE] [--segfit PATH]
                [--segfit-args ARGS]
                     `segfit predict` on 4-band u16 COG scenes (MiT-B0, window 512, overlap a
                     quarter, batch 4 unless given): wall time, MP/s and peak RSS, next to
                     crates/cli/bench/pytorch_predict.py when PY (default python3) has torch +
                     transformers + tifffile (its own loop time too), and the share of pixels
                     whose classes agree; --repeat N runs both N times, alternating, and
                     reports medians and every run; --http also predicts each scene by URL from
                     a local HTTP server (requests, bytes, time, peak RSS, same map)
  bench train [--json FILE] [--keep DIR]
                     `cargo xtask train`'s default run, timed (wall time, peak RSS, mIoU per
                     epoch; crates/train/bench-xtask-train.json is its artifact)
  bench gpu [--smoke] [--out DIR] [--python PY] [--no-build]
                     packs the GPU benchmark for a machine without Rust (release binaries with
                     cuda,wgpu for CUDA 13.0, the PyTorch scripts; target/bench-gpu/
                     segfit-gpu-bench.tar.gz, under 64 MiB); its run.sh prints the table of
                     crates/train/BENCH-gpu.md. --smoke runs it here on wgpu at toy sizes
  class-agreement A B
                     the share of pixels two class maps (u8 GeoTIFF or .npy) agree on, as JSON
  autotune-seed      the kernel choices CubeCL's autotune timed in the last test run
                     (target/cubecl-tests, lavapipe in CI) as the tests' committed starting
                     cache, crates/testkit/autotune";

/// The workspace root (xtask lives one level below it).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// The command-line argument after `flag` (taken from `it`), or an error naming the flag.
pub fn flag_value<'a>(it: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<String> {
    it.next()
        .cloned()
        .with_context(|| format!("{flag} expects a value"))
}
