//! Helpers shared by the integration tests: class maps, an independent flood fill, and exact
//! geometry checks on rings.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use raster::GeoRef;
use vector::{Polygonizer, Region};

/// A class map from rows of digits (`.` = nodata 255).
pub fn map(rows: &[&str]) -> (usize, usize, Vec<u8>) {
    let w = rows[0].len();
    let data = rows
        .iter()
        .flat_map(|r| {
            assert_eq!(r.len(), w);
            r.bytes().map(|b| if b == b'.' { 255 } else { b - b'0' })
        })
        .collect();
    (w, rows.len(), data)
}

/// A seeded random map of `classes` classes with blobs: each pixel copies its upper or left
/// neighbour with probability `keep`, else draws a class (nodata with probability `nodata`).
pub fn random_map(w: usize, h: usize, classes: u8, keep: f64, nodata: f64, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = vec![0u8; w * h];
    for r in 0..h {
        for c in 0..w {
            let v = if rng.random::<f64>() < keep && (r > 0 || c > 0) {
                if r == 0 || (c > 0 && rng.random::<bool>()) {
                    m[r * w + c - 1]
                } else {
                    m[(r - 1) * w + c]
                }
            } else if rng.random::<f64>() < nodata {
                255
            } else {
                rng.random_range(0..classes)
            };
            m[r * w + c] = v;
        }
    }
    m
}

/// Polygonizes `classes` pushing `chunk` rows at a time; also returns how many regions came
/// out of `push_rows` (rather than `finish`).
pub fn polygonize(
    w: usize,
    h: usize,
    classes: &[u8],
    selected: &[bool],
    chunk: usize,
) -> (Vec<Region>, usize) {
    let mut p = Polygonizer::new(w, h, selected.to_vec());
    let conf: Vec<f32> = classes
        .iter()
        .map(|&k| {
            if k == 255 {
                f32::NAN
            } else {
                0.5 + k as f32 / 100.0
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut r = 0;
    while r < h {
        let n = chunk.min(h - r);
        out.extend(p.push_rows(&classes[r * w..(r + n) * w], &conf[r * w..(r + n) * w]));
        r += n;
    }
    let streamed = out.len();
    out.extend(p.finish());
    (out, streamed)
}

/// Independent reference: 4-connected components by flood fill, as sorted (class, pixels).
pub fn flood_fill(w: usize, h: usize, classes: &[u8], selected: &[bool]) -> Vec<(u8, u64)> {
    let mut seen = vec![false; w * h];
    let mut out = Vec::new();
    for start in 0..w * h {
        let k = classes[start];
        if seen[start] || k == 255 || !selected.get(k as usize).copied().unwrap_or(false) {
            continue;
        }
        let mut stack = vec![start];
        seen[start] = true;
        let mut n = 0;
        while let Some(i) = stack.pop() {
            n += 1;
            let (r, c) = (i / w, i % w);
            let mut nb = Vec::new();
            if r > 0 {
                nb.push(i - w);
            }
            if r + 1 < h {
                nb.push(i + w);
            }
            if c > 0 {
                nb.push(i - 1);
            }
            if c + 1 < w {
                nb.push(i + 1);
            }
            for j in nb {
                if !seen[j] && classes[j] == k {
                    seen[j] = true;
                    stack.push(j);
                }
            }
        }
        out.push((k, n));
    }
    out.sort();
    out
}

/// Signed shoelace area of a closed ring (first point repeated last).
pub fn ring_area(ring: &[[f64; 2]]) -> f64 {
    ring.windows(2)
        .map(|w| w[0][0] * w[1][1] - w[1][0] * w[0][1])
        .sum::<f64>()
        / 2.0
}

/// A polygon's area: outer minus holes, whatever their orientation.
pub fn polygon_area(rings: &[Vec<[f64; 2]>]) -> f64 {
    let outer = ring_area(&rings[0]).abs();
    outer - rings[1..].iter().map(|r| ring_area(r).abs()).sum::<f64>()
}

fn orient(a: [f64; 2], b: [f64; 2], c: [f64; 2]) -> f64 {
    (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
}

fn on_seg(p: [f64; 2], a: [f64; 2], b: [f64; 2]) -> bool {
    orient(a, b, p) == 0.0
        && p[0] >= a[0].min(b[0])
        && p[0] <= a[0].max(b[0])
        && p[1] >= a[1].min(b[1])
        && p[1] <= a[1].max(b[1])
}

/// Segments `ab` and `cd` meet anywhere other than at a point that is an endpoint of both.
pub fn bad_contact(a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]) -> bool {
    let (o1, o2, o3, o4) = (
        orient(a, b, c),
        orient(a, b, d),
        orient(c, d, a),
        orient(c, d, b),
    );
    if o1 * o2 < 0.0 && o3 * o4 < 0.0 {
        return true; // proper crossing
    }
    // Touching: allowed only at shared endpoints, and never along a length.
    let shared = |p: [f64; 2]| (p == c || p == d) && (p == a || p == b);
    for (p, s, t) in [(c, a, b), (d, a, b), (a, c, d), (b, c, d)] {
        if on_seg(p, s, t) && !shared(p) {
            return true;
        }
    }
    // Collinear and sharing both endpoints (the same segment twice).
    (a == c && b == d) || (a == d && b == c)
}

/// Every ring closed, at least a triangle, with no two edges crossing or overlapping (they
/// may touch at a shared vertex, as rings do at saddle corners).
pub fn assert_valid(rings: &[Vec<[f64; 2]>]) {
    let mut segs = Vec::new();
    for ring in rings {
        assert!(ring.len() >= 4, "ring too short: {ring:?}");
        assert_eq!(ring[0], ring[ring.len() - 1], "ring not closed");
        for w in ring.windows(2) {
            assert_ne!(w[0], w[1], "zero-length edge in {ring:?}");
            segs.push((w[0], w[1]));
        }
    }
    for i in 0..segs.len() {
        for j in i + 1..segs.len() {
            let (a, b) = segs[i];
            let (c, d) = segs[j];
            let adjacent = b == c || d == a;
            if adjacent {
                // Consecutive edges may not fold back onto each other.
                let (p, q, r) = if b == c { (a, b, d) } else { (c, d, b) };
                let folds = orient(p, q, r) == 0.0
                    && (r[0] - q[0]) * (p[0] - q[0]) + (r[1] - q[1]) * (p[1] - q[1]) > 0.0;
                assert!(!folds, "edges fold back at {q:?}");
                continue;
            }
            assert!(
                !bad_contact(a, b, c, d),
                "edges {a:?}-{b:?} and {c:?}-{d:?} cross or overlap"
            );
        }
    }
}

/// A north-up georeferencing with these GeoKeys.
pub fn geo(transform: [f64; 6], keys: Vec<u16>) -> GeoRef {
    GeoRef {
        transform,
        geo_key_directory: Some(keys),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    }
}

/// The GeoKeys of a projected CRS by EPSG code.
pub fn projected_keys(code: u16) -> Vec<u16> {
    vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, code]
}

/// The GeoKeys of a geographic CRS by EPSG code.
pub fn geographic_keys(code: u16) -> Vec<u16> {
    vec![1, 1, 0, 2, 1024, 0, 1, 2, 2048, 0, 1, code]
}

/// Where a polygon's rings pass through one vertex more than once (saddle corners), the passes
/// must not cross: the two edges of one pass may not separate those of another around it.
pub fn assert_no_crossing_at_vertices(rings: &[Vec<[f64; 2]>]) {
    use std::collections::HashMap;
    type Pass = ([f64; 2], [f64; 2]);
    let mut passes: HashMap<(u64, u64), Vec<Pass>> = HashMap::new();
    for ring in rings {
        let n = ring.len() - 1;
        for i in 0..n {
            let v = ring[i];
            let prev = ring[(i + n - 1) % n];
            let next = ring[i + 1];
            passes
                .entry((v[0].to_bits(), v[1].to_bits()))
                .or_default()
                .push((prev, next));
        }
    }
    for (key, ps) in passes {
        if ps.len() < 2 {
            continue;
        }
        let v = [f64::from_bits(key.0), f64::from_bits(key.1)];
        let angle = |p: [f64; 2]| (p[1] - v[1]).atan2(p[0] - v[0]);
        for i in 0..ps.len() {
            for j in i + 1..ps.len() {
                let (a0, a1) = (angle(ps[i].0), angle(ps[i].1));
                let (lo, hi) = (a0.min(a1), a0.max(a1));
                let inside = |p: [f64; 2]| {
                    let t = angle(p);
                    t > lo && t < hi
                };
                let (b0, b1) = (inside(ps[j].0), inside(ps[j].1));
                assert_eq!(b0, b1, "rings cross at {v:?}: {:?} vs {:?}", ps[i], ps[j]);
            }
        }
    }
}

/// Across different polygons, edges may be identical (a shared boundary) or touch at
/// endpoints, but never cross or partly overlap.
pub fn assert_no_overlap_between(polys: &[Vec<Vec<[f64; 2]>>]) {
    let mut segs = Vec::new();
    for (k, p) in polys.iter().enumerate() {
        for ring in p {
            for w in ring.windows(2) {
                segs.push((k, w[0], w[1]));
            }
        }
    }
    for i in 0..segs.len() {
        for j in i + 1..segs.len() {
            let (ki, a, b) = segs[i];
            let (kj, c, d) = segs[j];
            if ki == kj || (a == d && b == c) || (a == c && b == d) {
                continue;
            }
            if bbox_apart(a, b, c, d) {
                continue;
            }
            assert!(
                !bad_contact(a, b, c, d),
                "polygons {ki} and {kj}: {a:?}-{b:?} vs {c:?}-{d:?}"
            );
        }
    }
}

fn bbox_apart(a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]) -> bool {
    a[0].max(b[0]) < c[0].min(d[0])
        || c[0].max(d[0]) < a[0].min(b[0])
        || a[1].max(b[1]) < c[1].min(d[1])
        || c[1].max(d[1]) < a[1].min(b[1])
}

/// No ring passes through a corner twice (OGC simple rings; rings may touch each other).
pub fn assert_simple_rings(rings: &[Vec<[f64; 2]>]) {
    for ring in rings {
        let mut seen: Vec<(u64, u64)> = ring[..ring.len() - 1]
            .iter()
            .map(|p| (p[0].to_bits(), p[1].to_bits()))
            .collect();
        seen.sort_unstable();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a ring passes a corner twice: {ring:?}");
    }
}
