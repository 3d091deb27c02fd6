//! Sliding windows: where the windows go and how their logits are blended (`sliding.rs` runs
//! the model over them).
//!
//! Every window's logits (upsampled to the window's pixels) are multiplied by a 2-D Hann
//! weight, `w(y, x) = hann(y) · hann(x)` with `hann(i) = sin²(π (i + ½) / n)`, and accumulated;
//! the sum is divided by the accumulated weight. The weight is positive everywhere (so the image
//! border, seen by one window only, is still defined) and falls smoothly towards each window's
//! edge, so where windows meet their predictions fade into each other instead of leaving a seam.

use crate::error::InferError;
use crate::tta::Tta;

/// How an image is cut into model windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Window height and width in pixels (clipped to the image where it is smaller).
    pub tile: [usize; 2],
    /// Pixels shared by neighbouring windows.
    pub overlap: usize,
    /// Windows run through the model at once.
    pub batch: usize,
    /// Test-time augmentation of every window ([`Tta::None`] unless set with
    /// [`with_tta`](Self::with_tta)).
    pub tta: Tta,
}

impl Windows {
    /// Checked settings; `overlap` defaults to a quarter of the window's shorter side. Whether
    /// the model can run windows this small is checked by
    /// [`predict_windows`](crate::predict_windows), which knows the model
    /// ([`min_input_side`](crate::min_input_side)).
    pub fn new(tile: [usize; 2], overlap: Option<usize>, batch: usize) -> Result<Self, InferError> {
        if tile[0] == 0 || tile[1] == 0 {
            return Err(InferError::Windows(format!(
                "window {}x{} is empty",
                tile[0], tile[1]
            )));
        }
        let side = tile[0].min(tile[1]);
        let overlap = overlap.unwrap_or(side / 4);
        if overlap >= side {
            return Err(InferError::Windows(format!(
                "overlap {overlap} must be smaller than the window ({}x{})",
                tile[0], tile[1]
            )));
        }
        if batch == 0 {
            return Err(InferError::Windows(
                "windows per batch must be at least 1".into(),
            ));
        }
        Ok(Self {
            tile,
            overlap,
            batch,
            tta: Tta::None,
        })
    }

    /// The same windows, each predicted under test-time augmentation `tta`: the mean class
    /// probability over its poses, handed on as log-probabilities (see [`Tta`]).
    pub fn with_tta(self, tta: Tta) -> Self {
        Self { tta, ..self }
    }

    /// The top-left corners of the windows over an `h × w` image, row by row, and the window
    /// size there (the tile clipped to the image).
    pub fn spots(&self, h: usize, w: usize) -> (Vec<(usize, usize)>, [usize; 2]) {
        let (th, tw) = (self.tile[0].min(h), self.tile[1].min(w));
        let xs = origins(w, tw, self.overlap);
        let spots = origins(h, th, self.overlap)
            .into_iter()
            .flat_map(|y| xs.iter().map(move |&x| (y, x)))
            .collect();
        (spots, [th, tw])
    }
}

/// [`Blender`] over a moving band of rows: rows `base..base + held` of a `width`-wide image,
/// stored row-major as `[row][class][x]` so that finished rows leave from the front.
pub(crate) struct RowBlender {
    classes: usize,
    width: usize,
    /// The first row held.
    pub(crate) base: usize,
    held: usize,
    sum: Vec<f32>,
    weight: Vec<f32>,
}

impl RowBlender {
    pub(crate) fn new(classes: usize, width: usize) -> Self {
        Self {
            classes,
            width,
            base: 0,
            held: 0,
            sum: Vec::new(),
            weight: Vec::new(),
        }
    }

    /// Holds rows up to `end` (exclusive), new ones empty.
    pub(crate) fn reach(&mut self, end: usize) {
        if end > self.base + self.held {
            self.held = end - self.base;
            self.sum.resize(self.held * self.classes * self.width, 0.0);
            self.weight.resize(self.held * self.width, 0.0);
        }
    }

    /// [`Blender::add`] with the same arithmetic, so both give the same bits.
    pub(crate) fn add(&mut self, logits: &[f32], y0: usize, x0: usize, th: usize, tw: usize) {
        let (wy, wx) = (hann(th), hann(tw));
        let (k, width) = (self.classes, self.width);
        for y in 0..th {
            let r = y0 + y - self.base;
            for x in 0..tw {
                let w = wy[y] * wx[x];
                self.weight[r * width + x0 + x] += w;
                for c in 0..k {
                    self.sum[(r * k + c) * width + x0 + x] += w * logits[(c * th + y) * tw + x];
                }
            }
        }
    }

    /// Removes the first `n` rows; returns their first row and their blended logits
    /// (`[classes, n, width]`).
    pub(crate) fn flush(&mut self, n: usize) -> (usize, Vec<f32>) {
        let (k, width) = (self.classes, self.width);
        let mut out = vec![0.0; k * n * width];
        for r in 0..n {
            for c in 0..k {
                for x in 0..width {
                    out[(c * n + r) * width + x] =
                        self.sum[(r * k + c) * width + x] / self.weight[r * width + x];
                }
            }
        }
        self.sum.drain(..n * k * width);
        self.weight.drain(..n * width);
        let top = self.base;
        self.base += n;
        self.held -= n;
        (top, out)
    }
}

/// Window origins along an axis of `len` pixels: windows of `tile` (at most `len`) with a stride
/// of `tile - overlap`, the last one flush with the end.
pub fn origins(len: usize, tile: usize, overlap: usize) -> Vec<usize> {
    let tile = tile.min(len);
    let stride = tile.saturating_sub(overlap).max(1);
    let mut out = Vec::new();
    let mut p = 0;
    while p + tile < len {
        out.push(p);
        p += stride;
    }
    out.push(len - tile);
    out
}

/// `hann(i)` for `i in 0..n` (see the module docs).
pub fn hann(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let s = (std::f64::consts::PI * (i as f64 + 0.5) / n as f64).sin();
            (s * s) as f32
        })
        .collect()
}

/// Accumulates weighted window logits into a `[classes, height, width]` image.
pub struct Blender {
    classes: usize,
    height: usize,
    width: usize,
    sum: Vec<f32>,
    weight: Vec<f32>,
}

impl Blender {
    /// An empty accumulator.
    pub fn new(classes: usize, height: usize, width: usize) -> Self {
        Self {
            classes,
            height,
            width,
            sum: vec![0.0; classes * height * width],
            weight: vec![0.0; height * width],
        }
    }

    /// Adds the logits of the `th × tw` window at `(y0, x0)`.
    ///
    /// # Shapes
    /// `logits`: `[classes, th, tw]`
    pub fn add(&mut self, logits: &[f32], y0: usize, x0: usize, th: usize, tw: usize) {
        debug_assert_eq!(logits.len(), self.classes * th * tw);
        let (wy, wx) = (hann(th), hann(tw));
        let plane = self.height * self.width;
        for y in 0..th {
            for x in 0..tw {
                let w = wy[y] * wx[x];
                let at = (y0 + y) * self.width + x0 + x;
                self.weight[at] += w;
                for c in 0..self.classes {
                    self.sum[c * plane + at] += w * logits[(c * th + y) * tw + x];
                }
            }
        }
    }

    /// The blended logits.
    ///
    /// # Shapes
    /// `[classes, height, width]`
    pub fn finish(mut self) -> Vec<f32> {
        let plane = self.height * self.width;
        for c in 0..self.classes {
            for (s, w) in self.sum[c * plane..(c + 1) * plane]
                .iter_mut()
                .zip(&self.weight)
            {
                *s /= *w;
            }
        }
        self.sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_cover_the_axis_and_end_flush() {
        let check = |len, tile, overlap, expected: &[usize]| {
            assert_eq!(origins(len, tile, overlap), expected)
        };
        check(64, 64, 16, &[0]);
        check(40, 64, 16, &[0]);
        check(100, 64, 16, &[0, 36]);
        check(160, 64, 16, &[0, 48, 96]);
        check(160, 64, 0, &[0, 64, 96]);
    }

    #[test]
    fn constant_windows_blend_to_the_same_constant() {
        // Three windows that each predict the same value must give exactly that value
        // everywhere, whatever the weights: the normalisation leaves no seam.
        let (h, w) = (20, 50);
        let mut b = Blender::new(2, h, w);
        for y0 in origins(h, 16, 4) {
            for x0 in origins(w, 16, 4) {
                let win: Vec<f32> = (0..2 * 16 * 16)
                    .map(|i| if i < 256 { 1.5 } else { -0.25 })
                    .collect();
                b.add(&win, y0, x0, 16, 16);
            }
        }
        let out = b.finish();
        assert!(out[..h * w].iter().all(|v| (v - 1.5).abs() < 1e-6));
        assert!(out[h * w..].iter().all(|v| (v + 0.25).abs() < 1e-6));
    }

    #[test]
    fn overlapping_windows_are_a_weighted_mean() {
        // 1 × 6 image, windows of 4 at x = 0 and 2, values 0 and 1: at x = 2 the weights are
        // hann(4)[2] and hann(4)[0].
        let mut b = Blender::new(1, 1, 6);
        b.add(&[0.0; 4], 0, 0, 1, 4);
        b.add(&[1.0; 4], 0, 2, 1, 4);
        let out = b.finish();
        let hn = hann(4);
        let hy = hann(1)[0];
        let expect = (hy * hn[0]) / (hy * hn[2] + hy * hn[0]);
        assert!((out[2] - expect).abs() < 1e-6, "{out:?}");
        assert_eq!((out[0], out[5]), (0.0, 1.0));
    }
}
