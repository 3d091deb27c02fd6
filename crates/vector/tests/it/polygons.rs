//! Polygon topology: rings along pixel edges, holes, 4-connectivity, streaming merges.

use vector::Region;

use crate::common::*;

const ALL: [bool; 10] = [true; 10];

/// The region's rings as sets of unit pixel edges, to compare boundaries independently of
/// where a ring starts and how straight runs are merged.
fn unit_edges(ring: &[[f64; 2]]) -> Vec<([i64; 2], [i64; 2])> {
    let mut out = Vec::new();
    for w in ring.windows(2) {
        let (a, b) = (
            [w[0][0] as i64, w[0][1] as i64],
            [w[1][0] as i64, w[1][1] as i64],
        );
        let n = (b[0] - a[0]).abs().max((b[1] - a[1]).abs());
        let d = [(b[0] - a[0]).signum(), (b[1] - a[1]).signum()];
        for k in 0..n {
            let p = [a[0] + k * d[0], a[1] + k * d[1]];
            out.push((p, [p[0] + d[0], p[1] + d[1]]));
        }
    }
    out.sort();
    out
}

fn of_class(regions: &[Region], class: u8) -> Vec<&Region> {
    regions.iter().filter(|r| r.class == class).collect()
}

fn check_all(regions: &[Region]) {
    for r in regions {
        assert_valid(&r.rings);
        assert_no_crossing_at_vertices(&r.rings);
        assert_simple_rings(&r.rings);
        // Outer ring positive in (col, row) coordinates, holes negative (see `Region::rings`).
        assert!(ring_area(&r.rings[0]) > 0.0, "outer ring orientation");
        for h in &r.rings[1..] {
            assert!(ring_area(h) < 0.0, "hole orientation");
        }
        assert_eq!(polygon_area(&r.rings), r.pixels as f64, "area == pixels");
    }
}

#[test]
fn square_with_a_hole() {
    let (w, h, m) = map(&["11111", "11111", "11011", "11111", "11111"]);
    let (regions, _) = polygonize(w, h, &m, &ALL, 1);
    check_all(&regions);
    let ones = of_class(&regions, 1);
    assert_eq!(ones.len(), 1);
    assert_eq!(ones[0].rings.len(), 2);
    assert_eq!(ring_area(&ones[0].rings[0]), 25.0);
    assert_eq!(ring_area(&ones[0].rings[1]), -1.0);
    // The hole is exactly the zero pixel's outline, walked the other way.
    let zero = of_class(&regions, 0);
    let mut hole: Vec<_> = unit_edges(&ones[0].rings[1])
        .into_iter()
        .map(|(a, b)| (b, a))
        .collect();
    hole.sort();
    assert_eq!(hole, unit_edges(&zero[0].rings[0]));
}

#[test]
fn a_hole_holding_an_island() {
    let (w, h, m) = map(&[
        "1111111", "1000001", "1000001", "1001001", "1000001", "1000001", "1111111",
    ]);
    let (regions, _) = polygonize(w, h, &m, &ALL, 2);
    check_all(&regions);
    let mut ones: Vec<_> = of_class(&regions, 1)
        .iter()
        .map(|r| (r.pixels, r.rings.len()))
        .collect();
    ones.sort();
    assert_eq!(ones, vec![(1, 1), (24, 2)]);
    let zero = of_class(&regions, 0);
    assert_eq!(
        (zero.len(), zero[0].pixels, zero[0].rings.len()),
        (1, 24, 2)
    );
}

#[test]
fn touching_regions_of_two_classes_share_their_edge_exactly() {
    let (w, h, m) = map(&["1122", "1122", "1112"]);
    let (regions, _) = polygonize(w, h, &m, &ALL, 1);
    check_all(&regions);
    let (a, b) = (of_class(&regions, 1)[0], of_class(&regions, 2)[0]);
    let ea = unit_edges(&a.rings[0]);
    let eb: Vec<_> = unit_edges(&b.rings[0])
        .into_iter()
        .map(|(p, q)| (q, p))
        .collect();
    let shared: Vec<_> = ea.iter().filter(|e| eb.contains(e)).collect();
    // The staircase between them: (2,0)-(2,2), (2,2)-(3,2), (3,2)-(3,3), walked both ways.
    assert_eq!(shared.len(), 4);
}

#[test]
fn diagonal_neighbours_are_two_regions_touching_at_a_corner() {
    let (w, h, m) = map(&["10", "01"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    check_all(&regions);
    assert_eq!(regions.len(), 2);
    let corner = [1.0, 1.0];
    assert!(regions.iter().all(|r| r.rings[0].contains(&corner)));
}

#[test]
fn a_saddle_inside_one_region_gives_two_holes_touching_at_the_corner() {
    // The 1s at (1,1) and (2,2) meet diagonally at corner (2,2) and are joined around it; the
    // two 0s are separate holes. The ring turns at the corner so that no ring passes it twice
    // (no figure-eight hole, which OGC would call invalid); the holes touch there.
    let (w, h, m) = map(&["1111", "1101", "1011", "1111"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    check_all(&regions);
    assert_eq!(regions.len(), 1);
    let r = &regions[0];
    assert_eq!(r.rings.len(), 3);
    assert_eq!(
        (ring_area(&r.rings[1]), ring_area(&r.rings[2])),
        (-1.0, -1.0)
    );
    assert!(r.rings[1].contains(&[2.0, 2.0]) && r.rings[2].contains(&[2.0, 2.0]));
    // And where the region's own arms touch diagonally around a hole, the hole is separate.
    let (w, h, m) = map(&["11111", "10001", "10111", "11011", "11111"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    check_all(&regions);
    assert_eq!(flood_fill(w, h, &m, &[false, true]).len(), regions.len());
}

#[test]
fn a_u_shape_merges_across_rows() {
    let (w, h, m) = map(&["101", "101", "111"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    check_all(&regions);
    assert_eq!(regions.len(), 1);
    assert_eq!((regions[0].pixels, regions[0].rings.len()), (7, 1));
    // A W that merges twice, and an upside-down U that must stay one region too.
    let (w, h, m) = map(&["10101", "10101", "11111", "00000", "11111", "10001"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    check_all(&regions);
    assert_eq!(regions.len(), 2);
}

#[test]
fn a_checkerboard_is_one_region_per_pixel() {
    let n = 8;
    let m: Vec<u8> = (0..n * n).map(|i| ((i / n + i % n) % 2) as u8).collect();
    let (regions, _) = polygonize(n, n, &m, &ALL, 3);
    check_all(&regions);
    assert_eq!(regions.len(), n * n);
    assert!(
        regions
            .iter()
            .all(|r| r.pixels == 1 && r.rings.len() == 1 && r.rings[0].len() == 5)
    );
}

#[test]
fn row_by_row_equals_all_at_once() {
    let (w, h) = (37, 29);
    let m = random_map(w, h, 3, 0.6, 0.05, 7);
    let sorted = |mut v: Vec<Region>| {
        v.sort_by(|a, b| {
            (a.class, a.pixels, &a.rings[0])
                .partial_cmp(&(b.class, b.pixels, &b.rings[0]))
                .unwrap()
        });
        v
    };
    let (all, _) = polygonize(w, h, &m, &ALL, h);
    let all = sorted(all);
    for chunk in [1, 2, 5, 13] {
        let (parts, _) = polygonize(w, h, &m, &ALL, chunk);
        assert_eq!(sorted(parts), all, "chunk {chunk}");
    }
}

#[test]
fn a_random_map_matches_an_independent_flood_fill() {
    for (seed, keep) in [(1, 0.0), (2, 0.5), (3, 0.8), (4, 0.95)] {
        let (w, h) = (41, 33);
        let m = random_map(w, h, 4, keep, 0.1, seed);
        let selected = [true, false, true, true];
        let (regions, streamed) = polygonize(w, h, &m, &selected, 1);
        check_all(&regions);
        let mut got: Vec<(u8, u64)> = regions.iter().map(|r| (r.class, r.pixels)).collect();
        got.sort();
        assert_eq!(got, flood_fill(w, h, &m, &selected), "seed {seed}");
        // Class areas: the sum of polygon areas equals the raster count.
        for k in [0u8, 2, 3] {
            let poly: f64 = regions
                .iter()
                .filter(|r| r.class == k)
                .map(|r| polygon_area(&r.rings))
                .sum();
            let raster = m.iter().filter(|&&v| v == k).count() as f64;
            assert_eq!(poly, raster, "class {k}");
        }
        assert!(regions.iter().all(|r| r.class != 1 && r.class != 255));
        // Regions are handed out as soon as they are complete, not all at the end.
        assert!(
            streamed > regions.len() / 2,
            "seed {seed}: {streamed} of {}",
            regions.len()
        );
    }
}

#[test]
fn with_every_class_selected_the_rings_tile_the_image() {
    // Each inner pixel edge is walked once in each direction, each border edge once.
    let (w, h) = (31, 23);
    let m = random_map(w, h, 3, 0.7, 0.0, 11);
    let (regions, _) = polygonize(w, h, &m, &ALL, 4);
    let mut edges: Vec<_> = regions
        .iter()
        .flat_map(|r| &r.rings)
        .flat_map(|r| unit_edges(r))
        .collect();
    let n = edges.len();
    edges.sort();
    edges.dedup();
    assert_eq!(edges.len(), n, "an edge walked twice in one direction");
    let inner = (w - 1) * h + w * (h - 1);
    let border = 2 * (w + h);
    // Only edges between different classes are boundaries.
    let same = (0..h)
        .flat_map(|r| (0..w).map(move |c| (r, c)))
        .map(|(r, c)| {
            usize::from(c + 1 < w && m[r * w + c] == m[r * w + c + 1])
                + usize::from(r + 1 < h && m[r * w + c] == m[(r + 1) * w + c])
        })
        .sum::<usize>();
    assert_eq!(n, 2 * (inner - same) + border);
    for (a, b) in &edges {
        let on_border = (a[0] == b[0] && (a[0] == 0 || a[0] == w as i64))
            || (a[1] == b[1] && (a[1] == 0 || a[1] == h as i64));
        assert_eq!(
            edges.binary_search(&(*b, *a)).is_ok(),
            !on_border,
            "{a:?}-{b:?}"
        );
    }
}

#[test]
fn nodata_is_never_polygonized_and_holes_around_it_are_kept() {
    let (w, h, m) = map(&["1111", "1..1", "1111"]);
    let (regions, _) = polygonize(w, h, &m, &[true, true], 1);
    check_all(&regions);
    assert_eq!(regions.len(), 1);
    assert_eq!(regions[0].rings.len(), 2);
    assert_eq!(ring_area(&regions[0].rings[1]), -2.0);
}

#[test]
fn a_tall_region_is_emitted_once_when_it_ends() {
    // A column of class 1 ending at row 50 of 60, next to class 0.
    let (w, h) = (3, 60);
    let m: Vec<u8> = (0..w * h)
        .map(|i| u8::from(i % w == 1 && i / w < 50))
        .collect();
    let mut p = vector::Polygonizer::new(w, h, vec![false, true]);
    let conf = vec![0.75f32; w];
    let mut seen = Vec::new();
    for r in 0..h {
        for reg in p.push_rows(&m[r * w..(r + 1) * w], &conf) {
            seen.push((r, reg));
        }
    }
    assert!(p.finish().is_empty());
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, 50, "handed out with the first row past it");
    assert_eq!(seen[0].1.pixels, 50);
    assert_eq!(seen[0].1.mean_probability(), Some(0.75));
    // Straight runs are merged: a rectangle has 4 corners.
    assert_eq!(seen[0].1.rings[0].len(), 5);
}
