//! Reading a config: TOML text with `--set key=value` overrides, errors that name the key, and
//! the config's choices (unit enums) read from their names by the same rules as flags.

use serde::de::DeserializeOwned;

use super::TrainConfig;
use crate::error::TrainError;

impl TrainConfig {
    /// Parses a config from TOML text, applying `overrides` (`key.path=value`) first.
    /// Errors name the key (unknown keys list the valid ones) and the line.
    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self, TrainError> {
        let mut value: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| TrainError::Config(e.to_string()))?;
        for o in overrides {
            apply_override(&mut value, o)?;
        }
        let cfg: TrainConfig = toml::Value::Table(value.clone())
            .try_into()
            .map_err(|e: toml::de::Error| TrainError::Config(located(&value, &e)))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config as TOML, as the run directory keeps it.
    pub fn to_toml_string(&self) -> String {
        toml::to_string_pretty(self)
            .unwrap_or_else(|e| format!("# could not serialise config: {e}\n"))
    }
}

/// A type error (`-1` for a count) as `` `train.workers = -1`: invalid value: integer `-1`,
/// expected usize ``: the table's own error has no key path, so the table is written out and
/// parsed again as text, whose error has a span, and the line at the span is named.
fn located(table: &toml::Table, error: &toml::de::Error) -> String {
    let text = toml::to_string(table).unwrap_or_default();
    let Err(e) = toml::from_str::<TrainConfig>(&text) else {
        return error.message().to_string();
    };
    let Some(span) = e.span().filter(|s| s.start <= text.len()) else {
        return e.message().to_string();
    };
    let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i);
    let line = text[start..end].trim();
    let table = text[..start]
        .lines()
        .rev()
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(['[', ']']))
        .unwrap_or("");
    let key = if table.is_empty() || line.starts_with('[') {
        line.to_string()
    } else {
        format!("{table}.{line}")
    };
    format!("`{key}`: {}", e.message())
}

/// Sets `a.b.c = value` in a TOML table; `value` is parsed as TOML (`3`, `true`, `"x"`, `[1, 2]`),
/// or taken as a string when it does not parse.
fn apply_override(root: &mut toml::Table, assignment: &str) -> Result<(), TrainError> {
    let (key, raw) = assignment.split_once('=').ok_or_else(|| {
        TrainError::Config(format!(
            "override `{assignment}` is not key=value (e.g. train.epochs=3)"
        ))
    })?;
    let key = key.trim();
    let value = format!("v = {}", raw.trim())
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(TrainError::Config(format!(
            "override key `{key}` is empty or has an empty part"
        )));
    }
    let mut table = root;
    for p in &parts[..parts.len() - 1] {
        let entry = table
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| TrainError::Config(format!("override `{key}`: `{p}` is not a table")))?;
    }
    table.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

/// A config choice (a unit enum variant) read from its name by the same serde rules as the
/// TOML key, so a flag and a key accept exactly the same words; the error lists them.
pub(crate) fn from_name<T: DeserializeOwned>(name: &str) -> Result<T, String> {
    use serde::de::value::{Error, StrDeserializer};
    let lower = name.trim().to_ascii_lowercase();
    T::deserialize(StrDeserializer::<Error>::new(&lower)).map_err(|e| format!("`{name}`: {e}"))
}
