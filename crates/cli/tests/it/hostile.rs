//! Hostile values (huge, zero, negative, NaN/inf, absurd sizes) of every config key and every
//! flag that takes a count or a size, through the real binary: each must end as one error
//! line naming the key or flag, with status 1, never a signal or a panic (issue #17 item 6:
//! `train.workers = 9999999999`, `train.prefetch = 9999999999`, `data.size = [100000, 100000]`
//! and `prepare --synthetic --size 60000` used to abort the process). Every case fails in
//! validation, before any data is read or any training starts.

use std::path::{Path, PathBuf};
use std::process::Command;

fn segfit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_segfit"))
        .args(args)
        .output()
        .expect("segfit runs")
}

/// Runs segfit and asserts a clean failure naming `want`: status 1 (so no signal), one
/// `error:` line, no panic.
fn rejects(args: &[&str], want: &str) {
    let out = segfit(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "segfit {args:?} should fail with status 1 (signal: {:?}); stderr:\n{stderr}",
        std::os::unix::process::ExitStatusExt::signal(&out.status)
    );
    assert!(
        stderr.starts_with("error: ") && !stderr.contains("panicked"),
        "segfit {args:?}:\n{stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "segfit {args:?}: one line expected:\n{stderr}"
    );
    assert!(
        stderr.contains(want),
        "segfit {args:?}: the error should name `{want}`:\n{stderr}"
    );
}

/// The tiny HF fixture (3 classes, 3 bands).
fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures/segformer-tiny")
}

/// A run config whose data root does not exist: every case must fail before it is read.
fn config(dir: &Path) -> PathBuf {
    let path = dir.join("hostile.toml");
    std::fs::write(
        &path,
        format!(
            "[model]\npreset = \"mit-b0\"\n[data]\nroot = {:?}\nsize = [256, 256]\n\
             [train]\nepochs = 1\nprogress = false\n",
            dir.join("no-data").to_str().unwrap()
        ),
    )
    .unwrap();
    path
}

#[test]
fn hostile_config_values_name_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = dir.path().join("run");
    let train = |sets: &[&str], want: &str| {
        let mut args = vec![
            "train",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        rejects(&args, want);
        assert!(!out.exists(), "{sets:?} wrote a run directory");
    };
    const HUGE: &str = "9999999999";
    for key in [
        "train.workers",
        "train.prefetch",
        "train.batch_size",
        "train.accumulation_steps",
        "train.epochs",
        "train.eval_every",
        "train.log_every",
        "train.overlay_samples",
        "train.max_bad_steps",
        "memory.effective_batch",
    ] {
        // Logging every 10^10 steps means never: the one key without an upper bound.
        if key != "train.log_every" {
            train(&[&format!("{key}={HUGE}")], key);
        }
        train(&[&format!("{key}=-1")], key.rsplit('.').next().unwrap());
        if key != "train.overlay_samples" {
            train(&[&format!("{key}=0")], key);
        }
    }
    // Within the static bounds, but beyond this machine (cores, memory).
    train(&["train.workers=1000"], "train.workers");
    train(&["data.size=[100000, 100000]"], "data.size");
    train(
        &["data.size=[100000, 100000]"],
        "the largest size that fits is",
    );
    train(&["train.batch_size=60000"], "train.batch_size");
    train(
        &[
            "data.size=[1024, 1024]",
            "train.batch_size=1",
            "train.prefetch=4096",
        ],
        "train.prefetch",
    );
    for size in [
        "[0, 0]",
        "[-1, 5]",
        "[9999999999, 9999999999]",
        "[nan, 3]",
        "[256]",
    ] {
        train(&[&format!("data.size={size}")], "size");
    }
    for (key, values) in [
        ("model.drop_path_rate", &["nan", "inf", "-1", "2"][..]),
        ("model.classifier_dropout_prob", &["nan", "1.5"]),
        ("optimizer.lr", &["nan", "-1", "inf", "0"]),
        ("optimizer.eps", &["nan", "0", "-inf"]),
        ("optimizer.weight_decay", &["nan", "-1"]),
        ("optimizer.head_lr_mult", &["nan", "0"]),
        ("optimizer.clip_grad_norm", &["nan", "-1"]),
        ("schedule.warmup_ratio", &["nan", "2"]),
        ("schedule.power", &["nan", "-1"]),
        ("schedule.min_lr", &["-1", "inf"]),
        ("loss.gamma", &["nan", "-1"]),
        ("loss.smooth", &["nan", "-1"]),
        ("train.early_stopping.min_delta", &["nan"]),
        ("train.early_stopping.patience", &["0"]),
    ] {
        for v in values {
            train(&[&format!("{key}={v}")], key);
        }
    }
    train(&["optimizer.betas=[nan, 0.999]"], "optimizer.betas");
    train(&["optimizer.betas=[0.9, 1.5]"], "optimizer.betas");
    train(&["memory.budget=\"-1\""], "memory.budget");
    train(&["memory.budget=\"nan\""], "memory.budget");
    train(&["memory.budget=\"0\""], "memory.budget");
    train(&["memory.budget=\"99999999999999TiB\""], "memory.budget");
    // The augmentation pipeline's parameters are checked with the config.
    train(
        &["augment.transforms=[{name = \"RandomCrop\", height = 100000, width = 100000}]"],
        "transforms[0].height",
    );
    train(
        &["augment.transforms=[{name = \"RandomCrop\", height = 0, width = 64}]"],
        "transforms[0].height",
    );
    train(
        &["augment.transforms=[{name = \"HorizontalFlip\", p = nan}]"],
        "transforms[0].p",
    );
    // The flags that set [memory].
    let flags = |extra: &[&str], want: &str| {
        let mut args = vec!["train", "--config", cfg.to_str().unwrap()];
        args.extend(["--output", out.to_str().unwrap()]);
        args.extend(extra);
        rejects(&args, want);
    };
    for v in ["0", HUGE] {
        flags(
            &["--memory-budget", "1GiB", "--effective-batch", v],
            "effective_batch",
        );
    }
    flags(&["--effective-batch=-1"], "--effective-batch");
    for v in ["-1", "nan", "inf", "0", "1e400"] {
        flags(&[&format!("--memory-budget={v}")], "memory.budget");
    }
}

#[test]
fn hostile_flags_name_their_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = format!("{d}/prepared");
    const HUGE: &str = "9999999999";
    // prepare --synthetic
    let synthetic = |extra: &[&str], want: &str| {
        let mut args = vec!["prepare", "--synthetic", "--out", &out];
        args.extend(extra);
        rejects(&args, want);
        assert!(!Path::new(&out).exists(), "{extra:?} wrote {out}");
    };
    for v in ["60000", "0", HUGE] {
        synthetic(&[&format!("--size={v}")], "--size");
    }
    synthetic(&["--size=-1"], "--size");
    for v in ["0", HUGE] {
        synthetic(&[&format!("--count={v}")], "--count");
    }
    for v in ["nan", "2", "-1", "inf"] {
        synthetic(&[&format!("--val-ratio={v}")], "--val-ratio");
    }
    // prepare --scenes: the tile checks come before any scene is opened.
    let scenes = |extra: &[&str], want: &str| {
        let mut args = vec!["prepare", "--out", &out, "--scenes", "no-scene.tif"];
        args.extend(["--masks", "no-mask.tif", "--class", "a=0", "--class", "b=1"]);
        args.extend(extra);
        rejects(&args, want);
    };
    for v in ["0", "100000", HUGE, "-1"] {
        scenes(&[&format!("--tile-size={v}")], "--tile-size");
    }
    scenes(&["--tile-size", "64", "--overlap", "64"], "--overlap");
    scenes(&["--overlap", HUGE], "--overlap");
    for v in ["nan", "2", "-0.5"] {
        scenes(
            &[&format!("--max-empty-fraction={v}")],
            "--max-empty-fraction",
        );
    }
    // predict and eval: the window and batch checks come before any image is read.
    let model = tiny_model();
    let model = model.to_str().unwrap();
    let predict = |extra: &[&str], want: &str| {
        let mut args = vec!["predict", "--model", model, "--input", "no-image.png"];
        args.extend(["--output", &out]);
        args.extend(extra);
        rejects(&args, want);
    };
    for v in ["0", HUGE, "-1", "100000"] {
        predict(&[&format!("--tile={v}")], "--tile");
    }
    for v in ["0", HUGE, "-1", "60000"] {
        predict(&[&format!("--batch-size={v}")], "--batch-size");
    }
    predict(&["--overlap", HUGE], "--overlap");
    predict(&["--tile", "64", "--overlap", "64"], "--overlap");
    for v in ["0", HUGE, "-1", "60000"] {
        rejects(
            &[
                "eval",
                "--model",
                model,
                "--data",
                "no-data",
                &format!("--batch-size={v}"),
            ],
            "--batch-size",
        );
    }
    // plan: sizes and counts are bounded before the arithmetic.
    for (flag, values) in [
        (
            "--size",
            &["0", HUGE, "100000x-1", "nan", "99999999999999999999"][..],
        ),
        ("--batch", &["0", HUGE, "-1"]),
        ("--effective-batch", &["0", HUGE]),
        ("--num-labels", &["0", HUGE]),
        ("--bands", &["0", HUGE]),
        ("--workers", &["0", HUGE]),
        ("--prefetch", &["0", HUGE]),
        ("--memory-budget", &["nan", "-1", "0", "inf"]),
    ] {
        for v in values {
            let arg = format!("{flag}={v}");
            let mut args = vec!["plan", &arg];
            if flag == "--effective-batch" {
                args.extend(["--memory-budget", "1GiB"]);
            }
            rejects(&args, flag);
        }
    }
}
