//! `segfit predict`: class masks (and optionally probabilities, overlays, raw logits) for
//! images of any size, by sliding-window inference with blended logits.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use clap::Args;
use segformer::Segformer;
use tiles::{GeoRef, Mask, Raster, RasterData, Remote, RemoteOptions, StackOptions};

use crate::answers::{AnswerArgs, AnswerSpec, Finished, class_names, write_scene_stats};
use crate::batch::{BatchChoice, Batches};
use crate::device::on_device;
use crate::inputs::{self, Scene, Shard, check_assets, check_bands, read_whole};
use crate::model_source::ModelSource;
use crate::npy;
use crate::output::{
    OutputSpec, ProbFormat, RowPrediction, SceneOutputs, check_nodata_room, probability_rows,
    probability_writer, resolve_nodata, stem_of,
};
use crate::progress::Progress;
use crate::resume;
use crate::scene::{SceneJob, predict_scene};
use infer::{Windows, classes_of, predict_windows};

/// Arguments of `segfit predict`.
#[derive(Args, Debug)]
pub struct PredictArgs {
    /// The model: a run directory (uses checkpoints/best, else checkpoints/last), a checkpoint
    /// directory, or an HF directory (config.json + model.safetensors or pytorch_model.bin).
    #[arg(long, value_name = "M")]
    pub model: PathBuf,
    /// An image (PNG, JPEG, TIFF/GeoTIFF) or a folder of them; a GeoTIFF/COG by URL
    /// (`https://`, `s3://`, `gs://`, `az://`: range requests, only the blocks the windows
    /// need); or a STAC Item / ItemCollection `.json` (path or URL), each item's --assets
    /// stacked as the bands.
    #[arg(
        long,
        value_name = "FILE|DIR|URL",
        required_unless_present_any = ["pixel_values", "inputs"],
        conflicts_with = "pixel_values"
    )]
    pub input: Option<String>,
    /// A manifest of scenes: a text file (path or URL) with one --input per line (`#`
    /// comments and blank lines skipped, relative paths from the manifest's folder), or a
    /// STAC ItemCollection `.json`. Each finished scene gets `<name>.done.json`, written last;
    /// a rerun skips the scenes that have one.
    #[arg(long, value_name = "FILE|URL", conflicts_with_all = ["input", "pixel_values"])]
    pub inputs: Option<String>,
    /// Predict only shard I of N (I counts from 0: `--shard $JOB_COMPLETION_INDEX/N`): scene
    /// k of the listed scenes goes to shard k mod N, so N tasks cover the list exactly once.
    /// Writes completion markers as --inputs does.
    #[arg(long, value_name = "I/N", conflicts_with = "pixel_values")]
    pub shard: Option<Shard>,
    /// With STAC inputs: the assets that are the model's bands, in its band order, by asset
    /// key or eo:bands common name (e.g. red,green,blue,nir).
    #[arg(
        long,
        value_name = "A,B,…",
        value_delimiter = ',',
        conflicts_with = "pixel_values"
    )]
    pub assets: Vec<String>,
    /// With --assets: resample the other assets onto this asset's grid (nearest neighbour,
    /// as GDAL's `-r near`) when they lie on different grids (10 m and 20 m bands).
    #[arg(long, value_name = "ASSET", requires = "assets")]
    pub resample_to: Option<String>,
    /// Run on an already preprocessed float32 `[N, C, H, W]` .npy tensor instead of an image
    /// (e.g. HF's `pixel_values`), to compare with other frameworks.
    #[arg(long, value_name = "FILE.npy")]
    pub pixel_values: Option<PathBuf>,
    /// Folder for the outputs: `<name>.tif` for (Geo)TIFF inputs (georeferencing kept),
    /// `<name>.png` otherwise; pixel values are class indices.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Window side in pixels [default: the run's training size (data.size), an HF directory's
    /// preprocessor_config.json size, else 512].
    #[arg(long, value_name = "N")]
    pub tile: Option<usize>,
    /// Pixels shared by neighbouring windows [default: a quarter of the window].
    #[arg(long, value_name = "N")]
    pub overlap: Option<usize>,
    /// Windows run through the model at once [default: the most, up to 16, whose predicted
    /// peak memory fits --memory-budget, per scene (wider scenes blend more); 4 on a GPU
    /// without --memory-budget].
    #[arg(long, value_name = "N")]
    pub batch_size: Option<usize>,
    /// The memory the batch is chosen to fit (e.g. 2GiB, 800MiB) when --batch-size is not
    /// given [default on the CPU: a quarter of this machine's memory].
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = train::parse_bytes,
        conflicts_with = "batch_size"
    )]
    pub memory_budget: Option<u64>,
    /// Also write `<name>_prob.tif`, one band per class named after it: `f32` (the default
    /// without a value) float32 probabilities, NaN on nodata; `u8` round(p × 254) as bytes,
    /// 255 on nodata, tagged scale 1/254 so GDAL reads 0–1 back: 4× smaller, worst rounding
    /// error 0.5/254 ≈ 0.00197.
    #[arg(
        long,
        value_name = "f32|u8",
        num_args = 0..=1,
        default_missing_value = "f32"
    )]
    pub probabilities: Option<ProbFormat>,
    /// Also write `<name>_overlay.png`: the image with the classes painted over it.
    #[arg(long)]
    pub overlay: bool,
    /// Input nodata value, overriding the images' GDAL_NODATA tags (e.g. 0, -9999, nan): pixels
    /// equal to it in every band get 255 in the class map (declared as its GDAL_NODATA) and NaN
    /// probabilities [default: each image's GDAL_NODATA, else none].
    #[arg(long, value_name = "V", conflicts_with = "pixel_values")]
    pub nodata: Option<f64>,
    /// Write the blended full-resolution logits as float32 `[N, classes, H, W]` .npy (one
    /// input image, or with --pixel-values).
    #[arg(long, value_name = "FILE.npy")]
    pub logits: Option<PathBuf>,
    /// With --pixel-values and --logits: write the model's own quarter-resolution logits
    /// (HF's `outputs.logits`, `[N, classes, H/4, W/4]`) instead of the blended full-resolution
    /// ones; the tensor is run whole, as one window.
    #[arg(long, requires_all = ["pixel_values", "logits"])]
    pub raw_logits: bool,
    /// Test-time augmentation: none, flips (class probabilities averaged over the horizontal
    /// and vertical flips, 4 poses) or d4 (all 8 flips, transposes and rotations by 90°); with
    /// it, --logits holds log-probabilities.
    #[arg(long, default_value = "none", conflicts_with = "raw_logits")]
    pub tta: infer::Tta,
    /// Hectares and polygons from the same pass.
    #[command(flatten)]
    pub answers: AnswerArgs,
    /// Where the model runs: cpu, wgpu or wgpu:N (Vulkan/Metal/DX12), cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: train::Device,
    /// The model's kernels: auto (the fastest the device has), recompute (no fused CPU
    /// kernels) or composed (burn's plain composition, for comparison).
    #[arg(long, default_value = "auto")]
    pub kernels: segformer::Kernels,
    /// Compute precision: f32, or bf16 (bfloat16 products with f32 sums; on the CPU the fused
    /// kernels' AVX512-BF16 path, computed in f32 on CPUs without it; CUDA's bf16 on NVIDIA
    /// GPUs), or f16. Weights and the blend stay f32.
    #[arg(long, default_value = "f32", value_name = "f32|bf16|f16")]
    pub precision: train::Precision,
}

/// Runs `segfit predict`.
pub fn run(args: &PredictArgs) -> Result<()> {
    if let Some(batch) = args.batch_size {
        crate::host::check_batch("--batch-size", batch)?;
    }
    if let Some(t) = args.tile {
        crate::host::check_side("--tile", t)?;
    }
    if let Some(o) = args.overlap {
        crate::host::check_flag("--overlap", o, 0, train::MAX_SIDE - 1)?;
    }
    let source = ModelSource::resolve(&args.model)?;
    crate::host::reuse_freed_memory();
    on_device!(args.device, predict_on(args, &source))
}

fn predict_on<B: Backend>(
    args: &PredictArgs,
    source: &ModelSource,
    device: &B::Device,
) -> Result<()> {
    let model = source
        .load::<B>(device)?
        .with_kernels(args.kernels)
        .with_compute_dtype(args.precision.compute_dtype());
    if let Some(note) = precision_note::<B>(args, device)? {
        eprintln!("{note}");
    }
    let tile = args
        .tile
        .map(|t| [t, t])
        .unwrap_or_else(|| source.window(512));
    let host = crate::host::host();
    let choice = BatchChoice::new(args.batch_size, args.memory_budget, args.device, &host);
    // The machine's memory bounds a fixed batch, and one window of any batch (the budget's
    // batch is checked per scene).
    let floor = match choice {
        BatchChoice::Fixed(batch) => batch,
        BatchChoice::Budget(_) => 1,
    };
    crate::host::check_inference(
        &host,
        floor,
        tile,
        model.config().num_channels,
        model.num_labels(),
    )?;
    let batches = Batches::new(choice, args.memory_budget.is_some());
    // The batch is set per scene (`Batches::windows`).
    let windows = Windows::new(tile, args.overlap, 1).with_context(|| {
        format!(
            "--tile {}x{}, --overlap {:?}",
            tile[0], tile[1], args.overlap
        )
    })?;
    let windows = windows.with_tta(args.tta);
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    if let Some(path) = &args.pixel_values {
        ensure!(
            args.answers.stats.is_none() && !args.answers.vector,
            "--stats and --vector need images (areas come from their georeferencing), not \
             --pixel-values"
        );
        let windows = batches.windows(&windows, model.config(), tile[1], |l| eprintln!("{l}"))?;
        return predict_tensor(args, path, &model, &windows, device);
    }
    let answers = AnswerSpec::new(&args.answers, class_names(model.config()))?;
    let mut report = answers.report();
    let mut zone_stats: Option<vector::ZoneStats> = None;
    let remote = Remote::new(RemoteOptions::from_env());
    let stack = StackOptions {
        assets: args.assets.clone(),
        resample_to: args.resample_to.clone(),
    };
    let (scenes, mine) = scenes_of(args, &remote)?;
    let n_mine = mine.iter().filter(|&&m| m).count();
    let resumable = args.inputs.is_some() || args.shard.is_some();
    let processor = source.processor(None)?;
    if let Some(nd) = args.nodata {
        check_nodata_room(
            model.num_labels(),
            &format!("--nodata {nd}"),
            "drop --nodata",
        )?;
    }
    // With --zones, a pixel counts for the first listed scene covering it: the scenes before
    // the last one predicted here are placed even when predicted elsewhere.
    let last_mine = mine.iter().rposition(|&m| m);
    let progress = Progress::new("rows");
    let (mut i, mut predicted) = (0, 0);
    for (k, scene) in scenes.iter().enumerate() {
        // Only this task's scenes: the others' markers are other tasks' business.
        let done = (resumable && mine[k])
            .then(|| resume::finished(&args.output, &scene.name))
            .flatten();
        if mine[k] {
            i += 1;
        }
        if !mine[k] || done.is_some() {
            if let Some(marker) = &done {
                progress.line(&format!(
                    "[{i}/{n_mine}] {}: done already ({}), skipped",
                    scene.label,
                    marker.display()
                ));
            }
            if answers.has_zones() && last_mine.is_some_and(|l| k < l) && scene.streams() {
                // Its header only, for its footprint.
                let reader = scene.open(&stack, &remote)?;
                let size = [reader.height(), reader.width()];
                answers.skip_scene(&scene.label, reader.geo(), size)?;
            }
            continue;
        }
        progress.start(format!("[{i}/{n_mine}] {}", scene.label));
        predicted += 1;
        let job = SceneJob {
            scene,
            out_dir: &args.output,
            nodata: args.nodata,
            probabilities: args.probabilities,
            windows: &windows,
            batches: &batches,
            processor: &processor,
            answers: &answers,
            progress: &progress,
        };
        let (written, finished, outputs) =
            predict_one(args, &model, &job, &stack, &remote, device)?;
        let mut line = format!("[{i}/{n_mine}] {} -> {}", scene.label, written.display());
        if let Some((path, n)) = &finished.geojson {
            line += &format!(", {} ({n} polygons)", path.display());
        }
        if resumable {
            resume::mark_done(&args.output, &scene.name, &scene.label, &outputs)?;
        }
        progress.line(&line);
        if let (Some(report), Some((stats, grid))) = (&mut report, finished.stats) {
            report.add(&scene.label, &grid, stats);
        }
        match (&mut zone_stats, finished.zones) {
            (Some(total), Some(z)) => total.merge(&z),
            (total, z) => *total = total.take().or(z),
        }
    }
    progress.finish();
    for w in answers.zone_warnings() {
        eprintln!("warning: {w}");
    }
    if let (Some(report), Some(z)) = (&mut report, zone_stats) {
        report.set_zones(z, crate::zones::OVERLAP_NOTE);
    }
    if let Some(report) = &report {
        answers.write_report(report)?;
        if predicted > 0 {
            outln!("{}", report.summary().trim_end())?;
        } else {
            // A task whose scenes were all done already, or a shard of none.
            outln!(
                "no scene predicted in this run; sum the scenes' <name>.stats.json with \
                 `segfit stats merge`"
            )?;
        }
        eprintln!(
            "statistics -> {}",
            args.answers.stats.as_ref().expect("a report").display()
        );
    }
    Ok(())
}

/// The scenes `--input`/`--inputs` name, checked (output names, `--assets`), and which of them
/// are this task's (`--shard`). Scenes are listed in a fixed order, so every task of a job
/// array agrees on the shards.
fn scenes_of(args: &PredictArgs, remote: &Remote) -> Result<(Vec<Scene>, Vec<bool>)> {
    let scenes = match (&args.inputs, &args.input) {
        (Some(manifest), _) => inputs::read_manifest(manifest, remote)?,
        (None, Some(input)) => inputs::list_scenes(input, "--input", remote)?,
        (None, None) => bail!("give --input, --inputs or --pixel-values"),
    };
    inputs::check_names(&scenes)?;
    check_assets(&scenes, &args.assets)?;
    let mine: Vec<bool> = (0..scenes.len())
        .map(|k| args.shard.is_none_or(|s| s.takes(k)))
        .collect();
    let n_mine = mine.iter().filter(|&&m| m).count();
    if args.logits.is_some() && n_mine > 1 {
        bail!("--logits writes one array: give a single --input image, not {n_mine} scenes");
    }
    if let Some(shard) = args.shard {
        eprintln!(
            "shard {}/{}: {n_mine} of the {} listed scenes",
            shard.index,
            shard.count,
            scenes.len()
        );
    }
    Ok((scenes, mine))
}

/// Predicts `job`'s scene: streamed from its [`tiles::WindowSource`] (GeoTIFFs, local or by
/// URL, and STAC stacks) unless an output needs it whole; writes its outputs, and with
/// `--stats` its `<name>.stats.json`. Returns the class map's path, the answers and every
/// output written (for the completion marker).
fn predict_one<B: Backend>(
    args: &PredictArgs,
    model: &Segformer<B>,
    job: &SceneJob<'_>,
    stack: &StackOptions,
    remote: &Remote,
    device: &B::Device,
) -> Result<(PathBuf, Finished, Vec<PathBuf>)> {
    let scene = job.scene;
    let channels = model.config().num_channels;
    let (written, finished) = if scene.streams() && args.logits.is_none() && !args.overlay {
        let reader = scene.open(stack, remote)?;
        check_bands(scene, reader.bands(), job.processor, channels, &args.assets)?;
        predict_scene(model, job, reader, device)?
    } else {
        let (image, geo) = read_whole(scene, stack, remote)?;
        check_bands(scene, image.bands, job.processor, channels, &args.assets)?;
        predict_image(args, model, job, image, geo, device)?
    };
    let mut outputs = vec![written.clone()];
    if let Some((path, _)) = &finished.geojson {
        outputs.push(path.clone());
    }
    if args.probabilities.is_some() {
        outputs.push(args.output.join(format!("{}_prob.tif", scene.name)));
    }
    if args.overlay {
        outputs.push(args.output.join(format!("{}_overlay.png", scene.name)));
    }
    if let Some((stats, grid)) = &finished.stats {
        let zones = finished.zones.as_ref();
        outputs.push(write_scene_stats(&args.output, scene, stats, grid, zones)?);
    }
    Ok((written, finished, outputs))
}

/// One image predicted whole in memory (PNG/JPEG, or a GeoTIFF with `--overlay`/`--logits`);
/// returns the class map's path and the answers.
fn predict_image<B: Backend>(
    args: &PredictArgs,
    model: &Segformer<B>,
    job: &SceneJob<'_>,
    image: Raster,
    geo: Option<GeoRef>,
    device: &B::Device,
) -> Result<(PathBuf, Finished)> {
    let label = &job.scene.label;
    let nodata = resolve_nodata(model.num_labels(), job.nodata, geo.as_ref(), label)?;
    let bands = model.config().num_channels;
    ensure!(
        job.processor.output_bands(image.bands) == bands,
        "{label} has {} bands but the model takes {bands}; predict on images like the training ones",
        image.bands
    );
    let processed = job
        .processor
        .process(&image, None)
        .with_context(|| format!("preprocessing {label}"))?;
    let (h, w) = (image.height, image.width);
    let pixels = &processed.pixel_values;
    let windows = job.windows_for(model.config(), w)?;
    let logits = predict_windows(model, pixels, [bands, h, w], &windows, device)?;
    let k = model.num_labels();
    let written = write_outputs(args, job, &image, geo.as_ref(), nodata, &logits, k)?;
    if let Some(path) = &args.logits {
        npy::write_f32(path, &[1, k, h, w], &logits)?;
    }
    Ok(written)
}

/// `--pixel-values`: every item of an `[N, C, H, W]` tensor.
fn predict_tensor<B: Backend>(
    args: &PredictArgs,
    path: &Path,
    model: &Segformer<B>,
    windows: &Windows,
    device: &B::Device,
) -> Result<()> {
    let (shape, data) = npy::read_f32(path)?;
    let [n, c, h, w] = shape[..] else {
        bail!(
            "{}: pixel values must be [N, C, H, W], found shape {shape:?}",
            path.display()
        );
    };
    let bands = model.config().num_channels;
    ensure!(
        c == bands,
        "{}: has {c} channels but the model takes {bands}",
        path.display()
    );
    ensure!(
        n > 0 && h > 0 && w > 0,
        "{}: shape {shape:?} is empty",
        path.display()
    );
    let k = model.num_labels();
    if args.raw_logits {
        let out = args
            .logits
            .as_ref()
            .expect("clap requires --logits with --raw-logits");
        let x = Tensor::<B, 4>::from_data(TensorData::new(data, [n, c, h, w]), device);
        let logits = model.forward(x);
        let dims = logits.dims();
        let values: Vec<f32> = logits
            .into_data()
            .convert::<f32>()
            .to_vec()
            .map_err(|e| anyhow::anyhow!("reading logits back from the device: {e:?}"))?;
        npy::write_f32(out, &dims, &values)?;
        eprintln!(
            "{} -> {} (raw logits {dims:?})",
            path.display(),
            out.display()
        );
        return Ok(());
    }
    let stem = stem_of(path);
    let mut all = Vec::with_capacity(n * k * h * w);
    for item in 0..n {
        let pixels = &data[item * c * h * w..(item + 1) * c * h * w];
        let logits = predict_windows(model, pixels, [c, h, w], windows, device)?;
        let mask =
            Mask::new(w, h, classes_of(&logits, k, h * w)).expect("mask sized from the logits");
        let name = if n == 1 {
            format!("{stem}.png")
        } else {
            format!("{stem}_{item}.png")
        };
        let out = args.output.join(name);
        tiles::write_mask_png(&out, &mask).with_context(|| format!("writing {}", out.display()))?;
        all.extend_from_slice(&logits);
    }
    if let Some(out) = &args.logits {
        npy::write_f32(out, &[n, k, h, w], &all)?;
    }
    eprintln!(
        "{} -> {} ({n} item(s))",
        path.display(),
        args.output.display()
    );
    Ok(())
}

/// What `--precision` means on this backend and CPU, when it is not plain f32; an error where
/// the backend cannot compute in it.
fn precision_note<B: Backend>(args: &PredictArgs, device: &B::Device) -> Result<Option<String>> {
    use segformer::{BackendKind, Kernels};
    let precision = args.precision;
    if precision == train::Precision::F32 {
        return Ok(None);
    }
    let note = match (BackendKind::of::<B>(device), precision) {
        (BackendKind::Wgpu, train::Precision::Bf16) => bail!(
            "--precision bf16 is not available on wgpu: burn-wgpu has no bf16 arithmetic (WGSL \
             has no bf16 type); use --precision f16 or f32, or --device cuda"
        ),
        (BackendKind::Flex, train::Precision::Bf16) if args.kernels == Kernels::Composed => {
            "--precision bf16 with --kernels composed: burn's autocast composition (bf16 \
             operands and products, slow on the CPU)"
        }
        (BackendKind::Flex, train::Precision::Bf16) if !segformer::cpu_has_bf16_kernels() => {
            "--precision bf16: this CPU has no AVX512-BF16, so the model computes in f32 (the \
             same class map as --precision f32)"
        }
        (BackendKind::Flex, train::Precision::Bf16) => {
            "--precision bf16: the fused kernels multiply bf16-rounded operands with f32 sums \
             (AVX512-BF16) in the linear layers, patch convs and attention"
        }
        (BackendKind::Flex, _) => {
            "--precision f16 on the CPU: burn's composed half-precision ops, slower than f32 \
             here; bf16 or f32 is faster on this backend"
        }
        _ => return Ok(None),
    };
    Ok(Some(note.to_string()))
}

/// Writes the mask (and the optional rasters and answers) of `job`'s scene; returns the mask's
/// path and the answers. Pixels that are `nodata` in every band get [`NODATA_CLASS`](crate::output::NODATA_CLASS) and NaN
/// probabilities, both declared in the GeoTIFFs' `GDAL_NODATA` (the input's own nodata is
/// never copied: it may be a class).
fn write_outputs(
    args: &PredictArgs,
    job: &SceneJob<'_>,
    image: &Raster,
    geo: Option<&GeoRef>,
    nodata: Option<f64>,
    logits: &[f32],
    k: usize,
) -> Result<(PathBuf, Finished)> {
    let (h, w) = (image.height, image.width);
    let stem = &job.scene.name;
    let holes = nodata.map(|nd| tiles::nodata_pixels(image, nd));
    let mut answers = job
        .answers
        .start(&job.scene.label, geo, [h, w], &args.output, stem)?
        .keep_outlines();
    let rows = RowPrediction::new(
        logits,
        k,
        h * w,
        holes.as_deref(),
        args.probabilities.is_some() || answers.needs_probabilities(),
    );
    answers.add_rows(&rows)?;
    let classes = &rows.classes;
    let finished = answers.finish()?;
    // GeoTIFF inputs (local, by URL, STAC) give GeoTIFFs, georeferencing kept.
    let out = if job.scene.streams() {
        let spec = OutputSpec {
            names: job.answers.names(),
            probabilities: args.probabilities,
        };
        let (mut outputs, out) =
            SceneOutputs::create(&args.output, stem, [h, w], geo, nodata.is_some(), &spec)?;
        outputs.write_rows(&rows, h, holes.as_deref())?;
        outputs
            .finish()
            .with_context(|| format!("writing {}", out.display()))?;
        out
    } else {
        let out = args.output.join(format!("{stem}.png"));
        let mask = Mask::new(w, h, classes.clone()).expect("mask sized from the image");
        tiles::write_mask_png(&out, &mask).with_context(|| format!("writing {}", out.display()))?;
        if let Some(format) = args.probabilities {
            let names = job.answers.names();
            let (mut writer, path) =
                probability_writer(&args.output, stem, [h, w], None, false, names, format)?;
            let rows = probability_rows(rows.probabilities()?, k, h * w, holes.as_deref(), format);
            writer
                .write_rows(&rows)
                .and_then(|()| writer.finish())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        out
    };
    if args.overlay {
        let path = args.output.join(format!("{stem}_overlay.png"));
        let mut picture = infer::overlay(image, classes, holes.as_deref());
        draw_outlines(&mut picture, &finished.outlines);
        tiles::write_png(&path, &picture).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok((out, finished))
}

/// The colour of polygon outlines on the overlay.
const OUTLINE: [u8; 3] = [255, 255, 0];

/// Draws the rings of `regions` (pixel-corner coordinates, as `--vector` writes them before
/// reprojection) onto an RGB `picture`: each unit pixel edge paints the two pixels it
/// separates, a two-pixel line that reads well at any zoom.
fn draw_outlines(picture: &mut Raster, regions: &[vector::Region]) {
    let (w, h) = (picture.width, picture.height);
    let RasterData::U8(rgb) = &mut picture.data else {
        return;
    };
    let mut paint = |x: usize, y: usize| {
        if x < w && y < h {
            rgb[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&OUTLINE);
        }
    };
    for ring in regions.iter().flat_map(|r| &r.rings) {
        for edge in ring.windows(2) {
            let ([x0, y0], [x1, y1]) = (edge[0], edge[1]);
            // Rings run along pixel edges (axis-aligned, whole pixels long): walk unit steps.
            let steps = (x1 - x0).abs().max((y1 - y0).abs()).round() as usize;
            for s in 0..steps {
                let t = (s as f64 + 0.5) / steps as f64;
                let (x, y) = (x0 + t * (x1 - x0), y0 + t * (y1 - y0));
                // A horizontal step's midpoint lies between rows y-1 and y, a vertical one's
                // between columns x-1 and x; `paint` skips what falls outside the image.
                if (y1 - y0).abs() < 0.5 {
                    let (px, py) = (x.floor() as usize, y.round() as usize);
                    paint(px, py);
                    paint(px, py.wrapping_sub(1));
                } else {
                    let (px, py) = (x.round() as usize, y.floor() as usize);
                    paint(px, py);
                    paint(px.wrapping_sub(1), py);
                }
            }
        }
    }
}
