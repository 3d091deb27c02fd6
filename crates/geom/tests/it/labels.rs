//! Labels and zones: class mapping, unmapped values, overlaps, background/ignore, the
//! survey extent, layers in another CRS than the scene, and the errors a user meets.

use geo_types::MultiPolygon;
use geom::{
    ClassMapping, Crs, Feature, GeomError, IGNORE, LabelOptions, Labels, Layer, Overlap, SceneGrid,
    SceneZones, Unlabelled, Zones, read_geojson,
};

use crate::{multi, rect, show};

fn utm() -> Crs {
    Crs::parse("EPSG:32648").unwrap()
}

fn feature(i: usize, g: MultiPolygon<f64>, crop: Option<&str>) -> Feature {
    Feature {
        id: format!("#{i}"),
        geometry: g,
        attributes: vec![crop.map(str::to_string)],
    }
}

/// A 6×2 scene of 1 m pixels at (500000, 1500002).
fn scene() -> SceneGrid {
    SceneGrid::new(
        "s.tif",
        6,
        2,
        [500_000.0, 1.0, 0.0, 1_500_002.0, 0.0, -1.0],
        utm(),
    )
    .unwrap()
}

fn field(x0: f64, x1: f64) -> MultiPolygon<f64> {
    multi(rect(
        500_000.0 + x0,
        1_500_000.0,
        500_000.0 + x1,
        1_500_002.0,
    ))
}

fn options(classes: ClassMapping, overlap: Overlap, unlabelled: Unlabelled) -> LabelOptions {
    LabelOptions {
        classes,
        all_touched: false,
        overlap,
        unlabelled,
    }
}

fn rice_maize() -> ClassMapping {
    ClassMapping {
        field: Some("crop".into()),
        rules: vec![
            (1, vec!["rice".into(), "paddy".into()]),
            (2, vec!["maize".into()]),
        ],
    }
}

fn burn(labels: &mut Labels, scene: &SceneGrid) -> Vec<String> {
    let mut on = labels.on_scene(scene).unwrap();
    let mut out = vec![0u8; scene.width() * scene.height()];
    on.burn_rows(0, &mut out).unwrap();
    show(&out, scene.width())
        .into_iter()
        .map(|r| r.replace('5', "I")) // 255 shows as 5
        .collect()
}

#[test]
fn classes_from_a_field_with_unmapped_values_listed() {
    let layer = Layer::new(
        "f.geojson",
        Some(utm()),
        vec!["crop".into()],
        vec![
            feature(0, field(0.0, 2.0), Some("rice")),
            feature(1, field(2.0, 3.0), Some("wheat")),
            feature(2, field(3.0, 4.0), Some("maize")),
            feature(3, field(4.0, 5.0), None),
            feature(4, field(5.0, 6.0), Some("paddy")),
            feature(5, field(9.0, 10.0), Some("rice")),
        ],
    );
    let mut labels = Labels::new(
        vec![layer],
        None,
        options(rice_maize(), Overlap::LaterWins, Unlabelled::Ignore),
    )
    .unwrap();
    assert_eq!(burn(&mut labels, &scene()), ["11I2I1", "11I2I1"]);
    let s = &labels.summaries()[0];
    assert_eq!(
        s.unmapped,
        [("(null)".to_string(), 1), ("wheat".to_string(), 1)]
    );
    assert_eq!((s.features_per_class[1], s.features_per_class[2]), (3, 1));
    // #5 lies east of the scene.
    assert_eq!(s.outside_every_scene.describe(), "1 (#5)");
}

#[test]
fn overlaps_later_wins_or_priority() {
    let layer = || {
        Layer::new(
            "f",
            Some(utm()),
            vec!["crop".into()],
            vec![
                feature(0, field(0.0, 4.0), Some("rice")),
                feature(1, field(2.0, 6.0), Some("maize")),
            ],
        )
    };
    let bg = Unlabelled::Background(0);
    let mut later = Labels::new(
        vec![layer()],
        None,
        options(rice_maize(), Overlap::LaterWins, bg),
    )
    .unwrap();
    assert_eq!(burn(&mut later, &scene()), ["112222"; 2]);
    let mut rice_first = Labels::new(
        vec![layer()],
        None,
        options(rice_maize(), Overlap::Priority(vec![1, 2]), bg),
    )
    .unwrap();
    assert_eq!(burn(&mut rice_first, &scene()), ["111122"; 2]);
}

#[test]
fn one_class_for_every_feature_background_and_survey_extent() {
    let fields = Layer::new(
        "f",
        Some(utm()),
        vec![],
        vec![feature(0, field(1.0, 3.0), None)],
    );
    let extent = Layer::new(
        "area",
        Some(utm()),
        vec![],
        vec![feature(0, field(0.0, 4.0), None)],
    );
    let mut labels = Labels::new(
        vec![fields],
        Some(extent),
        options(
            ClassMapping::all(1),
            Overlap::LaterWins,
            Unlabelled::Background(0),
        ),
    )
    .unwrap();
    // Outside the surveyed area: ignore, not background.
    assert_eq!(burn(&mut labels, &scene()), [".11.II"; 2]);
}

#[test]
fn a_wgs84_layer_on_scenes_in_two_utm_zones() {
    // A field straddling 108°E, the border of zones 48 and 49, given in WGS84.
    let text = br#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},
      "geometry":{"type":"Polygon","coordinates":[[[107.999,15.0],[108.001,15.0],[108.001,15.001],[107.999,15.001],[107.999,15.0]]]}}]}"#;
    let layer = read_geojson("fields.geojson", text).unwrap();
    let mut labels = Labels::new(
        vec![layer],
        None,
        options(
            ClassMapping::all(1),
            Overlap::LaterWins,
            Unlabelled::Background(0),
        ),
    )
    .unwrap();
    let mut burned = Vec::new();
    for code in [32648, 32649] {
        let crs = Crs::parse(&format!("EPSG:{code}")).unwrap();
        let to = geom::Reprojector::new(&Crs::wgs84(), &crs).unwrap();
        // A 10 m scene of 40×40 pixels centred on the field, in that zone.
        let (cx, cy) = to.transform(108.0, 15.0005).unwrap();
        let gt = [
            (cx / 10.0).round() * 10.0 - 200.0,
            10.0,
            0.0,
            (cy / 10.0).round() * 10.0 + 200.0,
            0.0,
            -10.0,
        ];
        let scene = SceneGrid::new(&format!("{code}.tif"), 40, 40, gt, crs).unwrap();
        let mut on = labels.on_scene(&scene).unwrap();
        let mut out = vec![0u8; 1600];
        on.burn_rows(0, &mut out).unwrap();
        burned.push(out.iter().filter(|&&v| v == 1).count());
    }
    // ~215 m × 111 m: about 240 pixels of 100 m² in either zone's grid.
    for n in &burned {
        assert!((200..280).contains(n), "{burned:?}");
    }
    assert_eq!(labels.summaries()[0].outside_every_scene.count, 0);
}

#[test]
fn user_errors_name_the_layer_and_what_to_do() {
    let layer = Layer::new(
        "f.shp",
        Some(utm()),
        vec!["CROP".into(), "id".into()],
        vec![feature(0, field(0.0, 1.0), None)],
    );
    let err = Labels::new(
        vec![layer],
        None,
        options(rice_maize(), Overlap::LaterWins, Unlabelled::Ignore),
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "layer f.shp has no field `crop`; its fields are: CROP, id"
    );
    let empty = read_geojson(
        "empty.geojson",
        br#"{"type":"FeatureCollection","features":[
        {"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[0,0]}}]}"#,
    )
    .unwrap();
    let err = Labels::new(
        vec![empty],
        None,
        options(ClassMapping::all(1), Overlap::LaterWins, Unlabelled::Ignore),
    )
    .err()
    .unwrap();
    assert!(matches!(err, GeomError::EmptyLayer { .. }));
    assert_eq!(
        err.to_string(),
        "layer empty.geojson has no polygon features; 1 (#0) features are points or lines (skipped)"
    );
    let mut bad = SceneGrid::new("s", 2, 2, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0], utm()).err();
    assert!(matches!(bad.take(), Some(GeomError::BadTransform { .. })));
}

#[test]
fn zones_by_name_with_pieces_and_gaps() {
    let layer = Layer::new(
        "districts",
        Some(utm()),
        vec!["name".into()],
        vec![
            feature(0, field(0.0, 2.0), Some("north")),
            feature(1, field(2.0, 3.0), Some("south")),
            feature(2, field(4.0, 6.0), Some("north")),
            feature(3, field(3.0, 4.0), None),
        ],
    );
    let mut zones = Zones::new(layer, "name", false).unwrap();
    assert_eq!(zones.names(), ["north", "south"]);
    let mut on = zones.on_scene(&scene()).unwrap();
    let mut out = vec![0u32; 6];
    on.burn_rows(1, &mut out).unwrap();
    let n = SceneZones::NONE;
    assert_eq!(out, [0, 0, 1, n, 0, 0]);
    assert_eq!(zones.summary().unmapped, [("(null)".to_string(), 1)]);
    assert_eq!(IGNORE, 255);
}
