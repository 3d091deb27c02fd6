//! Test-only helpers shared by segfit's test suites: the one fixture lookup, a local HTTP
//! object server with ranges and faults ([`http::RangeServer`]), an independent reader of
//! TensorBoard event files ([`tfevents`]), and
//! [`needs_fixtures`], which marks a test that needs the shared fixtures (`segformer-b0`,
//! `mit-b0-encoder`) ignored where they are absent, so that `cargo test` reports it as
//! ignored with the reason instead of passing it silently.
//!
//! Fixtures live in `$SEGFIT_FIXTURES` when it is set, else in `<workspace>/../shared/fixtures`;
//! the small cases are also copied into `<workspace>/tests/data/fixtures`, so tests that only
//! need those always run. With `CI=true` nothing is ignored: a missing fixture fails its test.
//!
//! ```no_run
//! #[testkit::needs_fixtures]
//! #[test]
//! fn b0_parity() {
//!     let dir = testkit::fixture("segformer-b0"); // panics with the places tried if missing
//!     # let _ = dir;
//! }
//! ```
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

pub mod http;
mod locate;
pub mod tfevents;
pub mod tiff;

pub use locate::{Fixtures, Missing, Shared, ci_flag};
/// Marks a test ignored (with the reason) when the shared fixtures were absent at build
/// time and `CI` is not `true`; otherwise leaves it unchanged. Put it above `#[test]`.
pub use testkit_macros::needs_fixtures;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the GPU tests keep CubeCL's autotune cache: one place under the workspace's `target/`
/// for every test binary, so the kernel choices timed by one run are the next run's (and a
/// crate's own directory gets no `target/` of CubeCL's default).
///
/// A fresh `target/` starts from the choices committed in `crates/testkit/autotune/`, timed on
/// Mesa's lavapipe by a whole run of the test suite: on a cold cache CubeCL times every
/// candidate kernel of every new shape on the CPU rasteriser, which was most of the wgpu tests'
/// time in CI (segformer's integration tests: 1 228 s cold, 373 s seeded, on 2 cores). The
/// entries hold the fastest kernel's index only, except the matmuls', which name the tuner's
/// fallback: compiling lavapipe's fastest tiled matmuls cost the tests more than running any
/// (`cargo xtask autotune-seed` says why). A shape they miss is timed as before, and an
/// entry whose kernel set changed (another CubeCL version, another set of candidates) fails
/// CubeCL's checksum and is timed again. Refresh them with `cargo xtask autotune-seed` after a
/// test run on lavapipe.
pub fn autotune_cache() -> PathBuf {
    let dir = autotune_cache_dir();
    static SEEDED: std::sync::Once = std::sync::Once::new();
    SEEDED.call_once(|| seed_autotune(&autotune_seed(), &dir));
    dir
}

/// The directory [`autotune_cache`] gives the tests, without seeding it: what a test run
/// timed is read from here (`cargo xtask autotune-seed`).
pub fn autotune_cache_dir() -> PathBuf {
    workspace().join("target").join("cubecl-tests")
}

/// The committed autotune choices ([`autotune_cache`]).
pub fn autotune_seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("autotune")
}

/// Copies `seed` to `cache/autotune` unless that exists, through a directory renamed into
/// place, so that a test binary never sees half a copy and two that race both end with one.
/// A failure leaves CubeCL to time the kernels, as without a seed.
fn seed_autotune(seed: &Path, cache: &Path) {
    let target = cache.join("autotune");
    if target.exists() || !seed.is_dir() {
        return;
    }
    let staging = cache.join(format!("autotune.seeding-{}", std::process::id()));
    let copied = copy_tree(seed, &staging).and_then(|()| std::fs::rename(&staging, &target));
    if copied.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}

/// The directory of fixture `case` ([`Fixtures::find`] with this process's environment).
///
/// # Panics
/// When the case is missing, naming every place tried: under `CI=true` always a failure;
/// elsewhere a test that needs the shared fixtures should carry [`needs_fixtures`] so that it
/// never gets here.
pub fn fixture(case: &str) -> PathBuf {
    Fixtures::from_env(&workspace())
        .find(case)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Whether this process runs under `CI=true` (for other required resources, e.g. a GPU
/// adapter, whose absence must fail there too).
pub fn is_ci() -> bool {
    ci_flag(std::env::var("CI").ok().as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_autotune_seed_is_copied_once_and_never_over_a_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let (seed, cache) = (tmp.path().join("seed"), tmp.path().join("cache"));
        std::fs::create_dir_all(seed.join("0.10.0/device-3-0")).unwrap();
        std::fs::write(
            seed.join("0.10.0/device-3-0/matmul.json.log"),
            "{\"k\":1}\n",
        )
        .unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        seed_autotune(&seed, &cache);
        let copied = cache.join("autotune/0.10.0/device-3-0/matmul.json.log");
        assert_eq!(std::fs::read_to_string(&copied).unwrap(), "{\"k\":1}\n");
        // What the tests then add to the cache stays: a later process does not re-seed it.
        std::fs::write(&copied, "{\"k\":1}\n{\"k\":2}\n").unwrap();
        seed_autotune(&seed, &cache);
        assert_eq!(std::fs::read_to_string(&copied).unwrap().lines().count(), 2);
        // No staging directory is left behind.
        let names: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["autotune"]);
        // Without a seed there is nothing to copy and no error.
        let other = tmp.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        seed_autotune(&tmp.path().join("missing"), &other);
        assert!(!other.join("autotune").exists());
    }

    fn lookup(env_root: Option<PathBuf>, workspace: &Path, ci: bool) -> Fixtures {
        Fixtures {
            env_root,
            workspace: workspace.to_path_buf(),
            ci,
        }
    }

    /// `<tmp>/ws` (with `tests/data/fixtures/small`) beside `<tmp>/shared/fixtures/big`.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("tests/data/fixtures/small")).unwrap();
        std::fs::create_dir_all(tmp.path().join("shared/fixtures/big")).unwrap();
        (tmp, ws)
    }

    #[test]
    fn finds_shared_cases_and_falls_back_to_the_repository_copy() {
        let (_tmp, ws) = tree();
        let f = lookup(None, &ws, false);
        assert_eq!(
            f.find("big").unwrap(),
            ws.join("../shared/fixtures/big"),
            "the shared root next to the workspace"
        );
        assert_eq!(
            f.find("small").unwrap(),
            ws.join("tests/data/fixtures/small")
        );
        assert!(matches!(f.shared(), Shared::Present(_)));
    }

    #[test]
    fn the_environment_root_replaces_the_default_one() {
        let (tmp, ws) = tree();
        let other = tmp.path().join("elsewhere");
        std::fs::create_dir_all(other.join("big")).unwrap();
        assert_eq!(
            lookup(Some(other.clone()), &ws, false).find("big").unwrap(),
            other.join("big")
        );
        // A missing $SEGFIT_FIXTURES does not fall back to ../shared: the shared cases are
        // missing, the repository's copies still found.
        let gone = lookup(Some(tmp.path().join("nonexistent")), &ws, false);
        assert!(gone.find("big").is_err());
        assert!(gone.find("small").is_ok());
        assert!(matches!(gone.shared(), Shared::Skip(_)));
    }

    #[test]
    fn a_missing_case_skips_locally_and_fails_under_ci() {
        let (tmp, ws) = tree();
        let none = Some(tmp.path().join("nonexistent"));
        let local = lookup(none.clone(), &ws, false);
        let Shared::Skip(reason) = local.shared() else {
            panic!("expected a skip, got {:?}", local.shared())
        };
        assert!(
            reason.contains("nonexistent") && reason.contains("SEGFIT_FIXTURES"),
            "{reason}"
        );
        let ci = lookup(none, &ws, true);
        assert_eq!(
            ci.shared(),
            Shared::Required(tmp.path().join("nonexistent"))
        );
        let err = ci.find("big").unwrap_err();
        assert_eq!(err.tried.len(), 2);
        assert!(err.ci && err.to_string().contains("CI=true"), "{err}");
        let panic = std::panic::catch_unwind(|| {
            ci.find("big").unwrap_or_else(|e| panic!("{e}"));
        });
        assert!(panic.is_err());
    }

    #[test]
    fn ci_flag_values() {
        for (v, want) in [
            (None, false),
            (Some(""), false),
            (Some("false"), false),
            (Some("0"), false),
            (Some("true"), true),
            (Some("TRUE"), true),
            (Some("1"), true),
        ] {
            assert_eq!(ci_flag(v), want, "{v:?}");
        }
    }
}
