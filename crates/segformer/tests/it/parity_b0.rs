//! Parity with HF transformers on the full-size MiT-B0 fixtures (shared fixtures only:
//! skipped with a note when absent, a failure when absent and `CI=true`).

use burn::backend::Flex;
use burn::tensor::Tensor;
use segformer::SegformerConfig;

use crate::common;

#[testkit::needs_fixtures]
#[test]
fn b0_eval_matches_hf() {
    let dir = testkit::fixture("segformer-b0");
    common::check_eval(&dir, segformer::Kernels::Auto);
}

#[testkit::needs_fixtures]
#[test]
fn b0_train_step_matches_hf() {
    let dir = testkit::fixture("segformer-b0");
    common::check_train(&dir, segformer::Kernels::Auto);
}

/// An ImageNet MiT-B0 classification checkpoint (original names, `.bin`) into a 2-class
/// segmentation model: encoder loaded, head fresh, `classifier.*` reported unused.
#[testkit::needs_fixtures]
#[test]
fn mit_b0_encoder_loads_into_two_class_model() {
    let dir = testkit::fixture("mit-b0-encoder");
    let device = Default::default();
    let config = SegformerConfig::mit_b0().with_num_labels(2);
    let (model, report) = segformer::load_pretrained::<Flex>(&dir, &config, &device).unwrap();
    assert_eq!(report.unused, ["classifier.bias", "classifier.weight"]);
    assert!(report.mismatched.is_empty(), "{report}");
    assert!(
        report.loaded.iter().all(|k| k.starts_with("segformer.")),
        "{report}"
    );
    assert!(
        report
            .initialized
            .iter()
            .all(|k| k.starts_with("decode_head.")),
        "{report}"
    );
    // 4 projections (w, b) + fuse + BatchNorm (w, b, mean, var) + classifier (w, b).
    assert_eq!(report.initialized.len(), 8 + 1 + 4 + 2, "{report}");
    let summary = report.to_string();
    assert!(
        summary.contains("unused checkpoint tensors: 2"),
        "{summary}"
    );

    let exp = common::expected(&dir);
    let pixels = Tensor::<Flex, 4>::from_data(exp["pixel_values"].clone(), &device);
    let (logits, hidden) = model.forward_with_hidden_states(pixels);
    assert_eq!(logits.dims(), [1, 2, 16, 16]);
    for (i, h) in hidden.into_iter().enumerate() {
        let key = format!("encoder.hidden_state.{i}");
        common::assert_close(&key, &h.into_data(), &exp[&key], common::EVAL);
    }
}
