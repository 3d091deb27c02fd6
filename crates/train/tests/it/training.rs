//! End-to-end behaviour of the loop on the synthetic dataset: it learns, memory stays flat,
//! and a run killed with SIGKILL mid-epoch and resumed (with random augmentation) ends
//! bit-identical to an uninterrupted one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use train::{RunOptions, TrainConfig};

use crate::common::{alone, test_name};

type B = Autodiff<Flex>;

/// A synthetic dataset of `count` `size`² tiles under `dir/data` (made once per `dir`).
pub(crate) fn dataset(dir: &Path, count: usize, size: usize) -> PathBuf {
    let root = dir.join("data");
    if !root.join("dataset.json").exists() {
        let opts = tiles::SyntheticOptions {
            count,
            size,
            seed: 5,
            out: root.clone(),
            ..Default::default()
        };
        tiles::prepare_synthetic(&opts).unwrap();
    }
    root
}

/// A small mit-tiny run on `root` at 64², with two parameter groups (head ×10) and `extra`
/// overrides.
pub(crate) fn config(root: &Path, extra: &[&str]) -> TrainConfig {
    let text = format!(
        "[model]\npreset = \"mit-tiny\"\n[data]\nroot = {:?}\nsize = [64, 64]\n[optimizer]\nlr = 2e-3\nhead_lr_mult = 10.0\n\
         [train]\nprogress = false\nworkers = 2\nbatch_size = 4\nseed = 11\n",
        root.to_str().unwrap()
    );
    let overrides: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    TrainConfig::from_toml_str(&text, &overrides).unwrap()
}

fn weights(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("model.safetensors")).unwrap()
}

#[test]
fn learns_the_synthetic_paddies() {
    alone!(learns_the_synthetic_paddies);
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path(), 48, 64);
    let cfg = config(
        &root,
        &[
            "train.epochs=8",
            "augment.transforms=[{ name = \"HorizontalFlip\", p = 0.5 }]",
        ],
    );
    let run = tmp.path().join("run");
    let summary =
        train::train::<B>(&cfg, &RunOptions::new(run.clone()), &Default::default()).unwrap();
    let eval = summary.last_eval.expect("evaluated");
    // Majority-class baseline: predict the most frequent class everywhere.
    let rows = eval.confusion.rows();
    let total: u64 = rows.iter().flatten().sum();
    let majority = rows.iter().map(|r| r.iter().sum::<u64>()).max().unwrap() as f64 / total as f64;
    let baseline_miou = majority / 2.0; // IoU of the majority class; the other class scores 0
    eprintln!(
        "val mIoU {:.3} (majority baseline {:.3}), pixel acc {:.3}",
        eval.metrics.miou, baseline_miou, eval.metrics.pixel_accuracy
    );
    assert!(
        eval.metrics.miou > baseline_miou + 0.2,
        "mIoU {} vs baseline {}",
        eval.metrics.miou,
        baseline_miou
    );
    for f in [
        "config.toml",
        "metrics.jsonl",
        "metrics.csv",
        "plots/loss.png",
        "plots/miou.png",
        "plots/overlays.png",
    ] {
        assert!(run.join(f).is_file(), "{f} written");
    }
    for c in ["last", "best"] {
        let d = run.join("checkpoints").join(c);
        for f in [
            "config.json",
            "model.safetensors",
            "optimizer.safetensors",
            "trainer_state.json",
        ] {
            assert!(d.join(f).is_file(), "{c}/{f}");
        }
    }
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows[0],
        "epoch,step,train_loss,val_loss,miou,pixel_accuracy,mean_f1,iou_outer,iou_rice_paddy"
    );
    assert_eq!(rows.len(), 1 + 8, "one row per epoch");
    let last_miou: f64 = rows[8].split(',').nth(4).unwrap().parse().unwrap();
    assert!(
        (last_miou - eval.metrics.miou).abs() < 1e-9,
        "csv mIoU {last_miou} vs {}",
        eval.metrics.miou
    );
    // the exported best checkpoint is an HF directory that loads back
    let (m, report) =
        segformer::load_hf_dir::<Flex>(&run.join("checkpoints/best"), &Default::default()).unwrap();
    assert_eq!(m.num_labels(), 2);
    assert!(report.is_exact(), "{report}");
    let epochs = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"epoch\"") && l.contains("\"kind\":\"epoch\""))
        .count();
    assert_eq!(epochs, 8);
}

/// Peak resident set size of this process (VmHWM), from /proc.
fn peak_rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

const MEMORY_CHILD_ENV: &str = "SEGFIT_MEMORY_CHILD";

/// One training run of `<steps>` steps in its own process, printing its peak RSS; started by
/// `memory_does_not_grow_across_steps`. Does nothing when run on its own.
#[test]
#[ignore]
fn memory_child() {
    let Ok(spec) = std::env::var(MEMORY_CHILD_ENV) else {
        return;
    };
    let (steps, dir) = spec.split_once(':').unwrap();
    let dir = PathBuf::from(dir);
    let cfg = config(
        &dir.join("data"),
        &[
            &format!("train.max_steps={steps}"),
            "train.epochs=100",
            "train.eval_every=1000",
            "train.workers=1",
        ],
    );
    let opts = RunOptions::new(dir.join(format!("run{steps}")));
    train::train::<B>(&cfg, &opts, &Default::default()).unwrap();
    println!("PEAK_RSS={}", peak_rss_bytes());
}

#[test]
fn memory_does_not_grow_across_steps() {
    // A loop that kept graphs alive (summing loss tensors without backward) holds every step's
    // activations until the run ends, so its peak grows with the step count; ours must not.
    // Each run is its own process: the peak RSS then covers that run alone, not the other
    // tests of this binary training at the same time.
    let tmp = tempfile::tempdir().unwrap();
    dataset(tmp.path(), 16, 64);
    let peak = |steps: usize| -> f64 {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                test_name(module_path!(), "memory_child").as_str(),
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                MEMORY_CHILD_ENV,
                format!("{steps}:{}", tmp.path().display()),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.split("PEAK_RSS=").nth(1))
            .unwrap_or_else(|| panic!("child printed no peak: {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let (a, b) = (peak(5), peak(40));
    eprintln!(
        "peak RSS of a 5-step run {:.1} MiB, of a 40-step run {:.1} MiB",
        a / 1048576.0,
        b / 1048576.0
    );
    assert!(
        b < a * 1.15 + 16.0 * 1048576.0,
        "peak RSS grew from {a} to {b}"
    );
}

const CHILD_ENV: &str = "SEGFIT_RESUME_CHILD";

/// Train samples of the resume runs: 32 of 40 (16 micro-batches, 8 optimizer steps per epoch),
/// so a kill after the second step lands well inside the first epoch.
const RESUME_SAMPLES: usize = 40;
const RESUME_BATCH: usize = 2;

fn resume_config(root: &Path) -> TrainConfig {
    config(
        root,
        &[
            "train.epochs=2",
            "train.checkpoint_every=1",
            &format!("train.batch_size={RESUME_BATCH}"),
            "train.accumulation_steps=2",
            // Random flips, rotations and photometric changes: every sample's augmentation
            // must come back identical after the resume, not restart its random stream.
            "augment.transforms=[{ name = \"HorizontalFlip\", p = 0.5 }, { name = \"VerticalFlip\", p = 0.5 }, \
             { name = \"RandomRotate90\", p = 0.5 }, { name = \"RandomBrightnessContrast\", p = 0.5 }, \
             { name = \"GaussNoise\", p = 0.5 }]",
        ],
    )
}

/// A training run in its own process (the backend RNG that dropout draws from is per process,
/// and the other tests in this binary train concurrently). `SEGFIT_RESUME_CHILD` is
/// `<mode>:<dir>` with mode `fresh` or `resume`. Does nothing when run on its own.
#[test]
#[ignore]
fn resume_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (mode, dir) = spec.split_once(':').unwrap();
    let dir = PathBuf::from(dir);
    let cfg = resume_config(&dir.parent().unwrap().join("data"));
    let opts = RunOptions {
        run_dir: dir,
        resume: mode == "resume",
        kernels: segformer::Kernels::Auto,
    };
    train::train::<B>(&cfg, &opts, &Default::default()).unwrap();
}

fn child(mode: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test_name(module_path!(), "resume_child").as_str(),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{mode}:{}", dir.display()))
        .spawn()
        .unwrap()
}

#[test]
fn killed_run_resumes_bit_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path(), RESUME_SAMPLES, 64);
    let batches_per_epoch = tiles::SegDataset::open(&root, "train")
        .unwrap()
        .len()
        .div_ceil(RESUME_BATCH);
    let mid_epoch = |v: &serde_json::Value| {
        let b = v["next_batch"].as_u64().unwrap_or(0) as usize;
        0 < b && b < batches_per_epoch
    };

    // The uninterrupted reference.
    let full = tmp.path().join("full");
    assert!(child("fresh", &full).wait().unwrap().success());

    // The same run, SIGKILLed once it has checkpointed a few steps inside the first epoch,
    // then resumed.
    let killed = tmp.path().join("killed");
    let mut c = child("fresh", &killed);
    let state = killed.join("checkpoints/last/trainer_state.json");
    let read_state = || -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(v) = read_state()
            && v["step"].as_u64().unwrap_or(0) >= 2
            && mid_epoch(&v)
        {
            break;
        }
        assert!(
            c.try_wait().unwrap().is_none(),
            "child finished before it could be killed"
        );
        assert!(Instant::now() < deadline, "child never checkpointed");
        std::thread::sleep(Duration::from_millis(5));
    }
    c.kill().unwrap(); // SIGKILL on Unix
    c.wait().unwrap();
    // What the resume starts from is the checkpoint on disk once the child is dead (it may
    // have written more after the poll above saw its state).
    let killed_at = read_state().expect("a checkpoint survives the kill");
    eprintln!(
        "killed at epoch {}, batch {} of {batches_per_epoch}, step {}",
        killed_at["epoch"], killed_at["next_batch"], killed_at["step"]
    );
    assert!(
        mid_epoch(&killed_at),
        "the kill must land mid-epoch (0 < next_batch < {batches_per_epoch}): {killed_at}"
    );
    assert!(child("resume", &killed).wait().unwrap().success());

    let resumed: serde_json::Value = serde_json::from_slice(
        &std::fs::read(killed.join("checkpoints/last/trainer_state.json")).unwrap(),
    )
    .unwrap();
    let full_state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(full.join("checkpoints/last/trainer_state.json")).unwrap(),
    )
    .unwrap();
    assert!(resumed["step"].as_u64() > killed_at["step"].as_u64());
    assert_eq!(resumed["step"], full_state["step"], "steps of the two runs");
    assert!(
        weights(&killed.join("checkpoints/last")) == weights(&full.join("checkpoints/last")),
        "resumed weights differ from the uninterrupted run"
    );
    assert!(
        std::fs::read(killed.join("checkpoints/last/optimizer.safetensors")).unwrap()
            == std::fs::read(full.join("checkpoints/last/optimizer.safetensors")).unwrap(),
        "resumed optimizer state differs"
    );
}
