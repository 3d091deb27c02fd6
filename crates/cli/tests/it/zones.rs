//! `predict --stats … --zones`: hectares per class per district over two scenes in two UTM
//! zones that overlap, computed independently from the written class maps (point in polygon at
//! pixel centres, each pixel counted for the first scene covering it).

use std::collections::BTreeMap;

use geom::{Crs, Reprojector};
use serde_json::json;

use crate::common::*;
use crate::labels::{SIDE, Scene, ll, two_zone_scenes};

/// Even-odd point in polygon.
fn inside(ring: &[(f64, f64)], x: f64, y: f64) -> bool {
    let mut odd = false;
    for w in ring.windows(2) {
        let ((x1, y1), (x2, y2)) = (w[0], w[1]);
        if (y1 > y) != (y2 > y) && x < x1 + (y - y1) * (x2 - x1) / (y2 - y1) {
            odd = !odd;
        }
    }
    odd
}

fn utm(epsg: u32) -> Crs {
    Crs::parse(&format!("EPSG:{epsg}")).unwrap()
}

#[test]
fn zones_sum_hectares_per_class_over_scenes_counting_overlaps_once() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let scenes_dir = t.join("scenes");
    std::fs::create_dir(&scenes_dir).unwrap();
    let scenes: [Scene; 2] = two_zone_scenes(&scenes_dir);
    // Districts in lon/lat: `west` inside A, `middle` across the zone boundary and the
    // overlap of the two scenes (in two pieces), `east` inside B.
    let districts: Vec<(&str, Vec<(f64, f64)>)> = vec![
        (
            "west",
            vec![
                (-50.0, -40.0),
                (301.0, -30.0),
                (290.0, 700.0),
                (-60.0, 690.0),
                (-50.0, -40.0),
            ],
        ),
        (
            "middle",
            vec![
                (301.0, -30.0),
                (702.0, -20.0),
                (705.0, 333.0),
                (295.0, 340.0),
                (301.0, -30.0),
            ],
        ),
        (
            "middle",
            vec![
                (295.0, 340.0),
                (705.0, 333.0),
                (710.0, 710.0),
                (290.0, 700.0),
                (295.0, 340.0),
            ],
        ),
        (
            "east",
            vec![
                (702.0, -20.0),
                (1200.0, -25.0),
                (1210.0, 720.0),
                (710.0, 710.0),
                (702.0, -20.0),
            ],
        ),
    ];
    let features: Vec<_> = districts
        .iter()
        .map(|(name, ring)| {
            let ring: Vec<[f64; 2]> = ring.iter().map(|&(u, v)| ll(u, v)).collect();
            json!({"type": "Feature", "properties": {"name": name},
                   "geometry": {"type": "Polygon", "coordinates": [ring]}})
        })
        .collect();
    let zones = t.join("districts.geojson");
    std::fs::write(
        &zones,
        json!({"type": "FeatureCollection", "features": features}).to_string(),
    )
    .unwrap();
    let out = t.join("pred");
    let stats = t.join("stats.csv");
    predict_ok(
        &varied_model(t),
        &scenes_dir,
        &out,
        &[
            "--tile",
            "64",
            "--probabilities",
            "--stats",
            s(&stats),
            "--zones",
            s(&zones),
            "--zone-field",
            "name",
        ],
    );

    // Independently: per zone and class, the pixels of each class map whose centre lies in
    // the zone, B's pixels inside A's footprint left out.
    let mut expected: BTreeMap<(String, u8), u64> = BTreeMap::new();
    let mut probability: BTreeMap<(String, u8), f64> = BTreeMap::new();
    let a = &scenes[0];
    let b_to_a = Reprojector::new(&utm(scenes[1].epsg), &utm(a.epsg)).unwrap();
    for (i, scene) in scenes.iter().enumerate() {
        let stem = scene.path.file_stem().unwrap().to_str().unwrap();
        let (map, _) = tiles::read_image(&out.join(format!("{stem}.tif"))).unwrap();
        let (prob, _) = tiles::read_image(&out.join(format!("{stem}_prob.tif"))).unwrap();
        let (tiles::RasterData::U8(classes), tiles::RasterData::F32(prob)) = (map.data, prob.data)
        else {
            panic!("a class map is 8-bit, probabilities f32")
        };
        let to = Reprojector::new(&Crs::wgs84(), &utm(scene.epsg)).unwrap();
        let rings: Vec<(&str, Vec<(f64, f64)>)> = districts
            .iter()
            .map(|(n, r)| {
                let r = r
                    .iter()
                    .map(|&(u, v)| {
                        let [lon, lat] = ll(u, v);
                        to.transform(lon, lat).unwrap()
                    })
                    .collect();
                (*n, r)
            })
            .collect();
        for row in 0..SIDE {
            for col in 0..SIDE {
                let (x, y) = (
                    scene.x0 + (col as f64 + 0.5) * 10.0,
                    scene.y0 - (row as f64 + 0.5) * 10.0,
                );
                if i == 1 {
                    let (ax, ay) = b_to_a.transform(x, y).unwrap();
                    let in_a = (a.x0..a.x0 + SIDE as f64 * 10.0).contains(&ax)
                        && (a.y0 - SIDE as f64 * 10.0..a.y0).contains(&ay);
                    if in_a {
                        continue;
                    }
                }
                // Later features win where zones overlap (they do not here).
                if let Some((name, _)) = rings.iter().rev().find(|(_, r)| inside(r, x, y)) {
                    let (i, class) = (row * SIDE + col, classes[row * SIDE + col]);
                    *expected.entry((name.to_string(), class)).or_default() += 1;
                    *probability.entry((name.to_string(), class)).or_default() +=
                        prob[i * 3 + class as usize] as f64;
                }
            }
        }
    }
    let csv = std::fs::read_to_string(&stats).unwrap();
    let mut got: BTreeMap<(String, u8), (u64, f64, f64)> = BTreeMap::new();
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",crs,zone"), "{header}");
    for line in csv.lines().filter(|l| l.starts_with("zones,")) {
        let f: Vec<&str> = line.split(',').collect();
        let (class, pixels, ha, p) = (f[1], f[3], f[5], f[6]);
        let pixels: u64 = pixels.parse().unwrap();
        if pixels > 0 {
            let p: f64 = p.parse().unwrap();
            got.insert(
                (f[f.len() - 1].to_string(), class.parse().unwrap()),
                (pixels, ha.parse().unwrap(), p),
            );
        }
    }
    let expected_ha: BTreeMap<(String, u8), (u64, f64)> = expected
        .iter()
        .map(|(k, &n)| (k.clone(), (n, n as f64 * 100.0 / 10_000.0)))
        .collect();
    let got_ha: BTreeMap<(String, u8), (u64, f64)> = got
        .iter()
        .map(|(k, &(n, ha, _))| (k.clone(), (n, ha)))
        .collect();
    assert_eq!(got_ha, expected_ha, "{csv}");
    for (key, &(n, _, p)) in &got {
        let mean = probability[key] / n as f64;
        assert!(
            (p - mean).abs() < 1e-5,
            "{key:?}: mean probability {p}, expected {mean}"
        );
    }
    // Every district has pixels of more than one class: the model's map is not uniform.
    for zone in ["west", "middle", "east"] {
        assert!(
            expected.keys().filter(|(z, _)| z == zone).count() > 1,
            "{expected:?}"
        );
    }
    // The middle district lies in both scenes, and the overlap is not counted twice.
    let middle: u64 = expected
        .iter()
        .filter(|((z, _), _)| z == "middle")
        .map(|(_, n)| n)
        .sum();
    assert!(middle > 0 && expected.keys().any(|(z, _)| z == "east"));
    // Per-scene totals are still there.
    assert!(csv.lines().any(|l| l.contains("a48.tif,")), "{csv}");
}

#[test]
fn zones_without_a_zone_field_name_the_layer_and_its_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let scenes = two_zone_scenes(t);
    let zones = t.join("d.geojson");
    std::fs::write(
        &zones,
        json!({"type": "FeatureCollection", "features": [{"type": "Feature",
            "properties": {"district": "x"}, "geometry": {"type": "Polygon",
            "coordinates": [[ll(0.0, 0.0), ll(50.0, 0.0), ll(50.0, 50.0), ll(0.0, 0.0)]]}}]})
        .to_string(),
    )
    .unwrap();
    let (out, model, csv) = (t.join("pred"), fixture(), t.join("s.csv"));
    let base = [
        "predict",
        "--model",
        s(&model),
        "--input",
        s(&scenes[0].path),
        "--output",
        s(&out),
        "--stats",
        s(&csv),
        "--zones",
        s(&zones),
    ];
    let e = fails(&base);
    assert!(e.contains("--zone-field") && e.contains("district"), "{e}");
    let e = fails(&[&base[..], &["--zone-field", "name"]].concat());
    assert!(
        e.contains("d.geojson") && e.contains("`name`") && e.contains("district"),
        "{e}"
    );
}
