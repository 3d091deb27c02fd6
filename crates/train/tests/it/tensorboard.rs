//! The TensorBoard log of a run (`<run>/tb/`): what a short training run and two resumes
//! leave there, decoded by testkit's independent reader, holds exactly the scalars of
//! `metrics.jsonl`, each step once, and the overlay grid of `plots/overlays.png`.
//!
//! With `SEGFIT_KEEP_TB=<dir>` the run directory is copied to `<dir>` for
//! `crates/train/verify/tensorboard.py`.

use std::collections::BTreeMap;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use testkit::tfevents;
use train::RunOptions;

use crate::training::{config, dataset};

type B = Autodiff<Flex>;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dst = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dst);
        } else {
            std::fs::copy(&path, &dst).unwrap();
        }
    }
}

/// The `(tag, step) -> value` scalars `metrics.jsonl` says TensorBoard should show.
fn expected_scalars(run: &Path, class_names: &[&str]) -> BTreeMap<(String, i64), Option<f32>> {
    let mut want = BTreeMap::new();
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let step = v["step"].as_i64().unwrap();
        let mut put = |tag: &str, x: &serde_json::Value| {
            // serde_json writes NaN (an IoU of an absent class) as null.
            let old = want.insert((tag.to_string(), step), x.as_f64().map(|x| x as f32));
            assert!(
                old.is_none(),
                "metrics.jsonl logs {tag} twice at step {step}"
            );
        };
        match v["kind"].as_str().unwrap() {
            "step" => {
                put("train/loss", &v["loss"]);
                put("train/lr/encoder", &v["lr"]);
                put(
                    "train/lr/decode_head",
                    &(v["lr"].as_f64().unwrap() * 10.0).into(),
                );
                put("train/images_per_s", &v["images_per_s"]);
                put("train/step_seconds", &v["step_seconds"]);
                assert!(v["host_rss_mib"].as_f64().unwrap() > 1.0, "{v}");
                put("memory/host_rss_mib", &v["host_rss_mib"]);
            }
            "epoch" => {
                put("train/epoch_loss", &v["train_loss"]);
                put("train/epoch_seconds", &v["seconds"]);
                put("val/loss", &v["val_loss"]);
                let m = &v["metrics"];
                put("val/miou", &m["miou"]);
                put("val/pixel_accuracy", &m["pixel_accuracy"]);
                put("val/mean_f1", &m["mean_f1"]);
                for (i, name) in class_names.iter().enumerate() {
                    put(&format!("val/iou/{name}"), &m["iou"][i]);
                }
            }
            other => panic!("record kind {other}"),
        }
    }
    want
}

#[test]
fn event_files_hold_the_metrics_of_a_resumed_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path(), 16, 64);
    let run = tmp.path().join("run");
    let cfg = |epochs: usize| {
        config(
            &root,
            &[&format!("train.epochs={epochs}"), "train.log_every=1"],
        )
    };
    let train = |epochs: usize, resume: bool| {
        let opts = RunOptions {
            resume,
            ..RunOptions::new(run.clone())
        };
        train::train::<B>(&cfg(epochs), &opts, &Default::default()).unwrap()
    };
    let after_one = train(1, false);
    let saved = tmp.path().join("last-after-epoch-1");
    copy_dir(&run.join("checkpoints/last"), &saved);
    train(2, true);
    // A crash that lost the second epoch's checkpoint: the next resume starts again after
    // epoch 1, and what was logged of epoch 2 is orphaned in the first two event files.
    std::fs::remove_dir_all(run.join("checkpoints/last")).unwrap();
    copy_dir(&saved, &run.join("checkpoints/last"));
    let summary = train(2, true);

    let tb = run.join("tb");
    let files = tfevents::event_files(&tb);
    assert_eq!(files.len(), 3, "one file per start: {files:?}");
    let resumed_at = after_one.steps as i64 + 1;
    for (i, f) in files.iter().enumerate() {
        let events = tfevents::read_file(f);
        assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
        let starts: Vec<i64> = events
            .iter()
            .filter(|e| e.session_status == Some(1))
            .map(|e| e.step)
            .collect();
        // The second file's START (at the same step) went with the orphaned events: the
        // resume cut everything past its checkpoint's step.
        let want: &[i64] = if i == 2 { &[resumed_at] } else { &[] };
        assert_eq!(starts, want, "SessionLog.START of {}", f.display());
    }

    let mut got = BTreeMap::new();
    for (tag, step, value) in tfevents::scalars(&tb) {
        let old = got.insert((tag.clone(), step), Some(value));
        assert!(
            old.is_none(),
            "{tag} at step {step} twice in {}",
            tb.display()
        );
    }
    // TensorBoard keeps NaN; metrics.jsonl has null.
    for v in got.values_mut() {
        if v.is_some_and(f32::is_nan) {
            *v = None;
        }
    }
    let want = expected_scalars(&run, &["outer", "rice_paddy"]);
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    let last_step = summary.steps as i64;
    assert!(got.contains_key(&("val/miou".to_string(), last_step)));
    assert!(got.contains_key(&("train/loss".to_string(), 1)));

    // One overlay grid per evaluation; the last is plots/overlays.png.
    let images: Vec<(i64, tfevents::Image)> = files
        .iter()
        .flat_map(|f| tfevents::read_file(f))
        .flat_map(|e| {
            e.values
                .into_iter()
                .filter_map(move |v| v.image.map(|i| (e.step, i)))
        })
        .collect();
    let steps: Vec<i64> = images.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [after_one.steps as i64, last_step]);
    let (_, last) = images.last().unwrap();
    assert_eq!(
        last.encoded,
        std::fs::read(run.join("plots/overlays.png")).unwrap()
    );
    assert_eq!(&last.encoded[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(last.colorspace, 3);
    assert!(last.width > 0 && last.height > 0);

    if let Ok(keep) = std::env::var("SEGFIT_KEEP_TB") {
        copy_dir(&run, Path::new(&keep));
    }
}
