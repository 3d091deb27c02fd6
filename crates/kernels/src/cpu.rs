//! What this CPU runs, detected once for every kernel that chooses by it: the widest build of
//! the element-wise kernels (`simd`, for `math::multiversion!`) and whether the bf16
//! products run ([`has_bf16`], for `gemm::Precision`, `gemm::bf16` and
//! `segformer::cpu_has_bf16_kernels`). The f32 products are the `gemm` crate's, which picks
//! its own kernels.

use std::sync::OnceLock;

/// The widest of the builds `math::multiversion!` makes that this CPU runs.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    /// AVX-512 F/BW/VL/DQ (with AVX2 and FMA).
    Avx512,
    /// AVX2 and FMA.
    Avx2,
    /// Neither.
    Baseline,
}

/// The capabilities the kernels choose by.
#[derive(Clone, Copy)]
struct Features {
    #[cfg(target_arch = "x86_64")]
    simd: Simd,
    /// AVX512-F/BW/VL and AVX512-BF16: what the bf16 products' kernels are compiled for.
    bf16: bool,
}

/// This CPU's [`Features`], detected on the first call: the element-wise kernels ask per row,
/// so after that this is one load.
fn features() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    let avx512 = std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl");
    let simd = if avx2 && avx512 && std::is_x86_feature_detected!("avx512dq") {
        Simd::Avx512
    } else if avx2 {
        Simd::Avx2
    } else {
        Simd::Baseline
    };
    Features {
        simd,
        bf16: avx512 && std::is_x86_feature_detected!("avx512bf16"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Features {
    Features { bf16: false }
}

/// The CPU's [`Simd`] level.
#[cfg(target_arch = "x86_64")]
pub(crate) fn simd() -> Simd {
    features().simd
}

/// Whether this CPU runs the bf16 products (AVX512-F/BW/VL and AVX512-BF16); false on this
/// thread inside `without_bf16` (tests).
pub fn has_bf16() -> bool {
    #[cfg(any(test, feature = "test-hooks"))]
    if HIDDEN.get() {
        return false;
    }
    features().bf16
}

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    /// This thread sees a CPU without the bf16 instructions ([`without_bf16`]).
    static HIDDEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` as on a CPU without AVX512-BF16 (on this thread), so that the fallback to f32 is
/// tested on CPUs that have the instructions too. Only with the `test-hooks` feature (the
/// tests of `kernels` and `segformer`): without it `has_bf16` is the CPU's answer alone.
#[cfg(any(test, feature = "test-hooks"))]
pub fn without_bf16<R>(f: impl FnOnce() -> R) -> R {
    HIDDEN.set(true);
    let r = f();
    HIDDEN.set(false);
    r
}
