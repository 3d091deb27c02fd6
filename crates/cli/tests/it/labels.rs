//! `prepare --scenes … --labels`: one WGS84 GeoJSON of fields burned onto two scenes in two UTM
//! zones (48N and 49N, across the 108°E boundary), the masks checked against a direct
//! point-in-polygon test at pixel centres; the audit's figures; bad input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use geom::{Crs, Reprojector};
use serde_json::{Value, json};
use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// Scene side in pixels (10 m pixels) and tile side.
pub const SIDE: usize = 64;
const TILE: usize = 32;

/// A scene: its file, EPSG code and top-left corner.
pub struct Scene {
    pub path: PathBuf,
    pub epsg: u32,
    pub x0: f64,
    pub y0: f64,
}

/// Longitude/latitude of a point `u` metres east and `v` metres south (roughly: the truth is
/// computed from the degrees written, not from the metres) of 107.994°E 15.006°N.
pub fn ll(u: f64, v: f64) -> [f64; 2] {
    [107.994 + u * 9.3e-6, 15.006 - v * 9.05e-6]
}

/// A `SIDE × SIDE` 3-band scene of 10 m pixels in `epsg` whose top-left corner is the 10 m
/// multiple nearest lon/lat `corner`.
pub fn write_scene(dir: &Path, name: &str, epsg: u32, corner: [f64; 2]) -> Scene {
    let to =
        Reprojector::new(&Crs::wgs84(), &Crs::parse(&format!("EPSG:{epsg}")).unwrap()).unwrap();
    let (x, y) = to.transform(corner[0], corner[1]).unwrap();
    let (x0, y0) = ((x / 10.0).round() * 10.0, (y / 10.0).round() * 10.0);
    let geo = GeoRef {
        transform: [x0, 10.0, 0.0, y0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, epsg as u16]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    let pixels: Vec<u8> = (0..SIDE * SIDE * 3).map(|i| (i * 37 % 251) as u8).collect();
    let image = Raster::new(SIDE, SIDE, 3, RasterData::U8(pixels)).unwrap();
    let path = dir.join(name);
    tiles::write_geotiff(&path, &image, Some(&geo)).unwrap();
    Scene { path, epsg, x0, y0 }
}

/// The two scenes: A in UTM 48N west of 108°E, B in UTM 49N east of it; they share about
/// 150 m of ground around the zone boundary.
pub fn two_zone_scenes(dir: &Path) -> [Scene; 2] {
    [
        write_scene(dir, "a48.tif", 32648, ll(0.0, 0.0)),
        write_scene(dir, "b49.tif", 32649, ll(480.0, 0.0)),
    ]
}

/// A field: its crop and polygons (rings of `(u, v)` metres, first the outer ring).
struct Field {
    crop: &'static str,
    parts: Vec<Vec<Vec<(f64, f64)>>>,
}

fn rect(u0: f64, v0: f64, u1: f64, v1: f64) -> Vec<(f64, f64)> {
    vec![(u0, v0), (u1, v0), (u1, v1), (u0, v1), (u0, v0)]
}

fn fields() -> Vec<Field> {
    let f = |crop, parts| Field { crop, parts };
    vec![
        // #0 a rotated field with a hole
        f(
            "rice",
            vec![vec![
                vec![
                    (60.0, 100.0),
                    (110.0, 55.0),
                    (160.0, 105.0),
                    (105.0, 150.0),
                    (60.0, 100.0),
                ],
                rect(95.0, 90.0, 125.0, 115.0),
            ]],
        ),
        // #1
        f("paddy", vec![vec![rect(203.0, 61.0, 331.0, 149.0)]]),
        // #2 rice, overlapped by the later #3 (other)
        f("rice", vec![vec![rect(52.0, 303.0, 401.0, 417.0)]]),
        f("other", vec![vec![rect(297.0, 352.0, 452.0, 503.0)]]),
        // #4 a multipolygon, its second part where the scenes overlap
        f(
            "rice",
            vec![
                vec![rect(421.0, 52.0, 473.0, 91.0)],
                vec![rect(522.0, 83.0, 561.0, 133.0)],
            ],
        ),
        // #5 across the zone boundary and A's east edge
        f("paddy", vec![vec![rect(556.0, 203.0, 703.0, 297.0)]]),
        // #6 a crop no class takes
        f("maize", vec![vec![rect(101.0, 505.0, 203.0, 561.0)]]),
        // #7 outside every scene
        f("rice", vec![vec![rect(2003.0, 2001.0, 2101.0, 2099.0)]]),
        // #8 across B's south edge
        f("other", vec![vec![rect(803.0, 597.0, 903.0, 703.0)]]),
        // #9 a sliver narrower than a pixel
        f(
            "rice",
            vec![vec![vec![
                (901.0, 101.0),
                (1003.0, 104.0),
                (902.0, 105.5),
                (901.0, 101.0),
            ]]],
        ),
        // #10 across A's west edge
        f("paddy", vec![vec![rect(-33.0, 583.0, 41.0, 622.0)]]),
    ]
}

fn geojson_of(fields: &[Field]) -> Value {
    let features: Vec<Value> = fields
        .iter()
        .map(|f| {
            let parts: Vec<Value> = f
                .parts
                .iter()
                .map(|rings| {
                    json!(
                        rings
                            .iter()
                            .map(|r| r.iter().map(|&(u, v)| json!(ll(u, v))).collect::<Vec<_>>())
                            .collect::<Vec<_>>()
                    )
                })
                .collect();
            json!({"type": "Feature", "properties": {"crop": f.crop, "farmer": "x"},
                   "geometry": {"type": "MultiPolygon", "coordinates": parts}})
        })
        .collect();
    json!({"type": "FeatureCollection", "features": features})
}

/// Even-odd point-in-polygon over all rings of `rings` (already in the scene's CRS), and
/// whether the point lies within 1 mm of an edge (then GDAL's tie rules decide; the test
/// wants none of those).
fn inside(rings: &[Vec<(f64, f64)>], x: f64, y: f64) -> (bool, bool) {
    let (mut odd, mut near) = (false, false);
    for r in rings {
        for w in r.windows(2) {
            let ((x1, y1), (x2, y2)) = (w[0], w[1]);
            if (y1 > y) != (y2 > y) && x < x1 + (y - y1) * (x2 - x1) / (y2 - y1) {
                odd = !odd;
            }
            let (dx, dy) = (x2 - x1, y2 - y1);
            let t = (((x - x1) * dx + (y - y1) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
            near |= (x1 + t * dx - x).hypot(y1 + t * dy - y) < 1e-3;
        }
    }
    (odd, near)
}

/// The expected mask of `scene`: per pixel the class of the feature that wins at its centre
/// (`rank` orders classes, higher wins; later features win ties), `background` elsewhere,
/// 255 outside `extent` (rings in lon/lat) when given.
fn expected_mask(
    scene: &Scene,
    fields: &[Field],
    class_of: &dyn Fn(&str) -> Option<u8>,
    rank: &dyn Fn(u8) -> u8,
    background: u8,
    extent: Option<&[(f64, f64)]>,
) -> Vec<u8> {
    let to = Reprojector::new(
        &Crs::wgs84(),
        &Crs::parse(&format!("EPSG:{}", scene.epsg)).unwrap(),
    )
    .unwrap();
    let project = |ring: &[(f64, f64)]| -> Vec<(f64, f64)> {
        ring.iter()
            .map(|&(u, v)| {
                let [lon, lat] = ll(u, v);
                to.transform(lon, lat).unwrap()
            })
            .collect()
    };
    let polys: Vec<(u8, Vec<Vec<(f64, f64)>>)> = fields
        .iter()
        .filter_map(|f| {
            let class = class_of(f.crop)?;
            let rings = f.parts.iter().flatten().map(|r| project(r)).collect();
            Some((class, rings))
        })
        .collect();
    let extent = extent.map(|r| vec![project(r)]);
    let mut out = vec![background; SIDE * SIDE];
    for row in 0..SIDE {
        for col in 0..SIDE {
            let (x, y) = (
                scene.x0 + (col as f64 + 0.5) * 10.0,
                scene.y0 - (row as f64 + 0.5) * 10.0,
            );
            let mut best: Option<u8> = None;
            for (class, rings) in &polys {
                let (hit, near) = inside(rings, x, y);
                assert!(
                    !near,
                    "pixel ({col}, {row}) of {:?} lies on an edge",
                    scene.path
                );
                if hit && best.is_none_or(|b| rank(*class) >= rank(b)) {
                    best = Some(*class);
                }
            }
            let mut v = best.unwrap_or(background);
            if let Some(e) = &extent {
                let (hit, near) = inside(e, x, y);
                assert!(!near);
                if !hit {
                    v = 255;
                }
            }
            out[row * SIDE + col] = v;
        }
    }
    out
}

/// Every tile's mask in `data`, placed back on its scene: `scene path → SIDE² values` (256
/// where no tile was written).
fn tiled_masks(data: &Path) -> BTreeMap<PathBuf, Vec<u16>> {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(data.join("dataset.json")).unwrap()).unwrap();
    let mut out: BTreeMap<PathBuf, Vec<u16>> = BTreeMap::new();
    for t in meta["tiles"].as_array().unwrap() {
        let scene = PathBuf::from(t["scene"].as_str().unwrap());
        let (x, y) = (
            t["x"].as_u64().unwrap() as usize,
            t["y"].as_u64().unwrap() as usize,
        );
        let path = data
            .join("masks")
            .join(t["split"].as_str().unwrap())
            .join(format!("{}.png", t["id"].as_str().unwrap()));
        let mask = tiles::read_mask(&path).unwrap();
        let full = out.entry(scene).or_insert_with(|| vec![256; SIDE * SIDE]);
        for j in 0..TILE {
            for i in 0..TILE {
                full[(y + j) * SIDE + x + i] = mask.data[j * TILE + i] as u16;
            }
        }
    }
    out
}

fn crop_class(crop: &str) -> Option<u8> {
    match crop {
        "other" => Some(0),
        "rice" | "paddy" => Some(1),
        _ => None,
    }
}

/// What the audit line of a scene says for `class`: `N px H ha` from the expected mask.
fn burned(expected: &[u8], class: u8) -> String {
    let n = expected.iter().filter(|&&v| v == class).count();
    format!("{n} px {:.2} ha", n as f64 * 100.0 / 10_000.0)
}

#[test]
fn fields_in_wgs84_burn_onto_scenes_in_two_utm_zones_as_point_in_polygon_says() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let scenes = two_zone_scenes(t);
    let fields = fields();
    let layer = t.join("fields.geojson");
    std::fs::write(&layer, geojson_of(&fields).to_string()).unwrap();
    let data = t.join("data");
    let out = ok(&[
        "prepare",
        "--scenes",
        s(&scenes[0].path),
        s(&scenes[1].path),
        "--labels",
        s(&layer),
        "--class-field",
        "crop",
        "--class",
        "outer=other",
        "--class",
        "rice_paddy=rice,paddy",
        "--background",
        "outer",
        "--tile-size",
        "32",
        "--out",
        s(&data),
    ]);
    let masks = tiled_masks(&data);
    assert_eq!(masks.len(), 2, "{out}");
    for scene in &scenes {
        // Burned alone (no background yet) to count the pixels features cover.
        let only_features = expected_mask(scene, &fields, &crop_class, &|_| 0, 200, None);
        let expected: Vec<u16> = only_features
            .iter()
            .map(|&v| if v == 200 { 0 } else { v as u16 })
            .collect();
        let got = &masks[&scene.path];
        assert!(got.iter().all(|&v| v != 256), "every pixel is in a tile");
        let wrong = got.iter().zip(&expected).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "{} pixels differ in {:?}", wrong, scene.path);
        assert!(expected.contains(&1) && expected.iter().filter(|&&v| v == 0).count() > 0);
        // The audit: pixels and hectares burned per class, counted independently.
        let line = format!(
            "outer {}; rice_paddy {}; unlabelled (outer) {}",
            burned(&only_features, 0),
            burned(&only_features, 1),
            burned(&only_features, 200)
        );
        assert!(out.contains(&line), "expected `{line}` in:\n{out}");
    }
    // Both zones hold parts of the boundary field #5 and the multipolygon #4.
    assert!(out.contains("per class: outer 2, rice_paddy 8"), "{out}");
    assert!(out.contains("`maize` (1)"), "{out}");
    assert!(
        out.contains("1 (#7) features lie outside every scene"),
        "{out}"
    );
}

#[test]
fn the_label_extent_ignores_unsurveyed_pixels_and_priority_overrides_file_order() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let scenes = two_zone_scenes(t);
    let fields = fields();
    let layer = t.join("fields.geojson");
    std::fs::write(&layer, geojson_of(&fields).to_string()).unwrap();
    let area = [
        (10.0, 20.0),
        (700.0, 3.0),
        (690.0, 460.0),
        (5.0, 470.0),
        (10.0, 20.0),
    ];
    let extent = t.join("surveyed.geojson");
    let ring: Vec<[f64; 2]> = area.iter().map(|&(u, v)| ll(u, v)).collect();
    std::fs::write(
        &extent,
        json!({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
            "geometry": {"type": "Polygon", "coordinates": [ring]}}]})
        .to_string(),
    )
    .unwrap();
    let data = t.join("data");
    ok(&[
        "prepare",
        "--scenes",
        s(&scenes[0].path),
        s(&scenes[1].path),
        "--labels",
        s(&layer),
        "--class-field",
        "crop",
        "--class",
        "outer=other",
        "--class",
        "rice_paddy=rice,paddy",
        "--background",
        "outer",
        "--label-extent",
        s(&extent),
        "--priority",
        "rice_paddy",
        "--max-empty-fraction",
        "1",
        "--tile-size",
        "32",
        "--out",
        s(&data),
    ]);
    let masks = tiled_masks(&data);
    for scene in &scenes {
        let rank = |c: u8| u8::from(c == 1);
        let expected = expected_mask(scene, &fields, &crop_class, &rank, 0, Some(&area));
        let got = &masks[&scene.path];
        let wrong = (0..SIDE * SIDE)
            .filter(|&i| got[i] != 256 && got[i] != expected[i] as u16)
            .count();
        assert_eq!(wrong, 0, "{:?}", scene.path);
        assert!(expected.contains(&255) && expected.contains(&1));
    }
    // Where rice (#2) and the later other (#3) overlap, rice won.
    let a = &masks[&scenes[0].path];
    let file_order = expected_mask(&scenes[0], &fields, &crop_class, &|_| 0, 0, Some(&area));
    assert!((0..SIDE * SIDE).any(|i| a[i] == 1 && file_order[i] == 0));
}

/// Runs `prepare` on one scene and `layer` with the usual classes plus `extra`; the error.
fn prepare_fails(t: &Path, layer: &Path, extra: &[&str]) -> String {
    let scene = write_scene(t, "one.tif", 32648, ll(0.0, 0.0));
    let out = t.join("out");
    let base = [
        "prepare",
        "--scenes",
        s(&scene.path),
        "--labels",
        s(layer),
        "--tile-size",
        "32",
        "--out",
        s(&out),
    ];
    let e = fails(&[&base[..], extra].concat());
    assert!(!out.exists(), "nothing is written on bad input: {e}");
    e
}

const CLASSES: [&str; 6] = [
    "--class",
    "outer",
    "--class",
    "rice_paddy=rice",
    "--background",
    "outer",
];

#[test]
fn bad_label_layers_get_one_line_naming_the_layer_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let layer = t.join("fields.geojson");
    std::fs::write(&layer, geojson_of(&fields()).to_string()).unwrap();

    let e = prepare_fails(
        t,
        &layer,
        &[&["--class-field", "cropp"][..], &CLASSES].concat(),
    );
    assert!(
        e.contains("fields.geojson") && e.contains("`cropp`") && e.contains("crop, farmer"),
        "{e}"
    );

    let e = prepare_fails(
        t,
        &layer,
        &["--class-field", "crop", "--class", "rice_paddy=rice"],
    );
    assert!(
        e.contains("--background") && e.contains("--unlabelled ignore"),
        "{e}"
    );

    let e = prepare_fails(
        t,
        &layer,
        &[
            "--class-field",
            "crop",
            "--class",
            "outer",
            "--class",
            "rice_paddy=wheat",
            "--unlabelled",
            "ignore",
        ],
    );
    assert!(
        e.contains("no feature") && e.contains("`rice` (5)") && e.contains("`maize` (1)"),
        "{e}"
    );

    let e = prepare_fails(t, &layer, &CLASSES);
    assert!(e.contains("--class-field"), "{e}");

    let empty = t.join("empty.geojson");
    std::fs::write(&empty, r#"{"type": "FeatureCollection", "features": []}"#).unwrap();
    let e = prepare_fails(
        t,
        &empty,
        &["--class", "rice_paddy=*", "--unlabelled", "ignore"],
    );
    assert!(
        e.contains("empty.geojson") && e.contains("no polygon features"),
        "{e}"
    );

    let text = t.join("fields.csv");
    std::fs::write(&text, "a,b\n").unwrap();
    let e = prepare_fails(
        t,
        &text,
        &["--class", "rice_paddy=*", "--unlabelled", "ignore"],
    );
    assert!(e.contains("fields.csv") && e.contains(".shp"), "{e}");

    let e = prepare_fails(
        t,
        &layer,
        &[
            "--class",
            "rice_paddy=*",
            "--unlabelled",
            "ignore",
            "--labels-crs",
            "EPSG:99999",
        ],
    );
    assert!(e.contains("--labels-crs") && e.contains("99999"), "{e}");
}

#[test]
fn a_shapefile_without_prj_needs_labels_crs_and_bad_geometries_are_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let scene = write_scene(t, "one.tif", 32648, ll(0.0, 0.0));
    // Fields in UTM 48N metres, written without a .prj; outer rings clockwise.
    let (x0, y0) = (scene.x0, scene.y0);
    let square = |u0: f64, v0: f64, s: f64| {
        shapefile::Polygon::new(shapefile::PolygonRing::Outer(vec![
            shapefile::Point::new(x0 + u0, y0 - v0),
            shapefile::Point::new(x0 + u0 + s, y0 - v0),
            shapefile::Point::new(x0 + u0 + s, y0 - v0 - s),
            shapefile::Point::new(x0 + u0, y0 - v0 - s),
            shapefile::Point::new(x0 + u0, y0 - v0),
        ]))
    };
    let bowtie = shapefile::Polygon::new(shapefile::PolygonRing::Outer(vec![
        shapefile::Point::new(x0 + 300.0, y0 - 300.0),
        shapefile::Point::new(x0 + 300.0, y0 - 400.0),
        shapefile::Point::new(x0 + 400.0, y0 - 300.0),
        shapefile::Point::new(x0 + 400.0, y0 - 400.0),
        shapefile::Point::new(x0 + 300.0, y0 - 300.0),
    ]));
    let shp = t.join("fields.shp");
    let table = shapefile::dbase::TableWriterBuilder::new()
        .add_character_field("crop".try_into().unwrap(), 10);
    let mut w = shapefile::Writer::from_path(&shp, table).unwrap();
    for (poly, crop) in [
        (square(20.0, 20.0, 100.0), "rice"),
        (bowtie, "rice"),
        (square(150.0, 20.0, 80.0), "fallow"),
    ] {
        let mut record = shapefile::dbase::Record::default();
        record.insert(
            "crop".into(),
            shapefile::dbase::FieldValue::Character(Some(crop.into())),
        );
        w.write_shape_and_record(&poly, &record).unwrap();
    }
    drop(w);
    let e = prepare_fails(
        t,
        &shp,
        &[
            "--class-field",
            "crop",
            "--class",
            "outer",
            "--class",
            "rice_paddy=rice",
            "--background",
            "outer",
        ],
    );
    assert!(
        e.contains("fields.shp") && e.contains("--labels-crs"),
        "{e}"
    );

    let out = ok(&[
        "prepare",
        "--scenes",
        s(&scene.path),
        "--labels",
        s(&shp),
        "--labels-crs",
        "EPSG:32648",
        "--class-field",
        "crop",
        "--class",
        "outer",
        "--class",
        "rice_paddy=rice",
        "--background",
        "outer",
        "--tile-size",
        "16",
        "--out",
        s(&t.join("data")),
    ]);
    assert!(out.contains("1 (#1) features self-intersect"), "{out}");
    assert!(out.contains("`fallow` (1)"), "{out}");
    assert!(out.contains("per class: outer 0, rice_paddy 2"), "{out}");
}
