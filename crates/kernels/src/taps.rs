//! The source taps of bilinear resizing with PyTorch's `align_corners = false`: what the
//! fused kernels (and `segformer`'s recomputing ops and resize) interpolate with.

/// Per output coordinate: `(low, high, weight of high)`.
pub type Taps = Vec<(usize, usize, f32)>;

/// Source taps of bilinear upsampling (`align_corners = false`) for each output coordinate:
/// `(low, high, weight of high)`, the same arithmetic as burn's and PyTorch's kernels.
pub fn taps(input: usize, output: usize) -> Taps {
    let ratio = input as f64 / output as f64;
    (0..output)
        .map(|o| {
            let src = (o as f64 + 0.5) * ratio - 0.5;
            let lo = src.floor().max(0.0) as usize;
            let hi = (lo + 1).min(input - 1);
            (lo, hi, (src - lo as f64).max(0.0) as f32)
        })
        .collect()
}
