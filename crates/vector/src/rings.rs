//! Joining a complete region's boundary edges into rings.

use std::collections::HashSet;

use crate::polygonize::{Edge, Open, Region};

/// Joins a complete region's edges into closed rings, outer ring first.
pub(crate) fn assemble(reg: Open) -> Region {
    let Open {
        class,
        pixels,
        confidence_sum,
        confidence_count,
        edges,
        saddles,
        ..
    } = reg;
    let mut rings: Vec<Ring> = trace_rings(edges, &saddles)
        .into_iter()
        .flat_map(split_pinches)
        .collect();
    // Outer ring first: the one with the largest positive shoelace sum.
    let area = |r: &Ring| shoelace2(r.iter().map(|p| [p.0[0] as i64, p.0[1] as i64]));
    let outer = (0..rings.len())
        .max_by_key(|&i| area(&rings[i]))
        .expect("a region has at least one ring");
    rings.swap(0, outer);
    let mut out = Region {
        class,
        rings: Vec::with_capacity(rings.len()),
        pixels,
        confidence_sum,
        confidence_count,
        neighbours: Vec::with_capacity(rings.len()),
        saddle: Vec::with_capacity(rings.len()),
    };
    for ring in rings {
        let mut pts: Vec<[f64; 2]> = Vec::with_capacity(ring.len() + 1);
        pts.extend(ring.iter().map(|p| [p.0[0] as f64, p.0[1] as f64]));
        pts.push(pts[0]);
        out.rings.push(pts);
        out.neighbours.push(ring.iter().map(|p| p.1).collect());
        out.saddle.push(ring.iter().map(|p| p.2).collect());
    }
    out
}

/// A ring as (corner, class across the edge leaving it, saddle corner).
type Ring = Vec<([u32; 2], u16, bool)>;

/// Joins edges into rings, each walked with the interior on its right (rows going down).
fn trace_rings(edges: Vec<Edge>, saddles: &[[u32; 2]]) -> Vec<Ring> {
    // Edges by start corner (at most two leave a corner: two at a saddle).
    let key = |v: [u32; 2]| (u64::from(v[1]) << 32) | u64::from(v[0]);
    let mut by_start: Vec<(u64, u32)> = edges
        .iter()
        .enumerate()
        .map(|(i, e)| (key(e.from), i as u32))
        .collect();
    by_start.sort_unstable();
    let leaving = |v: [u32; 2]| {
        let k = key(v);
        let at = by_start.partition_point(|e| e.0 < k);
        by_start[at..]
            .iter()
            .take_while(move |e| e.0 == k)
            .map(|e| e.1 as usize)
    };
    let saddles: HashSet<[u32; 2]> = saddles.iter().copied().collect();
    let mut used = vec![false; edges.len()];
    let mut rings = Vec::new();
    let mut pts: Vec<([u32; 2], u16)> = Vec::new();
    for start in 0..edges.len() {
        if used[start] {
            continue;
        }
        // Walk the ring: (vertex, the neighbour class of the edge leaving it).
        pts.clear();
        let mut i = start;
        loop {
            used[i] = true;
            let e = edges[i];
            pts.push((e.from, e.other));
            let d = e.dir();
            let mut out = leaving(e.to);
            let next = match (out.next(), out.next()) {
                (Some(a), None) => a,
                // A saddle corner whose two diagonal pixels are this region's (joined
                // elsewhere, 4-connectivity): turn left, so the ring goes on along the other
                // pixel and never passes the corner twice. An outer ring and a hole (or two
                // holes) then touch there, as OGC simple features allow; self-touching rings
                // ("inverted holes") would not be valid there.
                (Some(a), Some(b)) => {
                    if edges[a].dir() == [d[1], -d[0]] {
                        a
                    } else {
                        b
                    }
                }
                _ => unreachable!("a boundary corner has an edge leaving it"),
            };
            if used[next] {
                break; // back at the first edge
            }
            i = next;
        }
        rings.push(drop_straight_corners(&pts, &saddles));
    }
    rings
}

/// Splits a ring that passes a corner twice into rings that pass it once.
///
/// Under 4-connectivity a region can close a loop through a saddle corner (its two diagonal
/// pixels are joined elsewhere), enclosing background that touches the outside only at that
/// corner. The traced ring then pinches there, which OGC simple features (GEOS, shapely,
/// GDAL) call a self-intersection; the valid form of the same area is an outer ring and a hole
/// that touch at the corner. Each loop between two visits becomes its own ring; the shoelace
/// sign then says which is the outer ring and which are holes.
fn split_pinches(ring: Ring) -> Vec<Ring> {
    let mut out = Vec::new();
    let mut stack = vec![ring];
    while let Some(ring) = stack.pop() {
        let mut seen: std::collections::HashMap<[u32; 2], usize> =
            std::collections::HashMap::with_capacity(ring.len());
        let pinch = ring
            .iter()
            .enumerate()
            .find_map(|(j, p)| seen.insert(p.0, j).map(|i| (i, j)));
        match pinch {
            // The loop i..j starts and ends at the corner; what's left goes on from j.
            Some((i, j)) => {
                let inner = ring[i..j].to_vec();
                let mut rest = ring[j..].to_vec();
                rest.extend_from_slice(&ring[..i]);
                stack.push(inner);
                stack.push(rest);
            }
            None => out.push(ring),
        }
    }
    out
}

/// Drops vertices where the ring goes straight on with the same neighbour (and no saddle).
fn drop_straight_corners(pts: &[([u32; 2], u16)], saddles: &HashSet<[u32; 2]>) -> Ring {
    let n = pts.len();
    let p = |i: usize| {
        let v = pts[i % n].0;
        [v[0] as i64, v[1] as i64]
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (a, b, c) = (p(i + n - 1), p(i), p(i + 1));
        let straight = (b[0] - a[0]) * (c[1] - b[1]) == (b[1] - a[1]) * (c[0] - b[0]);
        let same_other = pts[(i + n - 1) % n].1 == pts[i].1;
        let saddle = saddles.contains(&pts[i].0);
        if !(straight && same_other && !saddle) {
            out.push((pts[i].0, pts[i].1, saddle));
        }
    }
    out.shrink_to_fit();
    out
}

/// Twice the signed shoelace area of a closed ring (without the repeated point).
pub(crate) fn shoelace2(pts: impl Iterator<Item = [i64; 2]> + Clone) -> i64 {
    let first = pts.clone().next();
    let mut prev: Option<[i64; 2]> = None;
    let mut s = 0;
    for p in pts {
        if let Some(q) = prev {
            s += q[0] * p[1] - p[0] * q[1];
        }
        prev = Some(p);
    }
    if let (Some(q), Some(p)) = (prev, first) {
        s += q[0] * p[1] - p[0] * q[1];
    }
    s
}
