//! Running the `segfit` binary through cargo, from the project root.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

use crate::project_root;

/// Whether this xtask process has built segfit already (`xtask train` runs it twice).
static BUILT: AtomicBool = AtomicBool::new(false);

/// `cargo run -p segfit -- <args>`, in the dev profile: the workspace builds every dependency
/// (burn included) with opt-level 3 even there, so training runs at full speed without a
/// second, release build of the whole dependency tree.
///
/// The build runs first as a plain `cargo build`, so its progress shows (a fresh clone compiles
/// for minutes); the run after it finds everything fresh and stays quiet.
pub fn run(args: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !BUILT.swap(true, Ordering::Relaxed) {
        eprintln!(
            "building segfit (the first build compiles burn: several minutes on 2 cores; \
             later builds take seconds)"
        );
        let status = Command::new(&cargo)
            .current_dir(project_root())
            .args(["build", "-p", "segfit"])
            .status()
            .with_context(|| format!("running {cargo} build"))?;
        if !status.success() {
            bail!("building segfit failed ({status})");
        }
    }
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
