//! `--device wgpu` through the real binary (lavapipe in CI): predict gives HF's logits, and
//! `plan --device wgpu` adds CubeCL's pool and says what is measured where. Without a wgpu
//! adapter the device case prints a skip note; under `CI=true` it fails.

mod common;

use std::path::Path;

use common::{ok, read_npy, s, write_npy};

/// Whether this machine has a wgpu adapter (else a skip note, or a failure under `CI=true`).
fn have_adapter() -> bool {
    match segformer::wgpu_adapter(0) {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "CI=true needs a wgpu adapter (Debian: apt-get install mesa-vulkan-drivers libvulkan1): {e}"
        ),
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// `predict --device wgpu --pixel-values … --raw-logits` against HF transformers' logits.
#[test]
fn predict_on_wgpu_gives_hf_logits() {
    if !have_adapter() {
        return;
    }
    let fixture = common::fixture();
    let bytes = std::fs::read(fixture.join("expected.safetensors")).unwrap();
    let expected = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |name: &str| {
        let view = expected.tensor(name).unwrap();
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        (view.shape().to_vec(), data)
    };
    let (pv_shape, pv) = f32s("pixel_values");
    let (hf_shape, hf_logits) = f32s("eval.logits");
    let tmp = tempfile::tempdir().unwrap();
    let (pv_path, out) = (tmp.path().join("pv.npy"), tmp.path().join("logits.npy"));
    write_npy(&pv_path, &pv_shape, &pv);
    ok(&[
        "predict",
        "--device",
        "wgpu",
        "--model",
        s(&fixture),
        "--pixel-values",
        s(&pv_path),
        "--raw-logits",
        "--logits",
        s(&out),
        "--output",
        s(tmp.path()),
    ]);
    let (shape, logits) = read_npy(Path::new(&out));
    assert_eq!(shape, hf_shape);
    let diff = logits
        .iter()
        .zip(&hf_logits)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-4, "logits differ from transformers by {diff}");
}

/// The plan for a GPU adds the pool's reserve to the live bytes and says where each figure
/// was measured; the CPU's has no pool.
#[test]
fn plan_for_wgpu_adds_the_pool_and_says_what_is_measured() {
    let plan = |device: &str| -> serde_json::Value {
        serde_json::from_str(&ok(&[
            "plan", "--json", "--size", "512", "--batch", "2", "--device", device,
        ]))
        .unwrap()
    };
    let (cpu, wgpu, cuda) = (plan("cpu"), plan("wgpu"), plan("cuda"));
    assert_eq!(cpu["pool"], 0);
    assert!(wgpu["pool"].as_u64().unwrap() > 0, "{wgpu}");
    assert_eq!(wgpu, cuda, "one CubeCL pool, one recompute path");
    let table = ok(&["plan", "--size", "512", "--batch", "2", "--device", "wgpu"]);
    assert!(
        table.contains("CubeCL pool reserve") && table.contains("lavapipe"),
        "{table}"
    );
}
