//! Atomic file writes: a temporary file in the destination's directory, fsync, rename.

use std::fs::File;
use std::path::Path;

use crate::error::TilesError;

/// Writes a file through `fill`, so that `path` holds either the complete new content or its
/// previous state, never a partial file (a crash mid-write leaves only a stray temp file).
pub(crate) fn atomic_write<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<T, TilesError>,
) -> Result<T, TilesError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| TilesError::io(dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".segfit-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| TilesError::io(dir, e))?;
    let value = fill(tmp.as_file_mut())?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| TilesError::io(path, e))?;
    tmp.persist(path)
        .map_err(|e| TilesError::io(path, e.error))?;
    Ok(value)
}

/// Writes `bytes` to `path` atomically.
pub(crate) fn atomic_write_bytes(path: &Path, bytes: &[u8]) -> Result<(), TilesError> {
    use std::io::Write;
    atomic_write(path, |f| {
        f.write_all(bytes).map_err(|e| TilesError::io(path, e))
    })
}
