//! `segfit prepare`: the tiles crate's dataset preparation from the command line.

use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use tiles::{FolderOptions, LabelClass, LabelMap, SceneOptions, SyntheticOptions};

/// Arguments of `segfit prepare`. One of three sources: `--images/--masks` (a folder of
/// pairs), `--scenes/--masks` (large rasters to tile) or `--synthetic`.
#[derive(Args, Debug)]
pub struct PrepareArgs {
    /// Output root: images/{train,val}, masks/{train,val} and dataset.json are written here.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Image folder (flat, or holding train/ and val/).
    #[arg(long, value_name = "DIR")]
    pub images: Option<PathBuf>,
    /// Mask folder for --images, or one label raster per --scenes file (same order).
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with = "labels")]
    pub masks: Vec<PathBuf>,
    /// For --scenes: polygon layers (GeoJSON, Shapefile, FlatGeobuf, any CRS) burned onto each
    /// scene's grid as its labels, instead of label rasters; repeatable. With them --class
    /// takes attribute values: `--class rice_paddy=rice,paddy`, `--class rice_paddy=*` (every
    /// feature), or a bare `--class outer` that no feature selects (a background).
    #[arg(long, value_name = "FILE", num_args = 1.., requires = "scenes")]
    pub labels: Vec<PathBuf>,
    /// The attribute of --labels holding each feature's class value.
    #[arg(long, value_name = "FIELD", requires = "labels")]
    pub class_field: Option<String>,
    /// The class of pixels no --labels feature covers.
    #[arg(
        long,
        value_name = "CLASS",
        requires = "labels",
        conflicts_with = "unlabelled"
    )]
    pub background: Option<String>,
    /// Pixels no --labels feature covers are ignored in training instead of getting a class.
    #[arg(long, value_enum, value_name = "ignore", requires = "labels")]
    pub unlabelled: Option<crate::labels::UnlabelledArg>,
    /// The surveyed area (a polygon layer): pixels outside it are ignored, since an unsurveyed
    /// pixel is not a negative.
    #[arg(long, value_name = "FILE", requires = "labels")]
    pub label_extent: Option<PathBuf>,
    /// Where --labels features overlap, the class listed first wins (e.g.
    /// `--priority rice_paddy,outer`) [default: the later feature wins, as gdal_rasterize].
    #[arg(
        long,
        value_name = "CLASS,…",
        value_delimiter = ',',
        requires = "labels"
    )]
    pub priority: Vec<String>,
    /// Burn every pixel a --labels polygon touches (GDAL's ALL_TOUCHED) instead of the pixels
    /// whose centre lies inside it.
    #[arg(long, requires = "labels")]
    pub all_touched: bool,
    /// The CRS of --labels/--label-extent files that name none (e.g. a Shapefile without its
    /// .prj): EPSG:<code>, an OGC URN or WKT.
    #[arg(long, value_name = "CRS", requires = "labels")]
    pub labels_crs: Option<String>,
    /// A list file (`image mask [train|val]` per line) instead of scanning --images/--masks.
    #[arg(long, value_name = "FILE")]
    pub list: Option<PathBuf>,
    /// Scene rasters (GeoTIFF, read window by window) to cut into tiles.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub scenes: Vec<PathBuf>,
    /// Tile side for --scenes.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub tile_size: usize,
    /// Pixels shared by neighbouring tiles for --scenes.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub overlap: usize,
    /// For --scenes: skip tiles whose fraction of ignore/nodata pixels is above this.
    #[arg(long, value_name = "F", default_value_t = 0.5)]
    pub max_empty_fraction: f64,
    /// Generate the synthetic satellite dataset (rice paddies) instead of reading files.
    #[arg(long)]
    pub synthetic: bool,
    /// Number of synthetic image/mask pairs.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub count: usize,
    /// Side of each synthetic image in pixels.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub size: usize,
    /// Synthetic: five classes instead of outer/rice_paddy.
    #[arg(long)]
    pub multi_class: bool,
    /// Synthetic: 4-band (RGB + NIR) 16-bit GeoTIFFs instead of RGB PNGs.
    #[arg(long)]
    pub multispectral: bool,
    /// Seed of the synthetic generator and of the train/val split hash.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Fraction of the samples that go to `val` (flat folders, synthetic); for --scenes, of the
    /// 2×2-tile blocks, train tiles sharing pixels with val being dropped.
    #[arg(long, value_name = "F", default_value_t = 0.2)]
    pub val_ratio: f64,
    /// A class and the mask values that mean it, in class order; repeat per class, e.g.
    /// `--class outer=0 --class rice_paddy=255` or `--class water=3,4`.
    #[arg(long = "class", value_name = "NAME=V[,V…]")]
    pub classes: Vec<String>,
    /// Mask values to ignore in the loss and the metrics [default: 255 unless a class uses it].
    #[arg(long, value_name = "V")]
    pub ignore: Vec<u8>,
    /// HF's do_reduce_labels: stored 0 is ignored and value v becomes class v - 1.
    #[arg(long)]
    pub reduce_labels: bool,
    /// Image nodata value, overriding the files' GDAL_NODATA tags (e.g. 0, -9999, nan): pixels
    /// equal to it in every band are ignored in the masks and left out of the band statistics
    /// [default: each image's GDAL_NODATA, else none].
    #[arg(long, value_name = "V")]
    pub nodata: Option<f64>,
    /// Mask file name = image stem + this suffix + "." + --mask-ext (e.g. `_mask`).
    #[arg(long, value_name = "S", default_value = "")]
    pub mask_suffix: String,
    /// Mask file extension.
    #[arg(long, value_name = "EXT", default_value = "png")]
    pub mask_ext: String,
    /// Leave images without a mask (and masks without an image) out instead of failing.
    #[arg(long)]
    pub skip_unpaired: bool,
    /// Copy files instead of hard-linking them.
    #[arg(long)]
    pub copy: bool,
    /// Print the audit (pairs, sizes, bands, class pixels) and exit without writing.
    #[arg(long)]
    pub audit_only: bool,
    /// The bands a model will see (0-based, in model input order, as `data.bands` in the
    /// training config): the audit checks the images have them and prints their statistics in
    /// that order. The dataset keeps every band; training picks them.
    #[arg(long, value_name = "B,B,…", value_delimiter = ',', requires = "images")]
    pub bands: Vec<usize>,
}

/// Synthetic samples at most (`--count`).
const MAX_COUNT: usize = 1_000_000;
/// Bytes per pixel that generating one synthetic sample holds at its peak (region ids, the
/// image, the mask, the PNG encoder's buffers): peak RSS of `segfit prepare --synthetic
/// --count 2` was 77 MiB at 2048² and 281 MiB at 4096² (`/usr/bin/time`, 2026-12-04), 17.4 B
/// per added pixel; 24 leaves a margin. Used as well for one --scenes tile (not measured).
const PREPARE_BYTES_PER_PIXEL: u64 = 24;

/// `flag` = `side` is a raster side this machine can hold one `side`² raster of
/// ([`PREPARE_BYTES_PER_PIXEL`]), or one error naming the flag with the largest that fits.
fn check_raster_side(flag: &str, side: usize, min: usize) -> Result<()> {
    crate::host::check_flag(flag, side, min, train::MAX_SIDE)?;
    let memory = crate::host::host().memory;
    let need = (side as u64).pow(2).saturating_mul(PREPARE_BYTES_PER_PIXEL);
    if need > memory {
        let most = ((memory / PREPARE_BYTES_PER_PIXEL) as f64).sqrt() as usize;
        bail!(
            "{flag} {side} needs about {} for one {side}x{side} raster, and this machine has {}; \
             the largest that fits is about {most}",
            train::human_bytes(need),
            train::human_bytes(memory)
        );
    }
    Ok(())
}

/// Runs `segfit prepare`.
pub fn run(args: &PrepareArgs) -> Result<()> {
    ensure!(
        (0.0..=1.0).contains(&args.max_empty_fraction),
        "--max-empty-fraction {} is not a fraction; expected a number in [0, 1]",
        args.max_empty_fraction
    );
    ensure!(
        (0.0..1.0).contains(&args.val_ratio),
        "--val-ratio {} is not a fraction; expected a number in [0, 1)",
        args.val_ratio
    );
    let report = if args.synthetic {
        crate::host::check_flag("--count", args.count, 2, MAX_COUNT)?;
        check_raster_side("--size", args.size, 16)?;
        ensure!(
            args.images.is_none() && args.scenes.is_empty(),
            "--synthetic generates its own images; drop --images/--scenes"
        );
        ensure!(
            !args.audit_only,
            "--audit-only audits files on disk; it does not apply to --synthetic"
        );
        ensure!(
            args.nodata.is_none(),
            "--nodata applies to --images/--scenes; synthetic images have no nodata pixels"
        );
        let opts = SyntheticOptions {
            count: args.count,
            size: args.size,
            seed: args.seed,
            out: args.out.clone(),
            val_ratio: args.val_ratio,
            multi_class: args.multi_class,
            multispectral: args.multispectral,
        };
        tiles::prepare_synthetic(&opts)?
    } else if !args.scenes.is_empty() {
        ensure!(
            !args.audit_only,
            "--audit-only applies to --images/--masks folders, not to --scenes"
        );
        let mut labeller = None;
        let labels = if args.labels.is_empty() {
            ensure!(
                !args.masks.is_empty(),
                "--scenes needs their labels: --masks FILE… (one label raster per scene) or \
                --labels FILE… (polygon layers burned onto each scene)"
            );
            label_map(args)?
        } else {
            ensure!(
                args.ignore.is_empty() && !args.reduce_labels,
                "--ignore and --reduce-labels apply to label rasters; with --labels use \
                --unlabelled ignore or --label-extent"
            );
            let (names, mapping) = crate::labels::class_names_and_mapping(args)?;
            labeller = Some(crate::labels::labeller(args, &names, mapping)?);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            LabelMap::identity(&names)
        };
        let mut opts =
            SceneOptions::new(args.scenes.clone(), args.masks.clone(), &args.out, labels);
        check_raster_side("--tile-size", args.tile_size, 1)?;
        ensure!(
            args.overlap < args.tile_size,
            "--overlap {} must be smaller than --tile-size {}",
            args.overlap,
            args.tile_size
        );
        opts.tile_size = args.tile_size;
        opts.overlap = args.overlap;
        opts.max_empty_fraction = args.max_empty_fraction;
        opts.val_ratio = args.val_ratio;
        opts.seed = args.seed;
        opts.nodata = args.nodata;
        let progress = std::sync::Arc::new(crate::progress::Progress::new("scene passes"));
        progress.start("prepare: survey and tile".into());
        opts.progress = tiles::ProgressHook(Some({
            let progress = progress.clone();
            std::sync::Arc::new(move |p: tiles::SceneProgress| {
                progress.set_length(p.total as u64);
                progress.advance(1);
            })
        }));
        let report = match &mut labeller {
            None => tiles::prepare_scenes(&opts),
            Some(l) => tiles::prepare_labelled_scenes(&opts, l),
        };
        progress.finish();
        let report = report?;
        if let Some(l) = &labeller {
            outln!("{}", l.audit())?;
        }
        report
    } else if args.images.is_some() || args.list.is_some() {
        let masks = match &args.masks[..] {
            [m] => m.clone(),
            [] if args.list.is_some() => PathBuf::new(),
            [] => bail!("--images needs --masks DIR (the folder of masks named like the images)"),
            more => bail!(
                "--images takes one --masks folder, not {} paths",
                more.len()
            ),
        };
        let images = args.images.clone().unwrap_or_default();
        let mut opts = FolderOptions::new(images, masks, &args.out, label_map(args)?);
        opts.list = args.list.clone();
        opts.mask_suffix = args.mask_suffix.clone();
        opts.mask_ext = args.mask_ext.clone();
        opts.val_ratio = args.val_ratio;
        opts.seed = args.seed;
        opts.skip_unpaired = args.skip_unpaired;
        opts.hard_link = !args.copy;
        opts.nodata = args.nodata;
        if args.audit_only {
            let audit = select_bands(tiles::audit(&opts)?, &args.bands)?;
            return crate::write_stdout(format_args!("{audit}"));
        }
        let mut report = tiles::prepare_folder(&opts)?;
        if let Some(audit) = report.audit.take() {
            // The dataset keeps every band whatever the selection: a bad one is reported, and
            // the written dataset stays valid.
            report.audit =
                Some(select_bands(audit, &args.bands).with_context(|| {
                    format!("{} was written with every band", args.out.display())
                })?);
        }
        report
    } else {
        bail!(
            "nothing to prepare: give --images DIR --masks DIR, --scenes FILE… --masks FILE…, or --synthetic"
        );
    };
    outln!("{report}")
}

/// The audit of the `--bands` selection (unchanged without one).
fn select_bands(audit: tiles::AuditReport, bands: &[usize]) -> Result<tiles::AuditReport> {
    if bands.is_empty() {
        return Ok(audit);
    }
    Ok(audit.select_bands(bands)?)
}

/// The label map of `--class`/`--ignore`/`--reduce-labels`.
fn label_map(args: &PrepareArgs) -> Result<LabelMap> {
    if args.classes.is_empty() && !args.reduce_labels {
        bail!(
            "give the label mapping: one --class NAME=VALUE per class in order, e.g. \
             --class outer=0 --class rice_paddy=255 (run with --audit-only to see the mask values)"
        );
    }
    let mut classes = Vec::new();
    for spec in &args.classes {
        let (name, values) = spec
            .split_once('=')
            .with_context(|| format!("--class `{spec}` is not NAME=VALUE (e.g. rice_paddy=255)"))?;
        let values = values
            .split(',')
            .map(|v| {
                v.trim()
                    .parse::<u8>()
                    .with_context(|| format!("--class `{spec}`: `{v}` is not a mask value 0-255"))
            })
            .collect::<Result<Vec<u8>>>()?;
        classes.push(LabelClass {
            name: name.trim().to_string(),
            values,
        });
    }
    let mut map = LabelMap::new(&[]);
    map.classes = classes;
    if !args.ignore.is_empty() {
        map.ignore = args.ignore.clone();
    }
    map.reduce_labels = args.reduce_labels;
    map.validate().context("--class")?;
    Ok(map)
}
