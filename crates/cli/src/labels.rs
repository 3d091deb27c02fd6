//! `prepare --scenes … --labels`: polygon layers burned onto each scene's grid as its label
//! source (a [`tiles::SceneLabeller`]), and the audit of what was burned.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use geom::{
    ClassMapping, IGNORE, LabelOptions, Labels, Overlap, SceneGrid, SceneLabels, Unlabelled,
};
use tiles::{GeoRef, LabellerError, SceneLabeller};

use crate::prepare::PrepareArgs;

/// Written by the burner where no feature lies, so that burned pixels can be told from
/// unlabelled ones; replaced by the unlabelled value before tiles sees the rows. Classes are
/// therefore `0..UNBURNED`.
const UNBURNED: u8 = 254;

/// The classes of `--class` for vector labels: names in class order and the attribute values
/// that select each (`NAME=V[,V…]`, `NAME=*` for every feature, bare `NAME` for a class no
/// feature selects, e.g. the background).
pub fn class_names_and_mapping(args: &PrepareArgs) -> Result<(Vec<String>, ClassMapping)> {
    ensure!(
        !args.classes.is_empty(),
        "give the classes: one --class NAME=VALUE[,VALUE…] per class in order, the values \
         being those of --class-field (e.g. --class-field crop --class rice_paddy=rice,paddy), \
         or --class NAME=* for every feature"
    );
    let mut names: Vec<String> = Vec::new();
    let mut rules = Vec::new();
    for spec in &args.classes {
        let (name, values) = match spec.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v)),
            None => (spec.trim(), None),
        };
        ensure!(
            !name.is_empty(),
            "--class `{spec}` has no class name; expected NAME=VALUE[,VALUE…]"
        );
        ensure!(
            !names.iter().any(|n| n == name),
            "--class {name} is given twice; list each class once, with all its values"
        );
        let index = names.len();
        names.push(name.to_string());
        if let Some(values) = values {
            let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
            ensure!(
                values.iter().all(|v| !v.is_empty()),
                "--class `{spec}` has an empty value; expected NAME=VALUE[,VALUE…] or NAME=*"
            );
            rules.push((index as u8, values));
        }
    }
    ensure!(
        names.len() <= UNBURNED as usize,
        "--class is given {} times; at most {UNBURNED} classes fit 8-bit masks with an ignore \
         value",
        names.len()
    );
    ensure!(
        !rules.is_empty(),
        "no --class selects features: give NAME=VALUE[,VALUE…] (values of --class-field) or \
         NAME=* for one of them"
    );
    if args.class_field.is_none() {
        let all_star = rules.len() == 1 && rules[0].1 == ["*"];
        ensure!(
            all_star,
            "--class lists attribute values but no --class-field names the attribute; give \
             --class-field FIELD, or one class with every feature: --class NAME=*"
        );
    }
    Ok((
        names,
        ClassMapping {
            field: args.class_field.clone(),
            rules,
        },
    ))
}

/// The index of class `name` for `flag`, or an error listing the classes.
fn class_index(flag: &str, name: &str, names: &[String]) -> Result<u8> {
    names
        .iter()
        .position(|n| n == name)
        .map(|i| i as u8)
        .with_context(|| {
            format!(
                "{flag} {name} is not a class; the classes of --class are: {}",
                names.join(", ")
            )
        })
}

/// Vector labels from `prepare`'s flags: the layers read, classified and indexed.
pub fn labeller(
    args: &PrepareArgs,
    names: &[String],
    mapping: ClassMapping,
) -> Result<VectorLabeller> {
    let unlabelled = match (&args.background, args.unlabelled) {
        (Some(b), None) => class_index("--background", b, names)?,
        (None, Some(UnlabelledArg::Ignore)) => IGNORE,
        _ => bail!(
            "say what pixels no feature covers get: --background CLASS (e.g. --background {}) \
             or --unlabelled ignore",
            names[0]
        ),
    };
    let overlap = if args.priority.is_empty() {
        Overlap::LaterWins
    } else {
        Overlap::Priority(
            args.priority
                .iter()
                .map(|n| class_index("--priority", n.trim(), names))
                .collect::<Result<_>>()?,
        )
    };
    let crs = crate::layers::parse_crs("--labels-crs", args.labels_crs.as_deref())?;
    let layers = args
        .labels
        .iter()
        .map(|p| crate::layers::read_layer(p, crs.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let extent = args
        .label_extent
        .as_deref()
        .map(|p| crate::layers::read_layer(p, crs.as_ref()))
        .transpose()
        .context("--label-extent")?;
    let options = LabelOptions {
        classes: mapping,
        all_touched: args.all_touched,
        overlap,
        unlabelled: Unlabelled::Background(UNBURNED),
    };
    let labels = Labels::new(layers, extent, options)?;
    let summaries = labels.summaries();
    if summaries
        .iter()
        .all(|s| s.features_per_class.iter().all(|&n| n == 0))
    {
        let mut found: Vec<String> = Vec::new();
        for s in &summaries {
            found.extend(s.unmapped.iter().map(|(v, n)| format!("`{v}` ({n})")));
        }
        found.truncate(20);
        bail!(
            "no feature of {} maps to a class of --class; the values of --class-field {} are: {}",
            list_paths(&args.labels),
            args.class_field.as_deref().unwrap_or("(none)"),
            found.join(", ")
        );
    }
    Ok(VectorLabeller {
        labels,
        names: names.to_vec(),
        unlabelled,
        source: args.labels[0].clone(),
        scene: None,
        burned: Vec::new(),
        summaries: None,
    })
}

fn list_paths(paths: &[PathBuf]) -> String {
    let v: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    v.join(", ")
}

/// `--unlabelled`'s one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UnlabelledArg {
    /// Pixels no feature covers are ignored in training (mask value 255).
    Ignore,
}

/// What was burned onto one scene, counted once per pixel.
#[derive(Clone, Debug)]
struct Burned {
    scene: String,
    /// Rows `0..rows_done` are counted.
    rows_done: usize,
    pixels: Vec<u64>,
    area_m2: Vec<f64>,
    /// False when the scene's CRS gives no ground area (then only pixels are reported).
    has_area: bool,
    polygons: usize,
}

/// The scene being burned.
struct Current {
    index: usize,
    labels: SceneLabels,
    grid: vector::Grid,
}

/// Label layers burned onto each scene a band of rows at a time.
pub struct VectorLabeller {
    labels: Labels,
    names: Vec<String>,
    /// What unlabelled pixels become: the background class or [`IGNORE`].
    unlabelled: u8,
    source: PathBuf,
    scene: Option<Current>,
    /// Per scene index.
    burned: Vec<Burned>,
    /// The layer summaries once every scene was surveyed.
    summaries: Option<Vec<geom::LayerSummary>>,
}

impl SceneLabeller for VectorLabeller {
    fn start(
        &mut self,
        index: usize,
        scene: &Path,
        width: usize,
        height: usize,
        geo: Option<&GeoRef>,
    ) -> Result<(), LabellerError> {
        let visited = self.burned.get(index).is_some_and(|b| !b.scene.is_empty());
        if visited && self.summaries.is_none() {
            // Every scene is surveyed before tiles are written: the summaries are complete
            // now, and burning a scene again would count its unprojectable features twice.
            self.summaries = Some(self.labels.summaries());
        }
        if self.scene.as_ref().is_some_and(|c| c.index == index) {
            return Ok(());
        }
        let name = scene.display().to_string();
        let geo = geo.ok_or(
            "the scene has no georeferencing; burning vector labels needs its CRS and \
             geotransform (give label rasters with --masks instead)",
        )?;
        let grid = SceneGrid::from_georef(&name, width, height, geo)?;
        self.scene = None;
        let labels = self.labels.on_scene(&grid)?;
        let area_grid = vector::Grid::new(Some(geo), width, height)?;
        if self.burned.len() <= index {
            self.burned.resize(
                index + 1,
                Burned {
                    scene: String::new(),
                    rows_done: 0,
                    pixels: vec![0; 256],
                    area_m2: vec![0.0; 256],
                    has_area: true,
                    polygons: 0,
                },
            );
        }
        let b = &mut self.burned[index];
        b.scene = name;
        b.polygons = labels.polygons();
        b.has_area = area_grid.pixel_area_m2(0).is_some();
        self.scene = Some(Current {
            index,
            labels,
            grid: area_grid,
        });
        Ok(())
    }

    fn rows(&mut self, y: usize, out: &mut [u8]) -> Result<(), LabellerError> {
        let cur = self
            .scene
            .as_mut()
            .ok_or("rows asked before a scene was started")?;
        cur.labels.burn_rows(y, out)?;
        let w = cur.grid.width();
        let b = &mut self.burned[cur.index];
        for (r, row) in out.chunks_exact(w).enumerate() {
            if y + r < b.rows_done {
                continue;
            }
            let mut counts = [0u64; 256];
            for &v in row {
                counts[v as usize] += 1;
            }
            let area = cur.grid.pixel_area_m2(y + r).unwrap_or(0.0);
            for (k, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
                b.pixels[k] += n;
                b.area_m2[k] += n as f64 * area;
            }
        }
        b.rows_done = b.rows_done.max(y + out.len() / w);
        for v in out.iter_mut().filter(|v| **v == UNBURNED) {
            *v = self.unlabelled;
        }
        Ok(())
    }

    fn source(&self) -> PathBuf {
        self.source.clone()
    }
}

impl VectorLabeller {
    /// The audit: per layer its features per class, unmapped values, repairs and features
    /// outside every scene; per scene the pixels and hectares burned per class.
    pub fn audit(&self) -> String {
        let mut out = String::new();
        let summaries = self
            .summaries
            .clone()
            .unwrap_or_else(|| self.labels.summaries());
        for s in summaries {
            let per_class: Vec<String> = self
                .names
                .iter()
                .enumerate()
                .map(|(k, n)| format!("{n} {}", s.features_per_class[k]))
                .collect();
            let _ = writeln!(
                out,
                "labels {} ({}): {} polygon features; per class: {}",
                s.name,
                s.crs,
                s.features,
                per_class.join(", ")
            );
            if !s.unmapped.is_empty() {
                let v: Vec<String> = s
                    .unmapped
                    .iter()
                    .map(|(v, n)| format!("`{v}` ({n})"))
                    .collect();
                let _ = writeln!(
                    out,
                    "  warning: class values that map to no class (not burned): {}",
                    v.join(", ")
                );
            }
            for line in s.issues.lines() {
                let _ = writeln!(out, "  warning: {line}");
            }
            if s.unprojectable.count > 0 {
                let _ = writeln!(
                    out,
                    "  warning: {} features have vertices that cannot be reprojected to a \
                     scene's CRS (skipped there)",
                    s.unprojectable.describe()
                );
            }
            if s.outside_every_scene.count > 0 {
                let _ = writeln!(
                    out,
                    "  warning: {} features lie outside every scene",
                    s.outside_every_scene.describe()
                );
            }
        }
        let unlabelled = if self.unlabelled == IGNORE {
            "unlabelled (ignored)".to_string()
        } else {
            format!("unlabelled ({})", self.names[self.unlabelled as usize])
        };
        let _ = writeln!(
            out,
            "burned per class (whole scenes, nodata included; a pixel counts once per scene):"
        );
        let mut rows: Vec<(String, Vec<u64>, Vec<f64>, bool)> = Vec::new();
        for b in &self.burned {
            let scene = format!("{} ({} polygons)", b.scene, b.polygons);
            rows.push((scene, b.pixels.clone(), b.area_m2.clone(), b.has_area));
        }
        if self.burned.len() > 1 {
            let mut p = vec![0u64; 256];
            let mut a = vec![0f64; 256];
            for b in &self.burned {
                for k in 0..256 {
                    p[k] += b.pixels[k];
                    a[k] += b.area_m2[k];
                }
            }
            rows.push(("total".into(), p, a, self.burned.iter().all(|b| b.has_area)));
        }
        for (scene, pixels, area, has_area) in rows {
            let cell = |k: usize| {
                let ha = if has_area {
                    format!(" {:.2} ha", area[k] / 10_000.0)
                } else {
                    String::new()
                };
                format!("{} px{ha}", pixels[k])
            };
            let mut parts: Vec<String> = (0..self.names.len())
                .map(|k| format!("{} {}", self.names[k], cell(k)))
                .collect();
            parts.push(format!("{unlabelled} {}", cell(UNBURNED as usize)));
            if pixels[IGNORE as usize] > 0 {
                parts.push(format!(
                    "outside the label extent {}",
                    cell(IGNORE as usize)
                ));
            }
            let _ = writeln!(out, "  {scene}: {}", parts.join("; "));
        }
        out.pop();
        out
    }
}
