//! CubeCL's autotune, as burn-cuda and burn-wgpu run it: the first time a matmul, convolution,
//! reduction or fused kernel meets a new shape (rounded to CubeCL's anchors), CubeCL times the
//! candidate kernels on the device and keeps the fastest, in memory and in a cache file per
//! device and kernel family, so that a later process skips the timing.
//!
//! CubeCL reads its settings once per process, from a `cubecl.toml` found by walking up from
//! the working directory and from `CUBECL_*` environment variables, and by default keeps the
//! cache in the `target/` directory beside the nearest `Cargo.toml` above the working directory
//! (a user's project, or a crate's own directory under `cargo test`). [`set_autotune`] gives it
//! the caller's settings instead, before the first GPU tensor: the place is the caller's choice
//! (the `segfit` binary maps `SEGFIT_AUTOTUNE_CACHE` to it, tests pin it under the workspace's
//! `target/`).

use std::path::PathBuf;
use std::sync::Arc;

use cubecl::config::autotune::AutotuneLevel as CubeclLevel;
use cubecl::config::cache::CacheConfig;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

/// How CubeCL's autotune runs in this process ([`set_autotune`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autotune {
    /// The directory of CubeCL's cache of measured choices (it adds
    /// `autotune/<cubecl version>/device-<type>-<index>-<runtime>/…` below). The device is named
    /// by its runtime and index only: a directory belongs to one machine.
    pub cache_dir: PathBuf,
    /// How finely shapes are told apart (CubeCL rounds each dimension up to an anchor; a finer
    /// level times more shapes).
    pub level: AutotuneLevel,
}

/// How finely CubeCL's autotune tells shapes apart: its anchor factor per dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutotuneLevel {
    /// Powers of 2.5: the fewest shapes timed (tests: less time spent timing).
    Minimal,
    /// Powers of 2 (CubeCL's default).
    #[default]
    Balanced,
    /// Powers of 1.5.
    Extensive,
    /// Every shape timed on its own.
    Full,
}

/// Why [`set_autotune`] could not apply the settings.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AutotuneError {
    /// CubeCL's settings were fixed earlier in this process (by an earlier call with other
    /// settings, or by CubeCL itself when a GPU device was used first).
    #[error(
        "CubeCL's settings are already fixed in this process ({found}); set the autotune \
         settings before the first GPU tensor"
    )]
    AlreadySet {
        /// The settings in force, as `cache DIR, level L`.
        found: String,
    },
}

/// Makes `settings` CubeCL's settings for this process, unless they already are. Every other
/// CubeCL setting is its default (no logging, no profiling) unless CubeCL's own environment
/// variables set it: `CUBECL_DEBUG_LOG=stderr` (or a file) logs each kernel compiled, with its
/// source, and each kernel's time. Call it before the first burn-cuda or burn-wgpu tensor:
/// CubeCL fixes its settings when a device is first used.
///
/// # Errors
/// [`AutotuneError::AlreadySet`] when CubeCL's settings are fixed and differ.
pub fn set_autotune(settings: &Autotune) -> Result<(), AutotuneError> {
    let mut state = CubeClRuntimeConfig::storage().lock();
    if let Some(config) = state.as_ref() {
        let found = (
            match &config.autotune.cache {
                CacheConfig::File(dir) => Some(dir.clone()),
                _ => None,
            },
            level_of(&config.autotune.level),
        );
        if found == (Some(settings.cache_dir.clone()), settings.level) {
            return Ok(());
        }
        let cache = match &config.autotune.cache {
            CacheConfig::File(dir) => dir.display().to_string(),
            other => format!("CubeCL's {other:?} location"),
        };
        return Err(AutotuneError::AlreadySet {
            found: format!("cache {cache}, level {:?}", found.1),
        });
    }
    let mut config = CubeClRuntimeConfig::default().override_from_env();
    config.autotune.cache = CacheConfig::File(settings.cache_dir.clone());
    config.autotune.level = match settings.level {
        AutotuneLevel::Minimal => CubeclLevel::Minimal,
        AutotuneLevel::Balanced => CubeclLevel::Balanced,
        AutotuneLevel::Extensive => CubeclLevel::Extensive,
        AutotuneLevel::Full => CubeclLevel::Full,
    };
    *state = Some(Arc::new(config));
    Ok(())
}

fn level_of(level: &CubeclLevel) -> AutotuneLevel {
    match level {
        CubeclLevel::Minimal => AutotuneLevel::Minimal,
        CubeclLevel::Balanced => AutotuneLevel::Balanced,
        CubeclLevel::Extensive => AutotuneLevel::Extensive,
        CubeclLevel::Full => AutotuneLevel::Full,
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;

    /// The settings stay CubeCL's for the process: the same again is accepted, others are
    /// refused with what is in force. (This test binary's GPU tests set the same settings
    /// through `test_support::wgpu_device`, so the first call may be theirs.)
    #[test]
    fn settings_are_fixed_once_per_process() {
        let ours = crate::test_support::autotune();
        set_autotune(&ours).unwrap();
        set_autotune(&ours).unwrap();
        let config = CubeClRuntimeConfig::get();
        assert!(
            matches!(&config.autotune.cache, CacheConfig::File(d) if *d == ours.cache_dir),
            "{:?}",
            config.autotune.cache
        );
        let other = Autotune {
            level: AutotuneLevel::Full,
            ..ours.clone()
        };
        let e = set_autotune(&other).unwrap_err().to_string();
        assert!(
            e.contains(&ours.cache_dir.display().to_string()) && e.contains("Minimal"),
            "{e}"
        );
    }
}
