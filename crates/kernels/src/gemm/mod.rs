//! The fused kernels' matrix products, `dst (+)= α·A·B` on strided views: in f32 (`f32`,
//! the `gemm` crate) or with operands rounded to bf16 and f32 sums (`bf16`, AVX512-BF16).
//! This module holds what both share (the views, the checks every product makes first) and
//! the choice between them ([`Precision`], `Rhs`); the two products depend on it and never
//! on each other.

mod bf16;
mod f32;

pub use bf16::round_bf16;

use super::cpu;

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
pub enum Precision {
    /// f32 operands and sums (the `gemm` crate).
    F32,
    /// Operands rounded to bf16, products summed in f32 (`vdpbf16ps`); only where
    /// [`cpu::has_bf16`] is true.
    Bf16,
}

impl Precision {
    /// bf16 where this CPU has the instructions, f32 otherwise.
    pub fn bf16_or_f32() -> Self {
        if cpu::has_bf16() {
            Self::Bf16
        } else {
            Self::F32
        }
    }

    /// `dst[i, j] (+)= alpha · Σ_k a[i, k] · b[k, j]` in this precision, with `dst` row-major
    /// (row stride `dst_rs`) from `dst_offset`; accumulates into `dst` when `accumulate`,
    /// overwrites it otherwise. `threads`: run on rayon's pool (true) or on the calling thread.
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
            Self::F32 => f32::matmul,
            #[cfg(target_arch = "x86_64")]
            Self::Bf16 => bf16::matmul,
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
    Bf16(bf16::PackedB),
}

impl<'a> Rhs<'a> {
    /// `b` as a right-hand side in `precision`.
    pub(crate) fn new(precision: Precision, b: View<'a>) -> Self {
        match precision {
            Precision::F32 => Self::F32(b),
            Precision::Bf16 => Self::Bf16(bf16::PackedB::new(b)),
        }
    }

    /// `dst (+)= alpha · a · self` on the calling thread ([`Precision::matmul`]'s contract).
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
            Self::F32(b) => f32::matmul(dst, dst_offset, dst_rs, a, *b, alpha, accumulate, false),
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
