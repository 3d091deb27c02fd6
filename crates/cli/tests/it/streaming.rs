//! Scene-scale prediction through the real `segfit` binary (issue #13, item 1): a GeoTIFF
//! streams window row by window row into tiled, Deflate-compressed GeoTIFFs with internal
//! overviews, and gives exactly the class map (and probabilities) of the in-memory path.

use std::path::Path;

use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// A 3-band u16 scene with smooth structure and a nodata (0) corner block, georeferenced.
fn scene(w: usize, h: usize) -> (Raster, GeoRef) {
    let data = (0..w * h * 3)
        .map(|s| {
            let (i, b) = (s / 3, s % 3);
            let (x, y) = (i % w, i / w);
            if x < 20 && y < 24 {
                return 0;
            }
            let v = ((x as f64 / 17.0).sin() + (y as f64 / 23.0).cos()) * 9000.0
                + 20000.0
                + 3000.0 * b as f64
                + ((x * 31 + y * 17) % 97) as f64 * 40.0;
            v as u16
        })
        .collect();
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_700_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32648]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    };
    (Raster::new(w, h, 3, RasterData::U16(data)).unwrap(), geo)
}

struct Ifd {
    width: u32,
    height: u32,
    tile: Option<u32>,
    compression: u16,
    subfile: u32,
    nodata: Option<String>,
    pixels: DecodingResult,
}

/// Every IFD of a TIFF, read with the `tiff` crate directly.
fn ifds(path: &Path) -> Vec<Ifd> {
    let mut dec = Decoder::new(palette_as_grey(path)).unwrap();
    let mut out = Vec::new();
    loop {
        let (width, height) = dec.dimensions().unwrap();
        out.push(Ifd {
            width,
            height,
            tile: dec
                .find_tag(Tag::TileWidth)
                .unwrap()
                .map(|v| v.into_u32().unwrap()),
            compression: dec.get_tag_u32(Tag::Compression).unwrap() as u16,
            subfile: dec
                .find_tag(Tag::NewSubfileType)
                .unwrap()
                .map_or(0, |v| v.into_u32().unwrap()),
            nodata: dec
                .find_tag(Tag::Unknown(42113))
                .unwrap()
                .map(|v| v.into_string().unwrap().trim_end_matches('\0').to_string()),
            pixels: dec.read_image().unwrap(),
        });
        if !dec.more_images() {
            break;
        }
        dec.next_image().unwrap();
    }
    out
}

fn predict(scene: &Path, out: &Path, extra: &[&str]) {
    let args = [
        &["--tile", "64", "--overlap", "16", "--probabilities"][..],
        extra,
    ]
    .concat();
    predict_ok(&fixture(), scene, out, &args);
}

#[test]
fn streamed_scene_equals_the_in_memory_path_and_is_a_tiled_geotiff_with_overviews() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (300, 530);
    let (image, geo) = scene(w, h);
    let input = dir.path().join("scene.tif");
    tiles::write_geotiff(&input, &image, Some(&geo)).unwrap();
    let (streamed, whole) = (dir.path().join("streamed"), dir.path().join("whole"));
    predict(&input, &streamed, &[]);
    // --overlay needs the whole scene: that is the in-memory path.
    predict(&input, &whole, &["--overlay"]);

    assert!(
        !streamed.join("scene_overlay.png").exists() && whole.join("scene_overlay.png").is_file()
    );
    for name in ["scene.tif", "scene_prob.tif"] {
        let (a, b) = (ifds(&streamed.join(name)), ifds(&whole.join(name)));
        assert_eq!(a.len(), b.len(), "{name}: IFD count");
        for (x, y) in a.iter().zip(&b) {
            let same = match (&x.pixels, &y.pixels) {
                (DecodingResult::U8(p), DecodingResult::U8(q)) => p == q,
                (DecodingResult::F32(p), DecodingResult::F32(q)) => {
                    p.iter().zip(q).all(|(u, v)| u.to_bits() == v.to_bits())
                }
                _ => false,
            };
            assert!(
                same,
                "{name}: {}x{} differs between the paths",
                x.width, x.height
            );
        }
    }

    let classes = ifds(&streamed.join("scene.tif"));
    let full = &classes[0];
    assert_eq!((full.width, full.height), (w as u32, h as u32));
    assert_eq!(
        (full.tile, full.compression, full.subfile),
        (Some(512), 8, 0)
    );
    assert_eq!(
        full.nodata.as_deref(),
        Some("255"),
        "class map declares 255, not the input's 0"
    );
    let DecodingResult::U8(px) = &full.pixels else {
        panic!("class map is u8")
    };
    for y in 0..h {
        for x in 0..w {
            let c = px[y * w + x];
            if x < 20 && y < 24 {
                assert_eq!(c, 255, "nodata corner at ({x}, {y})");
            } else {
                assert!(c < 3, "class {c} at ({x}, {y})");
            }
        }
    }
    // Overviews: halving until the larger side is at most 256, each a reduced-resolution IFD
    // whose pixels are the top-left pixel of each 2x2 block (class maps are never averaged).
    let sizes: Vec<(u32, u32)> = classes[1..].iter().map(|o| (o.width, o.height)).collect();
    assert_eq!(sizes, [(150, 265), (75, 133)]);
    let DecodingResult::U8(ov) = &classes[1].pixels else {
        panic!("overview is u8")
    };
    assert!(
        classes[1..]
            .iter()
            .all(|o| o.subfile == 1 && o.compression == 8)
    );
    for y in 0..265 {
        for x in 0..150 {
            assert_eq!(
                ov[y * 150 + x],
                px[2 * y * w + 2 * x],
                "overview ({x}, {y})"
            );
        }
    }
    // The georeferencing GIS tools see is the input's.
    let (_, out_geo) = tiles::read_image(&streamed.join("scene.tif")).unwrap();
    let out_geo = out_geo.expect("georeferenced");
    assert_eq!(out_geo.transform, geo.transform);
    assert_eq!(out_geo.geo_key_directory, geo.geo_key_directory);
    let prob = ifds(&streamed.join("scene_prob.tif"));
    assert_eq!(prob[0].nodata.as_deref(), Some("nan"));
}

/// The u8 class map of a predicted scene.
fn class_map(path: &Path) -> Vec<u8> {
    match ifds(path).swap_remove(0).pixels {
        DecodingResult::U8(px) => px,
        _ => panic!("{}: class map is u8", path.display()),
    }
}

/// `segfit predict` of the fixture on `input` into `out`, with `extra` flags.
fn predict_with(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let model = fixture();
    let base = [
        "predict",
        "--model",
        s(&model),
        "--input",
        s(input),
        "--output",
        s(out),
    ];
    segfit(&[&base[..], extra].concat())
}

#[test]
fn a_memory_budget_picks_the_batch_and_the_batch_does_not_change_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let (image, geo) = scene(260, 300);
    let input = dir.path().join("scene.tif");
    tiles::write_geotiff(&input, &image, Some(&geo)).unwrap();
    let (one, budget) = (dir.path().join("one"), dir.path().join("budget"));
    predict(&input, &one, &["--batch-size", "1"]);
    let windows = ["--tile", "64", "--overlap", "16", "--probabilities"];
    let out = predict_with(
        &input,
        &budget,
        &[&windows[..], &["--memory-budget", "2GiB"]].concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The tiny fixture's windows are small: the budget allows a whole row of windows, the
    // most a batch holds (6 across 260 pixels).
    assert!(
        stderr.contains("batch of 6 windows: predicted peak") && stderr.contains("of the 2 GiB"),
        "{stderr}"
    );
    assert_eq!(
        class_map(&one.join("scene.tif")),
        class_map(&budget.join("scene.tif"))
    );
    // A budget too small for one window is one error naming the flag; --batch-size and
    // --memory-budget exclude each other.
    let fail = |out: &str, extra: &[&str]| {
        let run = predict_with(&input, &dir.path().join(out), extra);
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.trim_end().lines().count() == 1,
            "{stderr}"
        );
        stderr
    };
    let e = fail("none", &["--memory-budget", "1MiB"]);
    assert!(e.contains("--memory-budget: one window of"), "{e}");
    let e = fail("both", &["--batch-size", "2", "--memory-budget", "1GiB"]);
    assert!(e.contains("'--batch-size <N>' cannot be used with"), "{e}");
}

#[test]
fn bf16_says_how_it_runs_and_without_the_instructions_is_f32() {
    let dir = tempfile::tempdir().unwrap();
    let (image, geo) = scene(200, 180);
    let input = dir.path().join("scene.tif");
    tiles::write_geotiff(&input, &image, Some(&geo)).unwrap();
    let (f32_out, bf16_out) = (dir.path().join("f32"), dir.path().join("bf16"));
    predict(&input, &f32_out, &[]);
    let extra = ["--tile", "64", "--overlap", "16", "--precision", "bf16"];
    let run = predict_with(&input, &bf16_out, &extra);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("--precision bf16"), "{stderr}");
    let (a, b) = (
        class_map(&f32_out.join("scene.tif")),
        class_map(&bf16_out.join("scene.tif")),
    );
    if segformer::cpu_has_bf16_kernels() {
        // bf16 products round: most pixels keep their class.
        let agree = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(agree * 100 >= 95 * a.len(), "{agree} of {} agree", a.len());
    } else {
        assert!(stderr.contains("no AVX512-BF16"), "{stderr}");
        assert_eq!(a, b, "without AVX512-BF16, bf16 computes in f32");
    }
}
