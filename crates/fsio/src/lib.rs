//! segfit's one atomic file write: the new content goes to a temporary sibling of the target,
//! is fsynced, then renamed over it, so readers (and a crash) see either the old file or the
//! complete new one, never a partial file.
//!
//! Files end with the permissions a plain [`std::fs::File::create`] gives them (`0o666` less
//! the process umask: `0o644` under the usual `022`), not the owner-only `0o600` of a bare
//! temporary file. An interrupted write leaves at most a stray `.segfit-*.tmp` next to the
//! target, which dataset readers skip (its name starts with a dot).
//!
//! ```
//! use std::io::Write;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out/metrics.json");
//! fsio::write_atomic(&path, b"{}").unwrap();
//!
//! // Streaming: the closure writes into the temporary file (it can also seek).
//! let len = fsio::write_atomic_with(&path, |file| {
//!     file.write_all(b"{\"loss\": 0.5}")
//!         .map_err(|e| fsio::FsioError::Write { path: path.clone(), source: e })?;
//!     Ok::<_, fsio::FsioError>(13)
//! })
//! .unwrap();
//! assert_eq!(std::fs::read(&path).unwrap().len(), len);
//! ```
#![deny(missing_docs)]

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What went wrong, and on which path.
#[derive(Debug, thiserror::Error)]
pub enum FsioError {
    /// The destination's directory could not be created, or no temporary file made in it.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Writing or syncing the new content failed; the destination is untouched.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The destination file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Renaming the new content (a file or a directory) over the destination failed.
    #[error("cannot replace {path}: {source}")]
    Replace {
        /// The destination.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl FsioError {
    /// The path the failure concerns.
    pub fn path(&self) -> &Path {
        match self {
            Self::Create { path, .. } | Self::Write { path, .. } | Self::Replace { path, .. } => {
                path
            }
        }
    }

    /// The path and the underlying IO error, for callers that keep their own `Io` variant.
    pub fn into_parts(self) -> (PathBuf, std::io::Error) {
        match self {
            Self::Create { path, source }
            | Self::Write { path, source }
            | Self::Replace { path, source } => (path, source),
        }
    }
}

/// Writes `bytes` to `path` atomically, creating its directory if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FsioError> {
    write_atomic_with(path, |file| {
        file.write_all(bytes).map_err(|source| FsioError::Write {
            path: path.to_path_buf(),
            source,
        })
    })
}

/// Writes `path` atomically through `fill`, which gets the temporary file (`Write + Seek`:
/// encoders such as TIFF's can seek back) and may fail with the caller's own error type.
///
/// When `fill` fails, the temporary file is removed and `path` keeps its previous content.
/// `fill` need not flush a plain `File`; a buffered writer it wraps around the file must be
/// flushed inside `fill`, so its errors surface.
pub fn write_atomic_with<T, E: From<FsioError>>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<T, E>,
) -> Result<T, E> {
    let mut file = AtomicFile::create(path)?;
    // On error `file` is dropped, which deletes the temporary file.
    let value = fill(file.file_mut())?;
    file.commit()?;
    Ok(value)
}

/// A file written over time (e.g. a scene's outputs, row by row) that appears at its path only
/// when [`AtomicFile::commit`] is called: until then the content lives in a temporary sibling,
/// which is deleted if the `AtomicFile` is dropped uncommitted (an error half-way leaves the
/// previous file, or none).
///
/// ```
/// use std::io::Write;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("regions.geojson");
/// let mut file = fsio::AtomicFile::create(&path).unwrap();
/// file.write_all(b"{\"type\": ").unwrap();
/// assert!(!path.exists()); // nothing at the path until the commit
/// file.write_all(b"\"FeatureCollection\", \"features\": []}").unwrap();
/// file.commit().unwrap();
/// assert!(std::fs::read_to_string(&path).unwrap().ends_with("[]}"));
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts `path`: creates its directory if needed and a temporary file beside it.
    pub fn create(path: &Path) -> Result<Self, FsioError> {
        let dir = parent_dir(path);
        fs::create_dir_all(dir).map_err(|source| FsioError::Create {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut builder = tempfile::Builder::new();
        builder.prefix(".segfit-").suffix(".tmp");
        // tempfile creates 0o600; ask for what `File::create` would give (the kernel applies
        // the umask to the mode passed at creation, so no process-global state is read or
        // changed).
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let tmp = builder
            .tempfile_in(dir)
            .map_err(|source| FsioError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
        Ok(Self {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// The destination (not the temporary file).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, for writers that also seek.
    pub fn file_mut(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// Syncs the content and renames it over the destination.
    pub fn commit(mut self) -> Result<(), FsioError> {
        let write = |source| FsioError::Write {
            path: self.path.clone(),
            source,
        };
        self.tmp.as_file_mut().flush().map_err(write)?;
        self.tmp.as_file().sync_all().map_err(write)?;
        self.tmp
            .persist(&self.path)
            .map_err(|e| FsioError::Replace {
                path: self.path.clone(),
                source: e.error,
            })?;
        sync_dir(parent_dir(&self.path));
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tmp.as_file_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.as_file_mut().flush()
    }
}

/// Replaces directory `dst` by the fully written directory `staged` (both on the same
/// filesystem): the old one is moved aside to `dst.old`, the new one renamed in, then the old
/// one removed. A crash in between leaves `dst.old` holding the previous content.
pub fn replace_dir(staged: &Path, dst: &Path) -> Result<(), FsioError> {
    let replace = |source| FsioError::Replace {
        path: dst.to_path_buf(),
        source,
    };
    let old = dst.with_extension("old");
    if old.exists() {
        fs::remove_dir_all(&old).map_err(replace)?;
    }
    if dst.exists() {
        fs::rename(dst, &old).map_err(replace)?;
    }
    fs::rename(staged, dst).map_err(replace)?;
    sync_dir(parent_dir(dst));
    if old.exists() {
        fs::remove_dir_all(&old).map_err(replace)?;
    }
    Ok(())
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Makes a rename in `dir` durable. Best effort: not every platform can open a directory.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_content_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["a.json"]);
    }

    #[test]
    fn creates_missing_directories() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/y/z.bin");
        write_atomic(&p, &[1, 2, 3]).unwrap();
        assert_eq!(fs::read(&p).unwrap(), [1, 2, 3]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp() {
        #[derive(Debug)]
        enum MyError {
            Encode,
            Fs(FsioError),
        }
        impl From<FsioError> for MyError {
            fn from(e: FsioError) -> Self {
                MyError::Fs(e)
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.tif");
        write_atomic(&p, b"old").unwrap();
        let r: Result<(), MyError> = write_atomic_with(&p, |f| {
            f.write_all(b"half of the new").unwrap();
            Err(MyError::Encode)
        });
        assert!(matches!(r, Err(MyError::Encode)));
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["a.tif"]);
        // fsio's own failures convert into the caller's error
        let blocker = dir.path().join("file");
        fs::write(&blocker, "").unwrap();
        let r: Result<(), MyError> = write_atomic_with(&blocker.join("below"), |_| Ok(()));
        match r {
            Err(MyError::Fs(e @ FsioError::Create { .. })) => assert_eq!(e.path(), blocker),
            other => panic!("expected a Create error, got {other:?}"),
        }
    }

    #[test]
    fn streaming_writer_can_seek_and_returns_its_value() {
        use std::io::{Seek, SeekFrom};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.bin");
        let n = write_atomic_with(&p, |f| -> Result<usize, FsioError> {
            f.write_all(b"xxxxbody").unwrap();
            f.seek(SeekFrom::Start(0)).unwrap();
            f.write_all(b"HEAD").unwrap();
            Ok(8)
        })
        .unwrap();
        assert_eq!((n, fs::read(&p).unwrap()), (8, b"HEADbody".to_vec()));
    }

    #[cfg(unix)]
    #[test]
    fn permissions_match_a_plain_file_create() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // What `File::create` gives under this process's umask, whatever it is: computed, not
        // set, since the umask is process-global and other tests run in parallel.
        let plain = dir.path().join("plain");
        File::create(&plain).unwrap();
        let expected = fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
        let p = dir.path().join("atomic");
        write_atomic(&p, b"x").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            expected
        );
        write_atomic(&p, b"y").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            expected
        );
    }

    #[test]
    fn an_atomic_file_appears_only_on_commit_and_vanishes_if_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("layer.geojson");
        write_atomic(&p, b"old").unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"new ").unwrap();
        f.write_all(b"content").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(
            names(dir.path()).len(),
            2,
            "the temporary file sits beside the target"
        );
        f.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new content");
        assert_eq!(names(dir.path()), ["layer.geojson"]);

        let mut dropped = AtomicFile::create(&p).unwrap();
        dropped.write_all(b"half-way").unwrap();
        drop(dropped);
        assert_eq!(fs::read(&p).unwrap(), b"new content");
        assert_eq!(names(dir.path()), ["layer.geojson"]);
    }

    #[test]
    fn replace_dir_swaps_contents() {
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("best");
        fs::create_dir(&dst).unwrap();
        fs::write(dst.join("x"), "old").unwrap();
        let staged = dir.path().join("best.staging");
        fs::create_dir(&staged).unwrap();
        fs::write(staged.join("x"), "new").unwrap();
        replace_dir(&staged, &dst).unwrap();
        assert_eq!(fs::read_to_string(dst.join("x")).unwrap(), "new");
        assert!(!staged.exists() && !dst.with_extension("old").exists());
        // into a place that did not exist yet
        let fresh = dir.path().join("fresh");
        let staged = dir.path().join("fresh.staging");
        fs::create_dir(&staged).unwrap();
        replace_dir(&staged, &fresh).unwrap();
        assert!(fresh.is_dir() && !staged.exists());
    }
}
