//! `segfit eval`: metrics and the confusion matrix of a model on a prepared dataset split.

use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use burn::tensor::backend::Backend;
use clap::Args;
use infer::{ConfusionMatrix, SegMetrics, Tta};
use tiles::SegDataset;

use crate::device::on_device;
use crate::model_source::ModelSource;

/// Arguments of `segfit eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// The model: a run directory, a checkpoint directory or an HF directory.
    #[arg(long, value_name = "M")]
    pub model: PathBuf,
    /// A dataset prepared by `segfit prepare` (images/, masks/, dataset.json).
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// The split to evaluate.
    #[arg(long, default_value = "val")]
    pub split: String,
    /// Images per forward pass.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub batch_size: usize,
    /// Print the result as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Test-time augmentation: none, flips (class probabilities averaged over the horizontal
    /// and vertical flips, 4 poses) or d4 (all 8 flips, transposes and rotations by 90°).
    /// The metrics are printed without and with it, from one pass over the data.
    #[arg(long, value_name = "POSES", default_value = "none")]
    pub tta: Tta,
    /// Where the model runs: cpu, wgpu or wgpu:N (Vulkan/Metal/DX12), cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: train::Device,
    /// The model's kernels: auto (the fastest the device has), recompute (no fused CPU
    /// kernels) or composed (burn's plain composition, for comparison).
    #[arg(long, default_value = "auto")]
    pub kernels: segformer::Kernels,
}

/// Runs `segfit eval`.
pub fn run(args: &EvalArgs) -> Result<()> {
    crate::host::check_batch("--batch-size", args.batch_size)?;
    let source = ModelSource::resolve(&args.model)?;
    on_device!(args.device, eval_on(args, &source))
}

fn eval_on<B: Backend>(args: &EvalArgs, source: &ModelSource, device: &B::Device) -> Result<()> {
    let model = source.load::<B>(device)?.with_kernels(args.kernels);
    crate::host::check_inference(
        &crate::host::host(),
        args.batch_size,
        source.window(512),
        model.config().num_channels,
        model.num_labels(),
    )?;
    let dataset = match source.labels() {
        Some(labels) => SegDataset::open_with_labels(&args.data, &args.split, labels),
        None => SegDataset::open(&args.data, &args.split),
    }
    .with_context(|| {
        format!(
            "opening the `{}` split of {}",
            args.split,
            args.data.display()
        )
    })?;
    ensure!(
        !dataset.is_empty(),
        "the `{}` split of {} is empty",
        args.split,
        args.data.display()
    );
    let names = dataset.labels().class_names();
    ensure!(
        model.num_labels() == names.len(),
        "the model predicts {} classes but {} has {} ({}); evaluate on the dataset the model was trained for",
        model.num_labels(),
        args.data.display(),
        names.len(),
        names.join(", ")
    );
    // Preprocess like training did: resized to the run's data.size (or the HF preprocessor's
    // size) when known.
    let processor = source.processor(source.input_size())?;
    // Batches of preprocessed samples, read as the loop asks for them.
    let indices: Vec<usize> = (0..dataset.len()).collect();
    let batches = indices
        .chunks(args.batch_size)
        .map(|chunk| -> Result<augment::Batch> {
            let mut items = Vec::with_capacity(chunk.len());
            for &i in chunk {
                let sample = dataset.get(i)?;
                ensure!(
                    sample.mask.is_some(),
                    "sample `{}` of {} has no mask to evaluate against",
                    sample.id,
                    args.data.display()
                );
                items.push(
                    processor
                        .process(&sample.image, sample.mask.as_ref())
                        .with_context(|| format!("preprocessing `{}`", sample.id))?,
                );
            }
            Ok(augment::collate(&items)?)
        });
    let result = infer::evaluate_tta(&model, batches, args.tta, device, || {})?;
    let (metrics, confusion, loss) = (result.metrics, result.confusion, result.loss);
    if args.json {
        let mut json = serde_json::json!({
            "model": source.weights,
            "data": args.data,
            "split": args.split,
            "samples": dataset.len(),
            "classes": names,
            "loss": loss,
            "metrics": metrics,
            "confusion": confusion.rows(),
        });
        if let Some(tta) = &result.tta {
            json["tta"] = serde_json::json!({
                "poses": tta.tta.to_string(),
                "count": tta.tta.poses().len(),
                "metrics": tta.metrics,
                "confusion": tta.confusion.rows(),
            });
        }
        outln!("{}", serde_json::to_string_pretty(&json)?)
    } else {
        let mut text = table(&names, &metrics, &confusion);
        if let Some(tta) = &result.tta {
            let poses = tta.tta.poses().len();
            text = format!(
                "without test-time augmentation\n{text}\nwith test-time augmentation ({}, {poses} poses)\n{}\n\
                 mIoU {} -> {} with --tta {}\n",
                tta.tta,
                table(&names, &tta.metrics, &tta.confusion),
                pct(metrics.miou),
                pct(tta.metrics.miou),
                tta.tta
            );
        }
        outln!(
            "{text}loss {loss:.4} over {} samples of `{}`",
            dataset.len(),
            args.split
        )
    }
}

/// A fraction as a percentage with two decimals, `-` where undefined.
fn pct(v: f64) -> String {
    if v.is_nan() {
        "-".to_string()
    } else {
        format!("{:.2}", 100.0 * v)
    }
}

/// Per-class metrics and the confusion matrix as aligned text tables.
fn table(names: &[String], m: &SegMetrics, confusion: &ConfusionMatrix) -> String {
    let width = names.iter().map(String::len).max().unwrap_or(5).max(5);
    let mut out = format!(
        "{:width$}  {:>7}  {:>7}  {:>9}  {:>7}\n",
        "class", "IoU", "F1", "precision", "recall"
    );
    for (c, name) in names.iter().enumerate() {
        out += &format!(
            "{name:width$}  {:>7}  {:>7}  {:>9}  {:>7}\n",
            pct(m.iou[c]),
            pct(m.f1[c]),
            pct(m.precision[c]),
            pct(m.recall[c])
        );
    }
    out += &format!(
        "{:width$}  {:>7}  {:>7}\n",
        "mean",
        pct(m.miou),
        pct(m.mean_f1)
    );
    out += &format!(
        "pixel accuracy {}% over {} pixels\n\n",
        pct(m.pixel_accuracy),
        m.pixels
    );
    out += &format!(
        "confusion (rows: truth, columns: prediction)\n{:width$}",
        ""
    );
    let rows = confusion.rows();
    let cell = rows
        .iter()
        .flatten()
        .map(|v| v.to_string().len())
        .max()
        .unwrap_or(1)
        .max(width.min(12));
    for name in names {
        out += &format!("  {name:>cell$}");
    }
    out.push('\n');
    for (name, row) in names.iter().zip(&rows) {
        out += &format!("{name:width$}");
        for v in row.iter().take(names.len()) {
            out += &format!("  {v:>cell$}");
        }
        out.push('\n');
    }
    out
}
