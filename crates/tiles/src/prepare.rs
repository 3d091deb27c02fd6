//! `prepare_folder` and `audit`: a folder of image/mask pairs becomes the split layout.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use raster::{Mask, Raster, RasterData};

use crate::audit::{AuditReport, audit_pairs};
use crate::error::TilesError;
use crate::io::{read_image, read_mask, write_mask_png};
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
    /// Nodata value of the images, overriding their `GDAL_NODATA` tags (default `None`: each
    /// image's tag, if any). A pixel that is nodata in every band is ignored in its mask and
    /// left out of the band statistics.
    pub nodata: Option<f64>,
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
            nodata: None,
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
    let location = opts.list.as_ref().unwrap_or(&opts.images);
    Ok(audit_pairs(&pairs, &opts.labels, opts.nodata, skipped, location)?.0)
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
///
/// The mask of an image with nodata pixels (see [`FolderOptions::nodata`]) is written anew with
/// an ignore value there (see [`PrepareReport::notes`] for which).
pub fn prepare_folder(opts: &FolderOptions) -> Result<PrepareReport, TilesError> {
    let (pairs, skipped) = gather(opts)?;
    let location = opts.list.as_ref().unwrap_or(&opts.images);
    let (report, with_nodata) = audit_pairs(&pairs, &opts.labels, opts.nodata, skipped, location)?;
    let mut labels = opts.labels.clone();
    let mut notes = Vec::new();
    let fill = if with_nodata.is_empty() {
        None
    } else {
        let (value, note) = nodata_mask_value(&mut labels)?;
        notes.push(note);
        Some(value)
    };
    into_fresh_output(&opts.out, || {
        for (i, p) in pairs.iter().enumerate() {
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
            match fill.filter(|_| with_nodata.binary_search(&i).is_ok()) {
                Some(value) => write_masked(p, &mask, opts.nodata, value)?,
                None => place(&p.mask, &mask, opts.hard_link)?,
            }
        }
        let mut meta = DatasetMeta::new(
            "folder",
            &labels,
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
            notes,
        })
    })
}

/// The stored mask value that written masks get on nodata pixels, and a note saying which:
/// the first of `labels.ignore` that no class claims, else the highest value that nothing maps,
/// which is then added to `labels.ignore` (no mask holds it: the audit checks every value is
/// mapped).
pub(crate) fn nodata_mask_value(labels: &mut LabelMap) -> Result<(u8, String), TilesError> {
    let lut = labels.lookup_table();
    if let Some(&v) = labels
        .ignore
        .iter()
        .find(|&&v| lut[v as usize] == Some(Mask::IGNORE))
    {
        return Ok((
            v,
            format!("nodata pixels are stored as mask value {v} (ignored)"),
        ));
    }
    let Some(v) = (0..=255u8).rev().find(|&v| lut[v as usize].is_none()) else {
        return Err(TilesError::option(
            "labels",
            format!("{} classes", labels.num_classes()),
            "every mask value 0-255 belongs to a class, so none is left to mark nodata pixels \
             as ignored; free one value",
        ));
    };
    labels.ignore.push(v);
    Ok((
        v,
        format!(
            "nodata pixels are stored as mask value {v}, added to the ignored values (every \
             ignore value is a class)"
        ),
    ))
}

/// Writes the mask of `pair` to `dst` with `value` on the pixels whose image is nodata in every
/// band (`nodata`, else the image's `GDAL_NODATA`): a GeoTIFF (keeping the mask's
/// georeferencing) when `dst` ends in `.tif`/`.tiff`, else a PNG.
fn write_masked(pair: &Pair, dst: &Path, nodata: Option<f64>, value: u8) -> Result<(), TilesError> {
    let (image, geo) = read_image(&pair.image)?;
    let mut mask = read_mask(&pair.mask)?;
    if let Some(nd) = nodata.or(geo.and_then(|g| g.nodata)) {
        let holes = crate::stats::nodata_pixels(&image, nd);
        for (m, _) in mask.data.iter_mut().zip(holes).filter(|(_, h)| *h) {
            *m = value;
        }
    }
    let dir = dst
        .parent()
        .expect("destinations are inside the output root");
    std::fs::create_dir_all(dir).map_err(|e| TilesError::io(dir, e))?;
    let tiff = dst
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("tif") || e.eq_ignore_ascii_case("tiff"));
    if tiff {
        let mask_geo = crate::tiff_read::ChunkedReader::open(&pair.mask)
            .ok()
            .and_then(|r| r.geo().cloned());
        let raster = Raster::new(mask.width, mask.height, 1, RasterData::U8(mask.data))
            .expect("sized from the mask");
        crate::tiff_write::write_geotiff(dst, &raster, mask_geo.as_ref())
    } else {
        write_mask_png(dst, &mask)
    }
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
