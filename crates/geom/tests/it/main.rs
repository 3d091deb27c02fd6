//! geom's integration tests: one binary, one module per behaviour.

mod centre_rule;
mod crs;
mod fuzz;
mod labels;
mod readers;
mod rules;

use geo_types::{Coord, LineString, MultiPolygon, Polygon};
use geom::{Crs, SceneGrid};

/// A polygon from an exterior and holes given as `(x, y)` lists (closed here).
pub fn poly(exterior: &[(f64, f64)], holes: &[&[(f64, f64)]]) -> Polygon<f64> {
    let ring = |pts: &[(f64, f64)]| {
        let mut v: Vec<Coord<f64>> = pts.iter().map(|&(x, y)| Coord { x, y }).collect();
        v.push(v[0]);
        LineString(v)
    };
    Polygon::new(ring(exterior), holes.iter().map(|h| ring(h)).collect())
}

/// The rectangle `[x0, x1] × [y0, y1]`.
pub fn rect(x0: f64, y0: f64, x1: f64, y1: f64) -> Polygon<f64> {
    poly(&[(x0, y0), (x1, y0), (x1, y1), (x0, y1)], &[])
}

pub fn multi(p: Polygon<f64>) -> MultiPolygon<f64> {
    MultiPolygon(vec![p])
}

/// A north-up `w × h` grid of 1-unit pixels whose top-left corner is `(0, h)`: pixel
/// `(col, row)` spans x `[col, col+1]`, y `[h−row−1, h−row]`.
pub fn grid(w: usize, h: usize) -> SceneGrid {
    SceneGrid::new(
        "test",
        w,
        h,
        [0.0, 1.0, 0.0, h as f64, 0.0, -1.0],
        Crs::parse("EPSG:32648").unwrap(),
    )
    .unwrap()
}

/// Rows of a raster as strings of digits (`.` for 0), for readable comparisons.
pub fn show(raster: &[u8], w: usize) -> Vec<String> {
    raster
        .chunks(w)
        .map(|r| {
            r.iter()
                .map(|&v| {
                    if v == 0 {
                        '.'
                    } else {
                        char::from(b'0' + v % 10)
                    }
                })
                .collect()
        })
        .collect()
}
