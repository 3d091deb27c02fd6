//! The calibrated coefficients of the plan: bytes per counted element for each way of running a
//! step, and the reserves around it (the process on the CPU, CubeCL's pool on the GPUs). Every
//! number here comes from a measurement (`examples/bench_memory.rs`, `cargo xtask bench memory`;
//! tables in `BENCH-memory.md`); the arithmetic that uses them is in [`super`].

use segformer::KernelPath;

use super::{LoaderInput, MIB, PlanInput};
use crate::config::Precision;

/// Bytes kept per counted element, per way of running a step.
///
/// `mix` counts, per element of each kind of tensor, the f32 bytes the ops save for backward
/// (see [`COMPOSED`] and [`FUSED`]); `scale` is the measured ratio of the live bytes to that
/// mix at the peak; the other factors are measured directly.
#[derive(Clone, Copy, Debug)]
pub(super) struct Factors {
    /// Analytic bytes per counted element.
    pub(super) mix: Mix,
    /// Measured live bytes over the counted mix at the peak: below 1 when not every counted
    /// tensor is alive at once, above 1 when ops keep temporaries the mix does not count.
    pub(super) scale: f64,
    /// Bytes per attention score (composed: f32 scores + softmax output + its gradient = 12 B
    /// without checkpointing, 8 B with it (measured); fused and recompute: none, the scores are
    /// recomputed).
    pub(super) attention: f64,
    /// Bytes per full-resolution logit (composed: upsampled logits, log-softmax output, its
    /// gradient; recompute: the logits upsampled along the width and their gradient, each a
    /// quarter of the full resolution; fused: none).
    pub(super) logits: f64,
    /// Bytes per element of one band of the recomputing loss (its upsampled logits, softmax,
    /// one-hot and gradient; [`segformer::loss_band_elements`] elements).
    pub(super) band: f64,
    /// Bytes per quarter-resolution logit beyond the decode head's (fused: the classifier
    /// output and its gradient when they outlive the decoder's peak).
    pub(super) quarter_logits: f64,
    /// Bytes per label pixel besides the labels themselves (fused: the loss's class map).
    pub(super) pixel: f64,
    /// Gradient bytes per parameter alive at the peak: the peak falls early in backward, before
    /// most gradients exist.
    pub(super) gradients: f64,
    /// Workspace bytes per parameter: the bf16 weight copies the graph keeps in mixed precision.
    pub(super) workspace: f64,
    /// The optimizer step's own peak per parameter: weights, moments, every gradient and the
    /// update's temporaries (measured at 64², where nothing else is large).
    pub(super) step: f64,
}

/// Analytic bytes per element: per block token `N·C`, Mix-FFN `N·4C` and reduced key/value
/// `N/sr²·C` elements, per stage `N·C`, decoder `D·N₀`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mix {
    pub(super) token: f64,
    pub(super) mlp: f64,
    pub(super) reduced: f64,
    pub(super) stage: f64,
    pub(super) decoder: f64,
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
pub(super) fn factors(kernels: KernelPath, precision: Precision, checkpointing: bool) -> Factors {
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

// CubeCL's pool over the live peak for segfit's GPU builds (burn-fusion and autotune on),
// fitted by least squares with `bench_memory --wgpu --fit-pool` on lavapipe
// (`crates/train/bench/pool_fit_fused.sh`: 10 fused MiT-B0 steps, 64²–256², b1/b2, 2/150
// labels, checkpointing off/on; worst error 34%, table in BENCH-memory.md):
// reserved ≈ POOL_SCALE × live + POOL_BASE. The unfused fit (1.235 × live + 15.1 MiB) no longer
// describes any build. NOTE: the pool's page sizes follow the device's largest buffer (a quarter
// of its memory on CUDA), so on a real GPU this is a prediction, not a measurement.
const POOL_SCALE: f64 = 1.078;
const POOL_BASE: f64 = 41.4 * MIB;

/// Bytes CubeCL's pool reserves beyond a live peak of `live` bytes.
pub(super) fn pool_reserve(live: u64) -> u64 {
    ((POOL_SCALE - 1.0) * live as f64 + POOL_BASE).max(0.0) as u64
}
