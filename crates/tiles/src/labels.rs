//! Label mapping: which stored mask values mean which class, and which are ignored.

use std::fmt::Write as _;
use std::path::Path;

use raster::Mask;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::TilesError;

/// One class and the stored mask values that mean it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelClass {
    /// The class name (`rice_paddy`).
    pub name: String,
    /// Mask values that mean this class (`[255]`).
    pub values: Vec<u8>,
}

/// Maps stored mask values to class indices (the order of `classes`) or to [`Mask::IGNORE`].
///
/// Deserialises from a table whose key order is the class order, e.g. in TOML
/// `classes = { outer = [0], rice_paddy = [255] }`, or from a list of `{ name, values }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelMap {
    /// Classes in index order.
    #[serde(serialize_with = "ser_classes", deserialize_with = "de_classes")]
    pub classes: Vec<LabelClass>,
    /// Stored values mapped to [`Mask::IGNORE`] (default `[255]`); a value listed in a class wins.
    #[serde(default = "default_ignore")]
    pub ignore: Vec<u8>,
    /// HF's `do_reduce_labels`: stored 0 becomes ignore and every other value `v` becomes class
    /// `v - 1` (255 stays ignored). The class `values` are then not used.
    #[serde(default)]
    pub reduce_labels: bool,
}

fn default_ignore() -> Vec<u8> {
    vec![Mask::IGNORE]
}

impl LabelMap {
    /// A mapping from `(name, values)` pairs, in class order, ignoring 255.
    pub fn new(classes: &[(&str, &[u8])]) -> Self {
        Self {
            classes: classes
                .iter()
                .map(|(n, v)| LabelClass {
                    name: n.to_string(),
                    values: v.to_vec(),
                })
                .collect(),
            ignore: default_ignore(),
            reduce_labels: false,
        }
    }

    /// Class `i` is stored as value `i` (the synthetic dataset's and HF's usual layout).
    pub fn identity(names: &[&str]) -> Self {
        let pairs: Vec<(&str, Vec<u8>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, vec![i as u8]))
            .collect();
        let refs: Vec<(&str, &[u8])> = pairs.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        Self::new(&refs)
    }

    /// Class names in index order.
    pub fn class_names(&self) -> Vec<String> {
        self.classes.iter().map(|c| c.name.clone()).collect()
    }

    /// Number of classes.
    pub fn num_classes(&self) -> usize {
        self.classes.len()
    }

    /// Checks the mapping itself: at least one class, at most 255, unique names, no value in
    /// two classes.
    pub fn validate(&self) -> Result<(), TilesError> {
        let err = |reason: String| {
            TilesError::option("labels", format!("{} classes", self.classes.len()), reason)
        };
        if self.classes.is_empty() {
            return Err(err("define at least one class".into()));
        }
        if self.classes.len() > 255 {
            return Err(err(
                "at most 255 classes fit in 8-bit masks next to the ignore value".into(),
            ));
        }
        let mut owner: [Option<&str>; 256] = [None; 256];
        for (i, c) in self.classes.iter().enumerate() {
            if self.classes[..i].iter().any(|o| o.name == c.name) {
                return Err(err(format!("class name `{}` appears twice", c.name)));
            }
            if self.reduce_labels {
                continue;
            }
            for &v in &c.values {
                if let Some(o) = owner[v as usize] {
                    return Err(err(format!(
                        "value {v} is listed for both `{o}` and `{}`",
                        c.name
                    )));
                }
                owner[v as usize] = Some(&c.name);
            }
        }
        Ok(())
    }

    /// The class index (or [`Mask::IGNORE`]) of every stored value; `None` for unmapped values.
    pub fn lookup_table(&self) -> [Option<u8>; 256] {
        let mut lut = [None; 256];
        if self.reduce_labels {
            lut[0] = Some(Mask::IGNORE);
            lut[255] = Some(Mask::IGNORE);
            let n = self.classes.len().min(254);
            for (v, slot) in lut.iter_mut().enumerate().skip(1).take(n) {
                *slot = Some((v - 1) as u8);
            }
        } else {
            for (i, c) in self.classes.iter().enumerate() {
                for &v in &c.values {
                    lut[v as usize] = Some(i as u8);
                }
            }
        }
        for &v in &self.ignore {
            lut[v as usize].get_or_insert(Mask::IGNORE);
        }
        lut
    }

    /// Maps a stored mask to class indices; `path` names the mask in the error, which lists every
    /// unmapped value with its pixel count.
    pub fn apply(&self, mask: &Mask, path: &Path) -> Result<Mask, TilesError> {
        let lut = self.lookup_table();
        let mut data = Vec::with_capacity(mask.data.len());
        let mut unmapped = [0u64; 256];
        for &v in &mask.data {
            match lut[v as usize] {
                Some(c) => data.push(c),
                None => {
                    unmapped[v as usize] += 1;
                    data.push(Mask::IGNORE);
                }
            }
        }
        let values: Vec<_> = (0..256)
            .filter(|&v| unmapped[v] > 0)
            .map(|v| (v as u8, unmapped[v], path.to_path_buf()))
            .collect();
        if !values.is_empty() {
            let found: Vec<u8> = (0..=255u8).filter(|&v| mask.data.contains(&v)).collect();
            return Err(TilesError::UnmappedValues {
                suggestion: self.suggest(&found),
                values,
            });
        }
        Ok(Mask {
            width: mask.width,
            height: mask.height,
            data,
        })
    }

    /// A mapping hint for a dataset whose masks hold the values `found` (sorted, distinct), e.g.
    /// `values {0, 255} with 2 classes: map 255 to rice_paddy?`.
    pub fn suggest(&self, found: &[u8]) -> Option<String> {
        let n = self.classes.len();
        let set = found
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if found.len() == n && n > 0 {
            let lut = self.lookup_table();
            let mut hint = format!("values {{{set}}} with {n} classes: map");
            let mut first = true;
            for (v, c) in found.iter().zip(&self.classes) {
                if lut[*v as usize] != Some(self.class_index(&c.name)) {
                    let _ = write!(hint, "{} {v} to {}", if first { "" } else { "," }, c.name);
                    first = false;
                }
            }
            hint.push('?');
            return Some(hint);
        }
        if !self.reduce_labels && found.iter().all(|&v| v >= 1 && v as usize <= n) {
            return Some(format!(
                "values {{{set}}} look 1-based with {n} classes: set reduce_labels = true?"
            ));
        }
        None
    }

    fn class_index(&self, name: &str) -> u8 {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .unwrap_or(0) as u8
    }
}

fn ser_classes<S: Serializer>(classes: &[LabelClass], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(classes.len()))?;
    for c in classes {
        m.serialize_entry(&c.name, &c.values)?;
    }
    m.end()
}

fn de_classes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LabelClass>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<LabelClass>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table of class name = [mask values], or a list of { name, values }")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            // Entries arrive in document order, which is the class order.
            let mut out = Vec::new();
            while let Some((name, values)) = map.next_entry::<String, Vec<u8>>()? {
                out.push(LabelClass { name, values });
            }
            Ok(out)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(c) = seq.next_element::<LabelClass>()? {
                out.push(c);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}
