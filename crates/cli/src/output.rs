//! What every output of `segfit predict` follows, whoever writes it: the nodata class and
//! where an input's nodata value comes from, the class and probability rasters of a scene, and
//! the names of output files. A leaf: it uses no other module of the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use infer::{classes_of, probabilities};
use tiles::{
    BandInfo, ClassLegend, CogOptions, CogWriter, GeoRef, OverviewResampling, RasterData,
    RasterShape, SampleKind,
};

/// The class value of nodata pixels: never a class index, declared as the class map's
/// `GDAL_NODATA` (models with more than 255 classes are refused when nodata is in play).
pub const NODATA_CLASS: u8 = 255;

/// How `--probabilities` stores the softmax.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbFormat {
    /// float32, one band per class, NaN on nodata pixels (4 bytes per class and pixel).
    F32,
    /// bytes: round(p × 254), 255 on nodata pixels, tagged scale 1/254 so GDAL reads 0–1
    /// back; worst rounding error 0.5/254 ≈ 0.00197 (1 byte per class and pixel).
    U8,
}

/// The stored steps of a `u8` probability: `p` is stored as `round(p × U8_STEPS)`, leaving 255
/// for nodata; GDAL reads `stored / U8_STEPS` back.
pub const U8_STEPS: f32 = 254.0;

/// The GeoTIFF outputs of one scene, written row band by row band.
pub struct SceneOutputs {
    classes: CogWriter,
    probabilities: Option<(CogWriter, ProbFormat)>,
    k: usize,
    width: usize,
}

/// What a scene's rasters say about the model: its class names (legend, band names).
pub struct OutputSpec<'a> {
    /// One per class.
    pub names: &'a [String],
    /// `--probabilities`.
    pub probabilities: Option<ProbFormat>,
}

impl SceneOutputs {
    /// Starts `<out_dir>/<stem>.tif` (u8 class indices, [`NODATA_CLASS`] on nodata pixels,
    /// with the overlays' colours and the class names: [`class_legend`]) and, with
    /// `spec.probabilities`, `<stem>_prob.tif` ([`ProbFormat`], one band per class, named
    /// after it). Both carry `geo` with their own nodata value, never the input's: with
    /// nodata = 0, GIS tools would hide class 0. Returns the class map's path too.
    pub fn create(
        out_dir: &Path,
        stem: &str,
        [height, width]: [usize; 2],
        geo: Option<&GeoRef>,
        nodata: bool,
        spec: &OutputSpec<'_>,
    ) -> Result<(Self, PathBuf)> {
        let k = spec.names.len();
        let path = out_dir.join(format!("{stem}.tif"));
        let shape = RasterShape {
            width,
            height,
            bands: 1,
            kind: SampleKind::U8,
        };
        // Class indices are labels: overviews pick a pixel, never average two classes.
        let nearest = CogOptions {
            resampling: OverviewResampling::Nearest,
            ..Default::default()
        };
        let classes = CogWriter::create(
            &path,
            shape,
            with_nodata(geo, nodata, NODATA_CLASS as f64).as_ref(),
            nearest,
        )
        .and_then(|w| w.with_legend(class_legend(spec.names)))
        .with_context(|| format!("writing {}", path.display()))?;
        let probabilities = match spec.probabilities {
            Some(format) => Some((
                probability_writer(
                    out_dir,
                    stem,
                    [height, width],
                    geo,
                    nodata,
                    spec.names,
                    format,
                )?
                .0,
                format,
            )),
            None => None,
        };
        let outputs = Self {
            classes,
            probabilities,
            k,
            width,
        };
        Ok((outputs, path))
    }

    /// Whether [`write_rows`](Self::write_rows) needs the rows' probabilities
    /// ([`RowPrediction::probabilities`]).
    pub fn needs_probabilities(&self) -> bool {
        self.probabilities.is_some()
    }

    /// Writes the next rows from their [`RowPrediction`] (`n` rows); `holes` marks their nodata
    /// pixels (`[n, W]`).
    pub fn write_rows(
        &mut self,
        rows: &RowPrediction,
        n: usize,
        holes: Option<&[bool]>,
    ) -> Result<()> {
        let plane = n * self.width;
        self.classes
            .write_rows(&RasterData::U8(rows.classes.clone()))?;
        if let Some((writer, format)) = &mut self.probabilities {
            let probabilities = rows.probabilities()?;
            writer.write_rows(&probability_rows(
                probabilities,
                self.k,
                plane,
                holes,
                *format,
            ))?;
        }
        Ok(())
    }

    /// Writes the overviews and moves the files into place.
    pub fn finish(self) -> Result<()> {
        self.classes.finish()?;
        if let Some((p, _)) = self.probabilities {
            p.finish()?;
        }
        Ok(())
    }
}

/// `geo` with `value` as its nodata when nodata is in play, else none.
fn with_nodata(geo: Option<&GeoRef>, nodata: bool, value: f64) -> Option<GeoRef> {
    geo.map(|g| GeoRef {
        nodata: nodata.then_some(value),
        ..g.clone()
    })
}

/// The class map's legend: the overlays' colour of each class ([`infer::class_colour`]) and
/// the model's class names.
pub fn class_legend(names: &[String]) -> ClassLegend {
    ClassLegend {
        colours: (0..names.len().min(256))
            .map(|c| infer::class_colour(c as u8))
            .collect(),
        names: names.iter().take(256).cloned().collect(),
    }
}

/// Starts `<out_dir>/<stem>_prob.tif`: one band per class, named after it, in `format`, with
/// `geo` and the format's nodata value (NaN, or 255 for bytes) when nodata is in play.
pub fn probability_writer(
    out_dir: &Path,
    stem: &str,
    [height, width]: [usize; 2],
    geo: Option<&GeoRef>,
    nodata: bool,
    names: &[String],
    format: ProbFormat,
) -> Result<(CogWriter, PathBuf)> {
    let path = out_dir.join(format!("{stem}_prob.tif"));
    let (kind, nodata_value, scale_offset) = match format {
        ProbFormat::F32 => (SampleKind::F32, f64::NAN, None),
        ProbFormat::U8 => (
            SampleKind::U8,
            NODATA_CLASS as f64,
            Some((1.0 / U8_STEPS as f64, 0.0)),
        ),
    };
    let shape = RasterShape {
        width,
        height,
        bands: names.len(),
        kind,
    };
    let average = CogOptions {
        resampling: OverviewResampling::Average,
        ..Default::default()
    };
    let info = BandInfo {
        names: names.to_vec(),
        scale_offset,
    };
    let writer = CogWriter::create(
        &path,
        shape,
        with_nodata(geo, nodata, nodata_value).as_ref(),
        average,
    )
    .and_then(|w| w.with_band_info(info))
    .with_context(|| format!("writing {}", path.display()))?;
    Ok((writer, path))
}

/// What a band of predicted rows gives every output: the class per pixel and, when an output
/// asks for them, the softmax probabilities, computed once from the blended logits for the
/// probability raster, the statistics and the polygons alike.
pub struct RowPrediction {
    /// Class index per pixel ([`classes_with_nodata`]); `[plane]`.
    pub classes: Vec<u8>,
    /// Softmax probabilities ([`probabilities`]), when asked for; `[k, plane]`.
    probabilities: Option<Vec<f32>>,
}

impl RowPrediction {
    /// The classes of `plane` pixels from their blended `logits` (`[k, plane]`), with
    /// [`NODATA_CLASS`] where `holes` (`[plane]`) is set, and their probabilities when
    /// `with_probabilities`.
    pub fn new(
        logits: &[f32],
        k: usize,
        plane: usize,
        holes: Option<&[bool]>,
        with_probabilities: bool,
    ) -> Self {
        Self {
            classes: classes_with_nodata(logits, k, plane, holes),
            probabilities: with_probabilities.then(|| probabilities(logits, k, plane)),
        }
    }

    /// The probabilities (`[k, plane]`); an error if they were not asked for.
    pub fn probabilities(&self) -> Result<&[f32]> {
        self.probabilities
            .as_deref()
            .context("internal: the rows' probabilities were not computed")
    }
}

/// The probability samples of `plane` pixels in `format`: the softmax `probabilities`
/// (`[k, plane]`) pixel-interleaved, NaN where `holes` is set ([`probabilities_hwc`]),
/// quantised for [`ProbFormat::U8`]: `round(p × 254)`, 255 on nodata.
///
/// # Shapes
/// - probabilities: `[k, plane]`, holes: `[plane]`
/// - output: `[plane, k]`
pub fn probability_rows(
    probabilities: &[f32],
    k: usize,
    plane: usize,
    holes: Option<&[bool]>,
    format: ProbFormat,
) -> RasterData {
    let hwc = probabilities_hwc(probabilities, k, plane, holes);
    match format {
        ProbFormat::F32 => RasterData::F32(hwc),
        ProbFormat::U8 => RasterData::U8(
            hwc.into_iter()
                .map(|p| {
                    if p.is_nan() {
                        NODATA_CLASS
                    } else {
                        (p.clamp(0.0, 1.0) * U8_STEPS).round() as u8
                    }
                })
                .collect(),
        ),
    }
}

/// Class index per pixel ([`classes_of`]), [`NODATA_CLASS`] where `holes` is set.
///
/// # Shapes
/// - logits: `[k, plane]`, holes: `[plane]`
/// - output: `[plane]`
pub fn classes_with_nodata(
    logits: &[f32],
    k: usize,
    plane: usize,
    holes: Option<&[bool]>,
) -> Vec<u8> {
    let mut classes = classes_of(logits, k, plane);
    if let Some(holes) = holes {
        for (c, &hole) in classes.iter_mut().zip(holes) {
            if hole {
                *c = NODATA_CLASS;
            }
        }
    }
    classes
}

/// Softmax probabilities (`[k, plane]`, from [`probabilities`]) as pixel-interleaved samples,
/// NaN where `holes` is set.
///
/// # Shapes
/// - probabilities: `[k, plane]`, holes: `[plane]`
/// - output: `[plane, k]`
fn probabilities_hwc(chw: &[f32], k: usize, plane: usize, holes: Option<&[bool]>) -> Vec<f32> {
    let is_hole = |i: usize| holes.is_some_and(|h| h[i]);
    (0..plane)
        .flat_map(|i| (0..k).map(move |c| (c, i)))
        .map(|(c, i)| {
            if is_hole(i) {
                f32::NAN
            } else {
                chw[c * plane + i]
            }
        })
        .collect()
}

/// The nodata value of the scene `label` names: `--nodata` (checked once up front), else its
/// `GDAL_NODATA`, checked against the model's classes.
pub fn resolve_nodata(
    k: usize,
    flag: Option<f64>,
    geo: Option<&GeoRef>,
    label: &str,
) -> Result<Option<f64>> {
    let tag = geo.and_then(|g| g.nodata);
    if let (None, Some(nd)) = (flag, tag) {
        check_nodata_room(
            k,
            &format!("{label} declares GDAL_NODATA {nd}"),
            "unset it (gdal_edit.py -unsetnodata)",
        )?;
    }
    Ok(flag.or(tag))
}

/// Fails when a `k`-class model uses [`NODATA_CLASS`] as a class index; `source` says where the
/// nodata value came from, `fix` how to do without it.
pub fn check_nodata_room(k: usize, source: &str, fix: &str) -> Result<()> {
    ensure!(
        k <= NODATA_CLASS as usize,
        "{source}: nodata pixels get {NODATA_CLASS} in the class map, but this model's {k} classes \
         include {NODATA_CLASS}; {fix}, or use a model of at most {NODATA_CLASS} classes"
    );
    Ok(())
}

/// The file stem of `path`, which names its outputs (`scene.tif` → `scene.tif`, `scene.geojson`).
pub fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into())
}
