//! `segfit predict` on GeoTIFF scenes of any size, in bounded memory: the scene is read a
//! window at a time from a [`WindowSource`] (a local GeoTIFF, one by URL, or a STAC item's
//! stacked assets: range requests fetch only the blocks the windows need), blended by [`infer::predict_streaming`], and
//! the class map (and the probabilities) written as it is finished, as tiled (512×512),
//! Deflate-compressed Cloud-Optimized GeoTIFFs ([`tiles::CogWriter`]). Peak memory
//! depends on the window, the batch and the scene's width (the blend of one row of windows),
//! not on its height.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, ensure};
use augment::SegformerProcessor;
use burn::tensor::backend::Backend;
use infer::{Windows, predict_streaming};
use segformer::Segformer;
use tiles::WindowSource;

use crate::answers::{AnswerSpec, Finished};
use crate::batch::Batches;
use crate::inputs::Scene;
use crate::output::{OutputSpec, ProbFormat, RowPrediction, SceneOutputs, resolve_nodata};
use crate::progress::Progress;

/// What [`predict_scene`] needs besides the model.
pub struct SceneJob<'a> {
    /// The scene: its label names it in messages, its name its outputs.
    pub scene: &'a Scene,
    /// Where the outputs go.
    pub out_dir: &'a Path,
    /// `--nodata` (else the scene's own `GDAL_NODATA` is used).
    pub nodata: Option<f64>,
    /// Also write the probabilities, in this format.
    pub probabilities: Option<ProbFormat>,
    /// The windows (their batch comes from `batches`).
    pub windows: &'a Windows,
    /// How many windows run at once.
    pub batches: &'a Batches,
    /// The model's preprocessing.
    pub processor: &'a SegformerProcessor,
    /// Hectares and polygons, when asked for.
    pub answers: &'a AnswerSpec,
    /// The command's progress bar, counting the scene's rows.
    pub progress: &'a Progress,
}

/// The nodata pixels of the rows between the windows read and the rows written: one row of
/// `W` flags each, added as windows over it are read, removed as it is written.
#[derive(Default)]
struct HoleRows {
    rows: BTreeMap<usize, Vec<bool>>,
}

impl HoleRows {
    /// Marks the nodata pixels (`marked`, `[rh, rw]`) of the window at `(x0, y0)` in rows
    /// `width` wide.
    fn mark(&mut self, [y0, x0]: [usize; 2], [rh, rw]: [usize; 2], width: usize, marked: &[bool]) {
        for (y, flags) in marked.chunks(rw).take(rh).enumerate() {
            let row = self
                .rows
                .entry(y0 + y)
                .or_insert_with(|| vec![false; width]);
            for (dst, &hole) in row[x0..x0 + rw].iter_mut().zip(flags) {
                *dst |= hole;
            }
        }
    }

    /// Takes rows `y0..y0 + n` (`[n, width]`), forgetting them.
    fn take(&mut self, y0: usize, n: usize, width: usize) -> Vec<bool> {
        (y0..y0 + n)
            .flat_map(|y| self.rows.remove(&y).unwrap_or_else(|| vec![false; width]))
            .collect()
    }
}

/// The lock's value, also after a panic elsewhere (the pipeline resumes that panic anyway).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SceneJob<'_> {
    /// The windows, with the batch for a scene `width` pixels wide.
    pub fn windows_for(
        &self,
        config: &segformer::SegformerConfig,
        width: usize,
    ) -> Result<Windows> {
        self.batches
            .windows(self.windows, config, width, |line| self.progress.line(line))
    }
}

/// Predicts a scene read from `reader` in bounded memory; returns the class map's path and
/// the answers (statistics and polygons, fed the same rows). The class map is the one the
/// in-memory path gives, pixel for pixel ([`infer::predict_streaming`] blends to the same bits
/// as [`infer::predict_windows`]).
pub fn predict_scene<B: Backend>(
    model: &Segformer<B>,
    job: &SceneJob<'_>,
    mut reader: Box<dyn WindowSource>,
    device: &B::Device,
) -> Result<(PathBuf, Finished)> {
    let label = &job.scene.label;
    let (w, h, bands) = (reader.width(), reader.height(), reader.bands());
    // The bands the model sees (a run's `data.bands` picks them in the processor).
    let bands = job.processor.output_bands(bands);
    let channels = model.config().num_channels;
    ensure!(
        bands == channels,
        "{label} has {bands} bands but the model takes {channels}; predict on images like the training ones"
    );
    let geo = reader.geo().cloned();
    job.progress.set_length(h as u64);
    let k = model.num_labels();
    let nodata = resolve_nodata(k, job.nodata, geo.as_ref(), label)?;
    let stem = &job.scene.name;
    let spec = OutputSpec {
        names: job.answers.names(),
        probabilities: job.probabilities,
    };
    let (mut outputs, path) = SceneOutputs::create(
        job.out_dir,
        stem,
        [h, w],
        geo.as_ref(),
        nodata.is_some(),
        &spec,
    )?;
    let mut answers = job
        .answers
        .start(label, geo.as_ref(), [h, w], job.out_dir, stem)?;
    // The rows' nodata pixels, marked as the reader thread reads the windows over them and
    // taken by the thread that writes them (every row is covered by the row of windows that
    // finishes it, read before it is emitted).
    let holes = Mutex::new(HoleRows::default());
    let with_probabilities = outputs.needs_probabilities() || answers.needs_probabilities();
    let windows = job.windows_for(model.config(), w)?;
    predict_streaming(
        model,
        [bands, h, w],
        &windows,
        device,
        |[y0, x0]: [usize; 2], [rh, rw]: [usize; 2]| -> Result<Vec<f32>> {
            let window = reader.read_window(x0, y0, rw, rh).with_context(|| {
                format!("reading the {rw}x{rh} window at ({x0}, {y0}) of {label}")
            })?;
            if let Some(nd) = nodata {
                let marked = tiles::nodata_pixels(&window, nd);
                lock(&holes).mark([y0, x0], [rh, rw], w, &marked);
            }
            let processed = job
                .processor
                .process(&window, None)
                .with_context(|| format!("preprocessing {label}"))?;
            Ok(processed.pixel_values)
        },
        |y0, logits, n| -> Result<()> {
            let holes = nodata.map(|_| lock(&holes).take(y0, n, w));
            let rows = RowPrediction::new(logits, k, n * w, holes.as_deref(), with_probabilities);
            outputs
                .write_rows(&rows, n, holes.as_deref())
                .with_context(|| format!("writing {}", path.display()))?;
            answers.add_rows(&rows)?;
            job.progress.advance(n as u64);
            Ok(())
        },
    )?;
    let finished = answers.finish()?;
    outputs
        .finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((path, finished))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::classes_with_nodata;
    use burn::backend::Flex;
    use tiles::{Raster, RasterData};

    /// `predict_scene` itself (the e2e test compares the binary's two paths): the streamed,
    /// windowed read gives the classes of the whole image blended in memory.
    #[test]
    fn the_streamed_scene_is_the_in_memory_prediction() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures/segformer-tiny");
        let device = Default::default();
        let (model, _) = segformer::load_hf_dir::<Flex>(&fixture, &device).unwrap();
        let (w, h) = (150, 170);
        let data = (0..w * h * 3).map(|i| ((i * 37) % 251) as u8).collect();
        let image = Raster::new(w, h, 3, RasterData::U8(data)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scene.tif");
        tiles::write_geotiff(&file, &image, None).unwrap();
        let processor = SegformerProcessor {
            size: None,
            ..Default::default()
        };
        let windows = Windows::new([64, 64], Some(16), 3).unwrap();
        let remote = tiles::Remote::new(Default::default());
        let scene =
            &crate::inputs::list_scenes(file.to_str().unwrap(), "--input", &remote).unwrap()[0];
        let job = SceneJob {
            scene,
            out_dir: dir.path(),
            nodata: None,
            probabilities: None,
            windows: &windows,
            batches: &Batches::new(crate::batch::BatchChoice::Fixed(3), false),
            processor: &processor,
            answers: &AnswerSpec::new(
                &Default::default(),
                vec!["a".into(), "b".into(), "c".into()],
            )
            .unwrap(),
            progress: &Progress::new("rows"),
        };
        let reader = scene.open(&Default::default(), &remote).unwrap();
        let (path, _) = predict_scene(&model, &job, reader, &device).unwrap();
        let (written, _) = tiles::read_image(&path).unwrap();
        let pixels = processor.process(&image, None).unwrap().pixel_values;
        let logits = infer::predict_windows(&model, &pixels, [3, h, w], &windows, &device).unwrap();
        let expected = classes_with_nodata(&logits, model.num_labels(), h * w, None);
        assert_eq!(written.data, RasterData::U8(expected));
    }
}
