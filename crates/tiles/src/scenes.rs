//! Big scenes → tiles: cut georeferenced scenes and their label rasters into fixed-size,
//! overlapping tiles, reading one row band at a time so memory stays bounded.

use std::path::{Path, PathBuf};

use raster::{GeoRef, Mask, Raster, RasterData, SampleKind};

use crate::audit::check_size;
use crate::error::TilesError;
use crate::io::{read_image, read_mask, write_mask_png, write_png};
use crate::labels::LabelMap;
use crate::meta::{DatasetMeta, TileRecord};
use crate::pairs::split_of;
use crate::prepare::{PrepareReport, into_fresh_output};
use crate::stats::StatsAccumulator;
use crate::tiff_read::ChunkedReader;
use crate::tiff_write::{Compression, TiffOptions, write_geotiff_with};

/// How to tile scenes.
#[derive(Clone, Debug)]
pub struct SceneOptions {
    /// Scene images (GeoTIFF for windowed reads; PNG/JPEG are read whole).
    pub scenes: Vec<PathBuf>,
    /// Label rasters, one per scene, same size as it.
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
    /// Fraction of tiles in `val` (default 0.2).
    pub val_ratio: f64,
    /// Split seed (default 0).
    pub seed: u64,
    /// Compression of written GeoTIFF tiles (default Deflate).
    pub compression: Compression,
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
        }
    }
}

/// Windowed access to an image or mask: chunked for TIFF, whole for anything else.
enum Source {
    Tiff(Box<ChunkedReader>),
    Image(Raster, Option<GeoRef>),
    Mask(Mask),
}

impl Source {
    fn open_image(path: &Path) -> Result<Self, TilesError> {
        match ChunkedReader::open(path) {
            Ok(r) => Ok(Source::Tiff(Box::new(r))),
            Err(TilesError::Decode { .. }) if !is_tiff(path) => {
                let (r, g) = read_image(path)?;
                Ok(Source::Image(r, g))
            }
            Err(e) => Err(e),
        }
    }

    fn open_mask(path: &Path) -> Result<Self, TilesError> {
        if is_tiff(path) {
            let r = ChunkedReader::open(path)?;
            if r.bands() != 1 || r.kind() == SampleKind::F32 {
                return Err(TilesError::unsupported(
                    path,
                    format!(
                        "label raster has {} bands of {}; it must be one band of 8-bit class values",
                        r.bands(),
                        r.kind()
                    ),
                ));
            }
            Ok(Source::Tiff(Box::new(r)))
        } else {
            Ok(Source::Mask(read_mask(path)?))
        }
    }

    fn size(&self) -> (usize, usize) {
        match self {
            Source::Tiff(r) => (r.width(), r.height()),
            Source::Image(r, _) => (r.width, r.height),
            Source::Mask(m) => (m.width, m.height),
        }
    }

    fn geo(&self) -> Option<&GeoRef> {
        match self {
            Source::Tiff(r) => r.geo(),
            Source::Image(_, g) => g.as_ref(),
            Source::Mask(_) => None,
        }
    }

    /// Rows `y..y + h` across the full width.
    fn rows(&mut self, y: usize, h: usize) -> Result<Raster, TilesError> {
        match self {
            Source::Tiff(r) => {
                let w = r.width();
                r.read_window(0, y, w, h)
            }
            Source::Image(r, _) => Ok(crop(r, 0, y, r.width, h)),
            Source::Mask(m) => {
                let data = m.data[y * m.width..(y + h) * m.width].to_vec();
                Ok(Raster::new(m.width, h, 1, RasterData::U8(data)).expect("sliced from the mask"))
            }
        }
    }
}

fn is_tiff(path: &Path) -> bool {
    std::fs::File::open(path)
        .and_then(|mut f| {
            let mut b = [0u8; 4];
            std::io::Read::read_exact(&mut f, &mut b).map(|_| b)
        })
        .is_ok_and(|b| &b[..2] == b"II" || &b[..2] == b"MM")
}

/// The `w × h` window at `(x, y)` of `r`.
fn crop(r: &Raster, x: usize, y: usize, w: usize, h: usize) -> Raster {
    fn cut<T: Copy>(
        v: &[T],
        width: usize,
        bands: usize,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(w * h * bands);
        for row in y..y + h {
            let s = (row * width + x) * bands;
            out.extend_from_slice(&v[s..s + w * bands]);
        }
        out
    }
    let data = match &r.data {
        RasterData::U8(v) => RasterData::U8(cut(v, r.width, r.bands, x, y, w, h)),
        RasterData::U16(v) => RasterData::U16(cut(v, r.width, r.bands, x, y, w, h)),
        RasterData::F32(v) => RasterData::F32(cut(v, r.width, r.bands, x, y, w, h)),
    };
    Raster::new(w, h, r.bands, data).expect("window inside the raster")
}

/// Tile origins along one axis: every `stride`, plus one flush with the far edge so the whole
/// scene is covered.
fn origins(len: usize, tile: usize, stride: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..=len - tile).step_by(stride).collect();
    if *v.last().expect("len >= tile") + tile < len {
        v.push(len - tile);
    }
    v
}

/// Cuts every scene and its label raster into tiles, writes the split layout (GeoTIFF tiles
/// keeping the georeferencing shifted to each tile's origin, PNG when the scene has none and fits
/// PNG), masks as PNG, and `dataset.json` with the tile manifest and train band statistics.
///
/// Reads one band of `tile_size` rows at a time: peak memory is about two row bands of the
/// scene, whatever its height.
pub fn prepare_scenes(opts: &SceneOptions) -> Result<PrepareReport, TilesError> {
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
    if opts.scenes.is_empty() || opts.scenes.len() != opts.masks.len() {
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
    opts.labels.validate()?;
    let lut = opts.labels.lookup_table();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    into_fresh_output(&opts.out, || {
        let stride = t - opts.overlap;
        let mut first: Option<(PathBuf, usize, SampleKind)> = None;
        let mut stats: Option<StatsAccumulator> = None;
        let mut records = Vec::new();
        let mut skipped = 0;
        for (scene_path, mask_path) in opts.scenes.iter().zip(&opts.masks) {
            let mut scene = Source::open_image(scene_path)?;
            let mut mask = Source::open_mask(mask_path)?;
            let (w, h) = scene.size();
            let mask_size = mask.size();
            if (w, h) != mask_size {
                let m = Mask {
                    width: mask_size.0,
                    height: mask_size.1,
                    data: Vec::new(),
                };
                check_size(scene_path, mask_path, (w, h), &m)?;
            }
            if w < t || h < t {
                return Err(TilesError::input(
                    scene_path,
                    format!("scene is {w}x{h}, smaller than tile_size {t}; lower --tile-size"),
                ));
            }
            let geo = scene.geo().cloned();
            let stem = scene_path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("scene")
                .to_string();
            for y in origins(h, t, stride) {
                let band = scene.rows(y, t)?;
                let mband = mask.rows(y, t)?;
                let mband = to_mask(mask_path, &mband)?;
                match &first {
                    None => {
                        first = Some((scene_path.clone(), band.bands, band.kind()));
                        stats = Some(StatsAccumulator::new(band.bands, band.kind()));
                    }
                    Some((p, b, k)) if *b != band.bands || *k != band.kind() => {
                        return Err(TilesError::BandMismatch {
                            path: scene_path.clone(),
                            found: format!("{} bands of {}", band.bands, band.kind()),
                            first: p.clone(),
                            expected: format!("{b} bands of {k}"),
                        });
                    }
                    Some(_) => {}
                }
                let ctx = TileCtx {
                    opts,
                    lut: &lut,
                    width: w,
                    stem: &stem,
                    geo: geo.as_ref(),
                    scene: scene_path,
                    mask: mask_path,
                };
                let xs = origins(w, t, stride);
                // Encoding tiles dominates the run: spread one row band's tiles over threads.
                // Each thread takes a contiguous run of columns, so the manifest order is fixed.
                let per = xs.len().div_ceil(threads);
                let results: Vec<Result<RowTiles, TilesError>> = std::thread::scope(|scope| {
                    let handles: Vec<_> = xs
                        .chunks(per)
                        .map(|run| {
                            let (ctx, band, mband) = (&ctx, &band, &mband);
                            scope.spawn(move || {
                                let mut acc = StatsAccumulator::new(band.bands, band.kind());
                                let recs = run
                                    .iter()
                                    .map(|&x| ctx.tile(band, mband, x, y, &mut acc))
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
                    if let Some(total) = stats.as_mut() {
                        total.merge(&acc);
                    }
                    for rec in recs {
                        match rec {
                            Some(rec) => records.push(rec),
                            None => skipped += 1,
                        }
                    }
                }
            }
        }
        let (_, bands, kind) = first.expect("at least one scene was tiled");
        let mut meta = DatasetMeta::new(
            "scenes",
            &opts.labels,
            kind,
            bands,
            stats.map(|s| s.finish()).unwrap_or_default(),
        );
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
            skipped_tiles: skipped,
        })
    })
}

/// One worker's tiles of a row band (`None` = skipped) and its train statistics.
type RowTiles = (Vec<Option<TileRecord>>, StatsAccumulator);

/// What cutting one tile needs to know about its scene.
struct TileCtx<'a> {
    opts: &'a SceneOptions,
    lut: &'a [Option<u8>; 256],
    width: usize,
    stem: &'a str,
    geo: Option<&'a GeoRef>,
    scene: &'a PathBuf,
    mask: &'a PathBuf,
}

impl TileCtx<'_> {
    /// Cuts, checks and writes the tile at column `x` of the row band starting at row `y`;
    /// `None` when it is skipped as mostly empty. Train tiles are added to `acc`.
    fn tile(
        &self,
        band: &Raster,
        mband: &Mask,
        x: usize,
        y: usize,
        acc: &mut StatsAccumulator,
    ) -> Result<Option<TileRecord>, TilesError> {
        let (opts, lut, w) = (self.opts, self.lut, self.width);
        let t = opts.tile_size;
        let nodata = self.geo.and_then(|g| g.nodata);
        let tile = crop(band, x, 0, t, t);
        let raw: Vec<u8> = (0..t)
            .flat_map(|r| mband.data[r * w + x..r * w + x + t].iter().copied())
            .collect();
        let raw = Mask::new(t, t, raw).expect("t*t values");
        let unmapped: Vec<u8> = (0..=255u8)
            .filter(|&v| lut[v as usize].is_none() && raw.data.contains(&v))
            .collect();
        if !unmapped.is_empty() {
            let mut found = raw.data.clone();
            found.sort_unstable();
            found.dedup();
            let count = |v: u8| raw.data.iter().filter(|&&u| u == v).count() as u64;
            return Err(TilesError::UnmappedValues {
                values: unmapped
                    .iter()
                    .map(|&v| (v, count(v), self.mask.clone()))
                    .collect(),
                suggestion: opts.labels.suggest(&found),
            });
        }
        let empty = (0..t * t)
            .filter(|&i| {
                lut[raw.data[i] as usize] == Some(Mask::IGNORE) || is_nodata(&tile, i, nodata)
            })
            .count();
        if empty as f64 > opts.max_empty_fraction * (t * t) as f64 {
            return Ok(None);
        }
        let id = format!("{}_x{x}_y{y}", self.stem);
        // NOTE: overlapping neighbours share pixels, so tiles are split by 2×2-tile blocks rather
        // than one by one; only tiles on block borders can overlap a tile of the other split.
        let block = format!("{}@{},{}", self.stem, x / (2 * t), y / (2 * t));
        let split = split_of(opts.seed, &block, opts.val_ratio);
        let tile_geo = self.geo.map(|g| g.shifted(x, y));
        let img_dir = opts.out.join("images").join(split);
        let png_ok = tile.bands <= 4 && tile.kind() != SampleKind::F32;
        if tile_geo.is_some() || !png_ok {
            let o = TiffOptions {
                compression: opts.compression,
                ..Default::default()
            };
            write_geotiff_with(
                &img_dir.join(format!("{id}.tif")),
                &tile,
                tile_geo.as_ref(),
                &o,
            )?;
        } else {
            write_png(&img_dir.join(format!("{id}.png")), &tile)?;
        }
        write_mask_png(
            &opts.out.join("masks").join(split).join(format!("{id}.png")),
            &raw,
        )?;
        if split == "train" {
            acc.add(&tile, nodata);
        }
        Ok(Some(TileRecord {
            id,
            split: split.into(),
            scene: self.scene.clone(),
            mask: self.mask.clone(),
            x,
            y,
            width: t,
            height: t,
            transform: tile_geo.map(|g| g.transform),
        }))
    }
}

fn to_mask(path: &Path, r: &Raster) -> Result<Mask, TilesError> {
    let data = match &r.data {
        RasterData::U8(v) => v.clone(),
        RasterData::U16(v) => v
            .iter()
            .map(|&s| u8::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| TilesError::unsupported(path, "label raster holds values above 255"))?,
        RasterData::F32(_) => return Err(TilesError::unsupported(path, "float label raster")),
    };
    Ok(Mask::new(r.width, r.height, data).expect("sized from its raster"))
}

/// True when every band of pixel `i` equals the scene's nodata value.
fn is_nodata(r: &Raster, i: usize, nodata: Option<f64>) -> bool {
    let Some(nd) = nodata else { return false };
    let b = r.bands;
    match &r.data {
        RasterData::U8(v) => v[i * b..(i + 1) * b].iter().all(|&s| s as f64 == nd),
        RasterData::U16(v) => v[i * b..(i + 1) * b].iter().all(|&s| s as f64 == nd),
        RasterData::F32(v) => v[i * b..(i + 1) * b]
            .iter()
            .all(|&s| s as f64 == nd || (nd.is_nan() && s.is_nan())),
    }
}
