//! Where fixtures are found, as a pure function of its inputs. Standard library only: the
//! build script of `testkit-macros` compiles this file too (`#[path]`), so the build-time
//! decision (ignore the tests or not) and the run-time lookup cannot drift apart.

use std::fmt;
use std::path::{Path, PathBuf};

/// The inputs of every fixture lookup, as values (read from the environment by
/// [`Fixtures::from_env`]; built by hand in tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixtures {
    /// `$SEGFIT_FIXTURES` when set and non-empty: then the only shared root, no fallback.
    pub env_root: Option<PathBuf>,
    /// The workspace root; `../shared/fixtures` and `tests/data/fixtures` are relative to it.
    pub workspace: PathBuf,
    /// `CI` is `true` (or `1`): a missing fixture is a failure, never a skip.
    pub ci: bool,
}

/// What the tests that need the shared fixtures should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shared {
    /// The shared root exists: run them.
    Present(PathBuf),
    /// It does not and this is not CI: mark them ignored, with this reason.
    Skip(String),
    /// It does not and this is CI: run them, so that they fail.
    Required(PathBuf),
}

/// A fixture case found in none of the places looked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The case asked for.
    pub case: String,
    /// Every directory tried, in order.
    pub tried: Vec<PathBuf>,
    /// Whether `CI=true` was set.
    pub ci: bool,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fixture {} not found in {:?}; ", self.case, self.tried)?;
        if self.ci {
            write!(
                f,
                "CI=true requires every fixture: set SEGFIT_FIXTURES to the shared fixtures directory"
            )
        } else {
            write!(
                f,
                "set SEGFIT_FIXTURES to the shared fixtures directory, and mark a test that needs them #[testkit::needs_fixtures] so that it is ignored where they are absent"
            )
        }
    }
}

impl std::error::Error for Missing {}

/// `CI`'s value as a flag: `true` or `1` (any case) mean CI.
pub fn ci_flag(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

impl Fixtures {
    /// The lookup for this process: `SEGFIT_FIXTURES` and `CI` from the environment.
    pub fn from_env(workspace: &Path) -> Self {
        Self {
            env_root: std::env::var_os("SEGFIT_FIXTURES")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            workspace: workspace.to_path_buf(),
            ci: ci_flag(std::env::var("CI").ok().as_deref()),
        }
    }

    /// The shared fixtures: `$SEGFIT_FIXTURES`, else `<workspace>/../shared/fixtures`.
    pub fn shared_root(&self) -> PathBuf {
        self.env_root
            .clone()
            .unwrap_or_else(|| self.workspace.join("../shared/fixtures"))
    }

    /// The small cases copied into the repository (always present).
    pub fn repo_root(&self) -> PathBuf {
        self.workspace.join("tests/data/fixtures")
    }

    /// The directory of fixture `case`: the shared root's, else the repository's copy.
    ///
    /// # Errors
    /// [`Missing`] when neither has it.
    pub fn find(&self, case: &str) -> Result<PathBuf, Missing> {
        let tried = vec![self.shared_root().join(case), self.repo_root().join(case)];
        match tried.iter().find(|d| d.is_dir()) {
            Some(dir) => Ok(dir.clone()),
            None => Err(Missing {
                case: case.to_owned(),
                tried,
                ci: self.ci,
            }),
        }
    }

    /// Whether the tests that need the shared fixtures run, are ignored, or must fail.
    pub fn shared(&self) -> Shared {
        let root = self.shared_root();
        if root.is_dir() {
            Shared::Present(root)
        } else if self.ci {
            Shared::Required(root)
        } else {
            Shared::Skip(format!(
                "needs the shared fixtures, absent from {} when testkit was built (set SEGFIT_FIXTURES; CI=true makes their absence a failure)",
                root.display()
            ))
        }
    }
}
