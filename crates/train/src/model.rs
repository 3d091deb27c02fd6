//! Building the model a config asks for: a preset, or an HF directory's weights.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor};
use segformer::{LoadReport, Segformer, SegformerConfig};

use crate::config::ModelConfig;
use crate::error::TrainError;

/// The architecture of a preset name: `mit-b0` … `mit-b5`, or `mit-tiny` (a small 4-stage
/// model for tests and quick CPU runs).
pub fn preset(name: &str) -> Result<SegformerConfig, TrainError> {
    Ok(match name.to_ascii_lowercase().replace('_', "-").as_str() {
        "mit-b0" | "b0" => SegformerConfig::mit_b0(),
        "mit-b1" | "b1" => SegformerConfig::mit_b1(),
        "mit-b2" | "b2" => SegformerConfig::mit_b2(),
        "mit-b3" | "b3" => SegformerConfig::mit_b3(),
        "mit-b4" | "b4" => SegformerConfig::mit_b4(),
        "mit-b5" | "b5" => SegformerConfig::mit_b5(),
        "mit-tiny" | "tiny" => {
            let mut c = SegformerConfig::mit_b0();
            c.depths = vec![1, 1, 1, 1];
            c.hidden_sizes = vec![16, 32, 64, 128];
            c.num_attention_heads = vec![1, 2, 4, 8];
            c.decoder_hidden_size = 64;
            c
        }
        other => {
            return Err(TrainError::Config(format!(
                "`model.preset` = \"{other}\" is not a known model; use one of mit-b0, mit-b1, mit-b2, mit-b3, mit-b4, mit-b5, mit-tiny"
            )));
        }
    })
}

/// The model for `cfg` with `class_names` outputs and `bands` input channels, and the load
/// report when weights came from a pretrained directory (whose first kernel is adapted by
/// `cfg.input_adapt` when its band count differs).
///
/// Every parameter is drawn or loaded here, from the backend's RNG as seeded before the call:
/// burn initialises parameters lazily, at their first use, and a clone of an uninitialised
/// parameter draws its own values; so without this the initial weights (a preset's, or a
/// pretrained model's new head) would come from whatever the RNG held at the first forward,
/// and data-parallel replicas cloned from the model would start from different weights.
pub fn build_model<B: Backend>(
    cfg: &ModelConfig,
    class_names: &[String],
    bands: usize,
    device: &B::Device,
) -> Result<(Segformer<B>, Option<LoadReport>), TrainError> {
    let config = model_config(cfg, class_names, bands)?;
    let (model, report) = match &cfg.pretrained {
        Some(dir) => {
            let (model, report) =
                segformer::load_pretrained_adapted::<B>(dir, &config, cfg.input_adapt, device)?;
            (model, Some(report))
        }
        None => (config.init::<B>(device)?, None),
    };
    materialize(&model);
    Ok((model, report))
}

/// Initialises every lazily initialised parameter of `model` now, in the module's order.
fn materialize<B: Backend>(model: &Segformer<B>) {
    struct Touch;
    impl<B: Backend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
        fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<B, D, Int>>) {
            let _ = param.val();
        }
        fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<B, D, Bool>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

/// The architecture `cfg` describes, with `class_names` outputs and `bands` input channels
/// (what [`build_model`] builds; the memory planner uses it without building anything).
pub fn model_config(
    cfg: &ModelConfig,
    class_names: &[String],
    bands: usize,
) -> Result<SegformerConfig, TrainError> {
    let base = match &cfg.pretrained {
        Some(dir) => segformer::read_config(dir)?,
        None => preset(&cfg.preset)?,
    };
    let mut config = base.with_labels(class_names.to_vec());
    if let Some(r) = cfg.drop_path_rate {
        config.drop_path_rate = r;
    }
    if let Some(p) = cfg.classifier_dropout_prob {
        config.classifier_dropout_prob = p;
    }
    // A pretrained checkpoint with another band count gets its first kernel adapted
    // (`model.input_adapt`) when loaded.
    config = config.with_num_channels(bands);
    Ok(config)
}
