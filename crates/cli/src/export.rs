//! `segfit export`: a model as an HF directory that transformers' `from_pretrained` loads.

use std::path::PathBuf;

use anyhow::{Context, Result};
use burn::backend::Flex;
use clap::Args;

use tiles::SampleKind;

use crate::hf_preprocessor::{HF_PREPROCESSOR_CONFIG, hf_preprocessor_config};
use crate::model_source::ModelSource;

/// Arguments of `segfit export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The model: a run directory, a checkpoint directory or an HF directory.
    #[arg(long, value_name = "M")]
    pub model: PathBuf,
    /// The HF directory to write: config.json, model.safetensors and preprocessor_config.json.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
}

/// Runs `segfit export`.
pub fn run(args: &ExportArgs) -> Result<()> {
    let source = ModelSource::resolve(&args.model)?;
    // HF SegformerImageProcessor settings, so `AutoImageProcessor.from_pretrained` preprocesses
    // like training did: HF rescales every image by one fixed factor, so the factor is the
    // training images' (1/255 for u8, 1/65535 for u16, 1 for f32).
    let pre = source.preprocessing()?;
    let kind = match pre.sample_kind {
        Some(k) => k,
        None => {
            if pre.processor.do_rescale
                && pre.processor.rescale_factor.is_none()
                && source.run_config.is_some()
            {
                eprintln!(
                    "note: the run has no {} and its dataset is gone, so its sample type is unknown; \
                     assuming u8 images (rescale_factor 1/255)",
                    train::RunPreprocessing::FILE
                );
            }
            SampleKind::U8
        }
    };
    let json = hf_preprocessor_config(&pre.processor, kind);
    // Loading and saving (rather than copying) checks the weights and turns a
    // pytorch_model.bin into safetensors.
    let model = source.load::<Flex>(&Default::default())?;
    segformer::save_hf_dir(&model, &args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let path = args.output.join(HF_PREPROCESSOR_CONFIG);
    fsio::write_atomic(&path, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "exported {} to {}",
        source.weights.display(),
        args.output.display()
    );
    Ok(())
}
