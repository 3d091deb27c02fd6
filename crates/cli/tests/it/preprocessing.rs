//! Self-contained runs and faithful exports: a u16 4-band run keeps its preprocessing, predicts
//! after its dataset is deleted, and exports a `preprocessor_config.json` under which HF's
//! `SegformerImageProcessor` formula gives segfit's pixel values.

use std::path::Path;

use serde_json::Value;
use tiles::{Raster, RasterData};

use crate::common::*;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    serde_json::from_value(v.clone()).unwrap()
}

/// The float32 payload of a .npy file (header skipped).
fn read_npy_data(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

const SIDE: usize = 32;
const BANDS: usize = 4;

/// A u16 4-band image whose bands have different ranges (so per-band statistics matter).
fn u16_image(seed: usize) -> Vec<u16> {
    (0..SIDE * SIDE * BANDS)
        .map(|i| {
            let (px, b) = (i / BANDS, i % BANDS);
            let base = [1200, 9000, 21000, 40000][b];
            (base + (px * 131 + seed * 977 + b * 53) % (2000 + 4000 * b)) as u16
        })
        .collect()
}

#[test]
fn a_u16_run_predicts_without_its_dataset_and_exports_hf_preprocessing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (images, masks, data, run, hf) = (
        t.join("img"),
        t.join("msk"),
        t.join("data"),
        t.join("run"),
        t.join("hf"),
    );
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&masks).unwrap();
    for i in 0..6 {
        let image = Raster::new(SIDE, SIDE, BANDS, RasterData::U16(u16_image(i))).unwrap();
        tiles::write_geotiff(&images.join(format!("t{i}.tif")), &image, None).unwrap();
        let mask: Vec<u8> = (0..SIDE * SIDE)
            .map(|p| (p % SIDE < SIDE / 2) as u8)
            .collect();
        let mask = tiles::Mask::new(SIDE, SIDE, mask).unwrap();
        tiles::write_mask_png(&masks.join(format!("t{i}.png")), &mask).unwrap();
    }
    ok(&[
        "prepare",
        "--images",
        s(&images),
        "--masks",
        s(&masks),
        "--class",
        "other=0",
        "--class",
        "crop=1",
        "--val-ratio",
        "0.5",
        "--out",
        s(&data),
    ]);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/synthetic-quick.toml");
    ok(&[
        "train",
        "--config",
        s(&config),
        "--output",
        s(&run),
        "--set",
        &format!("data.root={}", data.display()),
        "--set",
        "data.normalize=\"dataset\"",
        "--set",
        "model.preset=\"mit-tiny\"",
        "--set",
        &format!("data.size=[{SIDE}, {SIDE}]"),
        "--set",
        "train.max_steps=2",
        "--set",
        "train.batch_size=2",
        "--set",
        "train.progress=false",
        "--set",
        "train.workers=1",
    ]);

    // The run keeps the processor it trained with.
    let pre = json(&run.join("preprocessing.json"));
    assert_eq!(pre["sample_kind"], "u16", "{pre}");
    assert_eq!(pre["bands"], BANDS, "{pre}");
    assert_eq!(pre["processor"]["size"], serde_json::json!([SIDE, SIDE]));

    // segfit's formula for normalize = "dataset", straight from dataset.json: (x - mean) / std.
    let stats = json(&data.join("dataset.json"))["band_stats"].clone();
    let stat = |b: usize, k: &str| stats[b][k].as_f64().unwrap();
    let known = u16_image(17);
    let segfit_formula: Vec<f64> = (0..SIDE * SIDE * BANDS)
        .map(|i| {
            let b = i % BANDS;
            (known[i] as f64 - stat(b, "mean")) / stat(b, "std")
        })
        .collect();

    // The export: HF's formula with the keys it wrote gives the same values.
    ok(&["export", "--model", s(&run), "--output", s(&hf)]);
    let hp = json(&hf.join("preprocessor_config.json"));
    assert_eq!(hp["rescale_factor"].as_f64(), Some(1.0 / 65535.0), "{hp}");
    assert_eq!(
        (
            &hp["do_resize"],
            &hp["size"]["height"],
            &hp["size"]["width"]
        ),
        (&Value::Bool(true), &Value::from(SIDE), &Value::from(SIDE))
    );
    assert_eq!(
        (&hp["do_rescale"], &hp["do_normalize"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    let (rescale, mean, std) = (
        hp["rescale_factor"].as_f64().unwrap(),
        floats(&hp["image_mean"]),
        floats(&hp["image_std"]),
    );
    assert_eq!((mean.len(), std.len()), (BANDS, BANDS), "{hp}");
    // HF: `((x * rescale_factor) - mean) / std`, channels first.
    let mut hf_pixels = vec![0f32; SIDE * SIDE * BANDS];
    let plane = SIDE * SIDE;
    for (i, &x) in known.iter().enumerate() {
        let (px, b) = (i / BANDS, i % BANDS);
        let v = (x as f64 * rescale - mean[b]) / std[b];
        assert!(
            (v - segfit_formula[i]).abs() <= 1e-6,
            "sample {i}: HF {v}, segfit's formula {}",
            segfit_formula[i]
        );
        hf_pixels[b * plane + px] = v as f32;
    }

    // segfit's processor as the run stored it gives them too.
    let processor: augment::SegformerProcessor =
        serde_json::from_value(pre["processor"].clone()).unwrap();
    let image = Raster::new(SIDE, SIDE, BANDS, RasterData::U16(known.clone())).unwrap();
    let out = processor.process(&image, None).unwrap();
    let worst = out
        .pixel_values
        .iter()
        .zip(&hf_pixels)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-6, "segfit's processor vs HF's formula: {worst}");

    // The dataset deleted, the run still predicts, and as the export does on HF's pixel values.
    std::fs::remove_dir_all(&data).unwrap();
    let scene = t.join("scene.tif");
    tiles::write_geotiff(&scene, &image, None).unwrap();
    let run_logits = t.join("run_logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&run),
        "--input",
        s(&scene),
        "--output",
        s(&t.join("pred_run")),
        "--logits",
        s(&run_logits),
    ]);
    assert!(t.join("pred_run/scene.tif").is_file());
    let pv = t.join("pv.npy");
    write_npy(&pv, &[1, BANDS, SIDE, SIDE], &hf_pixels);
    let hf_logits = t.join("hf_logits.npy");
    ok(&[
        "predict",
        "--model",
        s(&hf),
        "--pixel-values",
        s(&pv),
        "--output",
        s(&t.join("pred_hf")),
        "--logits",
        s(&hf_logits),
    ]);
    let (a, b) = (read_npy_data(&run_logits), read_npy_data(&hf_logits));
    assert_eq!(a.len(), 2 * SIDE * SIDE);
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(
        diff < 1e-4,
        "run on the image vs export on HF's pixel values: {diff}"
    );
}
