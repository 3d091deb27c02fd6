//! Test-time augmentation through the real `segfit` binary: `eval --tta` prints the plain
//! metrics (exactly those of a run without it) and the augmented ones from one pass, and
//! `predict --tta` gives what the library's windowed path gives with the same choice, streamed
//! or in memory.

use std::path::Path;

use burn::backend::Flex;
use infer::{Tta, Windows, classes_of, predict_windows};
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// A 3-class dataset for the tiny fixture model: 8 images of 40 × 56 pixels with smooth
/// structure, masks of three bands of classes 0, 1, 2 (half of them in `val`).
fn dataset(root: &Path) -> std::path::PathBuf {
    let (images, masks, out) = (root.join("img"), root.join("msk"), root.join("data"));
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&masks).unwrap();
    let (w, h) = (56, 40);
    for i in 0..8 {
        let px: Vec<u8> = (0..w * h * 3)
            .map(|s| {
                let (p, b) = (s / 3, s % 3);
                let (x, y) = (p % w, p / w);
                ((x * (3 + i) + y * (5 + b) + 40 * b) % 256) as u8
            })
            .collect();
        let image = Raster::new(w, h, 3, RasterData::U8(px)).unwrap();
        tiles::write_png(&images.join(format!("t{i}.png")), &image).unwrap();
        let mask: Vec<u8> = (0..w * h)
            .map(|p| ((p % w + i) * 3 / w % 3) as u8)
            .collect();
        let mask = tiles::Mask::new(w, h, mask).unwrap();
        tiles::write_mask_png(&masks.join(format!("t{i}.png")), &mask).unwrap();
    }
    ok(&[
        "prepare",
        "--images",
        s(&images),
        "--masks",
        s(&masks),
        "--class",
        "class_0=0",
        "--class",
        "class_1=1",
        "--class",
        "class_2=2",
        "--val-ratio",
        "0.5",
        "--out",
        s(&out),
    ]);
    out
}

#[test]
fn eval_tta_prints_both_tables_and_keeps_the_plain_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let data = dataset(tmp.path());
    let model = fixture();
    let base = ["eval", "--model", s(&model), "--data", s(&data)];
    let json = |extra: &[&str]| -> serde_json::Value {
        serde_json::from_str(&ok(&[&base[..], &["--json"], extra].concat())).unwrap()
    };
    let plain = json(&[]);
    assert!(plain.get("tta").is_none(), "{plain}");
    for (tta, poses) in [("flips", 4), ("d4", 8)] {
        let both = json(&["--tta", tta]);
        for key in ["loss", "metrics", "confusion", "samples"] {
            assert_eq!(both[key], plain[key], "--tta {tta}: `{key}` changed");
        }
        assert_eq!(both["tta"]["poses"], tta);
        assert_eq!(both["tta"]["count"], poses);
        // The same labelled pixels, predicted differently: equal row sums.
        let sums = |v: &serde_json::Value| -> Vec<u64> {
            let rows: Vec<Vec<u64>> = serde_json::from_value(v.clone()).unwrap();
            rows.iter().map(|r| r.iter().sum()).collect()
        };
        assert_eq!(sums(&both["tta"]["confusion"]), sums(&plain["confusion"]));
        let miou = both["tta"]["metrics"]["miou"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&miou), "{both}");
    }
    // Tables: the plain one is the one printed without --tta, then the augmented one.
    let table = ok(&base);
    let plain_table = table.split("loss ").next().unwrap();
    let text = ok(&[&base[..], &["--tta", "d4"]].concat());
    assert!(
        text.starts_with("without test-time augmentation\n"),
        "{text}"
    );
    assert!(text.contains(plain_table), "{text}\n---\n{table}");
    assert!(
        text.contains("with test-time augmentation (d4, 8 poses)"),
        "{text}"
    );
    assert_eq!(text.matches("confusion (rows").count(), 2, "{text}");
    assert_eq!(text.matches("pixel accuracy").count(), 2, "{text}");
    let bad = segfit(&[&base[..], &["--tta", "rot"]].concat());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("flips"),
        "{stderr}"
    );
}

/// Preprocessed pixel values of one 3-band `h × w` image with smooth structure.
fn pixel_values(h: usize, w: usize) -> Vec<f32> {
    (0..3 * h * w)
        .map(|i| {
            let (b, y, x) = (i / (h * w), i / w % h, i % w);
            ((x as f32 / 9.0).sin() + (y as f32 / 13.0).cos()) * 0.8 + 0.3 * b as f32 - 0.3
        })
        .collect()
}

#[test]
fn predict_tta_gives_the_library_windowed_result() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (h, w) = (70, 90);
    let pv = pixel_values(h, w);
    let pv_path = t.join("pv.npy");
    write_npy(&pv_path, &[1, 3, h, w], &pv);
    let model_dir = fixture();
    let run = |tta: &str| {
        let (out, logits) = (t.join(format!("out-{tta}")), t.join(format!("{tta}.npy")));
        ok(&[
            "predict",
            "--model",
            s(&model_dir),
            "--pixel-values",
            s(&pv_path),
            "--tile",
            "48",
            "--overlap",
            "12",
            "--tta",
            tta,
            "--logits",
            s(&logits),
            "--output",
            s(&out),
        ]);
        let mask = tiles::read_mask(&out.join("pv.png")).unwrap();
        assert_eq!((mask.width, mask.height), (w, h));
        let (shape, logits) = read_npy(&logits);
        assert_eq!(shape, [1, 3, h, w]);
        (mask.data, logits)
    };
    let (model, _) = segformer::load_hf_dir::<Flex>(&model_dir, &Default::default()).unwrap();
    let windows = Windows::new([48, 48], Some(12), 4).unwrap();
    let (_, plain_logits) = run("none");
    for tta in [Tta::Flips, Tta::D4] {
        let (classes, logits) = run(&tta.to_string());
        let expect = predict_windows(
            &model,
            &pv,
            [3, h, w],
            &windows.with_tta(tta),
            &Default::default(),
        )
        .unwrap();
        let diff = logits
            .iter()
            .zip(&expect)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-5, "--tta {tta}: logits differ by {diff}");
        let expect_classes = classes_of(&logits, 3, h * w);
        let wrong = classes
            .iter()
            .zip(&expect_classes)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            wrong, 0,
            "--tta {tta}: {wrong} pixels are not the logits' argmax"
        );
        // Log-probabilities: the class probabilities sum to one.
        let total: f32 = (0..3).map(|c| logits[c * h * w].exp()).sum();
        assert!((total - 1.0).abs() < 1e-4, "--tta {tta}: {total}");
        // Different numbers from the plain run (log-probabilities of averaged poses).
        let plain = infer::probabilities(&plain_logits, 3, h * w);
        let averaged = infer::probabilities(&logits, 3, h * w);
        let moved = plain
            .iter()
            .zip(&averaged)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            moved > 1e-4,
            "--tta {tta} left the probabilities as they were"
        );
    }
}

#[test]
fn predict_tta_streams_a_scene_like_the_in_memory_path() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (w, h) = (110, 80);
    let px: Vec<u8> = (0..w * h * 3)
        .map(|s| {
            let (p, b) = (s / 3, s % 3);
            let (x, y) = (p % w, p / w);
            (((x as f64 / 7.0).sin() + (y as f64 / 11.0).cos()) * 60.0 + 120.0 + 20.0 * b as f64)
                as u8
        })
        .collect();
    let geo = GeoRef {
        transform: [500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32633]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    let scene = t.join("scene.tif");
    let image = Raster::new(w, h, 3, RasterData::U8(px)).unwrap();
    tiles::write_geotiff(&scene, &image, Some(&geo)).unwrap();
    let model = fixture();
    let predict = |out: &str, extra: &[&str]| {
        let dir = t.join(out);
        let args = [
            "--tile",
            "48",
            "--overlap",
            "12",
            "--tta",
            "d4",
            "--probabilities",
        ];
        predict_ok(&model, &scene, &dir, &[&args[..], extra].concat());
        let (classes, _) = tiles::read_image(&dir.join("scene.tif")).unwrap();
        let (prob, _) = tiles::read_image(&dir.join("scene_prob.tif")).unwrap();
        (classes, prob)
    };
    let streamed = predict("streamed", &[]);
    // --overlay needs the whole scene: the in-memory path.
    let whole = predict("whole", &["--overlay"]);
    assert!(streamed.0.data == whole.0.data, "class maps differ");
    assert!(streamed.1.data == whole.1.data, "probabilities differ");
    assert_eq!((streamed.0.width, streamed.0.height), (w, h));
}
