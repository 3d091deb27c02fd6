//! Speed benchmark: MiT-B0 (2 classes) training steps and inference on the CPU, the same
//! workload as `crates/train/bench/pytorch_ref.py` (random inputs, AdamW lr 6e-5), median of several
//! steps after one warm-up step.
//!
//! ```text
//! cargo run --release -p train --example bench_speed -- [--steps N] [--json FILE] [--pytorch PY] [CASE…]
//! CASE = train|infer:BATCH:SIZE:f32|bf16   (default: the issue's grid)
//! ```
//! With `--pytorch path/to/pytorch_ref.py` and a Python that has torch + transformers, each case
//! is also run there and the ratio printed: ratios, not absolute times, hold on a noisy machine.
//!
//! Each segfit case runs in a child process of its own (this binary with `--child CASE`), as
//! each PyTorch case does, so the peak RSS columns are the same window for both: the whole
//! process, start-up and model initialisation included (`VmHWM` here, `ru_maxrss` there).
//! The JSON records the load average before and after each case, so a figure taken while the
//! machine was busy says so.

use std::process::Command;
use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, FloatDType, Int, Tensor};
use segformer::SegformerConfig;
use train::{AdamW, AdamWConfig};

type B = Autodiff<Flex>;

struct Case {
    train: bool,
    batch: usize,
    size: usize,
    bf16: bool,
}

impl Case {
    fn parse(s: &str) -> Option<Case> {
        let p: Vec<&str> = s.split(':').collect();
        Some(Case {
            train: match *p.first()? {
                "train" => true,
                "infer" => false,
                _ => return None,
            },
            batch: p.get(1)?.parse().ok()?,
            size: p.get(2)?.parse().ok()?,
            bf16: *p.get(3).unwrap_or(&"f32") == "bf16",
        })
    }
    /// The command-line spelling, for the child process.
    fn arg(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            if self.train { "train" } else { "infer" },
            self.batch,
            self.size,
            if self.bf16 { "bf16" } else { "f32" }
        )
    }
    fn name(&self) -> String {
        format!(
            "{} b{} {}² {}",
            if self.train { "train" } else { "infer" },
            self.batch,
            self.size,
            if self.bf16 { "bf16" } else { "f32" }
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn run(case: &Case, steps: usize) -> f64 {
    let device = Default::default();
    B::seed(&device, 0);
    let compute = case.bf16.then_some(FloatDType::BF16);
    let mut model = SegformerConfig::mit_b0()
        .with_num_labels(2)
        .init::<B>(&device)
        .unwrap()
        .with_compute_dtype(compute);
    let (b, s) = (case.batch, case.size);
    let x = Tensor::<B, 4>::random([b, 3, s, s], Distribution::Normal(0.0, 1.0), &device);
    let y = Tensor::<B, 3, Int>::random([b, s, s], Distribution::Uniform(0.0, 2.0), &device);
    let mut opt = AdamW::<B>::new(AdamWConfig {
        lr: 6e-5,
        ..Default::default()
    });
    let mut times = Vec::new();
    for i in 0..=steps {
        let t = Instant::now();
        if case.train {
            let loss = model.loss(model.forward(x.clone()), y.clone());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            let (m, _) = opt.step(6e-5, model, grads, 1.0);
            model = m;
            // force the update to finish before the clock stops
            let _ = segformer::hf_state_dict(&model.valid()).len();
        } else {
            let inner = model.valid();
            let _ = inner.forward(x.clone().inner()).into_data();
        }
        if i > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    median(times)
}

/// The process's peak resident set (`VmHWM`), MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The 1-minute load average.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What one measured process printed: median seconds per step and its whole-process peak RSS.
struct Measured {
    median_s: f64,
    peak_rss_mib: Option<f64>,
}

/// The first JSON object line of a child's stdout.
fn json_line(stdout: &[u8]) -> Option<serde_json::Value> {
    let line = stdout
        .split(|&c| c == b'\n')
        .find(|l| l.starts_with(b"{"))?;
    serde_json::from_slice(line).ok()
}

/// Runs `case` in a fresh child process (this binary, `--child`).
fn segfit_child(case_arg: &str, steps: usize) -> Measured {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--child", case_arg, "--steps", &steps.to_string()])
        .output()
        .expect("spawn the benchmark child");
    assert!(
        out.status.success(),
        "case {case_arg} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_line(&out.stdout).expect("the child prints one JSON line");
    Measured {
        median_s: v["median_s"].as_f64().expect("median_s"),
        peak_rss_mib: v["peak_rss_mib"].as_f64(),
    }
}

fn pytorch(script: &str, case: &Case, steps: usize) -> Option<Measured> {
    let out = Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
        .arg(script)
        .args([
            if case.train { "train" } else { "infer" },
            &case.batch.to_string(),
            &case.size.to_string(),
            &case.size.to_string(),
            if case.bf16 { "bf16" } else { "fp32" },
            &steps.to_string(),
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "pytorch reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    let v = json_line(&out.stdout)?;
    Some(Measured {
        median_s: v["median_s"].as_f64()?,
        peak_rss_mib: v["peak_rss_mib"].as_f64(),
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut steps, mut json, mut py, mut cases) = (3usize, None, None, Vec::new());
    let mut child = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--steps" => steps = args.next().and_then(|v| v.parse().ok()).expect("--steps N"),
            "--child" => child = args.next(),
            "--json" => json = args.next(),
            "--pytorch" => py = args.next(),
            c => {
                cases.push(Case::parse(c).unwrap_or_else(|| {
                    panic!("bad case `{c}`: use train|infer:BATCH:SIZE:f32|bf16")
                }))
            }
        }
    }
    if let Some(c) = child {
        let case = Case::parse(&c).expect("child case");
        let median_s = run(&case, steps);
        println!(
            "{}",
            serde_json::json!({ "median_s": median_s, "peak_rss_mib": peak_rss_mib() })
        );
        return;
    }
    if cases.is_empty() {
        for c in [
            "train:2:512:f32",
            "train:2:512:bf16",
            "train:4:256:f32",
            "infer:1:512:f32",
            "infer:1:512:bf16",
        ] {
            cases.push(Case::parse(c).unwrap());
        }
    }
    let case_args: Vec<String> = cases.iter().map(Case::arg).collect();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "MiT-B0, 2 classes, burn-flex 0.21 on {threads} threads, median of {steps} steps after 1 warm-up"
    );
    println!(
        "{:<22} {:>10} {:>10} {:>12} {:>8} {:>11} {:>12}",
        "case", "segfit s", "img/s", "pytorch s", "ratio", "segfit RSS", "pytorch RSS"
    );
    let mib = |v: Option<f64>| v.map_or_else(|| "-".into(), |m| format!("{m:.0} MiB"));
    let mut rows = Vec::new();
    for (c, arg) in cases.iter().zip(&case_args) {
        let load_before = loadavg();
        let ours = segfit_child(arg, steps);
        let theirs = py.as_deref().and_then(|p| pytorch(p, c, steps));
        let ratio = theirs.as_ref().map(|t| t.median_s / ours.median_s);
        println!(
            "{:<22} {:>10.3} {:>10.2} {:>12} {:>8} {:>11} {:>12}",
            c.name(),
            ours.median_s,
            c.batch as f64 / ours.median_s,
            theirs
                .as_ref()
                .map(|t| format!("{:.3}", t.median_s))
                .unwrap_or_else(|| "-".into()),
            ratio
                .map(|r| format!("{r:.2}x"))
                .unwrap_or_else(|| "-".into()),
            mib(ours.peak_rss_mib),
            mib(theirs.as_ref().and_then(|t| t.peak_rss_mib)),
        );
        rows.push(serde_json::json!({
            "case": c.name(), "mode": if c.train { "train" } else { "infer" }, "batch": c.batch, "size": c.size,
            "precision": if c.bf16 { "bf16" } else { "f32" }, "median_s": ours.median_s, "images_per_s": c.batch as f64 / ours.median_s,
            "peak_rss_mib": ours.peak_rss_mib,
            "pytorch_median_s": theirs.as_ref().map(|t| t.median_s),
            "pytorch_peak_rss_mib": theirs.as_ref().and_then(|t| t.peak_rss_mib),
            "throughput_ratio_vs_pytorch": ratio,
            "loadavg_before": load_before, "loadavg_after": loadavg(),
        }));
    }
    if let Some(path) = json {
        let meta = serde_json::json!({
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "git_commit": Command::new("git").args(["rev-parse", "HEAD"]).output().ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
            "cpu": std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
                c.lines().find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string())
            }),
            "threads": threads,
            "steps": steps,
            "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        });
        let doc = serde_json::json!({ "meta": meta, "cases": rows });
        let text = serde_json::to_string_pretty(&doc).unwrap();
        fsio::write_atomic(std::path::Path::new(&path), text.as_bytes()).expect("write json");
    }
}
