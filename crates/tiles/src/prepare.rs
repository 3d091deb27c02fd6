//! `prepare_folder` and `audit`: a folder of image/mask pairs becomes the split layout.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::audit::{AuditReport, audit_pairs};
use crate::error::TilesError;
use crate::labels::LabelMap;
use crate::meta::DatasetMeta;
use crate::pairs::{Pair, PairRules, SPLITS, pair_dir, read_list};

/// Where a folder dataset is and how to pair and split it.
///
/// `images`/`masks` are either split-layout roots (holding `train/` and `val/`) or flat folders,
/// split by a hash of `(seed, stem)` so adding files never moves existing ones; `list` replaces
/// both with an explicit list file (`image mask [train|val]` per line).
#[derive(Clone, Debug)]
pub struct FolderOptions {
    /// Image folder (flat, or with `train/` and `val/`).
    pub images: PathBuf,
    /// Mask folder, laid out like `images`.
    pub masks: PathBuf,
    /// Explicit list file; when set, `images` and `masks` are not scanned.
    pub list: Option<PathBuf>,
    /// Output root of the prepared dataset.
    pub out: PathBuf,
    /// Label mapping.
    pub labels: LabelMap,
    /// Mask file name = image stem + `mask_suffix` + `.` + `mask_ext` (default `""`).
    pub mask_suffix: String,
    /// Mask extension (default `png`).
    pub mask_ext: String,
    /// Fraction of a flat folder that goes to `val` (default 0.2).
    pub val_ratio: f64,
    /// Seed of the split hash (default 0).
    pub seed: u64,
    /// Leave unpaired images/masks out instead of failing.
    pub skip_unpaired: bool,
    /// Hard-link instead of copying where the file system allows (default true).
    pub hard_link: bool,
}

impl FolderOptions {
    /// Options with the defaults above.
    pub fn new(
        images: impl Into<PathBuf>,
        masks: impl Into<PathBuf>,
        out: impl Into<PathBuf>,
        labels: LabelMap,
    ) -> Self {
        Self {
            images: images.into(),
            masks: masks.into(),
            list: None,
            out: out.into(),
            labels,
            mask_suffix: String::new(),
            mask_ext: "png".into(),
            val_ratio: 0.2,
            seed: 0,
            skip_unpaired: false,
            hard_link: true,
        }
    }

    fn rules(&self) -> Result<PairRules<'_>, TilesError> {
        if !(0.0..1.0).contains(&self.val_ratio) {
            return Err(TilesError::option(
                "val_ratio",
                self.val_ratio,
                "must be in [0, 1)",
            ));
        }
        Ok(PairRules {
            mask_suffix: &self.mask_suffix,
            mask_ext: self.mask_ext.trim_start_matches('.'),
            val_ratio: self.val_ratio,
            seed: self.seed,
            skip_unpaired: self.skip_unpaired,
        })
    }
}

/// What `prepare_*` wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareReport {
    /// The prepared root.
    pub out: PathBuf,
    /// The metadata written to `dataset.json`.
    pub meta: DatasetMeta,
    /// The audit of the input, for folder datasets.
    pub audit: Option<AuditReport>,
    /// Tiles left out for being mostly nodata/ignore (scenes only).
    pub skipped_tiles: usize,
    /// Train tiles left out because they share pixels with a val tile (scenes only).
    pub dropped_tiles: usize,
    /// Things the user should know that did not stop the run (e.g. a label raster without
    /// georeferencing, taken as aligned with its scene).
    pub notes: Vec<String>,
}

impl fmt::Display for PrepareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(a) = &self.audit {
            write!(f, "{a}")?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        let splits: Vec<String> = self
            .meta
            .splits
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        write!(
            f,
            "prepared {} ({}) in {}",
            splits.join(", "),
            self.meta.source,
            self.out.display()
        )?;
        if self.skipped_tiles > 0 {
            write!(f, "; {} mostly-empty tiles skipped", self.skipped_tiles)?;
        }
        if self.dropped_tiles > 0 {
            write!(
                f,
                "; {} train tiles dropped for sharing pixels with val tiles",
                self.dropped_tiles
            )?;
        }
        Ok(())
    }
}

fn gather(opts: &FolderOptions) -> Result<(Vec<Pair>, Vec<PathBuf>), TilesError> {
    let rules = opts.rules()?;
    if let Some(list) = &opts.list {
        return Ok((read_list(list, &rules)?, Vec::new()));
    }
    for dir in [&opts.images, &opts.masks] {
        if !dir.is_dir() {
            return Err(TilesError::input(dir, "is not a directory"));
        }
    }
    if opts.images.join("train").is_dir() {
        let mut pairs = Vec::new();
        let mut skipped = Vec::new();
        for split in SPLITS {
            let (i, m) = (opts.images.join(split), opts.masks.join(split));
            if !i.is_dir() {
                return Err(TilesError::EmptySplit {
                    split: split.into(),
                    location: i,
                });
            }
            let (p, s) = pair_dir(&i, &m, Some(split), &rules)?;
            pairs.extend(p);
            skipped.extend(s);
        }
        Ok((pairs, skipped))
    } else {
        pair_dir(&opts.images, &opts.masks, None, &rules)
    }
}

/// Audits a folder dataset without writing anything (`--audit-only`).
pub fn audit(opts: &FolderOptions) -> Result<AuditReport, TilesError> {
    let (pairs, skipped) = gather(opts)?;
    audit_pairs(
        &pairs,
        &opts.labels,
        skipped,
        opts.list.as_ref().unwrap_or(&opts.images),
    )
}

/// Audits a dataset prepared by `prepare_*` (the split layout under `root`, with the label map of
/// its `dataset.json`): what `train` runs before spending compute on it.
pub fn audit_prepared(root: &Path) -> Result<AuditReport, TilesError> {
    let meta = DatasetMeta::load(root)?.ok_or_else(|| TilesError::Metadata {
        path: root.join(crate::meta::DATASET_JSON),
        reason: "not found; run `segfit prepare` first".into(),
    })?;
    let mut opts = FolderOptions::new(root.join("images"), root.join("masks"), root, meta.labels);
    // Prepared masks keep their source extension; tiles and synthetic masks are PNG.
    let exts: Vec<String> = ["png", "tif", "tiff"]
        .iter()
        .map(|e| e.to_string())
        .collect();
    let mut last = None;
    for ext in exts {
        opts.mask_ext = ext;
        match audit(&opts) {
            Err(e @ TilesError::MissingMasks { .. }) => last = Some(e),
            other => return other,
        }
    }
    Err(last.expect("tried at least one extension"))
}

/// Audits a folder dataset, then links or copies it into `out/{images,masks}/{train,val}/` and
/// writes `out/dataset.json` (label map, band statistics of `train`, counts).
pub fn prepare_folder(opts: &FolderOptions) -> Result<PrepareReport, TilesError> {
    let (pairs, skipped) = gather(opts)?;
    let report = audit_pairs(
        &pairs,
        &opts.labels,
        skipped,
        opts.list.as_ref().unwrap_or(&opts.images),
    )?;
    into_fresh_output(&opts.out, || {
        for p in &pairs {
            let ext = |f: &Path| {
                f.extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("png")
                    .to_ascii_lowercase()
            };
            let img =
                opts.out
                    .join("images")
                    .join(p.split)
                    .join(format!("{}.{}", p.id, ext(&p.image)));
            let mask =
                opts.out
                    .join("masks")
                    .join(p.split)
                    .join(format!("{}.{}", p.id, ext(&p.mask)));
            place(&p.image, &img, opts.hard_link)?;
            place(&p.mask, &mask, opts.hard_link)?;
        }
        let mut meta = DatasetMeta::new(
            "folder",
            &opts.labels,
            report.kind,
            report.bands,
            report.band_stats.clone(),
        );
        meta.splits = report
            .splits
            .iter()
            .map(|(k, v)| (k.clone(), v.samples))
            .collect::<BTreeMap<_, _>>();
        meta.save(&opts.out)?;
        Ok(PrepareReport {
            out: opts.out.clone(),
            meta,
            audit: Some(report),
            skipped_tiles: 0,
            dropped_tiles: 0,
            notes: Vec::new(),
        })
    })
}

/// Runs `write` on an output root that holds no dataset yet; when it fails, removes what it
/// wrote, so a corrected rerun does not trip over a half-written dataset.
pub(crate) fn into_fresh_output<T>(
    out: &Path,
    write: impl FnOnce() -> Result<T, TilesError>,
) -> Result<T, TilesError> {
    ensure_fresh_output(out)?;
    let result = write();
    if result.is_err() {
        // Both folders were verified absent above, so everything in them is ours.
        for sub in ["images", "masks"] {
            let _ = std::fs::remove_dir_all(out.join(sub));
        }
    }
    result
}

/// Refuses to mix a new dataset into an old one (stale files would silently join the splits).
fn ensure_fresh_output(out: &Path) -> Result<(), TilesError> {
    for sub in ["images", "masks"] {
        let d = out.join(sub);
        if d.exists() {
            return Err(TilesError::input(
                &d,
                "output already holds a dataset; choose an empty --out or delete it first",
            ));
        }
    }
    std::fs::create_dir_all(out).map_err(|e| TilesError::io(out, e))
}

/// Hard-links `src` to `dst`, or copies it (atomically) when linking is off or impossible.
fn place(src: &Path, dst: &Path, hard_link: bool) -> Result<(), TilesError> {
    let dir = dst
        .parent()
        .expect("destinations are inside the output root");
    std::fs::create_dir_all(dir).map_err(|e| TilesError::io(dir, e))?;
    if hard_link && std::fs::hard_link(src, dst).is_ok() {
        return Ok(());
    }
    fsio::write_atomic_with(dst, |f| {
        let mut from = std::fs::File::open(src).map_err(|e| TilesError::io(src, e))?;
        std::io::copy(&mut from, f).map_err(|e| TilesError::io(dst, e))?;
        Ok(())
    })
}
