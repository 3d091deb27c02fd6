//! `--device wgpu` through the real binary (lavapipe in CI): predict gives HF's logits, and
//! `plan --device wgpu` adds CubeCL's pool and says what is measured where. Without a wgpu
//! adapter the device case prints a skip note; under `CI=true` it fails.

use crate::common::{ok, raw_logits_diff_from_hf};

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
    let diff = raw_logits_diff_from_hf(&["--device", "wgpu"]);
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
    // No bf16 on wgpu: a budget that needs half precision gets f16 there.
    let fit = |device: &str| -> serde_json::Value {
        serde_json::from_str(&ok(&[
            "plan",
            "--json",
            "--size",
            "1024",
            "--batch",
            "1",
            "--memory-budget",
            "1.5GiB",
            "--device",
            device,
        ]))
        .unwrap()
    };
    // NOTE: at this size f32 with checkpointing fits first on the recompute path (its bf16
    // prediction is no smaller), so what holds is that wgpu is never offered bf16.
    let (on_cuda, on_wgpu) = (fit("cuda"), fit("wgpu"));
    assert!(
        ["f32", "bf16"].contains(&on_cuda["precision"].as_str().unwrap()),
        "{on_cuda}"
    );
    assert!(
        ["f32", "f16"].contains(&on_wgpu["precision"].as_str().unwrap()),
        "{on_wgpu}"
    );
}
