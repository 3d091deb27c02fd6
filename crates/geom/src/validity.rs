//! Whether a polygon's rings cross themselves or each other (for the layer's report; the
//! rasteriser burns such polygons with GDAL's even-odd rule either way).

use geo_types::{Coord, Polygon};

/// Whether two edges of the polygon's rings cross or overlap, other than consecutive edges of
/// one ring meeting at their shared vertex. Rings touching at a vertex are not reported.
pub(crate) fn self_intersects(polygon: &Polygon<f64>) -> bool {
    // (ring, index in ring, ring length in edges, a, b)
    let mut segs: Vec<(usize, usize, usize, Coord<f64>, Coord<f64>)> = Vec::new();
    for (r, ring) in std::iter::once(polygon.exterior())
        .chain(polygon.interiors())
        .enumerate()
    {
        let n = ring.0.len().saturating_sub(1);
        for i in 0..n {
            let (a, b) = (ring.0[i], ring.0[i + 1]);
            if a != b {
                segs.push((r, i, n, a, b));
            }
        }
    }
    // Sweep over x: only segments whose x ranges overlap are compared.
    segs.sort_by(|p, q| p.3.x.min(p.4.x).total_cmp(&q.3.x.min(q.4.x)));
    for i in 0..segs.len() {
        let (ri, ii, ni, a, b) = segs[i];
        let max_x = a.x.max(b.x);
        for &(rj, ij, _, c, d) in &segs[i + 1..] {
            if c.x.min(d.x) > max_x {
                break;
            }
            let adjacent = ri == rj && (ii.abs_diff(ij) == 1 || ii.abs_diff(ij) == ni - 1);
            if crosses(a, b, c, d, adjacent) {
                return true;
            }
        }
    }
    false
}

fn orient(a: Coord<f64>, b: Coord<f64>, c: Coord<f64>) -> f64 {
    (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x)
}

/// A proper crossing, or a collinear overlap of positive length (adjacent edges folding
/// back on themselves included).
fn crosses(a: Coord<f64>, b: Coord<f64>, c: Coord<f64>, d: Coord<f64>, adjacent: bool) -> bool {
    let (o1, o2) = (orient(a, b, c), orient(a, b, d));
    let (o3, o4) = (orient(c, d, a), orient(c, d, b));
    if o1 == 0.0 && o2 == 0.0 {
        // Collinear: overlapping by more than a point?
        let (u, v) = if (b.x - a.x).abs() >= (b.y - a.y).abs() {
            ((a.x.min(b.x), a.x.max(b.x)), (c.x.min(d.x), c.x.max(d.x)))
        } else {
            ((a.y.min(b.y), a.y.max(b.y)), (c.y.min(d.y), c.y.max(d.y)))
        };
        return u.0.max(v.0) < u.1.min(v.1);
    }
    if adjacent {
        return false;
    }
    (o1 > 0.0) != (o2 > 0.0)
        && o1 != 0.0
        && o2 != 0.0
        && (o3 > 0.0) != (o4 > 0.0)
        && o3 != 0.0
        && o4 != 0.0
}
