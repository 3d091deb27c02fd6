//! Memory benchmark: peak memory of REAL MiT training steps (forward, loss, backward, AdamW
//! step) on the CPU, next to what [`train::MemoryPlan`] predicts.
//!
//! ```text
//! cargo run --release -p train --example bench_memory -- [--kernels K] [--json FILE] [--md FILE] [--replay FILE] [CASE…]
//! cargo run --release -p train --example bench_memory -- [--kernels K] --predict CASE…   (breakdown only, runs nothing)
//! K = auto|recompute|composed: the models' `segformer::Kernels` (default auto)
//! CASE = SIZE:BATCH:f32|bf16:ckpt|full:LABELS   e.g. 512:2:f32:full:2   (default: a 256/512 grid)
//! cargo run --release -p train --features cuda --example bench_memory -- --cuda CASE…
//! cargo run --release -p train --features wgpu --example bench_memory -- --wgpu [CASE…]
//! ```
//! `--cuda` runs the steps on CUDA GPU 0 (burn-cuda), `--wgpu` on wgpu adapter 0 (burn-wgpu;
//! lavapipe where there is no GPU; its default grid is the small sizes lavapipe runs in
//! seconds), and both report CubeCL's device memory pool after the measured step: bytes
//! reserved (the pool keeps what it reserved, so this bounds the step's peak from above; the
//! figure to set beside `torch.cuda.max_memory_reserved`) and bytes still in use; the error
//! column compares the prediction (pool reserve included) with the reserved bytes, and the
//! live column gives the planner's live-byte prediction without the pool term.
//! Each case runs in a fresh child process (so neither the heap nor the RSS high-water mark
//! carries over from another case): one warm-up step (it allocates the AdamW moments), then
//! the peak live heap bytes (a counting global allocator, reset before the measured step) and
//! the process peak RSS (`VmHWM`, reset through `/proc/self/clear_refs` before the step) of
//! one measured step. `--replay FILE` re-prints the table of a saved `--json` run with the
//! current predictor (measurements are never recomputed from predictions).

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    step_s: f64,
}

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

/// One measured step on `device`; `device_memory` reads the device's memory pool
/// (`(in use, reserved)`) after it, where there is one.
fn measure<B: AutodiffBackend>(
    case: &Case,
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
    model = step(model, &mut opt, &x, &y); // warm-up: allocates the AdamW moments
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    // "5" resets the RSS high-water mark to the current RSS (Linux ≥ 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let t = Instant::now();
    let model = step(model, &mut opt, &x, &y);
    // GPU backends queue the optimizer step: the step ends when the device is done.
    let _ = B::sync(&device);
    let step_s = t.elapsed().as_secs_f64();
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
    }
}

/// One measured step on CUDA GPU 0, with CubeCL's pool read after it.
#[cfg(feature = "cuda")]
fn measure_cuda(case: &Case) -> Measured {
    use burn::backend::Cuda;
    let pool = || train::cuda_memory(0);
    let device = burn::backend::cuda::CudaDevice::new(0);
    if case.ckpt {
        measure::<Autodiff<Cuda, BalancedCheckpointing>>(case, &device, &pool)
    } else {
        measure::<Autodiff<Cuda>>(case, &device, &pool)
    }
}

#[cfg(not(feature = "cuda"))]
fn measure_cuda(_: &Case) -> Measured {
    eprintln!("--cuda needs a build with `--features cuda`");
    std::process::exit(2)
}

/// One measured step on wgpu adapter 0, with CubeCL's pool read after it.
#[cfg(feature = "wgpu")]
fn measure_wgpu(case: &Case) -> Measured {
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
    if case.ckpt {
        measure::<Autodiff<Wgpu, BalancedCheckpointing>>(case, &device, &pool)
    } else {
        measure::<Autodiff<Wgpu>>(case, &device, &pool)
    }
}

#[cfg(not(feature = "wgpu"))]
fn measure_wgpu(_: &Case) -> Measured {
    eprintln!("--wgpu needs a build with `--features wgpu`");
    std::process::exit(2)
}

fn child(case: &Case) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(case.cuda.then_some("--cuda"))
        .args(case.wgpu.then_some("--wgpu"))
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
        "| {:>9} | {:>5} | {:>5} | {:>4} | {:>4} | {:>6} | {:>11} | {:>9} | {:>13} | {:>7} | {:>7} | {:>8} |\n|{}",
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
        "---|".repeat(12)
    )
}

/// A table row. CUDA and wgpu rows (kernels `cuda`, `wgpu`) put CubeCL's reserved bytes in the
/// heap column and the bytes still in use after the step in the RSS column; the live column is
/// the prediction without the pool's reserve (the same as the prediction on the CPU).
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
        "| {:>9} | {:>5} | {:>5} | {:>4} | {:>4} | {:>6} | {:>11.1} | {:>9.1} | {:>13.1} | {:>+7.1} | {:>7.2} | {:>8.1} |",
        if m.case.cuda {
            "cuda".to_string()
        } else if m.case.wgpu {
            "wgpu".to_string()
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
        estimate.live_peak_bytes() as f64 / MIB
    );
    (line, err)
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
                });
            }
        }
    }
    v
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut json, mut md, mut replay, mut cases) = (None, None, None, Vec::new());
    let (mut cuda, mut wgpu) = (false, false);
    let mut kernels = Kernels::Auto;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cuda" => cuda = true,
            "--wgpu" => wgpu = true,
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
                    ..Case::parse(&spec, kernels).expect("valid case")
                };
                let cpu = Default::default();
                let m = if case.cuda {
                    measure_cuda(&case)
                } else if case.wgpu {
                    measure_wgpu(&case)
                } else if case.ckpt {
                    measure::<Autodiff<Flex, BalancedCheckpointing>>(&case, &cpu, &|| None)
                } else {
                    measure::<Autodiff<Flex>>(&case, &cpu, &|| None)
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
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let on = match (cuda, wgpu) {
        (true, _) => "burn-cuda 0.21 on CUDA GPU 0".to_string(),
        (false, true) => "burn-wgpu 0.21 on wgpu adapter 0".to_string(),
        (false, false) => format!("burn-flex 0.21 on {threads} threads"),
    };
    let against = if cuda || wgpu {
        "CubeCL's pool reserved after the step"
    } else {
        "measured heap peak"
    };
    println!(
        "MiT-B0 training step (fwd + loss + bwd + AdamW), {on}; \
         peak after 1 warm-up step; error = predicted vs {against}"
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
        match child(c) {
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
