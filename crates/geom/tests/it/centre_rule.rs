//! The centre rule against a direct point-in-polygon test at every pixel centre, and the
//! all-touched rule against the pixels a polygon's area or boundary reaches, on random
//! polygons; and bands of rows against the whole raster.

use geo_types::{Coord, MultiPolygon, Polygon};
use geom::rasterize;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{grid, poly};

/// A random star-shaped polygon (simple), sometimes with a star-shaped hole around its
/// centre, in world coordinates of a north-up unit grid.
fn random_polygon(rng: &mut ChaCha8Rng, w: f64, h: f64) -> Polygon<f64> {
    let (cx, cy) = (
        rng.random_range(-5.0..w + 5.0),
        rng.random_range(-5.0..h + 5.0),
    );
    let n = rng.random_range(3..24);
    let mut angles: Vec<f64> = (0..n)
        .map(|_| rng.random_range(0.0..std::f64::consts::TAU))
        .collect();
    angles.sort_by(f64::total_cmp);
    angles.dedup();
    let r_min = rng.random_range(2.0..6.0);
    let outer: Vec<(f64, f64)> = angles
        .iter()
        .map(|a| {
            let r = rng.random_range(r_min..r_min + 20.0);
            (cx + r * a.cos(), cy + r * a.sin())
        })
        .collect();
    if outer.len() >= 3 && rng.random_bool(0.3) {
        let hole: Vec<(f64, f64)> = (0..6)
            .map(|k| {
                let a = k as f64 * std::f64::consts::TAU / 6.0;
                let r = r_min * 0.8;
                (cx + r * a.cos(), cy + r * a.sin())
            })
            .collect();
        return poly(&outer, &[&hole]);
    }
    poly(&outer, &[])
}

/// Even-odd crossing test, and the distance from `p` to the nearest edge.
fn inside_and_distance(p: &Polygon<f64>, x: f64, y: f64) -> (bool, f64) {
    let mut inside = false;
    let mut dist = f64::INFINITY;
    for ring in std::iter::once(p.exterior()).chain(p.interiors()) {
        for w in ring.0.windows(2) {
            let (a, b) = (w[0], w[1]);
            if (a.y > y) != (b.y > y) && x < (b.x - a.x) * (y - a.y) / (b.y - a.y) + a.x {
                inside = !inside;
            }
            dist = dist.min(segment_distance(a, b, x, y));
        }
    }
    (inside, dist)
}

fn segment_distance(a: Coord<f64>, b: Coord<f64>, x: f64, y: f64) -> f64 {
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    let len2 = dx * dx + dy * dy;
    let t = if len2 == 0.0 {
        0.0
    } else {
        (((x - a.x) * dx + (y - a.y) * dy) / len2).clamp(0.0, 1.0)
    };
    ((a.x + t * dx - x).powi(2) + (a.y + t * dy - y).powi(2)).sqrt()
}

/// Whether the segment comes within `eps` of the square `[x0, x0+1] × [y0, y0+1]`
/// (Liang–Barsky clipping against the grown square).
fn segment_reaches(a: Coord<f64>, b: Coord<f64>, x0: f64, y0: f64, eps: f64) -> bool {
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    for (p, q) in [
        (-dx, a.x - (x0 - eps)),
        (dx, x0 + 1.0 + eps - a.x),
        (-dy, a.y - (y0 - eps)),
        (dy, y0 + 1.0 + eps - a.y),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    t0 <= t1
}

#[test]
fn centre_rule_equals_point_in_polygon_at_pixel_centres() {
    let (w, h) = (48usize, 40usize);
    let g = grid(w, h);
    let mut rng = ChaCha8Rng::seed_from_u64(28);
    let (mut checked, mut burned, mut ambiguous) = (0, 0, 0);
    for _ in 0..300 {
        let p = random_polygon(&mut rng, w as f64, h as f64);
        let got = rasterize(&g, &[(MultiPolygon(vec![p.clone()]), 1u8)], 0, false);
        for r in 0..h {
            for c in 0..w {
                // The centre of pixel (c, r) in world coordinates.
                let (x, y) = (c as f64 + 0.5, h as f64 - r as f64 - 0.5);
                let (inside, dist) = inside_and_distance(&p, x, y);
                if dist < 1e-9 {
                    ambiguous += 1; // on an edge: GDAL's tie rule, covered in rules.rs
                    continue;
                }
                checked += 1;
                burned += inside as usize;
                assert_eq!(got[r * w + c] == 1, inside, "pixel ({c}, {r}) of {p:?}");
            }
        }
    }
    assert!(
        burned > 20_000 && checked > 500_000,
        "{burned} of {checked}"
    );
    assert!(ambiguous < 100, "{ambiguous}");
}

#[test]
fn all_touched_burns_the_pixels_a_polygon_reaches_and_no_other() {
    let (w, h) = (40usize, 32usize);
    let g = grid(w, h);
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    let mut tested = 0;
    while tested < 200 {
        let p = random_polygon(&mut rng, w as f64, h as f64);
        // GDAL draws an edge within 0.01 px of vertical or horizontal as one column or row,
        // which may miss a neighbour it grazes: such polygons are left to the GDAL comparison.
        let near_axis = p
            .exterior()
            .0
            .windows(2)
            .chain(p.interiors().iter().flat_map(|r| r.0.windows(2)))
            .any(|e| (e[1].x - e[0].x).abs() < 0.02 || (e[1].y - e[0].y).abs() < 0.02);
        if near_axis {
            continue;
        }
        tested += 1;
        let centre = rasterize(&g, &[(MultiPolygon(vec![p.clone()]), 1u8)], 0, false);
        let touched = rasterize(&g, &[(MultiPolygon(vec![p.clone()]), 1u8)], 0, true);
        for r in 0..h {
            for c in 0..w {
                let (x0, y0) = (c as f64, h as f64 - r as f64 - 1.0);
                let edges = std::iter::once(p.exterior())
                    .chain(p.interiors())
                    .flat_map(|ring| ring.0.windows(2));
                let crosses = edges
                    .clone()
                    .any(|e| segment_reaches(e[0], e[1], x0, y0, -1e-3));
                let near = edges
                    .clone()
                    .any(|e| segment_reaches(e[0], e[1], x0, y0, 1e-3));
                let (inside, _) = inside_and_distance(&p, x0 + 0.5, y0 + 0.5);
                let i = r * w + c;
                // Centre pixels are always burned; a pixel an edge passes well through is
                // burned; a burned pixel holds the polygon or is reached by an edge.
                if centre[i] == 1 || crosses {
                    assert_eq!(touched[i], 1, "pixel ({c}, {r}) of {p:?}");
                }
                if touched[i] == 1 {
                    assert!(inside || near, "pixel ({c}, {r}) of {p:?}");
                }
            }
        }
    }
}

#[test]
fn bands_of_rows_equal_the_whole_raster() {
    use geom::{ClassMapping, Crs, LabelOptions, Labels, Layer, Overlap, Unlabelled};
    let (w, h) = (50usize, 45usize);
    let g = grid(w, h);
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let features: Vec<geom::Feature> = (0..60)
        .map(|i| geom::Feature {
            id: format!("#{i}"),
            geometry: MultiPolygon(vec![random_polygon(&mut rng, w as f64, h as f64)]),
            attributes: vec![Some(format!("{}", i % 7 + 1))],
        })
        .collect();
    for all_touched in [false, true] {
        let shapes: Vec<_> = features
            .iter()
            .map(|f| {
                (
                    f.geometry.clone(),
                    f.attributes[0].as_ref().unwrap().parse::<u8>().unwrap(),
                )
            })
            .collect();
        let whole = rasterize(&g, &shapes, 0, all_touched);
        let layer = Layer::new(
            "random",
            Some(Crs::parse("EPSG:32648").unwrap()),
            vec!["c".into()],
            features.clone(),
        );
        let options = LabelOptions {
            classes: ClassMapping {
                field: Some("c".into()),
                rules: (1..=7).map(|c| (c, vec![c.to_string()])).collect(),
            },
            all_touched,
            overlap: Overlap::LaterWins,
            unlabelled: Unlabelled::Background(0),
        };
        let mut labels = Labels::new(vec![layer], None, options).unwrap();
        let mut on = labels.on_scene(&g).unwrap();
        for band in [1, 7, 16, h] {
            let mut out = Vec::new();
            let mut rows = vec![0u8; band * w];
            for r0 in (0..h).step_by(band) {
                let n = band.min(h - r0);
                on.burn_rows(r0, &mut rows[..n * w]).unwrap();
                out.extend_from_slice(&rows[..n * w]);
            }
            assert_eq!(out, whole, "band {band}, all_touched {all_touched}");
        }
    }
}
