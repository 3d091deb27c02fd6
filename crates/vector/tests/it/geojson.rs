//! GeoJSON output: reprojection against PROJ, structure, winding, properties, `crs` member.

use serde_json::Value;
use vector::{GeoJsonWriter, Grid, OutputCrs, Polygonizer, VectorOptions};

use crate::common::*;

/// Reference points: (EPSG code, x, y, lon, lat), computed with pyproj 3.7.2 (PROJ 9.5.1):
/// `Transformer.from_crs(code, 4326, always_xy=True).transform(x, y)`.
const PROJ_TABLE: [(u16, f64, f64, f64, f64); 10] = [
    (
        32648,
        500000.0,
        1500000.0,
        105.00000000000003,
        13.568451278467258,
    ),
    (
        32648,
        612345.678,
        2012345.678,
        106.06237907260976,
        18.197355241654463,
    ),
    (
        32648,
        300000.0,
        1100000.0,
        103.17569961634089,
        9.946070959436867,
    ),
    (
        32633,
        400000.0,
        5500000.0,
        13.614831370035121,
        49.64425686242591,
    ),
    (
        32633,
        650000.0,
        6200000.0,
        17.400514762656638,
        55.92198438886331,
    ),
    (32632, 500000.0, 5000000.0, 9.0, 45.153477183356024),
    (
        32632,
        700000.0,
        5300000.0,
        11.672054778187253,
        47.82223562000618,
    ),
    (
        3857,
        1000000.0,
        2000000.0,
        8.983152841195214,
        17.678914238335743,
    ),
    (
        3857,
        -8000000.0,
        5000000.0,
        -71.86522272956171,
        40.91627447067578,
    ),
    (
        32748,
        500000.0,
        9000000.0,
        105.00000000000003,
        -9.046562463768952,
    ),
];

fn names() -> Vec<String> {
    vec!["outer".into(), "rice_paddy".into(), "water".into()]
}

/// Runs the whole pipeline on a class map and parses the output back.
fn geojson(grid: &Grid, classes: &[u8], selected: &[bool], options: &VectorOptions) -> Value {
    let (w, h) = (grid.width(), grid.height());
    let conf: Vec<f32> = classes
        .iter()
        .map(|&k| if k == 255 { f32::NAN } else { 0.5 })
        .collect();
    let mut p = Polygonizer::new(w, h, selected.to_vec());
    let mut out = GeoJsonWriter::new(Vec::new(), grid, &names(), options).unwrap();
    for r in 0..h {
        out.write(&p.push_rows(&classes[r * w..(r + 1) * w], &conf[r * w..(r + 1) * w]))
            .unwrap();
    }
    out.write(&p.finish()).unwrap();
    serde_json::from_slice(&out.finish().unwrap()).unwrap()
}

fn rings(feature: &Value) -> Vec<Vec<[f64; 2]>> {
    feature["geometry"]["coordinates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|p| [p[0].as_f64().unwrap(), p[1].as_f64().unwrap()])
                .collect()
        })
        .collect()
}

#[test]
fn corners_reproject_like_proj() {
    for (code, x, y, lon, lat) in PROJ_TABLE {
        // A single pixel whose top-left corner is the reference point.
        let g = geo([x, 10.0, 0.0, y, 0.0, -10.0], projected_keys(code));
        let grid = Grid::new(Some(&g), 1, 1).unwrap();
        let json = geojson(&grid, &[1], &[false, true], &VectorOptions::default());
        let pts = &rings(&json["features"][0])[0];
        let err = pts
            .iter()
            .map(|p| (p[0] - lon).abs().max((p[1] - lat).abs()))
            .fold(f64::INFINITY, f64::min);
        assert!(err <= 1e-7, "EPSG:{code} ({x}, {y}): off by {err}°");
    }
}

#[test]
fn an_unknown_code_is_an_error_naming_it_and_the_ways_out() {
    let keys = vec![1, 1, 0, 2, 3072, 0, 1, 65000, 3076, 0, 1, 9001];
    let grid = Grid::new(Some(&geo([0.0, 10.0, 0.0, 0.0, 0.0, -10.0], keys)), 2, 2).unwrap();
    let err = GeoJsonWriter::new(Vec::new(), &grid, &names(), &VectorOptions::default())
        .err()
        .unwrap()
        .to_string();
    for part in [
        "EPSG:65000",
        "--vector-crs native",
        "gdalwarp -t_srs EPSG:4326",
    ] {
        assert!(err.contains(part), "{err}");
    }
    // User-defined keys (no code) likewise; native output still works, without a `crs` member.
    let keys = vec![1, 1, 0, 2, 3072, 0, 1, 32767, 3076, 0, 1, 9001];
    let grid = Grid::new(Some(&geo([0.0, 10.0, 0.0, 0.0, 0.0, -10.0], keys)), 1, 1).unwrap();
    let err = GeoJsonWriter::new(Vec::new(), &grid, &names(), &VectorOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("no EPSG code"), "{err}");
    let native = VectorOptions {
        crs: OutputCrs::Native,
        ..Default::default()
    };
    let json = geojson(&grid, &[1], &[false, true], &native);
    assert!(json.get("crs").is_none());
    assert_eq!(json["features"][0]["properties"]["area_ha"], 0.01);
}

#[test]
fn features_have_their_structure_winding_and_properties() {
    // Class 1 with a hole of class 2 holding nodata; 10 m UTM 48N pixels.
    let (w, h, m) = map(&["11111", "12221", "12.21", "12221", "11111"]);
    let g = geo(
        [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
        projected_keys(32648),
    );
    let grid = Grid::new(Some(&g), w, h).unwrap();
    for crs in [OutputCrs::Wgs84, OutputCrs::Native] {
        let options = VectorOptions {
            crs,
            ..Default::default()
        };
        let json = geojson(&grid, &m, &[false, true, true], &options);
        assert_eq!(json["type"], "FeatureCollection");
        let features = json["features"].as_array().unwrap();
        assert_eq!(features.len(), 2);
        for f in features {
            assert_eq!(f["type"], "Feature");
            assert_eq!(f["geometry"]["type"], "Polygon");
            let rs = rings(f);
            // RFC 7946: exterior counter-clockwise, holes clockwise (x east, y north).
            assert!(ring_area(&rs[0]) > 0.0, "{crs:?} exterior winding");
            for hole in &rs[1..] {
                assert!(ring_area(hole) < 0.0, "{crs:?} hole winding");
            }
            for r in &rs {
                assert_eq!(r[0], r[r.len() - 1]);
            }
            let p = &f["properties"];
            let (name, pixels) = match p["class_index"].as_u64().unwrap() {
                1 => ("rice_paddy", 16),
                2 => ("water", 8),
                k => panic!("class {k}"),
            };
            assert_eq!(
                (p["class"].as_str().unwrap(), p["pixels"].as_u64().unwrap()),
                (name, pixels)
            );
            assert!((p["area_ha"].as_f64().unwrap() - pixels as f64 * 0.01).abs() < 1e-12);
            assert_eq!(p["mean_probability"], 0.5);
            assert_eq!(rs.len(), 2, "both have a hole");
        }
        match crs {
            OutputCrs::Native => {
                assert_eq!(json["crs"]["type"], "name");
                assert_eq!(
                    json["crs"]["properties"]["name"],
                    "urn:ogc:def:crs:EPSG::32648"
                );
                let rice = features
                    .iter()
                    .find(|f| f["properties"]["class_index"] == 1)
                    .unwrap();
                let rs = rings(rice);
                // Native coordinates: the 50 m square less the 30 m hole.
                assert_eq!((ring_area(&rs[0]), polygon_area(&rs)), (2500.0, 1600.0));
                assert!(rs[0].contains(&[500_000.0, 1_500_000.0]));
            }
            OutputCrs::Wgs84 => {
                assert!(json.get("crs").is_none());
                let lon = rings(&features[0])[0][0][0];
                assert!((104.0..106.0).contains(&lon), "{lon}");
            }
        }
    }
}

#[test]
fn coordinates_are_rounded() {
    let g = geo(
        [500_000.123_456_7, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
        projected_keys(32648),
    );
    let grid = Grid::new(Some(&g), 1, 1).unwrap();
    let mut out = GeoJsonWriter::new(
        Vec::new(),
        &grid,
        &names(),
        &VectorOptions {
            crs: OutputCrs::Native,
            ..Default::default()
        },
    )
    .unwrap();
    let mut p = Polygonizer::new(1, 1, vec![true]);
    out.write(&p.push_rows(&[0], &[1.0])).unwrap();
    out.write(&p.finish()).unwrap();
    let text = String::from_utf8(out.finish().unwrap()).unwrap();
    assert!(text.contains("500000.123,1500000]"), "{text}");
    let mut out =
        GeoJsonWriter::new(Vec::new(), &grid, &names(), &VectorOptions::default()).unwrap();
    let mut p = Polygonizer::new(1, 1, vec![true]);
    out.write(&p.push_rows(&[0], &[1.0])).unwrap();
    out.write(&p.finish()).unwrap();
    let text = String::from_utf8(out.finish().unwrap()).unwrap();
    // Lon/lat to 1e-9°: at most 9 decimals.
    let max_decimals = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|n| n.split_once('.').map(|(_, d)| d.len()))
        .max()
        .unwrap();
    assert!(max_decimals <= 9, "{text}");
}

#[test]
fn a_geographic_scene_is_written_as_is_and_measured_on_the_ellipsoid() {
    let g = geo(
        [105.0, 0.0001, 0.0, 10.0, 0.0, -0.0001],
        geographic_keys(4326),
    );
    let grid = Grid::new(Some(&g), 2, 2).unwrap();
    let json = geojson(
        &grid,
        &[1, 1, 1, 1],
        &[false, true],
        &VectorOptions::default(),
    );
    let f = &json["features"][0];
    let area = f["properties"]["area_ha"].as_f64().unwrap();
    let expect: f64 = (0..2)
        .map(|r| 2.0 * grid.pixel_area_m2(r).unwrap())
        .sum::<f64>()
        / 1e4;
    assert!((area - expect).abs() < 1e-12);
    assert!(rings(f)[0].contains(&[105.0, 10.0]));
}

#[test]
fn min_area_drops_small_regions_and_ungeoreferenced_maps_use_pixels() {
    let (w, h, m) = map(&["1100", "1100", "0001"]);
    let g = geo([0.0, 10.0, 0.0, 0.0, 0.0, -10.0], projected_keys(32648));
    let grid = Grid::new(Some(&g), w, h).unwrap();
    let options = VectorOptions {
        min_area_ha: Some(0.02),
        crs: OutputCrs::Native,
        ..Default::default()
    };
    let json = geojson(&grid, &m, &[false, true], &options);
    let features = json["features"].as_array().unwrap();
    assert_eq!(features.len(), 1);
    assert_eq!(features[0]["properties"]["pixels"], 4);
    // No georeferencing: pixel coordinates (col, row), pixels but no area.
    let grid = Grid::new(None, w, h).unwrap();
    let json = geojson(&grid, &m, &[false, true], &VectorOptions::default());
    let features = json["features"].as_array().unwrap();
    assert_eq!(features.len(), 2);
    assert!(
        features
            .iter()
            .all(|f| f["properties"].get("area_ha").is_none())
    );
    let all: Vec<[f64; 2]> = features.iter().flat_map(|f| rings(f).remove(0)).collect();
    assert!(all.contains(&[4.0, 3.0]) && all.contains(&[2.0, 2.0]));
}

#[test]
fn other_geographic_crs_are_reprojected_and_wgs84_native_is_named_crs84() {
    // ETRS89 (EPSG:4258) is WGS84 to well within a metre: PROJ's 4258 → 4326 is a no-op.
    let g = geo([10.0, 0.001, 0.0, 50.0, 0.0, -0.001], geographic_keys(4258));
    let grid = Grid::new(Some(&g), 1, 1).unwrap();
    let json = geojson(&grid, &[1], &[false, true], &VectorOptions::default());
    let pts = &rings(&json["features"][0])[0];
    let err = pts
        .iter()
        .map(|p| (p[0] - 10.0).abs().max((p[1] - 50.0).abs()))
        .fold(f64::INFINITY, f64::min);
    assert!(err < 1e-7, "{err}");
    // Native EPSG:4326: lon/lat, named as OGC CRS84 (EPSG::4326's URN says lat/lon).
    let g = geo([10.0, 0.001, 0.0, 50.0, 0.0, -0.001], geographic_keys(4326));
    let grid = Grid::new(Some(&g), 1, 1).unwrap();
    let json = geojson(
        &grid,
        &[1],
        &[false, true],
        &VectorOptions {
            crs: OutputCrs::Native,
            ..Default::default()
        },
    );
    assert_eq!(
        json["crs"]["properties"]["name"],
        "urn:ogc:def:crs:OGC:1.3:CRS84"
    );
    // A user-defined geographic CRS cannot be reprojected.
    let keys = vec![1, 1, 0, 2, 1024, 0, 1, 2, 2048, 0, 1, 32767];
    let grid = Grid::new(
        Some(&geo([10.0, 0.001, 0.0, 50.0, 0.0, -0.001], keys)),
        1,
        1,
    )
    .unwrap();
    assert!(GeoJsonWriter::new(Vec::new(), &grid, &names(), &VectorOptions::default()).is_err());
    assert!(
        grid.pixel_area_m2(0).is_some(),
        "but it still has areas (WGS84 ellipsoid)"
    );
}

#[test]
fn a_transform_without_a_crs_is_refused_for_wgs84_and_kept_as_is_natively() {
    // The minimal key directory segfit writes for a georeferenced raster without keys: only
    // GTRasterTypeGeoKey (PixelIsArea).
    let g = geo(
        [1000.0, 2.0, 0.0, 5000.0, 0.0, -2.0],
        vec![1, 1, 0, 1, 1025, 0, 1, 1],
    );
    let grid = Grid::new(Some(&g), 1, 1).unwrap();
    assert_eq!(
        grid.pixels_only_reason(),
        Some("has GeoKeys that name no CRS")
    );
    let err = GeoJsonWriter::new(Vec::new(), &grid, &names(), &VectorOptions::default())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("the class map has GeoKeys that name no CRS"),
        "{err}"
    );
    let native = VectorOptions {
        crs: OutputCrs::Native,
        ..Default::default()
    };
    let json = geojson(&grid, &[1], &[false, true], &native);
    assert!(json.get("crs").is_none());
    let f = &json["features"][0];
    assert!(f["properties"].get("area_ha").is_none());
    assert!(rings(f)[0].contains(&[1002.0, 4998.0]));
}
