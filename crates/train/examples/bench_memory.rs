//! Memory benchmark: peak memory of REAL MiT training steps (forward, loss, backward, AdamW
//! step) on the CPU, next to what [`train::MemoryPlan`] predicts.
//!
//! ```text
//! cargo run --release -p train --example bench_memory -- [--kernels K] [--json FILE] [--md FILE] [--replay FILE] [CASE…]
//! cargo run --release -p train --example bench_memory -- [--kernels K] --predict CASE…   (breakdown only, runs nothing)
//! K = auto|recompute|composed: the models' `segformer::Kernels` (default auto)
//! CASE = SIZE:BATCH:f32|bf16:ckpt|full:LABELS   e.g. 512:2:f32:full:2   (default: a 256/512 grid)
//! cargo run --release -p train --features cuda --example bench_memory -- --cuda CASE…
//! cargo run --release -p train --features wgpu --example bench_memory -- --wgpu [--unfused] [CASE…]
//! GPU flags: [--launches] [--warmup N] [--steps N] [--autotune-cache DIR] [--fit-pool]
//! ```
//! `--cuda` runs the steps on CUDA GPU 0 (burn-cuda), `--wgpu` on wgpu adapter 0 (burn-wgpu;
//! lavapipe where there is no GPU; its default grid is the small sizes lavapipe runs in
//! seconds), and both report CubeCL's device memory pool after the measured step: bytes
//! reserved (the pool keeps what it reserved, so this bounds the step's peak from above; the
//! figure to set beside `torch.cuda.max_memory_reserved`) and bytes still in use; the error
//! column compares the prediction (pool reserve included) with the reserved bytes, and the
//! live column gives the planner's live-byte prediction without the pool term.
//! The GPU backends are burn's fused ones (burn-fusion and autotune, as segfit builds them);
//! `--unfused` runs burn-wgpu without burn-fusion (`segformer::WgpuUnfused`) for comparison.
//! `--launches` counts the kernels CubeCL launches in the first measured step (its profiling
//! log at level `minimal`, one `Executing …` record per launch, counted through the `log`
//! crate). `--warmup N` steps come before the measured ones (default 1; autotune times its
//! candidates and burn-fusion settles its plans in the first), `--steps N` measured steps give
//! the median step time (default 1). `--autotune-cache DIR` is where CubeCL keeps its timings
//! (default: a directory under the system's temporary directory). `--fit-pool` ends with the
//! least-squares fit `reserved ≈ scale × live + base` over the GPU rows shown (live = the
//! planner's live-byte prediction), fused and unfused rows apart: the planner's pool term.
//! Each case runs in a fresh child process (so neither the heap nor the RSS high-water mark
//! carries over from another case): one warm-up step (it allocates the AdamW moments), then
//! the peak live heap bytes (a counting global allocator, reset before the measured step) and
//! the process peak RSS (`VmHWM`, reset through `/proc/self/clear_refs` before the step) of
//! one measured step. `--replay FILE` re-prints the table of a saved `--json` run with the
//! current predictor (measurements are never recomputed from predictions).

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, FloatDType, Int, Tensor};
use segformer::Kernels;
use serde::{Deserialize, Serialize};
use train::{AdamW, AdamWConfig, Device, KernelPath, MemoryPlan, PlanInput, Precision};

/// `System`, counting the live bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Case {
    size: usize,
    batch: usize,
    bf16: bool,
    ckpt: bool,
    labels: usize,
    /// The fused CPU kernels were allowed (`Kernels::Auto`; the default) or not.
    #[serde(default = "fused_default")]
    fused: bool,
    /// Without the fused kernels: segformer's recomputing attention and loss were allowed
    /// (`Kernels::Recompute`) or not (`Kernels::Composed`; rows measured before they existed).
    #[serde(default)]
    recompute: bool,
    /// On CUDA GPU 0 (burn-cuda) instead of the CPU.
    #[serde(default)]
    cuda: bool,
    /// On wgpu adapter 0 (burn-wgpu) instead of the CPU.
    #[serde(default)]
    wgpu: bool,
    /// On a GPU: burn-fusion on (segfit's builds since issue #27; rows measured before were
    /// unfused, which is what a missing field reads as).
    #[serde(default)]
    fusion: bool,
}

fn fused_default() -> bool {
    true
}

impl Case {
    fn parse(s: &str, kernels: Kernels) -> Option<Case> {
        let p: Vec<&str> = s.split(':').collect();
        if p.len() != 5 {
            return None;
        }
        Some(Case {
            size: p[0].parse().ok()?,
            batch: p[1].parse().ok()?,
            bf16: match p[2] {
                "f32" => false,
                "bf16" => true,
                _ => return None,
            },
            ckpt: match p[3] {
                "full" => false,
                "ckpt" => true,
                _ => return None,
            },
            labels: p[4].parse().ok()?,
            fused: kernels == Kernels::Auto,
            recompute: kernels != Kernels::Composed,
            cuda: false,
            wgpu: false,
            fusion: false,
        })
    }
    /// The kernel choice the recorded switches stand for.
    fn kernels(&self) -> Kernels {
        match (self.fused, self.recompute) {
            (true, _) => Kernels::Auto,
            (false, true) => Kernels::Recompute,
            (false, false) => Kernels::Composed,
        }
    }
    /// The path the choice takes on the case's device, as segformer resolves it.
    fn path(&self) -> KernelPath {
        self.device().kernel_path(self.kernels())
    }
    fn device(&self) -> Device {
        match (self.cuda, self.wgpu) {
            (true, _) => Device::Cuda(0),
            (false, true) => Device::Wgpu(0),
            (false, false) => Device::Cpu,
        }
    }
    fn spec(&self) -> String {
        let prec = if self.bf16 { "bf16" } else { "f32" };
        let ck = if self.ckpt { "ckpt" } else { "full" };
        format!("{}:{}:{prec}:{ck}:{}", self.size, self.batch, self.labels)
    }
    fn estimate(&self) -> train::MemoryEstimate {
        let config = train::preset("mit-b0")
            .expect("mit-b0 is a preset")
            .with_num_labels(self.labels);
        MemoryPlan::predict(&PlanInput {
            kernels: self.path(),
            allocator: self.device().allocator(),
            loss: None,
            config: &config,
            height: self.size,
            width: self.size,
            batch: self.batch,
            precision: if self.bf16 {
                Precision::Bf16
            } else {
                Precision::F32
            },
            checkpointing: self.ckpt,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Measured {
    case: Case,
    heap_peak: u64,
    heap_before: u64,
    rss_peak: u64,
    /// CUDA and wgpu: CubeCL's pool after the measured step, bytes reserved and bytes in use.
    #[serde(default)]
    device_reserved: Option<u64>,
    #[serde(default)]
    device_in_use: Option<u64>,
    /// The median of the measured steps.
    step_s: f64,
    /// Steps before the measured ones, and measured steps (`None`: 1 and 1, rows from before).
    #[serde(default)]
    warmup: Option<usize>,
    #[serde(default)]
    steps: Option<usize>,
    /// Kernels CubeCL launched in the first measured step (`--launches`).
    #[serde(default)]
    launches: Option<u64>,
    /// The planner's peak for the case when it was measured (for readers of the JSON alone;
    /// the tables recompute it with the current planner).
    #[serde(default)]
    predicted_peak: Option<u64>,
}

/// What a measurement does besides the step: warm-up and measured steps, launch counting.
#[derive(Clone, Copy, Debug)]
struct Run {
    warmup: usize,
    steps: usize,
    launches: bool,
}

/// Kernel launches CubeCL logged so far (`--launches`): its profiling log at level `minimal`
/// writes one `Executing <kernel>` record per launch, from a logger thread of its own.
static LAUNCHES: AtomicU64 = AtomicU64::new(0);

struct LaunchCounter;

impl log::Log for LaunchCounter {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        if record.args().to_string().starts_with("Executing ") {
            LAUNCHES.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn flush(&self) {}
}

/// The launches counted once CubeCL's logger thread has caught up (no new record for 300 ms).
fn settled_launches() -> u64 {
    let mut last = LAUNCHES.load(Ordering::Relaxed);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let now = LAUNCHES.load(Ordering::Relaxed);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// CubeCL's settings for a GPU case, before its first tensor: the autotune cache in `cache`,
/// and with `launches` its profiling log (kernel names only) forwarded to [`LaunchCounter`].
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn configure_cubecl(cache: std::path::PathBuf, launches: bool) {
    use cubecl::config::cache::CacheConfig;
    use cubecl::config::profiling::ProfilingLogLevel;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut config = CubeClRuntimeConfig::default();
    config.autotune.cache = CacheConfig::File(cache);
    if launches {
        log::set_logger(&LaunchCounter).expect("no other logger in this process");
        log::set_max_level(log::LevelFilter::Info);
        config.profiling.logger.level = ProfilingLogLevel::Minimal;
        config.profiling.logger.log = Some(Default::default());
    }
    CubeClRuntimeConfig::set(config);
}

#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn configure_cubecl(_: std::path::PathBuf, _: bool) {}

fn vm_hwm() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

/// One training step exactly as the trainer runs it (without accumulation).
fn step<B: AutodiffBackend>(
    model: segformer::Segformer<B>,
    opt: &mut AdamW<B>,
    x: &Tensor<B, 4>,
    y: &Tensor<B, 3, Int>,
) -> segformer::Segformer<B> {
    let loss = model.loss(model.forward(x.clone()), y.clone());
    let _ = loss.clone().into_scalar();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    opt.step(6e-5, model, grads, 1.0).0
}

/// `run.steps` measured steps on `device` after `run.warmup`; `device_memory` reads the
/// device's memory pool (`(in use, reserved)`) after them, where there is one.
fn measure<B: AutodiffBackend>(
    case: &Case,
    run: Run,
    device: &B::Device,
    device_memory: &dyn Fn() -> Option<(u64, u64)>,
) -> Measured {
    let device = device.clone();
    B::seed(&device, 0);
    let config = train::preset("mit-b0")
        .unwrap()
        .with_num_labels(case.labels);
    let compute = case.bf16.then_some(FloatDType::BF16);
    let mut model = config
        .init::<B>(&device)
        .unwrap()
        .with_compute_dtype(compute)
        .with_kernels(case.kernels());
    let (b, s) = (case.batch, case.size);
    let x = Tensor::<B, 4>::random([b, 3, s, s], Distribution::Normal(0.0, 1.0), &device);
    let y = Tensor::<B, 3, Int>::random(
        [b, s, s],
        Distribution::Uniform(0.0, case.labels as f64),
        &device,
    );
    let mut opt = AdamW::<B>::new(AdamWConfig {
        lr: 6e-5,
        ..Default::default()
    });
    // Warm-up: allocates the AdamW moments (and on a GPU, times autotune's candidates).
    for _ in 0..run.warmup.max(1) {
        model = step(model, &mut opt, &x, &y);
    }
    let _ = B::sync(&device);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    // "5" resets the RSS high-water mark to the current RSS (Linux ≥ 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut times = Vec::with_capacity(run.steps.max(1));
    let mut launches = None;
    for i in 0..run.steps.max(1) {
        let counted = (run.launches && i == 0).then(settled_launches);
        let t = Instant::now();
        model = step(model, &mut opt, &x, &y);
        // GPU backends queue the optimizer step: the step ends when the device is done.
        let _ = B::sync(&device);
        times.push(t.elapsed().as_secs_f64());
        if let Some(start) = counted {
            launches = Some(settled_launches() - start);
        }
    }
    times.sort_by(f64::total_cmp);
    let step_s = times[times.len() / 2];
    let heap_peak = PEAK.load(Ordering::Relaxed) as u64;
    let rss_peak = vm_hwm();
    let pool = device_memory();
    drop(model);
    Measured {
        case: case.clone(),
        heap_peak,
        heap_before: before as u64,
        rss_peak,
        step_s,
        device_reserved: pool.map(|p| p.1),
        device_in_use: pool.map(|p| p.0),
        warmup: Some(run.warmup.max(1)),
        steps: Some(times.len()),
        launches,
        predicted_peak: Some(case.estimate().peak_bytes()),
    }
}

/// The steps on CUDA GPU 0 (burn-cuda, fused), with CubeCL's pool read after them.
#[cfg(feature = "cuda")]
fn measure_cuda(case: &Case, run: Run) -> Measured {
    use burn::backend::Cuda;
    let pool = || train::cuda_memory(0);
    let device = burn::backend::cuda::CudaDevice::new(0);
    if case.ckpt {
        measure::<Autodiff<Cuda, BalancedCheckpointing>>(case, run, &device, &pool)
    } else {
        measure::<Autodiff<Cuda>>(case, run, &device, &pool)
    }
}

#[cfg(not(feature = "cuda"))]
fn measure_cuda(_: &Case, _: Run) -> Measured {
    eprintln!("--cuda needs a build with `--features cuda`");
    std::process::exit(2)
}

/// The steps on wgpu adapter 0 (burn-wgpu, fused unless the case says not), with CubeCL's
/// pool read after them.
#[cfg(feature = "wgpu")]
fn measure_wgpu(case: &Case, run: Run) -> Measured {
    use burn::backend::Wgpu;
    use cubecl::Runtime;
    let adapter = segformer::wgpu_adapter(0).unwrap_or_else(|e| {
        eprintln!("--wgpu: {e}");
        std::process::exit(2)
    });
    eprintln!("wgpu adapter: {adapter}");
    if case.bf16 && !adapter.supports(burn::tensor::DType::BF16) {
        eprintln!("no bf16 on {adapter}: burn-wgpu has no bf16 arithmetic (WGSL has no bf16 type)");
        std::process::exit(3)
    }
    let device = adapter.device;
    // The pool's page sizes follow the largest buffer the adapter binds (CubeCL's SubSlices).
    let props = burn::backend::wgpu::WgpuRuntime::client(&device)
        .properties()
        .memory
        .clone();
    eprintln!(
        "largest page {} MiB, alignment {} B",
        props.max_page_size >> 20,
        props.alignment
    );
    let pool = || train::wgpu_memory(&device);
    use segformer::WgpuUnfused;
    match (case.fusion, case.ckpt) {
        (true, true) => measure::<Autodiff<Wgpu, BalancedCheckpointing>>(case, run, &device, &pool),
        (true, false) => measure::<Autodiff<Wgpu>>(case, run, &device, &pool),
        (false, true) => {
            measure::<Autodiff<WgpuUnfused, BalancedCheckpointing>>(case, run, &device, &pool)
        }
        (false, false) => measure::<Autodiff<WgpuUnfused>>(case, run, &device, &pool),
    }
}

#[cfg(not(feature = "wgpu"))]
fn measure_wgpu(_: &Case, _: Run) -> Measured {
    eprintln!("--wgpu needs a build with `--features wgpu`");
    std::process::exit(2)
}

fn child(case: &Case, run: Run, cache: &std::path::Path) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(case.cuda.then_some("--cuda"))
        .args(case.wgpu.then_some("--wgpu"))
        .args((case.wgpu && !case.fusion).then_some("--unfused"))
        .args(run.launches.then_some("--launches"))
        .args(["--warmup", &run.warmup.to_string()])
        .args(["--steps", &run.steps.to_string()])
        .arg("--autotune-cache")
        .arg(cache)
        .args(["--kernels", &case.kernels().to_string()])
        .args(["--one", &case.spec()])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

const MIB: f64 = 1024.0 * 1024.0;

fn header() -> String {
    format!(
        "| {:>12} | {:>5} | {:>5} | {:>4} | {:>4} | {:>6} | {:>11} | {:>9} | {:>13} | {:>7} | {:>7} | {:>8} | {:>8} |\n|{}",
        "kernels",
        "size",
        "batch",
        "prec",
        "ckpt",
        "labels",
        "heap MiB",
        "RSS MiB",
        "predicted MiB",
        "error %",
        "step s",
        "live MiB",
        "launches",
        "---|".repeat(13)
    )
}

/// A table row. CUDA and wgpu rows (kernels `cuda`, `wgpu`; `wgpu-unfused` without
/// burn-fusion) put CubeCL's reserved bytes in the heap column and the bytes still in use after
/// the step in the RSS column; the live column is the prediction without the pool's reserve
/// (the same as the prediction on the CPU).
fn row(m: &Measured) -> (String, f64) {
    let estimate = m.case.estimate();
    let p = estimate.peak_bytes() as f64;
    let gpu = m.case.cuda || m.case.wgpu;
    let (peak, second) = match (gpu, m.device_reserved, m.device_in_use) {
        (true, Some(reserved), Some(in_use)) => (reserved, in_use),
        _ => (m.heap_peak, m.rss_peak),
    };
    let err = 100.0 * (p - peak as f64) / peak as f64;
    let line = format!(
        "| {:>12} | {:>5} | {:>5} | {:>4} | {:>4} | {:>6} | {:>11.1} | {:>9.1} | {:>13.1} | {:>+7.1} | {:>7.2} | {:>8.1} | {:>8} |",
        if m.case.cuda {
            "cuda".to_string()
        } else if m.case.wgpu && m.case.fusion {
            "wgpu".to_string()
        } else if m.case.wgpu {
            "wgpu-unfused".to_string()
        } else {
            m.case.path().to_string()
        },
        m.case.size,
        m.case.batch,
        if m.case.bf16 { "bf16" } else { "f32" },
        if m.case.ckpt { "on" } else { "off" },
        m.case.labels,
        peak as f64 / MIB,
        second as f64 / MIB,
        p / MIB,
        err,
        m.step_s,
        estimate.live_peak_bytes() as f64 / MIB,
        m.launches.map_or("-".to_string(), |n| n.to_string())
    );
    (line, err)
}

/// The least-squares line `y ≈ scale · x + base` through `points`, and its worst relative
/// error in percent; `None` with fewer than two distinct `x`.
fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let scale = sxy / sxx;
    let base = my - scale * mx;
    let worst = points
        .iter()
        .map(|(x, y)| (100.0 * (scale * x + base - y) / y).abs())
        .fold(0.0, f64::max);
    Some((scale, base, worst))
}

fn default_grid(kernels: Kernels) -> Vec<Case> {
    let mut v = Vec::new();
    for size in [256, 512] {
        for batch in [1, 2, 4] {
            for bf16 in [false, true] {
                for ckpt in [false, true] {
                    for labels in [2, 150] {
                        v.push(Case {
                            size,
                            batch,
                            bf16,
                            ckpt,
                            labels,
                            fused: kernels == Kernels::Auto,
                            recompute: kernels != Kernels::Composed,
                            cuda: false,
                            wgpu: false,
                            fusion: false,
                        });
                    }
                }
            }
        }
    }
    v
}

/// The grid `--wgpu` runs by default: MiT-B0 at sizes a software adapter (lavapipe) steps
/// through in seconds to a minute, f32 (lavapipe has no bf16), with and without checkpointing.
fn wgpu_grid(kernels: Kernels) -> Vec<Case> {
    let mut v = Vec::new();
    for (size, batch) in [(64, 1), (128, 1), (128, 2), (192, 1), (256, 1), (256, 2)] {
        for ckpt in [false, true] {
            for labels in [2, 150] {
                v.push(Case {
                    size,
                    batch,
                    bf16: false,
                    ckpt,
                    labels,
                    fused: kernels == Kernels::Auto,
                    recompute: kernels != Kernels::Composed,
                    cuda: false,
                    wgpu: true,
                    fusion: true,
                });
            }
        }
    }
    v
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut json, mut md, mut replay, mut cases) = (None, None, None, Vec::new());
    let (mut cuda, mut wgpu, mut unfused, mut fit_pool) = (false, false, false, false);
    let mut kernels = Kernels::Auto;
    let mut run = Run {
        warmup: 1,
        steps: 1,
        launches: false,
    };
    let mut cache = std::env::temp_dir().join("segfit-bench-autotune");
    let count = |flag: &str, v: Option<String>| -> usize {
        v.and_then(|v| v.parse().ok())
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("{flag} takes a count of at least 1"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cuda" => cuda = true,
            "--wgpu" => wgpu = true,
            "--unfused" => unfused = true,
            "--fit-pool" => fit_pool = true,
            "--launches" => run.launches = true,
            "--warmup" => run.warmup = count("--warmup", args.next()),
            "--steps" => run.steps = count("--steps", args.next()),
            "--autotune-cache" => cache = args.next().expect("--autotune-cache DIR").into(),
            "--kernels" => {
                kernels = match args.next().as_deref() {
                    Some("auto") => Kernels::Auto,
                    Some("recompute") => Kernels::Recompute,
                    Some("composed") => Kernels::Composed,
                    other => panic!("--kernels takes auto, recompute or composed, found {other:?}"),
                }
            }
            "--one" => {
                let spec = args.next().expect("--one CASE");
                let case = Case {
                    cuda,
                    wgpu,
                    fusion: (cuda || wgpu) && !unfused,
                    ..Case::parse(&spec, kernels).expect("valid case")
                };
                if cuda || wgpu {
                    configure_cubecl(cache, run.launches);
                }
                let cpu = Default::default();
                let m = if case.cuda {
                    measure_cuda(&case, run)
                } else if case.wgpu {
                    measure_wgpu(&case, run)
                } else if case.ckpt {
                    measure::<Autodiff<Flex, BalancedCheckpointing>>(&case, run, &cpu, &|| None)
                } else {
                    measure::<Autodiff<Flex>>(&case, run, &cpu, &|| None)
                };
                println!("{}", serde_json::to_string(&m).unwrap());
                return;
            }
            "--predict" => {
                // Prediction only, nothing is run: for sizes this machine cannot measure.
                for spec in args.by_ref() {
                    let case = Case {
                        cuda,
                        wgpu,
                        ..Case::parse(&spec, kernels).expect("valid case")
                    };
                    println!("{spec}\n{}\n", case.estimate());
                }
                return;
            }
            "--json" => json = args.next(),
            "--md" => md = args.next(),
            "--replay" => replay = args.next(),
            c => cases.push(Case::parse(c, kernels).unwrap_or_else(|| {
                panic!("bad case `{c}`: use SIZE:BATCH:f32|bf16:ckpt|full:LABELS")
            })),
        }
    }
    assert!(
        !unfused || (wgpu && !cuda),
        "--unfused compares burn-wgpu without burn-fusion: use it with --wgpu"
    );
    let mut results: Vec<Measured> = match &replay {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path).expect("read --replay"))
            .expect("a --json file of this benchmark"),
        None => Vec::new(),
    };
    if replay.is_none() && cases.is_empty() {
        cases = if wgpu {
            wgpu_grid(kernels)
        } else {
            default_grid(kernels)
        };
    }
    for c in &mut cases {
        c.cuda = cuda;
        c.wgpu = wgpu;
        c.fusion = (cuda || wgpu) && !unfused;
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let fusion = if unfused {
        "without burn-fusion"
    } else {
        "burn-fusion + autotune"
    };
    let on = match (cuda, wgpu) {
        (true, _) => format!("burn-cuda 0.21 ({fusion}) on CUDA GPU 0"),
        (false, true) => format!("burn-wgpu 0.21 ({fusion}) on wgpu adapter 0"),
        (false, false) => format!("burn-flex 0.21 on {threads} threads"),
    };
    let against = if cuda || wgpu {
        "CubeCL's pool reserved after the step"
    } else {
        "measured heap peak"
    };
    println!(
        "MiT-B0 training step (fwd + loss + bwd + AdamW), {on}; peak after {} warm-up step(s), \
         median of {} step(s); error = predicted vs {against}",
        run.warmup, run.steps
    );
    println!("{}", header());
    let mut lines = Vec::new();
    let mut worst: f64 = 0.0;
    for m in &results {
        let (line, err) = row(m);
        println!("{line}");
        worst = worst.max(err.abs());
        lines.push(line);
    }
    for c in &cases {
        match child(c, run, &cache) {
            Ok(m) => {
                let (line, err) = row(&m);
                println!("{line}");
                worst = worst.max(err.abs());
                lines.push(line);
                results.push(m);
                // Save after every case: a long grid that is cut short keeps what it measured.
                if let Some(path) = &json {
                    let text = serde_json::to_string_pretty(&results).unwrap();
                    fsio::write_atomic(std::path::Path::new(path), text.as_bytes())
                        .expect("write --json");
                }
            }
            Err(e) => eprintln!("{}: failed: {e}", c.spec()),
        }
    }
    println!("worst |error| over {} cases: {worst:.1}%", results.len());
    if fit_pool {
        for fused in [true, false] {
            let points: Vec<(f64, f64)> = results
                .iter()
                .filter(|m| (m.case.cuda || m.case.wgpu) && m.case.fusion == fused)
                .filter_map(|m| {
                    Some((
                        m.case.estimate().live_peak_bytes() as f64,
                        m.device_reserved? as f64,
                    ))
                })
                .collect();
            if let Some((scale, base, worst)) = least_squares(&points) {
                println!(
                    "pool fit over {} {} rows: reserved ≈ {scale:.3} × live + {:.1} MiB \
                     (worst |error| {worst:.1}%)",
                    points.len(),
                    if fused { "fused" } else { "unfused" },
                    base / MIB
                );
            }
        }
    }
    if let Some(path) = md {
        let text = format!(
            "{}\n{}\n\nworst |error| over {} cases: {worst:.1}%\n",
            header(),
            lines.join("\n"),
            results.len()
        );
        fsio::write_atomic(std::path::Path::new(&path), text.as_bytes()).expect("write --md");
    }
}
