//! The blocked product on AVX512-BF16: tasks over row blocks and column groups, per k slice
//! B packed once and A per row block ([`pack`](super::pack)), and the `MR × NR` micro-kernel
//! over the packed tiles.

use std::arch::x86_64::*;
use std::cell::Cell;
use std::mem::transmute;
use std::ops::Range;

use rayon::prelude::*;

use super::pack::{Layout, lanes, pack_a, pack_b};
use super::{KC, KC_MAX, MC, MR, NR, cpu};
use crate::gemm::{View, begin};

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
    let Some((m, n, k)) = begin(dst, dst_offset, dst_rs, a, [b.rows, b.cols], accumulate) else {
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

/// `dst (+)= alpha · a · B` on the calling thread, B `k × n` packed by
/// [`pack_whole`](super::pack::pack_whole).
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
