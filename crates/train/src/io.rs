//! The crate's atomic writes, through segfit's one atomic write ([`fsio`]).
//!
//! Errors come back as the underlying `std::io::Error`: every caller attaches the path itself
//! (`TrainError::io(path, e)`).

use std::path::Path;

/// Writes `bytes` to `path` atomically: a crash mid-write leaves the previous file intact.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fsio::write_atomic(path, bytes).map_err(into_io)
}

/// Replaces directory `dst` by the fully written directory `staged` ([`fsio::replace_dir`]).
pub(crate) fn replace_dir(staged: &Path, dst: &Path) -> std::io::Result<()> {
    fsio::replace_dir(staged, dst).map_err(into_io)
}

fn into_io(e: fsio::FsioError) -> std::io::Error {
    e.into_parts().1
}
