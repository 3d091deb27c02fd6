//! `cargo xtask train`: prepare the synthetic data when missing, then `segfit train`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::{prepare, project_root};

/// The embedded default run.
pub const DEFAULT_CONFIG: &str = "configs/synthetic-quick.toml";

/// Runs the training; `args` are `segfit train` flags (`--config` defaults to [`DEFAULT_CONFIG`]).
pub fn run(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    let config = match args.iter().position(|a| a == "--config") {
        Some(i) => PathBuf::from(args.get(i + 1).context("--config needs a FILE")?),
        None => {
            args.splice(0..0, ["--config".to_string(), DEFAULT_CONFIG.to_string()]);
            PathBuf::from(DEFAULT_CONFIG)
        }
    };
    let root = project_root();
    let data = data_root(&root.join(&config))?;
    let synthetic = root.join(prepare::SYNTHETIC_OUT);
    if data == synthetic && !synthetic.join("dataset.json").is_file() {
        eprintln!(
            "no data in {}: preparing the synthetic set",
            synthetic.display()
        );
        prepare::run(&[])?;
    }
    let mut full = vec!["train".to_string()];
    full.extend(args);
    crate::segfit::run(&full)
}

/// `data.root` of a config, relative to the project root (segfit runs there), found by a plain
/// line scan so xtask needs no TOML parser.
fn data_root(config: &std::path::Path) -> Result<PathBuf> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let mut in_data = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_data = line == "[data]";
        } else if in_data
            && let Some(v) = line
                .strip_prefix("root")
                .map(str::trim_start)
                .and_then(|v| v.strip_prefix('='))
        {
            let v = v.split('#').next().unwrap_or("").trim().trim_matches('"');
            return Ok(project_root().join(v));
        }
    }
    Ok(PathBuf::new())
}
