//! GDAL's polygon rasterisation, reimplemented to give the same pixels: the pixel-centre
//! scanline fill of `GDALdllImageFilledPolygon` and the `ALL_TOUCHED` edge walk of
//! `GDALdllImageLineAllTouched` (GDAL `alg/llrasterize.cpp`), the ring orientation of
//! `GDALCollectRingsFromGeometry` (`alg/gdalrasterize.cpp`, with `OGRLineString::isClockwise`)
//! and the world → pixel step of `GDALInvGeoTransform`/`GDALGenImgProjTransform`
//! (`alg/gdaltransformer.cpp`). GDAL is MIT-licensed; this is a reimplementation of its
//! rules, checked pixel for pixel against `rasterio.features.rasterize` (GDAL 3.10) by
//! `verify/run.sh`.
//!
//! The rules, in pixel coordinates (column x, row y, pixel `(c, r)` spanning `[c, c+1) ×
//! [r, r+1)`):
//! - Centre rule: on the scanline through row centre `r + 0.5`, every non-horizontal edge with
//!   `y_low <= r + 0.5 < y_high` crosses at `x`, rounded to the column boundary
//!   `floor(x + 0.5)`; columns between successive boundaries (even-odd, all rings of one
//!   polygon together) are burned. A centre exactly on a left edge is outside, one exactly on a
//!   right edge inside. A horizontal edge lying exactly on a centre line is burned on its own
//!   when it runs right to left after the ring was turned clockwise in world coordinates.
//! - `all_touched`: the same fill, plus every pixel an edge passes through, edges lying on
//!   pixel boundaries (both ends within 1e-4 px) excepted; edges whose ends share a column or
//!   a row, or within 0.01 px of vertical or horizontal, are drawn as one column or one row.
//! - Coordinates are always those of the whole raster, so burning it a band of rows at a time
//!   gives the same pixels as burning it whole (GDAL's single chunk).
//!
//! NOTE: where GDAL writes an edge-walk pixel right of the raster's last column (a cell it
//! clips in x only approximately), it lands in the next row of its buffer; we drop such
//! pixels instead of reproducing the overflow.

use geo_types::Coord;

/// Both ends within this of a pixel boundary: the edge lies on it (GDAL's
/// `EPSILON_INTERSECT_ONLY`).
const ON_BOUNDARY: f64 = 1e-4;
/// Edges closer than this to vertical/horizontal are drawn as one column/row.
const AXIS_EPS: f64 = 0.01;
/// The smallest row step of the edge walk.
const MIN_ROW_STEP: f64 = 1e-9;
/// OGR's `isClockwise` pivot tolerance, in world units.
const ORIENTATION_EPS: f64 = 1e-5;

/// A north-up or rotated geotransform and its inverse, computed as `GDALInvGeoTransform` does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PixelTransform {
    inv: [f64; 6],
}

impl PixelTransform {
    /// `None` when the transform has a non-finite term or cannot be inverted.
    pub(crate) fn new(gt: [f64; 6]) -> Option<PixelTransform> {
        if gt.iter().any(|v| !v.is_finite()) {
            return None;
        }
        // No rotation: each axis on its own, as GDAL does to avoid the determinant.
        if gt[2] == 0.0 && gt[4] == 0.0 && gt[1] != 0.0 && gt[5] != 0.0 {
            return Some(PixelTransform {
                inv: [
                    -gt[0] / gt[1],
                    1.0 / gt[1],
                    0.0,
                    -gt[3] / gt[5],
                    0.0,
                    1.0 / gt[5],
                ],
            });
        }
        let det = gt[1] * gt[5] - gt[2] * gt[4];
        let magnitude = gt[1]
            .abs()
            .max(gt[2].abs())
            .max(gt[4].abs().max(gt[5].abs()));
        if det.abs() <= 1e-10 * magnitude * magnitude {
            return None;
        }
        let inv_det = 1.0 / det;
        Some(PixelTransform {
            inv: [
                (gt[2] * gt[3] - gt[0] * gt[5]) * inv_det,
                gt[5] * inv_det,
                -gt[2] * inv_det,
                (-gt[1] * gt[3] + gt[0] * gt[4]) * inv_det,
                -gt[4] * inv_det,
                gt[1] * inv_det,
            ],
        })
    }

    /// Pixel coordinates `(column, row)` of a world point, in GDAL's order of operations.
    pub(crate) fn to_pixel(&self, x: f64, y: f64) -> (f64, f64) {
        let t = &self.inv;
        (t[0] + x * t[1] + y * t[2], t[3] + x * t[4] + y * t[5])
    }
}

/// OGR's `isClockwise` on a closed ring (first point repeated last), y pointing up: the turn
/// at the lowest-rightmost vertex, or the shoelace sum when that vertex is ambiguous.
fn is_clockwise(p: &[Coord<f64>]) -> bool {
    let n = p.len();
    if n < 2 {
        return true;
    }
    let mut fallback = false;
    let mut v = 0;
    for i in 1..n - 1 {
        if p[i].y < p[v].y || (p[i].y == p[v].y && p[i].x > p[v].x) {
            v = i;
            fallback = false;
        } else if p[i].y == p[v].y && p[i].x == p[v].x {
            fallback = true;
        }
    }
    let near = |q: Coord<f64>| {
        (q.x - p[v].x).abs() < ORIENTATION_EPS && (q.y - p[v].y).abs() < ORIENTATION_EPS
    };
    let prev = if v == 0 { n - 2 } else { v - 1 };
    fallback |= near(p[prev]);
    let (dx0, dy0) = (p[prev].x - p[v].x, p[prev].y - p[v].y);
    let next = if v + 1 >= n - 1 { 0 } else { v + 1 };
    fallback |= near(p[next]);
    let (dx1, dy1) = (p[next].x - p[v].x, p[next].y - p[v].y);
    let cross = dx1 * dy0 - dx0 * dy1;
    if !fallback {
        if cross > 0.0 {
            return false;
        }
        if cross < 0.0 {
            return true;
        }
    }
    let mut sum = p[0].x * (p[1].y - p[n - 1].y);
    for i in 1..n - 1 {
        sum += p[i].x * (p[i + 1].y - p[i - 1].y);
    }
    sum += p[n - 1].x * (p[0].y - p[n - 2].y);
    sum < 0.0
}

/// One polygon (exterior and holes, closed rings) in pixel coordinates, each ring in the
/// orientation GDAL burns it.
#[derive(Clone, Debug)]
pub(crate) struct PixelPolygon {
    x: Vec<f64>,
    y: Vec<f64>,
    /// End (exclusive) of each ring in `x`/`y`.
    ring_ends: Vec<u32>,
    /// `[min_x, min_y, max_x, max_y]` in pixels.
    pub(crate) bbox: [f64; 4],
}

impl PixelPolygon {
    /// The polygon of `rings` (world coordinates, each closed), `None` when a pixel coordinate
    /// is not finite or no ring has two points.
    pub(crate) fn new(rings: &[&[Coord<f64>]], t: &PixelTransform) -> Option<PixelPolygon> {
        let total: usize = rings.iter().map(|r| r.len()).sum();
        let (mut x, mut y) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let mut ring_ends = Vec::with_capacity(rings.len());
        let mut bbox = [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ];
        for ring in rings {
            if ring.len() < 2 {
                continue;
            }
            let cw = is_clockwise(ring);
            let mut push = |c: &Coord<f64>| {
                let (px, py) = t.to_pixel(c.x, c.y);
                bbox = [
                    bbox[0].min(px),
                    bbox[1].min(py),
                    bbox[2].max(px),
                    bbox[3].max(py),
                ];
                x.push(px);
                y.push(py);
            };
            if cw {
                ring.iter().for_each(&mut push);
            } else {
                ring.iter().rev().for_each(&mut push);
            }
            ring_ends.push(x.len() as u32);
        }
        if x.is_empty() || !bbox.iter().all(|v| v.is_finite()) {
            return None;
        }
        Some(PixelPolygon {
            x,
            y,
            ring_ends,
            bbox,
        })
    }

    fn rings(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut start = 0;
        self.ring_ends.iter().map(move |&end| {
            let r = start..end as usize;
            start = end as usize;
            r
        })
    }

    /// Burns the polygon into `band` with `value`.
    pub(crate) fn burn<T: Copy>(
        &self,
        band: &mut Band<'_, T>,
        value: T,
        all_touched: bool,
        scratch: &mut Scratch,
    ) {
        let (w, h) = (band.width as f64, band.height as f64);
        let [x0, y0, x1, y1] = self.bbox;
        if x1 < 0.0 || x0 > w || y1 < 0.0 || y0 > h {
            return;
        }
        if all_touched {
            self.walk_edges(band, value);
        }
        self.fill(band, value, scratch);
    }

    fn fill<T: Copy>(&self, band: &mut Band<'_, T>, value: T, s: &mut Scratch) {
        // GDAL's row range: (int) of the extreme y, clamped to the raster; here also to the band.
        let miny = clamp_int(self.bbox[1]).max(0).max(band.first_row as i64);
        let maxy = clamp_int(self.bbox[3])
            .min(band.height as i64 - 1)
            .min((band.first_row + band.rows) as i64 - 1);
        if miny > maxy {
            return;
        }
        let max_col = band.width as i64 - 1;
        let (lo, hi) = (miny as f64 + 0.5, maxy as f64 + 0.5);
        s.edges.clear();
        s.horizontal.clear();
        for ring in self.rings() {
            // GDAL's edges: (last → first), then (i-1 → i); the first is degenerate for a
            // closed ring, as GDAL's is.
            let first = ring.start;
            for i in ring.clone() {
                let a = if i == first { ring.end - 1 } else { i - 1 };
                let (ya, yb) = (self.y[a], self.y[i]);
                if ya.max(yb) < lo || ya.min(yb) > hi {
                    continue;
                }
                if ya < yb {
                    s.edges.push(Edge::new(ya, yb, self.x[a], self.x[i]));
                } else if ya > yb {
                    s.edges.push(Edge::new(yb, ya, self.x[i], self.x[a]));
                } else if self.x[a] > self.x[i] {
                    s.horizontal.push([ya, self.x[i], self.x[a]]);
                }
            }
        }
        s.edges.sort_unstable_by(|p, q| p.y_low.total_cmp(&q.y_low));
        s.active.clear();
        let mut next = 0;
        for row in miny..=maxy {
            let dy = row as f64 + 0.5;
            while next < s.edges.len() && s.edges[next].y_low <= dy {
                s.active.push(s.edges[next]);
                next += 1;
            }
            s.active.retain(|e| dy < e.y_high);
            s.crossings.clear();
            for e in &s.active {
                let x = (dy - e.y_low) * e.dx / e.dy + e.x_low;
                s.crossings.push(clamp_int((x + 0.5).floor()));
            }
            s.crossings.sort_unstable();
            for pair in s.crossings.chunks_exact(2) {
                if pair[0] <= max_col && pair[1] > 0 {
                    band.span(row, pair[0], pair[1] - 1, value);
                }
            }
            for &[hy, xa, xb] in &s.horizontal {
                if hy == dy {
                    let (a, b) = (clamp_int((xa + 0.5).floor()), clamp_int((xb + 0.5).floor()));
                    if a <= max_col && b > 0 {
                        band.span(row, a, b - 1, value);
                    }
                }
            }
        }
    }

    fn walk_edges<T: Copy>(&self, band: &mut Band<'_, T>, value: T) {
        let (lo, hi) = (
            band.first_row as f64 - 1.0,
            (band.first_row + band.rows) as f64 + 1.0,
        );
        for ring in self.rings() {
            for j in ring.start + 1..ring.end {
                let (ya, yb) = (self.y[j - 1], self.y[j]);
                if ya.max(yb) < lo || ya.min(yb) > hi {
                    continue;
                }
                walk_edge((self.x[j - 1], ya), (self.x[j], yb), band, value);
            }
        }
    }
}

/// C's `(int)` of a double, saturating where C's is undefined.
fn clamp_int(v: f64) -> i64 {
    if v.is_nan() {
        return 0;
    }
    v.clamp(i32::MIN as f64, i32::MAX as f64) as i64
}

/// An edge with `y_low < y_high`; `dx`, `dy` are GDAL's `dx2 - dx1`, `dy2 - dy1`.
#[derive(Clone, Copy, Debug)]
struct Edge {
    y_low: f64,
    y_high: f64,
    x_low: f64,
    dx: f64,
    dy: f64,
}

impl Edge {
    fn new(y_low: f64, y_high: f64, x_low: f64, x_high: f64) -> Edge {
        Edge {
            y_low,
            y_high,
            x_low,
            dx: x_high - x_low,
            dy: y_high - y_low,
        }
    }
}

/// Buffers reused from polygon to polygon.
#[derive(Default)]
pub(crate) struct Scratch {
    edges: Vec<Edge>,
    active: Vec<Edge>,
    horizontal: Vec<[f64; 3]>,
    crossings: Vec<i64>,
}

/// Rows `first_row..first_row + rows` of a `width × height` raster, row-major.
pub(crate) struct Band<'a, T> {
    pub(crate) data: &'a mut [T],
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) first_row: usize,
    pub(crate) rows: usize,
}

impl<T: Copy> Band<'_, T> {
    /// Columns `c0..=c1` of raster row `row`, clipped to the raster and the band.
    fn span(&mut self, row: i64, c0: i64, c1: i64, value: T) {
        let (c0, c1) = (c0.max(0), c1.min(self.width as i64 - 1));
        let r = row - self.first_row as i64;
        if c0 > c1 || r < 0 || r >= self.rows as i64 {
            return;
        }
        let at = r as usize * self.width;
        self.data[at + c0 as usize..=at + c1 as usize].fill(value);
    }

    fn pixel(&mut self, row: i64, col: i64, value: T) {
        self.span(row, col, col, value);
    }
}

/// The pixels one edge passes through (one segment of `GDALdllImageLineAllTouched` with
/// `bIntersectOnly`), clipped as GDAL clips to the whole raster.
fn walk_edge<T: Copy>(p0: (f64, f64), p1: (f64, f64), band: &mut Band<'_, T>, value: T) {
    let (w, h) = (band.width as f64, band.height as f64);
    let (last_col, last_row) = (band.width as i64 - 1, band.height as i64 - 1);
    let ((mut x, mut y), (mut xe, mut ye)) = (p0, p1);
    if (y < 0.0 && ye < 0.0) || (y > h && ye > h) || (x < 0.0 && xe < 0.0) || (x > w && xe > w) {
        return;
    }
    // Far outside C's int range GDAL's behaviour is undefined; such an edge cannot be walked.
    let range = i32::MIN as f64..=i32::MAX as f64;
    if ![x, y, xe, ye].iter().all(|v| range.contains(v)) {
        return;
    }
    if x > xe {
        std::mem::swap(&mut x, &mut xe);
        std::mem::swap(&mut y, &mut ye);
    }
    let on_boundary = |v: f64| (v - v.round()).abs() < ON_BOUNDARY;
    if x.floor() == xe.floor() || (x - xe).abs() < AXIS_EPS {
        if on_boundary(x) && on_boundary(xe) {
            return;
        }
        if ye < y {
            std::mem::swap(&mut y, &mut ye);
        }
        let col = xe.floor() as i64;
        if col < 0 || col > last_col {
            return;
        }
        let first = (y.floor() as i64).max(0);
        let last = ((ye - ON_BOUNDARY).floor() as i64).min(last_row);
        let lo = first.max(band.first_row as i64);
        let hi = last.min((band.first_row + band.rows) as i64 - 1);
        for row in lo..=hi {
            band.pixel(row, col, value);
        }
        return;
    }
    if y.floor() == ye.floor() || (y - ye).abs() < AXIS_EPS {
        if on_boundary(y) && on_boundary(ye) {
            return;
        }
        let row = y.floor() as i64;
        if row < 0 || row > last_row {
            return;
        }
        let first = (x.floor() as i64).max(0);
        let last = ((xe - ON_BOUNDARY).floor() as i64).min(last_col);
        band.span(row, first, last, value);
        return;
    }
    let slope = (ye - y) / (xe - x);
    if xe > w {
        ye -= (xe - w) * slope;
        xe = w;
    }
    if x < 0.0 {
        y += (0.0 - x) * slope;
        x = 0.0;
    }
    if ye > y {
        if y < 0.0 {
            x += (0.0 - y) / slope;
            y = 0.0;
        }
        if ye >= h {
            // NOTE: GDAL moves the end this way (away from the raster); kept for the same steps.
            xe += (ye - h) / slope;
            if xe > w {
                xe = w;
            }
        }
    } else {
        if y >= h {
            x += (h - y) / slope;
            y = h;
        }
        if ye < 0.0 {
            xe -= (ye - 0.0) / slope;
        }
    }
    // NOTE: GDAL's y clip above can push the end far right of the raster (an edge leaving it
    // through the top with `ye < y`), and GDAL then walks those columns burning nothing; the
    // walk stops at the raster's right edge here, with the same pixels.
    let xe = xe.min(w);
    let (band_lo, band_hi) = (
        band.first_row as i64,
        (band.first_row + band.rows) as i64 - 1,
    );
    while x >= 0.0 && x < xe {
        let col = x.floor() as i64;
        let row = y.floor() as i64;
        if row >= 0 && row <= last_row && col <= last_col {
            band.pixel(row, col, value);
        }
        // Rows only move one way along an edge: past the band, nothing more lands in it.
        if (slope > 0.0 && row > band_hi) || (slope < 0.0 && row < band_lo) {
            break;
        }
        let mut step_x = (x + 1.0).floor() - x;
        let mut step_y = step_x * slope;
        if (y + step_y).floor() as i64 == row {
            x += step_x;
            y += step_y;
        } else if slope < 0.0 {
            step_y = row as f64 - y;
            if step_y > -MIN_ROW_STEP {
                step_y = -MIN_ROW_STEP;
            }
            step_x = step_y / slope;
            x += step_x;
            y += step_y;
        } else {
            step_y = (row + 1) as f64 - y;
            if step_y < MIN_ROW_STEP {
                step_y = MIN_ROW_STEP;
            }
            step_x = step_y / slope;
            x += step_x;
            y += step_y;
        }
    }
}
