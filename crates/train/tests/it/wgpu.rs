//! Training on burn-wgpu (`--device wgpu`, lavapipe in CI): real optimizer steps of `mit-tiny`
//! through `train::run`, the loss falls, the checkpoint reloads bit-identically on the device,
//! and a precision the adapter cannot compute in is refused with a sentence. Without any wgpu
//! adapter the tests print a skip note; under `CI=true` they fail.

use std::collections::HashMap;
use std::path::Path;

use burn::backend::{Flex, Wgpu};
use train::{Device, RunOptions, TrainConfig};

/// The first wgpu adapter, or `None` (with a note) on a machine without one, unless `CI=true`.
fn adapter() -> Option<segformer::WgpuAdapter> {
    // CubeCL's autotune cache pinned under the workspace's target/ (its default would be this
    // crate's own directory), at the level that times the fewest shapes.
    segformer::set_autotune(&segformer::Autotune {
        cache_dir: testkit::autotune_cache(),
        level: segformer::AutotuneLevel::Minimal,
    })
    .expect("the tests' autotune settings");
    match segformer::wgpu_adapter(0) {
        Ok(a) => {
            eprintln!("wgpu adapter: {a}, driver {}", a.driver);
            Some(a)
        }
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "CI=true needs a wgpu adapter (Debian: apt-get install mesa-vulkan-drivers libvulkan1): {e}"
        ),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// `mit-tiny` on a synthetic set of 64² tiles, a loss logged every step.
fn config(dir: &Path, extra: &[&str]) -> TrainConfig {
    let root = dir.join("data");
    if !root.join("dataset.json").exists() {
        let opts = tiles::SyntheticOptions {
            count: 20,
            size: 64,
            seed: 5,
            out: root.clone(),
            ..Default::default()
        };
        tiles::prepare_synthetic(&opts).unwrap();
    }
    let text = format!(
        "[model]\npreset = \"mit-tiny\"\n[data]\nroot = {:?}\nsize = [64, 64]\n\
         [optimizer]\nlr = 2e-3\nhead_lr_mult = 10.0\n\
         [train]\nprogress = false\nworkers = 1\nbatch_size = 4\nseed = 11\nlog_every = 1\n",
        root.to_str().unwrap()
    );
    let overrides: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    TrainConfig::from_toml_str(&text, &overrides).unwrap()
}

fn options(run_dir: &Path) -> RunOptions {
    RunOptions::new(run_dir.to_path_buf())
}

/// The per-step losses of a run, from its `metrics.jsonl`.
fn step_losses(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "step")
        .map(|v| v["loss"].as_f64().unwrap())
        .collect()
}

#[test]
fn mit_tiny_trains_on_wgpu_and_its_checkpoint_reloads() {
    let Some(adapter) = adapter() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &["train.epochs=4"]);
    let run = tmp.path().join("run");
    let started = std::time::Instant::now();
    let summary = train::run(&cfg, &options(&run), Device::Wgpu(0)).unwrap();
    eprintln!(
        "{} steps on {adapter} in {:.1} s",
        summary.steps,
        started.elapsed().as_secs_f64()
    );
    assert!(summary.steps >= 12, "{} steps", summary.steps);
    let losses = step_losses(&run);
    assert_eq!(losses.len() as u64, summary.steps, "{losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    // The last epoch's mean loss is well below the first's.
    let per_epoch = losses.len() / 4;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let (first, last) = (
        mean(&losses[..per_epoch]),
        mean(&losses[losses.len() - per_epoch..]),
    );
    eprintln!("step losses {losses:.4?}");
    assert!(
        last < 0.8 * first,
        "loss did not fall: {first:.4} -> {last:.4}"
    );

    // The checkpoint written from the device reloads onto it with every tensor identical, and
    // saving it again from the device gives the same file.
    let last_dir = run.join("checkpoints/last");
    let (on_wgpu, report) = segformer::load_hf_dir::<Wgpu>(&last_dir, &adapter.device).unwrap();
    assert!(report.is_exact(), "{report}");
    let (on_cpu, _) = segformer::load_hf_dir::<Flex>(&last_dir, &Default::default()).unwrap();
    let cpu: HashMap<_, _> = segformer::hf_state_dict(&on_cpu).into_iter().collect();
    let gpu = segformer::hf_state_dict(&on_wgpu);
    assert_eq!(gpu.len(), cpu.len());
    for (name, data) in &gpu {
        assert_eq!(
            data.as_bytes(),
            cpu[name].as_bytes(),
            "{name} changed on reload"
        );
    }
    let again = tmp.path().join("again");
    segformer::save_hf_dir(&on_wgpu, &again).unwrap();
    assert!(
        std::fs::read(again.join("model.safetensors")).unwrap()
            == std::fs::read(last_dir.join("model.safetensors")).unwrap(),
        "re-saving the reloaded checkpoint changed model.safetensors"
    );
}

#[test]
fn bf16_on_wgpu_is_refused_with_the_adapter_and_the_alternative() {
    let Some(adapter) = adapter() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &["train.epochs=1", "train.precision=\"bf16\""]);
    let e = train::run(&cfg, &options(&tmp.path().join("run")), Device::Wgpu(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bf16") && e.contains(&adapter.name), "{e}");
    // The alternative: f16 where the adapter has shader-f16 (lavapipe does), always f32.
    assert!(
        e.contains("use train.precision = \"") && e.contains("\"f32\""),
        "{e}"
    );
    assert!(
        !tmp.path().join("run/checkpoints").exists(),
        "refused before training"
    );
}
