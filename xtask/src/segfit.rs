//! Running the `segfit` binary through cargo, from the project root.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::project_root;

/// `cargo run -p segfit -- <args>`, in the dev profile: the workspace builds every dependency
/// (burn included) with opt-level 3 even there, so training runs at full speed without a
/// second, release build of the whole dependency tree.
pub fn run(args: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(project_root())
        .args(["run", "--quiet", "-p", "segfit", "--"])
        .args(args)
        .status()
        .with_context(|| format!("running {cargo}"))?;
    if !status.success() {
        bail!(
            "segfit {} failed ({status})",
            args.first().map(String::as_str).unwrap_or("")
        );
    }
    Ok(())
}
