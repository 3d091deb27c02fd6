//! Unit tests of `SegformerConfig` parsing, presets and validation.

use super::*;

const TINY_JSON: &str = include_str!("../../../tests/data/fixtures/segformer-tiny/config.json");

#[test]
fn reads_hf_config_json() {
    let c = SegformerConfig::from_json_str(TINY_JSON).unwrap();
    assert_eq!(c.hidden_sizes, [8, 16, 24, 32]);
    assert_eq!(c.depths, [1, 1, 1, 1]);
    assert_eq!(c.num_attention_heads, [1, 2, 3, 4]);
    assert_eq!(c.decoder_hidden_size, 16);
    assert_eq!(c.num_labels(), 3, "derived from id2label");
    assert_eq!(c.semantic_loss_ignore_index, 255);
    assert_eq!(c.extra["transformers_version"], "5.24.0");
}

#[test]
fn json_round_trip_keeps_every_field() {
    let c = SegformerConfig::from_json_str(TINY_JSON).unwrap();
    let back = SegformerConfig::from_json_str(&c.to_json_string()).unwrap();
    assert_eq!(back, c);
    let original: serde_json::Value = serde_json::from_str(TINY_JSON).unwrap();
    let written: serde_json::Value = serde_json::from_str(&c.to_json_string()).unwrap();
    assert_eq!(written, original, "same JSON object as HF wrote");
}

#[test]
fn num_labels_without_id2label_is_used() {
    let c = SegformerConfig::from_json_str(r#"{"num_labels": 7}"#).unwrap();
    assert_eq!(c.num_labels(), 7);
    assert_eq!(
        SegformerConfig::from_json_str("{}").unwrap().num_labels(),
        2
    );
}

#[test]
fn presets_have_the_official_sizes() {
    let b5 = SegformerConfig::mit_b5();
    assert_eq!(b5.depths, [3, 6, 40, 3]);
    assert_eq!(b5.hidden_sizes, [64, 128, 320, 512]);
    assert_eq!(b5.decoder_hidden_size, 768);
    assert_eq!(SegformerConfig::mit_b1().decoder_hidden_size, 256);
    for c in [
        SegformerConfig::mit_b0(),
        SegformerConfig::mit_b1(),
        SegformerConfig::mit_b2(),
        SegformerConfig::mit_b3(),
        SegformerConfig::mit_b4(),
        b5,
    ] {
        c.validate().unwrap();
        assert_eq!(c.num_labels(), 2);
        assert_eq!((c.drop_path_rate, c.classifier_dropout_prob), (0.1, 0.1));
    }
}

#[test]
fn drop_path_rises_linearly_over_all_blocks() {
    let rates = SegformerConfig::mit_b2().drop_path_rates();
    let flat: Vec<f64> = rates.iter().flatten().copied().collect();
    assert_eq!(rates.iter().map(Vec::len).collect::<Vec<_>>(), [3, 4, 6, 3]);
    // torch.linspace(0, 0.1, 16)
    for (k, r) in flat.iter().enumerate() {
        assert!((r - 0.1 * k as f64 / 15.0).abs() < 1e-7, "block {k}: {r}");
    }
}

fn check(json: &str, expected: ConfigError) {
    assert_eq!(
        SegformerConfig::from_json_str(json).unwrap_err(),
        expected,
        "{json}"
    );
}

#[test]
fn invalid_configs_name_the_field() {
    check(
        r#"{"hidden_sizes": [32, 64, 160, 250]}"#,
        ConfigError::HeadsDoNotDivide {
            stage: 3,
            hidden_size: 250,
            heads: 8,
        },
    );
    check(
        r#"{"depths": [2, 2, 2]}"#,
        ConfigError::StageCount {
            field: "depths",
            expected: 4,
            found: 3,
        },
    );
    check(
        r#"{"strides": [4, 0, 2, 2]}"#,
        ConfigError::Zero {
            field: "strides[1]".into(),
        },
    );
    check(
        r#"{"num_channels": 0}"#,
        ConfigError::Zero {
            field: "num_channels".into(),
        },
    );
    check(
        r#"{"num_labels": 0}"#,
        ConfigError::Zero {
            field: "num_labels".into(),
        },
    );
    check(
        r#"{"drop_path_rate": 1.5}"#,
        ConfigError::Probability {
            field: "drop_path_rate",
            value: 1.5,
        },
    );
    check(
        r#"{"hidden_act": "mish"}"#,
        ConfigError::Activation("mish".into()),
    );
    assert!(matches!(
        SegformerConfig::from_json_str(r#"{"num_labels": 3, "id2label": {"0": "a"}}"#),
        Err(ConfigError::Labels(_))
    ));
    assert!(matches!(
        SegformerConfig::from_json_str(r#"{"depths": "two"}"#),
        Err(ConfigError::Json(_))
    ));
    let msg = SegformerConfig::mit_b0()
        .with_num_channels(0)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("num_channels"), "{msg}");
}
