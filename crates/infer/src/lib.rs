//! Inference in one place: what every caller of a trained [`segformer::Segformer`] does after
//! the forward pass. The training loop's validation, `segfit eval` and `segfit predict` all call
//! these, so a prediction means the same thing everywhere.
//!
//! - post-processing: [`predict_classes`] (HF's upsample + argmax, on the device),
//!   [`classes_of`] and [`probabilities`] (on blended host logits), [`batch_tensors`];
//! - sliding windows over images of any size: [`Windows`], [`predict_windows`] and the
//!   Hann-weighted [`Blender`];
//! - test-time augmentation ([`Tta`]: probabilities averaged over the flips or all 8 [`Pose`]s),
//!   chosen with [`Windows::with_tta`] or [`evaluate_tta`];
//! - evaluation: [`evaluate`] over labelled batches, the streaming [`ConfusionMatrix`] and its
//!   [`SegMetrics`];
//! - the one class palette, [`class_colour`], and the one overlay of classes on an image,
//!   [`overlay`] (pixel by pixel, [`overlay_pixel`]).
//!
//! ```
//! use burn::backend::Flex;
//! use infer::{Windows, classes_of, predict_windows};
//! use segformer::SegformerConfig;
//!
//! let device = Default::default();
//! let model = SegformerConfig::mit_b0().with_num_labels(2).init::<Flex>(&device).unwrap();
//! // A preprocessed 3-band 80 × 100 image ([C, H, W]), in windows of 64 sharing 16 pixels.
//! let pixels = vec![0.0f32; 3 * 80 * 100];
//! let windows = Windows::new([64, 64], Some(16), 4)?;
//! let logits = predict_windows(&model, &pixels, [3, 80, 100], &windows, &device)?;
//! let classes = classes_of(&logits, 2, 80 * 100); // [H, W] class indices
//! assert_eq!(classes.len(), 80 * 100);
//! # Ok::<(), infer::InferError>(())
//! ```
#![deny(missing_docs)]

mod error;
mod evaluate;
mod metrics;
mod palette;
mod postprocess;
mod sliding;
mod tta;
mod window;

pub use error::InferError;
pub use evaluate::{EvalResult, Metric, TtaEval, evaluate, evaluate_tta};
pub use metrics::{ConfusionMatrix, SegMetrics};
pub use palette::{class_colour, overlay, overlay_pixel};
pub use postprocess::{batch_tensors, classes_of, predict_classes, probabilities};
pub use sliding::{min_input_side, predict_streaming, predict_windows};
pub use tta::{Pose, Tta};
pub use window::{Blender, Windows, hann, origins};
