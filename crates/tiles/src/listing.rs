//! Which files of a folder are images: one extension rule for pairing images with masks,
//! opening a prepared split and `segfit predict --input DIR`.

use std::path::{Path, PathBuf};

use crate::error::TilesError;

/// The extensions of the formats [`read_image`](crate::read_image) decodes, compared without
/// regard to case.
const IMAGE_EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "tif", "tiff"];

/// Whether `path` is a file named like a PNG, JPEG or TIFF (`.png`, `.jpg`, `.jpeg`, `.tif`,
/// `.tiff`, any case). The contents are not read: [`read_image`](crate::read_image) goes by
/// them, so a mislabelled file fails there with its name.
pub(crate) fn is_image_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The image files of `dir` (PNG, JPEG or TIFF by their extension, any case), sorted by path;
/// subfolders are not searched. An empty list is not an error here: each caller says what an
/// empty folder means for it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// for name in ["b.TIF", "a.png", "notes.txt"] {
///     std::fs::write(dir.path().join(name), b"").unwrap();
/// }
/// let names: Vec<_> = tiles::list_images(dir.path()).unwrap()
///     .iter().map(|p| p.file_name().unwrap().to_owned()).collect();
/// assert_eq!(names, ["a.png", "b.TIF"]);
/// ```
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>, TilesError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| TilesError::io(dir, e))? {
        let path = entry.map_err(|e| TilesError::io(dir, e))?.path();
        if is_image_file(&path) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_other_files_are_left_out_and_a_missing_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "c.JPEG",
            "b.tiff",
            "a.jpg",
            "d.tif.aux.xml",
            "e",
            ".segfit-1.tmp",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("folder.png")).unwrap();
        let names: Vec<String> = list_images(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.jpg", "b.tiff", "c.JPEG"]);

        let missing = dir.path().join("nowhere");
        let e = list_images(&missing).unwrap_err().to_string();
        assert!(e.contains("nowhere"), "{e}");
    }
}
