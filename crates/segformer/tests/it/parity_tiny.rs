//! Parity with HF transformers on the small `segformer-tiny` fixture.

use std::collections::HashMap;

use burn::backend::Flex;
use burn::tensor::TensorData;

use crate::common;

#[test]
fn tiny_eval_matches_hf() {
    let dir = testkit::fixture("segformer-tiny");
    common::check_eval(&dir, segformer::Kernels::Auto);
}

#[test]
fn tiny_train_step_matches_hf() {
    let dir = testkit::fixture("segformer-tiny");
    common::check_train(&dir, segformer::Kernels::Auto);
}

fn state(model: &segformer::Segformer<Flex>) -> HashMap<String, TensorData> {
    segformer::hf_state_dict(model).into_iter().collect()
}

/// `model.safetensors` (5.x names) and `pytorch_model.bin` (original names) hold the same model.
#[test]
fn tiny_loads_identically_from_safetensors_and_bin() {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let (from_st, report) = segformer::load_hf_dir::<Flex>(&dir, &device).unwrap();
    assert!(report.is_exact(), "{report}");

    let only_bin = tempfile::tempdir().unwrap();
    for file in ["config.json", "pytorch_model.bin"] {
        std::fs::copy(dir.join(file), only_bin.path().join(file)).unwrap();
    }
    let (from_bin, report) = segformer::load_hf_dir::<Flex>(only_bin.path(), &device).unwrap();
    assert!(report.is_exact(), "{report}");
    assert_eq!(
        report.loaded.len(),
        121 + 2,
        "121 parameters + 2 BatchNorm statistics"
    );

    let (a, b) = (state(&from_st), state(&from_bin));
    assert_eq!(a.len(), b.len());
    for (key, value) in &a {
        assert_eq!(
            value.as_bytes(),
            b[key].as_bytes(),
            "{key} differs between the two files"
        );
    }
}

/// load → save → load is exact, and the saved file uses the original key names.
#[test]
fn save_round_trip_is_bit_exact() {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<Flex>(&dir, &device).unwrap();
    let out = tempfile::tempdir().unwrap();
    let saved = out.path().join("nested/model");
    segformer::save_hf_dir(&model, &saved).unwrap();

    let bytes = std::fs::read(saved.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let names = file.names();
    assert!(
        names
            .iter()
            .any(|n| *n == "segformer.encoder.block.0.0.attention.self.query.weight")
    );
    assert!(
        names
            .iter()
            .any(|n| *n == "decode_head.linear_c.3.proj.weight")
    );
    assert!(
        !names.iter().any(|n| n.contains("stages")),
        "original names only"
    );
    // The linear weight is stored [out, in] like PyTorch: fc1 of stage 0 maps 8 -> 32.
    let fc1 = file
        .tensor("segformer.encoder.block.0.0.mlp.dense1.weight")
        .unwrap();
    assert_eq!(fc1.shape(), [32, 8]);
    let leftovers: Vec<_> = std::fs::read_dir(&saved)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        2,
        "only config.json and model.safetensors: {leftovers:?}"
    );

    let (reloaded, report) = segformer::load_hf_dir::<Flex>(&saved, &device).unwrap();
    assert!(report.is_exact(), "{report}");
    assert_eq!(reloaded.config(), model.config());
    let (a, b) = (state(&model), state(&reloaded));
    for (key, value) in &a {
        assert_eq!(
            value.as_bytes(),
            b[key].as_bytes(),
            "{key} changed in the round trip"
        );
    }
}
