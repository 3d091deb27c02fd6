//! Topology-preserving Douglas–Peucker on pixel-edge rings.
//!
//! Each ring is cut into arcs at the vertices that must stay: where the class on the other side
//! changes, and saddle corners. Arcs along the image border are left as they are. Two regions of one class never share an edge under
//! 4-connectivity, so a shared boundary is one arc, seen from both sides with the same
//! vertices; a closed arc (a ring with one neighbour) is cut at its lexicographically smallest
//! and largest corners, which both sides also agree on. Each arc is simplified in a canonical
//! direction (from its smaller end), so both sides get the same points.
//!
//! A shortcut (chord) is taken only when every dropped corner is within the tolerance and the
//! area between the chord and the pixel edges it replaces holds no pixel corner besides those
//! on the edges themselves. Every vertex of every ring is a pixel corner, so no other boundary
//! can pass through that area: simplified arcs never cross each other or themselves, without
//! looking at the neighbours (which a stream may not have yet). The price: detail more than
//! about a pixel deep is kept even when it is within the tolerance, and each arc keeps at least
//! one inner point (see [`simplify_arc`]).

use crate::polygonize::{OUTSIDE, Region};
use crate::rings::shoelace2;

/// The region's rings (without the closing repeat), simplified with tolerance `tol` in the
/// metric given by `scale(row) = (x, y)` units per pixel step.
pub(crate) fn simplify_region(
    region: &Region,
    tol: f64,
    scale: &dyn Fn(f64) -> (f64, f64),
) -> Vec<Vec<[i64; 2]>> {
    region
        .rings
        .iter()
        .zip(&region.neighbours)
        .zip(&region.saddle)
        .map(|((ring, nb), sad)| {
            let pts: Vec<[i64; 2]> = ring[..ring.len() - 1]
                .iter()
                .map(|p| [p[0] as i64, p[1] as i64])
                .collect();
            simplify_ring(&pts, nb, sad, tol, scale)
        })
        .collect()
}

fn simplify_ring(
    pts: &[[i64; 2]],
    nb: &[u16],
    saddle: &[bool],
    tol: f64,
    scale: &dyn Fn(f64) -> (f64, f64),
) -> Vec<[i64; 2]> {
    let n = pts.len();
    let cut: Vec<usize> = (0..n)
        .filter(|&i| saddle[i] || nb[(i + n - 1) % n] != nb[i])
        .collect();
    // Arcs as index runs (inclusive ends, wrapping), closed ones cut at their largest corner.
    let start = match cut.first() {
        Some(&s) => s,
        None => (0..n).min_by_key(|&i| pts[i]).unwrap(),
    };
    let cuts = if cut.is_empty() { vec![start] } else { cut };
    let mut out = Vec::with_capacity(n);
    for (c, &a) in cuts.iter().enumerate() {
        let b = cuts[(c + 1) % cuts.len()];
        let len = if b > a { b - a } else { b + n - a };
        let arc: Vec<[i64; 2]> = (0..=len).map(|k| pts[(a + k) % n]).collect();
        if nb[a] == OUTSIDE {
            // The image border stays as it is: only its corners turn, and cutting them would
            // uncover the image.
            out.extend_from_slice(&arc[..len]);
        } else if arc[0] == arc[len] {
            let m = (1..len).max_by_key(|&k| arc[k]).unwrap();
            let first = simplify_arc(&arc[..=m], tol, scale, true);
            out.extend_from_slice(&first[..first.len() - 1]);
            let second = simplify_arc(&arc[m..], tol, scale, true);
            out.extend_from_slice(&second[..second.len() - 1]);
        } else {
            let s = simplify_arc(&arc, tol, scale, true);
            out.extend_from_slice(&s[..s.len() - 1]);
        }
    }
    let mut distinct = out.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 3 || shoelace2(out.iter().copied()) == 0 {
        // NOTE: a ring that would collapse keeps its pixel edges.
        return pts.to_vec();
    }
    out
}

/// Douglas–Peucker on one arc, run from its lexicographically smaller end; `keep_one` keeps at
/// least one inner point (its farthest from the chord).
///
/// Rings keep one inner point per arc: two arcs of one ring may join the same two corners (a
/// one-pixel region has two arcs, one per neighbour), and were both reduced to their chord the
/// ring would collapse; a ring-level repair could not be mirrored by the neighbours, which see
/// only one of the arcs. With an inner point kept per arc, no two arcs share a segment.
fn simplify_arc(
    arc: &[[i64; 2]],
    tol: f64,
    scale: &dyn Fn(f64) -> (f64, f64),
    keep_one: bool,
) -> Vec<[i64; 2]> {
    let flip = arc[0] > arc[arc.len() - 1];
    let canon: Vec<[i64; 2]> = if flip {
        arc.iter().rev().copied().collect()
    } else {
        arc.to_vec()
    };
    let (sx, sy) = scale(canon[0][1] as f64);
    let mut keep = vec![false; canon.len()];
    keep[0] = true;
    keep[canon.len() - 1] = true;
    let mut stack = vec![(0, canon.len() - 1)];
    while let Some((i, j)) = stack.pop() {
        if j <= i + 1 {
            continue;
        }
        let (a, b) = (canon[i], canon[j]);
        let (m, d) = (i + 1..j)
            .map(|k| (k, seg_dist(canon[k], a, b, sx, sy)))
            .fold((i + 1, -1.0), |best, x| if x.1 > best.1 { x } else { best });
        let whole = i == 0 && j == canon.len() - 1;
        if d <= tol && !(keep_one && whole) && sweeps_no_corner(&canon[i..=j]) {
            continue;
        }
        keep[m] = true;
        stack.push((i, m));
        stack.push((m, j));
    }
    let mut s: Vec<[i64; 2]> = canon
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(p, _)| *p)
        .collect();
    if flip {
        s.reverse();
    }
    s
}

/// Distance from `p` to the segment `a`–`b`, pixel steps scaled by `(sx, sy)`.
fn seg_dist(p: [i64; 2], a: [i64; 2], b: [i64; 2], sx: f64, sy: f64) -> f64 {
    let f = |q: [i64; 2]| [q[0] as f64 * sx, q[1] as f64 * sy];
    let (p, a, b) = (f(p), f(a), f(b));
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let l2 = dx * dx + dy * dy;
    let t = if l2 == 0.0 {
        0.0
    } else {
        (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / l2).clamp(0.0, 1.0)
    };
    (p[0] - a[0] - t * dx).hypot(p[1] - a[1] - t * dy)
}

/// True when the area between the chord `sub[0]`–`sub[last]` and the polyline `sub` holds no
/// pixel corner other than those on the polyline.
fn sweeps_no_corner(sub: &[[i64; 2]]) -> bool {
    let (a, b) = (sub[0], sub[sub.len() - 1]);
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let cross = |p: [i64; 2]| (p[0] - a[0]) * dy - (p[1] - a[1]) * dx;
    let max_cross = sub.iter().map(|&p| cross(p).abs()).max().unwrap_or(0);
    let (mut lo, mut hi) = (sub[0], sub[0]);
    for p in sub {
        lo = [lo[0].min(p[0]), lo[1].min(p[1])];
        hi = [hi[0].max(p[0]), hi[1].max(p[1])];
    }
    // Candidates: corners in the bounding box within the slab |cross| ≤ max_cross.
    let horizontal = dx.abs() >= dy.abs();
    let (u0, u1, v0, v1) = if horizontal {
        (lo[0], hi[0], lo[1], hi[1])
    } else {
        (lo[1], hi[1], lo[0], hi[0])
    };
    let (du, dv, au, av) = if horizontal {
        (dx, dy, a[0], a[1])
    } else {
        (dy, dx, a[1], a[0])
    };
    for u in u0..=u1 {
        // v on the chord's line at u, and the slab's half-width along v.
        let v_line = av as f64 + (u - au) as f64 * dv as f64 / du as f64;
        let half = max_cross as f64 / (du.abs() as f64);
        let vlo = v0.max((v_line - half).floor() as i64);
        let vhi = v1.min((v_line + half).ceil() as i64);
        for v in vlo..=vhi {
            let q = if horizontal { [u, v] } else { [v, u] };
            if cross(q).abs() > max_cross || on_polyline(q, sub) {
                continue;
            }
            if on_segment(q, a, b) || inside(q, sub) {
                return false;
            }
        }
    }
    true
}

fn on_segment(q: [i64; 2], a: [i64; 2], b: [i64; 2]) -> bool {
    let c = (q[0] - a[0]) * (b[1] - a[1]) - (q[1] - a[1]) * (b[0] - a[0]);
    c == 0
        && q[0] >= a[0].min(b[0])
        && q[0] <= a[0].max(b[0])
        && q[1] >= a[1].min(b[1])
        && q[1] <= a[1].max(b[1])
}

fn on_polyline(q: [i64; 2], sub: &[[i64; 2]]) -> bool {
    sub.windows(2).any(|w| on_segment(q, w[0], w[1]))
}

/// Even–odd test of `q` (on no edge) against the polygon `sub` closed by its chord.
fn inside(q: [i64; 2], poly: &[[i64; 2]]) -> bool {
    let n = poly.len();
    let mut odd = false;
    for i in 0..n {
        let (p1, p2) = (poly[i], poly[(i + 1) % n]);
        if (p1[1] > q[1]) != (p2[1] > q[1]) {
            // q is left of the edge's crossing point: (q.x − p1.x)·Δy < (q.y − p1.y)·Δx, signed.
            let lhs = (q[0] - p1[0]) * (p2[1] - p1[1]);
            let rhs = (q[1] - p1[1]) * (p2[0] - p1[0]);
            if (p2[1] > p1[1] && lhs < rhs) || (p2[1] < p1[1] && lhs > rhs) {
                odd = !odd;
            }
        }
    }
    odd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staircase_becomes_its_diagonal() {
        let stairs = [[0, 0], [1, 0], [1, 1], [2, 1], [2, 2], [3, 2], [3, 3]];
        let s = simplify_arc(&stairs, 1.0, &|_| (1.0, 1.0), false);
        assert_eq!(s, vec![[0, 0], [3, 3]]);
    }

    #[test]
    fn a_bump_two_pixels_deep_is_kept_even_within_the_tolerance() {
        // The chord would sweep over corners (1,1) and (2,1), which other boundaries may use.
        let bump = [[0, 0], [0, 2], [3, 2], [3, 0]];
        let s = simplify_arc(&bump, 5.0, &|_| (1.0, 1.0), false);
        assert_eq!(s, bump.to_vec());
    }

    #[test]
    fn both_directions_give_the_same_points() {
        let arc = [
            [0, 0],
            [1, 0],
            [1, 1],
            [3, 1],
            [3, 2],
            [6, 2],
            [6, 3],
            [7, 3],
        ];
        let fwd = simplify_arc(&arc, 0.8, &|_| (1.0, 1.0), false);
        let rev: Vec<_> = arc.iter().rev().copied().collect();
        let mut back = simplify_arc(&rev, 0.8, &|_| (1.0, 1.0), false);
        back.reverse();
        assert_eq!(fwd, back);
        assert!(fwd.len() < arc.len());
    }
}
