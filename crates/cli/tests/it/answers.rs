//! Hectares and polygons through the real `segfit` binary (issue #14): `--stats` and
//! `--vector` agree with the class map and probabilities written by the same run, computed
//! again here from those rasters; the streamed and in-memory paths give the same answers.

use std::path::Path;

use serde_json::Value;
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// A 3-band u8 scene, UTM zone 48N (EPSG:32648) with 10 m pixels, and a nodata (0) block.
fn scene(w: usize, h: usize) -> (Raster, GeoRef) {
    let data = (0..w * h * 3)
        .map(|s| {
            let (i, b) = (s / 3, s % 3);
            let (x, y) = (i % w, i / w);
            if x < 20 && y < 24 {
                return 0;
            }
            let v = ((x as f64 / 9.0).sin() * (y as f64 / 13.0).cos()) * 110.0
                + 128.0
                + 20.0 * b as f64
                + ((x * 31 + y * 17) % 23) as f64;
            v.clamp(1.0, 255.0) as u8
        })
        .collect();
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_700_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32648]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    };
    (Raster::new(w, h, 3, RasterData::U8(data)).unwrap(), geo)
}

const NODATA_PIXELS: u64 = 20 * 24;

/// Class map and probabilities (`[H·W]`, `[H·W, k]`) as the run wrote them.
fn rasters(dir: &Path, stem: &str) -> (Vec<u8>, Vec<f32>) {
    let (classes, _) = tiles::read_image(&dir.join(format!("{stem}.tif"))).unwrap();
    let (prob, _) = tiles::read_image(&dir.join(format!("{stem}_prob.tif"))).unwrap();
    let (RasterData::U8(c), RasterData::F32(p)) = (classes.data, prob.data) else {
        panic!("unexpected sample types");
    };
    (c, p)
}

fn predict(scene: &Path, out: &Path, extra: &[&str]) {
    let model = varied_model(scene.parent().unwrap());
    let args = [&["--tile", "64", "--probabilities"][..], extra].concat();
    predict_ok(&model, scene, out, &args);
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Twice the signed area of a ring (shoelace).
fn ring_area(ring: &[Value]) -> f64 {
    let pts: Vec<(f64, f64)> = ring
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    pts.windows(2)
        .map(|w| w[0].0 * w[1].1 - w[1].0 * w[0].1)
        .sum::<f64>()
        / 2.0
}

#[test]
fn stats_and_native_polygons_match_the_class_map() {
    let dir = tempfile::tempdir().unwrap();
    let (image, geo) = scene(150, 170);
    let file = dir.path().join("scene.tif");
    tiles::write_geotiff(&file, &image, Some(&geo)).unwrap();
    let out = dir.path().join("out");
    let stats = dir.path().join("stats.json");
    predict(
        &file,
        &out,
        &[
            "--stats",
            s(&stats),
            "--vector",
            "--vector-crs",
            "native",
            "--vector-classes",
            "0,1,2",
        ],
    );
    let (classes, prob) = rasters(&out, "scene");
    let k = 3;
    let report = json(&stats);
    let text = report.to_string();
    assert!(text.contains("32648"), "the report names its CRS: {text}");
    // The class map's own counts and mean probabilities, computed here.
    let mut count = [0u64; 3];
    let mut prob_sum = [0f64; 3];
    let mut nodata = 0u64;
    for (i, &c) in classes.iter().enumerate() {
        if c == 255 {
            nodata += 1;
            continue;
        }
        count[c as usize] += 1;
        prob_sum[c as usize] += prob[i * k + c as usize] as f64;
    }
    assert_eq!(nodata, NODATA_PIXELS);
    assert!(count.iter().filter(|&&n| n > 0).count() >= 2, "{count:?}");
    let classes_json = find_classes(&report);
    for (c, entry) in classes_json.iter().enumerate() {
        let pixels = entry["pixels"].as_u64().unwrap();
        assert_eq!(pixels, count[c], "class {c}: {entry}");
        let ha = entry["area_ha"].as_f64().unwrap();
        assert!((ha - count[c] as f64 * 0.01).abs() < 1e-9, "{entry}");
        let m2 = entry["area_m2"].as_f64().unwrap();
        assert!((m2 - count[c] as f64 * 100.0).abs() < 1e-6, "{entry}");
        if count[c] > 0 {
            let mean = entry["mean_probability"].as_f64().unwrap();
            assert!(
                (mean - prob_sum[c] / count[c] as f64).abs() < 1e-5,
                "{entry}"
            );
        }
    }
    // The polygons cover each class exactly: their areas (in the scene's metres) add up to
    // the class's raster area.
    let layer = json(&out.join("scene.geojson"));
    assert_eq!(layer["type"], "FeatureCollection");
    assert!(
        layer.to_string().contains("EPSG::32648"),
        "native CRS named"
    );
    let mut area = [0f64; 3];
    for f in layer["features"].as_array().unwrap() {
        let class = f["properties"]["class_index"].as_u64().unwrap() as usize;
        let rings = f["geometry"]["coordinates"].as_array().unwrap();
        let outer = ring_area(rings[0].as_array().unwrap());
        assert!(outer > 0.0, "exterior rings are counter-clockwise");
        let holes: f64 = rings[1..]
            .iter()
            .map(|r| ring_area(r.as_array().unwrap()))
            .sum();
        assert!(holes <= 0.0, "holes are clockwise");
        area[class] += outer + holes;
        let ha = f["properties"]["area_ha"].as_f64().unwrap();
        assert!(((outer + holes) / 1e4 - ha).abs() < 1e-6, "{f}");
    }
    for c in 0..3 {
        assert!(
            (area[c] - count[c] as f64 * 100.0).abs() < 1e-3,
            "class {c}: polygons {} m², raster {} m²",
            area[c],
            count[c] * 100
        );
    }
}

/// The per-class entries of the report's first input.
fn find_classes(report: &Value) -> Vec<Value> {
    let input = &report["inputs"][0];
    input["classes"].as_array().unwrap().clone()
}

#[test]
fn streamed_and_in_memory_runs_give_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (image, geo) = scene(140, 130);
    let file = dir.path().join("scene.tif");
    tiles::write_geotiff(&file, &image, Some(&geo)).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (sa, sb) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    predict(&file, &a, &["--stats", s(&sa), "--vector"]);
    // --overlay predicts the scene whole in memory.
    predict(&file, &b, &["--stats", s(&sb), "--vector", "--overlay"]);
    let (csv_a, csv_b) = (
        std::fs::read_to_string(&sa).unwrap(),
        std::fs::read_to_string(&sb).unwrap(),
    );
    assert_eq!(csv_a.replace(s(&a), ""), csv_b.replace(s(&b), ""));
    assert!(csv_a.lines().count() >= 4, "{csv_a}");
    let (ga, gb) = (
        json(&a.join("scene.geojson")),
        json(&b.join("scene.geojson")),
    );
    assert_eq!(ga, gb);
    // WGS84 longitude/latitude: UTM 48N easting 300 km, northing 1700 km is near 103.1°E, 15.4°N.
    for f in ga["features"].as_array().unwrap() {
        assert_ne!(
            f["properties"]["class_index"], 0,
            "class 0 is not vectorised by default"
        );
        for ring in f["geometry"]["coordinates"].as_array().unwrap() {
            for p in ring.as_array().unwrap() {
                let (lon, lat) = (p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
                assert!(
                    (103.0..103.2).contains(&lon) && (15.3..15.5).contains(&lat),
                    "{p}"
                );
            }
        }
    }
    // The overlay outlines the polygons.
    let (overlay, _) = tiles::read_image(&b.join("scene_overlay.png")).unwrap();
    let RasterData::U8(rgb) = overlay.data else {
        panic!()
    };
    let outlined = rgb.chunks(3).filter(|p| p == &[255, 255, 0]).count();
    assert!(
        outlined > 0 && !ga["features"].as_array().unwrap().is_empty(),
        "no outline drawn"
    );
}

#[test]
fn bad_answer_flags_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (image, geo) = scene(64, 64);
    let file = dir.path().join("scene.tif");
    tiles::write_geotiff(&file, &image, Some(&geo)).unwrap();
    let out = dir.path().join("out");
    let model = fixture();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "predict",
            "--model",
            s(&model),
            "--input",
            s(&file),
            "--output",
            s(&out),
        ];
        args.extend_from_slice(extra);
        let o = segfit(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["--stats", "stats.txt"]);
    assert!(err.contains("stats.txt") && err.contains(".csv"), "{err}");
    let err = run(&["--vector", "--vector-classes", "paddy"]);
    assert!(err.contains("paddy") && err.contains("classes"), "{err}");
    let err = run(&["--vector", "--simplify", "-3"]);
    assert!(err.contains("--simplify"), "{err}");
    // A CRS the reprojection cannot handle is an error, never wrong coordinates.
    let mut odd = geo.clone();
    odd.geo_key_directory = Some(vec![1, 1, 0, 1, 3072, 0, 1, 32767]);
    let user = dir.path().join("user.tif");
    tiles::write_geotiff(&user, &image, Some(&odd)).unwrap();
    let o = segfit(&[
        "predict",
        "--model",
        s(&fixture()),
        "--input",
        s(&user),
        "--output",
        s(&out),
        "--vector",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("native"), "{err}");
    assert!(
        !out.join("user.geojson").exists(),
        "nothing written half-way"
    );
}

#[test]
fn an_image_without_georeferencing_gets_pixel_counts_only() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = scene(80, 70);
    let file = dir.path().join("plain.png");
    tiles::write_png(&file, &image).unwrap();
    let stats = dir.path().join("stats.json");
    let out = dir.path().join("out");
    predict_ok(
        &fixture(),
        &file,
        &out,
        &["--tile", "64", "--stats", s(&stats)],
    );
    let report = json(&stats);
    let text = report.to_string();
    assert!(text.contains("pixels only"), "{text}");
    let (mask, _) = tiles::read_image(&out.join("plain.png")).unwrap();
    let RasterData::U8(classes) = mask.data else {
        panic!()
    };
    for (c, entry) in find_classes(&report).iter().enumerate() {
        let n = classes.iter().filter(|&&v| v as usize == c).count() as u64;
        assert_eq!(entry["pixels"].as_u64().unwrap(), n, "{entry}");
        assert!(entry["area_ha"].is_null(), "{entry}");
    }
}
