//! The training loop, as a [`Trainer`] that the run drives epoch by epoch.
//!
//! Per round of micro-batches ([`Trainer::micro_batches`], one per device: see `replicas.rs`
//! for several): forward, loss, backward, gradients added to the group's. Per group of
//! `accumulation_steps` rounds ([`Trainer::optimizer_step`]): the gradients summed across the
//! devices, then one AdamW step, whose [`StepOutcome`] says whether it was applied. Per epoch
//! ([`Trainer::end_epoch`]): evaluation when due, metrics, plots and checkpoints. Nothing from
//! a step outlives it: the loss is read back as a plain `f32` and the graph is consumed by
//! `backward`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use augment::Batch;
use burn::module::{AutodiffModule, Module};
use burn::tensor::backend::{AutodiffBackend, Backend};
use infer::EvalResult;
use segformer::Segformer;

use crate::checkpoint::{RunDir, TrainerState, save_checkpoint};
use crate::config::{LoopConfig, TrainConfig};
use crate::data::{Loader, LoaderOptions, SampleSource, epoch_order};
use crate::error::TrainError;
use crate::report::{EpochRecord, Reporter, StepRecord};
use crate::run_data::RunData;

mod replicas;
mod start;

use replicas::{Collective, Replica, on_each};

/// How to run: where to write, whether to resume.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The run directory (created; holds checkpoints, metrics, plots, the resolved config).
    pub run_dir: PathBuf,
    /// Continue from `run_dir/checkpoints/last`.
    pub resume: bool,
    /// The implementation of the model's layers (`segformer::Kernels::Auto`: the fastest
    /// the backend has).
    pub kernels: segformer::Kernels,
}

impl RunOptions {
    /// A fresh run (no resume) into `run_dir` with the fastest kernels the backend has.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        Self {
            run_dir: run_dir.into(),
            resume: false,
            kernels: segformer::Kernels::Auto,
        }
    }
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
    /// Why the run stopped early (`train.early_stopping`), when it did.
    pub stopped: Option<String>,
}

/// Trains the model `cfg` describes on backend `B`, writing everything under `opts.run_dir`.
pub fn train<B: AutodiffBackend>(
    cfg: &TrainConfig,
    opts: &RunOptions,
    device: &B::Device,
) -> Result<RunSummary, TrainError> {
    train_data_parallel::<B>(cfg, opts, std::slice::from_ref(device))
}

/// [`train`] data-parallel on `devices` (one replica of the model each, the first the
/// primary, which evaluates and is checkpointed): every optimizer step takes
/// `train.batch_size × devices × train.accumulation_steps` samples, one micro-batch per device
/// at a time, and sums their gradients across the devices with burn-collective's all-reduce.
/// The result equals one device accumulating the same micro-batches, up to the order of the
/// gradient sums; BatchNorm's batch statistics are per micro-batch either way, and the running
/// statistics kept are the primary's.
pub fn train_data_parallel<B: AutodiffBackend>(
    cfg: &TrainConfig,
    opts: &RunOptions,
    devices: &[B::Device],
) -> Result<RunSummary, TrainError> {
    let mut trainer = Trainer::<B>::new(cfg, opts, devices)?;
    while trainer.state.epoch < cfg.train.epochs
        && !trainer.out_of_steps()
        && trainer.state.stopped.is_none()
    {
        trainer.run_epoch()?;
    }
    Ok(trainer.finish())
}

/// What one optimizer step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepOutcome {
    /// AdamW applied the group's gradients.
    Applied,
    /// f16 gradients overflowed: the step was skipped and the loss scale halved
    /// (GradScaler semantics; not a sign of divergence).
    Overflow,
    /// A loss or gradient was not finite: the step was skipped (counts towards divergence).
    NonFinite,
}

/// The micro-batches of the next optimizer step so far (their gradients are the replicas').
struct Group {
    /// Mean loss of the group so far (each micro-batch's loss divided by the group's size).
    loss: f64,
    /// Whether every micro-batch of the group had a finite loss.
    finite: bool,
}

impl Group {
    fn new() -> Self {
        Self {
            loss: 0.0,
            finite: true,
        }
    }
}

/// Running figures of the current epoch.
struct EpochTally {
    started: Instant,
    /// When the previous optimizer step ended (the epoch's start before the first).
    last_step: Instant,
    images: usize,
    /// Sum and count of the losses of applied steps.
    loss: (f64, usize),
}

impl EpochTally {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last_step: now,
            images: 0,
            loss: (0.0, 0),
        }
    }

    fn mean_loss(&self) -> f64 {
        match self.loss {
            (_, 0) => f64::NAN,
            (sum, n) => sum / n as f64,
        }
    }
}

/// One training run in progress: the model, its optimizer and the loop's position.
pub(crate) struct Trainer<'a, B: AutodiffBackend> {
    cfg: &'a TrainConfig,
    run: RunDir,
    data: RunData,
    /// One per device, the primary first; identical after every optimizer step.
    replicas: Vec<Replica<B>>,
    /// The all-reduce between the replicas (`None` on one device).
    collective: Option<Collective<B>>,
    /// Held by a replica for the whole of a micro-batch (seeding burn's process-wide RNG,
    /// forward, loss and backward): see `Replica::micro_batch`.
    turn: Mutex<()>,
    state: TrainerState,
    reporter: Reporter,
    batches_per_epoch: usize,
    total_steps: u64,
    /// f16: scale the loss so small gradients survive; AdamW unscales them.
    use_scaler: bool,
    group: Group,
    tally: EpochTally,
    last_eval: Option<EvalResult>,
    /// The training loss (`[loss]`).
    loss: segformer::SegLoss,
}

impl<'a, B: AutodiffBackend> Trainer<'a, B> {
    /// The primary replica's model: the one evaluated and checkpointed.
    fn model(&self) -> &Segformer<B> {
        self.replicas[0].model()
    }

    /// Micro-batches per optimizer step: `accumulation_steps` rounds of one per device.
    fn group_size(&self) -> usize {
        self.cfg.train.accumulation_steps * self.replicas.len()
    }

    fn out_of_steps(&self) -> bool {
        self.state.step >= self.total_steps
    }

    /// Trains the rest of the current epoch (from `state.next_batch`), then ends it.
    fn run_epoch(&mut self) -> Result<(), TrainError> {
        let t = &self.cfg.train;
        let epoch = self.state.epoch as u64;
        let order = epoch_order(self.data.train.dataset.len(), t.seed, epoch, true);
        let first_batch = self.state.next_batch;
        let options = LoaderOptions {
            batch_size: t.batch_size,
            start_batch: first_batch,
            workers: t.workers,
            prefetch: t.prefetch,
        };
        let loader = Loader::new(self.data.train.clone(), order, epoch, options);
        let steps = loader.remaining_batches().div_ceil(self.group_size());
        self.reporter.start_epoch(self.state.epoch, steps);
        self.group = Group::new();
        self.tally = EpochTally::new();
        let mut round = Vec::with_capacity(self.replicas.len());
        for (offset, batch) in loader.enumerate() {
            let b = first_batch + offset;
            round.push(batch?);
            // A round is one micro-batch per device; the last of a short group may have fewer.
            if round.len() < self.replicas.len() && b + 1 < self.group_end(b) {
                continue;
            }
            self.micro_batches(b + 1 - round.len(), &round);
            round.clear();
            if b + 1 < self.group_end(b) {
                continue;
            }
            let lr = self.lr();
            let outcome = self.optimizer_step(lr, b + 1)?;
            self.after_step(outcome, lr)?;
            if self.out_of_steps() {
                break;
            }
        }
        self.end_epoch()
    }

    /// One past the last micro-batch of the group of micro-batch `b` (the last group of an
    /// epoch may be short).
    fn group_end(&self, b: usize) -> usize {
        let k = self.group_size();
        let start = b / k * k;
        start + k.min(self.batches_per_epoch - start)
    }

    /// Forward, loss and backward of micro-batches `first..first + round.len()` of the epoch,
    /// the `i`-th on replica `i` (side by side when there are several); their gradients join
    /// the group's. A non-finite loss marks the group instead (its graph is dropped unused).
    pub(crate) fn micro_batches(&mut self, first: usize, round: &[Batch]) {
        let t = &self.cfg.train;
        let group_start = first / self.group_size() * self.group_size();
        let group_len = (self.group_end(first) - group_start) as f64;
        let scale = if self.use_scaler {
            self.state.scaler.scale()
        } else {
            1.0
        };
        let epoch = self.state.epoch as u64;
        let (loss_fn, seed) = (&self.loss, t.seed);
        // Dropout and drop path draw from the backend RNG: reseeded per micro-batch so a
        // resumed run draws exactly what the uninterrupted one would have.
        let turn = (self.replicas.len() > 1).then_some(&self.turn);
        let losses = on_each(&mut self.replicas, |i, replica| {
            round.get(i).map(|batch| {
                let seed = mix(seed, epoch, (first + i) as u64);
                replica.micro_batch(batch, seed, scale / group_len, loss_fn, turn)
            })
        });
        for (value, batch) in losses.into_iter().flatten().zip(round) {
            self.tally.images += batch.n;
            if value.is_finite() {
                self.group.loss += value / group_len;
            } else {
                self.group.finite = false;
            }
        }
    }

    /// The learning rate of the next optimizer step.
    fn lr(&self) -> f64 {
        let c = self.cfg;
        c.schedule.lr(
            c.optimizer.lr,
            self.state.step as usize,
            self.total_steps as usize,
        )
    }

    /// One AdamW step on the group's gradients at `lr`; the epoch continues at `next_batch`.
    pub(crate) fn optimizer_step(
        &mut self,
        lr: f64,
        next_batch: usize,
    ) -> Result<StepOutcome, TrainError> {
        let grad_scale = if self.use_scaler {
            1.0 / self.state.scaler.scale()
        } else {
            1.0
        };
        let applied = if self.group.finite {
            let collective = self.collective.as_ref();
            // Every replica applies the same summed gradients, so all agree on `applied`.
            let applied = on_each(&mut self.replicas, |i, replica| {
                replica.step(lr, grad_scale, collective.map(|c| c.peer(i)))
            });
            applied.into_iter().collect::<Result<Vec<_>, _>>()?[0]
        } else {
            self.replicas.iter_mut().for_each(Replica::discard);
            false
        };
        let state = &mut self.state;
        state.step += 1;
        state.next_batch = next_batch;
        if self.use_scaler {
            state.scaler.update(applied);
        }
        Ok(if applied {
            state.bad_steps = 0;
            state.optimizer_steps = self.replicas[0].optim.steps();
            StepOutcome::Applied
        } else {
            state.skipped_steps += 1;
            // An f16 overflow with finite losses only halves the scale; anything else counts
            // towards divergence.
            if self.use_scaler && self.group.finite {
                StepOutcome::Overflow
            } else {
                state.bad_steps += 1;
                StepOutcome::NonFinite
            }
        })
    }

    /// Logs the step, stops a diverging run, writes the periodic checkpoint, and starts the
    /// next group.
    fn after_step(&mut self, outcome: StepOutcome, lr: f64) -> Result<(), TrainError> {
        let t = &self.cfg.train;
        let step = self.state.step;
        match outcome {
            StepOutcome::Applied => {
                self.tally.loss.0 += self.group.loss;
                self.tally.loss.1 += 1;
            }
            StepOutcome::Overflow => self.reporter.note(&format!(
                "step {step}: f16 gradient overflow, step skipped, loss scale now {}",
                self.state.scaler.scale()
            )),
            StepOutcome::NonFinite => {
                self.reporter.note(&format!(
                    "step {step}: non-finite loss or gradient, step skipped"
                ));
                if self.state.bad_steps >= t.max_bad_steps {
                    return Err(TrainError::Diverged {
                        step,
                        count: self.state.bad_steps,
                    });
                }
            }
        }
        let now = Instant::now();
        let elapsed = (now - self.tally.started).as_secs_f64().max(1e-9);
        let step_seconds = (now - self.tally.last_step).as_secs_f64();
        self.tally.last_step = now;
        self.reporter.step(StepRecord {
            epoch: self.state.epoch,
            step,
            loss: self.group.loss,
            lr,
            images_per_s: self.tally.images as f64 / elapsed,
            step_seconds,
            host_rss_mib: None,
        });
        self.group.loss = 0.0;
        self.group.finite = true;
        if t.checkpoint_every > 0 && step.is_multiple_of(t.checkpoint_every as u64) {
            self.save(&self.run.last())?;
        }
        Ok(())
    }

    /// Closes the epoch (or the run, when its steps are spent mid-epoch): evaluates when due,
    /// logs the epoch and writes `last` (and `best` when the selection metric improved).
    pub(crate) fn end_epoch(&mut self) -> Result<(), TrainError> {
        let t = &self.cfg.train;
        let epoch = self.state.epoch;
        let finished = self.state.next_batch >= self.batches_per_epoch;
        if finished {
            self.state.epoch += 1;
            self.state.next_batch = 0;
        }
        let due =
            self.state.epoch.is_multiple_of(t.eval_every.max(1)) || self.state.epoch >= t.epochs;
        if !(finished && due || self.out_of_steps()) {
            return self.save(&self.run.last());
        }
        let inner = self.model().valid();
        let eval = evaluate_split(&inner, &self.data.val, t, &mut self.reporter)?;
        let value = t.best_metric.of(&eval);
        let improved = t.best_metric.improves(value, self.state.best, 0.0);
        if improved {
            self.state.best = Some(value);
        }
        if let Some(es) = &t.early_stopping {
            let v = es.metric.of(&eval);
            if let Some(why) = es.observe(&mut self.state.early_stopping, v) {
                let why = format!(
                    "{why}; stopped after epoch {epoch}, step {}",
                    self.state.step
                );
                self.reporter.note(&why);
                self.state.stopped = Some(why);
            }
        }
        self.reporter.epoch(&EpochRecord {
            epoch,
            step: self.state.step,
            train_loss: self.tally.mean_loss(),
            val_loss: eval.loss,
            metrics: eval.metrics.clone(),
            seconds: self.tally.started.elapsed().as_secs_f64(),
        })?;
        self.reporter
            .overlays(&inner, &self.data.val, t.overlay_samples, self.state.step)?;
        self.save(&self.run.last())?;
        if improved {
            crate::checkpoint::copy_checkpoint(&self.run.last(), &self.run.best())?;
        }
        self.last_eval = Some(eval);
        Ok(())
    }

    /// Writes model, optimizer and loop state to the checkpoint directory `dir`, and the
    /// TensorBoard events logged so far (a resume from this checkpoint keeps them).
    fn save(&mut self, dir: &Path) -> Result<(), TrainError> {
        self.reporter.flush();
        let primary = &self.replicas[0];
        save_checkpoint(dir, primary.model(), &primary.optim, &self.state)
    }

    /// Closes the log and reports the run.
    fn finish(mut self) -> RunSummary {
        self.reporter.finish();
        RunSummary {
            run_dir: self.run.0.clone(),
            steps: self.state.step,
            skipped_steps: self.state.skipped_steps,
            last_eval: self.last_eval,
            best: self.state.best,
            stopped: self.state.stopped.clone(),
        }
    }
}

/// Loss and metrics over every sample of `source`, through the one evaluation loop,
/// [`infer::evaluate`] (`model` without autodiff: nothing is recorded).
fn evaluate_split<B: Backend>(
    model: &Segformer<B>,
    source: &Arc<SampleSource>,
    t: &LoopConfig,
    reporter: &mut Reporter,
) -> Result<EvalResult, TrainError> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let options = LoaderOptions {
        batch_size: t.batch_size,
        start_batch: 0,
        workers: t.workers,
        prefetch: t.prefetch,
    };
    let loader = Loader::new(
        source.clone(),
        (0..source.dataset.len()).collect(),
        0,
        options,
    );
    reporter.start_eval(loader.remaining_batches());
    infer::evaluate(model, loader, &device, || reporter.eval_batch())
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
