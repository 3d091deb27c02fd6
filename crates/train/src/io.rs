//! Atomic file writes: a crash mid-write leaves the previous file intact.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file in the same directory, fsynced and renamed
/// over the target, then fsyncs the directory so the rename itself is durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Replaces directory `dst` by the fully written directory `staged` (both on the same filesystem):
/// the old one is moved aside, the new one renamed in, then the old one removed.
pub fn replace_dir(staged: &Path, dst: &Path) -> std::io::Result<()> {
    let old = dst.with_extension("old");
    if old.exists() {
        fs::remove_dir_all(&old)?;
    }
    if dst.exists() {
        fs::rename(dst, &old)?;
    }
    fs::rename(staged, dst)?;
    if let Some(parent) = dst.parent()
        && let Ok(d) = File::open(parent)
    {
        let _ = d.sync_all();
    }
    if old.exists() {
        fs::remove_dir_all(&old)?;
    }
    Ok(())
}

fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
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
    }
}
