//! Big scenes → tiles: cut georeferenced scenes and their label rasters into fixed-size,
//! overlapping tiles, reading one row band at a time so memory stays bounded.
//!
//! Two passes over every scene: the survey checks the scene against its label raster (size,
//! CRS and grid, band layout, label values) and finds the tiles worth keeping, before anything
//! is written; then the tiles are split by 2×2-tile blocks (the `grid` module) and written.
//! The labels come from a label raster per scene or from a [`SceneLabeller`] that makes them
//! on each scene's grid (the `labeller` module).

mod align;
mod grid;
mod labeller;
mod source;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use raster::{GeoRef, Mask, Raster, SampleKind};

use self::align::check_alignment;
pub(crate) use self::align::same_crs;
use self::grid::{Planned, Role, assign_splits, origins};
use self::labeller::LabelRows;
pub use self::labeller::{LabellerError, SceneLabeller};
use self::source::{Source, crop, crop_mask};
use crate::error::TilesError;
use crate::io::{write_mask_png, write_png};
use crate::labels::LabelMap;
use crate::meta::{DatasetMeta, TileRecord};
use crate::prepare::{PrepareReport, into_fresh_output, nodata_mask_value};
use crate::stats::{StatsAccumulator, nodata_pixels};
use crate::tiff_write::{Compression, TiffOptions, write_geotiff_with};

/// How to tile scenes.
#[derive(Clone, Debug)]
pub struct SceneOptions {
    /// Scene images (GeoTIFF for windowed reads; PNG/JPEG are read whole).
    pub scenes: Vec<PathBuf>,
    /// Label rasters, one per scene, same size as it and, when both are georeferenced, on the
    /// same grid (same CRS, pixel corners within half a pixel). Empty for
    /// [`prepare_labelled_scenes`].
    pub masks: Vec<PathBuf>,
    /// Output root.
    pub out: PathBuf,
    /// Label mapping.
    pub labels: LabelMap,
    /// Tile side in pixels (default 512).
    pub tile_size: usize,
    /// Pixels shared by neighbouring tiles (default 0); the stride is `tile_size - overlap`.
    pub overlap: usize,
    /// Tiles whose fraction of ignore/nodata pixels exceeds this are skipped (default 0.5).
    pub max_empty_fraction: f64,
    /// Fraction of the 2×2-tile blocks in `val` (default 0.2): exactly `ceil(ratio × blocks)`,
    /// at least one and never all of them when there are two or more blocks.
    pub val_ratio: f64,
    /// Split seed (default 0).
    pub seed: u64,
    /// Compression of written GeoTIFF tiles (default Deflate).
    pub compression: Compression,
    /// Nodata value of the scenes, overriding their `GDAL_NODATA` tags (default `None`: each
    /// scene's tag, if any). A pixel that is nodata in every band is ignored in its tile's mask
    /// (whatever the label raster holds there) and left out of the band statistics; GeoTIFF
    /// tiles declare it in their own `GDAL_NODATA`.
    pub nodata: Option<f64>,
    /// Told after each scene of each pass (default: nobody), for a progress bar.
    pub progress: ProgressHook,
}

/// Where [`prepare_scenes`] is: each scene is read twice, once to survey it (its size, nodata
/// and label values, the tiles it gives) and once to write its tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SceneProgress {
    /// Scene passes done, surveys and writes together: `1..=total`.
    pub done: usize,
    /// Twice the number of scenes.
    pub total: usize,
}

/// A function told [`SceneProgress`] as [`prepare_scenes`] goes; `None` tells nobody.
#[derive(Clone, Default)]
pub struct ProgressHook(pub Option<std::sync::Arc<dyn Fn(SceneProgress) + Send + Sync>>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ProgressHook(Some(..))"
        } else {
            "ProgressHook(None)"
        })
    }
}

impl ProgressHook {
    fn tell(&self, done: usize, scenes: usize) {
        if let Some(f) = &self.0 {
            f(SceneProgress {
                done,
                total: 2 * scenes,
            });
        }
    }
}

impl SceneOptions {
    /// Options with the defaults above.
    pub fn new(
        scenes: Vec<PathBuf>,
        masks: Vec<PathBuf>,
        out: impl Into<PathBuf>,
        labels: LabelMap,
    ) -> Self {
        Self {
            scenes,
            masks,
            out: out.into(),
            labels,
            tile_size: 512,
            overlap: 0,
            max_empty_fraction: 0.5,
            val_ratio: 0.2,
            seed: 0,
            compression: Compression::Deflate,
            nodata: None,
            progress: ProgressHook::default(),
        }
    }
}

/// Cuts every scene and its label raster into tiles, writes the split layout (GeoTIFF tiles
/// keeping the georeferencing shifted to each tile's origin, PNG when the scene has none and fits
/// PNG), masks as PNG, and `dataset.json` with the tile manifest and train band statistics.
///
/// Tiles are split by 2×2-tile blocks, `val` getting `ceil(val_ratio × blocks)` of them, chosen
/// by a hash of the seed; train tiles that share pixels with a val tile are dropped (counted in
/// [`PrepareReport::dropped_tiles`]), so no val pixel is ever trained on.
///
/// Reads one band of `tile_size` rows at a time: peak memory is about two row bands of the
/// scene, whatever its height.
pub fn prepare_scenes(opts: &SceneOptions) -> Result<PrepareReport, TilesError> {
    prepare(opts, None)
}

/// [`prepare_scenes`] with labels made on each scene's grid by `labeller` (vector layers
/// burned onto the scene) instead of read from label rasters: `opts.masks` must be empty.
/// Everything else is the same: tiles, splits, nodata, the values mapped by `opts.labels`.
/// Peak memory adds what the labeller holds to two row bands of the scene.
pub fn prepare_labelled_scenes(
    opts: &SceneOptions,
    labeller: &mut dyn SceneLabeller,
) -> Result<PrepareReport, TilesError> {
    prepare(opts, Some(labeller))
}

fn prepare(
    opts: &SceneOptions,
    mut labeller: Option<&mut dyn SceneLabeller>,
) -> Result<PrepareReport, TilesError> {
    check_options(opts, labeller.is_some())?;
    let stems = scene_stems(&opts.scenes)?;
    let lut = opts.labels.lookup_table();
    into_fresh_output(&opts.out, || {
        let mut layout = None;
        let surveys = (0..opts.scenes.len())
            .map(|i| {
                let s = survey(
                    opts,
                    i,
                    &stems[i],
                    &lut,
                    &mut layout,
                    reborrow(&mut labeller),
                );
                opts.progress.tell(i + 1, opts.scenes.len());
                s
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut tiles: Vec<Planned> = surveys.iter().flat_map(|s| s.kept.clone()).collect();
        let split = assign_splits(
            &mut tiles,
            &stems,
            opts.tile_size,
            opts.val_ratio,
            opts.seed,
            &opts.scenes[0],
        )?;
        let (_, bands, kind) = layout.expect("at least one scene was surveyed");
        let mut labels = opts.labels.clone();
        let mut notes: Vec<String> = surveys.iter().filter_map(|s| s.note.clone()).collect();
        let fill = if surveys.iter().any(|s| s.nodata_pixels > 0) {
            let (value, note) = nodata_mask_value(&mut labels)?;
            notes.push(note);
            value
        } else {
            Mask::IGNORE
        };
        let mut stats = StatsAccumulator::new(bands, kind);
        let mut records = Vec::new();
        for (i, s) in surveys.iter().enumerate() {
            let mine: Vec<&Planned> = tiles
                .iter()
                .filter(|t| t.scene == i && t.role != Role::Dropped)
                .collect();
            records.extend(write_scene(
                opts,
                i,
                s,
                &mine,
                fill,
                &mut stats,
                reborrow(&mut labeller),
            )?);
            opts.progress.tell(surveys.len() + i + 1, opts.scenes.len());
        }
        let mut meta = DatasetMeta::new("scenes", &labels, kind, bands, stats.finish());
        for r in &records {
            *meta.splits.entry(r.split.clone()).or_insert(0) += 1;
        }
        for split in crate::pairs::SPLITS {
            if !meta.splits.contains_key(split) {
                return Err(TilesError::EmptySplit {
                    split: split.into(),
                    location: opts.out.join("images").join(split),
                });
            }
        }
        meta.tiles = records;
        meta.save(&opts.out)?;
        Ok(PrepareReport {
            out: opts.out.clone(),
            meta,
            audit: None,
            skipped_tiles: surveys.iter().map(|s| s.skipped).sum(),
            dropped_tiles: split.dropped,
            notes,
        })
    })
}

/// The labeller for one scene's pass, borrowed from the run's.
fn reborrow<'a>(
    labeller: &'a mut Option<&mut dyn SceneLabeller>,
) -> Option<&'a mut dyn SceneLabeller> {
    match labeller {
        Some(l) => Some(&mut **l),
        None => None,
    }
}

fn check_options(opts: &SceneOptions, made_labels: bool) -> Result<(), TilesError> {
    let t = opts.tile_size;
    if t < 16 || !t.is_multiple_of(16) {
        return Err(TilesError::option(
            "tile_size",
            t,
            "must be a multiple of 16, at least 16",
        ));
    }
    if opts.overlap >= t {
        return Err(TilesError::option(
            "overlap",
            opts.overlap,
            format!("must be smaller than tile_size ({t})"),
        ));
    }
    if made_labels && !opts.masks.is_empty() {
        return Err(TilesError::option(
            "masks",
            opts.masks.len(),
            "labels are made on each scene's grid; give no label rasters with them",
        ));
    }
    if opts.scenes.is_empty() || (!made_labels && opts.scenes.len() != opts.masks.len()) {
        return Err(TilesError::option(
            "masks",
            opts.masks.len(),
            format!(
                "give exactly one label raster per scene ({} scenes)",
                opts.scenes.len()
            ),
        ));
    }
    if !(0.0..1.0).contains(&opts.val_ratio) {
        return Err(TilesError::option(
            "val_ratio",
            opts.val_ratio,
            "must be in [0, 1)",
        ));
    }
    opts.labels.validate()
}

/// The file stems of the scenes, which name their tiles: two scenes with one stem would write
/// over each other's tiles.
fn scene_stems(scenes: &[PathBuf]) -> Result<Vec<String>, TilesError> {
    let mut seen: BTreeMap<String, &PathBuf> = BTreeMap::new();
    let mut stems = Vec::with_capacity(scenes.len());
    for p in scenes {
        let stem = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scene")
            .to_string();
        if let Some(prev) = seen.insert(stem.clone(), p) {
            return Err(TilesError::input(
                p,
                format!(
                    "same file stem as {}; tiles are named after their scene, so rename one",
                    prev.display()
                ),
            ));
        }
        stems.push(stem);
    }
    Ok(stems)
}

/// What the survey of one scene found.
struct Survey {
    scene: PathBuf,
    /// The label raster, or what the labeller names as its source.
    mask: PathBuf,
    stem: String,
    geo: Option<GeoRef>,
    /// The scene's nodata value: [`SceneOptions::nodata`], else its `GDAL_NODATA`.
    nodata: Option<f64>,
    /// Pixels of the scene that are nodata in every band.
    nodata_pixels: u64,
    /// Tiles worth keeping, row by row, all `Role::Train` until split.
    kept: Vec<Planned>,
    /// Tiles left out as mostly ignore/nodata.
    skipped: usize,
    /// Something the user should know (an alignment that could not be checked).
    note: Option<String>,
}

/// The labels of scene `index`: its label raster, or `labeller` started on it.
fn open_labels<'a>(
    opts: &SceneOptions,
    index: usize,
    scene: &Source,
    labeller: Option<&'a mut dyn SceneLabeller>,
) -> Result<(LabelRows<'a>, PathBuf), TilesError> {
    match labeller {
        None => {
            let path = &opts.masks[index];
            Ok((LabelRows::raster(path)?, path.clone()))
        }
        Some(l) => {
            let source = l.source();
            let rows = LabelRows::made(l, index, &opts.scenes[index], scene.size(), scene.geo())?;
            Ok((rows, source))
        }
    }
}

/// Reads scene `index` and its labels once without writing anything: checks size, alignment
/// (of a label raster), band layout (against `layout`, the first scene's) and label values,
/// and finds the tiles that are not mostly empty. Reads the image only when it has a nodata
/// value; label values under nodata pixels need not be mapped.
fn survey(
    opts: &SceneOptions,
    index: usize,
    stem: &str,
    lut: &[Option<u8>; 256],
    layout: &mut Option<(PathBuf, usize, SampleKind)>,
    labeller: Option<&mut dyn SceneLabeller>,
) -> Result<Survey, TilesError> {
    let scene_path = &opts.scenes[index];
    let t = opts.tile_size;
    let mut scene = Source::open_image(scene_path)?;
    let (w, h) = scene.size();
    if w < t || h < t {
        return Err(TilesError::input(
            scene_path,
            format!("scene is {w}x{h}, smaller than tile_size {t}; lower --tile-size"),
        ));
    }
    let (mut mask, mask_path) = open_labels(opts, index, &scene, labeller)?;
    let mut note = None;
    if let Some((size, mask_geo, path)) = mask.raster_grid() {
        if (w, h) != size {
            return Err(TilesError::SizeMismatch {
                image: scene_path.clone(),
                mask: path.to_path_buf(),
                image_size: (w, h),
                mask_size: size,
            });
        }
        note = check_alignment(scene_path, scene.geo(), path, mask_geo, (w, h))?;
    }
    check_layout(scene_path, scene.layout(), layout)?;
    let nodata = opts.nodata.or(scene.geo().and_then(|g| g.nodata));
    let geo = scene.geo().cloned().map(|g| GeoRef { nodata, ..g });
    let stride = t - opts.overlap;
    let xs = origins(w, t, stride);
    let (mut tally, mut tallied_to, mut nodata_count) = ([0u64; 256], 0, 0);
    let (mut kept, mut skipped) = (Vec::new(), 0);
    for (row, y) in origins(h, t, stride).into_iter().enumerate() {
        let band = mask.rows(y, t)?;
        // `w × t` flags: the band's pixels that are nodata in every band of the scene.
        let holes = match nodata {
            Some(nd) => nodata_pixels(&scene.rows(y, t)?, nd),
            None => Vec::new(),
        };
        let is_hole = |i: usize| holes.get(i).copied().unwrap_or(false);
        // Rows shared with the previous band are counted once.
        let fresh = (tallied_to.max(y) - y) * w;
        for (i, &v) in band.data.iter().enumerate().skip(fresh) {
            if is_hole(i) {
                nodata_count += 1;
            } else {
                tally[v as usize] += 1;
            }
        }
        tallied_to = y + t;
        for (col, &x) in xs.iter().enumerate() {
            let empty = (0..t * t)
                .map(|i| (i / t) * w + x + i % t)
                .filter(|&i| lut[band.data[i] as usize] == Some(Mask::IGNORE) || is_hole(i))
                .count();
            if empty as f64 > opts.max_empty_fraction * (t * t) as f64 {
                skipped += 1;
            } else {
                let role = Role::Train;
                kept.push(Planned {
                    scene: index,
                    col,
                    row,
                    x,
                    y,
                    role,
                });
            }
        }
    }
    check_mapped(&tally, lut, &mask_path, &opts.labels)?;
    Ok(Survey {
        scene: scene_path.clone(),
        mask: mask_path,
        stem: stem.to_string(),
        geo,
        nodata,
        nodata_pixels: nodata_count,
        kept,
        skipped,
        note,
    })
}

/// All scenes must have the first one's bands and sample type.
fn check_layout(
    path: &Path,
    (bands, kind): (usize, SampleKind),
    first: &mut Option<(PathBuf, usize, SampleKind)>,
) -> Result<(), TilesError> {
    match first {
        None => *first = Some((path.to_path_buf(), bands, kind)),
        Some((p, b, k)) if (*b, *k) != (bands, kind) => {
            return Err(TilesError::BandMismatch {
                path: path.to_path_buf(),
                found: format!("{bands} bands of {kind}"),
                first: p.clone(),
                expected: format!("{b} bands of {k}"),
            });
        }
        Some(_) => {}
    }
    Ok(())
}

/// Fails on label values that the mapping neither assigns nor ignores, with their pixel counts
/// over the whole label raster.
fn check_mapped(
    tally: &[u64; 256],
    lut: &[Option<u8>; 256],
    path: &Path,
    labels: &LabelMap,
) -> Result<(), TilesError> {
    let unmapped: Vec<(u8, u64, PathBuf)> = (0..=255u8)
        .filter(|&v| lut[v as usize].is_none() && tally[v as usize] > 0)
        .map(|v| (v, tally[v as usize], path.to_path_buf()))
        .collect();
    if unmapped.is_empty() {
        return Ok(());
    }
    let found: Vec<u8> = (0..=255u8).filter(|&v| tally[v as usize] > 0).collect();
    Err(TilesError::UnmappedValues {
        values: unmapped,
        suggestion: labels.suggest(&found),
    })
}

/// Writes the kept tiles of scene `index` (in row order), `fill` on their masks' nodata pixels,
/// adding train tiles to `stats`.
fn write_scene(
    opts: &SceneOptions,
    index: usize,
    s: &Survey,
    tiles: &[&Planned],
    fill: u8,
    stats: &mut StatsAccumulator,
    labeller: Option<&mut dyn SceneLabeller>,
) -> Result<Vec<TileRecord>, TilesError> {
    let t = opts.tile_size;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let mut scene = Source::open_image(&s.scene)?;
    let (mut mask, _) = open_labels(opts, index, &scene, labeller)?;
    let (bands, kind) = scene.layout();
    let ctx = TileCtx {
        opts,
        survey: s,
        fill,
    };
    let mut records = Vec::with_capacity(tiles.len());
    for row in tiles.chunk_by(|a, b| a.row == b.row) {
        let y = row[0].y;
        let band = scene.rows(y, t)?;
        let mband = mask.rows(y, t)?;
        // Encoding tiles dominates the run: spread one row band's tiles over threads.
        // Each thread takes a contiguous run of columns, so the manifest order is fixed.
        let per = row.len().div_ceil(threads);
        let results: Vec<Result<RowTiles, TilesError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = row
                .chunks(per)
                .map(|run| {
                    let (ctx, band, mband) = (&ctx, &band, &mband);
                    scope.spawn(move || {
                        let mut acc = StatsAccumulator::new(bands, kind);
                        let recs = run
                            .iter()
                            .map(|p| ctx.tile(band, mband, p, &mut acc))
                            .collect::<Result<Vec<_>, _>>()?;
                        Ok((recs, acc))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("tile workers do not panic"))
                .collect()
        });
        for r in results {
            let (recs, acc) = r?;
            stats.merge(&acc);
            records.extend(recs);
        }
    }
    Ok(records)
}

/// One worker's tiles of a row band and its train statistics.
type RowTiles = (Vec<TileRecord>, StatsAccumulator);

/// What cutting one tile needs to know about its scene.
struct TileCtx<'a> {
    opts: &'a SceneOptions,
    survey: &'a Survey,
    /// The stored mask value of nodata pixels.
    fill: u8,
}

impl TileCtx<'_> {
    /// Cuts and writes tile `p` from the row band holding it, adding it to `acc` when it is a
    /// train tile.
    fn tile(
        &self,
        band: &Raster,
        mband: &Mask,
        p: &Planned,
        acc: &mut StatsAccumulator,
    ) -> Result<TileRecord, TilesError> {
        let (opts, s) = (self.opts, self.survey);
        let t = opts.tile_size;
        let split = p.role.split().expect("dropped tiles are not written");
        let tile = crop(band, p.x, 0, t, t);
        let mut raw = crop_mask(mband, p.x, t);
        if let Some(nd) = s.nodata {
            let holes = nodata_pixels(&tile, nd);
            for (v, _) in raw.data.iter_mut().zip(holes).filter(|(_, h)| *h) {
                *v = self.fill;
            }
        }
        let id = format!("{}_x{}_y{}", s.stem, p.x, p.y);
        let tile_geo = s.geo.as_ref().map(|g| g.shifted(p.x, p.y));
        let img_dir = opts.out.join("images").join(split);
        let png_ok = tile.bands <= 4 && tile.kind() != SampleKind::F32;
        if tile_geo.is_some() || !png_ok {
            let o = TiffOptions {
                compression: opts.compression,
                ..Default::default()
            };
            let path = img_dir.join(format!("{id}.tif"));
            write_geotiff_with(&path, &tile, tile_geo.as_ref(), &o)?;
        } else {
            write_png(&img_dir.join(format!("{id}.png")), &tile)?;
        }
        write_mask_png(
            &opts.out.join("masks").join(split).join(format!("{id}.png")),
            &raw,
        )?;
        if p.role == Role::Train {
            acc.add(&tile, s.nodata);
        }
        Ok(TileRecord {
            id,
            split: split.into(),
            scene: s.scene.clone(),
            mask: s.mask.clone(),
            x: p.x,
            y: p.y,
            width: t,
            height: t,
            transform: tile_geo.map(|g| g.transform),
        })
    }
}
