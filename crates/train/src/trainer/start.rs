//! Starting a run: the data resolved, the model built or reloaded with its optimizer and loop
//! position, the loss resolved and the run's log opened with what it says before the first
//! step.

use burn::tensor::backend::AutodiffBackend;
use segformer::Segformer;

use super::{Collective, EpochTally, Group, Replica, RunOptions, Trainer};
use crate::checkpoint::{RunDir, TrainerState, load_trainer_state};
use crate::config::{Precision, TrainConfig};
use crate::error::TrainError;
use crate::model::build_model;
use crate::optim::AdamW;
use crate::report::Reporter;
use crate::run_data::{RunData, resolve_data};

impl<'a, B: AutodiffBackend> Trainer<'a, B> {
    /// Resolves the data, builds (or, with `opts.resume`, reloads) the model and the optimizer,
    /// copies both to every device after the first, and opens the run's log.
    pub(crate) fn new(
        cfg: &'a TrainConfig,
        opts: &RunOptions,
        devices: &[B::Device],
    ) -> Result<Self, TrainError> {
        let Some(device) = devices.first() else {
            return Err(TrainError::Config("no device to train on".into()));
        };
        let run = RunDir(opts.run_dir.clone());
        std::fs::create_dir_all(&opts.run_dir).map_err(|e| TrainError::io(&opts.run_dir, e))?;
        let data = resolve_data(cfg)?;
        let t = &cfg.train;
        B::seed(device, t.seed);
        let (model, report) = build_model::<B>(&cfg.model, &data.class_names, data.bands, device)?;
        let mut optim = AdamW::<B>::new(cfg.optimizer.clone());
        let (model, state) = if opts.resume {
            resume(&run, &mut optim, device)?
        } else {
            (model, TrainerState::default())
        };
        let model = model
            .with_compute_dtype(t.precision.compute_dtype())
            .with_kernels(opts.kernels);
        let group = t.accumulation_steps * devices.len();
        if !state.next_batch.is_multiple_of(group) {
            return Err(TrainError::Checkpoint {
                path: run.last(),
                reason: format!(
                    "it stopped at micro-batch {} of its epoch, inside a group of {group} \
                     (train.accumulation_steps = {} on {} devices); resume on the number of \
                     devices it was trained on",
                    state.next_batch,
                    t.accumulation_steps,
                    devices.len()
                ),
            });
        }
        let reporter = Reporter::new(
            &opts.run_dir,
            cfg,
            &data.class_names,
            &data.preprocessing,
            opts.resume,
            state.step,
        )?;
        let class_pixels = match cfg.loss.needs_class_counts() {
            true => Some(data.train_class_pixels()?),
            false => None,
        };
        let loss = cfg
            .loss
            .resolve(data.class_names.len(), class_pixels.as_deref())?;
        log_setup(
            &reporter,
            cfg,
            &data,
            report.as_ref(),
            &model,
            &loss,
            device,
        );
        let batches_per_epoch = data.train.dataset.len().div_ceil(t.batch_size);
        let steps_per_epoch = batches_per_epoch.div_ceil(group);
        let total_steps = match t.max_steps {
            Some(max) => ((t.epochs * steps_per_epoch) as u64).min(max as u64),
            None => (t.epochs * steps_per_epoch) as u64,
        };
        // The other replicas: the same weights and optimizer state on their devices.
        let mut replicas: Vec<Replica<B>> = devices[1..]
            .iter()
            .map(|d| Replica::new(d.clone(), model.replica(d), optim.to_device(d)))
            .collect();
        replicas.insert(0, Replica::new(device.clone(), model, optim));
        let collective = Collective::start(devices)?;
        Ok(Self {
            cfg,
            run,
            data,
            replicas,
            collective,
            turn: Default::default(),
            state,
            reporter,
            batches_per_epoch,
            total_steps,
            use_scaler: t.precision == Precision::F16,
            group: Group::new(),
            tally: EpochTally::new(),
            last_eval: None,
            loss,
        })
    }
}

/// The model, optimizer state and loop position of the run's `checkpoints/last`.
fn resume<B: AutodiffBackend>(
    run: &RunDir,
    optim: &mut AdamW<B>,
    device: &B::Device,
) -> Result<(Segformer<B>, TrainerState), TrainError> {
    let last = run.last();
    let model = segformer::load_hf_dir::<B>(&last, device)?.0;
    let (state, tensors) = load_trainer_state(&last)?;
    optim
        .load_state(state.optimizer_steps, tensors, device)
        .map_err(|reason| TrainError::Checkpoint {
            path: last.clone(),
            reason,
        })?;
    Ok((model, state))
}

/// What the run's log says before the first step: the audit, how the precision runs on the
/// CPU, the band selection, the weights' load report and the loss with its memory.
fn log_setup<B: AutodiffBackend>(
    reporter: &Reporter,
    cfg: &TrainConfig,
    data: &RunData,
    load: Option<&segformer::LoadReport>,
    model: &Segformer<B>,
    loss: &segformer::SegLoss,
    device: &B::Device,
) {
    if let Some(a) = &data.audit {
        reporter.note(&a.to_string());
    }
    if segformer::BackendKind::of::<B>(device) == segformer::BackendKind::Flex
        && let Some(note) = cpu_precision_note(cfg.train.precision)
    {
        reporter.note(note);
    }
    if let Some(b) = &cfg.data.bands {
        reporter.note(&format!(
            "data.bands: the model sees stored bands {b:?}, in that order (the band statistics above are per stored band)"
        ));
    }
    if let Some(r) = load {
        reporter.note(&r.to_string());
    }
    if *loss != segformer::SegLoss::default() {
        let t = &cfg.train;
        let input = crate::plan::PlanInput {
            config: model.config(),
            height: cfg.data.size[0],
            width: cfg.data.size[1],
            batch: t.batch_size,
            precision: t.precision,
            checkpointing: t.checkpointing,
            kernels: model.kernel_path(device),
            // Only the loss terms are counted here: where they live does not matter.
            allocator: crate::plan::Allocator::Heap,
            loss: Some(loss),
        };
        let extra = crate::plan::loss_terms_bytes(&input, loss);
        reporter.note(&format!(
            "{}; these terms keep about {} more than plain cross-entropy per micro-batch",
            crate::loss::describe(loss, &data.class_names),
            crate::plan::human(extra)
        ));
    }
}

/// How `precision` runs on the CPU backend, when it is not plain f32.
fn cpu_precision_note(precision: Precision) -> Option<&'static str> {
    match precision {
        Precision::F32 => None,
        Precision::Bf16 if segformer::cpu_has_bf16_kernels() => Some(
            "train.precision = \"bf16\" on the CPU: the fused kernels multiply bf16 operands \
             with f32 sums (AVX512-BF16) in the linear layers, patch convs and attention; activations \
             stay f32, so memory is f32's",
        ),
        Precision::Bf16 => Some(
            "train.precision = \"bf16\": this CPU has no AVX512-BF16, so the run computes in \
             f32 (the same results and memory as \"f32\")",
        ),
        Precision::F16 => Some(
            "train.precision = \"f16\" on the CPU: no fused f16 kernels, so this runs burn's \
             composed half-precision ops, measured at about a third of the f32 step's speed \
             (crates/train/BENCH-speed.md); \"bf16\" or \"f32\" is faster on this backend",
        ),
    }
}
