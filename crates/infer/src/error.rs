//! The infer crate's error type.

/// What can go wrong while running a model over images or batches.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// A tensor could not be read back from the device.
    #[error("reading {what} back from the device: {reason}")]
    Readback {
        /// What was being read (e.g. "logits").
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
    /// The sliding-window settings cannot work: names the setting and the fix.
    #[error("{0}")]
    Windows(String),
    /// An input does not have the shape the model or the call needs.
    #[error("{0}")]
    Shape(String),
    /// A test-time augmentation name that is none of `none`, `flips`, `d4`.
    #[error("`{0}` is not a test-time augmentation; use none, flips (4 poses) or d4 (8 poses)")]
    UnknownTta(String),
}
