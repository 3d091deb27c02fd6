//! `SEGFIT_AUTOTUNE_CACHE`: where CubeCL keeps the kernel choices its autotune measured on this
//! machine's GPUs (burn-cuda, burn-wgpu), mapped to `segformer::set_autotune` before any
//! command runs. Without it, the user's cache directory: `$XDG_CACHE_HOME/segfit/autotune`,
//! `~/.cache/segfit/autotune` (`%LOCALAPPDATA%\segfit\autotune` on Windows), so a second run
//! skips the timing the first one did, wherever it is started from.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// Applies the autotune settings for this process.
pub fn configure() -> Result<()> {
    let settings = segformer::Autotune {
        cache_dir: cache_dir(),
        level: segformer::AutotuneLevel::Balanced,
    };
    segformer::set_autotune(&settings).context("SEGFIT_AUTOTUNE_CACHE")
}

fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("SEGFIT_AUTOTUNE_CACHE") {
        return PathBuf::from(dir);
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .or_else(|| var("LOCALAPPDATA").map(PathBuf::from))
        .unwrap_or_else(std::env::temp_dir);
    base.join("segfit").join("autotune")
}
