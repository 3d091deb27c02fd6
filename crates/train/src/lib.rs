//! The segfit training loop: AdamW with PyTorch semantics, schedules, gradient accumulation,
//! streaming metrics, atomic checkpoints and exact resume.
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use train::{RunOptions, TrainConfig};
//!
//! let cfg = TrainConfig::from_toml_str(
//!     "[model]\npreset = \"mit-b0\"\n[data]\nroot = \"data/synthetic\"\nsize = [128, 128]\n",
//!     &["train.epochs=2".to_string()],
//! )?;
//! let opts = RunOptions::new("runs/demo");
//! let summary = train::train::<Autodiff<Flex>>(&cfg, &opts, &Default::default())?;
//! println!("val mIoU {:?}", summary.last_eval.map(|e| e.metrics.miou));
//! # Ok::<(), train::TrainError>(())
//! ```
#![deny(missing_docs)]

mod bands;
mod budget;
mod checkpoint;
mod config;
mod data;
mod device;
mod early_stop;
mod error;
mod host;
mod io;
mod loss;
mod model;
mod optim;
mod plan;
mod plot;
mod report;
mod run;
mod run_data;
mod scaler;
mod schedule;
mod tensorboard;
mod trainer;

// Configuring and running: one call trains a run directory.
pub use budget::fit_memory;
pub use config::{
    DataConfig, Host, LoopConfig, MAX_BATCH, MAX_PREFETCH, MAX_SIDE, MAX_WORKERS, MemoryConfig,
    ModelConfig, Normalize, Precision, TrainConfig, WORKERS_PER_CORE,
};
#[cfg(feature = "cuda")]
pub use device::cuda_device;
#[cfg(feature = "wgpu")]
pub use device::wgpu_adapter;
pub use device::{Device, Devices};
pub use early_stop::{EarlyStopState, EarlyStopping};
pub use error::TrainError;
pub use infer::EvalResult;
pub use infer::Metric;
pub use loss::{ClassWeights, LossConfig, LossName, LossTermConfig};
pub use run::run;
pub use schedule::{ScheduleConfig, ScheduleKind};
pub use trainer::{RunOptions, RunSummary, can_resume, train, train_data_parallel};

// The model and its data, for callers that build their own loop.
pub use data::{Loader, LoaderOptions, SampleSource};
pub use model::{build_model, model_config, preset};
pub use run_data::{RunPreprocessing, normalize_with_dataset_stats};

// The numerics, each tested against PyTorch.
pub use optim::{AdamW, AdamWConfig, StepStats};
pub use scaler::GradScaler;

// Memory: the planner and what it predicts.
#[cfg(feature = "cuda")]
pub use device::cuda_memory;
#[cfg(feature = "wgpu")]
pub use device::wgpu_memory;
/// `3.1 GiB`, `512 MiB`: how the planner's messages write sizes.
pub use plan::human as human_bytes;
pub use plan::{
    Allocator, FitChoice, InferenceEstimate, InferenceInput, KernelPath, LoaderInput,
    MemoryEstimate, MemoryPlan, PlanInput, PlanInputTemplate, StageMemory, fit_budget,
    fit_inference_batch, fit_whole_process, loader_bytes, loss_terms_bytes, parse_bytes,
    process_baseline,
};
