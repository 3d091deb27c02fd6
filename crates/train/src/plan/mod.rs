//! Predicting the peak memory of a training step, and fitting a run into a memory budget.
//!
//! The prediction counts, from the architecture alone, the elements every part of a step keeps
//! alive at the peak (early in backward: all forward activations that autodiff saved, the
//! parameters, the AdamW moments and the first gradients): parameters, per-block token tensors
//! (`N·C`), Mix-FFN tensors (`N·4C`), sequence-reduced keys/values (`N/sr²·C`), attention
//! scores (`heads·N·N/sr²`), the decode head (`D·N₀`) and the full-resolution logits of the
//! loss (`labels·H·W`). Each count is multiplied by bytes-per-element factors calibrated on
//! real CPU steps (`examples/bench_memory.rs`, table in `BENCH-memory.md`): the factor says how
//! many such tensors burn's autodiff keeps and in which dtype. Three sets of factors, one per
//! [`KernelPath`] (segformer resolves a model's `Kernels` choice to one per backend:
//! [`Device::kernel_path`](crate::Device::kernel_path)): the fused CPU kernels, burn's ops with
//! segformer's recomputing attention and loss (what burn-cuda and burn-wgpu run, measured on
//! burn-flex with `Kernels::Recompute`), and burn's plain composition (`Kernels::Composed`, for
//! comparison).
//!
//! On the GPU backends ([`Allocator::CubeclPool`]: burn-cuda and burn-wgpu share CubeCL's
//! memory management) the live bytes sit in pages the pool reserves ahead of use; the plan adds
//! that reserve ([`MemoryEstimate::pool`]), fitted on burn-wgpu over lavapipe against CubeCL's
//! own count of reserved bytes (`bench_memory --wgpu`, `BENCH-memory.md`).

use std::fmt;

use segformer::SegformerConfig;
use serde::Serialize;

use crate::config::Precision;

mod factors;
mod fit;
mod inference;

use factors::{factors, pool_reserve};
pub use factors::{loader_bytes, process_baseline};
pub use fit::{FitChoice, fit_budget, fit_whole_process, human, parse_bytes};
pub use inference::{InferenceEstimate, InferenceInput, fit_inference_batch};

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// Which implementation of the layers runs the step (segformer's resolution of a model's
/// kernel choice on a backend): the three keep very different tensors for the backward pass.
pub use segformer::KernelPath;

/// Where a step's tensors are allocated, which decides what the plan adds to the live bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// The process heap (burn-flex on the CPU): the prediction is the peak of live bytes.
    #[default]
    Heap,
    /// CubeCL's device memory pool (burn-cuda, burn-wgpu): the live bytes plus the pages the
    /// pool keeps reserved around them ([`MemoryEstimate::pool`]).
    CubeclPool,
}

/// One prediction's inputs: the model, the input size and how the step runs.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// The architecture and `num_labels` (e.g. `train::preset("mit-b0")?.with_num_labels(2)`).
    pub config: &'a SegformerConfig,
    /// Input height in pixels.
    pub height: usize,
    /// Input width in pixels.
    pub width: usize,
    /// Micro-batch size (images per forward/backward).
    pub batch: usize,
    /// Compute precision (f16 is predicted like bf16: same element size).
    pub precision: Precision,
    /// Burn's balanced activation checkpointing (`Autodiff<_, BalancedCheckpointing>`).
    pub checkpointing: bool,
    /// The layers' implementation (see [`Device::kernel_path`](crate::Device::kernel_path)).
    pub kernels: KernelPath,
    /// Where the tensors live (see [`Device::allocator`](crate::Device::allocator)).
    pub allocator: Allocator,
    /// The `[loss]` terms (`None`: HF's plain cross-entropy); see [`loss_terms_bytes`].
    pub loss: Option<&'a segformer::SegLoss>,
}

/// What [`fit_budget`] may vary: everything of a [`PlanInput`] except the micro-batch; the
/// precision and checkpointing given here are tried first.
#[derive(Clone, Copy, Debug)]
pub struct PlanInputTemplate<'a> {
    /// The architecture and `num_labels`.
    pub config: &'a SegformerConfig,
    /// Input height in pixels.
    pub height: usize,
    /// Input width in pixels.
    pub width: usize,
    /// The precision the run asks for (`reduced` is tried next when it is f32 and nothing
    /// fits).
    pub precision: Precision,
    /// The half precision the device computes in, tried when an f32 run does not fit: bf16,
    /// f16 on wgpu (which has no bf16), `None` where there is none
    /// ([`Device::reduced_precision`](crate::Device::reduced_precision)).
    pub reduced: Option<Precision>,
    /// Whether the run already asks for checkpointing.
    pub checkpointing: bool,
    /// The layers' implementation (see [`Device::kernel_path`](crate::Device::kernel_path)).
    pub kernels: KernelPath,
    /// Where the tensors live (see [`Device::allocator`](crate::Device::allocator)).
    pub allocator: Allocator,
    /// The `[loss]` terms (`None`: HF's plain cross-entropy).
    pub loss: Option<&'a segformer::SegLoss>,
}

impl PlanInputTemplate<'_> {
    /// The plan input for a micro-batch of `batch`.
    pub fn at(&self, batch: usize) -> PlanInput<'_> {
        self.mode(batch, self.precision, self.checkpointing)
    }

    fn mode(&self, batch: usize, precision: Precision, checkpointing: bool) -> PlanInput<'_> {
        PlanInput {
            config: self.config,
            height: self.height,
            width: self.width,
            batch,
            precision,
            checkpointing,
            kernels: self.kernels,
            allocator: self.allocator,
            loss: self.loss,
        }
    }
}

/// Activation bytes of one encoder stage (attention scores are counted separately).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageMemory {
    /// Tokens per image of the stage (`h·w`).
    pub tokens: usize,
    /// Token, Mix-FFN and reduced key/value tensors kept for backward.
    pub activations: u64,
    /// Attention scores/probabilities kept for backward (`B·heads·N·N/sr²` per block).
    pub attention: u64,
}

/// A predicted peak, term by term (bytes). As JSON it also carries the sums: `backward_peak`,
/// `live_peak`, `peak` ([`MemoryEstimate::peak_bytes`]) and `whole_process`
/// ([`MemoryEstimate::whole_process_bytes`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(into = "EstimateJson")]
pub struct MemoryEstimate {
    /// Trainable parameters (f32 master weights), with the BatchNorm running statistics.
    pub parameters: usize,
    /// f32 master weights.
    pub weights: u64,
    /// Parameter gradients (f32) alive at the peak, which falls early in backward: most
    /// gradients are made later, as activations are freed (calibrated).
    pub gradients: u64,
    /// AdamW first and second moments (f32).
    pub optimizer: u64,
    /// Activations per encoder stage.
    pub stages: Vec<StageMemory>,
    /// Decode head activations (projected, upsampled, fused maps).
    pub decoder: u64,
    /// Logits kept for the loss: composed kernels keep the full-resolution logits with their
    /// softmax and gradient copies; the fused loss keeps only the quarter-resolution ones.
    pub logits: u64,
    /// Input images and labels.
    pub inputs: u64,
    /// Mixed-precision weight copies kept by the graph, kernel scratch (calibrated).
    pub workspace: u64,
    /// The peak of the AdamW step itself: weights, moments, every gradient and the update's
    /// temporaries. It is the step's peak when activations are small (tiny inputs).
    pub optimizer_step: u64,
    /// What the `[loss]` terms beyond HF's cross-entropy keep for the backward pass
    /// ([`loss_terms_bytes`]; 0 for plain cross-entropy).
    pub loss_terms: u64,
    /// CubeCL's pool (burn-cuda, burn-wgpu): bytes reserved beyond the live peak (pages
    /// rounded up, pages kept for reuse); 0 on the CPU heap.
    pub pool: u64,
    /// What the process holds besides the step's tensors, in the budgeted memory (set by
    /// [`MemoryEstimate::with_process`]; 0 from [`MemoryPlan::predict`]). On the CPU: code,
    /// the runtime's thread stacks and buffers, and the allocator's slack around the live
    /// bytes (measured, see [`process_baseline`]). On CubeCL devices the device's context,
    /// NOTE: not measured yet (no GPU was lent to this project's runs), counted as 0.
    pub process_baseline: u64,
    /// The loader's samples decoded and augmented ahead of the model: the prefetch queue and
    /// one sample per worker in flight (host memory; counted in the budget on the CPU only).
    pub loader: u64,
}

/// [`MemoryEstimate`] as JSON: its terms and their sums.
#[derive(Serialize)]
struct EstimateJson {
    parameters: usize,
    weights: u64,
    gradients: u64,
    optimizer: u64,
    stages: Vec<StageMemory>,
    decoder: u64,
    logits: u64,
    inputs: u64,
    workspace: u64,
    optimizer_step: u64,
    loss_terms: u64,
    pool: u64,
    process_baseline: u64,
    loader: u64,
    backward_peak: u64,
    live_peak: u64,
    peak: u64,
    whole_process: u64,
}

impl From<MemoryEstimate> for EstimateJson {
    fn from(e: MemoryEstimate) -> Self {
        Self {
            backward_peak: e.backward_peak(),
            live_peak: e.live_peak_bytes(),
            peak: e.peak_bytes(),
            whole_process: e.whole_process_bytes(),
            parameters: e.parameters,
            weights: e.weights,
            gradients: e.gradients,
            optimizer: e.optimizer,
            stages: e.stages,
            decoder: e.decoder,
            logits: e.logits,
            inputs: e.inputs,
            workspace: e.workspace,
            optimizer_step: e.optimizer_step,
            loss_terms: e.loss_terms,
            pool: e.pool,
            process_baseline: e.process_baseline,
            loader: e.loader,
        }
    }
}

impl MemoryEstimate {
    /// All activations of the encoder stages, attention included.
    pub fn activations(&self) -> u64 {
        self.stages
            .iter()
            .map(|s| s.activations + s.attention)
            .sum()
    }

    /// The predicted peak memory of one training step: the live peak, plus the pool's reserve
    /// on CubeCL devices (what `torch.cuda.max_memory_reserved` is to PyTorch).
    pub fn peak_bytes(&self) -> u64 {
        self.live_peak_bytes() + self.pool
    }

    /// The predicted peak of the whole process in the budgeted memory: the step's peak plus
    /// everything else the process holds there ([`MemoryEstimate::process_baseline`], and on
    /// the CPU the [`MemoryEstimate::loader`]). What `--memory-budget` is fitted against.
    pub fn whole_process_bytes(&self) -> u64 {
        self.peak_bytes() + self.process_baseline + self.loader
    }

    /// The predicted peak of live bytes during one training step: the larger of the backward
    /// peak and the optimizer step's.
    pub fn live_peak_bytes(&self) -> u64 {
        self.backward_peak().max(self.optimizer_step)
    }

    /// The peak early in backward: parameters, moments, activations, logits, inputs.
    pub fn backward_peak(&self) -> u64 {
        self.weights
            + self.gradients
            + self.optimizer
            + self.activations()
            + self.decoder
            + self.logits
            + self.loss_terms
            + self.inputs
            + self.workspace
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |f: &mut fmt::Formatter<'_>, name: &str, bytes: u64| {
            writeln!(f, "{name:<28} {:>10.1} MiB", bytes as f64 / MIB)
        };
        writeln!(f, "{:<28} {:>10}", "parameters", self.parameters)?;
        line(f, "weights (f32)", self.weights)?;
        line(f, "gradients (f32)", self.gradients)?;
        line(f, "optimizer state (AdamW m+v)", self.optimizer)?;
        for (i, s) in self.stages.iter().enumerate() {
            line(f, &format!("stage {} activations", i + 1), s.activations)?;
            line(f, &format!("stage {} attention scores", i + 1), s.attention)?;
        }
        line(f, "decode head", self.decoder)?;
        line(f, "logits for the loss", self.logits)?;
        if self.loss_terms > 0 {
            line(f, "extra loss terms", self.loss_terms)?;
        }
        line(f, "inputs and labels", self.inputs)?;
        line(f, "workspace / allocator", self.workspace)?;
        line(f, "backward peak", self.backward_peak())?;
        line(f, "optimizer step peak", self.optimizer_step)?;
        if self.pool > 0 {
            line(f, "CubeCL pool reserve", self.pool)?;
        }
        line(f, "predicted peak", self.peak_bytes())?;
        line(f, "process baseline", self.process_baseline)?;
        line(f, "loader queue", self.loader)?;
        write!(
            f,
            "{:<28} {:>10.1} MiB",
            "whole process",
            self.whole_process_bytes() as f64 / MIB
        )
    }
}

/// Output size of a conv with kernel `k`, stride `s`, padding `k/2` (the patch embeddings).
fn conv_out(n: usize, k: usize, s: usize) -> usize {
    (n + 2 * (k / 2) - k) / s + 1
}

/// Trainable parameters of the model (the same count as the layer shapes give), plus the two
/// BatchNorm running statistics.
fn parameter_count(c: &SegformerConfig) -> usize {
    let mut total = 0;
    let mut c_in = c.num_channels;
    for i in 0..c.num_encoder_blocks {
        let (h, k, r) = (c.hidden_sizes[i], c.patch_sizes[i], c.sr_ratios[i]);
        let m = h * c.mlp_ratios[i];
        total += c_in * h * k * k + h + 2 * h;
        let sr = if r > 1 { h * h * r * r + h + 2 * h } else { 0 };
        let block = 2 * h + 4 * (h * h + h) + sr + 2 * h + (h * m + m) + (9 * m + m) + (m * h + h);
        total += c.depths[i] * block + 2 * h;
        c_in = h;
    }
    let d = c.decoder_hidden_size;
    total += c.hidden_sizes.iter().map(|&h| h * d + d).sum::<usize>();
    total + 4 * d * d + 2 * d + d * c.num_labels() + c.num_labels() + 2 * d
}

/// The memory predictor.
pub struct MemoryPlan;

impl MemoryPlan {
    /// Predicts the peak live bytes of one training step (forward, loss, backward, AdamW step)
    /// after the first (which allocates the AdamW moments).
    pub fn predict(input: &PlanInput<'_>) -> MemoryEstimate {
        let c = input.config;
        let k = factors(input.kernels, input.precision, input.checkpointing);
        let mix = k.mix;
        let b = input.batch.max(1) as f64;
        let p = parameter_count(c);
        let (mut h, mut w) = (input.height, input.width);
        let mut stages = Vec::with_capacity(c.num_encoder_blocks);
        let mut n0 = 0;
        for i in 0..c.num_encoder_blocks {
            h = conv_out(h, c.patch_sizes[i], c.strides[i]);
            w = conv_out(w, c.patch_sizes[i], c.strides[i]);
            let n = h * w;
            if i == 0 {
                n0 = n;
            }
            let ch = c.hidden_sizes[i] as f64;
            let sr = c.sr_ratios[i];
            let reduced = if sr > 1 { (h / sr) * (w / sr) } else { n } as f64;
            let depth = c.depths[i] as f64;
            let n = n as f64;
            let reduced_kv = if sr > 1 {
                mix.reduced * reduced * ch
            } else {
                0.0
            };
            let per_block = k.scale
                * (mix.token * n * ch + mix.mlp * n * ch * c.mlp_ratios[i] as f64 + reduced_kv);
            let heads = c.num_attention_heads[i] as f64;
            stages.push(StageMemory {
                tokens: n as usize,
                activations: (b * (depth * per_block + k.scale * mix.stage * n * ch)) as u64,
                attention: (b * depth * k.attention * heads * n * reduced) as u64,
            });
        }
        let labels = c.num_labels() as f64;
        let pixels = (input.height * input.width) as f64;
        let decoder = b * k.scale * mix.decoder * c.decoder_hidden_size as f64 * n0 as f64;
        MemoryEstimate {
            parameters: p,
            weights: 4 * p as u64,
            gradients: (k.gradients * p as f64) as u64,
            optimizer: 8 * p as u64,
            stages,
            decoder: decoder as u64,
            logits: (b * labels * (k.logits * pixels + k.quarter_logits * n0 as f64)
                + k.band
                    * segformer::loss_band_elements(
                        b as usize,
                        c.num_labels(),
                        input.height,
                        input.width,
                    ) as f64) as u64,
            // f32 images and i64 labels (and the fused loss's class map)
            inputs: (b * pixels * (4.0 * c.num_channels as f64 + 8.0 + k.pixel)) as u64,
            workspace: (k.workspace * p as f64) as u64,
            // 16 B/param of weights, gradients and moments, plus the update's temporaries
            optimizer_step: (k.step * p as f64) as u64,
            loss_terms: input.loss.map_or(0, |l| loss_terms_bytes(input, l)),
            pool: 0,
            process_baseline: 0,
            loader: 0,
        }
        .with_pool(input.allocator)
    }
}

impl MemoryEstimate {
    /// Sets the pool term for `allocator` from the live peak.
    fn with_pool(mut self, allocator: Allocator) -> Self {
        self.pool = match allocator {
            Allocator::Heap => 0,
            Allocator::CubeclPool => pool_reserve(self.live_peak_bytes()),
        };
        self
    }
}

/// What runs beside the training step and holds memory in proportion to its settings: the
/// loader's threads and read-ahead (`train.workers`, `train.prefetch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoaderInput {
    /// Worker threads decoding and augmenting samples.
    pub workers: usize,
    /// Samples queued ahead of the model.
    pub prefetch: usize,
}

impl MemoryEstimate {
    /// Adds what the rest of the process holds for a step of `input` fed by `loader`: the
    /// process baseline ([`process_baseline`]) and the loader's samples ([`loader_bytes`]).
    pub fn with_process(mut self, input: &PlanInput<'_>, loader: &LoaderInput) -> Self {
        let loader = loader_bytes(input, loader);
        match input.allocator {
            Allocator::Heap => {
                self.process_baseline = process_baseline(self.live_peak_bytes());
                self.loader = loader;
            }
            // NOTE: the GPU's context is not measured yet: 0 until a GPU run measures it. The
            // loader's samples live in host memory, outside the device's budget.
            Allocator::CubeclPool => {
                self.process_baseline = 0;
                self.loader = 0;
            }
        }
        self
    }
}

/// Bytes that the `[loss]` terms beyond the fused cross-entropy keep alive for the backward
/// pass of one micro-batch, to add to [`MemoryEstimate::logits`] (0 for HF's plain
/// cross-entropy, which the estimate already counts).
///
/// Those terms run burn's composition on one shared copy of the full-resolution logits
/// (`B·labels·H·W` f32, kept by the upsampling's backward), and each keeps about as many
/// full-resolution tensors again for its own backward: a class-weighted cross-entropy 2 (log-
/// softmax, weights), focal 3 (log-softmax, `p`, the focusing factor), Dice 4 (softmax, one-hot,
/// masked probabilities, their product), Lovász 5 (softmax, one-hot, difference, errors, the
/// Lovász weights). NOTE: counted from the ops, not calibrated like the rest of the estimate.
pub fn loss_terms_bytes(input: &PlanInput<'_>, loss: &segformer::SegLoss) -> u64 {
    use segformer::LossKind;
    if !loss.keeps_full_logits() {
        return 0;
    }
    // f64: a hostile size or batch must not overflow (the callers bound them, see limits)
    let full = input.batch.max(1) as f64
        * input.config.num_labels() as f64
        * input.height as f64
        * input.width as f64
        * 4.0;
    let per_term: u64 = loss
        .terms
        .iter()
        .map(|t| match t.kind {
            LossKind::CrossEntropy if loss.ce_is_fused() => 0,
            LossKind::CrossEntropy => 2,
            LossKind::Focal { .. } => 3,
            LossKind::Dice { .. } => 4,
            LossKind::Lovasz => 5,
        })
        .sum();
    (full * (1 + per_term) as f64) as u64
}
