//! What every output of `segfit predict` follows, whoever writes it: the nodata class and
//! where an input's nodata value comes from, the class and probability rasters of a scene, and
//! the names of output files. A leaf: it uses no other module of the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use infer::{classes_of, probabilities};
use tiles::{
    CogOptions, CogWriter, GeoRef, OverviewResampling, RasterData, RasterShape, SampleKind,
};

/// The class value of nodata pixels: never a class index, declared as the class map's
/// `GDAL_NODATA` (models with more than 255 classes are refused when nodata is in play).
pub const NODATA_CLASS: u8 = 255;

/// The GeoTIFF outputs of one scene, written row band by row band.
pub struct SceneOutputs {
    classes: CogWriter,
    probabilities: Option<CogWriter>,
    k: usize,
    width: usize,
}

impl SceneOutputs {
    /// Starts `<out_dir>/<stem>.tif` (u8 class indices, [`NODATA_CLASS`] on nodata pixels) and,
    /// with `probabilities`, `<stem>_prob.tif` (f32, one band per class, NaN on nodata pixels).
    /// Both carry `geo` with their own nodata value, never the input's: with nodata = 0, GIS
    /// tools would hide class 0. Returns the class map's path too.
    pub fn create(
        out_dir: &Path,
        stem: &str,
        [height, width]: [usize; 2],
        k: usize,
        geo: Option<&GeoRef>,
        nodata: bool,
        probabilities: bool,
    ) -> Result<(Self, PathBuf)> {
        let with_nodata = |value: f64| {
            geo.map(|g| GeoRef {
                nodata: nodata.then_some(value),
                ..g.clone()
            })
        };
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
            with_nodata(NODATA_CLASS as f64).as_ref(),
            nearest,
        )
        .with_context(|| format!("writing {}", path.display()))?;
        let probabilities = if probabilities {
            let prob_path = out_dir.join(format!("{stem}_prob.tif"));
            let shape = RasterShape {
                bands: k,
                kind: SampleKind::F32,
                ..shape
            };
            let average = CogOptions {
                resampling: OverviewResampling::Average,
                ..Default::default()
            };
            let writer =
                CogWriter::create(&prob_path, shape, with_nodata(f64::NAN).as_ref(), average)
                    .with_context(|| format!("writing {}", prob_path.display()))?;
            Some(writer)
        } else {
            None
        };
        let outputs = Self {
            classes,
            probabilities,
            k,
            width,
        };
        Ok((outputs, path))
    }

    /// Writes the next `n` rows from their blended logits (`[k, n, W]`) and `classes`
    /// ([`classes_with_nodata`], `[n, W]`); `holes` marks their nodata pixels (`[n, W]`).
    pub fn write_rows(
        &mut self,
        logits: &[f32],
        classes: &[u8],
        n: usize,
        holes: Option<&[bool]>,
    ) -> Result<()> {
        let plane = n * self.width;
        self.classes.write_rows(&RasterData::U8(classes.to_vec()))?;
        if let Some(writer) = &mut self.probabilities {
            let hwc = probabilities_hwc(logits, self.k, plane, holes);
            writer.write_rows(&RasterData::F32(hwc))?;
        }
        Ok(())
    }

    /// Writes the overviews and moves the files into place.
    pub fn finish(self) -> Result<()> {
        self.classes.finish()?;
        if let Some(p) = self.probabilities {
            p.finish()?;
        }
        Ok(())
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

/// Softmax probabilities ([`probabilities`]) as pixel-interleaved samples, NaN where `holes`
/// is set.
///
/// # Shapes
/// - logits: `[k, plane]`, holes: `[plane]`
/// - output: `[plane, k]`
pub fn probabilities_hwc(
    logits: &[f32],
    k: usize,
    plane: usize,
    holes: Option<&[bool]>,
) -> Vec<f32> {
    let chw = probabilities(logits, k, plane);
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

/// The nodata value of `file`: `--nodata` (checked once up front), else its `GDAL_NODATA`,
/// checked against the model's classes.
pub fn resolve_nodata(
    k: usize,
    flag: Option<f64>,
    geo: Option<&GeoRef>,
    file: &Path,
) -> Result<Option<f64>> {
    let tag = geo.and_then(|g| g.nodata);
    if let (None, Some(nd)) = (flag, tag) {
        check_nodata_room(
            k,
            &format!("{} declares GDAL_NODATA {nd}", file.display()),
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
