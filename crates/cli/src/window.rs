//! Sliding-window inference: where the windows go and how their logits are blended.
//!
//! Every window's logits (upsampled to the window's pixels) are multiplied by a 2-D Hann
//! weight, `w(y, x) = hann(y) · hann(x)` with `hann(i) = sin²(π (i + ½) / n)`, and accumulated;
//! the sum is divided by the accumulated weight. The weight is positive everywhere (so the image
//! border, seen by one window only, is still defined) and falls smoothly towards each window's
//! edge, so where windows meet their predictions fade into each other instead of leaving a seam.

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

/// Class index per pixel: argmax over classes, or `logit > 0` for a single-logit model.
///
/// # Shapes
/// `logits`: `[classes, height, width]` → `[height, width]`
pub fn classes_of(logits: &[f32], classes: usize, plane: usize) -> Vec<u8> {
    (0..plane)
        .map(|i| {
            if classes == 1 {
                return u8::from(logits[i] > 0.0);
            }
            let mut best = 0;
            for c in 1..classes {
                if logits[c * plane + i] > logits[best * plane + i] {
                    best = c;
                }
            }
            best as u8
        })
        .collect()
}

/// Softmax over classes (sigmoid for one logit), per pixel.
///
/// # Shapes
/// `logits`: `[classes, height, width]` → `[classes, height, width]`
pub fn probabilities(logits: &[f32], classes: usize, plane: usize) -> Vec<f32> {
    let mut out = vec![0.0; logits.len()];
    for i in 0..plane {
        if classes == 1 {
            out[i] = 1.0 / (1.0 + (-logits[i]).exp());
            continue;
        }
        let max = (0..classes)
            .map(|c| logits[c * plane + i])
            .fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = (0..classes)
            .map(|c| (logits[c * plane + i] - max).exp())
            .sum();
        for c in 0..classes {
            out[c * plane + i] = (logits[c * plane + i] - max).exp() / total;
        }
    }
    out
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

    #[test]
    fn classes_and_probabilities() {
        let logits = [0.0, 2.0, 1.0, -1.0]; // 2 classes × 2 pixels
        assert_eq!(classes_of(&logits, 2, 2), [1, 0]);
        let p = probabilities(&logits, 2, 2);
        assert!((p[0] + p[2] - 1.0).abs() < 1e-6 && (p[0] - 1.0 / (1.0 + 1f32.exp())).abs() < 1e-6);
        assert_eq!(classes_of(&[0.3, -0.2], 1, 2), [1, 0]);
    }
}
