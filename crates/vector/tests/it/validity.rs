//! OGC validity of the traced rings: a region that closes a loop through a saddle corner (two
//! diagonal pixels joined elsewhere) encloses background touching the outside only at that
//! corner. GEOS/shapely reject a ring that passes a point twice ("Ring Self-intersection",
//! found on a real prediction), so the valid form is an outer ring plus a hole touching it there.

use crate::common::*;

/// No ring visits a corner twice (the repeated closing point aside).
fn assert_simple(rings: &[Vec<[f64; 2]>]) {
    for ring in rings {
        let mut corners: Vec<(i64, i64)> = ring[..ring.len() - 1]
            .iter()
            .map(|p| (p[0] as i64, p[1] as i64))
            .collect();
        corners.sort();
        let n = corners.len();
        corners.dedup();
        assert_eq!(corners.len(), n, "a ring passes a corner twice: {ring:?}");
    }
}

#[test]
fn a_loop_closed_at_a_saddle_is_an_outer_ring_and_a_touching_hole() {
    // The ones close around the two-pixel pocket (column 2, rows 1-2) only through the
    // corner between (row 3, col 2) and (row 2, col 3).
    let (w, h, m) = map(&["01110", "01010", "01010", "01100", "00000"]);
    let (regions, _) = polygonize(w, h, &m, &[false, true], 1);
    assert_eq!(regions.len(), 1);
    let r = &regions[0];
    assert_simple(&r.rings);
    assert_eq!(r.rings.len(), 2, "outer ring and hole: {:?}", r.rings);
    assert!(ring_area(&r.rings[0]) > 0.0 && ring_area(&r.rings[1]) < 0.0);
    assert_eq!(ring_area(&r.rings[1]), -2.0, "the pocket is the hole");
    assert_eq!(polygon_area(&r.rings), r.pixels as f64);
    // The hole touches the outer ring at the saddle corner (x = 3, y = 3).
    let touches = |ring: &Vec<[f64; 2]>| ring.contains(&[3.0, 3.0]);
    assert!(touches(&r.rings[0]) && touches(&r.rings[1]));
}

#[test]
fn random_maps_give_simple_rings() {
    for seed in 0..40 {
        let (w, h) = (23, 19);
        let m = random_map(w, h, 3, 0.55, 0.05, seed);
        let (regions, _) = polygonize(w, h, &m, &[true; 3], 4);
        for r in &regions {
            assert_simple(&r.rings);
            assert!(
                ring_area(&r.rings[0]) > 0.0,
                "seed {seed}: outer ring first"
            );
            for hole in &r.rings[1..] {
                assert!(ring_area(hole) < 0.0, "seed {seed}: holes negative");
            }
            assert_eq!(polygon_area(&r.rings), r.pixels as f64, "seed {seed}");
        }
    }
}
