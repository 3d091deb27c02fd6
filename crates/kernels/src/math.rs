//! Branch-free `exp` and `erf` that the compiler vectorises, and a macro compiling a hot loop
//! three times (AVX-512, AVX2+FMA and the baseline target) that runs the widest this CPU has.

/// `e^x` for f32 (Cephes' `expf` polynomial, about 2 ulp; inputs below −87.3 give ≈1e−38
/// instead of 0 and above 88.7 ≈3e38 instead of ∞, which no caller here can tell apart; NaN
/// stays NaN).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // `max`/`min` (unlike `clamp`) map NaN to a number here; it is restored at the end.
    let xc = x.max(-87.3).min(88.7);
    let k = (xc * LOG2E + 0.5).floor();
    let r = xc - k * LN2_HI - k * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // SAFETY: `xc` is a number in −87.3..=88.7, so `k` is a finite integer in −126..=128:
    // the unchecked conversion (which vectorises, unlike `as`'s saturating one) is exact.
    let k: i32 = unsafe { k.to_int_unchecked() };
    let e = y * f32::from_bits(((k + 127) as u32) << 23);
    if x.is_nan() { x } else { e }
}

/// `erf(x)` for f32 through the Chebyshev fit of `erfc` in Numerical Recipes (`erfcc`,
/// fractional error below 1.2e−7), evaluated with [`exp`]; absolute error ≈ 2e−7.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = 0.170_872_77;
    let p = p * t - 0.822_152_23;
    let p = p * t + 1.488_515_9;
    let p = p * t - 1.135_203_98;
    let p = p * t + 0.278_868_07;
    let p = p * t - 0.186_288_06;
    let p = p * t + 0.096_784_18;
    let p = p * t + 0.374_091_96;
    let p = p * t + 1.000_023_7;
    let p = p * t - 1.265_512_2;
    let erfc = t * exp(-z * z + p);
    (1.0 - erfc).copysign(x)
}

/// Lanes of the reductions below: independent partial results the compiler keeps in one
/// vector register (a float reduction in one accumulator cannot be vectorised).
pub(crate) const LANES: usize = 8;

/// `Σ x` over 8 interleaved partial sums.
#[inline(always)]
pub(crate) fn lanes_sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ a·b` over 8 interleaved partial sums.
#[inline(always)]
pub(crate) fn lanes_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ (x − mean)²` over 8 interleaved partial sums.
#[inline(always)]
pub(crate) fn lanes_sq_dev(x: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f32 = chunks
        .remainder()
        .iter()
        .map(|v| (v - mean) * (v - mean))
        .sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += (v - mean) * (v - mean);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `max x` (−∞ for an empty slice) over 8 interleaved partial maxima.
#[inline(always)]
pub(crate) fn lanes_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks
        .remainder()
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = if *v > *a { *v } else { *a };
        }
    }
    acc.iter().copied().fold(tail, f32::max)
}

/// Defines `fn $name` whose body is compiled for AVX-512, for AVX2+FMA and for the baseline,
/// choosing the widest the CPU has ([`cpu::simd`](super::cpu::simd), detected once). The
/// builds compute the same floats: Rust never contracts `a·b + c` into an FMA or reorders a
/// sum, so only the vector width differs.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::cpu::{Simd, simd};
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? $body
                match simd() {
                    // SAFETY: the CPU has the features `avx512` was compiled for.
                    Simd::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: the CPU has the features `avx2` was compiled for.
                    Simd::Avx2 => return unsafe { avx2($($arg),*) },
                    Simd::Baseline => {}
                }
            }
            #[inline(always)]
            fn baseline($($arg: $ty),*) $(-> $ret)? $body
            baseline($($arg),*)
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    #[test]
    fn exp_and_erf_match_the_standard_library() {
        let mut worst = (0.0f64, 0.0f64);
        for i in -20000..=20000 {
            let x = i as f32 * 0.004; // −80 … 80 for exp, −8 … 8 for erf (scaled below)
            let e = super::exp(x) as f64;
            let want = (x as f64).exp();
            worst.0 = worst.0.max((e - want).abs() / want);
            let y = x / 10.0;
            let want = libm::erf(y as f64);
            worst.1 = worst.1.max((super::erf(y) as f64 - want).abs());
        }
        assert!(worst.0 < 5e-7, "exp relative error {:e}", worst.0);
        assert!(super::exp(f32::NAN).is_nan() && super::erf(f32::NAN).is_nan());
        assert_eq!(super::exp(f32::INFINITY), super::exp(88.7));
        assert!(worst.1 < 5e-7, "erf absolute error {:e}", worst.1);
    }
}
