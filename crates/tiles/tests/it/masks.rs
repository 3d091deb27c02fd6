//! Mask and image reading of PNG/JPEG: palette indices, grey/16-bit/RGB masks, and the errors
//! for files that cannot be masks.

use std::io::BufWriter;
use std::path::Path;

use tiles::{RasterData, TilesError, read_image, read_mask, write_png};

use crate::common;

/// Writes a palette PNG with the `png` crate: `bits`-bit indices, a palette of `colors` entries.
fn palette_png(path: &Path, w: u32, h: u32, bits: png::BitDepth, indices: &[u8], colors: usize) {
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Indexed);
    enc.set_depth(bits);
    // Distinct, non-grey colours so an expanded palette could never be mistaken for indices.
    let palette: Vec<u8> = (0..colors)
        .flat_map(|i| [(i * 40) as u8, 200 - (i * 30) as u8, 17])
        .collect();
    enc.set_palette(palette);
    let mut w = enc.write_header().unwrap();
    // Pack indices MSB first, each row padded to a whole byte.
    let per_byte = 8 / bits as usize;
    let mut packed = Vec::new();
    for row in indices.chunks(indices.len() / h as usize) {
        for chunk in row.chunks(per_byte) {
            let mut b = 0u8;
            for (k, &v) in chunk.iter().enumerate() {
                b |= v << (8 - bits as usize * (k + 1));
            }
            packed.push(b);
        }
    }
    w.write_image_data(&packed).unwrap();
}

#[test]
fn palette_png_masks_give_indices_not_colours() {
    let dir = tempfile::tempdir().unwrap();
    for (bits, colors) in [
        (png::BitDepth::Eight, 6),
        (png::BitDepth::Four, 5),
        (png::BitDepth::One, 2),
    ] {
        let (w, h) = (13u32, 5u32);
        let indices: Vec<u8> = (0..w * h)
            .map(|i| (i as usize * 7 % colors) as u8)
            .collect();
        let p = dir.path().join(format!("pal{}.png", bits as u8));
        palette_png(&p, w, h, bits, &indices, colors);
        let m = read_mask(&p).unwrap();
        assert_eq!((m.width, m.height), (13, 5));
        assert_eq!(m.data, indices, "{bits:?}");
    }
}

#[test]
fn grey_masks_round_trip_and_grey_rgb_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mask_of(9, 4, &[0, 3, 255, 1]);
    let p = dir.path().join("m.png");
    tiles::write_mask_png(&p, &m).unwrap();
    assert_eq!(read_mask(&p).unwrap(), m);

    // The same mask saved as RGB with equal channels (a common export accident) reads the same.
    let grey3: Vec<u8> = m.data.iter().flat_map(|&v| [v, v, v]).collect();
    let rgb = tiles::Raster::new(9, 4, 3, RasterData::U8(grey3)).unwrap();
    let q = dir.path().join("rgb.png");
    write_png(&q, &rgb).unwrap();
    assert_eq!(read_mask(&q).unwrap(), m);

    // Single-band TIFF masks too.
    let t = dir.path().join("m.tif");
    let r = tiles::Raster::new(9, 4, 1, RasterData::U8(m.data.clone())).unwrap();
    tiles::write_geotiff(&t, &r, None).unwrap();
    assert_eq!(read_mask(&t).unwrap(), m);
}

#[test]
fn colour_and_jpeg_masks_are_refused_with_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("colour.png");
    write_png(&p, &common::u8_raster(8, 8, 3, 4)).unwrap();
    let err = read_mask(&p).unwrap_err().to_string();
    assert!(
        err.contains("colour.png") && err.contains("single-band"),
        "{err}"
    );

    let j = dir.path().join("mask.jpg");
    image::RgbImage::from_pixel(8, 8, image::Rgb([1, 1, 1]))
        .save(&j)
        .unwrap();
    let err = read_mask(&j).unwrap_err().to_string();
    assert!(err.contains("mask.jpg") && err.contains("JPEG"), "{err}");
}

#[test]
fn sixteen_bit_png_images_keep_their_samples() {
    let dir = tempfile::tempdir().unwrap();
    let r = common::u16_raster(11, 7, 3, 8);
    let p = dir.path().join("rgb16.png");
    write_png(&p, &r).unwrap();
    // Decode with the `image` crate directly as the independent reference.
    let reference = image::open(&p).unwrap().into_rgb16().into_raw();
    let (back, geo) = read_image(&p).unwrap();
    assert!(geo.is_none());
    assert_eq!(back.data, RasterData::U16(reference));
    assert_eq!(back, r);
}

#[test]
fn jpeg_images_decode_to_rgb_u8() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jpg");
    image::RgbImage::from_pixel(16, 8, image::Rgb([200, 100, 50]))
        .save(&p)
        .unwrap();
    let (r, _) = read_image(&p).unwrap();
    assert_eq!((r.width, r.height, r.bands), (16, 8, 3));
    // Lossy, but a flat colour survives within a few levels.
    assert!((r.get_f32(3, 5, 0) - 200.0).abs() < 4.0);
}

#[test]
fn truncated_and_empty_files_are_decode_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.png");
    write_png(&p, &common::u8_raster(64, 64, 3, 1)).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    for result in [read_image(&p).map(|_| ()), read_mask(&p).map(|_| ())] {
        let err = result.unwrap_err();
        assert!(matches!(err, TilesError::Decode { .. }), "{err:?}");
        assert!(err.to_string().contains("cut.png"));
    }
    let e = dir.path().join("empty.png");
    std::fs::write(&e, b"").unwrap();
    assert!(read_image(&e).unwrap_err().to_string().contains("empty"));
    let t = dir.path().join("notes.png");
    std::fs::write(&t, b"hello world").unwrap();
    assert!(matches!(
        read_image(&t).unwrap_err(),
        TilesError::Unsupported { .. }
    ));
}

#[test]
fn png_refuses_rasters_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let err = write_png(&dir.path().join("x.png"), &common::u16_raster(4, 4, 13, 1)).unwrap_err();
    assert!(err.to_string().contains("GeoTIFF"), "{err}");
    assert!(!dir.path().join("x.png").exists());
}
