//! The HF-compatible `SegformerConfig`: parsing, presets, validation and serialisation.

use std::collections::BTreeMap;

use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use crate::compute::Activation;
use crate::model::Segformer;

/// An invalid [`SegformerConfig`], caught before any module is built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// `config.json` is not valid JSON or a field has the wrong type.
    #[error("invalid segformer config json: {0}")]
    Json(String),
    /// A per-stage list does not have `num_encoder_blocks` entries.
    #[error(
        "config field `{field}` has {found} entries but num_encoder_blocks is {expected}; give one value per encoder stage"
    )]
    StageCount {
        /// The offending list, e.g. `depths`.
        field: &'static str,
        /// `num_encoder_blocks`.
        expected: usize,
        /// The length of the list.
        found: usize,
    },
    /// A size that must be positive is zero.
    #[error("config field `{field}` must be positive, found 0")]
    Zero {
        /// The offending field, e.g. `hidden_sizes[2]`.
        field: String,
    },
    /// A stage's hidden size is not a multiple of its number of attention heads.
    #[error(
        "hidden_sizes[{stage}] = {hidden_size} is not divisible by num_attention_heads[{stage}] = {heads}"
    )]
    HeadsDoNotDivide {
        /// The stage index.
        stage: usize,
        /// `hidden_sizes[stage]`.
        hidden_size: usize,
        /// `num_attention_heads[stage]`.
        heads: usize,
    },
    /// A probability is outside `[0, 1)`.
    #[error("config field `{field}` must be in [0, 1), found {value}")]
    Probability {
        /// The offending field, e.g. `drop_path_rate`.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// `layer_norm_eps` or `initializer_range` is not a positive finite number.
    #[error("config field `{field}` must be positive and finite, found {value}")]
    NotPositive {
        /// The offending field.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// `hidden_act` names an activation we do not implement.
    #[error(
        "config field `hidden_act` = {0:?} is not supported; use \"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\", \"relu\" or \"silu\""
    )]
    Activation(String),
    /// `num_labels` and `id2label` disagree, or `id2label` keys are not `0..n`.
    #[error("config labels are inconsistent: {0}")]
    Labels(String),
    /// `reshape_last_stage = false` changes the encoder's output layout, which we do not support.
    #[error(
        "config field `reshape_last_stage` = false is not supported (segmentation models need it true)"
    )]
    ReshapeLastStage,
}

/// A SegFormer configuration, field for field HF's `SegformerConfig` (`config.json`).
///
/// Fields that HF writes but that do not change the network (`model_type`,
/// `transformers_version`, `architectures`, …) are kept in `extra` so that a config
/// round-trips through [`SegformerConfig::to_json_string`].
///
/// NOTE: HF's modeling code ignores `layer_norm_eps`: every LayerNorm is built with
/// PyTorch's default eps 1e-5, and so are ours. The field is kept for round-tripping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegformerConfig {
    /// Input bands (3 for RGB, 4 for RGB+NIR, 13 for Sentinel-2 …).
    #[serde(default = "d_num_channels")]
    pub num_channels: usize,
    /// Number of encoder stages (4 for every MiT).
    #[serde(default = "d_num_encoder_blocks")]
    pub num_encoder_blocks: usize,
    /// Transformer blocks per stage.
    #[serde(default = "d_depths")]
    pub depths: Vec<usize>,
    /// Sequence-reduction ratio of the attention per stage.
    #[serde(default = "d_sr_ratios")]
    pub sr_ratios: Vec<usize>,
    /// Channels per stage.
    #[serde(default = "d_hidden_sizes")]
    pub hidden_sizes: Vec<usize>,
    /// Patch-embedding kernel size per stage.
    #[serde(default = "d_patch_sizes")]
    pub patch_sizes: Vec<usize>,
    /// Patch-embedding stride per stage.
    #[serde(default = "d_strides")]
    pub strides: Vec<usize>,
    /// Attention heads per stage.
    #[serde(default = "d_heads")]
    pub num_attention_heads: Vec<usize>,
    /// Mix-FFN expansion ratio per stage.
    #[serde(default = "d_mlp_ratios")]
    pub mlp_ratios: Vec<usize>,
    /// Mix-FFN activation (`"gelu"` = exact erf GELU).
    #[serde(default = "d_hidden_act")]
    pub hidden_act: String,
    /// Dropout after the attention output projection and inside the Mix-FFN.
    #[serde(default)]
    pub hidden_dropout_prob: f64,
    /// Dropout on the attention probabilities.
    #[serde(default)]
    pub attention_probs_dropout_prob: f64,
    /// Dropout before the decode head's classifier.
    #[serde(default = "d_classifier_dropout")]
    pub classifier_dropout_prob: f64,
    /// Std of the normal init of linear and conv weights.
    #[serde(default = "d_initializer_range")]
    pub initializer_range: f64,
    /// Stochastic depth at the last block; rises linearly from 0 over all blocks.
    #[serde(default = "d_drop_path_rate")]
    pub drop_path_rate: f64,
    /// Kept for HF compatibility; unused by HF's (and our) modeling code.
    #[serde(default = "d_layer_norm_eps")]
    pub layer_norm_eps: f64,
    /// Channels of the all-MLP decode head.
    #[serde(default = "d_decoder_hidden_size")]
    pub decoder_hidden_size: usize,
    /// Label value skipped by the loss.
    #[serde(default = "d_ignore_index")]
    pub semantic_loss_ignore_index: i64,
    /// Must be true (the encoder returns `[B, C, H, W]` maps for every stage).
    #[serde(default = "d_true")]
    pub reshape_last_stage: bool,
    /// Output classes; HF derives it from `id2label` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_labels: Option<usize>,
    /// Class names by id (keys are decimal ids, as in HF's JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id2label: Option<BTreeMap<String, String>>,
    /// Class ids by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label2id: Option<BTreeMap<String, i64>>,
    /// Every other field of `config.json`, preserved verbatim.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn d_num_channels() -> usize {
    3
}
fn d_num_encoder_blocks() -> usize {
    4
}
fn d_depths() -> Vec<usize> {
    vec![2, 2, 2, 2]
}
fn d_sr_ratios() -> Vec<usize> {
    vec![8, 4, 2, 1]
}
fn d_hidden_sizes() -> Vec<usize> {
    vec![32, 64, 160, 256]
}
fn d_patch_sizes() -> Vec<usize> {
    vec![7, 3, 3, 3]
}
fn d_strides() -> Vec<usize> {
    vec![4, 2, 2, 2]
}
fn d_heads() -> Vec<usize> {
    vec![1, 2, 5, 8]
}
fn d_mlp_ratios() -> Vec<usize> {
    vec![4, 4, 4, 4]
}
fn d_hidden_act() -> String {
    "gelu".into()
}
fn d_classifier_dropout() -> f64 {
    0.1
}
fn d_initializer_range() -> f64 {
    0.02
}
fn d_drop_path_rate() -> f64 {
    0.1
}
fn d_layer_norm_eps() -> f64 {
    1e-6
}
fn d_decoder_hidden_size() -> usize {
    256
}
fn d_ignore_index() -> i64 {
    255
}
fn d_true() -> bool {
    true
}

impl Default for SegformerConfig {
    /// HF's `SegformerConfig()` defaults: MiT-B0 with 2 labels.
    fn default() -> Self {
        Self::mit(vec![32, 64, 160, 256], vec![2, 2, 2, 2], 256)
    }
}

impl SegformerConfig {
    fn mit(hidden_sizes: Vec<usize>, depths: Vec<usize>, decoder_hidden_size: usize) -> Self {
        let mut extra = serde_json::Map::new();
        extra.insert("model_type".into(), "segformer".into());
        Self {
            num_channels: 3,
            num_encoder_blocks: 4,
            depths,
            sr_ratios: d_sr_ratios(),
            hidden_sizes,
            patch_sizes: d_patch_sizes(),
            strides: d_strides(),
            num_attention_heads: d_heads(),
            mlp_ratios: d_mlp_ratios(),
            hidden_act: d_hidden_act(),
            hidden_dropout_prob: 0.0,
            attention_probs_dropout_prob: 0.0,
            classifier_dropout_prob: d_classifier_dropout(),
            initializer_range: d_initializer_range(),
            drop_path_rate: d_drop_path_rate(),
            layer_norm_eps: d_layer_norm_eps(),
            decoder_hidden_size,
            semantic_loss_ignore_index: d_ignore_index(),
            reshape_last_stage: true,
            num_labels: None,
            id2label: None,
            label2id: None,
            extra,
        }
        .with_num_labels(2)
    }

    /// MiT-B0 (3.7 M parameters with a 150-class head), 2 labels.
    pub fn mit_b0() -> Self {
        Self::mit(vec![32, 64, 160, 256], vec![2, 2, 2, 2], 256)
    }
    /// MiT-B1, 2 labels.
    pub fn mit_b1() -> Self {
        Self::mit(vec![64, 128, 320, 512], vec![2, 2, 2, 2], 256)
    }
    /// MiT-B2, 2 labels.
    pub fn mit_b2() -> Self {
        Self::mit(vec![64, 128, 320, 512], vec![3, 4, 6, 3], 768)
    }
    /// MiT-B3, 2 labels.
    pub fn mit_b3() -> Self {
        Self::mit(vec![64, 128, 320, 512], vec![3, 4, 18, 3], 768)
    }
    /// MiT-B4, 2 labels.
    pub fn mit_b4() -> Self {
        Self::mit(vec![64, 128, 320, 512], vec![3, 8, 27, 3], 768)
    }
    /// MiT-B5, 2 labels.
    pub fn mit_b5() -> Self {
        Self::mit(vec![64, 128, 320, 512], vec![3, 6, 40, 3], 768)
    }

    /// Sets `num_labels` and replaces the label maps by HF's defaults (`LABEL_0`, …).
    pub fn with_num_labels(self, num_labels: usize) -> Self {
        let names = (0..num_labels).map(|i| format!("LABEL_{i}")).collect();
        self.with_labels(names)
    }

    /// Sets the class names; `num_labels` becomes `names.len()`.
    pub fn with_labels(mut self, names: Vec<String>) -> Self {
        self.num_labels = Some(names.len());
        self.label2id = Some(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as i64))
                .collect(),
        );
        self.id2label = Some(
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| (i.to_string(), n))
                .collect(),
        );
        self
    }

    /// Sets the number of input bands.
    pub fn with_num_channels(mut self, num_channels: usize) -> Self {
        self.num_channels = num_channels;
        self
    }

    /// Parses an HF `config.json` and validates it.
    pub fn from_json_str(json: &str) -> Result<Self, ConfigError> {
        let config: Self =
            serde_json::from_str(json).map_err(|e| ConfigError::Json(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Serialises to an HF-compatible `config.json` (pretty-printed, `num_labels` derived
    /// from `id2label` like HF writes it).
    pub fn to_json_string(&self) -> String {
        let mut config = self.clone();
        if config.id2label.is_some() {
            // HF never writes num_labels; it re-derives it from id2label.
            config.num_labels = None;
        }
        serde_json::to_string_pretty(&config).expect("a config always serialises")
    }

    /// The number of output classes (`num_labels`, else `len(id2label)`, else HF's default 2).
    pub fn num_labels(&self) -> usize {
        match (self.num_labels, &self.id2label) {
            (Some(n), _) => n,
            (None, Some(map)) => map.len(),
            (None, None) => 2,
        }
    }

    /// Stochastic-depth rate of every block, stage by stage, like
    /// `torch.linspace(0, drop_path_rate, sum(depths))`.
    pub fn drop_path_rates(&self) -> Vec<Vec<f64>> {
        let total: usize = self.depths.iter().sum();
        let rate = |k: usize| {
            if total <= 1 {
                0.0
            } else {
                // torch.linspace computes in f32 then `.item()` widens to f64.
                (self.drop_path_rate as f32 * k as f32 / (total - 1) as f32) as f64
            }
        };
        let mut k = 0;
        self.depths
            .iter()
            .map(|&d| {
                (0..d)
                    .map(|_| {
                        k += 1;
                        rate(k - 1)
                    })
                    .collect()
            })
            .collect()
    }

    pub(crate) fn activation(&self) -> Result<Activation, ConfigError> {
        match self.hidden_act.as_str() {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            "silu" | "swish" => Ok(Activation::Silu),
            other => Err(ConfigError::Activation(other.to_string())),
        }
    }

    /// Checks every invariant `init` relies on; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.num_encoder_blocks;
        if n == 0 {
            return Err(ConfigError::Zero {
                field: "num_encoder_blocks".into(),
            });
        }
        if self.num_channels == 0 {
            return Err(ConfigError::Zero {
                field: "num_channels".into(),
            });
        }
        if self.decoder_hidden_size == 0 {
            return Err(ConfigError::Zero {
                field: "decoder_hidden_size".into(),
            });
        }
        let lists: [(&'static str, &Vec<usize>, bool); 7] = [
            ("depths", &self.depths, false),
            ("sr_ratios", &self.sr_ratios, true),
            ("hidden_sizes", &self.hidden_sizes, true),
            ("patch_sizes", &self.patch_sizes, true),
            ("strides", &self.strides, true),
            ("num_attention_heads", &self.num_attention_heads, true),
            ("mlp_ratios", &self.mlp_ratios, true),
        ];
        for (field, list, positive) in lists {
            if list.len() != n {
                return Err(ConfigError::StageCount {
                    field,
                    expected: n,
                    found: list.len(),
                });
            }
            if positive && let Some(i) = list.iter().position(|&v| v == 0) {
                return Err(ConfigError::Zero {
                    field: format!("{field}[{i}]"),
                });
            }
        }
        for stage in 0..n {
            let (hidden_size, heads) = (self.hidden_sizes[stage], self.num_attention_heads[stage]);
            if hidden_size % heads != 0 {
                return Err(ConfigError::HeadsDoNotDivide {
                    stage,
                    hidden_size,
                    heads,
                });
            }
        }
        for (field, value) in [
            ("hidden_dropout_prob", self.hidden_dropout_prob),
            (
                "attention_probs_dropout_prob",
                self.attention_probs_dropout_prob,
            ),
            ("classifier_dropout_prob", self.classifier_dropout_prob),
            ("drop_path_rate", self.drop_path_rate),
        ] {
            if !(0.0..1.0).contains(&value) {
                return Err(ConfigError::Probability { field, value });
            }
        }
        for (field, value) in [
            ("layer_norm_eps", self.layer_norm_eps),
            ("initializer_range", self.initializer_range),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::NotPositive { field, value });
            }
        }
        if !self.reshape_last_stage {
            return Err(ConfigError::ReshapeLastStage);
        }
        self.activation()?;
        self.validate_labels()
    }

    fn validate_labels(&self) -> Result<(), ConfigError> {
        if self.num_labels() == 0 {
            return Err(ConfigError::Zero {
                field: "num_labels".into(),
            });
        }
        if let Some(map) = &self.id2label {
            if let Some(n) = self.num_labels
                && n != map.len()
            {
                return Err(ConfigError::Labels(format!(
                    "num_labels is {n} but id2label has {} entries; drop one of them or make them agree",
                    map.len()
                )));
            }
            for key in map.keys() {
                match key.parse::<usize>() {
                    Ok(id) if id < map.len() => {}
                    _ => {
                        return Err(ConfigError::Labels(format!(
                            "id2label key {key:?} is not an id in 0..{}",
                            map.len()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Builds a freshly initialised model (HF init: normal(0, `initializer_range`) weights,
    /// zero biases, unit norms).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Segformer<B>, ConfigError> {
        self.validate()?;
        Ok(Segformer::new(self, device))
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
