//! Pixel areas from the geotransform and the GeoKeys, and the statistics report.

use vector::{ClassStats, Crs, Grid, StatsReport};

use crate::common::*;

const WGS84_A: f64 = 6_378_137.0;
const WGS84_INV_F: f64 = 298.257_223_563;

fn close(a: f64, b: f64, rel: f64) {
    assert!(
        (a - b).abs() <= rel * b.abs(),
        "{a} vs {b} (rel {})",
        (a - b).abs() / b.abs()
    );
}

#[test]
fn projected_10_m_pixels_are_a_hundredth_of_a_hectare() {
    let g = geo(
        [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
        projected_keys(32648),
    );
    let grid = Grid::new(Some(&g), 4, 4).unwrap();
    for row in [0, 3] {
        assert_eq!(grid.pixel_area_m2(row), Some(100.0));
    }
    let mut stats = ClassStats::new(vec!["outer".into(), "rice".into()]);
    stats.add_rows(&grid, 0, &[1; 16], &[0.5; 16]);
    let mut report = StatsReport::new();
    report.add("s.tif", &grid, stats);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let rice = &json["inputs"][0]["classes"][1];
    assert_eq!(rice["area_ha"], 0.16);
    assert_eq!(rice["pixels"], 16);
    assert_eq!(
        json["inputs"][0]["crs"],
        "EPSG:32648 (WGS 84 / UTM zone 48N)"
    );
    // The terminal summary: a line per class with pixels, hectares and mean probability.
    let summary = report.summary();
    let lines: Vec<Vec<&str>> = summary
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[1], ["outer", "0", "0.0000", "-"], "{summary}");
    assert_eq!(lines[2], ["rice", "16", "0.1600", "0.500"], "{summary}");
    assert!(
        lines.len() == 4 && summary.contains("UTM zone 48N"),
        "{summary}"
    );
}

#[test]
fn a_rotated_transform_uses_the_determinant() {
    let (a, b, d, e) = (9.0, 2.0, 3.0, -7.0);
    let g = geo([0.0, a, b, 0.0, d, e], projected_keys(32633));
    let grid = Grid::new(Some(&g), 3, 3).unwrap();
    assert_eq!(grid.pixel_area_m2(2), Some((a * e - b * d).abs()));
    assert_eq!(grid.pixel_area_m2(2), Some(69.0));
}

#[test]
fn us_survey_feet_are_converted() {
    // NAD83 / California zone 3 (ftUS), 30 ft pixels: 30² ft² × (1200/3937 m/ft)².
    let g = geo(
        [6_000_000.0, 30.0, 0.0, 2_000_000.0, 0.0, -30.0],
        projected_keys(2227),
    );
    let grid = Grid::new(Some(&g), 2, 2).unwrap();
    close(
        grid.pixel_area_m2(0).unwrap(),
        900.0 * (1200.0_f64 / 3937.0).powi(2),
        1e-12,
    );
    // The same from ProjLinearUnitsGeoKey 9003 on a code the table does not know.
    let keys = vec![1, 1, 0, 2, 3072, 0, 1, 65001, 3076, 0, 1, 9003];
    let grid = Grid::new(Some(&geo([0.0, 30.0, 0.0, 0.0, 0.0, -30.0], keys)), 2, 2).unwrap();
    close(grid.pixel_area_m2(0).unwrap(), 83.613_070_452, 1e-9); // not 0.3048² × 900 = 83.6127
    assert_eq!(grid.crs().unwrap().describe(), "EPSG:65001");
}

/// Independent reference: ∫∫ M·N·cosφ dφ dλ, with M·N = a²(1−e²)/(1−e²sin²φ)², by Simpson.
fn ellipsoid_cell_m2(lat1: f64, lat2: f64, dlon: f64) -> f64 {
    let f = 1.0 / WGS84_INV_F;
    let e2 = f * (2.0 - f);
    let g = |phi: f64| {
        WGS84_A * WGS84_A * (1.0 - e2) * phi.cos() / (1.0 - e2 * phi.sin().powi(2)).powi(2)
    };
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let n = 64;
    let h = (p2 - p1) / n as f64;
    let mut s = g(p1) + g(p2);
    for i in 1..n {
        s += g(p1 + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    (s * h / 3.0).abs() * dlon.to_radians()
}

#[test]
fn geographic_cells_have_their_ellipsoidal_area() {
    let cell = 0.0001;
    for lat in [0.0, 45.0, 60.0] {
        // Row 0 spans [lat, lat + cell] (rows go south from the top edge).
        let g = geo(
            [100.0, cell, 0.0, lat + cell, 0.0, -cell],
            geographic_keys(4326),
        );
        let grid = Grid::new(Some(&g), 10, 10).unwrap();
        let got = grid.pixel_area_m2(0).unwrap();
        close(got, ellipsoid_cell_m2(lat, lat + cell, cell), 1e-9);
        // Sanity: within 0.7% of the sphere of the same area (R = 6371007.2 m).
        let r = 6_371_007.2_f64;
        let sphere =
            r * r * cell.to_radians() * ((lat + cell).to_radians().sin() - lat.to_radians().sin());
        close(got, sphere, 7e-3);
        // The next row down is further south, so (in the north) larger.
        assert!(grid.pixel_area_m2(1).unwrap() > got || lat == 0.0);
    }
    assert!(matches!(
        Grid::new(
            Some(&geo([0.0, 1.0, 0.0, 0.0, 0.0, -1.0], geographic_keys(4326))),
            1,
            1
        )
        .unwrap()
        .crs(),
        Some(Crs::Geographic { .. })
    ));
}

#[test]
fn a_geographic_row_sum_is_the_area_of_the_band() {
    // 1° × 1° at the equator in 100 rows: the rows add up to the whole cell.
    let g = geo([0.0, 1.0, 0.0, 1.0, 0.0, -0.01], geographic_keys(4326));
    let grid = Grid::new(Some(&g), 1, 100).unwrap();
    let sum: f64 = (0..100).map(|r| grid.pixel_area_m2(r).unwrap()).sum();
    close(sum, ellipsoid_cell_m2(0.0, 1.0, 1.0), 1e-9);
    // Known figure: a 1° cell at the equator on WGS84 is about 12,308.8 km².
    close(sum / 1e6, 12_308.8, 1e-4);
}

#[test]
fn without_georeferencing_the_report_is_in_pixels() {
    let grid = Grid::new(None, 3, 2).unwrap();
    assert_eq!(grid.pixel_area_m2(0), None);
    assert!(grid.crs().is_none());
    let mut stats = ClassStats::new(vec!["a".into(), "b".into()]);
    stats.add_rows(
        &grid,
        0,
        &[0, 1, 255, 1, 1, 0],
        &[0.2, 0.8, f32::NAN, 0.6, 1.0, 0.4],
    );
    let mut report = StatsReport::new();
    report.add("tile.png", &grid, stats);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let s = &json["inputs"][0];
    assert_eq!(s["crs"], "pixels only: tile.png has no georeferencing");
    assert_eq!(s["classes"][1]["pixels"], 3);
    assert!(s["classes"][1]["area_ha"].is_null());
    close(
        s["classes"][1]["mean_probability"].as_f64().unwrap(),
        0.8,
        1e-6,
    );
    assert_eq!(s["nodata"]["pixels"], 1);
    let csv = report.to_csv();
    assert!(
        csv.starts_with("input,class_index,class,pixels,area_m2,area_ha,mean_probability,crs\n")
    );
    assert!(csv.contains("\ntile.png,1,b,3,,,"), "{csv}");
}

#[test]
fn an_unknown_code_with_metre_units_still_gives_hectares() {
    let keys = vec![1, 1, 0, 2, 3072, 0, 1, 65000, 3076, 0, 1, 9001];
    let grid = Grid::new(Some(&geo([0.0, 20.0, 0.0, 0.0, 0.0, -20.0], keys)), 2, 2).unwrap();
    assert_eq!(grid.pixel_area_m2(0), Some(400.0));
    // Without a unit it is pixels only, and the report says why.
    let keys = vec![1, 1, 0, 1, 3072, 0, 1, 65000];
    let grid = Grid::new(Some(&geo([0.0, 20.0, 0.0, 0.0, 0.0, -20.0], keys)), 2, 2).unwrap();
    assert_eq!(grid.pixel_area_m2(0), None);
    let mut report = StatsReport::new();
    report.add("x.tif", &grid, ClassStats::new(vec!["a".into()]));
    assert!(
        report
            .to_json()
            .contains("pixels only: x.tif has a CRS whose linear unit is unknown (EPSG:65000")
    );
}

#[test]
fn totals_add_up_over_inputs_in_different_crs() {
    let a = Grid::new(
        Some(&geo(
            [0.0, 10.0, 0.0, 0.0, 0.0, -10.0],
            projected_keys(32648),
        )),
        2,
        1,
    )
    .unwrap();
    let b = Grid::new(
        Some(&geo(
            [0.0, 20.0, 0.0, 0.0, 0.0, -20.0],
            projected_keys(32633),
        )),
        1,
        1,
    )
    .unwrap();
    let names = vec!["x".to_string(), "y".to_string()];
    let (mut sa, mut sb) = (ClassStats::new(names.clone()), ClassStats::new(names));
    sa.add_rows(&a, 0, &[1, 0], &[1.0, 1.0]);
    sb.add_rows(&b, 0, &[1], &[0.5]);
    let mut report = StatsReport::new();
    report.add("a.tif", &a, sa);
    report.add("b.tif", &b, sb);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let total = &json["total"]["classes"][1];
    assert_eq!(total["pixels"], 2);
    assert_eq!(total["area_m2"], 500.0);
    assert_eq!(total["mean_probability"], 0.75);
    assert_eq!(
        json["total"]["crs"],
        "areas summed over EPSG:32648 (WGS 84 / UTM zone 48N); EPSG:32633 (WGS 84 / UTM zone 33N)"
    );
    assert!(report.to_csv().contains("\ntotal,1,y,2,500,0.05,0.75,"));
    // With one input in pixels only, the total is in pixels only, and says which.
    let mut report = StatsReport::new();
    report.add("a.tif", &a, ClassStats::new(vec![]));
    report.add(
        "t.png",
        &Grid::new(None, 1, 1).unwrap(),
        ClassStats::new(vec![]),
    );
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(
        json["total"]["crs"],
        "pixels only: t.png has no georeferencing"
    );
}

#[test]
fn a_degenerate_transform_is_an_error() {
    let g = geo([0.0, 10.0, 0.0, 0.0, 0.0, 0.0], projected_keys(32648));
    let err = Grid::new(Some(&g), 1, 1).unwrap_err().to_string();
    assert!(err.contains("determinant"), "{err}");
}

#[test]
fn stats_merge_and_count_nodata_area_apart() {
    let g = geo([0.0, 10.0, 0.0, 0.0, 0.0, -10.0], projected_keys(32648));
    let grid = Grid::new(Some(&g), 2, 2).unwrap();
    let names = vec!["a".to_string(), "b".to_string()];
    let mut one = ClassStats::new(names.clone());
    one.add_rows(&grid, 0, &[0, 255], &[0.5, f32::NAN]);
    let mut two = ClassStats::new(names);
    two.add_rows(&grid, 1, &[0, 7], &[1.0, 0.25]);
    one.merge(&two);
    let mut report = StatsReport::new();
    report.add("both", &grid, one);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let s = &json["inputs"][0];
    assert_eq!(s["classes"][0]["pixels"], 2);
    assert_eq!(s["classes"][0]["mean_probability"], 0.75);
    assert_eq!(s["classes"][7]["class"], "class 7");
    assert_eq!(s["nodata"]["area_m2"], 100.0);
    assert!(s["nodata"]["mean_probability"].is_null());
}
