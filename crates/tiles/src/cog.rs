//! An incremental writer of tiled, compressed Cloud-Optimized GeoTIFFs with internal
//! overviews, in memory that does not grow with the image.
//!
//! The layout is GDAL's COG (`cog/layout.rs`): the ghost header, every IFD ahead of the image
//! data, the smallest overview's tiles first and the full resolution's last, row-major, each
//! tile with GDAL's size leader and repeated-bytes trailer. The overviews are made in
//! `cog/overview.rs`, the legend and band metadata in `cog/legend.rs`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use raster::{GeoRef, RasterData, SampleKind};
use tiff::tags::Tag;

mod layout;
mod legend;
mod overview;

pub(crate) use layout::Value as TagValue;
pub use legend::{BandInfo, ClassLegend};
pub use overview::OverviewResampling;

use crate::error::TilesError;
use crate::tiff_write::{
    Compression, RasterShape, bytes_per_sample, compress_chunk, cut_padded, geo_tag_values,
};
use layout::{Ifd, Value};
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

/// Writes a tiled, compressed Cloud-Optimized GeoTIFF with internal overviews row band by row
/// band.
///
/// The file holds the full-resolution image as IFD 0 (with the geo tags and `GDAL_NODATA` of
/// the [`GeoRef`]), then one IFD per overview level, each half the size of the one before
/// (`NewSubfileType = 1`, same tiling and compression, no geo tags). It follows GDAL's COG
/// layout: GDAL's ghost header after the TIFF header, every IFD before the image data, the
/// data of the smallest overview first and of the full resolution last, tiles in row-major
/// order with GDAL's 4-byte size leader and last-4-bytes trailer; `rio cogeo validate` and
/// GDAL's `validate_cloud_optimized_geotiff.py` accept it (`crates/tiles/verify/cog.sh`).
/// BigTIFF is used when the file would pass 4 GiB.
///
/// A class map can carry a [`ClassLegend`] ([`with_legend`](Self::with_legend)) and any raster
/// band names and a scale/offset ([`with_band_info`](Self::with_band_info)).
///
/// Memory is bounded independently of the height: each level (full resolution and every
/// overview) buffers at most one row of tiles, `tile × level_width × bands` samples, so about
/// `2 × tile × width × bands` samples in all, plus one tile's compressed bytes, plus the
/// `TileOffsets`/`TileByteCounts` (16 bytes per tile). The compressed tiles of each level go to
/// an anonymous temporary file in the output's directory as they complete and are copied into
/// the output by [`finish`](Self::finish) (the IFDs that come first need every tile's size).
/// So the output's directory needs about twice the finished file's size free while `finish`
/// runs (the spooled tiles and the file assembled from them), once after. The spool files
/// vanish when the writer is dropped or fails. The output itself is a hidden temporary file in
/// the same directory until `finish` moves it to `path`, so nothing appears at `path` unless
/// the whole file was written.
///
/// ```
/// use tiles::{ClassLegend, CogOptions, CogWriter, RasterData, RasterShape, SampleKind};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("classes.tif");
/// let shape = RasterShape { width: 600, height: 700, bands: 1, kind: SampleKind::U8 };
/// let legend = ClassLegend {
///     colours: vec![[40, 40, 40], [0, 200, 80]],
///     names: vec!["other".into(), "rice".into()],
/// };
/// let mut w = CogWriter::create(&path, shape, None, CogOptions::default())
///     .unwrap()
///     .with_legend(legend)
///     .unwrap();
/// for _ in 0..7 {
///     w.write_rows(&RasterData::U8(vec![1; 100 * 600])).unwrap();
/// }
/// w.finish().unwrap();
/// let (back, _) = tiles::read_image(&path).unwrap();
/// assert_eq!((back.width, back.height), (600, 700));
/// assert!(dir.path().join("classes.tif.aux.xml").exists()); // GDAL's category names
/// ```
pub struct CogWriter {
    path: PathBuf,
    /// The file, written at `finish` and renamed into place only when complete.
    out: fsio::AtomicFile,
    shape: RasterShape,
    geo: Option<GeoRef>,
    options: CogOptions,
    /// BigTIFF even when the file would fit a classic TIFF (tests).
    force_big: bool,
    legend: Option<ClassLegend>,
    band_info: BandInfo,
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
            force_big: false,
            legend: None,
            band_info: BandInfo::default(),
            levels,
            rows_in: 0,
            failed: false,
        })
    }

    /// Gives a class map (one `u8` band) its colours and class names: a TIFF `ColorMap`, and
    /// with names a PAM `<path>.aux.xml` (GDAL's category names) and a QGIS style
    /// `<stem>.qml`, each written atomically by [`finish`](Self::finish) after the image.
    pub fn with_legend(mut self, legend: ClassLegend) -> Result<Self, TilesError> {
        if self.shape.bands != 1 || self.shape.kind != SampleKind::U8 {
            return Err(TilesError::input(
                &self.path,
                format!(
                    "a colour table needs one u8 band, not {} {} bands",
                    self.shape.bands, self.shape.kind
                ),
            ));
        }
        if legend.colours.len() > 256 || legend.names.len() > 256 {
            return Err(TilesError::input(
                &self.path,
                format!(
                    "a u8 band has 256 values, not {} colours and {} names",
                    legend.colours.len(),
                    legend.names.len()
                ),
            ));
        }
        self.legend = Some(legend);
        Ok(self)
    }

    /// Names the bands and/or gives them a scale and offset (GDAL's `GDAL_METADATA` tag).
    pub fn with_band_info(mut self, info: BandInfo) -> Result<Self, TilesError> {
        if info.names.len() > self.shape.bands {
            return Err(TilesError::input(
                &self.path,
                format!(
                    "{} band names for {} bands",
                    info.names.len(),
                    self.shape.bands
                ),
            ));
        }
        self.band_info = info;
        Ok(self)
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
        let levels = std::mem::take(&mut self.levels);
        let file = self.out.file_mut();
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let meta = Meta {
            shape: &self.shape,
            geo: self.geo.as_ref(),
            tile: self.options.tile,
            compression: self.options.compression,
            legend: self.legend.as_ref(),
            band_info: &self.band_info,
        };
        assemble(&mut w, &path, &meta, levels, self.force_big)?;
        w.flush().map_err(|e| TilesError::io(&path, e))?;
        drop(w);
        self.out.commit()?;
        if let Some(legend) = self.legend.as_ref().filter(|l| !l.names.is_empty()) {
            let nodata = self.geo.as_ref().and_then(|g| g.nodata);
            fsio::write_atomic(&legend::pam_path(&path), legend.pam_xml().as_bytes())?;
            fsio::write_atomic(&legend::qml_path(&path), legend.qml(nodata).as_bytes())?;
        }
        Ok(())
    }
}

struct Ctx<'a> {
    path: &'a Path,
    bands: usize,
    options: &'a CogOptions,
    nodata: Option<f64>,
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

/// What the IFDs say besides the tiles' places.
struct Meta<'a> {
    shape: &'a RasterShape,
    geo: Option<&'a GeoRef>,
    tile: usize,
    compression: Compression,
    legend: Option<&'a ClassLegend>,
    band_info: &'a BandInfo,
}

/// Writes the whole file in GDAL's COG layout: header and ghost header, every level's IFD,
/// then the spooled tiles, smallest level first.
fn assemble<W: Write>(
    out: &mut W,
    path: &Path,
    meta: &Meta<'_>,
    levels: Vec<Level>,
    force_big: bool,
) -> Result<(), TilesError> {
    let io = |e: std::io::Error| TilesError::io(path, e);
    let data_len: u64 = levels
        .iter()
        .flat_map(|l| &l.counts)
        .map(|&c| layout::stored_len(c))
        .sum();
    let file_len = |ifds: &[Ifd], big: bool| {
        layout::first_ifd_at(big) + ifds.iter().map(|i| i.len(big)).sum::<u64>() + data_len
    };
    let classic = level_ifds(meta, &levels, false);
    let big = force_big || file_len(&classic, false) > u32::MAX as u64;
    let mut ifds = if big {
        level_ifds(meta, &levels, true)
    } else {
        classic
    };
    // The tiles follow the IFDs, smallest level first; each offset points past its leader.
    let mut at = file_len(&ifds, big) - data_len;
    for (ifd, level) in ifds.iter_mut().zip(&levels).rev() {
        let mut offsets = Vec::with_capacity(level.counts.len());
        for &c in &level.counts {
            offsets.push(at + 4);
            at += layout::stored_len(c);
        }
        let offsets = if big {
            Value::Long8(offsets)
        } else {
            Value::Long(offsets.into_iter().map(|o| o as u32).collect())
        };
        ifd.set(Tag::TileOffsets.to_u16(), offsets);
    }
    out.write_all(&layout::header(big)).map_err(io)?;
    let mut at = layout::first_ifd_at(big);
    for (i, ifd) in ifds.iter().enumerate() {
        let next = if i + 1 == ifds.len() {
            0
        } else {
            at + ifd.len(big)
        };
        out.write_all(&ifd.encode(at, next, big)).map_err(io)?;
        at += ifd.len(big);
    }
    let mut buf = Vec::new();
    for level in levels.into_iter().rev() {
        let mut tmp = level.tiles.into_inner().map_err(|e| io(e.into_error()))?;
        tmp.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut tmp = BufReader::with_capacity(1 << 20, tmp);
        for &c in &level.counts {
            layout::copy_tile(&mut tmp, out, c, &mut buf).map_err(io)?;
        }
    }
    Ok(())
}

/// Every level's IFD, `TileOffsets` still to be set.
fn level_ifds(meta: &Meta<'_>, levels: &[Level], big: bool) -> Vec<Ifd> {
    let shape = meta.shape;
    let n = shape.bands;
    let short = |v: u16| Value::Short(vec![v]);
    let long = |v: usize| Value::Long(vec![v as u32]);
    let geo_tags = meta.geo.map(geo_tag_values).unwrap_or_default();
    let colour_channels = if meta.legend.is_none() && n == 3 {
        3
    } else {
        1
    };
    levels
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let mut ifd = Ifd::default();
            if i > 0 {
                // A reduced-resolution version of IFD 0.
                ifd.set(Tag::NewSubfileType.to_u16(), Value::Long(vec![1]));
            }
            ifd.set(Tag::ImageWidth.to_u16(), long(level.width));
            ifd.set(Tag::ImageLength.to_u16(), long(level.height));
            let bits = (bytes_per_sample(shape.kind) * 8) as u16;
            ifd.set(Tag::BitsPerSample.to_u16(), Value::Short(vec![bits; n]));
            let code = match meta.compression {
                Compression::None => 1,
                Compression::Lzw => 5,
                Compression::Deflate => 8,
            };
            ifd.set(Tag::Compression.to_u16(), short(code));
            // Palette with a legend; RGB for three bands; anything else MinIsBlack with the
            // remaining bands as unspecified extra samples, so no band is dropped.
            let photometric = match (meta.legend, colour_channels) {
                (Some(_), _) => 3,
                (None, 3) => 2,
                _ => 1,
            };
            ifd.set(Tag::PhotometricInterpretation.to_u16(), short(photometric));
            ifd.set(Tag::SamplesPerPixel.to_u16(), short(n as u16));
            ifd.set(Tag::PlanarConfiguration.to_u16(), short(1));
            if let Some(legend) = meta.legend {
                ifd.set(Tag::ColorMap.to_u16(), legend.colour_map());
            }
            ifd.set(Tag::TileWidth.to_u16(), long(meta.tile));
            ifd.set(Tag::TileLength.to_u16(), long(meta.tile));
            let tiles = level.counts.len();
            let placeholder = if big {
                Value::Long8(vec![0; tiles])
            } else {
                Value::Long(vec![0; tiles])
            };
            ifd.set(Tag::TileOffsets.to_u16(), placeholder);
            let counts = level.counts.iter().map(|&c| c as u32).collect();
            ifd.set(Tag::TileByteCounts.to_u16(), Value::Long(counts));
            if n > colour_channels {
                ifd.set(
                    Tag::ExtraSamples.to_u16(),
                    Value::Short(vec![0; n - colour_channels]),
                );
            }
            let format = if shape.kind == SampleKind::F32 { 3 } else { 1 };
            ifd.set(Tag::SampleFormat.to_u16(), Value::Short(vec![format; n]));
            for (code, value) in &geo_tags {
                // Overviews carry the nodata value only; the georeferencing is IFD 0's.
                if i == 0 || *code == Tag::GdalNodata.to_u16() {
                    ifd.set(*code, value.clone());
                }
            }
            if i == 0
                && let Some(xml) = meta.band_info.gdal_metadata(n)
            {
                ifd.set(GDAL_METADATA, xml);
            }
            ifd
        })
        .collect()
}

/// GDAL's private tag holding its metadata XML.
const GDAL_METADATA: u16 = 42112;

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
        w.force_big = big;
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
