//! `cargo xtask autotune-seed`: the kernel choices CubeCL's autotune timed in this checkout's
//! last test run (`target/cubecl-tests/autotune`, on Mesa's lavapipe in CI) written as the
//! committed seed a fresh `target/` starts from (`testkit::autotune_cache`).
//!
//! CubeCL appends one JSON line per timed shape to a `.json.log` file per kernel family; the
//! seed keeps each key's last line with its `fastest_index` and checksum, and drops the timing
//! results (CubeCL reads only the index back), sorted so that a refresh diffs line by line.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

pub fn run(args: &[String]) -> Result<()> {
    if let Some(extra) = args.first() {
        bail!("autotune-seed takes no arguments (got `{extra}`)");
    }
    let from = testkit::autotune_cache_dir().join("autotune");
    let to = testkit::autotune_seed();
    if !from.is_dir() {
        bail!(
            "{} does not exist: run the wgpu tests first (CI=true cargo test --workspace, on lavapipe)",
            from.display()
        );
    }
    let staging = to.with_extension("new");
    let _ = std::fs::remove_dir_all(&staging);
    let (files, entries) = seed_tree(&from, &staging)?;
    if to.exists() {
        std::fs::remove_dir_all(&to).with_context(|| format!("removing {}", to.display()))?;
    }
    std::fs::rename(&staging, &to)
        .with_context(|| format!("moving the seed to {}", to.display()))?;
    println!(
        "{entries} kernel choices in {files} files -> {}",
        to.display()
    );
    Ok(())
}

/// Seeds every `.json.log` under `from` into the same place under `to`: (files, entries).
fn seed_tree(from: &Path, to: &Path) -> Result<(usize, usize)> {
    std::fs::create_dir_all(to)?;
    let (mut files, mut entries) = (0, 0);
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            let (f, e) = seed_tree(&path, &dest)?;
            (files, entries) = (files + f, entries + e);
        } else if path.to_string_lossy().ends_with(".json.log") {
            let lines = seed_lines(&path)?;
            entries += lines.len();
            files += 1;
            std::fs::write(&dest, lines.join("\n") + "\n")
                .with_context(|| format!("writing {}", dest.display()))?;
        }
    }
    Ok((files, entries))
}

/// The last entry of each key of one cache file, without its timing results, sorted by key.
fn seed_lines(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut by_key = BTreeMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut entry: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a JSON entry", path.display(), n + 1))?;
        let key = entry
            .get("key")
            .map(Value::to_string)
            .with_context(|| format!("{}:{}: no `key`", path.display(), n + 1))?;
        match entry.get_mut("value").and_then(Value::as_object_mut) {
            Some(value) => {
                value.insert("results".into(), Value::Array(Vec::new()));
            }
            None => bail!("{}:{}: no `value` object", path.display(), n + 1),
        }
        by_key.insert(key, entry.to_string());
    }
    Ok(by_key.into_values().collect())
}
