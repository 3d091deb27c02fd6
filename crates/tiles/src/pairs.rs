//! Finding image/mask pairs on disk and assigning them to splits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::TilesError;
use crate::listing::list_images;

/// The splits segfit trains and evaluates on.
pub(crate) const SPLITS: [&str; 2] = ["train", "val"];

/// One image and its mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pair {
    pub id: String,
    pub image: PathBuf,
    pub mask: PathBuf,
    pub split: &'static str,
}

/// How masks are named and how a flat folder is split.
#[derive(Clone, Debug)]
pub(crate) struct PairRules<'a> {
    pub mask_suffix: &'a str,
    pub mask_ext: &'a str,
    pub val_ratio: f64,
    pub seed: u64,
    pub skip_unpaired: bool,
}

/// Where a key falls in `[0, 1)`: a hash of `(seed, key)`, so adding files never moves others.
pub(crate) fn hash_unit(seed: u64, key: &str) -> f64 {
    // FNV-1a over the seed and the key, then splitmix64's finaliser to spread the bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.to_le_bytes().iter().chain(key.as_bytes()) {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether a stem goes to `val`: its [`hash_unit`] is below `val_ratio`.
pub(crate) fn split_of(seed: u64, stem: &str, val_ratio: f64) -> &'static str {
    if hash_unit(seed, stem) < val_ratio {
        "val"
    } else {
        "train"
    }
}

/// Gives both splits a pair when a hash split left one empty: with `val_ratio > 0` and two or
/// more pairs, the hashed pair nearest the threshold changes sides (so adding files still moves
/// at most that one). `hashed` are the indices of the pairs split by hash; a single hashed pair
/// with nothing else to pair it with is [`TilesError::TooLittleData`].
fn balance_splits(
    pairs: &mut [Pair],
    hashed: &[usize],
    rules: &PairRules<'_>,
    location: &Path,
) -> Result<(), TilesError> {
    if rules.val_ratio <= 0.0 || hashed.is_empty() {
        return Ok(());
    }
    if pairs.len() < 2 {
        return Err(TilesError::TooLittleData {
            location: location.to_path_buf(),
            reason: format!(
                "only 1 image/mask pair ({}), and train and val need one each; add pairs, or \
                 cut a large image into tiles with `--scenes`",
                pairs[0].image.display()
            ),
        });
    }
    let count = |pairs: &[Pair], split: &str| pairs.iter().filter(|p| p.split == split).count();
    let unit = |p: &Pair| hash_unit(rules.seed, &p.id);
    let (from, to, pick_max) = if count(pairs, "val") == 0 {
        ("train", "val", false)
    } else if count(pairs, "train") == 0 {
        ("val", "train", true)
    } else {
        return Ok(());
    };
    let candidates = hashed.iter().copied().filter(|&i| pairs[i].split == from);
    let chosen = if pick_max {
        candidates.max_by(|&a, &b| unit(&pairs[a]).total_cmp(&unit(&pairs[b])))
    } else {
        candidates.min_by(|&a, &b| unit(&pairs[a]).total_cmp(&unit(&pairs[b])))
    };
    if let Some(i) = chosen {
        pairs[i].split = to;
    }
    Ok(())
}

/// The image files of a directory ([`list_images`]) keyed by stem; duplicate stems are an
/// error.
fn images_by_stem(dir: &Path) -> Result<BTreeMap<String, PathBuf>, TilesError> {
    let mut out = BTreeMap::new();
    for p in list_images(dir)? {
        let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
            return Err(TilesError::input(
                &p,
                "file name is not valid UTF-8; rename it",
            ));
        };
        if let Some(prev) = out.insert(stem.to_string(), p.clone()) {
            return Err(TilesError::input(
                &p,
                format!(
                    "same stem as {}; pairs are matched by stem, so rename one",
                    prev.display()
                ),
            ));
        }
    }
    Ok(out)
}

/// Pairs the images of `image_dir` with masks `stem + suffix + . + ext` in `mask_dir`.
/// `split` is fixed for a split-layout folder, `None` to split by hash.
pub(crate) fn pair_dir(
    image_dir: &Path,
    mask_dir: &Path,
    split: Option<&'static str>,
    rules: &PairRules<'_>,
) -> Result<(Vec<Pair>, Vec<PathBuf>), TilesError> {
    let mut images = images_by_stem(image_dir)?;
    let masks = images_by_stem(mask_dir)?;
    if image_dir == mask_dir && !rules.mask_suffix.is_empty() {
        // Masks living next to their images (`a.png`, `a_mask.png`) are not images themselves.
        images.retain(|stem, _| !stem.ends_with(rules.mask_suffix));
    }
    let mut pairs = Vec::new();
    let mut missing = Vec::new();
    let mut used = BTreeSet::new();
    for (stem, image) in &images {
        let mask_name = format!("{stem}{}.{}", rules.mask_suffix, rules.mask_ext);
        let mask = mask_dir.join(&mask_name);
        // With an empty suffix the mask directory may be the image directory's twin only.
        if mask.is_file() && mask != *image {
            used.insert(format!("{stem}{}", rules.mask_suffix));
            pairs.push(Pair {
                id: stem.clone(),
                image: image.clone(),
                mask,
                split: split.unwrap_or_else(|| split_of(rules.seed, stem, rules.val_ratio)),
            });
        } else {
            missing.push(image.clone());
        }
    }
    let orphans: Vec<PathBuf> = masks
        .iter()
        .filter(|(stem, p)| {
            let matches_rule = p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case(rules.mask_ext))
                && stem.ends_with(rules.mask_suffix);
            matches_rule && !used.contains(*stem)
        })
        .map(|(_, p)| p.clone())
        .collect();
    if !missing.is_empty() && !rules.skip_unpaired {
        return Err(TilesError::MissingMasks {
            images: missing,
            mask_dir: mask_dir.to_path_buf(),
        });
    }
    if !orphans.is_empty() && !rules.skip_unpaired {
        return Err(TilesError::MissingImages { masks: orphans });
    }
    if split.is_none() {
        let all: Vec<usize> = (0..pairs.len()).collect();
        balance_splits(&mut pairs, &all, rules, image_dir)?;
    }
    let mut skipped = missing;
    skipped.extend(orphans);
    Ok((pairs, skipped))
}

/// Reads an explicit list file: one `image mask [train|val]` per line (whitespace-separated,
/// paths relative to the list file, `#` comments). Lines without a split are split by hash.
pub(crate) fn read_list(list: &Path, rules: &PairRules<'_>) -> Result<Vec<Pair>, TilesError> {
    let text = std::fs::read_to_string(list).map_err(|e| TilesError::io(list, e))?;
    let base = list.parent().unwrap_or(Path::new("."));
    let mut pairs = Vec::new();
    let mut seen = BTreeMap::new();
    let mut hashed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| TilesError::Metadata {
            path: list.to_path_buf(),
            reason: format!("line {}: {reason}", n + 1),
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (image, mask, split) = match fields.as_slice() {
            [i, m] => (base.join(i), base.join(m), None),
            [i, m, s] => {
                let s = SPLITS
                    .iter()
                    .find(|x| **x == *s)
                    .ok_or_else(|| bad(format!("split `{s}` is not train or val")))?;
                (base.join(i), base.join(m), Some(*s))
            }
            _ => return Err(bad("expected `image mask [train|val]`".into())),
        };
        for p in [&image, &mask] {
            if !p.is_file() {
                return Err(bad(format!("{} does not exist", p.display())));
            }
        }
        let id = image
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if let Some(prev) = seen.insert(id.clone(), n + 1) {
            return Err(bad(format!(
                "image stem `{id}` already used on line {prev}; stems name the prepared files"
            )));
        }
        if split.is_none() {
            hashed.push(pairs.len());
        }
        pairs.push(Pair {
            split: split.unwrap_or_else(|| split_of(rules.seed, &id, rules.val_ratio)),
            id,
            image,
            mask,
        });
    }
    balance_splits(&mut pairs, &hashed, rules, list)?;
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_images_with_one_stem_are_an_error_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.tif", "a.png", "b.png", "a.txt"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let e = images_by_stem(dir.path()).unwrap_err().to_string();
        assert!(e.contains("a.png") && e.contains("a.tif"), "{e}");
        assert!(e.contains("rename one"), "{e}");

        std::fs::remove_file(dir.path().join("a.tif")).unwrap();
        let by_stem = images_by_stem(dir.path()).unwrap();
        let stems: Vec<&str> = by_stem.keys().map(String::as_str).collect();
        assert_eq!(stems, ["a", "b"]);
        assert_eq!(by_stem["a"], dir.path().join("a.png"));
    }
}
