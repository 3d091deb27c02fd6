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

use super::View;
use crate::fused::cpu;

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

/// `x` rounded to bf16 and widened back to f32.
#[cfg(test)]
pub(crate) fn round_bf16(x: f32) -> f32 {
    f32::from_bits(u32::from(bf16_bits(x)) << 16)
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::matmul;

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
        let words = x86::pack_whole(b);
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
        x86::matmul_packed(
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::cell::Cell;
    use std::mem::transmute;
    use std::ops::Range;

    use rayon::prelude::*;

    use super::super::begin;
    use super::{KC, KC_MAX, MC, MR, NR, View, bf16_bits, cpu};

    thread_local! {
        /// Per-thread packing buffers, kept between calls: a fresh one per call would be
        /// page-faulted in (and zeroed) every time. Taken out while in use, so a call nested
        /// on the same thread (a rayon worker waiting on its tasks) allocates its own.
        static A_SCRATCH: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
        static B_SCRATCH: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
        static A_SHARED: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
    }

    /// Runs `f` on `len` words of this thread's buffer `scratch` (contents unspecified).
    fn with_scratch<R>(
        scratch: &'static std::thread::LocalKey<Cell<Vec<u32>>>,
        len: usize,
        f: impl FnOnce(&mut [u32]) -> R,
    ) -> R {
        let mut buf = scratch.take();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let r = f(&mut buf[..len]);
        scratch.set(buf);
        r
    }

    /// A destination pointer shared by tasks that write disjoint tiles of it.
    #[derive(Clone, Copy)]
    struct Dst(*mut f32);

    impl Dst {
        /// The element `i` past the pointer (a method, so closures capture the whole `Dst`).
        ///
        /// # Safety
        /// `i` must be inside the slice the pointer came from.
        unsafe fn at(self, i: usize) -> *mut f32 {
            // SAFETY: the caller keeps `i` inside the slice.
            unsafe { self.0.add(i) }
        }
    }
    // SAFETY: the tasks that share a `Dst` write disjoint elements (distinct row blocks or
    // column groups), and the borrow of the slice it points into outlives them all.
    unsafe impl Send for Dst {}
    unsafe impl Sync for Dst {}

    /// `dst[i, j] (+)= alpha · Σ_k bf16(a[i, k]) · bf16(b[k, j])`, summed in f32, with `dst`
    /// row-major (row stride `dst_rs`) from `dst_offset`; the same contract as
    /// [`Precision::matmul`](super::super::Precision::matmul). Must only be called where
    /// [`cpu::has_bf16`] is true.
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
        assert!(
            cpu::has_bf16(),
            "bf16 products on a CPU without AVX512-BF16"
        );
        let Some((m, n, k)) = begin(dst, dst_offset, dst_rs, a, [b.rows, b.cols], accumulate)
        else {
            return;
        };
        b.check();
        let threads = threads && m * n * k >= 1 << 18;
        let panels = n.div_ceil(NR);
        // Tasks: row blocks × column groups, enough of them to keep the pool busy.
        let row_blocks = m.div_ceil(MC);
        let groups = if threads {
            panels.min(16usize.div_ceil(row_blocks))
        } else {
            1
        };
        let per_group = panels.div_ceil(groups);
        let groups = panels.div_ceil(per_group);
        let out = Dst(dst[dst_offset..].as_mut_ptr());
        let layout = Layout::of(a);
        // About 1 MiB of packed B per k slice: longer slices for narrow B.
        let kc_max = ((1usize << 19) / n).clamp(KC, KC_MAX) & !1;
        for pc in (0..k).step_by(kc_max) {
            let ks = pc..(pc + kc_max).min(k);
            let kc2 = ks.len().div_ceil(2);
            let tiles = Tiles::new(layout, kc2, n, out, dst_rs, alpha, pc == 0 && !accumulate);
            let block_rows = |rb: usize| rb * MC..((rb + 1) * MC).min(m);
            let group_cols = |g: usize| g * per_group..((g + 1) * per_group).min(panels);
            let tasks = row_blocks * groups;
            let for_each = |run: &(dyn Fn(usize) + Sync)| {
                if threads {
                    (0..tasks).into_par_iter().for_each(run);
                } else {
                    (0..tasks).for_each(run);
                }
            };
            with_scratch(&B_SCRATCH, panels * kc2 * NR, |bp| {
                pack_b(b, ks.clone(), bp, threads);
                let bp = &*bp;
                if groups == 1 {
                    // Each task packs the slice of its own row block.
                    for_each(&|rb| {
                        with_scratch(&A_SCRATCH, MC * kc2, |ap| {
                            pack_a(a, layout, block_rows(rb), ks.clone(), ap);
                            tiles.sweep(ap, bp, block_rows(rb), 0..panels);
                        })
                    });
                } else {
                    // Several tasks share a row block: its slice is packed once, up front.
                    with_scratch(&A_SHARED, row_blocks * MC * kc2, |ap| {
                        let pack = |(rb, ap): (usize, &mut [u32])| {
                            pack_a(a, layout, block_rows(rb), ks.clone(), ap)
                        };
                        if threads {
                            ap.par_chunks_mut(MC * kc2).enumerate().for_each(pack);
                        } else {
                            ap.chunks_mut(MC * kc2).enumerate().for_each(pack);
                        }
                        let ap = &*ap;
                        for_each(&|task| {
                            let (rb, g) = (task / groups, task % groups);
                            tiles.sweep(&ap[rb * MC * kc2..], bp, block_rows(rb), group_cols(g));
                        });
                    });
                }
            });
        }
    }

    /// What the micro-kernel calls of one k slice share.
    #[derive(Clone, Copy)]
    struct Tiles {
        /// Pairs in the slice.
        kc2: usize,
        /// A's word strides per row and per pair ([`Layout`]).
        ar: usize,
        ak: usize,
        /// Columns of the product.
        n: usize,
        out: Dst,
        dst_rs: usize,
        alpha: f32,
        overwrite: bool,
    }

    impl Tiles {
        /// The slice's tiles for A packed in `layout`.
        fn new(
            layout: Layout,
            kc2: usize,
            n: usize,
            out: Dst,
            dst_rs: usize,
            alpha: f32,
            overwrite: bool,
        ) -> Self {
            let (ar, ak) = match layout {
                Layout::RowPairs => (kc2, 1),
                Layout::PairRows => (1, MR),
            };
            Self {
                kc2,
                ar,
                ak,
                n,
                out,
                dst_rs,
                alpha,
                overwrite,
            }
        }

        /// The tiles of the row block `rows` (A's block packed in `ap`) against the panels
        /// `cols` of `bp`.
        fn sweep(&self, ap: &[u32], bp: &[u32], rows: Range<usize>, cols: Range<usize>) {
            let kc2 = self.kc2;
            for p in cols {
                let panel = &bp[p * kc2 * NR..][..kc2 * NR];
                let width = NR.min(self.n - p * NR);
                for (t, r0) in rows.clone().step_by(MR).enumerate() {
                    let height = MR.min(rows.end - r0);
                    let tile = &ap[t * MR * kc2..][..MR * kc2];
                    // SAFETY: `tile` holds MR·kc2 words read at r·ar + kp·ak < MR·kc2; `panel`
                    // holds kc2·NR words; the tile's `height × width` elements of the
                    // destination were bounds-checked by the caller (rows < m, columns < n)
                    // and no other task writes them; the CPU has the features (`cpu::has_bf16`).
                    unsafe {
                        kernel(
                            kc2,
                            tile.as_ptr(),
                            self.ar,
                            self.ak,
                            panel.as_ptr(),
                            self.out.at(r0 * self.dst_rs + p * NR),
                            self.dst_rs,
                            height,
                            width,
                            self.alpha,
                            self.overwrite,
                        );
                    }
                }
            }
        }
    }

    /// All of `b` packed as one slice (see [`pack_b`]).
    pub(super) fn pack_whole(b: View<'_>) -> Vec<u32> {
        b.check();
        let mut words = vec![0u32; b.cols.div_ceil(NR) * b.rows.div_ceil(2) * NR];
        pack_b(b, 0..b.rows, &mut words, false);
        words
    }

    /// `dst (+)= alpha · a · B` on the calling thread, B `k × n` packed by [`pack_whole`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn matmul_packed(
        dst: &mut [f32],
        dst_offset: usize,
        dst_rs: usize,
        a: View<'_>,
        bp: &[u32],
        [k, n]: [usize; 2],
        alpha: f32,
        accumulate: bool,
    ) {
        let Some((m, n, k)) = begin(dst, dst_offset, dst_rs, a, [k, n], accumulate) else {
            return;
        };
        let kc2 = k.div_ceil(2);
        assert_eq!(
            bp.len(),
            n.div_ceil(NR) * kc2 * NR,
            "packed B of another shape"
        );
        let layout = Layout::of(a);
        let out = Dst(dst[dst_offset..].as_mut_ptr());
        let tiles = Tiles::new(layout, kc2, n, out, dst_rs, alpha, !accumulate);
        for r0 in (0..m).step_by(MC) {
            let rows = r0..(r0 + MC).min(m);
            with_scratch(&A_SCRATCH, MC * kc2, |ap| {
                pack_a(a, layout, rows.clone(), 0..k, ap);
                tiles.sweep(ap, bp, rows, 0..n.div_ceil(NR));
            });
        }
    }

    /// How a packed tile of A lays out its `MR × kc/2` bf16 pairs.
    #[derive(Clone, Copy)]
    enum Layout {
        /// Row by row: word `r·kc2 + kp` (from rows of A contiguous in k).
        RowPairs,
        /// Pair by pair: word `kp·MR + r` (from columns of A contiguous in i).
        PairRows,
    }

    impl Layout {
        /// The layout that packs `a` with contiguous loads.
        fn of(a: View<'_>) -> Self {
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
    fn pack_a(a: View<'_>, layout: Layout, rows: Range<usize>, ks: Range<usize>, ap: &mut [u32]) {
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
    fn pack_b(b: View<'_>, ks: Range<usize>, bp: &mut [u32], threads: bool) {
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
                                interleave16(
                                    b.data,
                                    base + off,
                                    second.map(|s| s + off),
                                    cols,
                                    words,
                                )
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
    fn lanes(n: usize) -> __mmask16 {
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
                let h: __m256i =
                    transmute(_mm512_cvtneps_pbh(_mm512_loadu_ps(src.as_ptr().add(i))));
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
                31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                20, 4, 19, 3, 18, 2, 17, 1, 16, 0,
            );
            let pairs = _mm512_permutexvar_epi16(idx, both);
            _mm512_storeu_si512(words.as_mut_ptr() as *mut __m512i, pairs);
        }
    }

    /// One `MR × NR` tile: `c[r, j] (+)= alpha · Σ_kp dot(a[r, kp], b[kp, j])` over `kc2`
    /// bf16 pairs, A's pair `(r, kp)` at word `r·ar + kp·ak`, B's `(kp, j)` at `kp·NR + j`;
    /// writes the first `rows` rows and `cols` columns of `c` (row stride `rs_c`),
    /// overwriting them when `overwrite`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn kernel(
        kc2: usize,
        ap: *const u32,
        ar: usize,
        ak: usize,
        bp: *const u32,
        c: *mut f32,
        rs_c: usize,
        rows: usize,
        cols: usize,
        alpha: f32,
        overwrite: bool,
    ) {
        // SAFETY (caller): the reads stay inside the packed tile and panel, the masked
        // writes inside the destination tile.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; MR];
            let (mut a, mut b) = (ap, bp);
            for _ in 0..kc2 {
                let b0: __m512bh = transmute(_mm512_loadu_si512(b as *const __m512i));
                let b1: __m512bh = transmute(_mm512_loadu_si512(b.add(16) as *const __m512i));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x: __m512bh = transmute(_mm512_set1_epi32(*a.add(r * ar) as i32));
                    acc[0] = _mm512_dpbf16_ps(acc[0], x, b0);
                    acc[1] = _mm512_dpbf16_ps(acc[1], x, b1);
                }
                a = a.add(ak);
                b = b.add(NR);
            }
            let masks = [lanes(cols.min(16)), lanes(cols.saturating_sub(16))];
            let alpha = _mm512_set1_ps(alpha);
            for (r, acc) in acc.iter().enumerate() {
                if r >= rows {
                    break;
                }
                for h in 0..2 {
                    let p = c.add(r * rs_c + 16 * h);
                    let v = _mm512_mul_ps(acc[h], alpha);
                    // Masked loads and stores only at the right edge: they are slow on some
                    // CPUs (AMD's) even with every lane on.
                    if cols == NR {
                        let v = if overwrite {
                            v
                        } else {
                            _mm512_add_ps(v, _mm512_loadu_ps(p))
                        };
                        _mm512_storeu_ps(p, v);
                    } else {
                        let v = if overwrite {
                            v
                        } else {
                            _mm512_add_ps(v, _mm512_maskz_loadu_ps(masks[h], p))
                        };
                        _mm512_mask_storeu_ps(p, masks[h], v);
                    }
                }
            }
        }
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
