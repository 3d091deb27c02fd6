//! Index-permuting geometric kernels (flips, quarter turns, transpose, crops, pads) over
//! `[H, W, C]` buffers of any sample type. Images and masks share the same kernels, so the
//! two always move together; none of these interpolate, so results are bit-exact.

/// A view of a `[H, W, C]` buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

/// `out[y][x] = src[start + y * step_y + x * step_x]`, in pixels, for an `out_h × out_w` output.
///
/// Every flip, quarter turn and transpose is such an affine gather. The caller guarantees the
/// four corners are in range; since the index is affine in `(y, x)`, so is every pixel between.
fn gather<T: Copy>(
    src: &[T],
    d: Dims,
    out_h: usize,
    out_w: usize,
    start: isize,
    step_y: isize,
    step_x: isize,
) -> Vec<T> {
    let n_px = (d.h * d.w) as isize;
    for (y, x) in [
        (0, 0),
        (out_h - 1, 0),
        (0, out_w - 1),
        (out_h - 1, out_w - 1),
    ] {
        let i = start + y as isize * step_y + x as isize * step_x;
        assert!((0..n_px).contains(&i), "gather corner out of range");
    }
    match d.c {
        1 => gather_n::<T, 1>(src, out_h, out_w, start, step_y, step_x),
        3 => gather_n::<T, 3>(src, out_h, out_w, start, step_y, step_x),
        4 => gather_n::<T, 4>(src, out_h, out_w, start, step_y, step_x),
        c => gather_dyn(src, c, out_h, out_w, start, step_y, step_x),
    }
}

/// [`gather`] for a band count known at compile time: each pixel is one `[T; N]` move.
fn gather_n<T: Copy, const N: usize>(
    src: &[T],
    out_h: usize,
    out_w: usize,
    start: isize,
    step_y: isize,
    step_x: isize,
) -> Vec<T> {
    let (px, _) = src.as_chunks::<N>();
    let mut out: Vec<[T; N]> = Vec::with_capacity(out_h * out_w);
    for y in 0..out_h {
        let row = start + y as isize * step_y;
        if step_x == 1 {
            let r = row as usize;
            out.extend_from_slice(&px[r..r + out_w]);
        } else {
            // SAFETY: `gather` checked the corners, and the index is affine in x, so every
            // `row + x * step_x` for x in 0..out_w lies in 0..px.len().
            out.extend(
                (0..out_w as isize)
                    .map(|x| unsafe { *px.get_unchecked((row + x * step_x) as usize) }),
            );
        }
    }
    out.into_flattened()
}

/// [`gather`] for any band count.
fn gather_dyn<T: Copy>(
    src: &[T],
    c: usize,
    out_h: usize,
    out_w: usize,
    start: isize,
    step_y: isize,
    step_x: isize,
) -> Vec<T> {
    let mut out = Vec::with_capacity(out_h * out_w * c);
    for y in 0..out_h {
        let row = start + y as isize * step_y;
        for x in 0..out_w as isize {
            let i = (row + x * step_x) as usize * c;
            out.extend_from_slice(&src[i..i + c]);
        }
    }
    out
}

/// Mirror left-right. Output `[H, W, C]`.
pub(crate) fn hflip<T: Copy>(src: &[T], d: Dims) -> Vec<T> {
    gather(src, d, d.h, d.w, d.w as isize - 1, d.w as isize, -1)
}

/// Mirror top-bottom. Output `[H, W, C]`.
pub(crate) fn vflip<T: Copy>(src: &[T], d: Dims) -> Vec<T> {
    let row = d.w * d.c;
    let mut out = Vec::with_capacity(src.len());
    for r in src.chunks_exact(row).rev() {
        out.extend_from_slice(r);
    }
    out
}

/// Rotate by `k` quarter turns counter-clockwise (`np.rot90(img, k)`).
/// Output `[W, H, C]` for odd `k`, `[H, W, C]` for even `k`; returns `(data, out_h, out_w)`.
pub(crate) fn rot90<T: Copy>(src: &[T], d: Dims, k: u8) -> (Vec<T>, usize, usize) {
    let (h, w) = (d.h as isize, d.w as isize);
    match k % 4 {
        0 => (src.to_vec(), d.h, d.w),
        // out[i][j] = in[j][W-1-i]
        1 => (gather(src, d, d.w, d.h, w - 1, -1, w), d.w, d.h),
        // out[i][j] = in[H-1-i][W-1-j]
        2 => (gather(src, d, d.h, d.w, h * w - 1, -w, -1), d.h, d.w),
        // out[i][j] = in[H-1-j][i]
        _ => (gather(src, d, d.w, d.h, (h - 1) * w, 1, -w), d.w, d.h),
    }
}

/// Swap rows and columns (`img.transpose(1, 0, 2)`). Output `[W, H, C]`.
pub(crate) fn transpose<T: Copy>(src: &[T], d: Dims) -> Vec<T> {
    gather(src, d, d.w, d.h, 0, 1, d.w as isize)
}

/// The window of `ch × cw` pixels whose top-left corner is `(y0, x0)`; the caller checks it fits.
/// Output `[ch, cw, C]`.
pub(crate) fn crop<T: Copy>(
    src: &[T],
    d: Dims,
    y0: usize,
    x0: usize,
    ch: usize,
    cw: usize,
) -> Vec<T> {
    debug_assert!(y0 + ch <= d.h && x0 + cw <= d.w);
    let mut out = Vec::with_capacity(ch * cw * d.c);
    for y in y0..y0 + ch {
        let s = (y * d.w + x0) * d.c;
        out.extend_from_slice(&src[s..s + cw * d.c]);
    }
    out
}

/// How pixels outside the source are filled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Border {
    /// A constant value (given separately for image and mask).
    Constant,
    /// `gfedcb|abcdefgh|gfedcba` (OpenCV `BORDER_REFLECT_101`, albumentations' default).
    Reflect101,
    /// `aaaaaa|abcdefgh|hhhhhhh` (OpenCV `BORDER_REPLICATE`).
    Replicate,
}

/// Map a possibly out-of-range coordinate into `0..n`, or `None` for constant borders.
#[inline]
pub(crate) fn border_index(i: isize, n: usize, border: Border) -> Option<usize> {
    let n_i = n as isize;
    if (0..n_i).contains(&i) {
        return Some(i as usize);
    }
    match border {
        Border::Constant => None,
        Border::Replicate => Some(i.clamp(0, n_i - 1) as usize),
        Border::Reflect101 => {
            if n == 1 {
                return Some(0);
            }
            // Reflection without repeating the edge has period 2n-2; fold into one period.
            let period = 2 * n_i - 2;
            let j = i.rem_euclid(period);
            Some(if j < n_i { j } else { period - j } as usize)
        }
    }
}

/// Pad by `(top, bottom, left, right)` pixels. Output `[H+top+bottom, W+left+right, C]`.
pub(crate) fn pad<T: Copy>(
    src: &[T],
    d: Dims,
    pads: [usize; 4],
    border: Border,
    fill: &[T],
) -> Vec<T> {
    let [top, bottom, left, right] = pads;
    let (oh, ow) = (d.h + top + bottom, d.w + left + right);
    let cols: Vec<Option<usize>> = (0..ow)
        .map(|x| border_index(x as isize - left as isize, d.w, border))
        .collect();
    let mut out = Vec::with_capacity(oh * ow * d.c);
    for y in 0..oh {
        match border_index(y as isize - top as isize, d.h, border) {
            None => (0..ow).for_each(|_| out.extend_from_slice(fill)),
            Some(sy) => {
                let row = &src[sy * d.w * d.c..(sy + 1) * d.w * d.c];
                for cx in &cols {
                    match cx {
                        Some(sx) => out.extend_from_slice(&row[sx * d.c..(sx + 1) * d.c]),
                        None => out.extend_from_slice(fill),
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2×3 single-band image: `[[0, 1, 2], [3, 4, 5]]`.
    fn img() -> (Vec<u8>, Dims) {
        ((0..6).collect(), Dims { h: 2, w: 3, c: 1 })
    }

    #[test]
    fn quarter_turns_match_np_rot90_by_hand() {
        let (s, d) = img();
        // np.rot90([[0,1,2],[3,4,5]], 1) == [[2,5],[1,4],[0,3]]
        assert_eq!(rot90(&s, d, 1), (vec![2, 5, 1, 4, 0, 3], 3, 2));
        assert_eq!(rot90(&s, d, 2), (vec![5, 4, 3, 2, 1, 0], 2, 3));
        // np.rot90(..., 3) == [[3,0],[4,1],[5,2]]
        assert_eq!(rot90(&s, d, 3), (vec![3, 0, 4, 1, 5, 2], 3, 2));
        assert_eq!(transpose(&s, d), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn multi_band_flips_keep_pixels_whole() {
        // Five bands exercise the dynamic path; each pixel's bands must stay together.
        let d = Dims { h: 1, w: 2, c: 5 };
        let s: Vec<u16> = (0..10).collect();
        assert_eq!(hflip(&s, d), vec![5, 6, 7, 8, 9, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn reflect101_folds_far_indices() {
        // n = 4: ... 2 1 | 0 1 2 3 | 2 1 0 1 ...
        let got: Vec<usize> = (-3..8)
            .map(|i| border_index(i, 4, Border::Reflect101).unwrap())
            .collect();
        assert_eq!(got, vec![3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1]);
        assert_eq!(border_index(-1, 4, Border::Constant), None);
        assert_eq!(border_index(9, 4, Border::Replicate), Some(3));
    }
}
