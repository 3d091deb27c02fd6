//! Per-sample random numbers, derived from `(seed, epoch, index)`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The random stream one sample is augmented with.
///
/// It depends only on `(seed, epoch, index)`, never on which loader thread draws it or in what
/// order, so a run is reproducible whatever the number of threads.
#[derive(Clone, Debug)]
pub struct SampleRng(ChaCha8Rng);

impl SampleRng {
    /// The stream for sample `index` of epoch `epoch` under the run's `seed`.
    ///
    /// The triple is the ChaCha key itself (plus a domain constant), so distinct triples give
    /// independent streams without any hashing collisions.
    pub fn new(seed: u64, epoch: u64, index: u64) -> Self {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&epoch.to_le_bytes());
        key[16..24].copy_from_slice(&index.to_le_bytes());
        key[24..].copy_from_slice(b"augment1");
        Self(ChaCha8Rng::from_seed(key))
    }

    /// Uniform in `[lo, hi]` (exactly `lo` when the range is empty).
    pub(crate) fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        if hi <= lo {
            lo
        } else {
            self.0.random_range(lo..=hi)
        }
    }

    /// Uniform integer in `lo..=hi`.
    pub(crate) fn int(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            lo
        } else {
            self.0.random_range(lo..=hi)
        }
    }

    /// True with probability `p`. Always draws, so later draws do not depend on `p`.
    pub(crate) fn chance(&mut self, p: f32) -> bool {
        self.0.random::<f32>() < p
    }

    /// A standard normal deviate (Box–Muller; one of the pair is discarded for simplicity).
    pub(crate) fn normal(&mut self) -> f32 {
        let u1: f32 = 1.0 - self.0.random::<f32>(); // (0, 1], so ln is finite
        let u2: f32 = self.0.random::<f32>();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }

    /// `k` distinct indices from `0..n`, in random order.
    pub(crate) fn choose(&mut self, n: usize, k: usize) -> Vec<usize> {
        rand::seq::index::sample(&mut self.0, n, k.min(n)).into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_depend_on_every_part_of_the_triple() {
        let draw = |s, e, i| {
            let mut r = SampleRng::new(s, e, i);
            (0..4).map(|_| r.uniform(0.0, 1.0)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1, 2, 3), draw(1, 2, 3));
        assert_ne!(draw(1, 2, 3), draw(0, 2, 3));
        assert_ne!(draw(1, 2, 3), draw(1, 0, 3));
        assert_ne!(draw(1, 2, 3), draw(1, 2, 0));
        // Swapping parts must not collide either.
        assert_ne!(draw(2, 3, 1), draw(1, 2, 3));
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut r = SampleRng::new(0, 0, 0);
        let xs: Vec<f32> = (0..20_000).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f32>() / xs.len() as f32;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / xs.len() as f32;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "mean {mean} var {var}"
        );
    }
}
