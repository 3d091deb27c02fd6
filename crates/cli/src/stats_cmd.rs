//! `segfit stats merge`: sums the statistics of `predict --stats` reports (a scene's
//! `<name>.stats.json`, or a whole run's report) into one: pixels and areas per class, per
//! zone too, mean probabilities weighted by pixels. What cannot be summed is refused: other
//! class lists, areas next to pixel counts only, zone tables next to none, an input twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

/// Arguments of `segfit stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(subcommand)]
    command: StatsCommand,
}

#[derive(Subcommand, Debug)]
enum StatsCommand {
    /// Sum `predict --stats` JSON reports (e.g. every scene's `<name>.stats.json` of a
    /// sharded run) into totals per class, and per zone when the runs used --zones.
    Merge(MergeArgs),
}

/// Arguments of `segfit stats merge`.
#[derive(Args, Debug)]
struct MergeArgs {
    /// The JSON reports: `<name>.stats.json` next to predict's outputs, or `--stats` files.
    #[arg(value_name = "FILE.json", required = true)]
    reports: Vec<PathBuf>,
    /// Write the merged report here (`.json` or `.csv`, the formats of `predict --stats`)
    /// [default: only the totals table on stdout].
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `segfit stats`.
pub fn run(args: &StatsArgs) -> Result<()> {
    match &args.command {
        StatsCommand::Merge(m) => merge_command(m),
    }
}

/// One class row of a report (`predict --stats` JSON).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
struct Row {
    class_index: u32,
    class: String,
    pixels: u64,
    area_m2: Option<f64>,
    area_ha: Option<f64>,
    mean_probability: Option<f64>,
}

/// One input (or the total) of a report.
#[derive(Clone, Debug, Deserialize, Serialize)]
struct Section {
    input: String,
    crs: String,
    classes: Vec<Row>,
    nodata: Row,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
struct ZoneRow {
    zone: String,
    class_index: u32,
    class: String,
    pixels: u64,
    area_m2: Option<f64>,
    area_ha: Option<f64>,
    mean_probability: Option<f64>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
struct Zones {
    note: String,
    rows: Vec<ZoneRow>,
}

#[derive(Debug, Deserialize, Serialize)]
struct Report {
    inputs: Vec<Section>,
    total: Section,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zones: Option<Zones>,
}

/// A running sum of one class: pixels, area, and the probability sum weighted by pixels.
#[derive(Clone, Debug, Default)]
struct Sum {
    pixels: u64,
    area_m2: Option<f64>,
    weighted_p: f64,
    weight: u64,
}

impl Sum {
    fn add(&mut self, pixels: u64, area_m2: Option<f64>, p: Option<f64>, has_area: bool) {
        self.pixels += pixels;
        if has_area {
            self.area_m2 = Some(self.area_m2.unwrap_or(0.0) + area_m2.unwrap_or(0.0));
        }
        if let Some(p) = p {
            self.weighted_p += p * pixels as f64;
            self.weight += pixels;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.weight > 0).then(|| round6(self.weighted_p / self.weight as f64))
    }
}

/// Probabilities to 6 decimals, as the reports give them.
fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn is_pixels_only(crs: &str) -> bool {
    crs.starts_with("pixels only")
}

/// The `(index, name)` class list of a section.
fn class_list(s: &Section) -> Vec<(u32, &str)> {
    s.classes
        .iter()
        .map(|r| (r.class_index, r.class.as_str()))
        .collect()
}

fn describe(list: &[(u32, &str)]) -> String {
    list.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
}

/// Merges `reports` (each read from its path): every input of every report, summed.
fn merge(reports: &[(PathBuf, Report)]) -> Result<Report> {
    let (first_path, first) = reports.first().context("no reports to merge")?;
    let reference = first.inputs.first().unwrap_or(&first.total).clone();
    let classes = class_list(&reference);
    let has_area = !is_pixels_only(&reference.crs);
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut crss: Vec<String> = Vec::new();
    let mut sums = vec![Sum::default(); classes.len()];
    let mut nodata = Sum::default();
    for (path, report) in reports {
        let file = path.display();
        if report.zones.is_some() != first.zones.is_some() {
            let (with, without) = if first.zones.is_some() {
                (first_path.as_path(), path.as_path())
            } else {
                (path.as_path(), first_path.as_path())
            };
            bail!(
                "{} has per-zone statistics but {} has none; merge reports of runs with the \
                 same --zones",
                with.display(),
                without.display()
            );
        }
        for s in &report.inputs {
            ensure!(
                class_list(s) == classes,
                "{file}: {} has classes [{}] but {} has [{}]; only reports of models with the \
                 same classes can be summed",
                s.input,
                describe(&class_list(s)),
                first_path.display(),
                describe(&classes)
            );
            ensure!(
                is_pixels_only(&s.crs) != has_area,
                "{file}: {} is counted in {}, but {} in {}; areas and pixel counts only cannot \
                 be summed (give every scene georeferencing with a known CRS, or merge them \
                 apart)",
                s.input,
                if has_area { "pixels only" } else { "areas" },
                reference.input,
                if has_area { "areas" } else { "pixels only" },
            );
            if let Some(other) = seen.insert(s.input.clone(), path) {
                bail!(
                    "{} is in both {} and {file}; merging would count it twice",
                    s.input,
                    other.display()
                );
            }
            for (sum, r) in sums.iter_mut().zip(&s.classes) {
                sum.add(r.pixels, r.area_m2, r.mean_probability, has_area);
            }
            let n = &s.nodata;
            nodata.add(n.pixels, n.area_m2, n.mean_probability, has_area);
            if !crss.contains(&s.crs) {
                crss.push(s.crs.clone());
            }
            inputs.push(s.clone());
        }
    }
    let row = |index: u32, class: &str, sum: &Sum| Row {
        class_index: index,
        class: class.to_string(),
        pixels: sum.pixels,
        area_m2: sum.area_m2,
        area_ha: sum.area_m2.map(|a| a / 10_000.0),
        mean_probability: sum.mean(),
    };
    let crs = match crss.as_slice() {
        [one] => one.clone(),
        _ if has_area => format!("areas summed over {}", crss.join("; ")),
        _ => {
            let why: Vec<&str> = crss
                .iter()
                .filter_map(|c| c.strip_prefix("pixels only: "))
                .collect();
            format!("pixels only: {}", why.join("; "))
        }
    };
    let total = Section {
        input: "total".into(),
        crs,
        classes: classes
            .iter()
            .zip(&sums)
            .map(|((i, name), sum)| row(*i, name, sum))
            .collect(),
        nodata: row(255, "nodata", &nodata),
    };
    let zones = first
        .zones
        .as_ref()
        .map(|z| merge_zones(reports, &z.note, has_area));
    Ok(Report {
        inputs,
        total,
        zones,
    })
}

/// The zone rows of `reports` summed per zone and class, zones and classes in first-seen
/// order.
fn merge_zones(reports: &[(PathBuf, Report)], note: &str, has_area: bool) -> Zones {
    let mut order: Vec<(String, u32, String)> = Vec::new();
    let mut sums: BTreeMap<(String, u32), Sum> = BTreeMap::new();
    for z in reports.iter().filter_map(|(_, r)| r.zones.as_ref()) {
        for r in &z.rows {
            let key = (r.zone.clone(), r.class_index);
            let sum = sums.entry(key).or_insert_with(|| {
                order.push((r.zone.clone(), r.class_index, r.class.clone()));
                Sum::default()
            });
            sum.add(r.pixels, r.area_m2, r.mean_probability, has_area);
        }
    }
    let rows = order
        .into_iter()
        .map(|(zone, class_index, class)| {
            let sum = &sums[&(zone.clone(), class_index)];
            ZoneRow {
                zone,
                class_index,
                class,
                pixels: sum.pixels,
                area_m2: sum.area_m2,
                area_ha: sum.area_m2.map(|a| a / 10_000.0),
                mean_probability: sum.mean(),
            }
        })
        .collect();
    Zones {
        note: note.to_string(),
        rows,
    }
}

fn read_report(path: &Path) -> Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a JSON report of `segfit predict --stats` (inputs, total)",
            path.display()
        )
    })
}

fn merge_command(args: &MergeArgs) -> Result<()> {
    let mut reports = Vec::new();
    for path in &args.reports {
        reports.push((path.clone(), read_report(path)?));
    }
    let merged = merge(&reports)?;
    if let Some(out) = &args.output {
        let ext = out
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let text = match ext.as_deref() {
            Some("json") => serde_json::to_string_pretty(&merged).expect("plain data serialises"),
            Some("csv") => to_csv(&merged),
            _ => bail!(
                "--output {}: the format comes from the extension; use a .json or .csv file name",
                out.display()
            ),
        };
        fsio::write_atomic(out, text.as_bytes())
            .with_context(|| format!("writing {}", out.display()))?;
    }
    outln!("{}", summary(&merged).trim_end())?;
    eprintln!(
        "merged {} input(s) from {} report(s){}",
        merged.inputs.len(),
        reports.len(),
        args.output
            .as_ref()
            .map_or(String::new(), |o| format!(" -> {}", o.display()))
    );
    Ok(())
}

/// The totals as the table `predict --stats` prints.
fn summary(report: &Report) -> String {
    let total = &report.total;
    let nodata = (total.nodata.pixels > 0).then_some(&total.nodata);
    let rows: Vec<&Row> = total.classes.iter().chain(nodata).collect();
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
    out
}

/// The CSV of `predict --stats`: a row per input and class, then the totals, then the zones.
fn to_csv(report: &Report) -> String {
    let zones = report.zones.is_some();
    let zone_col = if zones { "," } else { "" };
    let mut out = format!(
        "input,class_index,class,pixels,area_m2,area_ha,mean_probability,crs{}\n",
        if zones { ",zone" } else { "" }
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for s in report.inputs.iter().chain(std::iter::once(&report.total)) {
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
    for r in report.zones.iter().flat_map(|z| &z.rows) {
        out.push_str(&format!(
            "zones,{},{},{},{},{},{},{},{}\n",
            r.class_index,
            csv_field(&r.class),
            r.pixels,
            opt(r.area_m2),
            opt(r.area_ha),
            opt(r.mean_probability),
            csv_field(&report.total.crs),
            csv_field(&r.zone),
        ));
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(input: &str, crs: &str, px: [u64; 2], p: [f64; 2]) -> Section {
        let row = |i: u32, name: &str, n: u64, p: Option<f64>| Row {
            class_index: i,
            class: name.into(),
            pixels: n,
            area_m2: (!is_pixels_only(crs)).then_some(n as f64 * 100.0),
            area_ha: (!is_pixels_only(crs)).then_some(n as f64 * 0.01),
            mean_probability: p,
        };
        Section {
            input: input.into(),
            crs: crs.into(),
            classes: vec![
                row(0, "outer", px[0], Some(p[0])),
                row(1, "rice", px[1], Some(p[1])),
            ],
            nodata: row(255, "nodata", 0, None),
        }
    }

    fn report(s: Section) -> Report {
        Report {
            inputs: vec![s.clone()],
            total: Section {
                input: "total".into(),
                ..s
            },
            zones: None,
        }
    }

    #[test]
    fn merging_sums_pixels_and_areas_and_weights_probabilities_by_pixels() {
        let utm = "EPSG:32648 (WGS 84 / UTM zone 48N)";
        let a = report(section("a.tif", utm, [10, 30], [0.5, 0.9]));
        let b = report(section("b.tif", utm, [30, 10], [0.7, 0.5]));
        let merged = merge(&[("a.json".into(), a), ("b.json".into(), b)]).unwrap();
        let t = &merged.total;
        assert_eq!((t.classes[0].pixels, t.classes[1].pixels), (40, 40));
        assert_eq!(t.classes[1].area_m2, Some(4000.0));
        assert_eq!(t.classes[0].mean_probability, Some(0.65));
        assert_eq!(t.classes[1].mean_probability, Some(0.8));
        assert_eq!(t.crs, utm);
        assert_eq!(merged.inputs.len(), 2);
    }

    #[test]
    fn what_cannot_be_summed_is_refused_naming_the_files() {
        let utm = "EPSG:32648 (WGS 84 / UTM zone 48N)";
        let a = || report(section("a.tif", utm, [1, 1], [0.5, 0.5]));
        let mut other = section("b.tif", utm, [1, 1], [0.5, 0.5]);
        other.classes[1].class = "water".into();
        let err = merge(&[("a.json".into(), a()), ("b.json".into(), report(other))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.json") && err.contains("water"), "{err}");
        let px = report(section(
            "c.tif",
            "pixels only: c.tif has no georeferencing",
            [1, 1],
            [0.5, 0.5],
        ));
        let err = merge(&[("a.json".into(), a()), ("c.json".into(), px)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.json") && err.contains("pixels only"),
            "{err}"
        );
        let err = merge(&[("a.json".into(), a()), ("again.json".into(), a())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice") && err.contains("again.json"), "{err}");
    }
}
