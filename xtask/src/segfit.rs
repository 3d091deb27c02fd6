//! Building the `segfit` binary (dev profile) and running it from the project root.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

use crate::project_root;

/// Whether this xtask process has built segfit already (`xtask train` runs it twice).
static BUILT: AtomicBool = AtomicBool::new(false);

/// `segfit <args>` from the dev-profile build: the workspace builds every dependency (burn
/// included) with opt-level 3 even there, so training runs at full speed without a second,
/// release build of the whole dependency tree.
///
/// The build runs first as a plain `cargo build`, so its progress shows (a fresh clone compiles
/// for minutes), then the binary runs directly.
pub fn run(args: &[String]) -> Result<()> {
    if !BUILT.swap(true, Ordering::Relaxed) {
        eprintln!(
            "building segfit (the first build compiles burn: several minutes on 2 cores; \
             later builds take seconds)"
        );
        build()?;
    }
    let status = Command::new(binary())
        .current_dir(project_root())
        .args(args)
        .status()
        .context("running segfit")?;
    if !status.success() {
        bail!(
            "segfit {} failed ({status})",
            args.first().map(String::as_str).unwrap_or("")
        );
    }
    Ok(())
}

/// `cargo build -p segfit` (dev profile, as `cargo xtask train` runs it) and the binary's path,
/// for the benchmarks that time the binary itself rather than cargo.
pub fn build() -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(project_root())
        .args(["build", "-p", "segfit"])
        .status()
        .with_context(|| format!("running {cargo} build"))?;
    if !status.success() {
        bail!("building segfit failed ({status})");
    }
    Ok(binary())
}

/// Where `cargo build -p segfit` puts the binary.
fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"));
    target.join("debug").join("segfit")
}
