//! Predicting the peak memory of sliding-window inference (`segfit predict`) and choosing its
//! batch from a memory budget.
//!
//! Without autodiff a forward keeps only what the layer running needs, so the peak is the
//! largest working set of one layer, per window, not the sum over layers a training step keeps.
//! For SegFormer that is the all-MLP decode head: the four stages projected to `D` channels and
//! upsampled to the first stage's `N₀ = H/4 · W/4` tokens, their concatenation (`4·D·N₀` each)
//! and the fused map (`D·N₀`), next to the encoder's four outputs (`Σ Cᵢ·Nᵢ`). Around it: the
//! window's pixels and its full-resolution logits (upsampled, then read back to the host), the
//! batches queued between the pipeline's stages ([`PIPELINE_BATCHES`]), the blend of one row
//! of windows over the scene's width, the weights and the process. The per-window term is
//! multiplied by [`FORWARD_SCALE`], measured on real `segfit predict` runs
//! (`crates/cli/bench/predict_memory.sh`, table in `crates/cli/BENCH-predict.md`).

use segformer::SegformerConfig;
use serde::Serialize;

use super::{MIB, parameter_count};

/// Batches alive at once in `infer::predict_streaming`'s pipeline, beside the one in the model:
/// two queued and one being filled on each side of it.
const PIPELINE_BATCHES: usize = 3;

// Resident bytes per predicted forward byte of one window, fitted on `segfit predict` runs of
// MiT-B0 on the CPU (see the module docs): 83 MiB more per 512² window, 21 MiB per 256² one,
// of which the queues are 18 and 4.5. The fused decode head upsamples and sums the four maps
// without keeping their concatenation, so less than the count above stays resident.
const FORWARD_SCALE: f64 = 0.42;
// The process around the model: the binary, burn-flex's and the pipeline's threads, glibc's
// arenas, the readers' buffers (measured with the smallest windows).
const PROCESS_BASE: f64 = 60.0 * MIB;

/// What an inference run looks like to the estimate.
#[derive(Clone, Copy, Debug)]
pub struct InferenceInput<'a> {
    /// The architecture and `num_labels`.
    pub config: &'a SegformerConfig,
    /// Window height and width in pixels.
    pub tile: [usize; 2],
    /// Windows per forward.
    pub batch: usize,
    /// Pixels shared by neighbouring windows.
    pub overlap: usize,
    /// The scene's width in pixels (the blend holds a row of windows across it).
    pub scene_width: usize,
}

/// The predicted peak of an inference run, by part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferenceEstimate {
    /// Windows per forward.
    pub batch: usize,
    /// The forward's working set for the whole batch (calibrated).
    pub forward: u64,
    /// Pixels and logits of the batches queued in the pipeline.
    pub queues: u64,
    /// The blend of one row of windows (and its stride) over the scene's width, with the rows
    /// handed to the writers.
    pub blend: u64,
    /// f32 weights.
    pub weights: u64,
    /// The process around the model.
    pub process: u64,
}

impl InferenceEstimate {
    /// Predicts the peak resident bytes of `input`.
    pub fn new(input: &InferenceInput<'_>) -> Self {
        let c = input.config;
        let [th, tw] = input.tile;
        // A batch never spans two rows of windows: at most a row's windows run at once.
        let across = windows_across(input.scene_width, tw, input.overlap);
        let b = input.batch.clamp(1, across) as f64;
        let pixels = th as f64 * tw as f64;
        let k = c.num_labels() as f64;
        let (mut h, mut w) = (th, tw);
        let (mut n0, mut encoder, mut widest) = (0.0, 0.0, 0.0f64);
        for i in 0..c.num_encoder_blocks {
            h = super::conv_out(h, c.patch_sizes[i], c.strides[i]);
            w = super::conv_out(w, c.patch_sizes[i], c.strides[i]);
            let n = (h * w) as f64;
            if i == 0 {
                n0 = n;
            }
            let ch = c.hidden_sizes[i] as f64;
            encoder += n * ch;
            // The Mix-FFN's hidden map, its depth-wise conv and GELU: the encoder's widest.
            widest = widest.max(3.0 * n * ch * c.mlp_ratios[i] as f64);
        }
        let d = c.decoder_hidden_size as f64;
        let head = 8.0 * d * n0 + encoder;
        // Input pixels, the upsampled logits and their host copy.
        let io = pixels * (c.num_channels as f64 + 2.0 * k);
        let forward = 4.0 * FORWARD_SCALE * b * (head.max(widest) + io);
        // Pixels queued before the model, logits after it.
        let queued = PIPELINE_BATCHES as f64 * b * pixels * (c.num_channels as f64 + k);
        let stride = th.saturating_sub(input.overlap).max(1) as f64;
        let width = input.scene_width as f64;
        // (tile + stride) rows of sums and weights, and the emitted rows' logits, classes and
        // probabilities.
        let blend = 4.0 * width * ((th as f64 + stride) * (k + 1.0) + stride * (2.0 * k + 1.0));
        Self {
            batch: b as usize,
            forward: forward as u64,
            queues: (4.0 * queued) as u64,
            blend: blend as u64,
            weights: 4 * parameter_count(c) as u64,
            process: PROCESS_BASE as u64,
        }
    }

    /// The whole process's predicted peak.
    pub fn total(&self) -> u64 {
        self.forward + self.queues + self.blend + self.weights + self.process
    }
}

/// Windows in a row across `width` pixels: windows of `tile` (at most `width`) every
/// `tile - overlap` pixels, the last flush with the edge (`infer::origins`).
fn windows_across(width: usize, tile: usize, overlap: usize) -> usize {
    let tile = tile.min(width).max(1);
    let stride = tile.saturating_sub(overlap).max(1);
    (width.saturating_sub(tile)).div_ceil(stride) + 1
}

/// The largest batch of at most `most` windows whose predicted peak fits `budget` bytes, with
/// its estimate; an error naming the budget and what one window needs when none fits.
pub fn fit_inference_batch(
    budget: u64,
    most: usize,
    input: &InferenceInput<'_>,
) -> Result<InferenceEstimate, String> {
    let at = |batch| InferenceEstimate::new(&InferenceInput { batch, ..*input });
    let one = at(1);
    if one.total() > budget {
        return Err(format!(
            "one window of {}x{} needs about {} (predicted), over the memory budget of {}; use \
             smaller windows or a larger budget",
            input.tile[0],
            input.tile[1],
            super::human(one.total()),
            super::human(budget)
        ));
    }
    Ok((2..=most.max(1))
        .map(at)
        .take_while(|e| e.total() <= budget)
        .last()
        .unwrap_or(one))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b0() -> SegformerConfig {
        SegformerConfig::mit_b0().with_num_labels(2)
    }

    /// 512² windows sharing 128 pixels, `batch` at a time, over a scene `scene_width` wide.
    fn windows_512(
        config: &SegformerConfig,
        batch: usize,
        scene_width: usize,
    ) -> InferenceInput<'_> {
        InferenceInput {
            config,
            tile: [512, 512],
            batch,
            overlap: 128,
            scene_width,
        }
    }

    #[test]
    fn the_decode_head_dominates_a_mit_b0_window() {
        // 512² MiT-B0: N₀ = 128² tokens, D = 256: the head's 8·D·N₀ floats are 128 MiB.
        let config = b0();
        let input = windows_512(&config, 1, 4000);
        let e = InferenceEstimate::new(&input);
        let head = 4.0 * 8.0 * 256.0 * 128.0 * 128.0;
        assert!(e.forward as f64 >= head * FORWARD_SCALE, "{e:?}");
        assert!((e.forward as f64) < 1.2 * head * FORWARD_SCALE, "{e:?}");
        // Twice the batch, twice the forward and the queues; the rest stays.
        let two = InferenceEstimate::new(&InferenceInput { batch: 2, ..input });
        assert!(two.forward.abs_diff(2 * e.forward) <= 1, "{two:?}");
        assert_eq!(two.blend, e.blend);
        // A batch never spans rows: 16 windows on a scene 5 windows wide run 5 at a time.
        let narrow = |batch| InferenceInput {
            batch,
            scene_width: 1947,
            ..input
        };
        assert_eq!(windows_across(1947, 512, 128), 5);
        assert_eq!(
            InferenceEstimate::new(&narrow(16)),
            InferenceEstimate::new(&narrow(5))
        );
    }

    #[test]
    fn the_blend_grows_with_the_scene_width_only() {
        let config = b0();
        let at = |scene_width| InferenceEstimate::new(&windows_512(&config, 4, scene_width));
        let (narrow, wide) = (at(4000), at(20_000));
        assert_eq!(narrow.forward, wide.forward);
        // (512 + 384) rows × (2 + 1) floats + 384 rows × 5 floats per column.
        let per_column = 4 * (896 * 3 + 384 * 5);
        assert_eq!(wide.blend - narrow.blend, 16_000 * per_column);
    }

    #[test]
    fn the_batch_is_the_largest_that_fits() {
        let config = b0();
        let input = windows_512(&config, 1, 8000);
        let at = |batch| InferenceEstimate::new(&InferenceInput { batch, ..input }).total();
        // A budget between the predictions for 3 and 4 windows gives 3.
        let budget = (at(3) + at(4)) / 2;
        assert_eq!(fit_inference_batch(budget, 16, &input).unwrap().batch, 3);
        // Capped by `most`.
        assert_eq!(fit_inference_batch(u64::MAX, 8, &input).unwrap().batch, 8);
        // Nothing fits: the message names the window and the budget.
        let e = fit_inference_batch(at(1) - 1, 16, &input).unwrap_err();
        assert!(e.contains("512x512") && e.contains("memory budget"), "{e}");
    }
}
