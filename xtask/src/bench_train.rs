//! `cargo xtask bench train [--json FILE] [--keep DIR]`: the README's `cargo xtask train` figure,
//! measured and recorded.
//!
//! Prepares the synthetic set when it is missing, builds `segfit` as `cargo xtask train` does
//! (dev profile, dependencies at opt-level 3), then runs the default run
//! (`configs/synthetic-quick.toml`) into a fresh directory, timed from outside: the wall time of
//! the `segfit train` process and its peak RSS (`wait4`), and from the run's own
//! `metrics.jsonl` each epoch's validation mIoU and when it was reached. Then
//! `segfit eval --tta d4` on the run's best checkpoint: val mIoU without and with test-time
//! augmentation (the README's TTA figure). The JSON keeps the load average before and after, so
//! a figure taken on a busy machine says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::bench_predict::measure;
use crate::{prepare, project_root, train};

pub fn run(args: &[String]) -> Result<()> {
    let (mut json, mut keep) = (None::<PathBuf>, None::<PathBuf>);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || crate::flag_value(&mut it, flag).map(PathBuf::from);
        match flag.as_str() {
            "--json" => json = Some(value()?),
            "--keep" => keep = Some(value()?),
            other => bail!("unknown flag `{other}`; expected --json FILE --keep DIR"),
        }
    }
    let root = project_root();
    if !root
        .join(prepare::SYNTHETIC_OUT)
        .join("dataset.json")
        .is_file()
    {
        prepare::run(&[])?;
    }
    let segfit = crate::segfit::build()?;
    let scratch = std::env::temp_dir().join(format!("segfit-bench-train-{}", std::process::id()));
    let out = keep.clone().unwrap_or_else(|| scratch.clone());
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let load_before = loadavg();
    let usage = measure(
        Command::new(&segfit)
            .current_dir(&root)
            .args(["train", "--config", train::DEFAULT_CONFIG, "--output"])
            .arg(&out),
    )?;
    let load_after = loadavg();
    let eval = Command::new(&segfit)
        .current_dir(&root)
        .args([
            "eval",
            "--tta",
            "d4",
            "--json",
            "--data",
            prepare::SYNTHETIC_OUT,
            "--model",
        ])
        .arg(&out)
        .output()
        .context("running segfit eval --tta d4")?;
    if !eval.status.success() {
        bail!(
            "segfit eval --tta d4 failed: {}",
            String::from_utf8_lossy(&eval.stderr)
        );
    }
    let eval: serde_json::Value =
        serde_json::from_slice(&eval.stdout).context("segfit eval --json printed no JSON")?;
    let miou = |v: &serde_json::Value| v["miou"].as_f64().unwrap_or(f64::NAN);
    let (plain, tta) = (miou(&eval["metrics"]), miou(&eval["tta"]["metrics"]));
    println!(
        "segfit eval --tta d4 on the best checkpoint: val mIoU {plain:.4} → {tta:.4} with TTA"
    );
    let epochs = epochs(&out.join("metrics.jsonl"))?;
    let best = epochs
        .iter()
        .max_by(|a, b| a.miou.total_cmp(&b.miou))
        .context("the run logged no epoch")?;
    let passes = epochs.iter().find(|e| e.miou >= 0.8);
    println!(
        "cargo xtask train ({}): {:.1} s wall, peak RSS {:.0} MiB; best val mIoU {:.4} (pixel accuracy {:.4}) at epoch {}; \
         mIoU ≥ 0.8 from epoch {} ({:.1} s into training); load average {:.2} → {:.2}",
        train::DEFAULT_CONFIG,
        usage.seconds,
        usage.peak_rss_mib,
        best.miou,
        best.pixel_accuracy,
        best.epoch,
        passes.map_or("-".into(), |e| e.epoch.to_string()),
        passes.map_or(f64::NAN, |e| e.seconds_total),
        load_before,
        load_after,
    );
    if let Some(path) = json {
        let rows: Vec<String> = epochs
            .iter()
            .map(|e| {
                format!(
                    "    {{\"epoch\": {}, \"miou\": {:.4}, \"pixel_accuracy\": {:.4}, \"seconds_total\": {:.1}}}",
                    e.epoch, e.miou, e.pixel_accuracy, e.seconds_total
                )
            })
            .collect();
        let text = format!(
            "{{\n  \"command\": \"cargo xtask bench train\",\n  \"config\": \"{}\",\n  \"git_commit\": \"{}\",\n  \
             \"cpu\": \"{}\",\n  \"threads\": {},\n  \"wall_s\": {:.1},\n  \"peak_rss_mib\": {:.1},\n  \
             \"best_miou\": {:.4},\n  \"best_pixel_accuracy\": {:.4},\n  \"loadavg_before\": {:.2},\n  \
             \"loadavg_after\": {:.2},\n  \"eval_miou\": {:.4},\n  \"eval_tta_d4_miou\": {:.4},\n  \
             \"epochs\": [\n{}\n  ]\n}}\n",
            train::DEFAULT_CONFIG,
            git_commit(&root),
            cpu_model(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            usage.seconds,
            usage.peak_rss_mib,
            best.miou,
            best.pixel_accuracy,
            load_before,
            load_after,
            plain,
            tta,
            rows.join(",\n"),
        );
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    Ok(())
}

/// One `epoch` record of `metrics.jsonl`.
struct Epoch {
    epoch: u64,
    miou: f64,
    pixel_accuracy: f64,
    /// Seconds since training started, at the end of this epoch's evaluation.
    seconds_total: f64,
}

fn epochs(path: &Path) -> Result<Vec<Epoch>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (mut out, mut total) = (Vec::new(), 0.0);
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}: `{line}`", path.display()))?;
        if v["kind"] != "epoch" {
            continue;
        }
        let num = |v: &serde_json::Value, key: &str| {
            v.as_f64()
                .with_context(|| format!("{}: epoch record without `{key}`", path.display()))
        };
        // `seconds` is the epoch's own time (training and evaluation).
        total += num(&v["seconds"], "seconds")?;
        out.push(Epoch {
            epoch: v["epoch"].as_u64().unwrap_or(0),
            miou: num(&v["metrics"]["miou"], "metrics.miou")?,
            pixel_accuracy: num(&v["metrics"]["pixel_accuracy"], "metrics.pixel_accuracy")?,
            seconds_total: total,
        });
    }
    Ok(out)
}

pub(crate) fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().replace('"', "'"))
        })
        .unwrap_or_default()
}

pub(crate) fn git_commit(root: &Path) -> String {
    Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
