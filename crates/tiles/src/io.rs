//! Whole-file image and mask IO: PNG, JPEG and (Geo)TIFF in, PNG and GeoTIFF out.

use std::io::{BufReader, Read};
use std::path::Path;

use image::{DynamicImage, ImageFormat};
use raster::{GeoRef, Mask, Raster, RasterData};

use crate::error::TilesError;
use crate::tiff_read::ChunkedReader;

/// File formats recognised by their first bytes (the extension can lie).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Png,
    Jpeg,
    Tiff,
}

fn sniff(path: &Path) -> Result<Format, TilesError> {
    let mut head = [0u8; 8];
    let mut f = std::fs::File::open(path).map_err(|e| TilesError::io(path, e))?;
    let n = read_up_to(&mut f, &mut head).map_err(|e| TilesError::io(path, e))?;
    let head = &head[..n];
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Ok(Format::Png)
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Ok(Format::Jpeg)
    } else if head.starts_with(b"II*\0")
        || head.starts_with(b"MM\0*")
        || head.starts_with(b"II+\0")
        || head.starts_with(b"MM\0+")
    {
        Ok(Format::Tiff)
    } else if n == 0 {
        Err(TilesError::decode(path, "file is empty"))
    } else {
        Err(TilesError::unsupported(
            path,
            "not a PNG, JPEG or TIFF file",
        ))
    }
}

/// Whether `path` is a TIFF (GeoTIFF, BigTIFF) by its first four bytes (`II*\0`, `MM\0*`, or
/// BigTIFF's `II+\0`, `MM\0+`), whatever its name says; `false` when it cannot be read.
/// [`read_image`] and [`ChunkedReader`] read both kinds.
pub fn is_tiff(path: &Path) -> bool {
    matches!(sniff(path), Ok(Format::Tiff))
}

fn read_up_to(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Reads an image (PNG, JPEG, TIFF/GeoTIFF) into a `[H, W, C]` raster, with its georeferencing
/// when the file is a GeoTIFF. Palette PNGs are expanded to RGB(A) here; use [`read_mask`] for
/// palette indices.
pub fn read_image(path: &Path) -> Result<(Raster, Option<GeoRef>), TilesError> {
    match sniff(path)? {
        Format::Tiff => {
            let mut r = ChunkedReader::open(path)?;
            let geo = r.geo().cloned();
            Ok((r.read_all()?, geo))
        }
        f => {
            let fmt = if f == Format::Png {
                ImageFormat::Png
            } else {
                ImageFormat::Jpeg
            };
            let file = std::fs::File::open(path).map_err(|e| TilesError::io(path, e))?;
            let img =
                image::load(BufReader::new(file), fmt).map_err(|e| TilesError::decode(path, e))?;
            Ok((from_dynamic(path, img)?, None))
        }
    }
}

fn from_dynamic(path: &Path, img: DynamicImage) -> Result<Raster, TilesError> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let bands = img.color().channel_count() as usize;
    let data = match img {
        DynamicImage::ImageLuma8(b) => RasterData::U8(b.into_raw()),
        DynamicImage::ImageLumaA8(b) => RasterData::U8(b.into_raw()),
        DynamicImage::ImageRgb8(b) => RasterData::U8(b.into_raw()),
        DynamicImage::ImageRgba8(b) => RasterData::U8(b.into_raw()),
        DynamicImage::ImageLuma16(b) => RasterData::U16(b.into_raw()),
        DynamicImage::ImageLumaA16(b) => RasterData::U16(b.into_raw()),
        DynamicImage::ImageRgb16(b) => RasterData::U16(b.into_raw()),
        DynamicImage::ImageRgba16(b) => RasterData::U16(b.into_raw()),
        DynamicImage::ImageRgb32F(b) => RasterData::F32(b.into_raw()),
        DynamicImage::ImageRgba32F(b) => RasterData::F32(b.into_raw()),
        other => {
            return Err(TilesError::unsupported(
                path,
                format!("pixel layout {:?}", other.color()),
            ));
        }
    };
    Raster::new(w, h, bands, data)
        .ok_or_else(|| TilesError::decode(path, "decoded size disagrees with the header"))
}

/// Reads a class mask: 8-bit single-band PNG or TIFF, or a palette PNG (its palette *indices*,
/// not colours). 16-bit or RGB masks are accepted when they hold only 8-bit grey values.
pub fn read_mask(path: &Path) -> Result<Mask, TilesError> {
    match sniff(path)? {
        Format::Png => read_png_mask(path),
        Format::Tiff => {
            let mut r = ChunkedReader::open(path)?;
            let raster = r.read_all()?;
            raster_to_mask(path, &raster)
        }
        Format::Jpeg => Err(TilesError::unsupported(
            path,
            "JPEG masks are lossy and blur class values; save masks as PNG or TIFF",
        )),
    }
}

fn read_png_mask(path: &Path) -> Result<Mask, TilesError> {
    let file = std::fs::File::open(path).map_err(|e| TilesError::io(path, e))?;
    let mut dec = png::Decoder::new(BufReader::new(file));
    // IDENTITY keeps palette indices and bit depth as stored; the `image` crate would expand them.
    dec.set_transformations(png::Transformations::IDENTITY);
    let mut reader = dec.read_info().map_err(|e| TilesError::decode(path, e))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| TilesError::decode(path, "image too large"))?;
    let mut buf = vec![0; size];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| TilesError::decode(path, e))?;
    let (w, h) = (info.width as usize, info.height as usize);
    let bits = info.bit_depth as u8 as usize;
    let channels = info.color_type.samples();
    let line = info.line_size;
    let mut data = Vec::with_capacity(w * h);
    match (info.color_type, bits) {
        (png::ColorType::Grayscale | png::ColorType::Indexed, 1 | 2 | 4 | 8) => {
            // Sub-byte samples are packed most significant bits first, rows padded to a byte.
            let per_byte = 8 / bits;
            let max = ((1u16 << bits) - 1) as u8;
            for row in buf.chunks(line).take(h) {
                for x in 0..w {
                    let byte = row[x / per_byte];
                    let shift = 8 - bits * (x % per_byte + 1);
                    data.push((byte >> shift) & max);
                }
            }
        }
        (png::ColorType::Grayscale, 16) => {
            for row in buf.chunks(line).take(h) {
                for px in row[..w * 2].chunks_exact(2) {
                    let v = u16::from_be_bytes([px[0], px[1]]);
                    data.push(u8::try_from(v).map_err(|_| {
                        TilesError::unsupported(
                            path,
                            format!("16-bit mask holds value {v}; masks must hold values 0..=255"),
                        )
                    })?);
                }
            }
        }
        (png::ColorType::Rgb | png::ColorType::Rgba | png::ColorType::GrayscaleAlpha, 8) => {
            for row in buf.chunks(line).take(h) {
                for px in row[..w * channels].chunks_exact(channels) {
                    let grey = if channels == 2 { 1 } else { 3 };
                    if px[..grey].iter().any(|&c| c != px[0]) {
                        return Err(TilesError::unsupported(
                            path,
                            "mask is a colour image; save it as single-band 8-bit or palette PNG (one class value per pixel)",
                        ));
                    }
                    data.push(px[0]);
                }
            }
        }
        (c, b) => {
            return Err(TilesError::unsupported(
                path,
                format!("{b}-bit {c:?} PNG cannot be a mask; use 8-bit grey or palette"),
            ));
        }
    }
    Mask::new(w, h, data)
        .ok_or_else(|| TilesError::decode(path, "decoded size disagrees with the header"))
}

/// A single-band u8/u16 raster as class values (the one conversion for mask files and label
/// rasters read by window).
pub(crate) fn raster_to_mask(path: &Path, r: &Raster) -> Result<Mask, TilesError> {
    if r.bands != 1 {
        return Err(TilesError::unsupported(
            path,
            format!("mask has {} bands; masks must be single-band", r.bands),
        ));
    }
    let data = match &r.data {
        RasterData::U8(v) => v.clone(),
        RasterData::U16(v) => v
            .iter()
            .map(|&s| u8::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                TilesError::unsupported(
                    path,
                    "16-bit mask holds values above 255; masks must hold values 0..=255",
                )
            })?,
        RasterData::F32(_) => {
            return Err(TilesError::unsupported(
                path,
                "float mask; masks must be 8-bit integer class values",
            ));
        }
    };
    Ok(Mask::new(r.width, r.height, data).expect("mask sized from its raster"))
}

/// Writes a 1–4 band `u8`/`u16` raster as PNG (grey, grey+alpha, RGB, RGBA), atomically.
pub fn write_png(path: &Path, raster: &Raster) -> Result<(), TilesError> {
    use image::ExtendedColorType as C;
    let (color, bytes): (C, Vec<u8>) = match (&raster.data, raster.bands) {
        (RasterData::U8(v), b @ 1..=4) => ([C::L8, C::La8, C::Rgb8, C::Rgba8][b - 1], v.clone()),
        // The encoder takes native-endian samples and writes PNG big-endian itself.
        (RasterData::U16(v), b @ 1..=4) => (
            [C::L16, C::La16, C::Rgb16, C::Rgba16][b - 1],
            v.iter().flat_map(|s| s.to_ne_bytes()).collect(),
        ),
        _ => {
            return Err(TilesError::input(
                path,
                format!(
                    "PNG holds 1-4 bands of u8/u16, not {} bands of {}; write a GeoTIFF instead",
                    raster.bands,
                    raster.kind()
                ),
            ));
        }
    };
    encode_png(path, &bytes, raster.width, raster.height, color)
}

/// Writes a mask as an 8-bit grey PNG, atomically.
pub fn write_mask_png(path: &Path, mask: &Mask) -> Result<(), TilesError> {
    encode_png(
        path,
        &mask.data,
        mask.width,
        mask.height,
        image::ExtendedColorType::L8,
    )
}

fn encode_png(
    path: &Path,
    bytes: &[u8],
    w: usize,
    h: usize,
    color: image::ExtendedColorType,
) -> Result<(), TilesError> {
    use image::ImageEncoder;
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(bytes, w as u32, h as u32, color)
        .map_err(|e| TilesError::input(path, format!("encoding PNG: {e}")))?;
    Ok(fsio::write_atomic(path, &out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use raster::RasterData;

    #[test]
    fn is_tiff_goes_by_the_first_bytes_not_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let raster = Raster::new(2, 2, 1, RasterData::U8(vec![0, 1, 2, 3])).unwrap();
        let tiff = dir.path().join("a_tiff.png");
        crate::write_geotiff(&tiff, &raster, None).unwrap();
        let png = dir.path().join("a_png.tif");
        crate::write_png(&png, &raster).unwrap();
        assert!(is_tiff(&tiff));
        assert!(!is_tiff(&png));
        // Big-endian classic TIFF and BigTIFF in both byte orders: what `tiff` decodes.
        for (i, head) in [b"MM\0*", b"II+\0", b"MM\0+"].iter().enumerate() {
            let path = dir.path().join(format!("{i}.dat"));
            std::fs::write(&path, [&head[..], &[0u8; 12]].concat()).unwrap();
            assert!(is_tiff(&path), "{head:?}");
        }
        // Two bytes of a TIFF byte order are not a TIFF; nor are an empty or missing file.
        let half = dir.path().join("half.tif");
        std::fs::write(&half, b"II\0\0\0\0\0\0").unwrap();
        let empty = dir.path().join("empty.tif");
        std::fs::write(&empty, b"").unwrap();
        for path in [half, empty, dir.path().join("missing.tif")] {
            assert!(!is_tiff(&path), "{}", path.display());
        }
    }
}
