//! The fine-tuning recipes through the binary: an RGB checkpoint fine-tuned on two selected
//! bands of a 4-band set, then predicted on, evaluated and exported with that selection.

use crate::common::{fixture, ok, s, segfit};

#[test]
fn selected_bands_follow_the_run_into_predict_eval_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (data, run, export) = (t.join("data"), t.join("run"), t.join("export"));
    ok(&[
        "prepare",
        "--synthetic",
        "--multispectral",
        "--count",
        "6",
        "--size",
        "32",
        "--seed",
        "2",
        "--out",
        s(&data),
    ]);
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/sentinel2-b0.toml");
    let sets = [
        format!("model.pretrained={:?}", s(&fixture())),
        format!("data.root={:?}", s(&data)),
        "data.size=[32, 32]".into(),
        "data.bands=[3, 0]".into(),
        "train.epochs=2".into(),
        "train.batch_size=2".into(),
        "train.workers=1".into(),
        "train.progress=false".into(),
    ];
    let mut args = vec!["train", "--config", s(&config), "--output", s(&run)];
    for set in &sets {
        args.extend(["--set", set.as_str()]);
    }
    let out = segfit(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The load report names the adapted kernel and the rule; the loss line its weights.
    assert!(
        stderr.contains(
            "segformer.stages.0.patch_embeddings.proj.weight: 3 -> 2 bands, rule \"repeat\""
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("1·ce + 0.5·dice") && stderr.contains("class weights"),
        "{stderr}"
    );

    // predict on a stored 4-band tile: the run's processor picks bands 3 and 0.
    let image = std::fs::read_dir(data.join("images"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let pred = t.join("pred");
    ok(&[
        "predict",
        "--model",
        s(&run),
        "--input",
        s(&image),
        "--output",
        s(&pred),
    ]);
    assert!(std::fs::read_dir(&pred).unwrap().count() > 0);
    ok(&["eval", "--model", s(&run), "--data", s(&data), "--json"]);

    // export: 2 input channels, and the selection for segfit (HF's processor ignores it).
    ok(&["export", "--model", s(&run), "--output", s(&export)]);
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(export.join(f)).unwrap()).unwrap()
    };
    assert_eq!(read("config.json")["num_channels"], 2);
    assert_eq!(
        read("preprocessor_config.json")["band_indices"],
        serde_json::json!([3, 0])
    );
    // The exported directory predicts the 4-band tile the same way.
    ok(&[
        "predict",
        "--model",
        s(&export),
        "--input",
        s(&image),
        "--output",
        s(&t.join("pred2")),
    ]);
}

/// `prepare --bands`: the audit checks the selection against the images and prints the
/// selected bands' statistics in model input order, the same figures as without it.
#[test]
fn prepare_audits_the_selected_bands_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    ok(&[
        "prepare",
        "--synthetic",
        "--multispectral",
        "--count",
        "6",
        "--size",
        "32",
        "--out",
        s(&data),
    ]);
    let (images, masks) = (data.join("images"), data.join("masks"));
    let unused = tmp.path().join("unused");
    let audit = |bands: &[&str]| {
        let base = [
            "prepare",
            "--images",
            s(&images),
            "--masks",
            s(&masks),
            "--class",
            "outer=0",
            "--class",
            "rice_paddy=1",
            "--out",
            s(&unused),
            "--audit-only",
        ];
        segfit(&[&base[..], bands].concat())
    };
    let text = |o: std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let all = text(audit(&[]));
    let band_line = |out: &str, b: usize| {
        out.lines()
            .find(|l| l.starts_with(&format!("band {b}:")))
            .unwrap_or_else(|| panic!("no band {b} line in\n{out}"))
            .to_string()
    };
    let picked = text(audit(&["--bands", "3,0"]));
    let lines: Vec<&str> = picked.lines().filter(|l| l.starts_with("band ")).collect();
    assert_eq!(lines, [band_line(&all, 3), band_line(&all, 0)], "{picked}");
    assert!(
        picked.contains("selected bands (model input order): 3, 0"),
        "{picked}"
    );

    let bad = audit(&["--bands", "1,7"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(err.contains("--bands") && err.contains("4 bands"), "{err}");
    assert!(!unused.exists(), "--audit-only writes nothing");
}

/// `plan --loss`: terms beyond plain cross-entropy add one shared full-resolution copy of the
/// logits plus their own tensors (Dice: 4 more), counted here from the sizes.
#[test]
fn plan_counts_the_loss_terms() {
    let plan = |extra: &[&str]| -> serde_json::Value {
        let base = [
            "plan",
            "--size",
            "256",
            "--batch",
            "2",
            "--num-labels",
            "5",
            "--json",
        ];
        serde_json::from_str(&ok(&[&base[..], extra].concat())).unwrap()
    };
    let full = 2 * 5 * 256 * 256 * 4u64;
    assert_eq!(plan(&[])["loss_terms"], 0);
    let dice = plan(&["--loss", "ce+dice"]);
    assert_eq!(dice["loss_terms"].as_u64().unwrap(), full * (1 + 4));
    // A weighted cross-entropy leaves the fused kernel: 1 shared copy + 2 of its own.
    let weighted = plan(&["--class-weights"]);
    assert_eq!(weighted["loss_terms"].as_u64().unwrap(), full * (1 + 2));
    let bad = segfit(&["plan", "--loss", "ce+tversky"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("tversky"));
}
