//! Loading edge cases: other `num_labels`, missing or mis-shaped encoder tensors, bad dirs.

use std::path::Path;

use burn::backend::Flex;
use burn::tensor::Tensor;
use segformer::{SegformerConfig, WeightsError};

/// What [`rewrite`] does with one tensor.
enum Edit {
    Keep,
    Drop,
    /// Replace by zeros of this shape.
    Reshape(Vec<usize>),
}

/// Copies `dir`'s config and safetensors, editing tensors by key.
fn rewrite(dir: &Path, out: &Path, edit: impl Fn(&str) -> Edit) {
    std::fs::copy(dir.join("config.json"), out.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors = Vec::new();
    for (key, view) in file.tensors() {
        match edit(&key) {
            Edit::Keep => tensors.push((
                key,
                view.shape().to_vec(),
                view.data().to_vec(),
                view.dtype(),
            )),
            Edit::Drop => {}
            Edit::Reshape(shape) => {
                let n: usize = shape.iter().product();
                tensors.push((key, shape, vec![0u8; n * 4], safetensors::Dtype::F32));
            }
        }
    }
    let views: Vec<_> = tensors
        .iter()
        .map(|(k, s, d, t)| {
            (
                k.clone(),
                safetensors::tensor::TensorView::new(*t, s.clone(), d).unwrap(),
            )
        })
        .collect();
    std::fs::write(
        out.join("model.safetensors"),
        safetensors::serialize(views, &None).unwrap(),
    )
    .unwrap();
}

#[test]
fn other_num_labels_reinitialises_only_the_classifier() {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let config = segformer::read_config(&dir).unwrap().with_num_labels(5);
    let (model, report) = segformer::load_pretrained::<Flex>(&dir, &config, &device).unwrap();
    let keys: Vec<_> = report
        .mismatched
        .iter()
        .map(|(k, _, _)| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "decode_head.classifier.weight",
            "decode_head.classifier.bias"
        ]
    );
    assert_eq!(report.mismatched[0].1, [3, 16, 1, 1]);
    assert_eq!(report.mismatched[0].2, [5, 16, 1, 1]);
    assert!(
        report.initialized.is_empty() && report.unused.is_empty(),
        "{report}"
    );
    assert!(report.to_string().contains("shape mismatch"), "{report}");
    let logits = model.forward(Tensor::zeros([1, 3, 32, 32], &device));
    assert_eq!(logits.dims(), [1, 5, 8, 8]);
}

#[test]
fn missing_encoder_tensor_is_an_error_naming_the_key() {
    let dir = testkit::fixture("segformer-tiny");
    let out = tempfile::tempdir().unwrap();
    let victim = "segformer.stages.2.blocks.0.mlp.fc2.weight";
    rewrite(&dir, out.path(), |k| {
        if k == victim { Edit::Drop } else { Edit::Keep }
    });

    let err = segformer::load_hf_dir::<Flex>(out.path(), &Default::default()).unwrap_err();
    assert!(
        matches!(&err, WeightsError::Missing { key, .. } if key == victim),
        "{err}"
    );
    assert!(err.to_string().contains(victim), "{err}");
}

#[test]
fn misshaped_encoder_tensor_is_an_error_with_both_shapes() {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    // A 5×5 patch embedding cannot take the 7×7 one (another band count is adapted instead,
    // see `input_adapt`).
    let mut config = segformer::read_config(&dir).unwrap();
    config.patch_sizes[0] = 5;
    let err = segformer::load_pretrained::<Flex>(&dir, &config, &device).unwrap_err();
    match &err {
        WeightsError::ShapeMismatch {
            key,
            checkpoint,
            model,
            ..
        } => {
            assert_eq!(key, "segformer.stages.0.patch_embeddings.proj.weight");
            assert_eq!(checkpoint, &[8, 3, 7, 7]);
            assert_eq!(model, &[8, 3, 5, 5]);
        }
        other => panic!("wrong error: {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("[8, 3, 7, 7]") && msg.contains("[8, 3, 5, 5]"),
        "{msg}"
    );

    // The same through a rewritten file: a linear weight stored with the wrong shape.
    let out = tempfile::tempdir().unwrap();
    let key = "segformer.stages.1.blocks.0.attention.q_proj.weight";
    rewrite(&dir, out.path(), |k| {
        if k == key {
            Edit::Reshape(vec![16, 15])
        } else {
            Edit::Keep
        }
    });
    let err = segformer::load_hf_dir::<Flex>(out.path(), &device).unwrap_err();
    assert!(
        matches!(&err, WeightsError::ShapeMismatch { key: k, checkpoint, model, .. }
            if k == key && checkpoint == &[16, 15] && model == &[16, 16]),
        "{err}"
    );
}

#[test]
fn bad_directories_give_clear_errors() {
    let device = Default::default();
    let empty = tempfile::tempdir().unwrap();
    let err = segformer::load_hf_dir::<Flex>(empty.path(), &device).unwrap_err();
    assert!(
        matches!(err, WeightsError::Io { ref path, .. } if path.ends_with("config.json")),
        "{err}"
    );

    std::fs::write(
        empty.path().join("config.json"),
        SegformerConfig::mit_b0().to_json_string(),
    )
    .unwrap();
    let err = segformer::load_hf_dir::<Flex>(empty.path(), &device).unwrap_err();
    assert!(matches!(err, WeightsError::NoWeights { .. }), "{err}");
    assert!(err.to_string().contains("model.safetensors"), "{err}");

    std::fs::write(
        empty.path().join("config.json"),
        r#"{"hidden_sizes": [32, 64, 160, 250]}"#,
    )
    .unwrap();
    let err = segformer::load_hf_dir::<Flex>(empty.path(), &device).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("config.json") && msg.contains("hidden_sizes[3]"),
        "{msg}"
    );

    std::fs::write(empty.path().join("config.json"), "{}").unwrap();
    std::fs::write(
        empty.path().join("model.safetensors"),
        b"not a safetensors file",
    )
    .unwrap();
    let err = segformer::load_hf_dir::<Flex>(empty.path(), &device).unwrap_err();
    assert!(matches!(err, WeightsError::Format { .. }), "{err}");
}
