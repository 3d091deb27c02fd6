//! `--simplify`: neighbours stay glued, rings stay valid, areas move a bounded amount.

use std::collections::HashSet;

use serde_json::Value;
use vector::{GeoJsonWriter, Grid, OutputCrs, Polygonizer, VectorOptions};

use crate::common::*;

const STRESS_SEEDS: u64 = 60;

struct Poly {
    class: u64,
    pixels: u64,
    rings: Vec<Vec<[f64; 2]>>,
}

fn run(grid: &Grid, m: &[u8], selected: &[bool], simplify_m: Option<f64>) -> Vec<Poly> {
    let (w, h) = (grid.width(), grid.height());
    let names: Vec<String> = (0..4).map(|k| format!("c{k}")).collect();
    let options = VectorOptions {
        simplify_m,
        crs: OutputCrs::Native,
        ..Default::default()
    };
    let mut out = GeoJsonWriter::new(Vec::new(), grid, &names, &options).unwrap();
    let mut p = Polygonizer::new(w, h, selected.to_vec());
    let conf = vec![0.5f32; w];
    for r in 0..h {
        out.write(&p.push_rows(&m[r * w..(r + 1) * w], &conf))
            .unwrap();
    }
    out.write(&p.finish()).unwrap();
    let json: Value = serde_json::from_slice(&out.finish().unwrap()).unwrap();
    json["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| Poly {
            class: f["properties"]["class_index"].as_u64().unwrap(),
            pixels: f["properties"]["pixels"].as_u64().unwrap(),
            rings: f["geometry"]["coordinates"]
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
                .collect(),
        })
        .collect()
}

fn utm(w: usize, h: usize) -> Grid {
    let g = geo(
        [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
        projected_keys(32648),
    );
    Grid::new(Some(&g), w, h).unwrap()
}

fn vertex_count(polys: &[Poly]) -> usize {
    polys
        .iter()
        .flat_map(|p| &p.rings)
        .map(|r| r.len() - 1)
        .sum()
}

#[test]
fn shared_boundaries_stay_identical_and_the_image_stays_tiled() {
    for seed in [1, 2, 3] {
        let (w, h) = (40, 32);
        let m = random_map(w, h, 3, 0.85, 0.0, seed);
        let grid = utm(w, h);
        let all = [true; 3];
        let raw = run(&grid, &m, &all, None);
        let simple = run(&grid, &m, &all, Some(15.0));
        assert_eq!(raw.len(), simple.len());
        assert!(
            vertex_count(&simple) < vertex_count(&raw) * 3 / 4,
            "seed {seed}: it simplified"
        );
        // No gaps, no overlaps: the polygons still add up to the image, and no two cross.
        let total: f64 = simple.iter().map(|p| polygon_area(&p.rings)).sum();
        assert!(
            (total - (w * h) as f64 * 100.0).abs() < 1e-3,
            "seed {seed}: {total}"
        );
        let polys: Vec<_> = simple.iter().map(|p| p.rings.clone()).collect();
        assert_no_overlap_between(&polys);
        // Every edge inside the image is walked by exactly one other polygon, reversed.
        let mut edges: HashSet<([u64; 2], [u64; 2], usize)> = HashSet::new();
        let key = |p: [f64; 2]| [p[0].to_bits(), p[1].to_bits()];
        for (k, p) in simple.iter().enumerate() {
            for r in &p.rings {
                for s in r.windows(2) {
                    edges.insert((key(s[0]), key(s[1]), k));
                }
            }
        }
        let (x0, y0, x1, y1) = (
            500_000.0,
            1_500_000.0 - 10.0 * h as f64,
            500_000.0 + 10.0 * w as f64,
            1_500_000.0,
        );
        let border = |a: [f64; 2], b: [f64; 2]| {
            (a[0] == b[0] && (a[0] == x0 || a[0] == x1))
                || (a[1] == b[1] && (a[1] == y0 || a[1] == y1))
        };
        for (k, p) in simple.iter().enumerate() {
            for r in &p.rings {
                for s in r.windows(2) {
                    if border(s[0], s[1]) {
                        continue;
                    }
                    let twins = (0..simple.len())
                        .filter(|&j| j != k && edges.contains(&(key(s[1]), key(s[0]), j)))
                        .count();
                    assert_eq!(
                        twins, 1,
                        "seed {seed}: edge {:?}-{:?} of polygon {k}",
                        s[0], s[1]
                    );
                }
            }
        }
    }
}

#[test]
fn no_ring_self_intersects_and_areas_move_a_bounded_amount() {
    for (seed, keep, nodata) in [(4, 0.7, 0.05), (5, 0.9, 0.02), (6, 0.5, 0.0)] {
        let (w, h) = (48, 40);
        let m = random_map(w, h, 4, keep, nodata, seed);
        let grid = utm(w, h);
        let selected = [true, false, true, true];
        let tol = 25.0;
        let simple = run(&grid, &m, &selected, Some(tol));
        let raw = run(&grid, &m, &selected, None);
        for (p, q) in simple.iter().zip(&raw) {
            assert_eq!((p.class, p.pixels), (q.class, q.pixels));
            assert_valid(&p.rings);
            assert_no_crossing_at_vertices(&p.rings);
            // Each dropped corner was within `tol` of its chord: the area moves by at most
            // the raw perimeter times the tolerance.
            let perimeter: f64 = q
                .rings
                .iter()
                .flat_map(|r| r.windows(2))
                .map(|s| (s[1][0] - s[0][0]).hypot(s[1][1] - s[0][1]))
                .sum();
            let (a, b) = (polygon_area(&p.rings), q.pixels as f64 * 100.0);
            assert!((a - b).abs() <= perimeter * tol, "seed {seed}: {a} vs {b}");
            assert!(a > 0.0);
        }
        let polys: Vec<_> = simple.iter().map(|p| p.rings.clone()).collect();
        assert_no_overlap_between(&polys);
        // Class totals stay close: within 5% on blobby maps.
        for k in [0u64, 2, 3] {
            let a: f64 = simple
                .iter()
                .filter(|p| p.class == k)
                .map(|p| polygon_area(&p.rings))
                .sum();
            let b: f64 = raw
                .iter()
                .filter(|p| p.class == k)
                .map(|p| polygon_area(&p.rings))
                .sum();
            assert!(
                (a - b).abs() <= 0.05 * b + 1e3,
                "seed {seed} class {k}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn a_staircase_edge_becomes_a_diagonal_on_both_sides() {
    // Class 1 below a diagonal staircase, class 0 above: one shared arc.
    let n = 8;
    let m: Vec<u8> = (0..n * n).map(|i| u8::from(i % n <= i / n)).collect();
    let grid = utm(n, n);
    let simple = run(&grid, &m, &[true, true], Some(15.0));
    assert_eq!(simple.len(), 2);
    for p in &simple {
        // The image corners, the staircase's two ends and the one inner point an arc keeps.
        assert!(p.rings[0].len() <= 7, "{:?}", p.rings[0]);
    }
    // A 45° staircase of 10 m steps: its chord is within 7.1 m, so 5 m keeps it.
    let kept = run(&grid, &m, &[true, true], Some(5.0));
    assert!(kept.iter().all(|p| p.rings[0].len() > 8));
}

#[test]
fn an_island_inside_one_region_keeps_a_body() {
    // A single pixel and a 2×2 block inside class 0: neither collapses to a line.
    let (w, h, m) = map(&["000000", "010000", "000110", "000110", "000000"]);
    let simple = run(
        &Grid::new(None, w, h).unwrap(),
        &m,
        &[true, true],
        Some(3.0),
    );
    for p in &simple {
        assert_valid(&p.rings);
        assert!(polygon_area(&p.rings) > 0.0);
    }
    let holes: usize = simple
        .iter()
        .filter(|p| p.class == 0)
        .map(|p| p.rings.len() - 1)
        .sum();
    assert_eq!(holes, 2);
}

#[test]
fn the_tolerance_is_converted_at_the_latitude_of_the_arc() {
    // A 45° staircase (in pixels) of 0.0001° cells. At 60°N a cell is ~5.6 m wide and ~11.1 m
    // tall, and each stair corner lies ~5.0 m from the diagonal; at the equator ~7.8 m. A 6 m
    // tolerance therefore flattens it at 60°N only.
    let n = 8;
    let m: Vec<u8> = (0..n * n).map(|i| u8::from(i % n <= i / n)).collect();
    let corners = |lat: f64| {
        let g = geo(
            [100.0, 0.0001, 0.0, lat, 0.0, -0.0001],
            geographic_keys(4326),
        );
        let grid = Grid::new(Some(&g), n, n).unwrap();
        vertex_count(&run(&grid, &m, &[true, true], Some(6.0)))
    };
    let raw = vertex_count(&run(&utm(n, n), &m, &[true, true], None));
    let (north, equator) = (corners(60.0), corners(0.001));
    assert!(north < equator, "{north} vs {equator} (raw {raw})");
}

/// Regression: a one-pixel region has two arcs (one per neighbour class) joining the same two
/// corners; both became the same chord, the ring collapsed and was restored to its pixel
/// edges, while its neighbours kept the chord: a gap. Each arc now keeps an inner point.
#[test]
fn a_one_pixel_region_between_two_neighbours_stays_glued_to_them() {
    let (w, h, m) = map(&["1111", "1201", "0000"]);
    let grid = utm(w, h);
    let simple = run(&grid, &m, &[true, true, true], Some(50.0));
    let total: f64 = simple.iter().map(|p| polygon_area(&p.rings)).sum();
    assert!((total - (w * h) as f64 * 100.0).abs() < 1e-6, "{total}");
    let polys: Vec<_> = simple.iter().map(|p| p.rings.clone()).collect();
    assert_no_overlap_between(&polys);
    let one = simple.iter().find(|p| p.class == 2).unwrap();
    assert_eq!(polygon_area(&one.rings), 100.0);
}

#[test]
fn many_small_random_maps_stay_valid_and_tiled() {
    for seed in 0..STRESS_SEEDS {
        let (w, h) = (12 + (seed % 7) as usize, 10 + (seed % 5) as usize);
        let keep = [0.3, 0.6, 0.85][(seed % 3) as usize];
        let m = random_map(w, h, 3, keep, 0.0, 100 + seed);
        let grid = utm(w, h);
        let tol = [8.0, 15.0, 40.0][(seed / 3 % 3) as usize];
        let simple = run(&grid, &m, &[true; 3], Some(tol));
        let total: f64 = simple.iter().map(|p| polygon_area(&p.rings)).sum();
        assert!(
            (total - (w * h) as f64 * 100.0).abs() < 1e-6,
            "seed {seed}: {total}"
        );
        for p in &simple {
            assert_valid(&p.rings);
            assert_no_crossing_at_vertices(&p.rings);
            assert_simple_rings(&p.rings);
        }
        let polys: Vec<_> = simple.iter().map(|p| p.rings.clone()).collect();
        assert_no_overlap_between(&polys);
    }
}
