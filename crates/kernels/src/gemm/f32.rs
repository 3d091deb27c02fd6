//! A safe, bounds-checked face over the `gemm` crate's strided f32 matrix product.

use super::{View, begin};

/// `dst[i, j] (+)= alpha · Σ_k a[i, k] · b[k, j]` with `dst` row-major (row stride `dst_rs`)
/// from `dst_offset`; accumulates into `dst` when `accumulate`, overwrites it otherwise.
/// `threads`: run on rayon's pool (true) or on the calling thread.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    dst: &mut [f32],
    dst_offset: usize,
    dst_rs: usize,
    a: View<'_>,
    b: View<'_>,
    alpha: f32,
    accumulate: bool,
    threads: bool,
) {
    let Some((m, n, k)) = begin(dst, dst_offset, dst_rs, a, [b.rows, b.cols], accumulate) else {
        return;
    };
    b.check();
    let parallelism = if threads && m * n * k >= 1 << 18 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: every index the product touches was bounds-checked above against the slices,
    // which outlive the call; `dst` is borrowed mutably, so it cannot alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr().add(dst_offset),
            1,
            dst_rs as isize,
            accumulate,
            a.data.as_ptr().add(a.offset),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.offset),
            b.cs as isize,
            b.rs as isize,
            1.0,
            alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_product_matches_a_direct_sum() {
        // a: 3×4 stored with row stride 5; b: 4×2 given as the transpose of a 2×4 block.
        let a_data: Vec<f32> = (0..15).map(|v| v as f32 * 0.5 - 3.0).collect();
        let bt_data: Vec<f32> = (0..8).map(|v| (v as f32).sin()).collect();
        let a = View::rows(&a_data, 0, 3, 4, 5);
        let b = View::rows(&bt_data, 0, 2, 4, 4).t();
        let mut dst = vec![1.0f32; 3 * 2];
        matmul(&mut dst, 0, 2, a, b, 2.0, true, false);
        for i in 0..3 {
            for j in 0..2 {
                let s: f32 = (0..4).map(|k| a_data[i * 5 + k] * bt_data[j * 4 + k]).sum();
                assert!((dst[i * 2 + j] - (1.0 + 2.0 * s)).abs() < 1e-5);
            }
        }
    }
}
