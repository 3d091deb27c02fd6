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

/// Reverse the order of the pixels (not the bands) of a `[n, C]` run, in place.
fn reverse_pixels<T: Copy>(v: &mut [T], c: usize) {
    fn fixed<T: Copy, const N: usize>(v: &mut [T]) {
        v.as_chunks_mut::<N>().0.reverse();
    }
    match c {
        1 => v.reverse(),
        2 => fixed::<T, 2>(v),
        3 => fixed::<T, 3>(v),
        4 => fixed::<T, 4>(v),
        _ => {
            let n = v.len() / c;
            for i in 0..n / 2 {
                let (a, b) = v.split_at_mut((n - 1 - i) * c);
                a[i * c..(i + 1) * c].swap_with_slice(&mut b[..c]);
            }
        }
    }
}

/// Mirror left-right, in place. `[H, W, C]`.
pub(crate) fn hflip<T: Copy>(v: &mut [T], d: Dims) {
    for row in v.chunks_exact_mut(d.w * d.c) {
        reverse_pixels(row, d.c);
    }
}

/// Mirror top-bottom, in place. `[H, W, C]`.
pub(crate) fn vflip<T: Copy>(v: &mut [T], d: Dims) {
    let row = d.w * d.c;
    for y in 0..d.h / 2 {
        let (top, bottom) = v.split_at_mut((d.h - 1 - y) * row);
        top[y * row..(y + 1) * row].swap_with_slice(&mut bottom[..row]);
    }
}

/// Half turn, in place: the pixel order reversed. `[H, W, C]`.
pub(crate) fn rot180<T: Copy>(v: &mut [T], d: Dims) {
    reverse_pixels(v, d.c);
}

/// Rotate by one (`k = 1`) or three quarter turns counter-clockwise (`np.rot90(img, k)`);
/// even `k` are in-place operations ([`rot180`]). Output `[W, H, C]`.
pub(crate) fn rot90_odd<T: Copy>(src: &[T], d: Dims, k: u8) -> Vec<T> {
    let (h, w) = (d.h as isize, d.w as isize);
    debug_assert!(k % 2 == 1);
    if k % 4 == 1 {
        // out[i][j] = in[j][W-1-i]
        gather(src, d, d.w, d.h, w - 1, -1, w)
    } else {
        // out[i][j] = in[H-1-j][i]
        gather(src, d, d.w, d.h, (h - 1) * w, 1, -w)
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
        assert_eq!(rot90_odd(&s, d, 1), vec![2, 5, 1, 4, 0, 3]);
        let mut half = s.clone();
        rot180(&mut half, d);
        assert_eq!(half, vec![5, 4, 3, 2, 1, 0]);
        // np.rot90(..., 3) == [[3,0],[4,1],[5,2]]
        assert_eq!(rot90_odd(&s, d, 3), vec![3, 0, 4, 1, 5, 2]);
        assert_eq!(transpose(&s, d), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn multi_band_flips_keep_pixels_whole() {
        // Five bands exercise the dynamic path; each pixel's bands must stay together.
        let d = Dims { h: 1, w: 3, c: 5 };
        let mut s: Vec<u16> = (0..15).collect();
        hflip(&mut s, d);
        assert_eq!(s, vec![10, 11, 12, 13, 14, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4]);
        let d = Dims { h: 3, w: 1, c: 2 };
        let mut s: Vec<u8> = (0..6).collect();
        vflip(&mut s, d);
        assert_eq!(s, vec![4, 5, 2, 3, 0, 1]);
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
