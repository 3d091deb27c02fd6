//! The fine-tuning recipes through the binary: an RGB checkpoint fine-tuned on two selected
//! bands of a 4-band set, then predicted on, evaluated and exported with that selection.

mod common;

use common::{fixture, ok, s, segfit};

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
