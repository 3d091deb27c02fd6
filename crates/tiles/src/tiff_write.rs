//! GeoTIFF writing with any band count, strips or tiles, uncompressed/LZW/Deflate, streamed row
//! band by row band so a scene never has to be in memory whole.

use std::io::{BufWriter, Seek, Write};
use std::path::Path;

use raster::{GeoRef, Raster, RasterData, SampleKind};
use tiff::encoder::{DirectoryEncoder, TiffEncoder, TiffKind};
use tiff::tags::Tag;

use crate::cog::TagValue as Value;
use crate::error::TilesError;
use crate::tiff_read::is_pixel_is_point;

/// Compression of written TIFF chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// No compression (TIFF code 1).
    None,
    /// LZW (TIFF code 5).
    Lzw,
    /// Deflate/zlib (TIFF code 8), the default.
    #[default]
    Deflate,
}

/// How a TIFF is laid out on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiffOptions {
    /// Chunk compression.
    pub compression: Compression,
    /// `Some(n)`: square `n × n` tiles (`n` a multiple of 16); `None`: strips.
    pub tile_size: Option<usize>,
    /// Rows per strip when writing strips (`None`: about 256 KiB per strip).
    pub rows_per_strip: Option<usize>,
}

impl Default for TiffOptions {
    fn default() -> Self {
        Self {
            compression: Compression::Deflate,
            tile_size: None,
            rows_per_strip: None,
        }
    }
}

/// The shape of a raster to write: `width × height` pixels of `bands` samples of `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RasterShape {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel.
    pub bands: usize,
    /// Sample type.
    pub kind: SampleKind,
}

impl TiffOptions {
    /// Rows handed to the row callback of [`write_geotiff_rows`] at a time.
    pub fn chunk_rows(&self, shape: &RasterShape) -> usize {
        match (self.tile_size, self.rows_per_strip) {
            (Some(t), _) => t,
            (None, Some(r)) => r.max(1),
            (None, None) => {
                let row_bytes = shape.width * shape.bands * bytes_per_sample(shape.kind);
                (256 * 1024 / row_bytes.max(1)).clamp(1, shape.height.max(1))
            }
        }
    }
}

pub(crate) fn bytes_per_sample(kind: SampleKind) -> usize {
    match kind {
        SampleKind::U8 => 1,
        SampleKind::U16 => 2,
        SampleKind::F32 => 4,
    }
}

/// Writes `raster` as a (Geo)TIFF (Deflate strips), atomically.
pub fn write_geotiff(path: &Path, raster: &Raster, geo: Option<&GeoRef>) -> Result<(), TilesError> {
    write_geotiff_with(path, raster, geo, &TiffOptions::default())
}

/// Writes `raster` as a (Geo)TIFF with the given layout, atomically.
pub fn write_geotiff_with(
    path: &Path,
    raster: &Raster,
    geo: Option<&GeoRef>,
    options: &TiffOptions,
) -> Result<(), TilesError> {
    let shape = RasterShape {
        width: raster.width,
        height: raster.height,
        bands: raster.bands,
        kind: raster.kind(),
    };
    let row = raster.width * raster.bands;
    write_geotiff_rows(path, &shape, geo, options, |y, h| {
        let r = y * row..(y + h) * row;
        Ok(match &raster.data {
            RasterData::U8(v) => RasterData::U8(v[r].to_vec()),
            RasterData::U16(v) => RasterData::U16(v[r].to_vec()),
            RasterData::F32(v) => RasterData::F32(v[r].to_vec()),
        })
    })
}

/// Writes a (Geo)TIFF whose rows come from `rows(y, h)`, which must return rows `y..y + h` of
/// the image, `[h, width, bands]` ([`TiffOptions::chunk_rows`] rows at a time, fewer at the
/// bottom). Memory stays at one row band, so this writes scenes larger than memory. Atomic: the
/// file appears complete at `path` or not at all.
pub fn write_geotiff_rows(
    path: &Path,
    shape: &RasterShape,
    geo: Option<&GeoRef>,
    options: &TiffOptions,
    mut rows: impl FnMut(usize, usize) -> Result<RasterData, TilesError>,
) -> Result<(), TilesError> {
    if shape.width == 0 || shape.height == 0 || shape.bands == 0 || shape.bands > u16::MAX as usize
    {
        return Err(TilesError::input(
            path,
            format!(
                "cannot write a {}x{}x{} raster",
                shape.width, shape.height, shape.bands
            ),
        ));
    }
    if let Some(t) = options.tile_size
        && (t == 0 || t % 16 != 0)
    {
        return Err(TilesError::option(
            "tile_size",
            t,
            "TIFF tiles must be a positive multiple of 16",
        ));
    }
    let raw = shape.width as u64
        * shape.height as u64
        * shape.bands as u64
        * bytes_per_sample(shape.kind) as u64;
    fsio::write_atomic_with(path, |file| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        // Classic TIFF offsets are 32-bit: switch to BigTIFF well before the 4 GiB limit.
        if raw > 3_500_000_000 {
            let mut enc = TiffEncoder::new_big(&mut w).map_err(|e| TilesError::input(path, e))?;
            encode(&mut enc, true, path, shape, geo, options, &mut rows)?;
        } else {
            let mut enc = TiffEncoder::new(&mut w).map_err(|e| TilesError::input(path, e))?;
            encode(&mut enc, false, path, shape, geo, options, &mut rows)?;
        }
        // The encoder borrows the buffer, so flush errors surface here instead of on drop.
        w.flush().map_err(|e| TilesError::io(path, e))
    })
}

type Rows<'a> = dyn FnMut(usize, usize) -> Result<RasterData, TilesError> + 'a;

fn encode<W: Write + Seek, K: TiffKind>(
    enc: &mut TiffEncoder<W, K>,
    big: bool,
    path: &Path,
    shape: &RasterShape,
    geo: Option<&GeoRef>,
    options: &TiffOptions,
    rows: &mut Rows<'_>,
) -> Result<(), TilesError> {
    let err = |e: tiff::TiffError| TilesError::input(path, format!("writing TIFF: {e}"));
    let mut dir = enc.image_directory().map_err(err)?;
    let band_h = options.chunk_rows(shape);
    let (offsets, counts) = write_chunks(&mut dir, path, shape, options, band_h, rows)?;
    let (offset_tag, count_tag) =
        write_layout_tags(&mut dir, shape, options, band_h).map_err(err)?;
    let u32s = |v: &[u64]| -> Result<Vec<u32>, TilesError> {
        v.iter()
            .map(|&o| {
                u32::try_from(o).map_err(|_| TilesError::input(path, "TIFF offset past 4 GiB"))
            })
            .collect()
    };
    if big {
        dir.write_tag(offset_tag, &offsets[..]).map_err(err)?;
        dir.write_tag(count_tag, &counts[..]).map_err(err)?;
    } else {
        dir.write_tag(offset_tag, &u32s(&offsets)?[..])
            .map_err(err)?;
        dir.write_tag(count_tag, &u32s(&counts)?[..]).map_err(err)?;
    }
    if let Some(g) = geo {
        write_geo_tags(&mut dir, g).map_err(err)?;
    }
    dir.finish().map_err(err)?;
    Ok(())
}

/// Writes the image data band of rows by band of rows (as strips, or cut into tiles), asking
/// `rows` for each band; returns the chunks' offsets and byte counts.
fn write_chunks<W: Write + Seek, K: TiffKind>(
    dir: &mut DirectoryEncoder<'_, W, K>,
    path: &Path,
    shape: &RasterShape,
    options: &TiffOptions,
    band_h: usize,
    rows: &mut Rows<'_>,
) -> Result<(Vec<u64>, Vec<u64>), TilesError> {
    let err = |e: tiff::TiffError| TilesError::input(path, format!("writing TIFF: {e}"));
    let mut offsets = Vec::new();
    let mut counts = Vec::new();
    let mut y = 0;
    while y < shape.height {
        let h = band_h.min(shape.height - y);
        let data = rows(y, h)?;
        if data.len() != h * shape.width * shape.bands || data.kind() != shape.kind {
            return Err(TilesError::input(
                path,
                format!(
                    "row callback returned {} {} samples for rows {y}..{}",
                    data.len(),
                    data.kind(),
                    y + h
                ),
            ));
        }
        match options.tile_size {
            None => write_chunk(dir, &data, options.compression, &mut offsets, &mut counts)
                .map_err(err)?,
            Some(t) => {
                for x0 in (0..shape.width).step_by(t) {
                    // Tiles are always full size; the bottom and right edges are zero-padded.
                    let tile = cut_padded(&data, shape.width, shape.bands, x0, t, h);
                    write_chunk(dir, &tile, options.compression, &mut offsets, &mut counts)
                        .map_err(err)?;
                }
            }
        }
        y += h;
    }
    Ok((offsets, counts))
}

/// The tags that describe the image's size, samples, compression and chunk layout; returns
/// the offset and byte-count tags of that layout.
pub(crate) fn write_layout_tags<W: Write + Seek, K: TiffKind>(
    dir: &mut DirectoryEncoder<'_, W, K>,
    shape: &RasterShape,
    options: &TiffOptions,
    band_h: usize,
) -> Result<(Tag, Tag), tiff::TiffError> {
    let n = shape.bands;
    dir.write_tag(Tag::ImageWidth, shape.width as u32)?;
    dir.write_tag(Tag::ImageLength, shape.height as u32)?;
    let bits = (bytes_per_sample(shape.kind) * 8) as u16;
    dir.write_tag(Tag::BitsPerSample, &vec![bits; n][..])?;
    let format = if shape.kind == SampleKind::F32 {
        3u16
    } else {
        1
    };
    dir.write_tag(Tag::SampleFormat, &vec![format; n][..])?;
    dir.write_tag(Tag::SamplesPerPixel, n as u16)?;
    // RGB only for exactly three bands; anything else is MinIsBlack so no band is dropped.
    let photometric: u16 = if n == 3 { 2 } else { 1 };
    dir.write_tag(Tag::PhotometricInterpretation, photometric)?;
    dir.write_tag(Tag::PlanarConfiguration, 1u16)?;
    let code: u16 = match options.compression {
        Compression::None => 1,
        Compression::Lzw => 5,
        Compression::Deflate => 8,
    };
    dir.write_tag(Tag::Compression, code)?;
    let (offset_tag, count_tag) = match options.tile_size {
        Some(t) => {
            dir.write_tag(Tag::TileWidth, t as u32)?;
            dir.write_tag(Tag::TileLength, t as u32)?;
            (Tag::TileOffsets, Tag::TileByteCounts)
        }
        None => {
            dir.write_tag(Tag::RowsPerStrip, band_h as u32)?;
            (Tag::StripOffsets, Tag::StripByteCounts)
        }
    };
    Ok((offset_tag, count_tag))
}

pub(crate) fn write_geo_tags<W: Write + Seek, K: TiffKind>(
    dir: &mut DirectoryEncoder<'_, W, K>,
    g: &GeoRef,
) -> tiff::TiffResult<()> {
    for (code, value) in geo_tag_values(g) {
        let tag = Tag::from_u16_exhaustive(code);
        match &value {
            Value::Short(v) => dir.write_tag(tag, &v[..])?,
            Value::Long(v) => dir.write_tag(tag, &v[..])?,
            Value::Long8(v) => dir.write_tag(tag, &v[..])?,
            Value::Double(v) => dir.write_tag(tag, &v[..])?,
            Value::Ascii(s) => dir.write_tag(tag, s.as_str())?,
        }
    }
    Ok(())
}

/// The GeoTIFF tags (and `GDAL_NODATA`) of `g`, by tag code, for any TIFF writer.
pub(crate) fn geo_tag_values(g: &GeoRef) -> Vec<(u16, Value)> {
    let mut tags = Vec::new();
    let mut t = g.transform;
    if is_pixel_is_point(g.geo_key_directory.as_deref()) {
        // The reader moved PixelIsPoint origins to the pixel corner; store the point again.
        t[0] += 0.5 * (t[1] + t[2]);
        t[3] += 0.5 * (t[4] + t[5]);
    }
    if t[2] == 0.0 && t[4] == 0.0 {
        tags.push((
            Tag::ModelPixelScaleTag,
            Value::Double(vec![t[1], -t[5], 0.0]),
        ));
        tags.push((
            Tag::ModelTiepointTag,
            Value::Double(vec![0.0, 0.0, 0.0, t[0], t[3], 0.0]),
        ));
    } else {
        let m = vec![
            t[1], t[2], 0.0, t[0], t[4], t[5], 0.0, t[3], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ];
        tags.push((Tag::ModelTransformationTag, Value::Double(m)));
    }
    // Without a key directory GDAL ignores the transform: write a minimal PixelIsArea one.
    let keys = g
        .geo_key_directory
        .clone()
        .unwrap_or_else(|| vec![1, 1, 0, 1, 1025, 0, 1, 1]);
    tags.push((Tag::GeoKeyDirectoryTag, Value::Short(keys)));
    if let Some(d) = &g.geo_double_params {
        tags.push((Tag::GeoDoubleParamsTag, Value::Double(d.clone())));
    }
    if let Some(a) = &g.geo_ascii_params {
        tags.push((
            Tag::GeoAsciiParamsTag,
            Value::Ascii(a.trim_end_matches('\0').to_string()),
        ));
    }
    if let Some(nd) = g.nodata {
        tags.push((Tag::GdalNodata, Value::Ascii(gdal_nodata_string(nd))));
    }
    tags.into_iter().map(|(t, v)| (t.to_u16(), v)).collect()
}

/// `GDAL_NODATA` as GDAL writes it: `nan`, `inf`, `-inf`, else the shortest decimal that reads
/// back as the same value (`0`, `255`, `-9999`, `0.5`).
fn gdal_nodata_string(nd: f64) -> String {
    if nd.is_nan() {
        "nan".into()
    } else if nd.is_infinite() {
        if nd > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        nd.to_string()
    }
}

pub(crate) fn cut_padded(
    data: &RasterData,
    width: usize,
    bands: usize,
    x0: usize,
    t: usize,
    h: usize,
) -> RasterData {
    fn cut<T: Copy + Default>(
        v: &[T],
        width: usize,
        bands: usize,
        x0: usize,
        t: usize,
        h: usize,
    ) -> Vec<T> {
        let mut out = vec![T::default(); t * t * bands];
        let cols = t.min(width - x0);
        for row in 0..h {
            let s = (row * width + x0) * bands;
            out[row * t * bands..(row * t + cols) * bands].copy_from_slice(&v[s..s + cols * bands]);
        }
        out
    }
    match data {
        RasterData::U8(v) => RasterData::U8(cut(v, width, bands, x0, t, h)),
        RasterData::U16(v) => RasterData::U16(cut(v, width, bands, x0, t, h)),
        RasterData::F32(v) => RasterData::F32(cut(v, width, bands, x0, t, h)),
    }
}

fn write_chunk<W: Write + Seek, K: TiffKind>(
    dir: &mut DirectoryEncoder<'_, W, K>,
    data: &RasterData,
    compression: Compression,
    offsets: &mut Vec<u64>,
    counts: &mut Vec<u64>,
) -> tiff::TiffResult<()> {
    let bytes = compress_chunk(data, compression)?;
    offsets.push(dir.write_data(&bytes[..])?);
    counts.push(bytes.len() as u64);
    Ok(())
}

/// One chunk's samples as stored: native byte order (the order the encoder declares in the
/// header), then compressed.
pub(crate) fn compress_chunk(
    data: &RasterData,
    compression: Compression,
) -> std::io::Result<Vec<u8>> {
    let bytes: Vec<u8> = match data {
        RasterData::U8(v) => v.clone(),
        RasterData::U16(v) => v.iter().flat_map(|s| s.to_ne_bytes()).collect(),
        RasterData::F32(v) => v.iter().flat_map(|s| s.to_ne_bytes()).collect(),
    };
    Ok(match compression {
        Compression::None => bytes,
        Compression::Deflate => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&bytes)?;
            z.finish()?
        }
        Compression::Lzw => weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
            .encode(&bytes)
            .map_err(|e| std::io::Error::other(e.to_string()))?,
    })
}
