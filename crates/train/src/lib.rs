//! The segfit training loop: AdamW with PyTorch semantics, schedules, mixed precision,
//! gradient accumulation, streaming metrics, atomic checkpoints and exact resume.
#![deny(missing_docs)]

mod io;
mod metrics;
mod optim;
mod scaler;
mod schedule;

pub use io::{replace_dir, write_atomic};
pub use metrics::{ConfusionMatrix, SegMetrics};
pub use optim::{AdamW, AdamWConfig, StepStats};
pub use scaler::GradScaler;
pub use schedule::{ScheduleConfig, ScheduleKind};
