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

/// Bytes kept per counted element, per way of running a step.
///
/// `mix` counts, per element of each kind of tensor, the f32 bytes the ops save for backward
/// (see [`COMPOSED`] and [`FUSED`]); `scale` is the measured ratio of the live bytes to that
/// mix at the peak; the other factors are measured directly.
#[derive(Clone, Copy, Debug)]
struct Factors {
    /// Analytic bytes per counted element.
    mix: Mix,
    /// Measured live bytes over the counted mix at the peak: below 1 when not every counted
    /// tensor is alive at once, above 1 when ops keep temporaries the mix does not count.
    scale: f64,
    /// Bytes per attention score (composed: f32 scores + softmax output + its gradient = 12 B
    /// without checkpointing, 8 B with it (measured); fused and recompute: none, the scores are
    /// recomputed).
    attention: f64,
    /// Bytes per full-resolution logit (composed: upsampled logits, log-softmax output, its
    /// gradient; recompute: the logits upsampled along the width and their gradient, each a
    /// quarter of the full resolution; fused: none).
    logits: f64,
    /// Bytes per element of one band of the recomputing loss (its upsampled logits, softmax,
    /// one-hot and gradient; [`segformer::loss_band_elements`] elements).
    band: f64,
    /// Bytes per quarter-resolution logit beyond the decode head's (fused: the classifier
    /// output and its gradient when they outlive the decoder's peak).
    quarter_logits: f64,
    /// Bytes per label pixel besides the labels themselves (fused: the loss's class map).
    pixel: f64,
    /// Gradient bytes per parameter alive at the peak: the peak falls early in backward, before
    /// most gradients exist.
    gradients: f64,
    /// Workspace bytes per parameter: the bf16 weight copies the graph keeps in mixed precision.
    workspace: f64,
    /// The optimizer step's own peak per parameter: weights, moments, every gradient and the
    /// update's temporaries (measured at 64², where nothing else is large).
    step: f64,
}

/// Analytic bytes per element: per block token `N·C`, Mix-FFN `N·4C` and reduced key/value
/// `N/sr²·C` elements, per stage `N·C`, decoder `D·N₀`.
#[derive(Clone, Copy, Debug)]
struct Mix {
    token: f64,
    mlp: f64,
    reduced: f64,
    stage: f64,
    decoder: f64,
}

/// burn's composition: per `N·C` the two LayerNorms' inputs and normalised values, q/k/v/o
/// projection inputs and outputs, the head split/merge copies, the residual sums and drop-path
/// products, ≈ 20 tensors = 80 B; per `N·4C` fc1 output, depthwise-conv input/output, the
/// erf-GELU's five intermediates ≈ 7 = 28 B; per reduced element the sr conv output, its
/// LayerNorm and k/v inputs ≈ 6 = 24 B; per stage element the patch embedding output and
/// LayerNorms ≈ 6 = 24 B; per decoder element four upsampled maps, BatchNorm and ReLU ≈ 13 = 52 B.
const COMPOSED: Mix = Mix {
    token: 80.0,
    mlp: 28.0,
    reduced: 24.0,
    stage: 24.0,
    decoder: 52.0,
};

/// The fused kernels: per `N·C` the block input (LayerNorm), the LayerNorm output (q
/// projection), its transposed copy (sr conv input), q (attention), the attention output
/// (o projection), the residual sum (second LayerNorm) and its normalised value (fc1) = 7
/// tensors = 28 B; per `N·4C` the fc1 output (depthwise conv) and the activation (fc2) = 8 B;
/// per reduced element the sr LayerNorm input and output, k and v = 16 B; per stage element
/// the patch embedding's transposed output, its LayerNorm input and the stage's final LayerNorm
/// = 12 B; per decoder element the pre-norm sum and the ReLU output = 8 B.
const FUSED: Mix = Mix {
    token: 28.0,
    mlp: 8.0,
    reduced: 16.0,
    stage: 12.0,
    decoder: 8.0,
};

// Calibrated with `examples/bench_memory.rs` on MiT-B0 (256² and 512², batch 1–4, 2 and 150
// labels, least squares per mode on the measured heap peaks, relative errors); see
// BENCH-memory.md for the check against every measured point, held-out ones included. The
// recompute and composed factors were measured on burn-flex with `Kernels::Recompute` (burn's
// op-by-op graph, as burn-cuda runs it) and `Kernels::Composed`.
fn factors(kernels: KernelPath, precision: Precision, checkpointing: bool) -> Factors {
    // bf16 on the fused path is the fused kernels' own: bf16 products inside kernels that keep
    // f32 activations and no weight copies (or f32 throughout, on a CPU without AVX512-BF16),
    // so it takes f32's memory; f16 there is burn's composed autocast, like bf16 elsewhere.
    let half = match (kernels, precision) {
        (_, Precision::F32) | (KernelPath::Fused, Precision::Bf16) => false,
        _ => true,
    };
    // half: the weight copies the graph keeps for the half-precision matmuls
    let workspace = if half { 2.0 } else { 0.0 };
    let composed = |scale, attention, logits, gradients, step| Factors {
        mix: COMPOSED,
        scale,
        attention,
        logits,
        band: 0.0,
        quarter_logits: 0.0,
        pixel: 0.0,
        gradients,
        workspace,
        step,
    };
    // burn's composition with the recomputing attention (no scores kept) and loss (the logits
    // upsampled along the width, their gradient, and one band at a time).
    let recompute = |scale, logits, band, gradients, step| Factors {
        band,
        ..composed(scale, 0.0, logits, gradients, step)
    };
    let fused = |scale, quarter_logits, gradients, step| Factors {
        mix: FUSED,
        scale,
        attention: 0.0,
        logits: 0.0,
        band: 0.0,
        quarter_logits,
        pixel: 4.0,
        gradients,
        workspace,
        step,
    };
    match (kernels, half, checkpointing) {
        (KernelPath::Recompute, false, false) => recompute(0.588, 2.82, 13.24, 0.63, 17.70),
        (KernelPath::Recompute, true, false) => recompute(0.587, 1.87, 13.16, 0.71, 17.23),
        (KernelPath::Recompute, false, true) => recompute(0.351, 2.74, 12.97, 0.64, 17.71),
        (KernelPath::Recompute, true, true) => recompute(0.467, 1.61, 12.20, 0.87, 17.23),
        (KernelPath::Composed, false, false) => composed(0.589, 12.0, 16.06, 0.69, 17.70),
        (KernelPath::Composed, true, false) => composed(0.587, 12.0, 15.10, 0.73, 17.23),
        (KernelPath::Composed, false, true) => composed(0.352, 8.0, 15.54, 0.70, 17.71),
        (KernelPath::Composed, true, true) => composed(0.480, 8.0, 14.02, 0.85, 17.23),
        // NOTE: checkpointing costs memory with the fused kernels (they already keep only what
        // their backward needs; burn's checkpointer keeps extra inputs on top), so the
        // planner's checkpointing options are larger here, never chosen to save memory.
        // The optimizer step's factor re-measured after the second speed round (fused
        // dropout, patch gathers): 61.2 MiB at 64² b1, was 18.23 B per parameter.
        (KernelPath::Fused, false, false) => fused(1.222, 2.08, 1.19, 17.5),
        (KernelPath::Fused, true, false) => fused(1.188, 0.0, 0.80, 17.19),
        (KernelPath::Fused, false, true) => fused(1.518, 8.0, 0.70, 18.23),
        (KernelPath::Fused, true, true) => fused(1.655, 0.0, 0.97, 17.21),
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

// The process around a CPU step, measured on real `segfit train` runs (`cargo xtask bench
// memory --calibrate`, table in BENCH-memory.md: MiT-B0, 128²–512², micro-batch 1–4, 1–2
// workers, prefetch 1–64): peak RSS (VmHWM) minus the step's predicted live bytes was 34–100
// MiB, highest at 128² (where the step is smallest), with no trend in the live bytes or the
// prefetch that rose above that spread. PROCESS_BASE covers the highest measured (the binary's
// code and data, burn-flex's and the loader's threads and glibc's per-thread arenas, the
// run's evaluation and reporting); PROCESS_SLACK the allocator's pages around larger peaks.
// The loader term comes on top as an upper bound (with 80 training samples the queue never
// showed above that spread).
const PROCESS_BASE: f64 = 100.0 * MIB;
const PROCESS_SLACK: f64 = 0.02;
// Resident bytes per sample the loader holds, per byte of its `pixel_values` and labels.
const LOADER_SCALE: f64 = 1.0;

/// The process baseline on the CPU around a step whose live peak is `live` bytes.
pub fn process_baseline(live: u64) -> u64 {
    (PROCESS_BASE + PROCESS_SLACK * live as f64) as u64
}

/// Host bytes of the samples a loader holds ahead of the model: the prefetch queue, one
/// sample per worker in flight, and up to one per worker waiting to be put back in order,
/// each an f32 `[bands, H, W]` image and a u8 label map.
pub fn loader_bytes(input: &PlanInput<'_>, loader: &LoaderInput) -> u64 {
    let sample = (input.height as f64)
        * (input.width as f64)
        * (4.0 * input.config.num_channels as f64 + 1.0);
    let samples = (loader.prefetch.max(1) + 2 * loader.workers.max(1)) as f64;
    (LOADER_SCALE * samples * sample) as u64
}

// CubeCL's pool over the live peak, fitted by least squares with `bench_memory --wgpu` on
// lavapipe (24 MiT-B0 steps, 64²–256², b1/b2, 2/150 labels, checkpointing off/on; table in
// BENCH-memory.md, worst error 27%): reserved ≈ POOL_SCALE × live + POOL_BASE. NOTE: the
// pool's page sizes follow the device's largest buffer (a quarter of its memory on CUDA), so
// on a real GPU this is a prediction, not a measurement.
const POOL_SCALE: f64 = 1.235;
const POOL_BASE: f64 = 15.1 * MIB;

/// Bytes CubeCL's pool reserves beyond a live peak of `live` bytes.
fn pool_reserve(live: u64) -> u64 {
    ((POOL_SCALE - 1.0) * live as f64 + POOL_BASE).max(0.0) as u64
}

/// How a run fits its budget: micro-batch, accumulation, precision, checkpointing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitChoice {
    /// Images per forward/backward.
    pub micro_batch: usize,
    /// Micro-batches per optimizer step (`micro_batch × accumulation_steps` = the effective batch).
    pub accumulation_steps: usize,
    /// The precision to train in.
    pub precision: Precision,
    /// Whether to enable activation checkpointing.
    pub checkpointing: bool,
    /// The budget, in bytes.
    pub budget: u64,
    /// The prediction for the chosen micro-batch.
    pub estimate: MemoryEstimate,
}

impl FitChoice {
    /// One line for logs: `batch 2 × 8 steps in bf16: predicted 3.1 GiB of 8 GiB` (the whole
    /// process when the fit counted it, see [`fit_whole_process`]).
    pub fn reason(&self) -> String {
        let prec = precision_name(self.precision);
        let ck = if self.checkpointing {
            " with checkpointing"
        } else {
            ""
        };
        format!(
            "batch {} × {} steps in {prec}{ck}: predicted {} of {}",
            self.micro_batch,
            self.accumulation_steps,
            human(self.estimate.whole_process_bytes()),
            human(self.budget)
        )
    }
}

/// `3.1 GiB`, `512 MiB`: one decimal, trailing `.0` dropped.
pub fn human(bytes: u64) -> String {
    let (v, unit) = if bytes as f64 >= GIB {
        (bytes as f64 / GIB, "GiB")
    } else {
        (bytes as f64 / MIB, "MiB")
    };
    let s = format!("{v:.1}");
    format!("{} {unit}", s.strip_suffix(".0").unwrap_or(&s))
}

/// Chooses the largest micro-batch dividing `effective_batch` whose predicted peak fits
/// `budget_bytes`, and the accumulation steps that make the effective batch exact. When even
/// one image does not fit, tries the device's half precision (if the template is f32), then
/// checkpointing, then both.
///
/// Errors when `effective_batch` is 0, or nothing fits; the message names the budget and the
/// smallest predicted peak.
pub fn fit_budget(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
) -> Result<FitChoice, String> {
    fit(budget_bytes, effective_batch, template, None)
}

/// [`fit_budget`] against the whole process ([`MemoryEstimate::whole_process_bytes`]): the
/// step's peak plus the process baseline and the `loader`'s samples, so that a budget the
/// planner accepts holds for the process, not only for its tensors. What `--memory-budget`
/// uses.
pub fn fit_whole_process(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
    loader: &LoaderInput,
) -> Result<FitChoice, String> {
    fit(budget_bytes, effective_batch, template, Some(loader))
}

fn fit(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
    loader: Option<&LoaderInput>,
) -> Result<FitChoice, String> {
    if effective_batch == 0 {
        return Err("the effective batch must be at least 1".into());
    }
    let half = match (template.precision, template.reduced) {
        (Precision::F32, Some(reduced)) => reduced,
        (precision, _) => precision,
    };
    let mut modes = vec![(template.precision, template.checkpointing)];
    for m in [
        (half, template.checkpointing),
        (template.precision, true),
        (half, true),
    ] {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    let predict = |batch, (precision, checkpointing)| {
        let input = template.mode(batch, precision, checkpointing);
        let estimate = MemoryPlan::predict(&input);
        match loader {
            Some(l) => estimate.with_process(&input, l),
            None => estimate,
        }
    };
    for &mode in &modes {
        for micro in (1..=effective_batch).rev() {
            if !effective_batch.is_multiple_of(micro) {
                continue;
            }
            let estimate = predict(micro, mode);
            if estimate.whole_process_bytes() <= budget_bytes {
                return Ok(FitChoice {
                    micro_batch: micro,
                    accumulation_steps: effective_batch / micro,
                    precision: mode.0,
                    checkpointing: mode.1,
                    budget: budget_bytes,
                    estimate,
                });
            }
        }
    }
    let (smallest, (precision, checkpointing)) = modes
        .iter()
        .map(|&m| (predict(1, m).whole_process_bytes(), m))
        .min_by_key(|&(bytes, _)| bytes)
        .unwrap_or((0, (template.precision, template.checkpointing)));
    let ck = if checkpointing {
        " with checkpointing"
    } else {
        ""
    };
    Err(format!(
        "a memory budget of {} is too small for {}×{} inputs: the smallest predicted peak is {} \
         (batch 1 in {}{ck}); raise the budget or lower data.size",
        human(budget_bytes),
        template.height,
        template.width,
        human(smallest),
        precision_name(precision)
    ))
}

pub(crate) fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "f32",
        Precision::Bf16 => "bf16",
        Precision::F16 => "f16",
    }
}

/// Parses a byte size: a number with an optional unit, `8GiB`, `7.5G`, `512MiB`, `8000MB`,
/// `1048576`. Units are case-insensitive.
///
/// NOTE: bare `K`/`M`/`G`/`T` are binary (like `GiB`), as memory sizes are usually meant;
/// `KB`/`MB`/`GB`/`TB` are decimal (SI).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s
        .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (s[..split].trim(), s[split..].trim());
    let bad = |why: &str| {
        Err(format!(
            "`{text}` is not a memory size ({why}); write e.g. 8GiB, 7.5G, 512MiB or 8000MB"
        ))
    };
    let value: f64 = match number.parse() {
        Ok(v) => v,
        Err(_) => return bad("no number"),
    };
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => MIB,
        "g" | "gib" => GIB,
        "t" | "tib" => GIB * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return bad(&format!("unknown unit `{unit}`")),
    };
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return bad("expected between 1 byte and 16 EiB");
    }
    Ok(bytes.round() as u64)
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
