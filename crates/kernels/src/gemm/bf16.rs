//! `dst (+)= α·A·B` with A and B rounded to bf16 (round to nearest even) and the products
//! summed in f32: AVX512-BF16's `vdpbf16ps`, which multiplies two bf16 pairs per f32 lane and
//! accumulates in f32. This is autocast's contract for a bf16 matmul (bf16 operands, f32
//! accumulation) with the result left in f32 instead of being rounded to bf16 again.
//!
//! Blocked like every packed GEMM: per slice of k (512–8192, about 1 MiB of packed B), B is
//! packed into `[panel][k/2][NR]` pairs of bf16 and the rows of A into `MR`-row tiles, and an
//! `MR × NR` micro-kernel keeps its 16 accumulators in registers. The packing buffers are per
//! thread and kept between calls (a few MiB per thread at most), so a product allocates
//! nothing once the threads have seen its shape. [`PackedB`] packs a right-hand side once for
//! many products (attention's keys and values). On a CPU without the instructions
//! [`cpu::has_bf16`] is false and callers use the f32 product instead.
//!
//! This module holds the rounding and the contract; `pack` rounds and packs the operands,
//! `product` runs the tasks and the micro-kernel (both x86-64 only).

#[cfg(target_arch = "x86_64")]
mod pack;
#[cfg(target_arch = "x86_64")]
mod product;

use super::View;
use crate::cpu;

/// Rows of a micro-tile.
const MR: usize = 8;
/// Columns of a micro-tile (two 16-lane registers).
const NR: usize = 32;
/// The k slice one packed block covers at least (even, so pairs never straddle blocks); more
/// for narrow B, up to [`KC_MAX`], so that a long k (a weight gradient's rows) is not cut
/// into many short passes.
const KC: usize = 512;
/// The longest k slice.
const KC_MAX: usize = 8192;
/// Rows of A one task packs and sweeps.
const MC: usize = 64;

/// `x` rounded to bf16 (nearest, ties to even; NaN stays a quiet NaN), as its 16 bits.
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// `x` rounded to bf16 (to nearest even) and widened back to f32: the rounding the bf16
/// products apply to their operands.
pub fn round_bf16(x: f32) -> f32 {
    f32::from_bits(u32::from(bf16_bits(x)) << 16)
}

#[cfg(target_arch = "x86_64")]
pub(crate) use product::matmul;

/// A right-hand side packed once as bf16 pairs, for products against many left-hand sides
/// (the keys and values of one attention head against every block of queries).
pub(crate) struct PackedB {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    words: Vec<u32>,
    k: usize,
    n: usize,
}

impl PackedB {
    /// `b` rounded to bf16 and packed. Must only be called where [`cpu::has_bf16`] is true.
    pub(crate) fn new(b: View<'_>) -> Self {
        assert!(cpu::has_bf16(), "PackedB on a CPU without AVX512-BF16");
        #[cfg(target_arch = "x86_64")]
        let words = pack::pack_whole(b);
        #[cfg(not(target_arch = "x86_64"))]
        let words = Vec::new();
        Self {
            words,
            k: b.rows,
            n: b.cols,
        }
    }

    /// `dst[i, j] (+)= alpha · Σ_k bf16(a[i, k]) · b[k, j]` on the calling thread (the
    /// contract of [`matmul`] without threads).
    pub(crate) fn matmul(
        &self,
        dst: &mut [f32],
        dst_offset: usize,
        dst_rs: usize,
        a: View<'_>,
        alpha: f32,
        accumulate: bool,
    ) {
        #[cfg(target_arch = "x86_64")]
        product::matmul_packed(
            dst,
            dst_offset,
            dst_rs,
            a,
            &self.words,
            [self.k, self.n],
            alpha,
            accumulate,
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (dst, dst_offset, dst_rs, a, alpha, accumulate);
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// `Σ_k bf16(a)·bf16(b)` in f64 for the element `(i, j)`, and `Σ_k |bf16(a)·bf16(b)|`
    /// (what f32 summation error scales with).
    fn direct(a: View<'_>, b: View<'_>, i: usize, j: usize) -> (f64, f64) {
        (0..a.cols)
            .map(|k| {
                let x = round_bf16(a.data[a.offset + i * a.rs + k * a.cs]);
                let y = round_bf16(b.data[b.offset + k * b.rs + j * b.cs]);
                f64::from(x) * f64::from(y)
            })
            .fold((0.0, 0.0), |(s, m), p| (s + p, m + p.abs()))
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32)
            .map(|v| v / (1u32 << 24) as f32 * 2.0 - 1.0)
            .collect()
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        // 1 + 2⁻⁸ is halfway between bf16 1.0 and 1 + 2⁻⁷: ties to the even 1.0.
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0);
        // 1 + 3·2⁻⁸ is halfway between 1 + 2⁻⁷ and 1 + 2⁻⁶: ties to the even 1 + 2⁻⁶.
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 1.0 / 64.0);
        assert_eq!(round_bf16(1.0 + 1.0 / 200.0), 1.0 + 1.0 / 128.0);
        assert_eq!(round_bf16(-3.0), -3.0);
        assert!(round_bf16(f32::NAN).is_nan());
        assert_eq!(round_bf16(f32::INFINITY), f32::INFINITY);
    }

    /// Every packing path (A along k, A along i, A strided; B along j, B strided), odd k,
    /// edge tiles in both dimensions, k over one block, accumulate and overwrite.
    #[test]
    fn products_match_a_direct_sum_of_rounded_operands() {
        if !cpu::has_bf16() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        for &(m, n, k) in &[
            (1, 1, 1),
            (9, 33, 7),
            (70, 50, 515),
            (130, 17, 1100),
            (8, 64, 2),
        ] {
            let a_rm = values(m * k, 1); // a as row-major [m, k]
            let a_cm = values(m * k, 2); // a as column-major: a[i, k] at k·m + i
            let b_rm = values(k * n, 3); // b as row-major [k, n]
            let b_cm = values(k * n, 4); // b as column-major
            let a_st = values(2 * m * k, 6); // a[i, k] at 2·(i·k + k): neither stride 1
            let a_views = [
                View::rows(&a_rm, 0, m, k, k),
                View::rows(&a_cm, 0, k, m, m).t(),
                View {
                    data: &a_st,
                    offset: 0,
                    rows: m,
                    cols: k,
                    rs: 2 * k,
                    cs: 2,
                },
            ];
            let b_views = [
                View::rows(&b_rm, 0, k, n, n),
                View::rows(&b_cm, 0, n, k, k).t(),
            ];
            for a in &a_views {
                for b in &b_views {
                    for accumulate in [false, true] {
                        let rs = n + 3;
                        let mut dst = values(m * rs, 5);
                        let before = dst.clone();
                        matmul(&mut dst, 0, rs, *a, *b, 0.5, accumulate, true);
                        for i in 0..m {
                            for j in 0..rs {
                                let got = f64::from(dst[i * rs + j]);
                                let old = f64::from(before[i * rs + j]);
                                let (want, magnitude) = if j >= n {
                                    (old, 0.0)
                                } else {
                                    let (sum, magnitude) = direct(*a, *b, i, j);
                                    (0.5 * sum + if accumulate { old } else { 0.0 }, magnitude)
                                };
                                // f32 sums of k products: a few ulps of Σ|products| per √k.
                                let tol = 1e-6 * (1.0 + magnitude * (k as f64).sqrt() * 0.25);
                                assert!(
                                    (got - want).abs() <= tol,
                                    "{m}×{n}×{k} ({i}, {j}): {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
