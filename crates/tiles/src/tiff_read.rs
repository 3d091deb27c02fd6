//! Windowed GeoTIFF reading: only the strips/tiles that intersect a window are decoded, so a
//! scene far larger than memory can be read piece by piece, from a local file or by URL
//! (a cloud-optimised GeoTIFF read with range requests: only the window's tiles are fetched).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use raster::{GeoRef, Raster, RasterData, SampleKind};
use remote::{Remote, RemoteError, RemoteFile};
use tiff::TiffError;
use tiff::decoder::{ChunkType, Decoder, DecodingResult, Limits};
use tiff::tags::Tag;

use crate::chunk_cache::{CACHE_MOST_BYTES, ChunkCache};
use crate::error::TilesError;

/// Where a [`ChunkedReader`]'s bytes come from.
enum Input {
    File(BufReader<File>),
    /// An object by URL, and where its last fetch error is kept: the decoder only passes on
    /// an `io::Error`, and the [`RemoteError`] (naming the URL and range) is the useful one.
    Remote(Box<RemoteFile>, Arc<Mutex<Option<RemoteError>>>),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Input::File(f) => f.read(buf),
            Input::Remote(r, slot) => r.read(buf).inspect_err(|_| {
                if let Some(e) = r.take_error() {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            }),
        }
    }
}

impl Seek for Input {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        match self {
            Input::File(f) => f.seek(to),
            Input::Remote(r, _) => r.seek(to),
        }
    }
}

/// The bytes of a TIFF with every 8-bit, one-sample palette image shown as MinIsBlack: the
/// `tiff` crate refuses to decode palette images, yet a palette image's samples are exactly the
/// class indices segfit wants (its own class maps carry a colour table for GIS tools). The
/// `PhotometricInterpretation` value 3 of such an image reads as 1; nothing else changes.
struct Indexed<R> {
    inner: R,
    pos: u64,
    /// File offsets of the low byte of each Photometric value to read as 1.
    patches: Vec<u64>,
}

impl<R: Read + Seek> Indexed<R> {
    fn new(mut inner: R) -> std::io::Result<Self> {
        // A file the scan cannot walk is left to the decoder, which reports it properly.
        let patches = palette_photometrics(&mut inner).unwrap_or_default();
        inner.seek(SeekFrom::Start(0))?;
        Ok(Self {
            inner,
            pos: 0,
            patches,
        })
    }
}

impl<R: Read> Read for Indexed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &p in &self.patches {
            if (self.pos..self.pos + n as u64).contains(&p) {
                buf[(p - self.pos) as usize] = 1;
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Indexed<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// Where the first IFD (the only one a [`ChunkedReader`] reads) keeps its Photometric value's
/// low byte, when it is an 8-bit one-sample palette image.
fn palette_photometrics<R: Read + Seek>(r: &mut R) -> std::io::Result<Vec<u64>> {
    let mut head = [0u8; 16];
    r.read_exact(&mut head[..8])?;
    let le = match &head[..2] {
        b"II" => true,
        b"MM" => false,
        _ => return Ok(Vec::new()),
    };
    let num = |b: &[u8]| -> u64 {
        let mut v = 0u64;
        for i in 0..b.len() {
            let byte = if le { b[b.len() - 1 - i] } else { b[i] };
            v = v << 8 | byte as u64;
        }
        v
    };
    let big = num(&head[2..4]) == 43;
    let ifd = if big {
        r.read_exact(&mut head[8..16])?;
        num(&head[8..16])
    } else {
        num(&head[4..8])
    };
    let (count_len, entry_len, field) = if big { (8, 20, 8) } else { (2, 12, 4) };
    r.seek(SeekFrom::Start(ifd))?;
    let mut b = [0u8; 20];
    r.read_exact(&mut b[..count_len])?;
    // Bounded: an absurd count stops the scan (the decoder then reports the file).
    let n = num(&b[..count_len]).min(4096);
    let (mut photometric, mut samples, mut bits) = (None, 1, 0);
    for i in 0..n {
        r.read_exact(&mut b[..entry_len])?;
        let (tag, kind) = (num(&b[..2]), num(&b[2..4]));
        let count = num(&b[4..entry_len - field]);
        if kind != 3 || count != 1 {
            continue;
        }
        let value = num(&b[entry_len - field..entry_len - field + 2]);
        let value_at = ifd + (count_len + entry_len * i as usize + entry_len - field) as u64;
        match tag {
            262 if value == 3 => photometric = Some(value_at + if le { 0 } else { 1 }),
            277 => samples = value,
            258 => bits = value,
            _ => {}
        }
    }
    Ok(photometric
        .filter(|_| samples == 1 && bits == 8)
        .into_iter()
        .collect())
}

/// Turns a decoder error into the error to report: the fetch failure behind it, when there
/// was one, else a decode error naming the file.
fn failure(
    path: &Path,
    slot: &Option<Arc<Mutex<Option<RemoteError>>>>,
    e: impl ToString,
) -> TilesError {
    let fetch = slot
        .as_ref()
        .and_then(|s| s.lock().unwrap_or_else(|p| p.into_inner()).take());
    match fetch {
        Some(e) => TilesError::Remote(e),
        None => TilesError::decode(path, e),
    }
}

/// A TIFF/GeoTIFF opened for windowed reads.
///
/// The header and georeferencing are read by [`ChunkedReader::open`]; pixel data is decoded only
/// by [`ChunkedReader::read_window`], chunk by chunk, so memory stays proportional to the window
/// (plus one strip or tile row) whatever the file's size.
pub struct ChunkedReader {
    /// The file, or the URL (as a path: errors name it the same way).
    path: PathBuf,
    decoder: Decoder<Indexed<Input>>,
    /// Set for a URL: where its fetch errors go.
    fetch_error: Option<Arc<Mutex<Option<RemoteError>>>>,
    /// Byte range of every chunk (for a URL: what a window prefetches).
    chunk_ranges: Vec<Range<u64>>,
    width: usize,
    height: usize,
    bands: usize,
    kind: SampleKind,
    geo: Option<GeoRef>,
    chunk_w: usize,
    chunk_h: usize,
    planar: bool,
    /// Decoded chunks kept for the windows that overlap them (see [`ChunkCache`]).
    cache: ChunkCache,
}

fn bytes_per_sample(kind: SampleKind) -> usize {
    match kind {
        SampleKind::U8 => 1,
        SampleKind::U16 => 2,
        SampleKind::F32 => 4,
    }
}

impl std::fmt::Debug for ChunkedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedReader")
            .field("path", &self.path)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("bands", &self.bands)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl ChunkedReader {
    /// Opens a TIFF and reads its header and GeoTIFF tags (no pixel data).
    pub fn open(path: &Path) -> Result<Self, TilesError> {
        let file = File::open(path).map_err(|e| TilesError::io(path, e))?;
        Self::from_input(path, Input::File(BufReader::new(file)), None)
    }

    /// Opens a TIFF by URL (`https://`, `s3://`, `gs://`, `az://`; see [`remote::is_url`])
    /// and reads its header and GeoTIFF tags: for a cloud-optimised GeoTIFF one HEAD and
    /// usually one range request. [`ChunkedReader::read_window`] then fetches only the
    /// window's tiles, in parallel; memory stays within the remote's cache budget plus one
    /// window's compressed tiles.
    pub fn open_url(url: &str, remote: &Remote) -> Result<Self, TilesError> {
        let mut file = remote.open(url)?;
        // The header and IFDs: the first block holds them in a cloud-optimised GeoTIFF.
        let block = remote.options().block_bytes as u64;
        file.prefetch(std::slice::from_ref(&(0..block)))?;
        let slot = Arc::new(Mutex::new(None));
        let input = Input::Remote(Box::new(file), Arc::clone(&slot));
        let mut reader = Self::from_input(Path::new(url), input, Some(slot))?;
        reader.chunk_ranges = reader.read_chunk_ranges()?;
        Ok(reader)
    }

    /// [`ChunkedReader::open_url`] for a URL, [`ChunkedReader::open`] for anything else.
    pub fn open_location(location: &str, remote: &Remote) -> Result<Self, TilesError> {
        if remote::is_url(location) {
            Self::open_url(location, remote)
        } else {
            Self::open(Path::new(location))
        }
    }

    fn from_input(
        path: &Path,
        input: Input,
        fetch_error: Option<Arc<Mutex<Option<RemoteError>>>>,
    ) -> Result<Self, TilesError> {
        let fail = |e: TiffError| failure(path, &fetch_error, e);
        let mut limits = Limits::default();
        // Chunks are small, but offset arrays of big scenes exceed the 1 MiB default.
        limits.ifd_value_size = 256 * 1024 * 1024;
        limits.decoding_buffer_size = 1 << 30;
        let input = Indexed::new(input).map_err(|e| match failure(path, &fetch_error, &e) {
            TilesError::Remote(r) => TilesError::Remote(r),
            _ => TilesError::io(path, e),
        })?;
        let mut decoder = Decoder::new(input).map_err(fail)?.with_limits(limits);
        let (w, h) = decoder.dimensions().map_err(fail)?;
        let color = decoder
            .colortype()
            .map_err(|e| TilesError::unsupported(path, e))?;
        let spp: u16 = decoder
            .find_tag_unsigned(Tag::SamplesPerPixel)
            .map_err(fail)?
            .unwrap_or(1);
        let planar = decoder
            .find_tag_unsigned::<u16>(Tag::PlanarConfiguration)
            .map_err(fail)?
            == Some(2);
        let bands = if planar { spp } else { color.num_samples() };
        if bands != spp {
            return Err(TilesError::unsupported(
                path,
                format!(
                    "{spp} samples per pixel decode as {color:?}; store the bands as MinIsBlack"
                ),
            ));
        }
        let format: u16 = decoder
            .find_tag_unsigned_vec::<u16>(Tag::SampleFormat)
            .map_err(fail)?
            .and_then(|v| v.first().copied())
            .unwrap_or(1);
        let kind = match (format, color.bit_depth()) {
            (1, 8) => SampleKind::U8,
            (1, 16) => SampleKind::U16,
            (3, 32) => SampleKind::F32,
            (f, b) => {
                let name = match f {
                    1 => "unsigned",
                    2 => "signed",
                    3 => "float",
                    _ => "untyped",
                };
                return Err(TilesError::unsupported(
                    path,
                    format!(
                        "{b}-bit {name} samples; segfit reads 8/16-bit unsigned and 32-bit float"
                    ),
                ));
            }
        };
        let (chunk_w, chunk_h) = decoder.chunk_dimensions();
        if chunk_w == 0 || chunk_h == 0 {
            return Err(TilesError::decode(
                path,
                format!("strip/tile size {chunk_w}x{chunk_h}"),
            ));
        }
        let geo = read_geo(&mut decoder).map_err(fail)?;
        Ok(Self {
            path: path.to_path_buf(),
            decoder,
            fetch_error,
            chunk_ranges: Vec::new(),
            width: w as usize,
            height: h as usize,
            bands: bands as usize,
            kind,
            geo,
            chunk_w: chunk_w as usize,
            chunk_h: (chunk_h as usize).min(h as usize),
            planar,
            cache: ChunkCache::default(),
        })
    }

    /// The file it reads, or its URL.
    pub fn location(&self) -> &Path {
        &self.path
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Bands per pixel.
    pub fn bands(&self) -> usize {
        self.bands
    }

    /// Sample type.
    pub fn kind(&self) -> SampleKind {
        self.kind
    }

    /// Georeferencing of the whole raster, when the file has GeoTIFF tags.
    pub fn geo(&self) -> Option<&GeoRef> {
        self.geo.as_ref()
    }

    /// `(width, height)` of one strip or tile: windows aligned to it decode each chunk once.
    pub fn chunk_size(&self) -> (usize, usize) {
        (self.chunk_w, self.chunk_h)
    }

    /// Decodes the window of `w × h` pixels whose top-left pixel is `(x, y)`.
    ///
    /// Returns a `[h, w, bands]` raster; the window must lie inside the image.
    pub fn read_window(
        &mut self,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Result<Raster, TilesError> {
        if w == 0 || h == 0 || x.saturating_add(w) > self.width || y.saturating_add(h) > self.height
        {
            return Err(TilesError::Window {
                path: self.path.clone(),
                x,
                y,
                w,
                h,
                width: self.width,
                height: self.height,
            });
        }
        let n = w * h * self.bands;
        let mut out = match self.kind {
            SampleKind::U8 => RasterData::U8(vec![0; n]),
            SampleKind::U16 => RasterData::U16(vec![0; n]),
            SampleKind::F32 => RasterData::F32(vec![0.0; n]),
        };
        let across = self.width.div_ceil(self.chunk_w);
        let per_plane = across * self.height.div_ceil(self.chunk_h);
        let tiled = self.decoder.get_chunk_type() == ChunkType::Tile;
        let planes = if self.planar { self.bands } else { 1 };
        let mut chunks = Vec::new();
        for cy in y / self.chunk_h..=(y + h - 1) / self.chunk_h {
            for cx in x / self.chunk_w..=(x + w - 1) / self.chunk_w {
                let index = if tiled { cy * across + cx } else { cy };
                for plane in 0..planes {
                    chunks.push((cx, cy, plane, (plane * per_plane + index) as u32));
                }
            }
        }
        if let Input::Remote(file, _) = &mut self.decoder.inner().inner {
            // Every chunk of the window not decoded yet in one parallel fetch, before
            // decoding any.
            let ranges: Vec<Range<u64>> = chunks
                .iter()
                .filter(|c| !self.cache.holds(c.3))
                .filter_map(|c| self.chunk_ranges.get(c.3 as usize).cloned())
                .collect();
            file.prefetch(&ranges)?;
        }
        let spp = if self.planar { 1 } else { self.bands };
        let chunk_bytes = self.chunk_w * self.chunk_h * spp * bytes_per_sample(self.kind);
        // Two rows of chunks across the raster: a row of windows and the next one, which
        // overlaps it, decode each chunk once.
        let per_row = self.width.div_ceil(self.chunk_w) * planes;
        self.cache
            .set_budget((2 * per_row * chunk_bytes).clamp(4 * chunk_bytes, CACHE_MOST_BYTES));
        for (cx, cy, plane, chunk) in chunks {
            let (cw, ch) = self.decoder.chunk_data_dimensions(chunk);
            if !self.cache.holds(chunk) {
                // NOTE: ask for rows as wide as the whole tile. With narrower (edge-tile)
                // rows tiff 0.11 decodes row by row and fails on LZW tiles ("no lzw end
                // code").
                let stride = self.chunk_w * spp * bytes_per_sample(self.kind);
                let mut buffer = self.cache.spare();
                self.decoder
                    .read_chunk_to_buffer(&mut buffer, chunk, stride)
                    .map_err(|e| failure(&self.path, &self.fetch_error, e))?;
                self.cache.insert(chunk, buffer);
            }
            let buffer = self.cache.get(chunk).expect("held or just decoded");
            let src = ChunkView {
                x0: cx * self.chunk_w,
                y0: cy * self.chunk_h,
                w: cw as usize,
                h: ch as usize,
                stride: self.chunk_w,
                spp,
                band0: plane,
            };
            let win = (x, y, w, h, self.bands);
            copy_chunk(buffer, &src, &mut out, win)
                .map_err(|reason| TilesError::decode(&self.path, reason))?;
        }
        Ok(Raster::new(w, h, self.bands, out).expect("window buffer sized from its dimensions"))
    }

    /// Decodes the whole raster.
    pub fn read_all(&mut self) -> Result<Raster, TilesError> {
        let (w, h) = (self.width, self.height);
        self.read_window(0, 0, w, h)
    }

    /// The file's byte range of every strip or tile, in chunk order.
    fn read_chunk_ranges(&mut self) -> Result<Vec<Range<u64>>, TilesError> {
        let (offsets, counts) = match self.decoder.get_chunk_type() {
            ChunkType::Tile => (Tag::TileOffsets, Tag::TileByteCounts),
            ChunkType::Strip => (Tag::StripOffsets, Tag::StripByteCounts),
        };
        let path = &self.path;
        let fetch_error = &self.fetch_error;
        let mut read = |tag| {
            self.decoder
                .find_tag_unsigned_vec::<u64>(tag)
                .map_err(|e| failure(path, fetch_error, e))?
                .ok_or_else(|| TilesError::decode(path, format!("no {tag:?} tag")))
        };
        let (offsets, counts) = (read(offsets)?, read(counts)?);
        if offsets.len() != counts.len() {
            return Err(TilesError::decode(
                path,
                format!(
                    "{} chunk offsets but {} byte counts",
                    offsets.len(),
                    counts.len()
                ),
            ));
        }
        Ok(offsets
            .iter()
            .zip(&counts)
            .map(|(&o, &n)| o..o.saturating_add(n))
            .collect())
    }
}

/// Where a decoded chunk sits in the image.
struct ChunkView {
    x0: usize,
    y0: usize,
    w: usize,
    h: usize,
    /// Pixels per decoded row (the tile width; at least `w`).
    stride: usize,
    spp: usize,
    band0: usize,
}

fn copy_chunk(
    data: &DecodingResult,
    src: &ChunkView,
    out: &mut RasterData,
    win: (usize, usize, usize, usize, usize),
) -> Result<(), String> {
    match (data, out) {
        (DecodingResult::U8(s), RasterData::U8(d)) => copy_typed(s, src, d, win),
        (DecodingResult::U16(s), RasterData::U16(d)) => copy_typed(s, src, d, win),
        (DecodingResult::F32(s), RasterData::F32(d)) => copy_typed(s, src, d, win),
        _ => return Err("chunk sample type differs from the header's".into()),
    }
    Ok(())
}

fn copy_typed<T: Copy>(
    s: &[T],
    src: &ChunkView,
    d: &mut [T],
    win: (usize, usize, usize, usize, usize),
) {
    let (x, y, w, h, bands) = win;
    let ys = src.y0.max(y)..(src.y0 + src.h).min(y + h);
    let xs = src.x0.max(x)..(src.x0 + src.w).min(x + w);
    if xs.is_empty() {
        return;
    }
    for row in ys {
        let srow = (row - src.y0) * src.stride;
        let drow = (row - y) * w;
        if src.spp == bands {
            // Chunky layout: whole pixel runs copy at once.
            let a = (srow + xs.start - src.x0) * bands;
            let b = (drow + xs.start - x) * bands;
            let len = xs.len() * bands;
            d[b..b + len].copy_from_slice(&s[a..a + len]);
        } else {
            for col in xs.clone() {
                d[(drow + col - x) * bands + src.band0] = s[srow + col - src.x0];
            }
        }
    }
}

/// GTRasterTypeGeoKey: 1 = PixelIsArea, 2 = PixelIsPoint.
const GT_RASTER_TYPE: u16 = 1025;

pub(crate) fn is_pixel_is_point(keys: Option<&[u16]>) -> bool {
    let Some(keys) = keys else { return false };
    keys.get(4..)
        .unwrap_or(&[])
        .chunks_exact(4)
        .any(|k| k[0] == GT_RASTER_TYPE && k[1] == 0 && k[3] == 2)
}

fn read_geo<R: std::io::Read + std::io::Seek>(
    dec: &mut Decoder<R>,
) -> tiff::TiffResult<Option<GeoRef>> {
    let f64s = |dec: &mut Decoder<R>, tag| -> tiff::TiffResult<Option<Vec<f64>>> {
        dec.find_tag(tag)?.map(|v| v.into_f64_vec()).transpose()
    };
    let scale = f64s(dec, Tag::ModelPixelScaleTag)?;
    let tie = f64s(dec, Tag::ModelTiepointTag)?;
    let matrix = f64s(dec, Tag::ModelTransformationTag)?;
    let keys = dec
        .find_tag(Tag::GeoKeyDirectoryTag)?
        .map(|v| v.into_u16_vec())
        .transpose()?;
    let doubles = f64s(dec, Tag::GeoDoubleParamsTag)?;
    let ascii = dec
        .find_tag(Tag::GeoAsciiParamsTag)?
        .map(|v| v.into_string())
        .transpose()?;
    let nodata = dec
        .find_tag(Tag::GdalNodata)?
        .map(|v| v.into_string())
        .transpose()?
        .and_then(|s| {
            s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .parse::<f64>()
                .ok()
        });
    let mut transform = match (matrix, scale, tie) {
        (Some(m), _, _) if m.len() >= 8 => [m[3], m[0], m[1], m[7], m[4], m[5]],
        (_, Some(s), Some(t)) if s.len() >= 2 && t.len() >= 6 => {
            // Tiepoint (i, j, k, x, y, z): raster point (i, j) sits at world (x, y); rows go south.
            [
                t[3] - t[0] * s[0],
                s[0],
                0.0,
                t[4] + t[1] * s[1],
                0.0,
                -s[1],
            ]
        }
        _ => return Ok(None),
    };
    if is_pixel_is_point(keys.as_deref()) {
        // NOTE: like GDAL, report PixelIsPoint rasters by their pixel corner (half a pixel up-left),
        // so `GeoRef::transform` always means the corner; the writer shifts back.
        transform[0] -= 0.5 * (transform[1] + transform[2]);
        transform[3] -= 0.5 * (transform[4] + transform[5]);
    }
    Ok(Some(GeoRef {
        transform,
        geo_key_directory: keys,
        geo_double_params: doubles,
        geo_ascii_params: ascii,
        nodata,
    }))
}

/// Decodes the window of `w × h` pixels at `(x, y)` of the TIFF at `path` (`[h, w, bands]`).
pub fn read_window(
    path: &Path,
    x: usize,
    y: usize,
    w: usize,
    h: usize,
) -> Result<Raster, TilesError> {
    ChunkedReader::open(path)?.read_window(x, y, w, h)
}
