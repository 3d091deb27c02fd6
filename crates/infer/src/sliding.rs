//! Sliding-window inference: the model run over the [`Windows`] of an image and their logits
//! blended (see `window.rs`), the whole image in memory ([`predict_windows`]) or a band of rows
//! at a time ([`predict_streaming`]).

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use segformer::{Segformer, SegformerConfig};

use crate::error::InferError;
use crate::postprocess::host;
use crate::tta::{Tta, upsampled_logits};
use crate::window::{Blender, RowBlender, Windows, origins};

/// The smallest input side `model` can run: every encoder stage's map must be at least as
/// large as its sequence-reduction kernel (`sr_ratios`, 8 at the first stage of MiT-B0…B5,
/// so 29 pixels there).
pub fn min_input_side(config: &SegformerConfig) -> usize {
    let fits = |side: usize| {
        let mut n = side;
        (0..config.num_encoder_blocks).all(|i| {
            let (k, s) = (config.patch_sizes[i], config.strides[i]);
            // PyTorch's conv arithmetic with padding k/2.
            let padded = n + 2 * (k / 2);
            if padded < k {
                return false;
            }
            n = (padded - k) / s.max(1) + 1;
            n >= config.sr_ratios[i].max(1)
        })
    };
    (1..=4096).find(|&side| fits(side)).unwrap_or(4096)
}

/// Blended full-resolution logits of one preprocessed image: every window through the model
/// (`windows.batch` at a time, within a row of windows), its logits upsampled to the window's
/// pixels like HF's post-processing, weighted and blended by a [`Blender`]. The whole
/// image is in memory; [`predict_streaming`] gives the same logits, bit for bit, a band of rows
/// at a time.
///
/// # Shapes
/// - pixels: `[C, H, W]` (`C` = the model's `num_channels`)
/// - output: `[classes, H, W]`
pub fn predict_windows<B: Backend>(
    model: &Segformer<B>,
    pixels: &[f32],
    [c, h, w]: [usize; 3],
    windows: &Windows,
    device: &B::Device,
) -> Result<Vec<f32>, InferError> {
    if pixels.len() != c * h * w {
        return Err(InferError::Shape(format!(
            "pixel values of {} floats as [{c}, {h}, {w}]",
            pixels.len()
        )));
    }
    let plan = WindowPlan::new(model, [c, h, w], windows)?;
    let mut blender = Blender::new(plan.k, h, w);
    for &y0 in &plan.ys {
        let (th, tw) = (plan.th, plan.tw);
        // [C, H, W] -> the window's [C, th, tw]
        let window = |x0: usize| -> Result<Vec<f32>, InferError> {
            Ok((0..c)
                .flat_map(|band| (y0..y0 + th).map(move |y| (band * h + y) * w + x0))
                .flat_map(|row| &pixels[row..row + tw])
                .copied()
                .collect())
        };
        plan.window_row(model, device, window, |x0, logits| {
            blender.add(logits, y0, x0, th, tw)
        })?;
    }
    Ok(blender.finish())
}

/// Batches of windows in flight between two stages of [`predict_streaming`]: enough to keep
/// every stage busy while another waits, few enough that memory stays a few batches.
const QUEUE: usize = 2;

/// [`predict_windows`] in bounded memory, for scenes of any size, as a pipeline of three
/// stages on their own threads: `read_window([y0, x0], [h, w])` gives the preprocessed pixels
/// of one window (`[C, h, w]`; reading, decoding and preprocessing run on a reader thread),
/// the model runs on the calling thread, and `emit(y0, logits, n)` receives the blended logits
/// of rows `y0..y0 + n` (`[classes, n, W]`) as soon as no later window touches them, top to
/// bottom, every row once (blending and whatever `emit` does, such as encoding the outputs,
/// run on a third thread). The stages hand batches on through bounded queues of [`QUEUE`]
/// batches, so the model does not wait for the disk nor the encoder for the model.
///
/// What is held: a few batches of windows and the blend of one row of windows plus its stride
/// (`(tile + stride) · W · (classes + 1)` floats), whatever `H`. The result is the same, bit
/// for bit, as [`predict_windows`]'s: the same windows meet the same arithmetic in the same
/// order. The first error of a stage stops the others and is returned (a stage that stops
/// because its neighbour did reports nothing); a panic in a stage is resumed here.
pub fn predict_streaming<B, E>(
    model: &Segformer<B>,
    [c, h, w]: [usize; 3],
    windows: &Windows,
    device: &B::Device,
    mut read_window: impl FnMut([usize; 2], [usize; 2]) -> Result<Vec<f32>, E> + Send,
    mut emit: impl FnMut(usize, &[f32], usize) -> Result<(), E> + Send,
) -> Result<(), E>
where
    B: Backend,
    E: From<InferError> + Send,
{
    let plan = WindowPlan::new(model, [c, h, w], windows)?;
    let plan = &plan;
    let (th, tw) = (plan.th, plan.tw);
    let groups = || {
        plan.ys
            .iter()
            .flat_map(|&y0| plan.xs.chunks(plan.batch).map(move |g| (y0, g)))
    };
    std::thread::scope(|scope| {
        let (pixels_tx, pixels_rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(QUEUE);
        let (logits_tx, logits_rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(QUEUE);
        // Reader: every batch of windows, in the order the model takes them.
        let reader = scope.spawn(move || -> Result<(), E> {
            for (y0, group) in groups() {
                let mut batch = Vec::with_capacity(group.len() * c * th * tw);
                for &x0 in group {
                    let pixels = read_window([y0, x0], [th, tw])?;
                    if pixels.len() != c * th * tw {
                        return Err(InferError::Shape(format!(
                            "the window at ({x0}, {y0}) came as {} floats, not [{c}, {th}, {tw}]",
                            pixels.len()
                        ))
                        .into());
                    }
                    batch.extend(pixels);
                }
                if pixels_tx.send(batch).is_err() {
                    break; // the model stopped: its error is reported
                }
            }
            Ok(())
        });
        // Blender: each row of windows blended, then its finished rows emitted.
        let blender = scope.spawn(move || -> Result<(), E> {
            let size = plan.k * th * tw;
            let mut band = RowBlender::new(plan.k, w);
            for (r, &y0) in plan.ys.iter().enumerate() {
                band.reach(y0 + th);
                for group in plan.xs.chunks(plan.batch) {
                    let Ok(values) = logits_rx.recv() else {
                        return Ok(()); // an earlier stage stopped: its error is reported
                    };
                    for (i, &x0) in group.iter().enumerate() {
                        band.add(&values[i * size..(i + 1) * size], y0, x0, th, tw);
                    }
                }
                // Rows above the next row of windows are final.
                let done = plan.ys.get(r + 1).copied().unwrap_or(h);
                if done > band.base {
                    let n = done - band.base;
                    let (top, logits) = band.flush(n);
                    emit(top, &logits, n)?;
                }
            }
            Ok(())
        });
        // The model, on one thread throughout (it stays with its device): on the CPU, a thread
        // of the kernels' own pool.
        let inference = segformer::on_cpu_pool::<B, _>(move || -> Result<(), E> {
            for batch in pixels_rx.iter() {
                let values = plan.run_batch(model, device, batch)?;
                if logits_tx.send(values).is_err() {
                    break; // the blender stopped: its error is reported
                }
            }
            // Returning drops both queues, which lets the other stages finish or stop.
            Ok(())
        });
        let joined = |handle: std::thread::ScopedJoinHandle<'_, Result<(), E>>| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        };
        let (read, blend) = (joined(reader), joined(blender));
        read.and(inference).and(blend)
    })
}

/// Where the windows of an image go, checked against the model.
struct WindowPlan {
    c: usize,
    k: usize,
    th: usize,
    tw: usize,
    ys: Vec<usize>,
    xs: Vec<usize>,
    batch: usize,
    tta: Tta,
}

impl WindowPlan {
    fn new<B: Backend>(
        model: &Segformer<B>,
        [c, h, w]: [usize; 3],
        windows: &Windows,
    ) -> Result<Self, InferError> {
        let bands = model.config().num_channels;
        if c != bands || h == 0 || w == 0 {
            return Err(InferError::Shape(format!(
                "pixel values of shape [{c}, {h}, {w}] for a model that takes {bands} channels"
            )));
        }
        let (th, tw) = (windows.tile[0].min(h), windows.tile[1].min(w));
        let min = min_input_side(model.config());
        if th.min(tw) < min {
            return Err(InferError::Windows(format!(
                "windows of {th}x{tw} pixels (image {h}x{w}, tile {}x{}) are smaller than the {min}x{min} \
                 this model needs; use larger windows, or pad the image to at least {min} pixels a side",
                windows.tile[0], windows.tile[1]
            )));
        }
        Ok(Self {
            c,
            k: model.num_labels(),
            th,
            tw,
            ys: origins(h, th, windows.overlap),
            xs: origins(w, tw, windows.overlap),
            batch: windows.batch.max(1),
            tta: windows.tta,
        })
    }

    /// Runs the windows of one row of windows, `self.batch` at a time: `window(x0)` gives the
    /// pixels of the window whose left edge is `x0` (`[C, th, tw]`), and `add` receives each
    /// window's upsampled logits (`[k, th, tw]`) with its left edge.
    fn window_row<B: Backend, E: From<InferError>>(
        &self,
        model: &Segformer<B>,
        device: &B::Device,
        mut window: impl FnMut(usize) -> Result<Vec<f32>, E>,
        mut add: impl FnMut(usize, &[f32]),
    ) -> Result<(), E> {
        let (c, th, tw) = (self.c, self.th, self.tw);
        for group in self.xs.chunks(self.batch) {
            let mut batch = Vec::with_capacity(group.len() * c * th * tw);
            for &x0 in group {
                batch.extend(window(x0)?);
            }
            let values = self.run_batch(model, device, batch)?;
            let size = self.k * th * tw;
            for (i, &x0) in group.iter().enumerate() {
                add(x0, &values[i * size..(i + 1) * size]);
            }
        }
        Ok(())
    }

    /// The upsampled logits (`[n, k, th, tw]`) of a batch of `n` windows' pixels
    /// (`[n, C, th, tw]`).
    fn run_batch<B: Backend>(
        &self,
        model: &Segformer<B>,
        device: &B::Device,
        batch: Vec<f32>,
    ) -> Result<Vec<f32>, InferError> {
        let (c, th, tw) = (self.c, self.th, self.tw);
        let n = batch.len() / (c * th * tw);
        let x = Tensor::<B, 4>::from_data(TensorData::new(batch, [n, c, th, tw]), device);
        // [n, C, th, tw] -> [n, k, th/4, tw/4] -> [n, k, th, tw]
        // NOTE: with test-time augmentation these are log mean probabilities, not logits,
        // so overlapping windows blend log-probabilities: where windows meet, the result is
        // a weighted geometric mean of their probabilities (renormalised by the softmax),
        // not the softmax of blended logits; where one window covers a pixel, its softmax
        // is exactly the window's mean probability.
        let logits = upsampled_logits(model, x, self.tta, None);
        host(logits, "logits")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    fn tiny_model() -> Segformer<Flex> {
        let mut c = SegformerConfig::mit_b0().with_num_labels(3);
        c.hidden_sizes = vec![8, 16, 24, 32];
        c.num_attention_heads = vec![1, 2, 3, 4];
        c.depths = vec![1, 1, 1, 1];
        c.decoder_hidden_size = 16;
        c.init::<Flex>(&Default::default()).unwrap()
    }

    fn pixels(c: usize, h: usize, w: usize) -> Vec<f32> {
        (0..c * h * w)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect()
    }

    #[test]
    fn one_window_is_the_model_upsampled() {
        // An image no larger than the window is one window: the blend divides by its own weight.
        let model = tiny_model();
        let device = Default::default();
        let (h, w) = (40, 32);
        let px = pixels(3, h, w);
        let windows = Windows::new([64, 64], None, 2).unwrap();
        let blended = predict_windows(&model, &px, [3, h, w], &windows, &device).unwrap();
        let x = Tensor::<Flex, 4>::from_data(TensorData::new(px, [1, 3, h, w]), &device);
        let direct: Vec<f32> = host(
            segformer::resize_bilinear(model.forward(x), [h, w]),
            "logits",
        )
        .unwrap();
        assert_eq!(blended.len(), direct.len());
        let worst = blended
            .iter()
            .zip(&direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "worst {worst}");
    }

    #[test]
    fn batching_windows_does_not_change_the_result() {
        let model = tiny_model();
        let device = Default::default();
        let px = pixels(3, 40, 64);
        let one = Windows::new([32, 32], Some(8), 1).unwrap();
        let many = Windows::new([32, 32], Some(8), 5).unwrap();
        let a = predict_windows(&model, &px, [3, 40, 64], &one, &device).unwrap();
        let b = predict_windows(&model, &px, [3, 40, 64], &many, &device).unwrap();
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "worst {worst}");
        assert_eq!(one.spots(40, 64).0.len(), 2 * 3);
    }

    #[test]
    fn streaming_gives_the_in_memory_logits_bit_for_bit() {
        let model = tiny_model();
        let device = Default::default();
        let (h, w) = (150, 70);
        let px = pixels(3, h, w);
        let windows = Windows::new([48, 40], Some(12), 2).unwrap();
        let whole = predict_windows(&model, &px, [3, h, w], &windows, &device).unwrap();
        let mut streamed = vec![f32::NAN; whole.len()];
        let (mut next, mut calls, mut max_rows) = (0, 0, 0);
        predict_streaming::<Flex, InferError>(
            &model,
            [3, h, w],
            &windows,
            &device,
            |[y0, x0], [th, tw]| {
                calls += 1;
                Ok((0..3)
                    .flat_map(|b| (y0..y0 + th).map(move |y| (b * h + y) * w + x0))
                    .flat_map(|row| &px[row..row + tw])
                    .copied()
                    .collect())
            },
            |y0, logits, n| {
                assert_eq!(y0, next, "rows arrive in order, each once");
                next += n;
                max_rows = max_rows.max(n);
                for c in 0..3 {
                    for r in 0..n {
                        let dst = (c * h + y0 + r) * w;
                        streamed[dst..dst + w]
                            .copy_from_slice(&logits[(c * n + r) * w..(c * n + r + 1) * w]);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(next, h, "every row emitted");
        assert_eq!(calls, origins(h, 48, 12).len() * origins(w, 40, 12).len());
        assert!(max_rows <= 48, "{max_rows} rows held at once");
        let same = whole
            .iter()
            .zip(&streamed)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "streamed logits differ from the in-memory blend");
    }

    /// A scene's window reader over `px` (`[3, h, w]`) that fails at window `fail_at`.
    fn reader(
        px: &[f32],
        [h, w]: [usize; 2],
        calls: &std::sync::atomic::AtomicUsize,
        fail_at: usize,
    ) -> impl FnMut([usize; 2], [usize; 2]) -> Result<Vec<f32>, InferError> + Send {
        move |[y0, x0], [th, tw]| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == fail_at {
                return Err(InferError::Windows(format!("unreadable window {n}")));
            }
            Ok((0..3)
                .flat_map(|b| (y0..y0 + th).map(move |y| (b * h + y) * w + x0))
                .flat_map(|row| &px[row..row + tw])
                .copied()
                .collect())
        }
    }

    #[test]
    fn a_failing_read_is_the_pipelines_error_and_nothing_after_it_is_emitted() {
        use std::sync::atomic::AtomicUsize;
        let model = tiny_model();
        let (h, w) = (200, 64);
        let px = pixels(3, h, w);
        let windows = Windows::new([32, 32], Some(8), 2).unwrap();
        let calls = AtomicUsize::new(0);
        let mut emitted = 0;
        // Window 13 of 8 × 3: the fifth row of windows (rows 96..128) never completes.
        let err = predict_streaming::<Flex, InferError>(
            &model,
            [3, h, w],
            &windows,
            &Default::default(),
            reader(&px, [h, w], &calls, 13),
            |y0, _, n| {
                emitted = y0 + n;
                Ok(())
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("unreadable window 13"), "{err}");
        assert_eq!(calls.into_inner(), 14, "the reader stops at its error");
        assert!(
            emitted <= 96,
            "rows up to {emitted} emitted past the failed read"
        );
    }

    #[test]
    fn a_failing_emit_is_the_pipelines_error_and_stops_the_reader() {
        use std::sync::atomic::AtomicUsize;
        let model = tiny_model();
        let (h, w) = (400, 64);
        let px = pixels(3, h, w);
        let windows = Windows::new([32, 32], Some(8), 2).unwrap();
        let total = origins(h, 32, 8).len() * origins(w, 32, 8).len();
        let calls = AtomicUsize::new(0);
        let err = predict_streaming::<Flex, InferError>(
            &model,
            [3, h, w],
            &windows,
            &Default::default(),
            reader(&px, [h, w], &calls, usize::MAX),
            |y0, _, _| Err(InferError::Windows(format!("disk full at row {y0}"))),
        )
        .unwrap_err();
        assert!(err.to_string().contains("disk full at row 0"), "{err}");
        // One row of windows emitted, then at most the queues' batches read ahead.
        let read = calls.into_inner();
        assert!(
            read < total / 2,
            "{read} of {total} windows read after the writer failed"
        );
    }

    #[test]
    fn bad_settings_and_shapes_are_errors() {
        let err = |r: Result<Windows, InferError>| r.unwrap_err().to_string();
        assert!(err(Windows::new([0, 64], None, 1)).contains("empty"));
        assert!(err(Windows::new([64, 64], Some(64), 1)).contains("overlap 64"));
        assert!(err(Windows::new([64, 64], None, 0)).contains("at least 1"));
        let model = tiny_model();
        let windows = Windows::new([32, 32], None, 1).unwrap();
        let device = Default::default();
        let e = predict_windows(&model, &[0.0; 4 * 8 * 8], [4, 8, 8], &windows, &device);
        assert!(e.unwrap_err().to_string().contains("takes 3 channels"));
        // A 20-pixel image is one 20x20 window: below what MiT's first stage can reduce.
        let e = predict_windows(&model, &[0.0; 3 * 20 * 20], [3, 20, 20], &windows, &device);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("smaller than the 29x29")
        );
    }

    #[test]
    fn min_input_side_is_the_first_size_the_model_runs() {
        let model = tiny_model();
        let min = min_input_side(model.config());
        assert_eq!(
            min, 29,
            "MiT: ceil(29 / 4) = 8 = the first stage's reduction"
        );
        let device = Default::default();
        let ok = Tensor::<Flex, 4>::zeros([1, 3, min, min], &device);
        assert_eq!(model.forward(ok).dims(), [1, 3, 8, 8]);
    }
}
