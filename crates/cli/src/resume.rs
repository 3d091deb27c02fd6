//! Completion markers for `predict --inputs`/`--shard`: once every output of a scene is in
//! place (each written atomically), `<out>/<name>.done.json` is written, atomically and last,
//! listing them. A rerun skips the scenes whose marker is there (and whose listed outputs
//! still are); a task killed half-way left no marker for its current scene, which is simply
//! predicted again, its partial outputs replaced.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// What a marker records. No time or host: a scene's marker is the same whichever task wrote
/// it, so the outputs of N shards are byte for byte those of one run.
#[derive(Serialize, Deserialize)]
struct Marker {
    /// How the scene was named on the command line or in the manifest.
    scene: String,
    /// Its output files, names inside the output folder.
    outputs: Vec<String>,
}

/// `<out>/<name>.done.json`.
pub fn marker_path(out: &Path, name: &str) -> PathBuf {
    out.join(format!("{name}.done.json"))
}

/// The marker of scene `name` when it finished in an earlier run: it parses and every output
/// it lists is there. A marker that does not read back is as good as none (the scene is
/// redone).
pub fn finished(out: &Path, name: &str) -> Option<PathBuf> {
    let path = marker_path(out, name);
    let marker: Marker = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    marker
        .outputs
        .iter()
        .all(|o| out.join(o).is_file())
        .then_some(path)
}

/// Writes the marker of scene `name` (`label` on the command line), listing `outputs` (paths
/// inside `out`) and their sidecars that exist (`.aux.xml`, `.qml`).
pub fn mark_done(out: &Path, name: &str, label: &str, outputs: &[PathBuf]) -> Result<()> {
    let mut names = Vec::new();
    for path in outputs {
        let mut sidecars = vec![path.clone()];
        let mut aux = path.clone().into_os_string();
        aux.push(".aux.xml");
        sidecars.push(aux.into());
        if path.extension().is_some_and(|e| e == "tif") {
            sidecars.push(path.with_extension("qml"));
        }
        for p in sidecars {
            let Some(file) = p.file_name() else { continue };
            let file = file.to_string_lossy().into_owned();
            if out.join(&file).is_file() && !names.contains(&file) {
                names.push(file);
            }
        }
    }
    let marker = Marker {
        scene: label.to_string(),
        outputs: names,
    };
    let path = marker_path(out, name);
    let text = serde_json::to_string_pretty(&marker).expect("plain data serialises") + "\n";
    fsio::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_counts_only_while_its_outputs_are_there() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        assert_eq!(finished(out, "a"), None);
        std::fs::write(out.join("a.tif"), "x").unwrap();
        std::fs::write(out.join("a.qml"), "x").unwrap();
        std::fs::write(out.join("a.stats.json"), "{}").unwrap();
        mark_done(
            out,
            "a",
            "s/a.tif",
            &[out.join("a.tif"), out.join("a.stats.json")],
        )
        .unwrap();
        let text = std::fs::read_to_string(marker_path(out, "a")).unwrap();
        assert!(
            text.contains("\"a.qml\"") && !text.contains("aux.xml"),
            "{text}"
        );
        assert_eq!(finished(out, "a"), Some(marker_path(out, "a")));
        std::fs::remove_file(out.join("a.stats.json")).unwrap();
        assert_eq!(finished(out, "a"), None);
        std::fs::write(marker_path(out, "b"), "{not json").unwrap();
        assert_eq!(finished(out, "b"), None);
    }
}
