//! `docs/guide/configuration.md` documents exactly the keys a run's TOML accepts. The accepted
//! keys are not listed by hand here: each table of the config is given an unknown key, and
//! the error (`deny_unknown_fields`) names the valid ones, so a field added to the config types
//! without its row in the reference fails this test, and so does a row for a key that is gone.

use std::collections::BTreeSet;
use std::path::Path;

use train::TrainConfig;

/// The names an "unknown field" error lists as expected.
fn expected_fields(toml: &str) -> Vec<String> {
    let err = TrainConfig::from_toml_str(toml, &[])
        .expect_err("an unknown key must be refused")
        .to_string();
    let (_, expected) = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("the error should list the valid keys: {err}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Every key the config accepts, as `--set` names it (`train.early_stopping.patience`).
fn accepted_keys() -> BTreeSet<String> {
    const DATA: &str = "[data]\nroot = \"data\"\n";
    let mut keys = BTreeSet::new();
    let sections = expected_fields("unknown_key_for_the_test = 1\n");
    assert!(sections.len() >= 8, "top-level tables: {sections:?}");
    for section in sections {
        let toml = if section == "data" {
            "[data]\nroot = \"data\"\nunknown_key_for_the_test = 1\n".to_string()
        } else {
            format!("{DATA}[{section}]\nunknown_key_for_the_test = 1\n")
        };
        for field in expected_fields(&toml) {
            keys.insert(format!("{section}.{field}"));
        }
    }
    // The one table nested inside a table.
    let nested = expected_fields(&format!(
        "{DATA}[train]\nearly_stopping = {{ unknown_key_for_the_test = 1 }}\n"
    ));
    for field in nested {
        keys.insert(format!("train.early_stopping.{field}"));
    }
    keys
}

/// The keys the reference has a row for: the first code span of each table row.
fn documented_keys() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/configuration.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(key, _)| key.to_string())
        .collect()
}

#[test]
fn the_configuration_reference_documents_every_key_and_only_those() {
    let accepted = accepted_keys();
    let documented = documented_keys();
    assert!(
        accepted.contains("train.epochs") && accepted.contains("model.input_adapt"),
        "the keys were not read from the errors: {accepted:?}"
    );
    let undocumented: Vec<_> = accepted.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty(),
        "keys the config accepts with no row in docs/guide/configuration.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/guide/configuration.md documents keys the config does not accept: {unknown:?}"
    );
}

#[test]
fn every_documented_default_is_the_configs_default() {
    // The reference's default column for the plain numbers and words, against a config with
    // only `[model]` and `data.root` (and an empty `train.early_stopping`, whose keys have defaults of
    // their own): what a run gets when the key is left out.
    let cfg = TrainConfig::from_toml_str(
        "[model]\n[data]\nroot = \"data\"\n[train]\nearly_stopping = {}\n",
        &[],
    )
    .unwrap();
    let written: toml::Table = cfg.to_toml_string().parse().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/configuration.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (key, default) = (cells[1].trim_matches('`'), cells[3]);
        let Some(default) = default.strip_prefix('`').and_then(|d| d.strip_suffix('`')) else {
            continue; // prose ("none", "the checkpoint's", "required")
        };
        let mut value: Option<&toml::Value> = None;
        let mut table = &written;
        for (i, part) in key.split('.').enumerate() {
            match table.get(part) {
                Some(toml::Value::Table(t)) if i + 1 < key.split('.').count() => table = t,
                v => value = v,
            }
        }
        let value = value.unwrap_or_else(|| panic!("{key}: no value in the default config"));
        let documented: toml::Value =
            format!("v = {default}").parse::<toml::Table>().unwrap()["v"].clone();
        let same = match (&documented, value) {
            (toml::Value::Float(a), toml::Value::Float(b)) => a == b,
            (toml::Value::Integer(a), toml::Value::Float(b)) => *a as f64 == *b,
            (a, b) => a == b,
        };
        assert!(
            same,
            "{key}: documented default {default}, the config's is {value}"
        );
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} defaults were compared");
}
