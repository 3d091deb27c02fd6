//! What GIS tools see of `segfit predict`'s rasters (issue #30): the class map is a strict
//! COG with the overlays' colours as its TIFF palette and the model's class names as GDAL
//! category names (PAM sidecar) and a QGIS style; `--probabilities u8` stores round(p × 254)
//! with 255 on nodata and a 1/254 scale, within 0.5/254 of the float32 probabilities of the
//! same run.

use std::path::Path;

use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

const W: usize = 70;
const H: usize = 50;

/// RGB noise with a nodata (0 in every band) left column band.
fn scene(path: &Path) {
    let data = (0..W * H * 3)
        .map(|i| {
            if (i / 3) % W < 4 {
                0
            } else {
                ((i * 7919) % 251 + 1) as u8
            }
        })
        .collect();
    let image = Raster::new(W, H, 3, RasterData::U8(data)).unwrap();
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_600_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32651]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    };
    tiles::write_geotiff(path, &image, Some(&geo)).unwrap();
}

fn text_tag(dec: &mut Decoder<impl std::io::Read + std::io::Seek>, code: u16) -> String {
    dec.get_tag(Tag::Unknown(code))
        .unwrap()
        .into_string()
        .unwrap()
        .trim_end_matches('\0')
        .to_string()
}

#[test]
fn the_class_map_is_a_cog_with_the_overlay_palette_and_class_names() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("scene.tif");
    scene(&input);
    let out = tmp.path().join("pred");
    predict_ok(
        &fixture(),
        &input,
        &out,
        &["--tile", "32", "--overlap", "8"],
    );
    let map = out.join("scene.tif");
    let bytes = std::fs::read(&map).unwrap();
    assert!(bytes[8..].starts_with(b"GDAL_STRUCTURAL_METADATA_SIZE=000140 bytes\nLAYOUT=IFDS"));

    let mut dec = Decoder::new(std::fs::File::open(&map).unwrap()).unwrap();
    assert_eq!(dec.get_tag_u32(Tag::PhotometricInterpretation).unwrap(), 3);
    let cmap = dec.get_tag_u16_vec(Tag::ColorMap).unwrap();
    for c in 0..3u8 {
        let rgb = infer::class_colour(c);
        let got = [0, 1, 2].map(|k| cmap[k * 256 + c as usize]);
        assert_eq!(got, rgb.map(|v| v as u16 * 257), "class {c}");
    }
    // The fixture's id2label names.
    let pam = std::fs::read_to_string(out.join("scene.tif.aux.xml")).unwrap();
    let names: Vec<&str> = pam
        .split("<Category>")
        .skip(1)
        .map(|s| s.split('<').next().unwrap())
        .collect();
    assert_eq!(names, ["class_0", "class_1", "class_2"]);
    let qml = std::fs::read_to_string(out.join("scene.qml")).unwrap();
    assert!(qml.contains("label=\"class_2\""), "{qml}");
    // The pixels are still the class indices (nodata 255 on the left band).
    let (classes, _) = tiles::read_image(&map).unwrap();
    let RasterData::U8(c) = classes.data else {
        panic!("u8 class map")
    };
    for (i, &v) in c.iter().enumerate() {
        assert_eq!(v == 255, i % W < 4, "pixel {i}: {v}");
    }
}

#[test]
fn u8_probabilities_are_the_f32_ones_within_half_a_step_and_scaled() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("scene.tif");
    scene(&input);
    let (f32_dir, u8_dir) = (tmp.path().join("f32"), tmp.path().join("u8"));
    let args = ["--tile", "32", "--overlap", "8", "--probabilities"];
    predict_ok(&fixture(), &input, &f32_dir, &args);
    predict_ok(&fixture(), &input, &u8_dir, &[&args[..], &["u8"]].concat());

    let mut dec =
        Decoder::new(std::fs::File::open(u8_dir.join("scene_prob.tif")).unwrap()).unwrap();
    assert_eq!(text_tag(&mut dec, 42113), "255");
    let meta = text_tag(&mut dec, 42112);
    for b in 0..3 {
        let scale = format!(
            "<Item name=\"SCALE\" sample=\"{b}\" role=\"scale\">{:?}</Item>",
            1.0 / 254.0
        );
        assert!(meta.contains(&scale), "{meta}");
        let name = format!("role=\"description\">class_{b}</Item>");
        assert!(meta.contains(&name), "{meta}");
    }
    let DecodingResult::U8(q) = dec.read_image().unwrap() else {
        panic!("u8 probabilities")
    };
    let (p, _) = tiles::read_image(&f32_dir.join("scene_prob.tif")).unwrap();
    let RasterData::F32(p) = p.data else {
        panic!("f32 probabilities")
    };
    assert_eq!(q.len(), p.len());
    let mut worst = 0f32;
    for (i, (&q, &p)) in q.iter().zip(&p).enumerate() {
        if (i / 3) % W < 4 {
            assert!(q == 255 && p.is_nan(), "nodata pixel {}: {q} {p}", i / 3);
            continue;
        }
        assert!(q <= 254);
        worst = worst.max((q as f32 / 254.0 - p).abs());
    }
    assert!(worst <= 0.5 / 254.0 + 1e-6, "worst error {worst}");
    assert!(worst > 0.0, "the quantisation is visible somewhere");
}

#[test]
fn u8_probabilities_of_a_png_and_a_bad_format() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("photo.png");
    let rgb = (0..40 * 30 * 3).map(|i| (i % 253) as u8).collect();
    tiles::write_png(
        &input,
        &Raster::new(40, 30, 3, RasterData::U8(rgb)).unwrap(),
    )
    .unwrap();
    let out = tmp.path().join("pred");
    predict_ok(
        &fixture(),
        &input,
        &out,
        &["--tile", "32", "--probabilities", "u8"],
    );
    let (prob, _) = tiles::read_image(&out.join("photo_prob.tif")).unwrap();
    let RasterData::U8(q) = prob.data else {
        panic!("u8 probabilities")
    };
    // Each pixel's three quantised probabilities sum to 254 up to their rounding.
    for px in q.chunks_exact(3) {
        let sum: i32 = px.iter().map(|&v| v as i32).sum();
        assert!((sum - 254).abs() <= 2, "{px:?}");
    }

    let bad = segfit(&[
        "predict",
        "--model",
        s(&fixture()),
        "--input",
        s(&input),
        "--output",
        s(&out),
        "--probabilities",
        "f16",
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("f16") && err.contains("u8"), "{err}");
}
