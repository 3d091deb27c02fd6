//! A and B rounded to bf16 and packed as the micro-kernel reads them: pairs along k in one
//! 32-bit word, A in `MR`-row tiles, B in `NR`-column panels; vectorised where a view is
//! contiguous.

use std::arch::x86_64::*;
use std::mem::transmute;
use std::ops::Range;

use rayon::prelude::*;

use super::{MR, NR, bf16_bits};
use crate::gemm::View;

/// All of `b` packed as one slice (see [`pack_b`]).
pub(super) fn pack_whole(b: View<'_>) -> Vec<u32> {
    b.check();
    let mut words = vec![0u32; b.cols.div_ceil(NR) * b.rows.div_ceil(2) * NR];
    pack_b(b, 0..b.rows, &mut words, false);
    words
}

/// How a packed tile of A lays out its `MR × kc/2` bf16 pairs.
#[derive(Clone, Copy)]
pub(super) enum Layout {
    /// Row by row: word `r·kc2 + kp` (from rows of A contiguous in k).
    RowPairs,
    /// Pair by pair: word `kp·MR + r` (from columns of A contiguous in i).
    PairRows,
}

impl Layout {
    /// The layout that packs `a` with contiguous loads.
    pub(super) fn of(a: View<'_>) -> Self {
        if a.cs != 1 && a.rs == 1 {
            Self::PairRows
        } else {
            Self::RowPairs
        }
    }
}

/// Packs `a[rows, ks]` into `MR`-row tiles of bf16 pairs in `layout` (zero-padded to whole
/// tiles and whole pairs; every word of the tiles is written), vectorised where the view
/// is contiguous along k ([`Layout::RowPairs`]) or along i ([`Layout::PairRows`]).
pub(super) fn pack_a(
    a: View<'_>,
    layout: Layout,
    rows: Range<usize>,
    ks: Range<usize>,
    ap: &mut [u32],
) {
    let kc2 = ks.len().div_ceil(2);
    let tiles = rows.len().div_ceil(MR);
    let ap = &mut ap[..tiles * MR * kc2];
    if let Layout::PairRows = layout {
        // Two tiles (16 rows: a cache line of each of the two k rows) per step.
        let mut pairs = [0u32; 16];
        for kp in 0..kc2 {
            let k0 = ks.start + 2 * kp;
            for t in (0..tiles).step_by(2) {
                let r0 = rows.start + t * MR;
                let base = a.offset + r0 + k0 * a.cs;
                let second = (k0 + 1 < ks.end).then_some(base + a.cs);
                let height = (2 * MR).min(rows.end - r0);
                // SAFETY: the view was bounds-checked (`View::check`): rows
                // r0..r0+height and k0 (k0+1 when present) are inside it.
                unsafe { interleave16(a.data, base, second, height, &mut pairs) };
                ap[t * MR * kc2 + kp * MR..][..MR].copy_from_slice(&pairs[..MR]);
                if t + 1 < tiles {
                    ap[(t + 1) * MR * kc2 + kp * MR..][..MR].copy_from_slice(&pairs[MR..]);
                }
            }
        }
        return;
    }
    for (t, tile) in ap.chunks_exact_mut(MR * kc2).enumerate() {
        for (r, row) in tile.chunks_exact_mut(kc2).enumerate() {
            let i = rows.start + t * MR + r;
            if i >= rows.end {
                row.fill(0);
                continue;
            }
            let start = a.offset + i * a.rs + ks.start * a.cs;
            if a.cs == 1 {
                let src = &a.data[start..start + ks.len()];
                // SAFETY: `src` is in bounds; the CPU has the features.
                unsafe { convert_row(src, row) };
            } else {
                for (kp, word) in row.iter_mut().enumerate() {
                    let k0 = 2 * kp;
                    let lo = bf16_bits(a.data[start + k0 * a.cs]);
                    let hi = if ks.start + k0 + 1 < ks.end {
                        bf16_bits(a.data[start + (k0 + 1) * a.cs])
                    } else {
                        0
                    };
                    *word = u32::from(lo) | (u32::from(hi) << 16);
                }
            }
        }
    }
}

/// Packs the rows `ks` of `b` into `bp` as `[panel][kp][NR]` words, each the bf16 pair
/// `(b[k0, j], b[k0+1, j])` with `k0 = ks.start + 2·kp` (zero-padded past `ks` and n);
/// writes every word of `bp`.
pub(super) fn pack_b(b: View<'_>, ks: Range<usize>, bp: &mut [u32], threads: bool) {
    let k2 = ks.len().div_ceil(2);
    let pack = |(p, panel): (usize, &mut [u32])| {
        let j0 = p * NR;
        let width = NR.min(b.cols - j0);
        for (kp, words) in panel.chunks_exact_mut(NR).enumerate() {
            let k0 = ks.start + 2 * kp;
            let base = b.offset + k0 * b.rs + j0 * b.cs;
            let second = (k0 + 1 < ks.end).then_some(base + b.rs);
            if b.cs == 1 {
                for h in 0..2 {
                    let cols = width.saturating_sub(16 * h).min(16);
                    if cols == 0 {
                        words[16 * h..16 * h + 16].fill(0);
                    } else {
                        let words = &mut words[16 * h..16 * h + 16];
                        let off = 16 * h;
                        // SAFETY: the view was bounds-checked: columns j0+off..+cols of
                        // rows k0 (and k0+1 when present) are inside it.
                        unsafe {
                            interleave16(b.data, base + off, second.map(|s| s + off), cols, words)
                        };
                    }
                }
            } else {
                let (words, pad) = words.split_at_mut(width);
                for (j, word) in words.iter_mut().enumerate() {
                    let lo = bf16_bits(b.data[base + j * b.cs]);
                    let hi = second.map_or(0, |s| bf16_bits(b.data[s + j * b.cs]));
                    *word = u32::from(lo) | (u32::from(hi) << 16);
                }
                pad.fill(0);
            }
        }
    };
    if threads {
        bp.par_chunks_mut(k2 * NR).enumerate().for_each(pack);
    } else {
        bp.chunks_mut(k2 * NR).enumerate().for_each(pack);
    }
}

/// A low-bits mask of `n ≤ 16` lanes.
pub(super) fn lanes(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// `src` rounded to bf16 into consecutive halves of `dst` (pairs along k), zero past it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn convert_row(src: &[f32], dst: &mut [u32]) {
    debug_assert!(dst.len() * 2 >= src.len());
    let out = dst.as_mut_ptr() as *mut u16;
    let full = src.len() / 16 * 16;
    // SAFETY (caller): whole chunks of 16 are inside `src` and (as halves) `dst`; the
    // tail's lanes past the end are masked off in the load and the store.
    unsafe {
        for i in (0..full).step_by(16) {
            let h: __m256i = transmute(_mm512_cvtneps_pbh(_mm512_loadu_ps(src.as_ptr().add(i))));
            _mm256_storeu_si256(out.add(i) as *mut __m256i, h);
        }
        if full < src.len() {
            let m = lanes(src.len() - full);
            let v = _mm512_maskz_loadu_ps(m, src.as_ptr().add(full));
            let h: __m256i = transmute(_mm512_cvtneps_pbh(v));
            _mm256_mask_storeu_epi16(out.add(full) as *mut i16, m, h);
        }
    }
    if src.len() % 2 == 1 {
        // SAFETY: the odd length's pad half is inside `dst` (2·len ≥ src.len() + 1).
        unsafe { *out.add(src.len()) = 0 };
    }
}

/// Pairs `(data[base + j], data[second + j])` rounded to bf16 for `j < n ≤ 16` into
/// `words[j]`; the second element is 0 without a second row, words past `n` are 0.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn interleave16(
    data: &[f32],
    base: usize,
    second: Option<usize>,
    n: usize,
    words: &mut [u32],
) {
    debug_assert!(words.len() >= 16 && base + n <= data.len());
    // SAFETY (caller): the loads read n lanes inside `data`; `words` holds 16 words.
    unsafe {
        let load = |at: usize| {
            if n == 16 {
                _mm512_loadu_ps(data.as_ptr().add(at))
            } else {
                _mm512_maskz_loadu_ps(lanes(n), data.as_ptr().add(at))
            }
        };
        let lo = load(base);
        let hi = second.map_or(_mm512_setzero_ps(), load);
        // [lo 0..16 | hi 0..16] as bf16, then interleaved lo0 hi0 lo1 hi1 …
        let both: __m512i = transmute(_mm512_cvtne2ps_pbh(hi, lo));
        let idx = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        let pairs = _mm512_permutexvar_epi16(idx, both);
        _mm512_storeu_si512(words.as_mut_ptr() as *mut __m512i, pairs);
    }
}
