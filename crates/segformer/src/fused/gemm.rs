//! A safe, bounds-checked face over the `gemm` crate's strided f32 matrix product.

/// A read-only strided matrix view: element `(i, j)` is `data[offset + i*rs + j*cs]`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `rows × cols` matrix with row stride `rs` starting at `offset`.
    pub fn rows(data: &'a [f32], offset: usize, rows: usize, cols: usize, rs: usize) -> Self {
        Self {
            data,
            offset,
            rows,
            cols,
            rs,
            cs: 1,
        }
    }

    /// The transposed view (no copy).
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    /// Panics unless every element of the view is inside `data`.
    pub(crate) fn check(&self) {
        if self.rows > 0 && self.cols > 0 {
            let last = self.offset + (self.rows - 1) * self.rs + (self.cols - 1) * self.cs;
            assert!(last < self.data.len(), "gemm view out of bounds");
        }
    }
}

/// The arithmetic of a fused kernel's matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precision {
    /// f32 operands and sums (the `gemm` crate).
    F32,
    /// Operands rounded to bf16, products summed in f32 (`vdpbf16ps`); only where
    /// [`available`](super::gemm_bf16::available) is true.
    Bf16,
}

impl Precision {
    /// bf16 where this CPU has the instructions, f32 otherwise.
    pub(crate) fn bf16_or_f32() -> Self {
        if super::gemm_bf16::available() {
            Self::Bf16
        } else {
            Self::F32
        }
    }

    /// [`matmul`] in this precision (same arguments).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn matmul(
        self,
        dst: &mut [f32],
        dst_offset: usize,
        dst_rs: usize,
        a: View<'_>,
        b: View<'_>,
        alpha: f32,
        accumulate: bool,
        threads: bool,
    ) {
        let product = match self {
            Self::F32 => matmul,
            #[cfg(target_arch = "x86_64")]
            Self::Bf16 => super::gemm_bf16::matmul_bf16,
            #[cfg(not(target_arch = "x86_64"))]
            Self::Bf16 => unreachable!("bf16 products need AVX512-BF16"),
        };
        product(dst, dst_offset, dst_rs, a, b, alpha, accumulate, threads);
    }
}

/// A right-hand side used against many left-hand sides on one thread: the f32 view, or in
/// bf16 packed once.
pub(crate) enum Rhs<'a> {
    /// f32: the view itself.
    F32(View<'a>),
    /// bf16: packed pairs.
    Bf16(super::gemm_bf16::PackedB),
}

impl<'a> Rhs<'a> {
    /// `b` as a right-hand side in `precision`.
    pub(crate) fn new(precision: Precision, b: View<'a>) -> Self {
        match precision {
            Precision::F32 => Self::F32(b),
            Precision::Bf16 => Self::Bf16(super::gemm_bf16::PackedB::new(b)),
        }
    }

    /// `dst (+)= alpha · a · self` on the calling thread ([`matmul`]'s contract).
    pub(crate) fn matmul(
        &self,
        dst: &mut [f32],
        dst_offset: usize,
        dst_rs: usize,
        a: View<'_>,
        alpha: f32,
        accumulate: bool,
    ) {
        match self {
            Self::F32(b) => matmul(dst, dst_offset, dst_rs, a, *b, alpha, accumulate, false),
            Self::Bf16(b) => b.matmul(dst, dst_offset, dst_rs, a, alpha, accumulate),
        }
    }
}

/// What every product checks first, whatever computes it: `a` against B's `k × n` and the
/// destination, every index bounds-checked. Returns `(m, n, k)`, or `None` when nothing is
/// left to compute (an empty product, or k = 0, where the destination is zeroed unless
/// `accumulate`).
pub(crate) fn begin(
    dst: &mut [f32],
    dst_offset: usize,
    dst_rs: usize,
    a: View<'_>,
    [k, n]: [usize; 2],
    accumulate: bool,
) -> Option<(usize, usize, usize)> {
    assert_eq!(a.cols, k, "gemm inner dimensions differ");
    let m = a.rows;
    if m == 0 || n == 0 {
        return None;
    }
    let last = dst_offset + (m - 1) * dst_rs + n - 1;
    assert!(last < dst.len(), "gemm destination out of bounds");
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                dst[dst_offset + i * dst_rs..][..n].fill(0.0);
            }
        }
        return None;
    }
    a.check();
    Some((m, n, k))
}

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
