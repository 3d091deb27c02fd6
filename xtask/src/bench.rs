//! `cargo xtask bench speed|memory|pipeline [ARGS…]`: the benchmark programs of the train
//! crate (training/inference speed, memory) and of augment (the data pipeline), built in
//! release (benchmarks measure optimised code; they are never timed tests). `bench predict`
//! drives the segfit binary itself, next to PyTorch: its own module, [`crate::bench_predict`].

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::project_root;

pub fn run(args: &[String]) -> Result<()> {
    let (which, rest) = args
        .split_first()
        .map(|(w, r)| (w.as_str(), r))
        .unwrap_or(("", &[]));
    let (package, example) = match which {
        "speed" if rest.iter().any(|a| a == "--loop") => return crate::bench_loop::run(rest),
        "speed" => ("train", "bench_speed"),
        "memory" if rest.iter().any(|a| a == "--budgets" || a == "--calibrate") => {
            return crate::bench_budgets::run(rest);
        }
        "memory" => ("train", "bench_memory"),
        "pipeline" => ("augment", "bench"),
        "predict" => return crate::bench_predict::run(rest),
        "train" => return crate::bench_train::run(rest),
        "gpu" => return crate::bench_gpu::run(rest),
        other => bail!(
            "unknown benchmark `{other}`; use `cargo xtask bench speed`, `memory`, `pipeline`, \
             `predict`, `train` or `gpu`"
        ),
    };
    // `bench memory --cuda` / `--wgpu` measure on a GPU backend: build it in.
    let features: Vec<&str> = [("--cuda", "cuda"), ("--wgpu", "wgpu")]
        .into_iter()
        .filter(|(flag, _)| rest.iter().any(|a| a == flag))
        .map(|(_, feature)| feature)
        .collect();
    let features = (!features.is_empty()).then(|| format!("--features={}", features.join(",")));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(project_root())
        .args(["run", "--release", "-p", package])
        .args(features)
        .args(["--example", example, "--"])
        .args(rest)
        .status()
        .with_context(|| format!("running cargo for the {example} benchmark"))?;
    if !status.success() {
        bail!("the {example} benchmark failed ({status})");
    }
    Ok(())
}
