//! `segfit plan`: the predicted peak memory of a training step, and what fits a budget.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use train::{
    Allocator, KernelPath, LoaderInput, LossName, MemoryPlan, PlanInput, PlanInputTemplate,
    Precision, fit_whole_process, parse_bytes,
};

use crate::host::{check_batch, check_flag};

/// Arguments of `segfit plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Model: a preset (mit-b0 … mit-b5, mit-tiny) or an HF directory with a config.json.
    #[arg(long, default_value = "mit-b0")]
    model: String,
    /// Training size as HEIGHTxWIDTH (or one number for a square).
    #[arg(long, default_value = "512x512")]
    size: String,
    /// Micro-batch size.
    #[arg(long, default_value_t = 2)]
    batch: usize,
    /// Precision: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Recompute activations in backward (Burn's balanced checkpointing).
    #[arg(long)]
    checkpointing: bool,
    /// Number of classes (sets the size of the logits kept for the loss).
    #[arg(long, default_value_t = 2)]
    num_labels: usize,
    /// Input bands.
    #[arg(long, default_value_t = 3)]
    bands: usize,
    /// Device the plan is for: with `--kernels auto`, `cpu` runs segformer's fused kernels,
    /// `cuda` and `wgpu` burn's ops with segformer's recomputing attention and loss, in CubeCL's
    /// memory pool. NOTE: the live bytes are calibrated on the CPU backend and the pool's
    /// reserve on burn-wgpu over lavapipe (software Vulkan); no real GPU has measured them yet.
    /// Several devices (cuda:0,cuda:1) train data-parallel: the plan is then each device's,
    /// for the micro-batch each of them runs.
    #[arg(long, default_value = "cpu")]
    device: train::Devices,
    /// The model's kernels: auto, recompute (no fused CPU kernels) or composed (burn's plain
    /// composition); segformer resolves the choice for --device.
    #[arg(long, default_value = "auto")]
    kernels: segformer::Kernels,
    /// A memory budget (e.g. 8GiB): choose micro-batch, accumulation, precision and
    /// checkpointing so the predicted peak fits while keeping --effective-batch.
    #[arg(long)]
    memory_budget: Option<String>,
    /// The effective batch size to keep with --memory-budget (default: --batch).
    #[arg(long)]
    effective_batch: Option<usize>,
    /// The training loss, as `[loss]` terms joined by `+` (ce, dice, focal, lovasz; e.g.
    /// `ce+dice`): terms other than plain cross-entropy keep full-resolution tensors for the
    /// backward pass, which the plan counts.
    #[arg(long, default_value = "ce")]
    loss: String,
    /// Per-class weights on the cross-entropy and focal terms (`loss.class_weights`): a
    /// weighted cross-entropy leaves the fused loss kernel.
    #[arg(long)]
    class_weights: bool,
    /// Loader threads (`train.workers`): the samples they hold count in the whole process.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Samples decoded ahead (`train.prefetch`), counted in the whole process.
    #[arg(long, default_value_t = 8)]
    prefetch: usize,
    /// Print JSON instead of a table: every term, `peak` (the step) and `whole_process` (what
    /// --memory-budget is fitted against).
    #[arg(long)]
    json: bool,
}

/// Classes at most (`--num-labels`): far above any dataset's, it keeps the sizes exact.
const MAX_LABELS: usize = 1 << 16;
/// Input bands at most (`--bands`).
const MAX_BANDS: usize = 1024;

/// `--loss` and `--class-weights` as the planner's [`segformer::SegLoss`]: the `[loss]` table
/// they stand for, resolved as a run resolves it.
fn plan_loss(a: &PlanArgs) -> Result<segformer::SegLoss> {
    let terms = a
        .loss
        .split('+')
        .map(|t| {
            let kind = t.parse::<LossName>().map_err(|e| {
                anyhow::anyhow!(
                    "--loss `{}`: {e}; join losses with + (e.g. ce+dice)",
                    a.loss
                )
            })?;
            Ok(train::LossTermConfig { kind, weight: 1.0 })
        })
        .collect::<Result<Vec<_>>>()?;
    let loss = train::LossConfig {
        terms: Some(terms),
        class_weights: a
            .class_weights
            .then(|| train::ClassWeights::List(vec![1.0; a.num_labels])),
        ..Default::default()
    };
    Ok(loss.resolve(a.num_labels, None)?)
}

/// What a fit says when it is each device's.
fn per_device(n: usize) -> String {
    match n {
        1 => String::new(),
        _ => format!(" on each of {n} devices"),
    }
}

fn parse_size(s: &str) -> Result<(usize, usize)> {
    let parts: Vec<&str> = s.split(['x', 'X', ',']).collect();
    let n = |p: &str| {
        p.trim()
            .parse::<usize>()
            .ok()
            .filter(|&v| (1..=train::MAX_SIDE).contains(&v))
    };
    match parts.as_slice() {
        [a] => n(a).map(|v| (v, v)),
        [a, b] => n(a).zip(n(b)),
        _ => None,
    }
    .with_context(|| {
        format!(
            "--size `{s}` is not HEIGHTxWIDTH with sides between 1 and {} (e.g. 1024x1024)",
            train::MAX_SIDE
        )
    })
}

pub fn run(a: &PlanArgs) -> Result<()> {
    let (height, width) = parse_size(&a.size)?;
    let (precision, device, n) = (a.precision, a.device.primary(), a.device.len());
    let kernels = device.kernel_path(a.kernels);
    check_batch("--batch", a.batch)?;
    if let Some(n) = a.effective_batch {
        check_batch("--effective-batch", n)?;
    }
    check_flag("--num-labels", a.num_labels, 1, MAX_LABELS)?;
    check_flag("--bands", a.bands, 1, MAX_BANDS)?;
    check_flag("--workers", a.workers, 1, train::MAX_WORKERS)?;
    check_flag("--prefetch", a.prefetch, 1, train::MAX_PREFETCH)?;
    let loader = LoaderInput {
        workers: a.workers,
        prefetch: a.prefetch,
    };
    let names: Vec<String> = (0..a.num_labels).map(|i| format!("class_{i}")).collect();
    let model_cfg = train::ModelConfig {
        preset: a.model.clone(),
        pretrained: PathBuf::from(&a.model)
            .join("config.json")
            .is_file()
            .then(|| PathBuf::from(&a.model)),
        drop_path_rate: None,
        classifier_dropout_prob: None,
        input_adapt: Default::default(),
    };
    let config =
        train::model_config(&model_cfg, &names, a.bands).map_err(|e| anyhow::anyhow!("{e}"))?;
    let loss = plan_loss(a)?;
    if let Some(budget) = &a.memory_budget {
        let bytes = parse_bytes(budget).map_err(|e| anyhow::anyhow!("--memory-budget: {e}"))?;
        let template = PlanInputTemplate {
            config: &config,
            height,
            width,
            precision,
            reduced: device.reduced_precision(),
            checkpointing: a.checkpointing,
            kernels,
            allocator: device.allocator(),
            loss: Some(&loss),
        };
        let effective = a.effective_batch.unwrap_or(a.batch * n);
        anyhow::ensure!(
            effective.is_multiple_of(n),
            "--effective-batch {effective} is not a multiple of the {n} devices of --device {}; \
             use a multiple of {n}",
            a.device
        );
        let choice = fit_whole_process(bytes, effective / n, &template, &loader)
            .map_err(|e| anyhow::anyhow!("--memory-budget: {e}"))?;
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&choice)?)?;
        } else {
            outln!(
                "{}{}\n\n{}",
                choice.reason(),
                per_device(n),
                choice.estimate
            )?;
        }
        return Ok(());
    }
    let input = PlanInput {
        config: &config,
        height,
        width,
        batch: a.batch,
        precision,
        checkpointing: a.checkpointing,
        kernels,
        allocator: device.allocator(),
        loss: Some(&loss),
    };
    let estimate = MemoryPlan::predict(&input).with_process(&input, &loader);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&estimate)?)?;
    } else {
        if n > 1 {
            outln!(
                "each of {n} devices ({}): micro-batch {} (a step takes {} × accumulation samples)\n",
                a.device,
                a.batch,
                a.batch * n
            )?;
        }
        outln!("{estimate}")?;
        let what = match kernels {
            KernelPath::Fused => None,
            KernelPath::Recompute => Some(
                "burn's ops with segformer's recomputing attention and loss, as on CUDA and \
                 wgpu: live bytes calibrated on the CPU backend with --kernels recompute",
            ),
            KernelPath::Composed => Some(
                "burn's plain composition: live bytes calibrated on the CPU backend with \
                 --kernels composed",
            ),
        };
        let pool = match device.allocator() {
            Allocator::Heap => "",
            Allocator::CubeclPool => {
                "; CubeCL pool reserve fitted on burn-wgpu over lavapipe (software Vulkan)"
            }
        };
        if let Some(what) = what {
            outln!("({what}{pool}; not yet measured on a real GPU)")?;
        }
    }
    Ok(())
}
