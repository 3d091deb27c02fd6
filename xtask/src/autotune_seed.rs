//! `cargo xtask autotune-seed`: the kernel choices CubeCL's autotune timed in this checkout's
//! last test run (`target/cubecl-tests/autotune`, on Mesa's lavapipe in CI) written as the
//! committed seed a fresh `target/` starts from (`testkit::autotune_cache`).
//!
//! CubeCL appends one JSON line per timed shape to a `.json.log` file per kernel family; the
//! seed keeps each key's last line with its `fastest_index` and checksum, and drops the timing
//! results (CubeCL reads only the index back), sorted so that a refresh diffs line by line.
//!
//! Matmuls are the exception: their entries are seeded with the tuner's first candidate, the one
//! burn keeps as the fallback for every shape ([`FALLBACK_FAMILIES`]), not the one lavapipe
//! timed fastest.

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

/// The kernel families whose seed entries name the tuner's first candidate instead of the timed
/// one: burn's naive matmul (`matmul_naive`) and, for a matmul with fused element-wise ops,
/// `fused_matmul_fallback` (the unfused matmul, then the ops as one fused element-wise kernel).
///
/// The tests' shapes are small, so on lavapipe compiling a kernel costs far more than running
/// it, and the tiled matmuls lavapipe times fastest are the largest shaders CubeCL writes: in
/// the tiny model's eval and training step on wgpu, 56 of them were 92 % of the WGSL (about
/// 5 000 lines each, unrolled register tiles), at about 0.5 s of Mesa's time apiece. None of
/// them is what a real GPU runs (burn-cuda picks tensor-core kernels), and the tests check the
/// model's graph under fusion, not burn's matmul tiling, so the fallback serves them: the
/// wgpu tests' time is in CONTRIBUTING.md. Convolutions and reductions keep their timed choice.
const FALLBACK_FAMILIES: [&str; 2] = [
    "burn_cubecl-kernel-matmul-tune-base.json.log",
    "burn_cubecl_fusion-optim-matmul-tune.json.log",
];

/// The last entry of each key of one cache file, without its timing results, sorted by key;
/// in [`FALLBACK_FAMILIES`], with the first candidate as the fastest.
fn seed_lines(path: &Path) -> Result<Vec<String>> {
    let fallback = path
        .file_name()
        .is_some_and(|name| FALLBACK_FAMILIES.iter().any(|f| name == *f));
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
                if fallback {
                    value.insert("fastest_index".into(), Value::from(0));
                }
            }
            None => bail!("{}:{}: no `value` object", path.display(), n + 1),
        }
        by_key.insert(key, entry.to_string());
    }
    Ok(by_key.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two timings of one key and one of another, as CubeCL appends them.
    const LOG: &str = concat!(
        r#"{"key":{"k":2},"value":{"fastest_index":5,"results":[{"t":1}]}}"#,
        "\n",
        r#"{"key":{"k":1},"value":{"fastest_index":3,"results":[{"t":2}]}}"#,
        "\n\n",
        r#"{"key":{"k":1},"value":{"fastest_index":4,"results":[{"t":3}]}}"#,
        "\n",
    );

    fn seeded(file: &str) -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file);
        std::fs::write(&path, LOG).unwrap();
        seed_lines(&path)
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_timed_family_keeps_each_keys_last_choice_without_its_timings() {
        let lines = seeded("burn_cubecl-kernel-conv-forward-tune.json.log");
        let got: Vec<(i64, i64)> = lines
            .iter()
            .map(|v| {
                assert_eq!(v["value"]["results"], Value::Array(Vec::new()));
                (
                    v["key"]["k"].as_i64().unwrap(),
                    v["value"]["fastest_index"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, [(1, 4), (2, 5)]);
    }

    #[test]
    fn matmul_families_are_seeded_with_the_fallback() {
        for family in FALLBACK_FAMILIES {
            let lines = seeded(family);
            assert_eq!(lines.len(), 2, "{family}");
            for v in lines {
                assert_eq!(v["value"]["fastest_index"], 0, "{family}: {v}");
            }
        }
    }

    #[test]
    fn a_line_that_is_not_json_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json.log");
        std::fs::write(&path, "{\"key\":1,\"value\":{}}\nnot json\n").unwrap();
        let err = format!("{:#}", seed_lines(&path).unwrap_err());
        assert!(err.contains("x.json.log:2: not a JSON entry"), "{err}");
    }
}
