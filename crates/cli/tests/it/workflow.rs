//! End-to-end runs of the real `segfit` binary: prepare → train → eval → predict → export, and
//! the error messages users see.

use std::path::Path;
use std::process::{Command, Stdio};

use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// Runs segfit with stdout a pipe whose reading end is already closed (what `segfit … | head`
/// leaves once head has read its lines); asserts a quiet success.
fn into_closed_pipe(args: &[&str]) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_segfit"))
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("segfit runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "segfit {args:?} into a closed pipe; stderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn config(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../configs")
        .join(name)
        .display()
        .to_string()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

const SCENE_W: usize = 150;
const SCENE_H: usize = 100;

/// Mean RGB of the class-0 pixels of the prepared training split.
fn outer_colour(data: &Path) -> [u8; 3] {
    let (mut sum, mut n) = ([0u64; 3], 0u64);
    for entry in std::fs::read_dir(data.join("images/train")).unwrap() {
        let path = entry.unwrap().path();
        let mask =
            tiles::read_mask(&data.join("masks/train").join(path.file_name().unwrap())).unwrap();
        let (image, _) = tiles::read_image(&path).unwrap();
        let RasterData::U8(px) = &image.data else {
            panic!("synthetic images are u8")
        };
        for (i, _) in mask.data.iter().enumerate().filter(|(_, v)| **v == 0) {
            for c in 0..3 {
                sum[c] += px[i * 3 + c] as u64;
            }
            n += 1;
        }
    }
    sum.map(|v| (v / n.max(1)) as u8)
}

/// Window origins for a 150 × 100 scene with 64-pixel windows overlapping by 16: stride 48,
/// the last window flush with the edge (the documented rule, written out by hand).
const XS: [usize; 3] = [0, 48, 86];
const YS: [usize; 2] = [0, 36];

#[test]
fn prepare_train_eval_predict_export() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let data = t.join("data");
    let run = t.join("run");

    // prepare: the synthetic set, small.
    let out = ok(&[
        "prepare",
        "--synthetic",
        "--count",
        "10",
        "--size",
        "64",
        "--seed",
        "3",
        "--out",
        s(&data),
    ]);
    assert!(out.contains("prepared"), "{out}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("dataset.json")).unwrap()).unwrap();
    assert_eq!(meta["classes"], serde_json::json!(["outer", "rice_paddy"]));

    // train: the shipped default config, shrunk to a few steps of a tiny model at 64×64.
    let root = format!("data.root={}", data.display());
    let out = ok(&[
        "train",
        "--config",
        &config("synthetic-quick.toml"),
        "--output",
        s(&run),
        "--set",
        &root,
        "--set",
        "model.preset=\"mit-tiny\"",
        "--set",
        "data.size=[64, 64]",
        "--set",
        "train.epochs=10",
        "--set",
        "train.max_steps=30",
        "--set",
        "train.batch_size=2",
        "--set",
        "train.progress=false",
        "--set",
        "train.workers=1",
    ]);
    assert!(out.contains("done: 30 steps"), "{out}");
    for f in [
        "config.toml",
        "metrics.jsonl",
        "checkpoints/last/config.json",
        "checkpoints/last/model.safetensors",
    ] {
        assert!(run.join(f).is_file(), "{f} missing from the run");
    }
    let again = segfit(&[
        "train",
        "--config",
        &config("synthetic-quick.toml"),
        "--output",
        s(&run),
        "--set",
        &root,
    ]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("--resume"),
        "a finished run must not be overwritten"
    );

    // eval: the confusion matrix rows must hold exactly the truth pixels of the val masks.
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "eval",
        "--model",
        s(&run),
        "--data",
        s(&data),
        "--json",
    ]))
    .unwrap();
    let mut truth = [0u64; 2];
    for entry in std::fs::read_dir(data.join("masks/val")).unwrap() {
        for &v in &tiles::read_mask(&entry.unwrap().path()).unwrap().data {
            truth[v as usize] += 1;
        }
    }
    let rows: Vec<Vec<u64>> = serde_json::from_value(report["confusion"].clone()).unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r.iter().sum::<u64>())
            .collect::<Vec<_>>(),
        truth
    );
    let iou = |c: usize| {
        let tp = rows[c][c] as f64;
        tp / (rows[c].iter().sum::<u64>() as f64 + rows.iter().map(|r| r[c]).sum::<u64>() as f64
            - tp)
    };
    let miou = report["metrics"]["miou"].as_f64().unwrap();
    assert!((miou - (iou(0) + iou(1)) / 2.0).abs() < 1e-9, "{report}");
    let table = ok(&["eval", "--model", s(&run), "--data", s(&data)]);
    assert!(
        table.contains("rice_paddy") && table.contains("confusion"),
        "{table}"
    );
    // Regression (issue #13): `segfit eval | head` panicked on the broken pipe.
    into_closed_pipe(&["eval", "--model", s(&run), "--data", s(&data)]);
    into_closed_pipe(&["eval", "--model", s(&run), "--data", s(&data), "--json"]);

    // predict: a constant GeoTIFF larger than the 64-pixel window.
    let scene = t.join("scene.tif");
    let geo = GeoRef {
        transform: [500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32633]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    // A colour the model has learnt: the mean of the `outer` pixels of the training tiles, so
    // the prediction is far from a tie and must not flip anywhere.
    let grey = outer_colour(&data);
    let pixels: Vec<u8> = (0..SCENE_W * SCENE_H).flat_map(|_| grey).collect();
    let image = Raster::new(SCENE_W, SCENE_H, 3, RasterData::U8(pixels)).unwrap();
    tiles::write_geotiff(&scene, &image, Some(&geo)).unwrap();
    let pred = t.join("pred");
    let logits_path = t.join("logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&run),
        "--input",
        s(&scene),
        "--output",
        s(&pred),
        "--tile",
        "64",
        "--overlap",
        "16",
        "--logits",
        s(&logits_path),
        "--probabilities",
        "--overlay",
    ]);
    let (mask, mask_geo) = tiles::read_image(&pred.join("scene.tif")).unwrap();
    assert_eq!((mask.width, mask.height, mask.bands), (SCENE_W, SCENE_H, 1));
    assert_eq!(
        mask_geo.map(|g| (g.transform, g.geo_key_directory)),
        Some((geo.transform, geo.geo_key_directory.clone()))
    );
    let RasterData::U8(classes) = &mask.data else {
        panic!("u8 mask expected")
    };
    assert!(
        classes.iter().all(|&c| c == classes[0]),
        "a constant image must give a constant prediction"
    );
    let (shape, logits) = read_npy(&logits_path);
    assert_eq!(shape, [1, 2, SCENE_H, SCENE_W]);
    let (prob, prob_geo) = tiles::read_image(&pred.join("scene_prob.tif")).unwrap();
    assert_eq!(
        (prob.bands, prob_geo.map(|g| g.transform)),
        (2, Some(geo.transform))
    );
    let p = prob.to_f32();
    assert!(p.chunks(2).all(|px| (px[0] + px[1] - 1.0).abs() < 1e-5));
    assert!(pred.join("scene_overlay.png").is_file());

    // Seams: the blended logits must be the Hann-weighted mean of the windows' own logits,
    // computed here from one-window runs on crops of the preprocessed image.
    let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
    let value = |c: usize| (grey[c] as f32 / 255.0 - mean[c]) / std[c];
    let full: Vec<f32> = (0..3)
        .flat_map(|c| std::iter::repeat_n(value(c), SCENE_H * SCENE_W))
        .collect();
    let full_npy = t.join("full.npy");
    write_npy(&full_npy, &[1, 3, SCENE_H, SCENE_W], &full);
    let full_logits = t.join("full_logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&run),
        "--pixel-values",
        s(&full_npy),
        "--output",
        s(&t.join("pv")),
        "--tile",
        "64",
        "--overlap",
        "16",
        "--logits",
        s(&full_logits),
    ]);
    let (_, from_pixels) = read_npy(&full_logits);
    assert!(
        max_abs_diff(&from_pixels, &logits) < 1e-4,
        "pixel-values and image paths disagree"
    );
    let crop = t.join("crop.npy");
    write_npy(
        &crop,
        &[1, 3, 64, 64],
        &(0..3 * 64 * 64)
            .map(|i| value(i / 4096))
            .collect::<Vec<_>>(),
    );
    let crop_logits = t.join("crop_logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&run),
        "--pixel-values",
        s(&crop),
        "--output",
        s(&t.join("pv")),
        "--tile",
        "64",
        "--logits",
        s(&crop_logits),
    ]);
    // Every window of a constant image sees the same crop, so one window run stands for all.
    let (_, window) = read_npy(&crop_logits);
    let hann: Vec<f64> = (0..64)
        .map(|i| {
            (std::f64::consts::PI * (i as f64 + 0.5) / 64.0)
                .sin()
                .powi(2)
        })
        .collect();
    let plane = SCENE_H * SCENE_W;
    let mut worst = 0f64;
    for c in 0..2 {
        for y in 0..SCENE_H {
            for x in 0..SCENE_W {
                let (mut num, mut den) = (0f64, 0f64);
                for &y0 in YS.iter().filter(|&&y0| (y0..y0 + 64).contains(&y)) {
                    for &x0 in XS.iter().filter(|&&x0| (x0..x0 + 64).contains(&x)) {
                        let w = hann[y - y0] * hann[x - x0];
                        num += w * window[(c * 64 + y - y0) * 64 + x - x0] as f64;
                        den += w;
                    }
                }
                worst = worst.max((num / den - logits[c * plane + y * SCENE_W + x] as f64).abs());
            }
        }
    }
    assert!(
        worst < 1e-4,
        "blended logits differ from the weighted window mean by {worst}"
    );
    // No seam: across every interior window border (x = 64, 112; y = 64) neighbouring columns
    // and rows change no more than they do inside a single window.
    let step = |a: usize, b: usize| {
        (0..2)
            .map(|c| (logits[c * plane + a] - logits[c * plane + b]).abs())
            .fold(0.0, f32::max)
    };
    let inside = (1..40)
        .flat_map(|x| (1..40).map(move |y| (x, y)))
        .map(|(x, y)| step(y * SCENE_W + x, y * SCENE_W + x - 1))
        .fold(0.0, f32::max);
    for y in 0..SCENE_H {
        for x in [64, 112] {
            assert!(
                step(y * SCENE_W + x, y * SCENE_W + x - 1) <= inside + 1e-4,
                "seam at x = {x}, y = {y}"
            );
        }
    }

    // export, then predict from the HF directory: the same logits.
    let hf = t.join("hf");
    ok(&["export", "--model", s(&run), "--output", s(&hf)]);
    for f in [
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
    ] {
        assert!(hf.join(f).is_file(), "{f} missing from the export");
    }
    let hf_logits = t.join("hf_logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&hf),
        "--input",
        s(&scene),
        "--output",
        s(&t.join("pred_hf")),
        "--tile",
        "64",
        "--overlap",
        "16",
        "--logits",
        s(&hf_logits),
    ]);
    let (hf_shape, from_hf) = read_npy(&hf_logits);
    assert_eq!(hf_shape, shape);
    assert!(
        max_abs_diff(&from_hf, &logits) < 1e-6,
        "the exported model predicts differently"
    );
}

#[test]
fn errors_name_the_file_or_key() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.toml");
    let e = fails(&["train", "--config", s(&missing)]);
    assert!(e.contains("nope.toml") && e.contains("No such file"), "{e}");

    let e = fails(&[
        "train",
        "--config",
        &config("synthetic-quick.toml"),
        "--set",
        "train.epoch=3",
    ]);
    assert!(
        e.contains("epoch") && e.contains("epochs") && e.contains("batch_size"),
        "{e}"
    );

    // `--device cuda` where it cannot run: a build without the feature says how to rebuild; a
    // CUDA build (CI's) on a Linux machine without an NVIDIA driver says there is no GPU.
    let no_gpu = cfg!(target_os = "linux") && !Path::new("/dev/nvidiactl").exists();
    let says: &[&str] = if !cfg!(feature = "cuda") {
        &["without CUDA support", "--features cuda"]
    } else if no_gpu {
        &["device cuda:0", "no NVIDIA GPU found"]
    } else {
        &[] // a GPU is there: training on it is not this test's business
    };
    if !says.is_empty() {
        let e = fails(&[
            "train",
            "--config",
            &config("synthetic-quick.toml"),
            "--device",
            "cuda",
        ]);
        assert!(says.iter().all(|part| e.contains(part)), "{e}");
    }

    let e = fails(&[
        "predict",
        "--model",
        s(&tmp.path().join("absent")),
        "--input",
        "x.png",
        "--output",
        s(tmp.path()),
    ]);
    assert!(e.contains("absent") && e.contains("run directory"), "{e}");

    let bad = tmp.path().join("bad.npy");
    std::fs::write(&bad, b"not numpy at all").unwrap();
    let hf = tmp.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    std::fs::write(hf.join("config.json"), "{}").unwrap();
    let e = fails(&[
        "predict",
        "--model",
        s(&hf),
        "--pixel-values",
        s(&bad),
        "--output",
        s(tmp.path()),
    ]);
    assert!(e.contains(s(&hf)), "{e}");

    let e = fails(&[
        "prepare",
        "--images",
        s(tmp.path()),
        "--masks",
        s(tmp.path()),
        "--out",
        s(&tmp.path().join("o")),
    ]);
    assert!(e.contains("--class"), "{e}");
    let e = fails(&[
        "prepare",
        "--images",
        s(tmp.path()),
        "--masks",
        s(tmp.path()),
        "--class",
        "outer",
        "--out",
        "o",
    ]);
    assert!(e.contains("`outer`") && e.contains("NAME=VALUE"), "{e}");
}

#[test]
fn help_explains_every_subcommand() {
    let help = ok(&["--help"]);
    for cmd in ["prepare", "train", "eval", "predict", "export"] {
        assert!(help.contains(cmd), "{help}");
    }
    let predict = ok(&["predict", "--help"]);
    for flag in [
        "--tile",
        "--overlap",
        "--probabilities",
        "--overlay",
        "--logits",
        "--pixel-values",
        "--device",
    ] {
        assert!(predict.contains(flag), "{predict}");
    }
}

#[test]
fn prepare_folder_with_0_255_masks_and_audit_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (images, masks, out) = (
        tmp.path().join("img"),
        tmp.path().join("msk"),
        tmp.path().join("out"),
    );
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&masks).unwrap();
    // Ten 8×8 pairs: the left half is rice_paddy, stored as 255 (the original dataset's convention).
    for i in 0..10 {
        let image = Raster::new(8, 8, 3, RasterData::U8(vec![20 * i as u8; 8 * 8 * 3])).unwrap();
        tiles::write_png(&images.join(format!("t{i}.png")), &image).unwrap();
        let mask: Vec<u8> = (0..64).map(|p| if p % 8 < 4 { 255 } else { 0 }).collect();
        tiles::write_mask_png(
            &masks.join(format!("t{i}.png")),
            &tiles::Mask::new(8, 8, mask).unwrap(),
        )
        .unwrap();
    }
    let classes = [
        "--class",
        "outer=0",
        "--class",
        "rice_paddy=255",
        "--val-ratio",
        "0.5",
    ];
    let mut args = vec![
        "prepare",
        "--images",
        s(&images),
        "--masks",
        s(&masks),
        "--out",
        s(&out),
    ];
    args.extend(classes);
    let audit = ok(&[&args[..], &["--audit-only"]].concat());
    assert!(
        audit.contains("rice_paddy") && audit.contains("0: 320, 255: 320"),
        "{audit}"
    ); // 10 × 32 pixels each
    assert!(
        !out.join("dataset.json").exists(),
        "--audit-only must not write"
    );
    ok(&args);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("dataset.json")).unwrap()).unwrap();
    let count = |split: &str| {
        std::fs::read_dir(out.join("images").join(split))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(count("train") + count("val"), 10, "{meta}");
    // A second prepare into the same folder is refused instead of mixing datasets.
    let e = fails(&args);
    assert!(e.contains("already holds a dataset"), "{e}");
}

/// `--pixel-values … --raw-logits` against HF transformers: the tiny fixture model's logits for
/// the fixture's pixel values (`SegformerForSemanticSegmentation(...).eval()(pixel_values).logits`).
#[test]
fn pixel_values_give_hf_logits() {
    let diff = raw_logits_diff_from_hf(&[]);
    assert!(diff < 1e-4, "logits differ from transformers by {diff}");
}

#[test]
fn plan_predicts_and_fits_a_budget() {
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "plan", "--json", "--size", "256x256", "--batch", "2",
    ]))
    .unwrap();
    assert_eq!(json["stages"].as_array().unwrap().len(), 4);
    assert_eq!(json["parameters"], 3715170, "MiT-B0 with 2 classes");
    let table = ok(&["plan", "--size", "512", "--batch", "2", "--checkpointing"]);
    assert!(
        table.contains("predicted peak") && table.contains("attention"),
        "{table}"
    );
    // More memory per image at 512² than at 256²: the larger plan must predict more.
    let small: serde_json::Value =
        serde_json::from_str(&ok(&["plan", "--json", "--size", "256", "--batch", "1"])).unwrap();
    let big: serde_json::Value =
        serde_json::from_str(&ok(&["plan", "--json", "--size", "512", "--batch", "1"])).unwrap();
    let act = |v: &serde_json::Value| v["stages"][0]["activations"].as_u64().unwrap();
    assert!(
        act(&big).abs_diff(4 * act(&small)) <= 4,
        "stage-1 activations scale with the pixel count: {} vs 4 × {}",
        act(&big),
        act(&small)
    );

    let fit: serde_json::Value = serde_json::from_str(&ok(&[
        "plan",
        "--json",
        "--size",
        "512",
        "--memory-budget",
        "1GiB",
        "--effective-batch",
        "8",
    ]))
    .unwrap();
    let (micro, accum) = (
        fit["micro_batch"].as_u64().unwrap(),
        fit["accumulation_steps"].as_u64().unwrap(),
    );
    assert_eq!(micro * accum, 8, "the effective batch is kept");
    assert!(micro < 8, "8 images at 512² do not fit in 1 GiB");
    let e = fails(&["plan", "--size", "1024", "--memory-budget", "10MiB"]);
    assert!(
        e.contains("10MiB") || e.contains("10 MiB") || e.contains("10.0 MiB"),
        "{e}"
    );
    let e = fails(&["plan", "--memory-budget", "eight"]);
    assert!(e.contains("eight"), "{e}");
    into_closed_pipe(&["plan", "--size", "256"]);
    into_closed_pipe(&["plan", "--json", "--size", "256"]);
}

/// Regression (issue #13): a 603 × 627 Landsat clip at `--tile-size 128 --overlap 16` failed
/// with "split `val` is empty" at the default ratio.
#[test]
fn prepare_scenes_gives_val_tiles_and_checks_the_labels_line_up() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (w, h) = (603, 627);
    let geo = |x0: f64| GeoRef {
        transform: [x0, 30.0, 0.0, 4_650_000.0, 0.0, -30.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32633]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    let scene = t.join("scene.tif");
    let pixels: Vec<u16> = (0..w * h * 3).map(|i| (i * 37 % 4000) as u16).collect();
    let image = Raster::new(w, h, 3, RasterData::U16(pixels)).unwrap();
    tiles::write_geotiff(&scene, &image, Some(&geo(355_000.0))).unwrap();
    let labels: Vec<u8> = (0..w * h).map(|i| (i % w / 60 % 2) as u8).collect();
    let labels = Raster::new(w, h, 1, RasterData::U8(labels)).unwrap();
    let mask = t.join("labels.tif");
    tiles::write_geotiff(&mask, &labels, Some(&geo(355_000.0))).unwrap();
    let args = |mask: &Path, out: &Path| {
        [
            "prepare",
            "--scenes",
            s(&scene),
            "--masks",
            s(mask),
            "--tile-size",
            "128",
            "--overlap",
            "16",
            "--class",
            "other=0",
            "--class",
            "crop=1",
            "--out",
            s(out),
        ]
        .map(str::to_string)
    };
    let run = |a: &[String]| ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(&args(&mask, &t.join("data")));
    assert!(out.contains("train tiles dropped"), "{out}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.join("data/dataset.json")).unwrap()).unwrap();
    let n_val = std::fs::read_dir(t.join("data/images/val"))
        .unwrap()
        .count();
    assert_eq!(meta["splits"]["val"], n_val);
    assert!(n_val > 0, "{meta}");

    // Labels shifted two pixels west: one line naming both files and the offset.
    let shifted = t.join("shifted.tif");
    tiles::write_geotiff(&shifted, &labels, Some(&geo(355_000.0 - 60.0))).unwrap();
    let a = args(&shifted, &t.join("data2"));
    let e = fails(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        e.contains("scene.tif") && e.contains("shifted.tif") && e.contains("+2.00"),
        "{e}"
    );
}
