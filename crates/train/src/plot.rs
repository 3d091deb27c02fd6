//! Minimal PNG line plots and overlays, drawn into rasters (no font or system library needed).

use tiles::{Raster, RasterData};

/// An RGB canvas.
pub(crate) struct Canvas {
    pub w: usize,
    pub h: usize,
    pub px: Vec<u8>,
}

impl Canvas {
    pub fn new(w: usize, h: usize) -> Self {
        Self {
            w,
            h,
            px: vec![255; w * h * 3],
        }
    }

    pub fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = (y as usize * self.w + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    /// A line of `thick` pixels between two points (Bresenham).
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: [u8; 3], thick: i64) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            for ox in 0..thick {
                for oy in 0..thick {
                    self.set(x + ox - thick / 2, y + oy - thick / 2, c);
                }
            }
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text in a 3×5 pixel font, scaled by `scale` (digits, `.`, `-`, `e` and a few letters).
    pub fn text(&mut self, x: i64, y: i64, s: &str, c: [u8; 3], scale: i64) {
        let mut cx = x;
        for ch in s.chars() {
            let glyph = glyph(ch);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..3 {
                    if bits >> (2 - col) & 1 == 1 {
                        for oy in 0..scale {
                            for ox in 0..scale {
                                self.set(cx + col * scale + ox, y + row as i64 * scale + oy, c);
                            }
                        }
                    }
                }
            }
            cx += 4 * scale;
        }
    }

    pub fn into_raster(self) -> Raster {
        Raster::new(self.w, self.h, 3, RasterData::U8(self.px)).expect("canvas size")
    }
}

fn glyph(c: char) -> [u8; 5] {
    match c.to_ascii_lowercase() {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '-' => [0, 0, 7, 0, 0],
        'e' => [7, 4, 7, 4, 7],
        'l' => [4, 4, 4, 4, 7],
        'o' => [0, 7, 5, 5, 7],
        's' => [7, 4, 7, 1, 7],
        'm' => [5, 7, 7, 5, 5],
        'i' => [2, 0, 2, 2, 2],
        'u' => [0, 5, 5, 5, 7],
        't' => [2, 7, 2, 2, 3],
        'r' => [0, 6, 5, 4, 4],
        'a' => [0, 7, 1, 7, 7],
        'n' => [0, 6, 5, 5, 5],
        'v' => [0, 5, 5, 5, 2],
        'p' => [7, 5, 7, 4, 4],
        'c' => [0, 7, 4, 4, 7],
        'h' => [4, 4, 7, 5, 5],
        ':' => [0, 2, 0, 2, 0],
        _ => [0, 0, 0, 0, 0],
    }
}

/// Colours of the series, in order.
pub(crate) const SERIES: [[u8; 3]; 4] =
    [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40]];

/// A line chart of `series` (name, points `(x, y)`), with a title, axis ranges and a legend.
pub(crate) fn line_chart(title: &str, series: &[(&str, Vec<(f64, f64)>)]) -> Raster {
    let (w, h) = (640usize, 400usize);
    let (left, right, top, bottom) = (70i64, 20i64, 40i64, 40i64);
    let mut c = Canvas::new(w, h);
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .filter(|p| p.1.is_finite())
        .collect();
    c.text(left, 10, title, [0, 0, 0], 3);
    let (x0, x1) = bounds(pts.iter().map(|p| p.0));
    let (y0, y1) = bounds(pts.iter().map(|p| p.1));
    let (pw, ph) = (w as i64 - left - right, h as i64 - top - bottom);
    let map = |x: f64, y: f64| {
        (
            left + ((x - x0) / (x1 - x0) * pw as f64) as i64,
            top + ph - ((y - y0) / (y1 - y0) * ph as f64) as i64,
        )
    };
    for k in 0..=4 {
        let fy = y0 + (y1 - y0) * k as f64 / 4.0;
        let (_, py) = map(x0, fy);
        c.line((left, py), (left + pw, py), [225, 225, 225], 1);
        c.text(4, py - 5, &short(fy), [60, 60, 60], 2);
        let fx = x0 + (x1 - x0) * k as f64 / 4.0;
        let (px, _) = map(fx, y0);
        c.text(px - 8, top + ph + 10, &short(fx), [60, 60, 60], 2);
    }
    c.line((left, top), (left, top + ph), [0, 0, 0], 1);
    c.line((left, top + ph), (left + pw, top + ph), [0, 0, 0], 1);
    for (i, (name, s)) in series.iter().enumerate() {
        let col = SERIES[i % SERIES.len()];
        let finite: Vec<(f64, f64)> = s.iter().copied().filter(|p| p.1.is_finite()).collect();
        for pair in finite.windows(2) {
            c.line(map(pair[0].0, pair[0].1), map(pair[1].0, pair[1].1), col, 2);
        }
        if finite.len() == 1 {
            let (x, y) = map(finite[0].0, finite[0].1);
            c.line((x - 3, y), (x + 3, y), col, 3);
        }
        let lx = left + pw - 150;
        let ly = top + 10 + i as i64 * 18;
        c.line((lx, ly + 5), (lx + 20, ly + 5), col, 3);
        c.text(lx + 28, ly, name, [0, 0, 0], 2);
    }
    c.into_raster()
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in v {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    (lo, hi)
}

fn short(v: f64) -> String {
    if v.abs() >= 1000.0 || (v != 0.0 && v.abs() < 0.01) {
        format!("{v:.1e}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_draws_series_in_their_colours() {
        let r = line_chart(
            "loss",
            &[
                ("train", vec![(0.0, 1.0), (1.0, 0.5), (2.0, 0.2)]),
                ("val", vec![(0.0, 0.9), (2.0, 0.4)]),
            ],
        );
        let RasterData::U8(px) = &r.data else {
            panic!()
        };
        let count = |c: [u8; 3]| px.chunks(3).filter(|p| *p == c).count();
        assert!(count(SERIES[0]) > 100, "train line drawn");
        assert!(count(SERIES[1]) > 100, "val line drawn");
    }
}
