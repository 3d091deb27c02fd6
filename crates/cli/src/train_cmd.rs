//! `segfit train`: a run config in, a run directory (checkpoints, metrics, plots) out.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use train::{RunOptions, TrainConfig};

/// Arguments of `segfit train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The run config (e.g. configs/synthetic-quick.toml); with --resume, defaults to the run's
    /// own config.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a config key, e.g. `--set train.epochs=3 --set data.size=[256,256]`; repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// The run directory to write [default: runs/<config file name>].
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "resume")]
    pub output: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its last checkpoint.
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// Where to train: cpu, cuda, cuda:N, wgpu or wgpu:N (Vulkan, Metal or DX12); several GPUs
    /// of one kind, comma-separated (cuda:0,cuda:1), train data-parallel: each step then takes
    /// train.batch_size × devices × train.accumulation_steps samples.
    #[arg(long, default_value = "cpu")]
    pub device: train::Devices,
    /// The model's kernels: auto (the fastest the device has), recompute (no fused CPU
    /// kernels) or composed (burn's plain composition, for comparison).
    #[arg(long, default_value = "auto")]
    pub kernels: segformer::Kernels,
    /// Fit training into this much memory (e.g. 8GiB): micro-batch, accumulation steps and, if
    /// needed, bf16 and checkpointing are chosen from the memory planner (= memory.budget).
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// The effective batch size to keep with --memory-budget (= memory.effective_batch).
    #[arg(long)]
    pub effective_batch: Option<usize>,
}

/// Runs `segfit train`.
pub fn run(args: &TrainArgs) -> Result<()> {
    let (config_path, run_dir, resume) = match (&args.resume, &args.config) {
        (Some(dir), config) => {
            if !train::can_resume(dir) {
                bail!(
                    "--resume {}: no checkpoints/last/trainer_state.json to resume from",
                    dir.display()
                );
            }
            (
                config.clone().unwrap_or_else(|| dir.join("config.toml")),
                dir.clone(),
                true,
            )
        }
        (None, Some(config)) => {
            let stem = config
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "run".into());
            (
                config.clone(),
                args.output
                    .clone()
                    .unwrap_or_else(|| Path::new("runs").join(stem)),
                false,
            )
        }
        (None, None) => {
            bail!("--config FILE is required (e.g. --config configs/synthetic-quick.toml)")
        }
    };
    let text = std::fs::read_to_string(&config_path)
        .with_context(|| format!("reading the config {}", config_path.display()))?;
    let mut sets = args.sets.clone();
    if let Some(b) = &args.memory_budget {
        sets.push(format!("memory.budget={b:?}"));
    }
    if let Some(n) = args.effective_batch {
        sets.push(format!("memory.effective_batch={n}"));
    }
    let mut cfg = TrainConfig::from_toml_str(&text, &sets)
        .with_context(|| format!("{}", config_path.display()))?;
    // The machine bounds the loader's threads and the run's memory: `train::run` checks the
    // device, then fits the run to it and to the machine, before the data or the model is
    // loaded.
    cfg.memory.host = Some(crate::host::host());
    if !resume && train::can_resume(&run_dir) {
        bail!(
            "{} already holds a run; continue it with --resume {} or choose another --output",
            run_dir.display(),
            run_dir.display()
        );
    }
    let opts = RunOptions {
        run_dir: run_dir.clone(),
        resume,
        kernels: args.kernels,
    };
    // On stdout, like the summary: stderr carries only the one error line when the device or
    // a setting is refused (train::run checks both before any work).
    println!(
        "training {} into {} on {}",
        config_path.display(),
        run_dir.display(),
        args.device
    );
    let started = Instant::now();
    let summary = train::run(&cfg, &opts, args.device.clone()).map_err(|e| match e {
        // A setting that does not fit names its key; the file it came from goes first.
        train::TrainError::Config(_) => {
            anyhow::Error::new(e).context(config_path.display().to_string())
        }
        e => e.into(),
    })?;
    let seconds = started.elapsed().as_secs_f64();
    match &summary.last_eval {
        Some(e) => println!(
            "done: {} steps in {seconds:.0} s, val mIoU {:.4}, pixel accuracy {:.4}, run in {}",
            summary.steps,
            e.metrics.miou,
            e.metrics.pixel_accuracy,
            run_dir.display()
        ),
        None => println!(
            "done: {} steps in {seconds:.0} s, run in {}",
            summary.steps,
            run_dir.display()
        ),
    }
    Ok(())
}
