//! An incremental writer of tiled, compressed GeoTIFFs with internal overviews, in memory that
//! does not grow with the image.
//!
//! The layout is GDAL's chained-IFD tiled GeoTIFF with internal overviews: IFD 0 (the full
//! resolution), then one IFD per overview, chained in that order, each written after its own
//! tiles. It is not the strict Cloud-Optimized GeoTIFF layout (every IFD ahead of the image
//! data, GDAL's ghost header, the overviews' tiles first): GDAL and rasterio read it as a tiled
//! GeoTIFF with overviews, and GDAL's COG validator does not call it a COG. The overviews are
//! made in `cog/overview.rs`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use raster::{GeoRef, RasterData, SampleKind};
use tiff::encoder::{TiffEncoder, TiffKind};
use tiff::tags::Tag;

mod overview;

pub use overview::OverviewResampling;

use crate::error::TilesError;
use crate::tiff_write::{
    Compression, RasterShape, TiffOptions, bytes_per_sample, compress_chunk, cut_padded,
    write_geo_tags, write_layout_tags,
};
use overview::decimate;

/// Layout of a [`CogWriter`]'s file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CogOptions {
    /// Square tile size in pixels, a positive multiple of 16 (default 512), at every level.
    pub tile: usize,
    /// Tile compression (default Deflate), at every level.
    pub compression: Compression,
    /// How overviews are made (default [`OverviewResampling::Nearest`]).
    pub resampling: OverviewResampling,
    /// Overviews halve the size (`ceil(w/2) × ceil(h/2)`) until the last one's larger side is
    /// `<= min_overview` (default 256); an image already that small gets none. At least 1.
    pub min_overview: usize,
}

impl Default for CogOptions {
    fn default() -> Self {
        Self {
            tile: 512,
            compression: Compression::Deflate,
            resampling: OverviewResampling::Nearest,
            min_overview: 256,
        }
    }
}

/// Writes a tiled, compressed GeoTIFF with internal overviews row band by row band.
///
/// The file holds the full-resolution image as IFD 0 (with the geo tags and `GDAL_NODATA` of
/// the [`GeoRef`]), then one IFD per overview level, each half the size of the one before
/// (`NewSubfileType = 1`, same tiling and compression, no geo tags), chained in that order:
/// GDAL and rasterio read them as internal overviews. Tiles are written row by row of tiles, and
/// the IFDs follow the image data; the strict COG layout (IFDs first, ghost header, overviews
/// before the full resolution) is not produced, so `gdal_translate -of COG` or GDAL's COG
/// validator would call it a tiled GeoTIFF with overviews, not a COG. BigTIFF is used when the
/// padded tiles of all levels could pass 3.5 GB.
///
/// Memory is bounded independently of the height: each level (full resolution and every
/// overview) buffers at most one row of tiles, `tile × level_width × bands` samples, so about
/// `2 × tile × width × bands` samples in all, plus one tile's compressed bytes, plus the
/// `TileOffsets`/`TileByteCounts` (16 bytes per tile). The compressed tiles of each level go to
/// an anonymous temporary file in the output's directory as they complete and are copied into
/// the output by [`finish`](Self::finish); those files vanish when the writer is dropped or
/// fails. The output itself is a hidden temporary file in the same directory until `finish`
/// moves it to `path`, so nothing appears at `path` unless the whole file was written.
///
/// ```
/// use tiles::{CogOptions, CogWriter, RasterData, RasterShape, SampleKind};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("classes.tif");
/// let shape = RasterShape { width: 600, height: 700, bands: 1, kind: SampleKind::U8 };
/// let mut w = CogWriter::create(&path, shape, None, CogOptions::default()).unwrap();
/// for _ in 0..7 {
///     w.write_rows(&RasterData::U8(vec![1; 100 * 600])).unwrap();
/// }
/// w.finish().unwrap();
/// let (back, _) = tiles::read_image(&path).unwrap();
/// assert_eq!((back.width, back.height), (600, 700));
/// ```
pub struct CogWriter {
    path: PathBuf,
    /// The file, written at `finish` and renamed into place only when complete.
    out: fsio::AtomicFile,
    shape: RasterShape,
    geo: Option<GeoRef>,
    options: CogOptions,
    big: bool,
    /// Full resolution first, then each overview.
    levels: Vec<Level>,
    /// Full-resolution rows received so far.
    rows_in: usize,
    /// Set after an IO or encoding failure: the state is no longer consistent.
    failed: bool,
}

/// One level of the pyramid: its buffered row of tiles and its compressed tiles so far.
struct Level {
    width: usize,
    height: usize,
    /// Up to `tile` rows, `[rows, width, bands]`.
    band: RasterData,
    /// Rows already compressed into `tiles`.
    rows_out: usize,
    tiles: BufWriter<File>,
    counts: Vec<u64>,
}

impl CogWriter {
    /// Starts `path` (written atomically: nothing appears at `path` until `finish` succeeds).
    pub fn create(
        path: &Path,
        shape: RasterShape,
        geo: Option<&GeoRef>,
        options: CogOptions,
    ) -> Result<Self, TilesError> {
        if shape.width == 0
            || shape.height == 0
            || shape.bands == 0
            || shape.bands > u16::MAX as usize
            || shape.width > u32::MAX as usize
            || shape.height > u32::MAX as usize
        {
            return Err(TilesError::input(
                path,
                format!(
                    "cannot write a {}x{}x{} raster",
                    shape.width, shape.height, shape.bands
                ),
            ));
        }
        let t = options.tile;
        if t == 0 || !t.is_multiple_of(16) {
            return Err(TilesError::option(
                "tile",
                t,
                "TIFF tiles must be a positive multiple of 16",
            ));
        }
        if options.min_overview == 0 {
            return Err(TilesError::option(
                "min_overview",
                0,
                "overviews stop at a size of at least 1 pixel",
            ));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Creates the directory too; the levels' scratch files go beside it.
        let out = fsio::AtomicFile::create(path)?;

        let mut sizes = vec![(shape.width, shape.height)];
        let (mut w, mut h) = (shape.width, shape.height);
        while w.max(h) > options.min_overview {
            (w, h) = (w.div_ceil(2), h.div_ceil(2));
            sizes.push((w, h));
        }
        let padded: u64 = sizes
            .iter()
            .map(|&(w, h)| {
                (w.div_ceil(t) * h.div_ceil(t)) as u64
                    * (t * t) as u64
                    * (shape.bands * bytes_per_sample(shape.kind)) as u64
            })
            .sum();
        let mut levels = Vec::with_capacity(sizes.len());
        for (width, height) in sizes {
            let tmp = tempfile::tempfile_in(&dir).map_err(|e| TilesError::io(&dir, e))?;
            levels.push(Level {
                width,
                height,
                band: empty(shape.kind),
                rows_out: 0,
                tiles: BufWriter::with_capacity(1 << 20, tmp),
                counts: Vec::new(),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            out,
            shape,
            geo: geo.cloned(),
            options,
            // Classic TIFF offsets are 32-bit: switch to BigTIFF well before the 4 GiB limit.
            big: padded > 3_500_000_000,
            levels,
            rows_in: 0,
            failed: false,
        })
    }

    /// The next rows, top to bottom, band-interleaved `[rows, width, bands]` of the shape's
    /// kind; any number of whole rows per call. Rows past the image's height, another sample
    /// kind or a partial row are an [`TilesError::InvalidInput`] (the writer stays usable after
    /// those; after an IO failure every later call fails).
    pub fn write_rows(&mut self, rows: &RasterData) -> Result<(), TilesError> {
        let path = &self.path;
        if self.failed {
            return Err(TilesError::input(
                path,
                "an earlier write to this file failed",
            ));
        }
        let row_len = self.shape.width * self.shape.bands;
        if rows.kind() != self.shape.kind || !rows.len().is_multiple_of(row_len) {
            return Err(TilesError::input(
                path,
                format!(
                    "got {} {} samples, not whole rows of {} {} samples",
                    rows.len(),
                    rows.kind(),
                    row_len,
                    self.shape.kind
                ),
            ));
        }
        let n = rows.len() / row_len;
        if self.rows_in + n > self.shape.height {
            return Err(TilesError::input(
                path,
                format!(
                    "{n} more rows after {} would pass the image height {}",
                    self.rows_in, self.shape.height
                ),
            ));
        }
        let ctx = Ctx {
            path,
            bands: self.shape.bands,
            options: &self.options,
            nodata: self.geo.as_ref().and_then(|g| g.nodata),
        };
        match push(&mut self.levels, &ctx, rows) {
            Ok(()) => {
                self.rows_in += n;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Writes the overviews and moves the file into place.
    pub fn finish(mut self) -> Result<(), TilesError> {
        let path = self.path.clone();
        if self.failed {
            return Err(TilesError::input(
                &path,
                "an earlier write to this file failed",
            ));
        }
        if self.rows_in != self.shape.height {
            return Err(TilesError::input(
                &path,
                format!(
                    "finished after {} of {} rows; nothing was written",
                    self.rows_in, self.shape.height
                ),
            ));
        }
        let ctx = Ctx {
            path: &path,
            bands: self.shape.bands,
            options: &self.options,
            nodata: self.geo.as_ref().and_then(|g| g.nodata),
        };
        // The partial last row of tiles of each level, in order: each feeds the next level.
        for i in 0..self.levels.len() {
            if !self.levels[i].band.is_empty() {
                flush(&mut self.levels[i..], &ctx)?;
            }
            let l = &self.levels[i];
            debug_assert_eq!(l.rows_out, l.height, "level {i} got every row");
        }
        let file = self.out.file_mut();
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let levels = std::mem::take(&mut self.levels);
        if self.big {
            let mut enc = TiffEncoder::new_big(&mut w).map_err(|e| tiff_err(&path, e))?;
            write_levels(&mut enc, true, &ctx, &self.shape, self.geo.as_ref(), levels)?;
        } else {
            let mut enc = TiffEncoder::new(&mut w).map_err(|e| tiff_err(&path, e))?;
            write_levels(
                &mut enc,
                false,
                &ctx,
                &self.shape,
                self.geo.as_ref(),
                levels,
            )?;
        }
        w.flush().map_err(|e| TilesError::io(&path, e))?;
        drop(w);
        self.out.commit()?;
        Ok(())
    }
}

struct Ctx<'a> {
    path: &'a Path,
    bands: usize,
    options: &'a CogOptions,
    nodata: Option<f64>,
}

fn tiff_err(path: &Path, e: tiff::TiffError) -> TilesError {
    TilesError::input(path, format!("writing TIFF: {e}"))
}

fn empty(kind: SampleKind) -> RasterData {
    match kind {
        SampleKind::U8 => RasterData::U8(Vec::new()),
        SampleKind::U16 => RasterData::U16(Vec::new()),
        SampleKind::F32 => RasterData::F32(Vec::new()),
    }
}

/// Appends `rows` to `levels[0]`, compressing each row of tiles as it fills (which feeds the
/// overview below into `levels[1]`, and so on).
fn push(levels: &mut [Level], ctx: &Ctx<'_>, rows: &RasterData) -> Result<(), TilesError> {
    let t = ctx.options.tile;
    let row_len = levels[0].width * ctx.bands;
    let n = rows.len() / row_len;
    let mut y = 0;
    while y < n {
        let have = levels[0].band.len() / row_len;
        let take = (t - have).min(n - y);
        let r = y * row_len..(y + take) * row_len;
        match (&mut levels[0].band, rows) {
            (RasterData::U8(b), RasterData::U8(v)) => b.extend_from_slice(&v[r]),
            (RasterData::U16(b), RasterData::U16(v)) => b.extend_from_slice(&v[r]),
            (RasterData::F32(b), RasterData::F32(v)) => b.extend_from_slice(&v[r]),
            _ => unreachable!("the sample kind was checked"),
        }
        y += take;
        if have + take == t {
            flush(levels, ctx)?;
        }
    }
    Ok(())
}

/// Compresses `levels[0]`'s buffered rows into tiles and passes their 2× decimation on to
/// `levels[1]`.
fn flush(levels: &mut [Level], ctx: &Ctx<'_>) -> Result<(), TilesError> {
    let t = ctx.options.tile;
    let (level, below) = levels.split_first_mut().expect("a level to flush");
    let band = std::mem::replace(&mut level.band, empty(SampleKind::U8));
    let h = band.len() / (level.width * ctx.bands);
    for x0 in (0..level.width).step_by(t) {
        let tile = cut_padded(&band, level.width, ctx.bands, x0, t, h);
        let bytes = compress_chunk(&tile, ctx.options.compression)
            .map_err(|e| TilesError::io(ctx.path, e))?;
        level
            .tiles
            .write_all(&bytes)
            .map_err(|e| TilesError::io(ctx.path, e))?;
        level.counts.push(bytes.len() as u64);
    }
    level.rows_out += h;
    if !below.is_empty() {
        let small = decimate(
            &band,
            level.width,
            ctx.bands,
            ctx.options.resampling,
            ctx.nodata,
        );
        push(below, ctx, &small)?;
    }
    // Reuse the allocation for the next row of tiles.
    level.band = clear(band);
    Ok(())
}

fn clear(mut band: RasterData) -> RasterData {
    match &mut band {
        RasterData::U8(v) => v.clear(),
        RasterData::U16(v) => v.clear(),
        RasterData::F32(v) => v.clear(),
    }
    band
}

/// Writes each level's tiles (copied from its temporary file) and IFD.
fn write_levels<W: Write + Seek, K: TiffKind>(
    enc: &mut TiffEncoder<W, K>,
    big: bool,
    ctx: &Ctx<'_>,
    shape: &RasterShape,
    geo: Option<&GeoRef>,
    levels: Vec<Level>,
) -> Result<(), TilesError> {
    let path = ctx.path;
    let err = |e: tiff::TiffError| tiff_err(path, e);
    let io = |e: std::io::Error| TilesError::io(path, e);
    let t = ctx.options.tile;
    let layout = TiffOptions {
        compression: ctx.options.compression,
        tile_size: Some(t),
        rows_per_strip: None,
    };
    let mut buf = Vec::new();
    for (i, level) in levels.into_iter().enumerate() {
        let mut tmp = level.tiles.into_inner().map_err(|e| io(e.into_error()))?;
        tmp.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut tmp = BufReader::with_capacity(1 << 20, tmp);
        let mut dir = enc.image_directory().map_err(err)?;
        let mut offsets = Vec::with_capacity(level.counts.len());
        for &c in &level.counts {
            buf.resize(c as usize, 0);
            tmp.read_exact(&mut buf).map_err(io)?;
            offsets.push(dir.write_data(&buf[..]).map_err(err)?);
        }
        if i > 0 {
            // A reduced-resolution version of IFD 0.
            dir.write_tag(Tag::NewSubfileType, 1u32).map_err(err)?;
        }
        let level_shape = RasterShape {
            width: level.width,
            height: level.height,
            ..*shape
        };
        let (offset_tag, count_tag) =
            write_layout_tags(&mut dir, &level_shape, &layout, t).map_err(err)?;
        if big {
            dir.write_tag(offset_tag, &offsets[..]).map_err(err)?;
            dir.write_tag(count_tag, &level.counts[..]).map_err(err)?;
        } else {
            let u32s = |v: &[u64]| -> Result<Vec<u32>, TilesError> {
                v.iter()
                    .map(|&o| {
                        u32::try_from(o)
                            .map_err(|_| TilesError::input(path, "TIFF offset past 4 GiB"))
                    })
                    .collect()
            };
            dir.write_tag(offset_tag, &u32s(&offsets)?[..])
                .map_err(err)?;
            dir.write_tag(count_tag, &u32s(&level.counts)?[..])
                .map_err(err)?;
        }
        if i == 0
            && let Some(g) = geo
        {
            write_geo_tags(&mut dir, g).map_err(err)?;
        }
        dir.finish().map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> Vec<(u32, u32, Vec<f32>)> {
        let mut dec = tiff::decoder::Decoder::new(File::open(path).unwrap()).unwrap();
        let mut out = Vec::new();
        loop {
            let (w, h) = dec.dimensions().unwrap();
            let tiff::decoder::DecodingResult::F32(v) = dec.read_image().unwrap() else {
                panic!("not f32");
            };
            out.push((w, h, v));
            if !dec.more_images() {
                return out;
            }
            dec.next_image().unwrap();
        }
    }

    /// 5×3 f32 with NaN and nodata (-1): odd edges, NaN and nodata skipped, all-invalid kept.
    fn write_small(path: &Path, big: bool) {
        let shape = RasterShape {
            width: 5,
            height: 3,
            bands: 1,
            kind: SampleKind::F32,
        };
        let geo = GeoRef {
            transform: [0.0, 1.0, 0.0, 0.0, 0.0, -1.0],
            geo_key_directory: None,
            geo_double_params: None,
            geo_ascii_params: None,
            nodata: Some(-1.0),
        };
        let options = CogOptions {
            tile: 16,
            resampling: OverviewResampling::Average,
            min_overview: 1,
            ..CogOptions::default()
        };
        let mut w = CogWriter::create(path, shape, Some(&geo), options).unwrap();
        w.big = big;
        let nan = f32::NAN;
        w.write_rows(&RasterData::F32(vec![
            1.0, 2.0, nan, -1.0, 7.0, 3.0, 6.0, -1.0, nan, 8.0,
        ]))
        .unwrap();
        w.write_rows(&RasterData::F32(vec![4.0, -1.0, -1.0, -1.0, 9.0]))
            .unwrap();
        w.finish().unwrap();
    }

    #[test]
    fn average_skips_nan_and_nodata_and_uses_what_exists_at_odd_edges() {
        let dir = tempfile::tempdir().unwrap();
        for big in [false, true] {
            let path = dir.path().join(format!("small_{big}.tif"));
            write_small(&path, big);
            let bytes = std::fs::read(&path).unwrap();
            // Classic TIFF has version 42, BigTIFF 43 (little or big endian).
            assert!(
                bytes[2..4] == [if big { 43 } else { 42 }, 0]
                    || bytes[2..4] == [0, if big { 43 } else { 42 }]
            );
            let levels = read_all(&path);
            assert_eq!(levels.len(), 4, "5x3, 3x2, 2x1, 1x1");
            let dims: Vec<_> = levels.iter().map(|l| (l.0, l.1)).collect();
            assert_eq!(dims, [(5, 3), (3, 2), (2, 1), (1, 1)]);
            // Level 1: (1+2+3+6)/4, all invalid (top-left NaN kept), (7+8)/2; 4 (nodata
            // skipped), all nodata (-1 kept), 9.
            let l1 = &levels[1].2;
            assert_eq!(l1[0], 3.0);
            assert!(l1[1].is_nan(), "all invalid: the top-left NaN is kept");
            assert_eq!(l1[2], 7.5);
            assert_eq!(&l1[3..], [4.0, -1.0, 9.0]);
            assert_eq!(levels[2].2, [3.5, 8.25]);
            assert_eq!(levels[3].2, [5.875]);
            let (back, g) = crate::read_image(&path).unwrap();
            assert_eq!((back.width, back.height), (5, 3));
            assert_eq!(g.unwrap().nodata, Some(-1.0));
        }
    }
}
