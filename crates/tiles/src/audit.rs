//! The dataset audit: decode every pair once, check it, and summarise what the masks hold.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use raster::{Mask, SampleKind};

use crate::error::TilesError;
use crate::io::{read_image, read_mask};
use crate::labels::LabelMap;
use crate::pairs::{Pair, SPLITS};
use crate::stats::{BandStats, StatsAccumulator, nodata_pixels};

/// What one split holds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SplitAudit {
    /// Pairs in the split.
    pub samples: usize,
    /// Pixels per class, in class order.
    pub class_pixels: Vec<u64>,
    /// Pixels mapped to ignore, nodata pixels included.
    pub ignored_pixels: u64,
    /// Pixels whose image is nodata in every band (ignored whatever their mask holds).
    pub nodata_pixels: u64,
    /// All mask pixels.
    pub total_pixels: u64,
}

impl SplitAudit {
    /// Fraction of mask pixels that are ignored.
    pub fn ignored_fraction(&self) -> f64 {
        self.ignored_pixels as f64 / self.total_pixels.max(1) as f64
    }
}

/// The result of a successful audit.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AuditReport {
    /// Pairs found (all splits).
    pub pairs: usize,
    /// Per-split summaries (`train`, `val`).
    pub splits: BTreeMap<String, SplitAudit>,
    /// Unpaired files left out because `skip_unpaired` was set.
    pub skipped: Vec<PathBuf>,
    /// Image sizes (`WxH`) and how many images have each.
    pub sizes: BTreeMap<String, usize>,
    /// Bands per image.
    pub bands: usize,
    /// Image sample type.
    pub kind: SampleKind,
    /// Class names in index order.
    pub classes: Vec<String>,
    /// Histogram of the stored (unmapped) mask values over all splits.
    pub raw_values: BTreeMap<u8, u64>,
    /// Per-band statistics over the training split.
    pub band_stats: Vec<BandStats>,
    /// The stored band each entry of `band_stats` describes (`0..bands` until
    /// [`AuditReport::select_bands`] picks some).
    pub band_numbers: Vec<usize>,
}

impl AuditReport {
    /// Keeps the statistics of the stored bands `bands` (0-based), in that order: the bands a
    /// model with `data.bands = [...]` sees. A band the images lack, or one listed twice, is an
    /// error naming it.
    pub fn select_bands(mut self, bands: &[usize]) -> Result<Self, TilesError> {
        let invalid = |reason: String| TilesError::InvalidOption {
            key: "--bands".into(),
            value: format!("{bands:?}"),
            reason,
        };
        if bands.is_empty() {
            return Err(invalid("selects no band; list 0-based band indices".into()));
        }
        for (i, &b) in bands.iter().enumerate() {
            if b >= self.bands {
                return Err(invalid(format!(
                    "the images have {} bands, so indices go 0..{}",
                    self.bands, self.bands
                )));
            }
            if bands[..i].contains(&b) {
                return Err(invalid(format!("band {b} is listed twice; list each once")));
            }
        }
        if !self.band_stats.is_empty() {
            self.band_stats = bands.iter().map(|&b| self.band_stats[b].clone()).collect();
        }
        self.band_numbers = bands.to_vec();
        Ok(self)
    }
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} pairs, {} bands of {}",
            self.pairs, self.bands, self.kind
        )?;
        let sizes: Vec<String> = self
            .sizes
            .iter()
            .map(|(s, n)| format!("{s} ×{n}"))
            .collect();
        writeln!(f, "image sizes: {}", sizes.join(", "))?;
        let raw: Vec<String> = self
            .raw_values
            .iter()
            .map(|(v, n)| format!("{v}: {n}"))
            .collect();
        writeln!(f, "stored mask values: {}", raw.join(", "))?;
        for (name, s) in &self.splits {
            write!(
                f,
                "{name}: {} samples, {:.2}% ignored",
                s.samples,
                100.0 * s.ignored_fraction()
            )?;
            if s.nodata_pixels > 0 {
                write!(f, " ({} nodata pixels)", s.nodata_pixels)?;
            }
            writeln!(f)?;
            let counted = (s.total_pixels - s.ignored_pixels).max(1) as f64;
            for (c, n) in self.classes.iter().zip(&s.class_pixels) {
                writeln!(
                    f,
                    "  {c:<16} {n:>12} px  {:6.2}%",
                    100.0 * *n as f64 / counted
                )?;
            }
        }
        if self.band_numbers.len() != self.bands {
            let picked: Vec<String> = self.band_numbers.iter().map(|b| b.to_string()).collect();
            writeln!(
                f,
                "selected bands (model input order): {}",
                picked.join(", ")
            )?;
        }
        for (&b, st) in self.band_numbers.iter().zip(&self.band_stats) {
            write!(
                f,
                "band {b}: mean {:.2} std {:.2} min {} max {}",
                st.mean, st.std, st.min, st.max
            )?;
            if let (Some(lo), Some(hi)) = (st.p2, st.p98) {
                write!(f, " p2 {lo} p98 {hi}")?;
            }
            writeln!(f)?;
        }
        if !self.skipped.is_empty() {
            writeln!(f, "skipped {} unpaired files", self.skipped.len())?;
        }
        Ok(())
    }
}

/// An audit and the pairs whose image has nodata pixels (indices into the audited pairs).
pub(crate) type Audited = (AuditReport, Vec<usize>);

/// Decodes every pair, checks sizes, band counts and mask values, and summarises.
///
/// A pixel is nodata when every band of its image equals `nodata`, else the image's own
/// `GDAL_NODATA`: it counts as ignored, its mask value need not be mapped, and it stays out of
/// the band statistics.
pub(crate) fn audit_pairs(
    pairs: &[Pair],
    labels: &LabelMap,
    nodata: Option<f64>,
    skipped: Vec<PathBuf>,
    location: &Path,
) -> Result<Audited, TilesError> {
    labels.validate()?;
    let lut = labels.lookup_table();
    let nc = labels.num_classes();
    let mut splits: BTreeMap<String, SplitAudit> = SPLITS
        .iter()
        .map(|s| {
            let a = SplitAudit {
                class_pixels: vec![0; nc],
                ..Default::default()
            };
            (s.to_string(), a)
        })
        .collect();
    let mut sizes = BTreeMap::new();
    let mut values = ValueTally::new();
    let mut first: Option<(&Path, usize, SampleKind)> = None;
    let mut stats: Option<StatsAccumulator> = None;
    let mut with_nodata = Vec::new();
    for (index, pair) in pairs.iter().enumerate() {
        let (image, geo) = read_image(&pair.image)?;
        match first {
            None => {
                first = Some((&pair.image, image.bands, image.kind()));
                stats = Some(StatsAccumulator::new(image.bands, image.kind()));
            }
            Some((p, bands, kind)) if bands != image.bands || kind != image.kind() => {
                return Err(TilesError::BandMismatch {
                    path: pair.image.clone(),
                    found: format!("{} bands of {}", image.bands, image.kind()),
                    first: p.to_path_buf(),
                    expected: format!("{bands} bands of {kind}"),
                });
            }
            Some(_) => {}
        }
        let mask = read_mask(&pair.mask)?;
        check_size(&pair.image, &pair.mask, (image.width, image.height), &mask)?;
        *sizes
            .entry(format!("{}x{}", image.width, image.height))
            .or_insert(0) += 1;
        let split = splits
            .get_mut(pair.split)
            .expect("pairs carry known split names");
        let nodata = nodata.or(geo.and_then(|g| g.nodata));
        let holes = nodata
            .map(|nd| nodata_pixels(&image, nd))
            .filter(|h| h.contains(&true));
        if holes.is_some() {
            with_nodata.push(index);
        }
        values.add(split, &mask, holes.as_deref(), &lut, &pair.mask);
        if pair.split == "train"
            && let Some(acc) = stats.as_mut()
        {
            acc.add(&image, nodata);
        }
    }
    values.check_mapped(labels)?;
    check_empty_classes(labels, &splits, &values.raw, location)?;
    for (name, s) in &splits {
        if s.samples == 0 {
            return Err(TilesError::EmptySplit {
                split: name.clone(),
                location: location.to_path_buf(),
            });
        }
    }
    let (_, bands, kind) = first.expect("non-empty splits imply a first image");
    let report = AuditReport {
        pairs: pairs.len(),
        splits,
        skipped,
        sizes,
        bands,
        kind,
        classes: labels.class_names(),
        raw_values: (0..256)
            .filter(|&v| values.raw[v] > 0)
            .map(|v| (v as u8, values.raw[v]))
            .collect(),
        band_stats: stats.map(|s| s.finish()).unwrap_or_default(),
        band_numbers: (0..bands).collect(),
    };
    Ok((report, with_nodata))
}

/// Counts of every raw mask value, and the first mask where each unmapped value was seen.
struct ValueTally<'a> {
    raw: [u64; 256],
    first_unmapped: [Option<&'a Path>; 256],
}

impl<'a> ValueTally<'a> {
    fn new() -> Self {
        Self {
            raw: [0; 256],
            first_unmapped: [None; 256],
        }
    }

    /// Counts `mask` (read from `path`) into the tally and into `split`'s class pixels;
    /// `nodata` marks the pixels whose image is nodata, ignored whatever the mask holds.
    fn add(
        &mut self,
        split: &mut SplitAudit,
        mask: &Mask,
        nodata: Option<&[bool]>,
        lut: &[Option<u8>; 256],
        path: &'a Path,
    ) {
        split.samples += 1;
        split.total_pixels += mask.data.len() as u64;
        for (i, &v) in mask.data.iter().enumerate() {
            self.raw[v as usize] += 1;
            if nodata.is_some_and(|n| n[i]) {
                split.nodata_pixels += 1;
                split.ignored_pixels += 1;
                continue;
            }
            match lut[v as usize] {
                Some(Mask::IGNORE) => split.ignored_pixels += 1,
                Some(c) => split.class_pixels[c as usize] += 1,
                None => {
                    self.first_unmapped[v as usize].get_or_insert(path);
                }
            }
        }
    }

    /// An error naming every value the label map does not cover, with a suggested mapping.
    fn check_mapped(&self, labels: &LabelMap) -> Result<(), TilesError> {
        let unmapped: Vec<(u8, u64, PathBuf)> = (0..256)
            .filter_map(|v| self.first_unmapped[v].map(|p| (v as u8, self.raw[v], p.to_path_buf())))
            .collect();
        if unmapped.is_empty() {
            return Ok(());
        }
        let found: Vec<u8> = (0..=255u8).filter(|&v| self.raw[v as usize] > 0).collect();
        Err(TilesError::UnmappedValues {
            values: unmapped,
            suggestion: labels.suggest(&found),
        })
    }
}

pub(crate) fn check_size(
    image: &Path,
    mask_path: &Path,
    size: (usize, usize),
    mask: &Mask,
) -> Result<(), TilesError> {
    if size != (mask.width, mask.height) {
        return Err(TilesError::SizeMismatch {
            image: image.to_path_buf(),
            mask: mask_path.to_path_buf(),
            image_size: size,
            mask_size: (mask.width, mask.height),
        });
    }
    Ok(())
}

/// Fails when a class has no pixels at all while stored values are ignored (see
/// [`TilesError::EmptyClass`]).
fn check_empty_classes(
    labels: &LabelMap,
    splits: &BTreeMap<String, SplitAudit>,
    raw: &[u64; 256],
    location: &Path,
) -> Result<(), TilesError> {
    let lut = labels.lookup_table();
    let ignored: Vec<(u8, u64)> = (0..256)
        .filter(|&v| raw[v] > 0 && lut[v] == Some(Mask::IGNORE))
        .map(|v| (v as u8, raw[v]))
        .collect();
    if ignored.is_empty() {
        return Ok(());
    }
    for (i, class) in labels.classes.iter().enumerate() {
        let pixels: u64 = splits.values().map(|s| s.class_pixels[i]).sum();
        if pixels == 0 {
            let v = ignored.iter().max_by_key(|(_, n)| *n).expect("non-empty").0;
            return Err(TilesError::EmptyClass {
                class: class.name.clone(),
                location: location.to_path_buf(),
                hint: format!(
                    "map {v} to {}? (e.g. `{} = [{v}]`), or remove the class",
                    class.name, class.name
                ),
                ignored,
            });
        }
    }
    Ok(())
}
