//! Checkpoint directories: an HF model directory plus the optimizer and loop state needed to resume.
//!
//! ```text
//! <run>/checkpoints/last/   config.json, model.safetensors   (HF layout: transformers loads it)
//!                           optimizer.safetensors            (AdamW moments by module path)
//!                           trainer_state.json               (epoch, batch, steps, scaler, best)
//! <run>/checkpoints/best/   the same, for the best validation metric
//! ```
//! Each is written to a staging directory and swapped in whole, so a crash mid-write leaves the
//! previous checkpoint intact.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, TensorData};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use segformer::Segformer;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;
use crate::io::{replace_dir, write_atomic};
use crate::optim::AdamW;
use crate::scaler::GradScaler;

/// Where the loop stood when a checkpoint was written (the default: a fresh run).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Epoch to continue in.
    pub epoch: usize,
    /// First micro-batch of `epoch` not yet trained on.
    pub next_batch: usize,
    /// Optimizer steps attempted (the schedule's position).
    pub step: u64,
    /// Optimizer steps applied (AdamW's bias-correction time).
    pub optimizer_steps: u64,
    /// Best value of the selection metric so far.
    pub best: Option<f64>,
    /// Consecutive non-finite steps.
    pub bad_steps: u32,
    /// Non-finite steps skipped in total.
    pub skipped_steps: u64,
    /// The f16 loss scaler.
    pub scaler: GradScaler,
    /// Where `train.early_stopping` stands.
    #[serde(default)]
    pub early_stopping: crate::early_stop::EarlyStopState,
    /// Why the run stopped before its epochs or steps were spent (early stopping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Paths of a run directory.
#[derive(Clone, Debug)]
pub struct RunDir(pub PathBuf);

impl RunDir {
    /// `checkpoints/last`.
    pub fn last(&self) -> PathBuf {
        self.0.join("checkpoints").join("last")
    }
    /// `checkpoints/best`.
    pub fn best(&self) -> PathBuf {
        self.0.join("checkpoints").join("best")
    }
}

/// Writes model, optimizer and loop state to `dir`, atomically as a whole.
pub fn save_checkpoint<B: AutodiffBackend>(
    dir: &Path,
    model: &Segformer<B>,
    optim: &AdamW<B>,
    state: &TrainerState,
) -> Result<(), TrainError> {
    let staged = clear_staging(dir)?;
    segformer::save_hf_dir(model, &staged)?;
    let bytes = tensors_to_safetensors(&optim.state_tensors())?;
    write_atomic(&staged.join("optimizer.safetensors"), &bytes)
        .map_err(|e| TrainError::io(&staged, e))?;
    let json = serde_json::to_vec_pretty(state).expect("trainer state serialises");
    write_atomic(&staged.join("trainer_state.json"), &json)
        .map_err(|e| TrainError::io(&staged, e))?;
    replace_dir(&staged, dir).map_err(|e| TrainError::io(dir, e))
}

/// Makes `dst` the same checkpoint as `src`, a directory [`save_checkpoint`] has just written:
/// its files are hard-linked (copied where the file system cannot link) into a staging
/// directory that is swapped in whole. `best` after an improving epoch is `last`, so the model
/// and optimizer state are serialised and written once, not twice. Safe because checkpoints are
/// never modified in place: a later `last` is new files in a new directory, and the linked
/// ones keep their content.
pub(crate) fn copy_checkpoint(src: &Path, dst: &Path) -> Result<(), TrainError> {
    let staged = clear_staging(dst)?;
    std::fs::create_dir_all(&staged).map_err(|e| TrainError::io(&staged, e))?;
    for entry in std::fs::read_dir(src).map_err(|e| TrainError::io(src, e))? {
        let entry = entry.map_err(|e| TrainError::io(src, e))?;
        let (from, to) = (entry.path(), staged.join(entry.file_name()));
        // A checkpoint is flat (config, weights, optimizer, state); anything else is not ours.
        if from.is_dir() {
            return Err(TrainError::Checkpoint {
                path: src.to_path_buf(),
                reason: format!("unexpected subdirectory {}", from.display()),
            });
        }
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(|e| TrainError::io(&from, e))?;
        }
    }
    replace_dir(&staged, dst).map_err(|e| TrainError::io(dst, e))
}

/// The staging directory a checkpoint `dir` is written into before [`replace_dir`] swaps it in,
/// with what a crashed earlier write left there removed.
fn clear_staging(dir: &Path) -> Result<PathBuf, TrainError> {
    let staged = dir.with_extension("staging");
    if staged.exists() {
        std::fs::remove_dir_all(&staged).map_err(|e| TrainError::io(&staged, e))?;
    }
    Ok(staged)
}

/// Reads the loop state and optimizer moments of a checkpoint written by [`save_checkpoint`].
pub fn load_trainer_state(
    dir: &Path,
) -> Result<(TrainerState, Vec<(String, TensorData)>), TrainError> {
    let bad = |reason: String| TrainError::Checkpoint {
        path: dir.to_path_buf(),
        reason,
    };
    let state_path = dir.join("trainer_state.json");
    let text = std::fs::read(&state_path).map_err(|e| {
        bad(format!(
            "cannot read trainer_state.json ({e}); is this a segfit run checkpoint?"
        ))
    })?;
    let state: TrainerState = serde_json::from_slice(&text)
        .map_err(|e| bad(format!("trainer_state.json is malformed: {e}")))?;
    let opt_path = dir.join("optimizer.safetensors");
    let bytes = std::fs::read(&opt_path)
        .map_err(|e| bad(format!("cannot read optimizer.safetensors ({e})")))?;
    let tensors =
        safetensors_to_tensors(&bytes).map_err(|e| bad(format!("optimizer.safetensors: {e}")))?;
    Ok((state, tensors))
}

/// Serialises f32 tensors to the safetensors format.
pub(crate) fn tensors_to_safetensors(
    tensors: &[(String, TensorData)],
) -> Result<Vec<u8>, TrainError> {
    let owned: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(k, d)| {
            let d = if d.dtype == DType::F32 {
                d.clone()
            } else {
                d.clone().convert::<f32>()
            };
            (k.clone(), d.as_bytes().to_vec(), d.shape.to_vec())
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(k, b, s)| {
            (
                k.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).expect("shape matches bytes"),
            )
        })
        .collect();
    safetensors::serialize(views, &None::<HashMap<String, String>>)
        .map_err(|e| TrainError::Config(format!("cannot serialise optimizer state: {e}")))
}

fn safetensors_to_tensors(bytes: &[u8]) -> Result<Vec<(String, TensorData)>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(format!(
                "tensor `{name}` is {:?}, expected F32",
                view.dtype()
            ));
        }
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.push((name, TensorData::new(values, view.shape().to_vec())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_dir(dir: &Path, files: &[(&str, &str)]) {
        let staged = dir.with_extension("staging");
        std::fs::create_dir_all(&staged).unwrap();
        for (name, text) in files {
            std::fs::write(staged.join(name), text).unwrap();
        }
        replace_dir(&staged, dir).unwrap();
    }

    fn read(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn copy_checkpoint_survives_the_next_last() {
        let run = tempfile::tempdir().unwrap();
        let (last, best) = (run.path().join("last"), run.path().join("best"));
        write_dir(
            &best,
            &[("model.safetensors", "older"), ("stale.json", "x")],
        );
        write_dir(
            &last,
            &[("model.safetensors", "epoch 1"), ("state.json", "1")],
        );
        // What a write that crashed midway left behind is not carried into best.
        std::fs::create_dir_all(run.path().join("best.staging")).unwrap();
        std::fs::write(run.path().join("best.staging/partial"), "x").unwrap();
        copy_checkpoint(&last, &best).unwrap();
        assert!(!best.join("partial").exists());
        assert_eq!(read(&best, "model.safetensors"), "epoch 1");
        assert_eq!(read(&best, "state.json"), "1");
        assert!(!best.join("stale.json").exists(), "best is replaced whole");
        assert!(!run.path().join("best.staging").exists());
        // The next epoch's `last` is written the way save_checkpoint writes it; best keeps epoch 1.
        write_dir(
            &last,
            &[("model.safetensors", "epoch 2"), ("state.json", "2")],
        );
        assert_eq!(read(&last, "model.safetensors"), "epoch 2");
        assert_eq!(read(&best, "model.safetensors"), "epoch 1");
        assert_eq!(read(&best, "state.json"), "1");
    }

    #[test]
    fn copy_checkpoint_names_a_missing_source() {
        let run = tempfile::tempdir().unwrap();
        let err = copy_checkpoint(&run.path().join("nope"), &run.path().join("best")).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }
}
