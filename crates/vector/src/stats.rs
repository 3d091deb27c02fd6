//! Per-class pixel counts, areas and mean probabilities, and their report (JSON or CSV).

use serde::Serialize;

use crate::Grid;
use crate::zones::{ZoneRow, ZoneStats};

/// Totals of one class (or of nodata).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Tally {
    pub(crate) pixels: u64,
    pub(crate) area_m2: f64,
    pub(crate) confidence_sum: f64,
    pub(crate) confidence_count: u64,
}

impl Tally {
    pub(crate) fn merge(&mut self, o: &Tally) {
        self.pixels += o.pixels;
        self.area_m2 += o.area_m2;
        self.confidence_sum += o.confidence_sum;
        self.confidence_count += o.confidence_count;
    }
}

/// Per-class accumulation over the rows of one or many class maps.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassStats {
    names: Vec<String>,
    classes: Vec<Tally>,
    nodata: Tally,
    /// False once rows without a usable CRS were added: areas are then unknown.
    has_area: bool,
}

impl ClassStats {
    /// Empty statistics for classes named `class_names` (index order); indices past the end
    /// are reported as `class N`.
    pub fn new(class_names: Vec<String>) -> Self {
        let classes = vec![Tally::default(); class_names.len()];
        ClassStats {
            names: class_names,
            classes,
            nodata: Tally::default(),
            has_area: true,
        }
    }

    /// Adds rows `row0..` of a class map on `grid` (`grid.width()` values a row; 255 = nodata,
    /// counted apart). `confidence` is the probability of each pixel's class (NaN is skipped).
    ///
    /// # Panics
    /// When `classes` and `confidence` differ in length or are not whole rows.
    pub fn add_rows(&mut self, grid: &Grid, row0: usize, classes: &[u8], confidence: &[f32]) {
        let w = grid.width();
        assert_eq!(
            classes.len(),
            confidence.len(),
            "classes and confidence differ in length"
        );
        if w == 0 {
            return;
        }
        assert_eq!(classes.len() % w, 0, "rows must be {w} values wide");
        let mut counts = [0u64; 256];
        let mut sums = [0f64; 256];
        let mut finite = [0u64; 256];
        for (r, row) in classes.chunks_exact(w).enumerate() {
            counts.fill(0);
            for &k in row {
                counts[k as usize] += 1;
            }
            let area = grid.pixel_area_m2(row0 + r);
            self.has_area &= area.is_some();
            for (k, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
                let t = self.tally(k as u8);
                t.pixels += n;
                t.area_m2 += n as f64 * area.unwrap_or(0.0);
            }
        }
        for (&k, &p) in classes.iter().zip(confidence) {
            if p.is_finite() {
                sums[k as usize] += p as f64;
                finite[k as usize] += 1;
            }
        }
        for k in (0..256).filter(|&k| finite[k] > 0) {
            let t = self.tally(k as u8);
            t.confidence_sum += sums[k];
            t.confidence_count += finite[k];
        }
    }

    /// Adds another input's statistics (areas stay known only if both knew them).
    pub fn merge(&mut self, other: &ClassStats) {
        if other.classes.len() > self.classes.len() {
            self.classes.resize(other.classes.len(), Tally::default());
        }
        for (t, o) in self.classes.iter_mut().zip(&other.classes) {
            t.merge(o);
        }
        self.nodata.merge(&other.nodata);
        self.has_area &= other.has_area;
        if self.names.len() < other.names.len() {
            self.names
                .extend_from_slice(&other.names[self.names.len()..]);
        }
    }

    fn tally(&mut self, k: u8) -> &mut Tally {
        if k == 255 {
            return &mut self.nodata;
        }
        let k = k as usize;
        if k >= self.classes.len() {
            self.classes.resize(k + 1, Tally::default());
        }
        &mut self.classes[k]
    }

    fn name(&self, k: usize) -> String {
        self.names
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("class {k}"))
    }
}

#[derive(Clone, Debug, Serialize)]
struct ClassRow {
    class_index: u32,
    class: String,
    pixels: u64,
    area_m2: Option<f64>,
    area_ha: Option<f64>,
    mean_probability: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct Section {
    input: String,
    /// The CRS areas were computed in, or `pixels only: …`.
    crs: String,
    classes: Vec<ClassRow>,
    nodata: ClassRow,
}

impl Section {
    fn new(input: &str, crs: String, stats: &ClassStats) -> Section {
        let area = |t: &Tally| stats.has_area.then_some(t.area_m2);
        let row = |k: u32, name: String, t: &Tally| ClassRow {
            class_index: k,
            class: name,
            pixels: t.pixels,
            area_m2: area(t),
            area_ha: area(t).map(|a| a / 10_000.0),
            mean_probability: (t.confidence_count > 0)
                .then(|| round6(t.confidence_sum / t.confidence_count as f64)),
        };
        Section {
            input: input.to_string(),
            crs,
            classes: (0..stats.classes.len().max(stats.names.len()))
                .map(|k| {
                    let t = stats.classes.get(k).cloned().unwrap_or_default();
                    row(k as u32, stats.name(k), &t)
                })
                .collect(),
            nodata: row(255, "nodata".into(), &stats.nodata),
        }
    }
}

/// Statistics per input and in total, and per zone when given, as JSON or CSV.
#[derive(Clone, Debug, Default)]
pub struct StatsReport {
    inputs: Vec<(String, String, ClassStats)>,
    zones: Option<(ZoneStats, String)>,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    inputs: &'a [Section],
    total: Section,
    #[serde(skip_serializing_if = "Option::is_none")]
    zones: Option<ZonesJson<'a>>,
}

#[derive(Serialize)]
struct ZonesJson<'a> {
    note: &'a str,
    rows: Vec<ZoneRow>,
}

impl StatsReport {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one input's statistics, computed on `grid`.
    pub fn add(&mut self, input: &str, grid: &Grid, mut stats: ClassStats) {
        stats.has_area &= grid.pixels_only_reason().is_none();
        let crs = match (grid.crs(), grid.pixels_only_reason()) {
            (Some(crs), None) if stats.has_area => crs.describe(),
            (_, Some(why)) => format!("pixels only: {input} {why}"),
            _ => format!("pixels only: {input} has no georeferencing"),
        };
        self.inputs.push((input.to_string(), crs, stats));
    }

    /// Adds the per-zone statistics, with `note` saying how they were counted (e.g. which
    /// scene a pixel covered by several counts for).
    pub fn set_zones(&mut self, zones: ZoneStats, note: &str) {
        self.zones = Some((zones, note.to_string()));
    }

    fn sections(&self) -> (Vec<Section>, Section) {
        let inputs: Vec<Section> = self
            .inputs
            .iter()
            .map(|(name, crs, s)| Section::new(name, crs.clone(), s))
            .collect();
        let mut total = ClassStats::new(Vec::new());
        let mut crss: Vec<&str> = Vec::new();
        for (_, crs, s) in &self.inputs {
            total.merge(s);
            if !crss.contains(&crs.as_str()) {
                crss.push(crs);
            }
        }
        let crs = match crss.as_slice() {
            [one] => one.to_string(),
            _ if total.has_area => format!("areas summed over {}", crss.join("; ")),
            _ => {
                let why: Vec<&str> = crss
                    .iter()
                    .filter_map(|c| c.strip_prefix("pixels only: "))
                    .collect();
                format!("pixels only: {}", why.join("; "))
            }
        };
        (inputs, Section::new("total", crs, &total))
    }

    /// The report as pretty JSON: `{"inputs": [...], "total": {...}}`, each section with
    /// `input`, `crs`, `classes` (`class_index`, `class`, `pixels`, `area_m2`, `area_ha`,
    /// `mean_probability`; areas `null` when pixels only) and `nodata`.
    pub fn to_json(&self) -> String {
        let (inputs, total) = self.sections();
        serde_json::to_string_pretty(&ReportJson {
            inputs: &inputs,
            total,
            zones: self.zones.as_ref().map(|(z, note)| ZonesJson {
                note,
                rows: z.rows(),
            }),
        })
        .expect("plain data serialises")
    }

    /// The totals as an aligned text table for a terminal: one line per class (and nodata, when
    /// there is any) with pixels, hectares (when known) and the mean probability, then the CRS.
    pub fn summary(&self) -> String {
        let (_, total) = self.sections();
        let nodata = (total.nodata.pixels > 0).then_some(&total.nodata);
        let rows: Vec<&ClassRow> = total.classes.iter().chain(nodata).collect();
        let width = rows.iter().map(|r| r.class.len()).max().unwrap_or(0).max(5);
        let mut out = format!(
            "{:<width$}  {:>12}  {:>14}  {:>9}\n",
            "class", "pixels", "hectares", "mean p"
        );
        for r in rows {
            let ha = r.area_ha.map_or("-".to_string(), |a| format!("{a:.4}"));
            let p = r
                .mean_probability
                .map_or("-".to_string(), |p| format!("{p:.3}"));
            out.push_str(&format!(
                "{:<width$}  {:>12}  {:>14}  {:>9}\n",
                r.class, r.pixels, ha, p
            ));
        }
        out.push_str(&format!("({})\n", total.crs));
        if let Some((z, note)) = &self.zones {
            let zones: std::collections::BTreeSet<String> =
                z.rows().into_iter().map(|r| r.zone).collect();
            out.push_str(&format!("{} zones with pixels ({note})\n", zones.len()));
        }
        out
    }

    /// The report as CSV: one row per input and class (nodata last, as class index 255), then
    /// the totals under input `total`; empty cells where areas are unknown. With zones, a last
    /// column `zone`, empty on those rows, and one row per zone and class under input `zones`
    /// (zones no pixel fell in left out).
    pub fn to_csv(&self) -> String {
        let (inputs, total) = self.sections();
        let zone_col = if self.zones.is_some() { "," } else { "" };
        let mut out = format!(
            "input,class_index,class,pixels,area_m2,area_ha,mean_probability,crs{}\n",
            if self.zones.is_some() { ",zone" } else { "" }
        );
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        for s in inputs.iter().chain(std::iter::once(&total)) {
            for r in s.classes.iter().chain(std::iter::once(&s.nodata)) {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{}{zone_col}\n",
                    csv_field(&s.input),
                    r.class_index,
                    csv_field(&r.class),
                    r.pixels,
                    opt(r.area_m2),
                    opt(r.area_ha),
                    opt(r.mean_probability),
                    csv_field(&s.crs),
                ));
            }
        }
        if let Some((z, _)) = &self.zones {
            for r in z.rows() {
                out.push_str(&format!(
                    "zones,{},{},{},{},{},{},{},{}\n",
                    r.class_index,
                    csv_field(&r.class),
                    r.pixels,
                    opt(r.area_m2),
                    opt(r.area_ha),
                    opt(r.mean_probability),
                    csv_field(&total.crs),
                    csv_field(&r.zone),
                ));
            }
        }
        out
    }
}

/// Probabilities to 6 decimals: the inputs are f32, more digits would be noise.
pub(crate) fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
