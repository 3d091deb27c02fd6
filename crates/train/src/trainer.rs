//! The training loop.
//!
//! Per micro-batch: forward, loss, backward, gradients added to the group's; per group of
//! `accumulation_steps` micro-batches: one optimizer step. Nothing from a step outlives it: the
//! loss is read back as a plain `f32` and the graph is consumed by `backward`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use augment::{Batch, Pipeline, PipelineConfig, SegformerProcessor};
use burn::module::{AutodiffModule, Module};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::ToElement;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{FloatDType, Int, Tensor, TensorData};
use segformer::Segformer;
use tiles::SegDataset;

use crate::checkpoint::{RunDir, TrainerState, load_trainer_state, save_checkpoint};
use crate::config::{Precision, TrainConfig};
use crate::data::{Loader, LoaderOptions, SampleSource, epoch_order};
use crate::error::TrainError;
use crate::metrics::{ConfusionMatrix, SegMetrics};
use crate::model::{build_model, upsample_logits};
use crate::optim::AdamW;
use crate::report::{EpochRecord, Reporter, StepRecord};
use crate::scaler::GradScaler;

/// How to run: where to write, whether to resume.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The run directory (created; holds checkpoints, metrics, plots, the resolved config).
    pub run_dir: PathBuf,
    /// Continue from `run_dir/checkpoints/last`.
    pub resume: bool,
}

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Optimizer steps taken.
    pub steps: u64,
    /// Steps skipped for non-finite values.
    pub skipped_steps: u64,
    /// Validation metrics of the last evaluation.
    pub last_eval: Option<EvalResult>,
    /// Best value of the selection metric.
    pub best: Option<f64>,
}

/// Validation loss and metrics.
#[derive(Clone, Debug)]
pub struct EvalResult {
    /// Mean loss over the validation batches.
    pub loss: f64,
    /// Metrics over every validation pixel.
    pub metrics: SegMetrics,
    /// The confusion matrix behind them.
    pub confusion: ConfusionMatrix,
}

/// Datasets and preprocessing of a run, resolved from its config.
pub(crate) struct RunData {
    pub train: Arc<SampleSource>,
    pub val: Arc<SampleSource>,
    pub class_names: Vec<String>,
    pub bands: usize,
    pub audit: Option<tiles::AuditReport>,
}

pub(crate) fn resolve_data(cfg: &TrainConfig) -> Result<RunData, TrainError> {
    let open = |split: &str| match &cfg.data.classes {
        Some(l) => SegDataset::open_with_labels(&cfg.data.root, split, l.clone()),
        None => SegDataset::open(&cfg.data.root, split),
    };
    // Catch data mistakes (unpaired files, unmapped mask values, size mismatches) before any
    // compute is spent; the prepared dataset's own label map is what gets audited.
    let audit = match &cfg.data.classes {
        None => Some(tiles::audit_prepared(&cfg.data.root)?),
        Some(_) => None,
    };
    let train = open(&cfg.data.train_split)?;
    let val = open(&cfg.data.val_split)?;
    if train.is_empty() {
        return Err(TrainError::Config(format!(
            "the `{}` split of {} is empty; prepare data with `segfit prepare`",
            cfg.data.train_split,
            cfg.data.root.display()
        )));
    }
    let class_names = train.labels().class_names();
    let first = train.get(0)?;
    let bands = first.image.bands;
    let [h, w] = cfg.data.size;
    let mut processor = SegformerProcessor {
        size: Some((h, w)),
        ..Default::default()
    };
    if cfg.data.normalize == "dataset" {
        let meta = train.meta().filter(|m| m.band_stats.len() == bands).ok_or_else(|| {
            TrainError::Config(format!(
                "`data.normalize = \"dataset\"` needs per-band statistics in {}/dataset.json; re-run `segfit prepare`",
                cfg.data.root.display()
            ))
        })?;
        normalize_with_dataset_stats(&mut processor, meta);
    } else if bands != 3 {
        return Err(TrainError::Config(format!(
            "the images have {bands} bands but `data.normalize = \"imagenet\"` has statistics for 3; \
             set data.normalize = \"dataset\""
        )));
    }
    let pipeline = Pipeline::new(&cfg.augment)?;
    let seed = cfg.train.seed;
    Ok(RunData {
        train: Arc::new(SampleSource {
            dataset: train,
            pipeline,
            processor: processor.clone(),
            seed,
        }),
        val: Arc::new(SampleSource {
            dataset: val,
            pipeline: Pipeline::new(&PipelineConfig::default())?,
            processor,
            seed,
        }),
        class_names,
        bands,
        audit,
    })
}

/// Sets the processor's mean/std to the dataset's per-band statistics, in rescaled units (the
/// processor divides by the sample type's maximum first).
pub fn normalize_with_dataset_stats(processor: &mut SegformerProcessor, meta: &tiles::DatasetMeta) {
    let max = meta.sample_kind.max_value() as f64;
    processor.image_mean = meta
        .band_stats
        .iter()
        .map(|s| (s.mean / max) as f32)
        .collect();
    processor.image_std = meta
        .band_stats
        .iter()
        .map(|s| (s.std.max(1e-6) / max) as f32)
        .collect();
}

/// Trains the model `cfg` describes on backend `B`, writing everything under `opts.run_dir`.
pub fn train<B: AutodiffBackend>(
    cfg: &TrainConfig,
    opts: &RunOptions,
    device: &B::Device,
) -> Result<RunSummary, TrainError> {
    let run = RunDir(opts.run_dir.clone());
    std::fs::create_dir_all(&opts.run_dir).map_err(|e| TrainError::io(&opts.run_dir, e))?;
    let data = resolve_data(cfg)?;
    let t = &cfg.train;
    let compute = match t.precision {
        Precision::F32 => None,
        Precision::Bf16 => Some(FloatDType::BF16),
        Precision::F16 => Some(FloatDType::F16),
    };
    let use_scaler = t.precision == Precision::F16;

    B::seed(device, t.seed);
    let (mut model, report) = build_model::<B>(&cfg.model, &data.class_names, data.bands, device)?;
    let mut optim = AdamW::<B>::new(cfg.optimizer.clone());
    let mut state = TrainerState {
        epoch: 0,
        next_batch: 0,
        step: 0,
        optimizer_steps: 0,
        best: None,
        bad_steps: 0,
        skipped_steps: 0,
        scaler: GradScaler::default(),
    };
    if opts.resume {
        let last = run.last();
        let (m, _) = segformer::load_hf_dir::<B>(&last, device)?;
        model = m;
        let (s, tensors) = load_trainer_state(&last)?;
        optim
            .load_state(s.optimizer_steps, tensors, device)
            .map_err(|reason| TrainError::Checkpoint {
                path: last.clone(),
                reason,
            })?;
        state = s;
    }
    let mut model = model.with_compute_dtype(compute);
    let mut reporter = Reporter::new(
        &opts.run_dir,
        cfg,
        &data.class_names,
        opts.resume,
        state.step,
    )?;
    if let Some(a) = &data.audit {
        reporter.note(&a.to_string());
    }
    if let Some(r) = &report {
        reporter.note(&format!("loaded {}", r));
    }

    let n_train = data.train.dataset.len();
    let batches_per_epoch = n_train.div_ceil(t.batch_size);
    let steps_per_epoch = batches_per_epoch.div_ceil(t.accumulation_steps);
    let mut total_steps = (t.epochs * steps_per_epoch) as u64;
    if let Some(max) = t.max_steps {
        total_steps = total_steps.min(max as u64);
    }
    let epochs = t.epochs;
    let mut last_eval = None;

    'epochs: while state.epoch < epochs && state.step < total_steps {
        let epoch = state.epoch;
        let order = epoch_order(n_train, t.seed, epoch as u64, true);
        let loader = Loader::new(
            data.train.clone(),
            order,
            epoch as u64,
            LoaderOptions {
                batch_size: t.batch_size,
                start_batch: state.next_batch,
                workers: t.workers,
                prefetch: t.prefetch,
            },
        );
        reporter.start_epoch(
            epoch,
            loader.remaining_batches().div_ceil(t.accumulation_steps),
        );
        let mut accumulator = GradientsAccumulator::<Segformer<B>>::new();
        let mut group_loss = 0.0f64;
        let mut group_finite = true;
        let mut epoch_loss = (0.0f64, 0usize);
        let started = Instant::now();
        let mut images = 0usize;
        let first_batch = state.next_batch;
        for (offset, batch) in loader.enumerate() {
            let b = first_batch + offset;
            let batch = batch?;
            let group_start = b / t.accumulation_steps * t.accumulation_steps;
            let group_len = t.accumulation_steps.min(batches_per_epoch - group_start);
            // Dropout and drop path draw from the backend RNG: reseed per micro-batch so a resumed
            // run draws exactly what the uninterrupted one would have.
            B::seed(device, mix(t.seed, epoch as u64, b as u64));
            let (x, y) = batch_tensors::<B>(&batch, device);
            images += batch.n;
            let loss = model.loss(model.forward(x), y);
            let loss_value = loss.clone().into_scalar().to_f64();
            if loss_value.is_finite() {
                group_loss += loss_value / group_len as f64;
                // f16: scale the loss so small gradients survive; AdamW unscales them.
                let scale = if use_scaler {
                    state.scaler.scale()
                } else {
                    1.0
                };
                let grads = loss.mul_scalar(scale / group_len as f64).backward();
                accumulator.accumulate(&model, GradientsParams::from_grads(grads, &model));
            } else {
                group_finite = false; // the graph is dropped here, unused
            }
            if b + 1 < group_start + group_len {
                continue;
            }
            // End of a group: one optimizer step.
            let grads = accumulator.grads();
            let lr = cfg
                .schedule
                .lr(cfg.optimizer.lr, state.step as usize, total_steps as usize);
            let grad_scale = if use_scaler {
                1.0 / state.scaler.scale()
            } else {
                1.0
            };
            let applied = if group_finite {
                let (m, stats) = optim.step(lr, model, grads, grad_scale);
                model = m;
                stats.applied
            } else {
                false
            };
            state.step += 1;
            state.next_batch = b + 1;
            // GradScaler semantics: an f16 overflow halves the scale and skips the step; it only
            // counts towards divergence when the loss itself was not finite.
            let overflow_only = use_scaler && group_finite && !applied;
            if use_scaler {
                state.scaler.update(applied);
            }
            if overflow_only {
                state.skipped_steps += 1;
                reporter.note(&format!(
                    "step {}: f16 gradient overflow, step skipped, loss scale now {}",
                    state.step,
                    state.scaler.scale()
                ));
            } else if applied {
                state.bad_steps = 0;
                state.optimizer_steps = optim.steps();
                epoch_loss.0 += group_loss;
                epoch_loss.1 += 1;
            } else {
                state.bad_steps += 1;
                state.skipped_steps += 1;
                reporter.note(&format!(
                    "step {}: non-finite loss or gradient, step skipped",
                    state.step
                ));
                if state.bad_steps >= t.max_bad_steps {
                    return Err(TrainError::Diverged {
                        step: state.step,
                        count: state.bad_steps,
                    });
                }
            }
            let throughput = images as f64 / started.elapsed().as_secs_f64().max(1e-9);
            reporter.step(&StepRecord {
                epoch,
                step: state.step,
                loss: group_loss,
                lr,
                images_per_s: throughput,
            });
            group_loss = 0.0;
            group_finite = true;
            if t.checkpoint_every > 0 && state.step.is_multiple_of(t.checkpoint_every as u64) {
                save_checkpoint(&run.last(), &model, &optim, &state)?;
            }
            if state.step >= total_steps {
                break;
            }
        }
        let finished_epoch = state.next_batch >= batches_per_epoch;
        if finished_epoch {
            state.epoch += 1;
            state.next_batch = 0;
        }
        let train_loss = if epoch_loss.1 > 0 {
            epoch_loss.0 / epoch_loss.1 as f64
        } else {
            f64::NAN
        };
        let evaluate = finished_epoch
            && (state.epoch.is_multiple_of(t.eval_every.max(1)) || state.epoch >= epochs)
            || state.step >= total_steps;
        if evaluate {
            let inner = model.valid();
            let eval = evaluate_model(
                &inner,
                &data.val,
                t.batch_size,
                t.workers,
                t.prefetch,
                &mut reporter,
            )?;
            let value = selection_value(&t.best_metric, &eval);
            let improved = match state.best {
                None => value.is_finite(),
                Some(best) => better(&t.best_metric, value, best),
            };
            if improved {
                state.best = Some(value);
            }
            reporter.epoch(&EpochRecord {
                epoch,
                step: state.step,
                train_loss,
                val_loss: eval.loss,
                metrics: eval.metrics.clone(),
                seconds: started.elapsed().as_secs_f64(),
            })?;
            reporter.overlays(&inner, &data.val, t.overlay_samples)?;
            save_checkpoint(&run.last(), &model, &optim, &state)?;
            if improved {
                save_checkpoint(&run.best(), &model, &optim, &state)?;
            }
            last_eval = Some(eval);
        } else {
            save_checkpoint(&run.last(), &model, &optim, &state)?;
        }
        if state.step >= total_steps {
            break 'epochs;
        }
    }
    reporter.finish();
    Ok(RunSummary {
        run_dir: opts.run_dir.clone(),
        steps: state.step,
        skipped_steps: state.skipped_steps,
        last_eval,
        best: state.best,
    })
}

/// Loss and metrics of `model` over every sample of `source` (no autodiff: nothing is recorded).
pub fn evaluate_model<B: Backend>(
    model: &Segformer<B>,
    source: &Arc<SampleSource>,
    batch_size: usize,
    workers: usize,
    prefetch: usize,
    reporter: &mut Reporter,
) -> Result<EvalResult, TrainError> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let n = source.dataset.len();
    let loader = Loader::new(
        source.clone(),
        (0..n).collect(),
        0,
        LoaderOptions {
            batch_size,
            start_batch: 0,
            workers,
            prefetch,
        },
    );
    reporter.start_eval(loader.remaining_batches());
    let num_classes = model.num_labels().max(2);
    let ignore = model.config().semantic_loss_ignore_index;
    let mut confusion = ConfusionMatrix::new(num_classes, ignore);
    let (mut loss_sum, mut batches) = (0.0f64, 0usize);
    for batch in loader {
        let batch = batch?;
        let (x, y) = batch_tensors::<B>(&batch, &device);
        let logits = model.forward(x);
        loss_sum += model.loss(logits.clone(), y).into_scalar().to_f64();
        batches += 1;
        let pred = predict_classes(logits, [batch.h, batch.w]);
        let pred: Vec<i64> = pred
            .into_data()
            .convert::<i64>()
            .to_vec()
            .expect("int predictions");
        confusion.update(batch.labels.as_deref().unwrap_or(&[]), &pred);
        reporter.eval_batch();
    }
    Ok(EvalResult {
        loss: loss_sum / batches.max(1) as f64,
        metrics: confusion.metrics(),
        confusion,
    })
}

/// Class index per pixel at `size`: logits upsampled like HF's post-processing, then argmax
/// (for a single-logit model, `logit > 0`).
///
/// # Shapes
/// `[batch, classes, h, w]` → `[batch, size[0], size[1]]`
pub fn predict_classes<B: Backend>(logits: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 3, Int> {
    let up = upsample_logits(logits, size);
    let [n, c, h, w] = up.dims();
    if c == 1 {
        return up.greater_elem(0.0).int().reshape([n, h, w]);
    }
    up.argmax(1).reshape([n, h, w])
}

/// A collated batch as model input and labels.
///
/// # Shapes
/// pixel values `[n, c, h, w]`, labels `[n, h, w]` (255 where the batch has none).
pub(crate) fn batch_tensors<B: Backend>(
    batch: &Batch,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 3, Int>) {
    let x = Tensor::from_data(
        TensorData::new(
            batch.pixel_values.clone(),
            [batch.n, batch.c, batch.h, batch.w],
        ),
        device,
    );
    let labels = batch
        .labels
        .clone()
        .unwrap_or_else(|| vec![255; batch.n * batch.h * batch.w]);
    let y = Tensor::from_data(TensorData::new(labels, [batch.n, batch.h, batch.w]), device);
    (x, y)
}

fn selection_value(metric: &str, eval: &EvalResult) -> f64 {
    match metric {
        "val_loss" => eval.loss,
        "mean_f1" => eval.metrics.mean_f1,
        "pixel_accuracy" => eval.metrics.pixel_accuracy,
        _ => eval.metrics.miou,
    }
}

fn better(metric: &str, value: f64, best: f64) -> bool {
    if metric == "val_loss" {
        value < best
    } else {
        value > best
    }
}

/// A 64-bit mix of three values (splitmix64 steps), for per-batch seeds.
fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut z = a ^ b.rotate_left(21) ^ c.rotate_left(42) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Whether `dir` holds a run that can be resumed.
pub fn can_resume(dir: &Path) -> bool {
    RunDir(dir.to_path_buf())
        .last()
        .join("trainer_state.json")
        .is_file()
}
