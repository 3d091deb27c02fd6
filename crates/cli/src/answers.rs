//! `segfit predict --stats FILE --vector`: what a prediction *means* on the ground, from the
//! same pass that writes the class map. Per input and in total: pixels, m² and hectares per
//! class with the mean predicted probability ([`vector::ClassStats`], areas from the
//! geotransform in the scene's CRS); per input, `<name>.geojson` with one polygon per connected
//! region of the selected classes ([`vector::Polygonizer`], streamed row band by row band like
//! the rasters, so a scene of any height is vectorised in bounded memory).

use std::cell::RefCell;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use tiles::GeoRef;
use vector::{
    ClassStats, GeoJsonWriter, Grid, OutputCrs, Polygonizer, Region, StatsReport, VectorOptions,
    ZoneStats,
};

use crate::output::{NODATA_CLASS, RowPrediction};
use crate::zones::{SceneZoneStats, ZoneSource};

/// The answer outputs of `segfit predict`.
#[derive(Args, Debug, Clone, Default)]
pub struct AnswerArgs {
    /// Write per-class pixel counts, areas (m², ha) and mean probabilities, per input and in
    /// total, to FILE (`.json` or `.csv`), and each input's alone to `<name>.stats.json` next
    /// to its outputs (for `segfit stats merge`). Areas come from the geotransform in the
    /// input's CRS (ellipsoidal per pixel row for geographic CRSs); inputs without
    /// georeferencing get pixel counts only.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// With --stats, also per zone (a polygon layer: districts, fields; GeoJSON, Shapefile or
    /// FlatGeobuf in any CRS): pixels, areas and mean probabilities per class inside each zone,
    /// summed over the scenes. A pixel covered by several scenes counts once, for the first
    /// input scene whose footprint contains its centre.
    #[arg(long, value_name = "FILE", requires = "stats")]
    pub zones: Option<PathBuf>,
    /// The attribute of --zones naming each zone (features sharing a name are one zone).
    #[arg(long, value_name = "FIELD", requires = "zones")]
    pub zone_field: Option<String>,
    /// The CRS of a --zones file that names none: EPSG:<code>, an OGC URN or WKT.
    #[arg(long, value_name = "CRS", requires = "zones")]
    pub zones_crs: Option<String>,
    /// Also write `<name>.geojson`: one polygon per 4-connected region of each selected class,
    /// with holes, and properties class, area_ha, mean_probability.
    #[arg(long)]
    pub vector: bool,
    /// The classes to vectorise, by name or index, comma-separated [default: all but the
    /// first].
    #[arg(long, value_name = "A,B", value_delimiter = ',', requires = "vector")]
    pub vector_classes: Vec<String>,
    /// The GeoJSON's coordinates: wgs84 (RFC 7946 longitude/latitude, reprojected) or native
    /// (the scene's own CRS, named in the file).
    #[arg(long, value_name = "CRS", default_value = "wgs84", requires = "vector")]
    pub vector_crs: VectorCrsArg,
    /// Simplify the polygons with this tolerance in metres, keeping shared boundaries shared
    /// (topology-preserving).
    #[arg(
        long,
        value_name = "METRES",
        requires = "vector",
        allow_negative_numbers = true
    )]
    pub simplify: Option<f64>,
    /// Leave out polygons smaller than this many hectares.
    #[arg(
        long,
        value_name = "HA",
        requires = "vector",
        allow_negative_numbers = true
    )]
    pub min_area: Option<f64>,
}

/// `--vector-crs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum VectorCrsArg {
    /// WGS84 longitude/latitude (RFC 7946).
    #[default]
    Wgs84,
    /// The scene's CRS.
    Native,
}

/// What every input's answers share: the checked flags and the class names.
pub struct AnswerSpec {
    stats: Option<PathBuf>,
    zones: Option<RefCell<ZoneSource>>,
    vector: Option<VectorSpec>,
    names: Vec<String>,
}

struct VectorSpec {
    selected: Vec<bool>,
    options: VectorOptions,
}

impl AnswerSpec {
    /// The model's class names, one per class.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Checks the flags against the model's `names` (one per class) before anything runs.
    pub fn new(args: &AnswerArgs, names: Vec<String>) -> Result<Self> {
        if let Some(path) = &args.stats {
            stats_format(path)?;
        }
        let vector = if args.vector {
            let selected = selected_classes(&args.vector_classes, &names)?;
            if let Some(m) = args.simplify {
                ensure!(
                    m.is_finite() && m >= 0.0,
                    "--simplify {m}: the tolerance must be a distance in metres, 0 or more"
                );
            }
            if let Some(ha) = args.min_area {
                ensure!(
                    ha.is_finite() && ha >= 0.0,
                    "--min-area {ha}: the area must be in hectares, 0 or more"
                );
            }
            let options = VectorOptions {
                simplify_m: args.simplify.filter(|&m| m > 0.0),
                min_area_ha: args.min_area.filter(|&ha| ha > 0.0),
                crs: match args.vector_crs {
                    VectorCrsArg::Wgs84 => OutputCrs::Wgs84,
                    VectorCrsArg::Native => OutputCrs::Native,
                },
            };
            Some(VectorSpec { selected, options })
        } else {
            None
        };
        let zones = match &args.zones {
            Some(path) => {
                let crs = crate::layers::parse_crs("--zones-crs", args.zones_crs.as_deref())?;
                Some(ZoneSource::open(
                    path,
                    args.zone_field.as_deref(),
                    crs.as_ref(),
                    names.clone(),
                )?)
            }
            None => None,
        };
        Ok(Self {
            stats: args.stats.clone(),
            zones,
            vector,
            names,
        })
    }

    /// A report to fill across the inputs, when `--stats` asks for one.
    pub fn report(&self) -> Option<StatsReport> {
        self.stats.as_ref().map(|_| StatsReport::new())
    }

    /// Starts the answers of one `width × height` input (`label` names it, `geo` is its
    /// georeferencing), writing `<out_dir>/<stem>.geojson` with `--vector`.
    pub fn start(
        &self,
        label: &str,
        geo: Option<&GeoRef>,
        [height, width]: [usize; 2],
        out_dir: &Path,
        stem: &str,
    ) -> Result<SceneAnswers> {
        // Nothing asked: the georeferencing is not even read (an odd transform stays fine).
        let grid = if self.stats.is_none() && self.vector.is_none() {
            None
        } else {
            let grid = Grid::new(geo, width, height)
                .with_context(|| format!("reading the georeferencing of {label}"))?;
            Some(grid)
        };
        let vector = match (&self.vector, &grid) {
            (Some(spec), Some(grid)) => {
                let path = out_dir.join(format!("{stem}.geojson"));
                let out = fsio::AtomicFile::create(&path)
                    .with_context(|| format!("writing {}", path.display()))?;
                let writer =
                    GeoJsonWriter::new(BufWriter::new(out), grid, &self.names, &spec.options)
                        .with_context(|| {
                            format!("{label}: cannot write its polygons in the requested CRS")
                        })?;
                let polygons = Polygonizer::new(width, height, spec.selected.clone());
                Some(VectorSink {
                    polygons,
                    writer,
                    path,
                })
            }
            _ => None,
        };
        let zones = match &self.zones {
            Some(z) => Some(z.borrow_mut().start(label, geo, [height, width])?),
            None => None,
        };
        Ok(SceneAnswers {
            zones,
            stats: self
                .stats
                .as_ref()
                .map(|_| ClassStats::new(self.names.clone())),
            vector,
            grid,
            width,
            row: 0,
            outlines: None,
        })
    }

    /// Whether `--zones` asks for per-zone statistics.
    pub fn has_zones(&self) -> bool {
        self.zones.is_some()
    }

    /// A scene predicted elsewhere (another shard, an earlier run), placed for the overlap
    /// rule of `--zones` ([`ZoneSource::skip`]).
    pub fn skip_scene(&self, label: &str, geo: Option<&GeoRef>, size: [usize; 2]) -> Result<()> {
        match &self.zones {
            Some(z) => z.borrow_mut().skip(label, geo, size),
            None => Ok(()),
        }
    }

    /// Warnings about the zone layer, once every input is in.
    pub fn zone_warnings(&self) -> Vec<String> {
        self.zones
            .as_ref()
            .map(|z| z.borrow().warnings())
            .unwrap_or_default()
    }

    /// Writes the report, once every input is in.
    pub fn write_report(&self, report: &StatsReport) -> Result<()> {
        let Some(path) = &self.stats else {
            return Ok(());
        };
        let text = match stats_format(path)? {
            StatsFormat::Json => report.to_json(),
            StatsFormat::Csv => report.to_csv(),
        };
        fsio::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// The answers of one input, fed row band by row band.
pub struct SceneAnswers {
    stats: Option<ClassStats>,
    zones: Option<SceneZoneStats>,
    vector: Option<VectorSink>,
    grid: Option<Grid>,
    width: usize,
    row: usize,
    /// The finished regions, kept for the overlay when asked ([`SceneAnswers::keep_outlines`]).
    outlines: Option<Vec<Region>>,
}

struct VectorSink {
    polygons: Polygonizer,
    writer: GeoJsonFile,
    path: PathBuf,
}

type GeoJsonFile = GeoJsonWriter<BufWriter<fsio::AtomicFile>>;

/// Writes finished regions to `path`'s GeoJSON, keeping them in `outlines` when asked.
fn write_regions(
    writer: &mut GeoJsonFile,
    path: &Path,
    done: Vec<Region>,
    outlines: &mut Option<Vec<Region>>,
) -> Result<()> {
    writer
        .write(&done)
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(outlines) = outlines {
        outlines.extend(done);
    }
    Ok(())
}

/// One input's finished answers.
pub struct Finished {
    /// Its class statistics, with `--stats`.
    pub stats: Option<(ClassStats, Grid)>,
    /// Its statistics per zone, with `--zones`.
    pub zones: Option<ZoneStats>,
    /// Its regions in pixel coordinates, when asked to keep them (for the overlay).
    pub outlines: Vec<Region>,
    /// The GeoJSON written and how many polygons it holds (after `--min-area`).
    pub geojson: Option<(PathBuf, u64)>,
}

impl SceneAnswers {
    /// Keeps the finished regions (pixel coordinates) for drawing them on the overlay.
    pub fn keep_outlines(mut self) -> Self {
        self.outlines = Some(Vec::new());
        self
    }

    /// Whether [`add_rows`](Self::add_rows) needs the rows' probabilities (the statistics'
    /// and the polygons' mean probability).
    pub fn needs_probabilities(&self) -> bool {
        self.stats.is_some() || self.zones.is_some() || self.vector.is_some()
    }

    /// Adds the next rows: their classes ([`NODATA_CLASS`] on nodata) and, when
    /// [`needs_probabilities`](Self::needs_probabilities), their probabilities.
    pub fn add_rows(&mut self, rows: &RowPrediction) -> Result<()> {
        if !self.needs_probabilities() {
            return Ok(());
        }
        let classes = &rows.classes;
        let plane = classes.len();
        let confidence = confidence_of(rows.probabilities()?, classes, plane);
        if let (Some(stats), Some(grid)) = (&mut self.stats, &self.grid) {
            stats.add_rows(grid, self.row, classes, &confidence);
        }
        if let (Some(zones), Some(grid)) = (&mut self.zones, &self.grid) {
            zones.add_rows(grid, self.row, classes, &confidence)?;
        }
        if let Some(sink) = &mut self.vector {
            let done = sink.polygons.push_rows(classes, &confidence);
            write_regions(&mut sink.writer, &sink.path, done, &mut self.outlines)?;
        }
        self.row += plane / self.width.max(1);
        Ok(())
    }

    /// Completes the polygons and the GeoJSON file.
    pub fn finish(mut self) -> Result<Finished> {
        let mut geojson = None;
        if let Some(sink) = self.vector.take() {
            let VectorSink {
                polygons,
                mut writer,
                path,
            } = sink;
            write_regions(&mut writer, &path, polygons.finish(), &mut self.outlines)?;
            let writing = || format!("writing {}", path.display());
            let features = writer.features();
            let file = writer
                .finish()
                .with_context(writing)?
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(writing)?;
            file.commit().with_context(writing)?;
            geojson = Some((path, features));
        }
        Ok(Finished {
            zones: self.zones.map(SceneZoneStats::finish),
            stats: self.stats.zip(self.grid),
            outlines: self.outlines.unwrap_or_default(),
            geojson,
        })
    }
}

/// `<out>/<name>.stats.json`: the scene's statistics alone (and per zone with `--zones`), in
/// the `--stats` JSON format, for `segfit stats merge` to sum across scenes and shards.
pub fn write_scene_stats(
    out: &Path,
    scene: &crate::inputs::Scene,
    stats: &vector::ClassStats,
    grid: &vector::Grid,
    zones: Option<&vector::ZoneStats>,
) -> Result<PathBuf> {
    let mut report = vector::StatsReport::new();
    report.add(&scene.label, grid, stats.clone());
    if let Some(z) = zones {
        report.set_zones(z.clone(), crate::zones::OVERLAP_NOTE);
    }
    let path = out.join(format!("{}.stats.json", scene.name));
    fsio::write_atomic(&path, report.to_json().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The probability of each pixel's class, NaN on nodata: the softmax maximum, read from the
/// rows' `probabilities`; for a single-logit model, the sigmoid's probability of the class
/// chosen (`p` for class 1, `1 - p` for class 0).
///
/// # Shapes
/// - probabilities: `[k, plane]`, classes: `[plane]`
/// - output: `[plane]`
fn confidence_of(probabilities: &[f32], classes: &[u8], plane: usize) -> Vec<f32> {
    let k = probabilities.len() / plane.max(1);
    (0..plane)
        .map(|i| match classes[i] {
            c if c == NODATA_CLASS && k <= NODATA_CLASS as usize => f32::NAN,
            c if k == 1 => {
                let p = probabilities[i];
                if c == 1 { p } else { 1.0 - p }
            }
            c => probabilities[c as usize * plane + i],
        })
        .collect()
}

/// The class names of a model's config: `id2label`, else `class_<i>`.
pub fn class_names(config: &segformer::SegformerConfig) -> Vec<String> {
    let k = config.num_labels();
    (0..k)
        .map(|i| {
            config
                .id2label
                .as_ref()
                .and_then(|m| m.get(&i.to_string()).cloned())
                .unwrap_or_else(|| format!("class_{i}"))
        })
        .collect()
}

/// `--vector-classes` as a mask over the classes: names or indices; all but the first when
/// empty.
fn selected_classes(given: &[String], names: &[String]) -> Result<Vec<bool>> {
    let mut selected = vec![false; names.len()];
    if given.is_empty() {
        ensure!(
            names.len() > 1,
            "--vector: the model has a single class ({}); name it with --vector-classes",
            names[0]
        );
        selected[1..].iter_mut().for_each(|s| *s = true);
        return Ok(selected);
    }
    for g in given {
        let g = g.trim();
        let index = names
            .iter()
            .position(|n| n == g)
            .or_else(|| g.parse::<usize>().ok().filter(|&i| i < names.len()));
        match index {
            Some(i) => selected[i] = true,
            None => bail!(
                "--vector-classes: `{g}` is not one of the model's classes ({}); give names or \
                 indices 0..{}",
                names.join(", "),
                names.len() - 1
            ),
        }
    }
    Ok(selected)
}

#[derive(Clone, Copy)]
enum StatsFormat {
    Json,
    Csv,
}

fn stats_format(path: &Path) -> Result<StatsFormat> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("json") => Ok(StatsFormat::Json),
        Some("csv") => Ok(StatsFormat::Csv),
        _ => bail!(
            "--stats {}: the format comes from the extension; use a .json or .csv file name",
            path.display()
        ),
    }
}
