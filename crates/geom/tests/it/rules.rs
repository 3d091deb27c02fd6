//! Hand-computed rasterisations: GDAL's rules on small polygons, worked out on paper.

use geom::rasterize;

use crate::{grid, multi, poly, rect, show};

/// Burns `shapes` (class 1, 2, …) on a north-up `w × h` grid of unit pixels, where a polygon
/// given in "pixel" coordinates `(col, row)` is placed at x = col, y = h − row.
fn burn(w: usize, h: usize, shapes: &[geo_types::Polygon<f64>], all_touched: bool) -> Vec<String> {
    let flip = |p: &geo_types::Polygon<f64>| {
        let f = |r: &geo_types::LineString<f64>| {
            geo_types::LineString(
                r.0.iter()
                    .map(|c| geo_types::Coord {
                        x: c.x,
                        y: h as f64 - c.y,
                    })
                    .collect(),
            )
        };
        geo_types::Polygon::new(f(p.exterior()), p.interiors().iter().map(f).collect())
    };
    let shapes: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, p)| (multi(flip(p)), i as u8 + 1))
        .collect();
    show(&rasterize(&grid(w, h), &shapes, 0, all_touched), w)
}

#[test]
fn centre_rule_burns_pixels_whose_centre_is_inside() {
    // x and rows from 1.6 to 3.4: of the centres 1.5, 2.5, 3.5 only 2.5 is inside.
    let got = burn(5, 5, &[rect(1.6, 1.6, 3.4, 3.4)], false);
    assert_eq!(got, [".....", ".....", "..1..", ".....", "....."]);
    let got = burn(5, 5, &[rect(1.2, 1.2, 3.8, 3.8)], false);
    assert_eq!(got, [".....", ".111.", ".111.", ".111.", "....."]);
}

#[test]
fn all_touched_burns_every_pixel_the_polygon_touches() {
    let got = burn(5, 5, &[rect(1.6, 1.6, 3.4, 3.4)], true);
    assert_eq!(got, [".....", ".111.", ".111.", ".111.", "....."]);
}

#[test]
fn centres_exactly_on_edges_follow_gdal() {
    // Edges through the centres of columns 1 and 3 and rows 1 and 3. Left edge: out; right
    // edge: in. North-up, the ring turned clockwise in world coordinates runs right to left
    // along its lowest row (row 3.5), which GDAL burns; the top row (1.5) is reached by the
    // edges that start on it.
    let got = burn(5, 5, &[rect(1.5, 1.5, 3.5, 3.5)], false);
    assert_eq!(got, [".....", "..11.", "..11.", "..11.", "....."]);
}

#[test]
fn pixel_aligned_square_burns_only_its_inside_even_when_all_touched() {
    // Edges on pixel boundaries (within 1e-4 px) touch nothing outside under ALL_TOUCHED.
    for all in [false, true] {
        let got = burn(5, 5, &[rect(1.0, 1.0, 3.0, 3.0)], all);
        assert_eq!(
            got,
            [".....", ".11..", ".11..", ".....", "....."],
            "all_touched={all}"
        );
    }
}

#[test]
fn holes_are_not_burned() {
    let outer = [(0.0, 0.0), (6.0, 0.0), (6.0, 6.0), (0.0, 6.0)];
    let hole = [(2.0, 2.0), (4.0, 2.0), (4.0, 4.0), (2.0, 4.0)];
    let got = burn(6, 6, &[poly(&outer, &[&hole])], false);
    assert_eq!(
        got,
        ["111111", "111111", "11..11", "11..11", "111111", "111111"]
    );
    // Touched: the hole's edges lie on boundaries, so its pixels stay unburned.
    let got = burn(6, 6, &[poly(&outer, &[&hole])], true);
    assert_eq!(
        got,
        ["111111", "111111", "11..11", "11..11", "111111", "111111"]
    );
}

#[test]
fn slivers_narrower_than_a_pixel() {
    // 0.3 px wide, between the centres of column 4: no centre inside, every row touched.
    let sliver = rect(4.1, 0.0, 4.4, 5.0);
    assert_eq!(burn(6, 5, &[sliver.clone()], false), ["......"; 5]);
    assert_eq!(burn(6, 5, &[sliver], true), ["....1."; 5]);
}

#[test]
fn multipolygon_parts_are_burned_separately_as_a_union() {
    // Overlapping parts of one feature: GDAL burns each part, so the overlap is burned too
    // (one even-odd pass over all rings would leave it empty).
    let mp = geo_types::MultiPolygon(vec![rect(0.0, 0.0, 3.0, 3.0), rect(2.0, 2.0, 5.0, 5.0)]);
    let g = grid(5, 5);
    let flip = |p: &geo_types::Polygon<f64>| {
        let f = |r: &geo_types::LineString<f64>| {
            geo_types::LineString(
                r.0.iter()
                    .map(|c| geo_types::Coord {
                        x: c.x,
                        y: 5.0 - c.y,
                    })
                    .collect(),
            )
        };
        geo_types::Polygon::new(f(p.exterior()), vec![])
    };
    let mp = geo_types::MultiPolygon(mp.0.iter().map(flip).collect());
    let got = show(&rasterize(&g, &[(mp, 1u8)], 0, false), 5);
    assert_eq!(got, ["111..", "111..", "11111", "..111", "..111"]);
}

#[test]
fn later_shapes_win_where_they_overlap() {
    let got = burn(
        5,
        3,
        &[rect(0.0, 0.0, 3.0, 3.0), rect(2.0, 0.0, 5.0, 3.0)],
        false,
    );
    assert_eq!(got, ["11222", "11222", "11222"]);
}

#[test]
fn shapes_crossing_the_edge_burn_their_inside_part() {
    let got = burn(4, 3, &[rect(-5.0, 1.0, 2.3, 9.0)], false);
    assert_eq!(got, ["....", "11..", "11.."]);
    let got = burn(4, 3, &[rect(-5.0, 1.0, 2.3, 9.0)], true);
    assert_eq!(got, ["....", "111.", "111."]);
}

#[test]
fn a_triangle_by_hand() {
    // (0,0) (4,0) (0,4): centres with x + y < 4 inside; on the hypotenuse (x + y = 4,
    // centres (0.5, 3.5), (1.5, 2.5), …) the edge is a right edge of its row: inside.
    let got = burn(
        4,
        4,
        &[poly(&[(0.0, 0.0), (4.0, 0.0), (0.0, 4.0)], &[])],
        false,
    );
    assert_eq!(got, ["1111", "111.", "11..", "1..."]);
}

#[test]
fn rotated_grids_burn_by_pixel_centres() {
    // A 90° rotated grid: column steps go down in y, row steps go right in x.
    let g = geom::SceneGrid::new(
        "r",
        3,
        2,
        [0.0, 0.0, 1.0, 3.0, -1.0, 0.0],
        geom::Crs::parse("EPSG:32648").unwrap(),
    )
    .unwrap();
    // Pixel (col, row) has centre x = row + 0.5, y = 3 − col − 0.5: x in [0, 1] covers row 0.
    let got = rasterize(&g, &[(multi(rect(0.0, 0.0, 1.0, 3.0)), 1u8)], 0, false);
    assert_eq!(show(&got, 3), ["111", "..."]);
}
