//! GeoTIFF reading and writing: exact round trips, compressed and tiled layouts, windows and
//! georeferencing, checked against data made in the test and files made by the `tiff` crate's
//! own encoder.

use std::fs::File;
use std::path::Path;

use tiff::encoder::{TiffEncoder, colortype};
use tiff::tags::Tag;
use tiles::{
    ChunkedReader, Compression, GeoRef, RasterData, TiffOptions, read_image, read_window,
    write_geotiff, write_geotiff_with,
};

use crate::common::{crop_u16, f32_raster, u8_raster, u16_raster};

fn geo() -> GeoRef {
    GeoRef {
        transform: [500_000.0, 10.0, 0.0, 4_200_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633,
        ]),
        geo_double_params: Some(vec![6378137.0, 298.257223563]),
        geo_ascii_params: Some("WGS 84 / UTM zone 33N|".into()),
        nodata: Some(0.0),
    }
}

fn layouts() -> Vec<TiffOptions> {
    let mut v = Vec::new();
    for compression in [Compression::None, Compression::Lzw, Compression::Deflate] {
        v.push(TiffOptions {
            compression,
            tile_size: None,
            rows_per_strip: Some(7),
        });
        v.push(TiffOptions {
            compression,
            tile_size: Some(16),
            rows_per_strip: None,
        });
    }
    v
}

#[test]
fn sixteen_bit_multiband_round_trips_exactly_in_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    // 37x29 is not a multiple of the 16-pixel tile, so edge tiles are padded.
    for bands in [1, 4, 13] {
        let r = u16_raster(37, 29, bands, bands as u64);
        for (i, o) in layouts().iter().enumerate() {
            let p = dir.path().join(format!("b{bands}_{i}.tif"));
            write_geotiff_with(&p, &r, Some(&geo()), o).unwrap();
            let (back, g) = read_image(&p).unwrap();
            assert_eq!(back, r, "{bands} bands, {o:?}");
            assert_eq!(g.unwrap(), geo(), "{o:?}");
        }
    }
}

#[test]
fn u8_and_f32_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for r in [
        u8_raster(33, 18, 3, 1),
        u8_raster(20, 20, 1, 2),
        f32_raster(19, 21, 2, 3),
    ] {
        for (i, o) in layouts().iter().enumerate() {
            let p = dir.path().join(format!("{}_{}_{i}.tif", r.bands, r.kind()));
            write_geotiff_with(&p, &r, None, o).unwrap();
            let (back, g) = read_image(&p).unwrap();
            assert_eq!(back, r);
            assert!(g.is_none());
        }
    }
}

#[test]
fn reads_lzw_and_deflate_files_written_by_the_tiff_crate() {
    let dir = tempfile::tempdir().unwrap();
    let r = u16_raster(40, 25, 3, 9);
    let RasterData::U16(samples) = &r.data else {
        unreachable!()
    };
    for (name, c) in [
        ("lzw", tiff::encoder::Compression::Lzw),
        (
            "deflate",
            tiff::encoder::Compression::Deflate(Default::default()),
        ),
    ] {
        let p = dir.path().join(format!("{name}.tif"));
        let mut enc = TiffEncoder::new(File::create(&p).unwrap())
            .unwrap()
            .with_compression(c)
            .with_predictor(tiff::tags::Predictor::Horizontal);
        enc.write_image::<colortype::RGB16>(40, 25, samples)
            .unwrap();
        drop(enc);
        let (back, _) = read_image(&p).unwrap();
        assert_eq!(back, r, "{name}");
    }
}

#[test]
fn windows_of_a_tiled_file_match_the_source_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let r = u16_raster(70, 50, 4, 5);
    for o in [
        TiffOptions {
            compression: Compression::Deflate,
            tile_size: Some(16),
            rows_per_strip: None,
        },
        TiffOptions {
            rows_per_strip: Some(3),
            ..Default::default()
        },
    ] {
        let p = dir.path().join("w.tif");
        write_geotiff_with(&p, &r, None, &o).unwrap();
        let mut reader = ChunkedReader::open(&p).unwrap();
        assert_eq!(
            (reader.width(), reader.height(), reader.bands()),
            (70, 50, 4)
        );
        for &(x, y, w, h) in &[
            (0, 0, 70, 50),
            (15, 15, 2, 2),
            (16, 16, 16, 16),
            (33, 7, 37, 43),
            (69, 49, 1, 1),
        ] {
            let win = reader.read_window(x, y, w, h).unwrap();
            let RasterData::U16(got) = &win.data else {
                panic!()
            };
            assert_eq!(
                *got,
                crop_u16(&r, x, y, w, h),
                "window {x},{y},{w},{h} of {o:?}"
            );
        }
        let err = read_window(&p, 60, 0, 11, 1).unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
    }
}

/// Writes a GeoTIFF with the `tiff` crate directly, so the georeferencing tags are laid out
/// independently of our writer.
fn tiff_with_tags(
    p: &Path,
    tags: impl FnOnce(&mut tiff::encoder::DirectoryEncoder<'_, File, tiff::encoder::TiffKindStandard>),
) {
    let mut enc = TiffEncoder::new(File::create(p).unwrap()).unwrap();
    let mut img = enc.new_image::<colortype::Gray8>(8, 4).unwrap();
    tags(img.encoder());
    img.write_data(&[7u8; 32]).unwrap();
}

#[test]
fn georeferencing_from_tiepoint_pixel_scale_and_transformation() {
    let dir = tempfile::tempdir().unwrap();
    // Tiepoint at raster (2, 1) -> world (1000, 2000), 0.5 m pixels: the corner (0, 0) is at
    // (1000 - 2 * 0.5, 2000 + 1 * 0.5).
    let p = dir.path().join("tie.tif");
    tiff_with_tags(&p, |d| {
        d.write_tag(Tag::ModelPixelScaleTag, &[0.5f64, 0.5, 0.0][..])
            .unwrap();
        d.write_tag(
            Tag::ModelTiepointTag,
            &[2.0f64, 1.0, 0.0, 1000.0, 2000.0, 0.0][..],
        )
        .unwrap();
        d.write_tag(Tag::GeoKeyDirectoryTag, &[1u16, 1, 0, 1, 1025, 0, 1, 1][..])
            .unwrap();
        d.write_tag(Tag::GdalNodata, "-9999").unwrap();
    });
    let g = ChunkedReader::open(&p).unwrap().geo().cloned().unwrap();
    assert_eq!(g.transform, [999.0, 0.5, 0.0, 2000.5, 0.0, -0.5]);
    assert_eq!(g.nodata, Some(-9999.0));
    assert_eq!(g.pixel_to_world(2.0, 1.0), (1000.0, 2000.0));

    // PixelIsPoint: the tiepoint names a pixel centre, so the corner is half a pixel up-left.
    let p = dir.path().join("point.tif");
    tiff_with_tags(&p, |d| {
        d.write_tag(Tag::ModelPixelScaleTag, &[2.0f64, 2.0, 0.0][..])
            .unwrap();
        d.write_tag(
            Tag::ModelTiepointTag,
            &[0.0f64, 0.0, 0.0, 100.0, 200.0, 0.0][..],
        )
        .unwrap();
        d.write_tag(Tag::GeoKeyDirectoryTag, &[1u16, 1, 0, 1, 1025, 0, 1, 2][..])
            .unwrap();
    });
    let (r, g) = read_image(&p).unwrap();
    let g = g.unwrap();
    assert_eq!(g.transform, [99.0, 2.0, 0.0, 201.0, 0.0, -2.0]);
    // ...and written back it names the same centre again.
    let q = dir.path().join("point_back.tif");
    write_geotiff(&q, &r, Some(&g)).unwrap();
    assert_eq!(read_image(&q).unwrap().1.unwrap(), g);

    // A rotated grid needs ModelTransformation (row-major 4x4).
    let p = dir.path().join("rot.tif");
    tiff_with_tags(&p, |d| {
        let m = [
            3.0f64, 0.5, 0.0, 10.0, 0.25, -3.0, 0.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ];
        d.write_tag(Tag::ModelTransformationTag, &m[..]).unwrap();
    });
    let (r, g) = read_image(&p).unwrap();
    let g = g.unwrap();
    assert_eq!(g.transform, [10.0, 3.0, 0.5, 20.0, 0.25, -3.0]);
    assert_eq!(g.pixel_to_world(1.0, 1.0), (13.5, 17.25));
    let q = dir.path().join("rot_back.tif");
    write_geotiff(&q, &r, Some(&g)).unwrap();
    assert_eq!(read_image(&q).unwrap().1.unwrap().transform, g.transform);
}

#[test]
fn signed_samples_are_refused_with_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dem.tif");
    let mut enc = TiffEncoder::new(File::create(&p).unwrap()).unwrap();
    enc.write_image::<colortype::GrayI16>(4, 4, &[-3i16; 16])
        .unwrap();
    drop(enc);
    let err = read_image(&p).unwrap_err().to_string();
    assert!(err.contains("dem.tif") && err.contains("signed"), "{err}");
}

#[test]
fn truncated_tiff_is_a_decode_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.tif");
    write_geotiff_with(
        &p,
        &u16_raster(64, 64, 4, 1),
        None,
        &TiffOptions {
            compression: Compression::None,
            ..Default::default()
        },
    )
    .unwrap();
    // Keep the header and IFD offset but lose most of the pixel data and the IFD itself.
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 3]).unwrap();
    let err = read_image(&p).unwrap_err();
    assert!(matches!(err, tiles::TilesError::Decode { .. }), "{err:?}");
    assert!(err.to_string().contains("cut.tif"), "{err}");
}

#[test]
fn band_interleaved_planar_tiffs_read_like_pixel_interleaved() {
    // GDAL's INTERLEAVE=BAND layout: PlanarConfiguration 2, one strip per band. Built tag by tag
    // with the `tiff` crate, since its image encoder only writes pixel-interleaved data.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("planar.tif");
    let r = u16_raster(9, 5, 3, 77);
    let RasterData::U16(px) = &r.data else {
        unreachable!()
    };
    let mut enc = TiffEncoder::new(File::create(&p).unwrap()).unwrap();
    let mut d = enc.image_directory().unwrap();
    let mut offsets = Vec::new();
    for b in 0..3 {
        let plane: Vec<u16> = px.iter().skip(b).step_by(3).copied().collect();
        offsets.push(d.write_data(&plane[..]).unwrap() as u32);
    }
    d.write_tag(Tag::ImageWidth, 9u32).unwrap();
    d.write_tag(Tag::ImageLength, 5u32).unwrap();
    d.write_tag(Tag::BitsPerSample, &[16u16, 16, 16][..])
        .unwrap();
    d.write_tag(Tag::SamplesPerPixel, 3u16).unwrap();
    d.write_tag(Tag::PhotometricInterpretation, 1u16).unwrap();
    d.write_tag(Tag::PlanarConfiguration, 2u16).unwrap();
    d.write_tag(Tag::Compression, 1u16).unwrap();
    d.write_tag(Tag::RowsPerStrip, 5u32).unwrap();
    d.write_tag(Tag::StripOffsets, &offsets[..]).unwrap();
    d.write_tag(Tag::StripByteCounts, &[90u32, 90, 90][..])
        .unwrap();
    d.finish().unwrap();
    drop(enc);
    let (back, _) = read_image(&p).unwrap();
    assert_eq!(back, r);
    let win = read_window(&p, 2, 1, 4, 3).unwrap();
    let RasterData::U16(got) = &win.data else {
        panic!()
    };
    assert_eq!(*got, crop_u16(&r, 2, 1, 4, 3));
}
