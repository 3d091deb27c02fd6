//! `segfit export`: a model as an HF directory that transformers' `from_pretrained` loads.

use std::path::PathBuf;

use anyhow::{Context, Result};
use burn::backend::Flex;
use clap::Args;

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
    // Loading and saving (rather than copying) checks the weights and turns a
    // pytorch_model.bin into safetensors.
    let model = source.load::<Flex>(&Default::default())?;
    segformer::save_hf_dir(&model, &args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let size = source.window(512);
    let processor = source.processor(None)?;
    // HF SegformerImageProcessor settings, so `AutoImageProcessor.from_pretrained` preprocesses
    // like training did.
    let json = serde_json::json!({
        "image_processor_type": "SegformerImageProcessor",
        "do_resize": true,
        "size": { "height": size[0], "width": size[1] },
        "resample": 2,
        "do_rescale": true,
        "rescale_factor": 1.0 / 255.0,
        "do_normalize": true,
        "image_mean": processor.image_mean,
        "image_std": processor.image_std,
        "do_reduce_labels": false,
    });
    let path = args.output.join("preprocessor_config.json");
    fsio::write_atomic(&path, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "exported {} to {}",
        source.weights.display(),
        args.output.display()
    );
    Ok(())
}
