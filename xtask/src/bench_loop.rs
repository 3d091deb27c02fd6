//! `cargo xtask bench speed --loop`: the end-to-end case of the speed benchmark. A whole
//! `segfit train` run against the sum of its parts, and against a plain PyTorch loop doing the
//! same work, in one invocation.
//!
//! The data is what a Sentinel-2 user has: `segfit prepare --synthetic --multispectral`
//! (4-band u16 GeoTIFF tiles of 256², PNG masks), 49 train and 12 val tiles. The run is
//! MiT-B0 from scratch at batch 4 with flips and rot90, 30 epochs (`--epochs N`), evaluation
//! every 5 epochs, default checkpoints and plots.
//!
//! What it reports:
//! - the wall time of the whole `segfit train` process (start-up, loading, training,
//!   evaluation, checkpoints, plots);
//! - the parts, measured by the step benchmark (`bench_speed`, release, in the same
//!   invocation): `bound = 1.05 × optimizer steps × train step time + evaluations × val
//!   batches × inference time`, and the ratio of the wall time to it;
//! - with `--pytorch`, `crates/train/bench/pytorch_loop.py` on the same data (under `$PYTHON`,
//!   default `python3`, with torch, transformers, tifffile and pillow): its process wall time,
//!   and segfit's throughput against it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::bench_predict::{Usage, build_release, measure};
use crate::bench_train::{cpu_model, git_commit, loadavg};
use crate::project_root;

/// Train and val tiles of the prepared set (the count is split 80/20 by a hash).
const TILES: usize = 61;
const SIZE: usize = 256;
const BATCH: usize = 4;
const EVAL_EVERY: usize = 5;

struct Flags {
    epochs: usize,
    pytorch: bool,
    json: Option<PathBuf>,
    keep: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Flags> {
    let mut flags = Flags {
        epochs: 30,
        pytorch: false,
        json: None,
        keep: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || crate::flag_value(&mut it, flag);
        match flag.as_str() {
            "--loop" => {}
            "--epochs" => {
                let v = value()?;
                flags.epochs = v
                    .parse()
                    .ok()
                    .filter(|e| (1..=1000).contains(e))
                    .with_context(|| format!("--epochs: expected 1 to 1000, found `{v}`"))?;
            }
            "--pytorch" => flags.pytorch = true,
            "--json" => flags.json = Some(value()?.into()),
            "--keep" => flags.keep = Some(value()?.into()),
            other => bail!(
                "unknown flag `{other}` for the loop case; expected --epochs N --pytorch \
                 --json FILE --keep DIR"
            ),
        }
    }
    Ok(flags)
}

/// The step benchmark's medians for the loop's shapes.
struct Parts {
    train_b4: f64,
    train_b1: f64,
    infer_b4: f64,
}

struct Report {
    epochs: usize,
    steps: u64,
    evals: usize,
    val_batches: usize,
    short_steps: u64,
    parts: Parts,
    segfit: Usage,
    best_miou: f64,
    pytorch: Option<(Usage, f64)>,
    load: (f64, f64),
}

impl Report {
    /// Steps × step time + evaluation forward passes.
    fn parts(&self) -> f64 {
        self.steps as f64 * self.parts.train_b4 + self.eval_seconds()
    }

    /// The bound: 1.05 × steps × step time + evaluation forward passes.
    fn bound(&self) -> f64 {
        1.05 * self.steps as f64 * self.parts.train_b4 + self.eval_seconds()
    }

    /// The same with each epoch's short last batch at its own (b1) step time.
    fn exact_parts(&self) -> f64 {
        let full = self.steps - self.short_steps;
        full as f64 * self.parts.train_b4
            + self.short_steps as f64 * self.parts.train_b1
            + self.eval_seconds()
    }

    fn eval_seconds(&self) -> f64 {
        (self.evals * self.val_batches) as f64 * self.parts.infer_b4
    }
}

pub fn run(args: &[String]) -> Result<()> {
    let flags = parse(args)?;
    let root = project_root();
    build_release(&root, &["--bin", "segfit", "-p", "segfit"])?;
    build_release(&root, &["--example", "bench_speed", "-p", "train"])?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release");
    let dir = match &flags.keep {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("segfit-bench-loop-{}", std::process::id())),
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let result = bench(&flags, &root, &dir, &target);
    if flags.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result?;
    print(&report);
    if let Some(path) = &flags.json {
        std::fs::write(path, to_json(&report, &root))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn bench(flags: &Flags, root: &Path, dir: &Path, target: &Path) -> Result<Report> {
    let segfit = target.join("segfit");
    let data = dir.join("data");
    let status = Command::new(&segfit)
        .args(["prepare", "--synthetic", "--multispectral", "--count"])
        .arg(TILES.to_string())
        .args(["--size", &SIZE.to_string(), "--out"])
        .arg(&data)
        .status()
        .context("running segfit prepare")?;
    ensure!(status.success(), "segfit prepare failed ({status})");
    let dataset: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("dataset.json")).context("reading dataset.json")?,
    )?;
    let split = |s: &str| dataset["splits"][s].as_u64().unwrap_or(0) as usize;
    let (train, val) = (split("train"), split("val"));
    ensure!(
        train > 0 && val > 0,
        "the prepared set has no train or val tiles"
    );
    let config = dir.join("loop.toml");
    std::fs::write(&config, config_toml(&data, flags.epochs))
        .with_context(|| format!("writing {}", config.display()))?;

    eprintln!("step benchmark: train b{BATCH} and b1, inference b{BATCH}, at {SIZE}²");
    let parts = step_times(&target.join("examples").join("bench_speed"), dir)?;

    let run = dir.join("run");
    let load_before = loadavg();
    eprintln!("segfit train: {} epochs on {train} tiles", flags.epochs);
    let usage = measure(
        Command::new(&segfit)
            .current_dir(root)
            .args(["train", "--config"])
            .arg(&config)
            .arg("--output")
            .arg(&run),
    )?;
    let (steps, evals, best_miou) = read_metrics(&run.join("metrics.jsonl"))?;
    let pytorch = if flags.pytorch {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let script = root.join("crates/train/bench/pytorch_loop.py");
        eprintln!("PyTorch loop ({python} {})", script.display());
        let out = dir.join("pytorch.json");
        let file = std::fs::File::create(&out)?;
        let usage = measure(
            Command::new(&python)
                .arg(&script)
                .arg(&data)
                .arg(dir.join("pt"))
                .args(["--epochs", &flags.epochs.to_string()])
                .args(["--batch", &BATCH.to_string()])
                .args(["--eval-every", &EVAL_EVERY.to_string()])
                .stdout(file),
        )?;
        let line: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&out)?
                .lines()
                .last()
                .context("the PyTorch loop printed nothing")?,
        )?;
        let miou = line["best_miou"].as_f64().unwrap_or(f64::NAN);
        ensure!(
            line["steps"].as_u64() == Some(steps),
            "the PyTorch loop took {} steps, segfit {steps}",
            line["steps"]
        );
        Some((usage, miou))
    } else {
        None
    };
    let epochs = flags.epochs;
    Ok(Report {
        epochs,
        steps,
        evals,
        val_batches: val.div_ceil(BATCH),
        short_steps: if train % BATCH == 0 { 0 } else { epochs as u64 },
        parts,
        segfit: usage,
        best_miou,
        pytorch,
        load: (load_before, loadavg()),
    })
}

/// The run's config: MiT-B0 from scratch, the user's augmentation, quiet output.
fn config_toml(data: &Path, epochs: usize) -> String {
    let flip = |name: &str| format!("[[augment.transforms]]\nname = \"{name}\"\np = 0.5\n\n");
    format!(
        "[model]\npreset = \"mit-b0\"\n\n[data]\nroot = \"{}\"\nsize = [{SIZE}, {SIZE}]\n\
         normalize = \"dataset\"\n\n{}{}{}[optimizer]\nlr = 6e-4\n\n[train]\nepochs = {epochs}\n\
         batch_size = {BATCH}\neval_every = {EVAL_EVERY}\nprogress = false\n",
        data.display(),
        flip("HorizontalFlip"),
        flip("VerticalFlip"),
        flip("RandomRotate90"),
    )
}

/// Medians of 5 steps per case from `bench_speed` (each case in a fresh process).
fn step_times(bench_speed: &Path, dir: &Path) -> Result<Parts> {
    let json = dir.join("steps.json");
    let status = Command::new(bench_speed)
        .args(["--steps", "5", "--json"])
        .arg(&json)
        .arg(format!("train:{BATCH}:{SIZE}:f32"))
        .arg(format!("train:1:{SIZE}:f32"))
        .arg(format!("infer:{BATCH}:{SIZE}:f32"))
        .status()
        .context("running bench_speed")?;
    ensure!(status.success(), "bench_speed failed ({status})");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let cases = v["cases"]
        .as_array()
        .context("bench_speed JSON without cases")?;
    let seconds = |i: usize| {
        cases
            .get(i)
            .and_then(|c| c["median_s"].as_f64())
            .with_context(|| format!("bench_speed JSON: case {i} without median_s"))
    };
    Ok(Parts {
        train_b4: seconds(0)?,
        train_b1: seconds(1)?,
        infer_b4: seconds(2)?,
    })
}

/// Optimizer steps, evaluations and the best val mIoU from the run's `metrics.jsonl`.
fn read_metrics(path: &Path) -> Result<(u64, usize, f64)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (mut steps, mut evals, mut best) = (0, 0, f64::NAN);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["kind"] == "epoch" {
            evals += 1;
            steps = v["step"].as_u64().unwrap_or(steps);
            let m = v["metrics"]["miou"].as_f64().unwrap_or(f64::NAN);
            best = if best.is_nan() { m } else { best.max(m) };
        }
    }
    ensure!(evals > 0, "{}: no epoch was logged", path.display());
    Ok((steps, evals, best))
}

fn print(r: &Report) {
    let p = &r.parts;
    println!(
        "\nend to end: MiT-B0, {} epochs, batch {BATCH}, {SIZE}² 4-band u16 GeoTIFF, eval every \
         {EVAL_EVERY} epochs ({} steps, {} evaluations of {} batches)",
        r.epochs, r.steps, r.evals, r.val_batches
    );
    println!(
        "step benchmark: train b{BATCH} {:.3} s, train b1 {:.3} s, inference b{BATCH} {:.3} s",
        p.train_b4, p.train_b1, p.infer_b4
    );
    println!(
        "segfit train: {:.1} s wall, peak RSS {:.0} MiB, best val mIoU {:.4}",
        r.segfit.seconds, r.segfit.peak_rss_mib, r.best_miou
    );
    println!(
        "  parts: steps × step time + eval forwards = {:.1} s (short last batches at b1: {:.1} s); \
         target 1.05 × steps + evals = {:.1} s; wall / target = {:.3} ({})",
        r.parts(),
        r.exact_parts(),
        r.bound(),
        r.segfit.seconds / r.bound(),
        if r.segfit.seconds <= r.bound() {
            "met"
        } else {
            "not met"
        }
    );
    if let Some((pt, miou)) = &r.pytorch {
        println!(
            "PyTorch loop: {:.1} s wall, peak RSS {:.0} MiB, best val mIoU {:.4}; segfit throughput \
             {:.2}× PyTorch's",
            pt.seconds,
            pt.peak_rss_mib,
            miou,
            pt.seconds / r.segfit.seconds
        );
    }
    println!("load average {:.2} → {:.2}", r.load.0, r.load.1);
}

fn to_json(r: &Report, root: &Path) -> String {
    let p = &r.parts;
    let pytorch = match &r.pytorch {
        Some((u, miou)) => format!(
            "{{\"wall_s\": {:.2}, \"peak_rss_mib\": {:.1}, \"best_miou\": {miou:.4}, \
             \"script\": \"crates/train/bench/pytorch_loop.py\"}}",
            u.seconds, u.peak_rss_mib
        ),
        None => "null".into(),
    };
    format!(
        "{{\n  \"command\": \"cargo xtask bench speed --loop{}\",\n  \"git_commit\": \"{}\",\n  \
         \"cpu\": \"{}\",\n  \"epochs\": {},\n  \"batch\": {BATCH},\n  \"size\": {SIZE},\n  \
         \"steps\": {},\n  \"eval_passes\": {},\n  \"val_batches\": {},\n  \
         \"step_s\": {{\"train_b{BATCH}\": {:.4}, \"train_b1\": {:.4}, \"infer_b{BATCH}\": {:.4}}},\n  \
         \"segfit\": {{\"wall_s\": {:.2}, \"peak_rss_mib\": {:.1}, \"best_miou\": {:.4}}},\n  \
         \"parts_s\": {:.2},\n  \"parts_exact_s\": {:.2},\n  \"target_s\": {:.2},\n  \
         \"wall_over_target\": {:.4},\n  \"pytorch\": {pytorch},\n  \"loadavg_before\": {:.2},\n  \
         \"loadavg_after\": {:.2}\n}}\n",
        if r.pytorch.is_some() {
            " --pytorch"
        } else {
            ""
        },
        git_commit(root),
        cpu_model(),
        r.epochs,
        r.steps,
        r.evals,
        r.val_batches,
        p.train_b4,
        p.train_b1,
        p.infer_b4,
        r.segfit.seconds,
        r.segfit.peak_rss_mib,
        r.best_miou,
        r.parts(),
        r.exact_parts(),
        r.bound(),
        r.segfit.seconds / r.bound(),
        r.load.0,
        r.load.1,
    )
}
