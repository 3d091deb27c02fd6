//! The train crate's error type.

use std::path::PathBuf;

/// What can go wrong while configuring, running or resuming training.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The dataset could not be read (names the file).
    #[error(transparent)]
    Data(#[from] tiles::TilesError),
    /// A sample could not be read, and its dataset still holds a handle to the error (names
    /// the file). A [`tiles::SegDataset`] and burn's transforms report [`TrainError::Data`].
    #[error(transparent)]
    SharedData(tiles::SampleError),
    /// Augmentation or preprocessing failed.
    #[error(transparent)]
    Augment(#[from] augment::AugmentError),
    /// One sample could not be augmented or preprocessed (names the sample).
    #[error("sample {id}: {source}")]
    Sample {
        /// The sample's id (file stem or tile name).
        id: String,
        /// What failed.
        source: augment::AugmentError,
    },
    /// Inference (evaluation, overlays) failed.
    #[error(transparent)]
    Infer(#[from] infer::InferError),
    /// Model weights could not be loaded or saved.
    #[error(transparent)]
    Weights(#[from] segformer::WeightsError),
    /// The model configuration is invalid.
    #[error(transparent)]
    Model(#[from] segformer::ConfigError),
    /// The device cannot be used: this build lacks its backend, or this machine lacks it.
    #[error("device {device}: {reason}")]
    Device {
        /// The device as `--device` names it (`cuda:0`).
        device: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// The training configuration is invalid: names the key and what is expected.
    #[error("config: {0}")]
    Config(String),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A checkpoint is incomplete or does not fit this run.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Too many consecutive steps had a non-finite loss or gradient.
    #[error(
        "training diverged: {count} consecutive steps with a non-finite loss or gradient, the last at optimizer step {step}; \
         the last good checkpoint is kept. Try a lower learning rate (optimizer.lr), gradient clipping \
         (optimizer.clip_grad_norm = 1.0), or precision = \"bf16\" instead of \"f16\""
    )]
    Diverged {
        /// Optimizer step of the last failure.
        step: u64,
        /// Consecutive failures.
        count: u32,
    },
    /// The device ran out of memory.
    #[error("out of memory at {what}: {detail}")]
    OutOfMemory {
        /// Where it happened (e.g. "training step 12, micro-batch of 4 at 1024x1024").
        what: String,
        /// The backend's message and the planner's suggestion.
        detail: String,
    },
}

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.into(),
            source,
        }
    }
}
