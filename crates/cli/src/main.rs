//! `segfit`: fine-tune SegFormer on satellite imagery from the command line.
//!
//! `main` only parses the command line and dispatches to one module per subcommand; every
//! failure ends as one `error: …` line on stderr and exit status 1.

/// `println!` for a command's results: writes to the locked stdout and returns `Result`, a
/// closed pipe (`segfit eval | head`) counting as success instead of a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod answers;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod autotune;
mod batch;
mod device;
mod eval;
mod export;
#[cfg(test)]
mod fuzz;
mod hf_preprocessor;
mod host;
mod inputs;
mod labels;
mod layers;
mod model_source;
mod npy;
mod output;
mod plan;
mod predict;
mod prepare;
mod progress;
mod resume;
mod scene;
mod stats_cmd;
mod train_cmd;
mod zones;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Fine-tune SegFormer (MiT-B0…B5) for semantic segmentation of satellite imagery.
#[derive(Parser, Debug)]
#[command(name = "segfit", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build a training dataset: pair and split an image/mask folder, tile GeoTIFF scenes, or
    /// generate the synthetic set.
    Prepare(prepare::PrepareArgs),
    /// Train a model from a run config (configs/*.toml) into a run directory.
    Train(train_cmd::TrainArgs),
    /// Evaluate a model on a prepared dataset split: mIoU, per-class metrics, confusion matrix.
    Eval(eval::EvalArgs),
    /// Predict class masks for images of any size (sliding window with blended logits).
    Predict(predict::PredictArgs),
    /// Write a model as an HF directory (config.json + model.safetensors) for transformers.
    Export(export::ExportArgs),
    /// Predict the peak memory of a training step, broken down, or fit a memory budget.
    Plan(plan::PlanArgs),
    /// Work with `predict --stats` reports: `segfit stats merge pred/*.stats.json` sums the
    /// per-scene statistics of a sharded run.
    Stats(stats_cmd::StatsArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // A flag clap cannot parse (`--batch-size -1`) is bad input like any other: one line,
        // status 1.
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{first} (see --help)");
            return ExitCode::FAILURE;
        }
    };
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if let Err(e) = autotune::configure() {
        eprintln!("error: {}", one_line(&e));
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Prepare(a) => prepare::run(&a),
        Command::Train(a) => train_cmd::run(&a),
        Command::Eval(a) => eval::run(&a),
        Command::Predict(a) => predict::run(&a),
        Command::Export(a) => export::run(&a),
        Command::Plan(a) => plan::run(&a),
        Command::Stats(a) => stats_cmd::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The context chain as one line ("reading x.toml: No such file or directory"), leaving out
/// causes that an outer message already quotes (library errors often print their source).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line.replace('\n', " ")
}

/// Writes `text` to stdout and flushes it. A reader that went away (`| head`) is not an error:
/// the output was wanted only up to there.
fn write_stdout(text: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(text).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
