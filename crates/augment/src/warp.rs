//! Affine warps (`Rotate`, `Affine`, `ShiftScaleRotate`), the equivalent of `cv2.warpAffine`.

use crate::geometric::{Border, Dims, border_index};
use crate::pixel::Pixel;

/// A 2×3 affine map `[a, b, c; d, e, f]`: `(x, y) -> (a x + b y + c, d x + e y + f)`,
/// in pixel-centre coordinates (OpenCV's convention).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Affine(pub [f64; 6]);

impl Affine {
    /// `cv2.getRotationMatrix2D(center, angle, scale)` composed with a shear (degrees) and a
    /// translation in pixels: rotate/scale/shear about `center`, then shift. Angles are
    /// counter-clockwise, as in OpenCV and albumentations.
    pub fn about_center(
        center: (f64, f64),
        angle_deg: f64,
        scale: f64,
        shear_deg: (f64, f64),
        shift: (f64, f64),
    ) -> Self {
        let (s, c) = angle_deg.to_radians().sin_cos();
        let (shx, shy) = (
            shear_deg.0.to_radians().tan(),
            shear_deg.1.to_radians().tan(),
        );
        // Linear part: R(angle) * Shear * scale, with y pointing down (so "counter-clockwise"
        // on screen uses +sin in the first row, as getRotationMatrix2D does).
        let r = [c, s, -s, c];
        let sh = [1.0, shx, shy, 1.0];
        let l = [
            scale * (r[0] * sh[0] + r[1] * sh[2]),
            scale * (r[0] * sh[1] + r[1] * sh[3]),
            scale * (r[2] * sh[0] + r[3] * sh[2]),
            scale * (r[2] * sh[1] + r[3] * sh[3]),
        ];
        let (cx, cy) = center;
        Affine([
            l[0],
            l[1],
            cx - l[0] * cx - l[1] * cy + shift.0,
            l[2],
            l[3],
            cy - l[2] * cx - l[3] * cy + shift.1,
        ])
    }

    /// The inverse map (output pixel -> source pixel), as `warpAffine` uses internally.
    pub fn inverse(&self) -> Self {
        let [a, b, c, d, e, f] = self.0;
        let det = a * e - b * d;
        let (ia, ib, id, ie) = (e / det, -b / det, -d / det, a / det);
        Affine([ia, ib, -(ia * c + ib * f), id, ie, -(id * c + ie * f)])
    }

    #[inline]
    fn apply(&self, x: f64, y: f64) -> (f64, f64) {
        let [a, b, c, d, e, f] = self.0;
        (a * x + b * y + c, d * x + e * y + f)
    }
}

/// Warp an image `[H, W, C]` into an `[H, W, C]` output. `inv` maps output to source pixels.
/// `bilinear` false means nearest. Outside pixels follow `border` (constant → `fill`).
pub(crate) fn warp_image<T: Pixel>(
    src: &[T],
    d: Dims,
    inv: &Affine,
    bilinear: bool,
    border: Border,
    fill: &[T],
) -> Vec<T> {
    let c = d.c;
    let mut out = Vec::with_capacity(src.len());
    let tap = |y: isize, x: isize| -> Option<&[T]> {
        let (yy, xx) = (border_index(y, d.h, border)?, border_index(x, d.w, border)?);
        let i = (yy * d.w + xx) * c;
        Some(&src[i..i + c])
    };
    let mut acc = vec![0f32; c];
    for y in 0..d.h {
        for x in 0..d.w {
            let (sx, sy) = inv.apply(x as f64, y as f64);
            if !bilinear {
                out.extend_from_slice(
                    tap(sy.round() as isize, sx.round() as isize).unwrap_or(fill),
                );
                continue;
            }
            let (x0, y0) = (sx.floor(), sy.floor());
            let (fx, fy) = ((sx - x0) as f32, (sy - y0) as f32);
            let (x0, y0) = (x0 as isize, y0 as isize);
            acc.fill(0.0);
            for (dy, dx, w) in [
                (0, 0, (1.0 - fx) * (1.0 - fy)),
                (0, 1, fx * (1.0 - fy)),
                (1, 0, (1.0 - fx) * fy),
                (1, 1, fx * fy),
            ] {
                let px = tap(y0 + dy, x0 + dx).unwrap_or(fill);
                for (a, p) in acc.iter_mut().zip(px) {
                    *a += p.to_f32() * w;
                }
            }
            out.extend(
                acc.iter()
                    .map(|&v| T::from_f32(if T::INTEGER { v.clamp(0.0, T::MAX) } else { v })),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turn_about_centre_matches_rot90() {
        // A 90° counter-clockwise rotation of a square about its centre is np.rot90.
        let d = Dims { h: 3, w: 3, c: 1 };
        let src: Vec<u8> = (0..9).collect();
        let m = Affine::about_center((1.0, 1.0), 90.0, 1.0, (0.0, 0.0), (0.0, 0.0));
        let out = warp_image(&src, d, &m.inverse(), true, Border::Constant, &[0]);
        let expected = crate::geometric::rot90_odd(&src, d, 1);
        assert_eq!(out, expected);
    }

    #[test]
    fn inverse_round_trips() {
        let m = Affine::about_center((10.0, 7.0), 33.0, 1.3, (5.0, -4.0), (2.0, 3.0));
        let (x, y) = m.apply(3.0, 4.0);
        let (bx, by) = m.inverse().apply(x, y);
        assert!((bx - 3.0).abs() < 1e-9 && (by - 4.0).abs() < 1e-9);
    }
}
