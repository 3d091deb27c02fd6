//! Nodata through the real `segfit` binary (issue #13, item 2): `predict` marks input pixels
//! that are nodata in every band 255 in the class map and declares 255 (never the input's own
//! nodata, which may be a class) in its `GDAL_NODATA`; probabilities are NaN there. `--nodata`
//! overrides the files' tags in `predict` and `prepare`.

use std::path::{Path, PathBuf};

use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

const W: usize = 40;
const H: usize = 36;
const BORDER: usize = 5;

fn on_border(i: usize) -> bool {
    let (x, y) = (i % W, i / W);
    x < BORDER || y < BORDER || x >= W - BORDER || y >= H - BORDER
}

/// RGB: 0 in every band on the frame; inside, 1..=255, with every 5th pixel 0 in one band
/// (nodata in one band only: an ordinary pixel).
fn framed_image() -> Raster {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let data = (0..W * H * 3)
        .map(|s| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (i, b) = (s / 3, s % 3);
            if on_border(i) || (i % 5 == 0 && b == 1) {
                0
            } else {
                (state % 255 + 1) as u8
            }
        })
        .collect();
    Raster::new(W, H, 3, RasterData::U8(data)).unwrap()
}

fn utm(nodata: Option<f64>) -> GeoRef {
    GeoRef {
        transform: [500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32633]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata,
    }
}

/// A TIFF's `GDAL_NODATA` string and its pixels, read with the `tiff` crate directly.
fn read_tiff(path: &Path) -> (Option<String>, DecodingResult) {
    let mut dec = Decoder::new(palette_as_grey(path)).unwrap();
    let tag = dec
        .find_tag(Tag::Unknown(42113))
        .unwrap()
        .map(|v| v.into_string().unwrap().trim_end_matches('\0').to_string());
    (tag, dec.read_image().unwrap())
}

fn predict(input: &Path, out: &Path, extra: &[&str]) {
    let args = [&["--tile", "32", "--overlap", "8"][..], extra].concat();
    predict_ok(&fixture(), input, out, &args);
}

/// The class map holds 255 exactly on the frame and classes 0..3 elsewhere.
fn check_classes(classes: &[u8]) {
    assert_eq!(classes.len(), W * H);
    for (i, &c) in classes.iter().enumerate() {
        if on_border(i) {
            assert_eq!(c, 255, "frame pixel {i}");
        } else {
            assert!(c < 3, "pixel {i} has class {c}");
        }
    }
}

#[test]
fn predict_marks_nodata_255_declares_it_and_gives_nan_probabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tmp.path().join("scene.tif");
    let image = framed_image();
    tiles::write_geotiff(&scene, &image, Some(&utm(Some(0.0)))).unwrap();
    let out = tmp.path().join("pred");
    predict(&scene, &out, &["--probabilities", "--overlay"]);

    // The class map declares 255, not the input's 0 (which is class 0 here).
    let (tag, pixels) = read_tiff(&out.join("scene.tif"));
    assert_eq!(tag.as_deref(), Some("255"));
    let DecodingResult::U8(classes) = pixels else {
        panic!("u8 class map expected")
    };
    check_classes(&classes);

    let (tag, pixels) = read_tiff(&out.join("scene_prob.tif"));
    assert_eq!(tag.as_deref(), Some("nan"));
    let DecodingResult::F32(prob) = pixels else {
        panic!("f32 probabilities expected")
    };
    for (i, px) in prob.chunks_exact(3).enumerate() {
        if on_border(i) {
            assert!(px.iter().all(|p| p.is_nan()), "frame pixel {i}: {px:?}");
        } else {
            let sum: f32 = px.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "pixel {i}: {px:?}");
        }
    }
    // The overlay leaves the frame black.
    let (overlay, _) = tiles::read_image(&out.join("scene_overlay.png")).unwrap();
    let RasterData::U8(rgb) = &overlay.data else {
        panic!("u8 overlay")
    };
    for (i, px) in rgb.chunks_exact(3).enumerate() {
        assert_eq!(px == [0, 0, 0], on_border(i), "overlay pixel {i}: {px:?}");
    }
}

#[test]
fn predict_nodata_flag_overrides_the_tag_and_without_either_there_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    let image = framed_image();
    let untagged = tmp.path().join("untagged.tif");
    tiles::write_geotiff(&untagged, &image, Some(&utm(None))).unwrap();

    // Neither tag nor flag: no nodata, no 255, no GDAL_NODATA.
    let plain = tmp.path().join("plain");
    predict(&untagged, &plain, &["--probabilities"]);
    let (tag, pixels) = read_tiff(&plain.join("untagged.tif"));
    assert_eq!(tag, None);
    let DecodingResult::U8(classes) = pixels else {
        panic!("u8")
    };
    assert!(classes.iter().all(|&c| c < 3));
    assert_eq!(read_tiff(&plain.join("untagged_prob.tif")).0, None);

    // --nodata on an untagged GeoTIFF.
    let flagged = tmp.path().join("flagged");
    predict(&untagged, &flagged, &["--nodata", "0"]);
    let (tag, pixels) = read_tiff(&flagged.join("untagged.tif"));
    assert_eq!(tag.as_deref(), Some("255"));
    let DecodingResult::U8(classes) = pixels else {
        panic!("u8")
    };
    check_classes(&classes);

    // --nodata overriding a tag that would match the frame: the frame is ordinary pixels.
    let tagged = tmp.path().join("tagged.tif");
    tiles::write_geotiff(&tagged, &image, Some(&utm(Some(0.0)))).unwrap();
    let other = tmp.path().join("other");
    predict(&tagged, &other, &["--nodata", "7"]);
    let (tag, pixels) = read_tiff(&other.join("tagged.tif"));
    assert_eq!(tag.as_deref(), Some("255"));
    let DecodingResult::U8(classes) = pixels else {
        panic!("u8")
    };
    assert!(classes.iter().all(|&c| c < 3));

    // A PNG input: the class PNG holds 255 on the frame too.
    let png = tmp.path().join("photo.png");
    tiles::write_png(&png, &image).unwrap();
    let from_png = tmp.path().join("from_png");
    predict(&png, &from_png, &["--nodata", "0"]);
    check_classes(&tiles::read_mask(&from_png.join("photo.png")).unwrap().data);
}

/// A copy of the fixture whose classifier has 256 outputs.
fn model_with_256_classes(dir: &Path) -> PathBuf {
    let weight = (0..256 * classifier_width())
        .map(|i| i as f32 * 1e-3)
        .collect();
    fixture_with_head(dir, "wide", weight, vec![0.0; 256])
}

#[test]
fn predict_with_nodata_refuses_a_model_that_uses_255_as_a_class() {
    let tmp = tempfile::tempdir().unwrap();
    let model = model_with_256_classes(tmp.path());
    let scene = tmp.path().join("scene.tif");
    tiles::write_geotiff(&scene, &framed_image(), Some(&utm(Some(0.0)))).unwrap();
    for extra in [&[][..], &["--nodata", "0"][..]] {
        let mut args = vec![
            "predict",
            "--model",
            s(&model),
            "--input",
            s(&scene),
            "--output",
            s(tmp.path()),
            "--tile",
            "32",
        ];
        args.extend_from_slice(extra);
        let out = segfit(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error: ")
                && stderr.contains("256 classes")
                && !stderr.contains("panicked"),
            "{stderr}"
        );
        assert!(!tmp.path().join("scene_prob.tif").exists());
    }
}

#[test]
fn prepare_nodata_flag_makes_the_frame_ignore() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::create_dir_all(root.join("masks")).unwrap();
    let labels: Vec<u8> = (0..W * H).map(|i| ((i % W) / 10 % 2) as u8).collect();
    for name in ["a", "b"] {
        tiles::write_png(&root.join(format!("images/{name}.png")), &framed_image()).unwrap();
        tiles::write_mask_png(
            &root.join(format!("masks/{name}.png")),
            &tiles::Mask::new(W, H, labels.clone()).unwrap(),
        )
        .unwrap();
    }
    let out = root.join("out");
    let report = ok(&[
        "prepare",
        "--images",
        s(&root.join("images")),
        "--masks",
        s(&root.join("masks")),
        "--out",
        s(&out),
        "--class",
        "other=0",
        "--class",
        "crop=1",
        "--nodata",
        "0",
    ]);
    assert!(report.contains("nodata"), "{report}");
    for split in ["train", "val"] {
        for entry in std::fs::read_dir(out.join("masks").join(split)).unwrap() {
            let mask = tiles::read_mask(&entry.unwrap().path()).unwrap();
            for (i, &v) in mask.data.iter().enumerate() {
                let want = if on_border(i) { 255 } else { labels[i] };
                assert_eq!(v, want, "pixel {i}");
            }
        }
    }
    let synthetic = segfit(&[
        "prepare",
        "--synthetic",
        "--out",
        s(&root.join("syn")),
        "--nodata",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&synthetic.stderr);
    assert!(
        synthetic.status.code() == Some(1) && stderr.contains("--nodata"),
        "{stderr}"
    );
}
