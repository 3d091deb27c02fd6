//! The incremental tiled GeoTIFF writer with internal overviews, read back with the `tiff`
//! crate's decoder directly (IFD count, tags, every level's pixels against a decimation computed
//! here) and with `tiles::read_image`.

use std::fs::File;
use std::path::Path;

use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;
use tiles::{
    CogOptions, CogWriter, Compression, GeoRef, OverviewResampling, RasterData, RasterShape,
    SampleKind, TilesError, read_image,
};

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

/// Deterministic samples with some zeros (the nodata value) sprinkled in.
fn values(n: usize, seed: u64, max: u64) -> Vec<u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if s.is_multiple_of(11) {
                0
            } else {
                s % (max + 1)
            }
        })
        .collect()
}

/// The test's own 2× decimation of `[h, w, bands]`: top-left sample, or the rounded mean of the
/// samples that exist and are not `nodata` (the top-left one when none is).
fn decimate(
    v: &[u64],
    w: usize,
    h: usize,
    bands: usize,
    avg: bool,
    nodata: u64,
) -> (Vec<u64>, usize, usize) {
    let (w2, h2) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = vec![0; w2 * h2 * bands];
    for y in 0..h2 {
        for x in 0..w2 {
            for b in 0..bands {
                let px = |xx: usize, yy: usize| v[(yy * w + xx) * bands + b];
                let first = px(2 * x, 2 * y);
                let o = &mut out[(y * w2 + x) * bands + b];
                if !avg {
                    *o = first;
                    continue;
                }
                let mut valid = Vec::new();
                for (xx, yy) in [(2 * x, 2 * y), (2 * x + 1, 2 * y)] {
                    for yy in [yy, yy + 1] {
                        if xx < w && yy < h && px(xx, yy) != nodata {
                            valid.push(px(xx, yy));
                        }
                    }
                }
                let n = valid.len() as u64;
                let sum = valid.iter().sum::<u64>() + n / 2;
                *o = sum.checked_div(n).unwrap_or(first);
            }
        }
    }
    (out, w2, h2)
}

fn to_data(v: &[u64], kind: SampleKind) -> RasterData {
    match kind {
        SampleKind::U8 => RasterData::U8(v.iter().map(|&s| s as u8).collect()),
        SampleKind::U16 => RasterData::U16(v.iter().map(|&s| s as u16).collect()),
        SampleKind::F32 => RasterData::F32(v.iter().map(|&s| s as f32).collect()),
    }
}

fn decoded(r: DecodingResult) -> Vec<u64> {
    match r {
        DecodingResult::U8(v) => v.into_iter().map(u64::from).collect(),
        DecodingResult::U16(v) => v.into_iter().map(u64::from).collect(),
        other => panic!(
            "unexpected sample type {:?}",
            std::mem::discriminant(&other)
        ),
    }
}

/// Writes `v` (`[h, w, bands]`) `rows_per_call` rows at a time.
fn write(
    path: &Path,
    v: &[u64],
    shape: RasterShape,
    options: CogOptions,
    rows_per_call: usize,
) -> Result<(), TilesError> {
    let mut w = CogWriter::create(path, shape, Some(&geo()), options)?;
    let row = shape.width * shape.bands;
    for y in (0..shape.height).step_by(rows_per_call) {
        let h = rows_per_call.min(shape.height - y);
        w.write_rows(&to_data(&v[y * row..(y + h) * row], shape.kind))?;
    }
    w.finish()
}

/// Reads every IFD of `path` with the `tiff` decoder and checks layout, tags and pixels against
/// the pyramid of `v` made by the test's own decimation.
fn check_pyramid(path: &Path, v: &[u64], shape: RasterShape, options: CogOptions) {
    let avg = options.resampling == OverviewResampling::Average;
    let mut dec = Decoder::new(File::open(path).unwrap()).unwrap();
    let (mut want, mut w, mut h) = (v.to_vec(), shape.width, shape.height);
    let mut ifd = 0;
    loop {
        assert_eq!(dec.dimensions().unwrap(), (w as u32, h as u32), "IFD {ifd}");
        assert_eq!(dec.get_tag_u32(Tag::TileWidth).unwrap(), 512);
        assert_eq!(dec.get_tag_u32(Tag::TileLength).unwrap(), 512);
        assert_eq!(dec.get_tag_u32(Tag::Compression).unwrap(), 8, "Deflate");
        assert_eq!(
            dec.get_tag_u32(Tag::SamplesPerPixel).unwrap(),
            shape.bands as u32
        );
        let subfile = dec.find_tag_unsigned::<u32>(Tag::NewSubfileType).unwrap();
        let geo_keys = dec.find_tag(Tag::GeoKeyDirectoryTag).unwrap();
        if ifd == 0 {
            assert_eq!(subfile.unwrap_or(0), 0);
            let g = geo();
            assert_eq!(
                dec.get_tag_f64_vec(Tag::ModelPixelScaleTag).unwrap(),
                [10.0, 10.0, 0.0]
            );
            assert_eq!(
                dec.get_tag_f64_vec(Tag::ModelTiepointTag).unwrap(),
                [0.0, 0.0, 0.0, 500_000.0, 4_200_000.0, 0.0]
            );
            assert_eq!(
                dec.get_tag_u16_vec(Tag::GeoKeyDirectoryTag).unwrap(),
                g.geo_key_directory.unwrap()
            );
            assert_eq!(
                dec.get_tag_f64_vec(Tag::GeoDoubleParamsTag).unwrap(),
                g.geo_double_params.unwrap()
            );
            assert_eq!(dec.get_tag_ascii_string(Tag::GdalNodata).unwrap(), "0");
        } else {
            assert_eq!(subfile, Some(1), "IFD {ifd} is an overview");
            assert!(geo_keys.is_none(), "no geo tags on overviews");
        }
        let got = decoded(dec.read_image().unwrap());
        assert!(got == want, "IFD {ifd} ({w}x{h}) pixels differ");
        if !dec.more_images() {
            break;
        }
        dec.next_image().unwrap();
        ifd += 1;
        assert!(w.max(h) > options.min_overview, "one overview too many");
        (want, w, h) = decimate(&want, w, h, shape.bands, avg, 0);
    }
    assert!(w.max(h) <= options.min_overview, "last overview {w}x{h}");
    // 1300x900 -> 650x450 -> 325x225 -> 163x113.
    assert_eq!(ifd, 3);
}

fn case(bands: usize, kind: SampleKind, max: u64, resampling: OverviewResampling) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.tif");
    let shape = RasterShape {
        width: 1300,
        height: 900,
        bands,
        kind,
    };
    let v = values(1300 * 900 * bands, bands as u64 + max, max);
    let options = CogOptions {
        resampling,
        ..CogOptions::default()
    };
    write(&path, &v, shape, options, 37).unwrap();
    check_pyramid(&path, &v, shape, options);

    // Our own reader sees IFD 0 and the same georeferencing.
    let (back, g) = read_image(&path).unwrap();
    assert_eq!((back.width, back.height, back.bands), (1300, 900, bands));
    assert_eq!(back.data, to_data(&v, kind));
    assert_eq!(g.unwrap(), geo());

    // All rows in one call make the same bytes as 37 at a time.
    let once = dir.path().join("once.tif");
    write(&once, &v, shape, options, 900).unwrap();
    assert!(std::fs::read(&once).unwrap() == std::fs::read(&path).unwrap());
}

#[test]
fn three_band_u16_nearest_pyramid_round_trips() {
    case(3, SampleKind::U16, 10_000, OverviewResampling::Nearest);
}

#[test]
fn three_band_u16_average_pyramid_matches_a_direct_decimation() {
    case(3, SampleKind::U16, 65_535, OverviewResampling::Average);
}

#[test]
fn one_band_u8_nearest_pyramid_round_trips() {
    case(1, SampleKind::U8, 6, OverviewResampling::Nearest);
}

#[test]
fn one_band_u8_average_pyramid_matches_a_direct_decimation() {
    case(1, SampleKind::U8, 255, OverviewResampling::Average);
}

#[test]
fn small_image_gets_no_overviews_and_other_codecs_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.tif");
    let shape = RasterShape {
        width: 200,
        height: 97,
        bands: 2,
        kind: SampleKind::F32,
    };
    let v: Vec<f32> = (0..200 * 97 * 2).map(|i| i as f32 * 0.25).collect();
    let opts = CogOptions {
        tile: 64,
        compression: Compression::Lzw,
        ..CogOptions::default()
    };
    let mut w = CogWriter::create(&path, shape, None, opts).unwrap();
    w.write_rows(&RasterData::F32(v.clone())).unwrap();
    w.finish().unwrap();
    let mut dec = Decoder::new(File::open(&path).unwrap()).unwrap();
    assert_eq!(dec.get_tag_u32(Tag::Compression).unwrap(), 5);
    assert_eq!(dec.get_tag_u32(Tag::TileWidth).unwrap(), 64);
    assert!(!dec.more_images(), "200x97 is already <= 256");
    match dec.read_image().unwrap() {
        DecodingResult::F32(got) => assert!(got == v),
        _ => panic!("not f32"),
    }
    let (back, g) = read_image(&path).unwrap();
    assert_eq!(back.data, RasterData::F32(v));
    assert!(g.is_none());
}

fn shape_u8() -> RasterShape {
    RasterShape {
        width: 300,
        height: 40,
        bands: 1,
        kind: SampleKind::U8,
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn more_rows_than_the_height_is_an_error_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.tif");
    let mut w = CogWriter::create(&path, shape_u8(), Some(&geo()), CogOptions::default()).unwrap();
    w.write_rows(&RasterData::U8(vec![1; 300 * 37])).unwrap();
    let e = w.write_rows(&RasterData::U8(vec![1; 300 * 4])).unwrap_err();
    assert!(matches!(e, TilesError::InvalidInput { .. }), "{e}");
    assert!(e.to_string().contains("height 40"), "{e}");
    // Wrong kinds and partial rows are refused too.
    let e = w.write_rows(&RasterData::U16(vec![1; 300])).unwrap_err();
    assert!(matches!(e, TilesError::InvalidInput { .. }), "{e}");
    let e = w.write_rows(&RasterData::U8(vec![1; 299])).unwrap_err();
    assert!(matches!(e, TilesError::InvalidInput { .. }), "{e}");
    drop(w);
    assert!(!path.exists());
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn finishing_with_rows_missing_is_an_error_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.tif");
    let mut w = CogWriter::create(&path, shape_u8(), None, CogOptions::default()).unwrap();
    assert!(!path.exists(), "nothing at the path before finish");
    w.write_rows(&RasterData::U8(vec![1; 300 * 39])).unwrap();
    let e = w.finish().unwrap_err();
    assert!(matches!(e, TilesError::InvalidInput { .. }), "{e}");
    assert!(e.to_string().contains("39 of 40 rows"), "{e}");
    assert!(!path.exists());
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.tif");
    for opts in [
        CogOptions {
            tile: 500,
            ..CogOptions::default()
        },
        CogOptions {
            min_overview: 0,
            ..CogOptions::default()
        },
    ] {
        let e = CogWriter::create(&path, shape_u8(), None, opts)
            .err()
            .unwrap();
        assert!(matches!(e, TilesError::InvalidOption { .. }), "{e}");
    }
    assert!(leftovers(dir.path()).is_empty());
}
