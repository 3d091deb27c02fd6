//! Helpers of the op tests (`fused` and `recompute`): seeded inputs, relative error, one
//! forward and backward pass with every input's gradient.

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor, TensorData};

/// A standard-normal tensor from a fixed seed, drawn from its own generator (splitmix64 and
/// Box–Muller): the backend's global RNG is shared by tests running in parallel, so a seed
/// set there does not make a test's inputs reproducible.
pub(crate) fn random<B: Backend, const D: usize>(shape: [usize; D], seed: u64) -> Tensor<B, D> {
    random_on(shape, seed, &Default::default())
}

/// [`random`] on `device`.
pub(crate) fn random_on<B: Backend, const D: usize>(
    shape: [usize; D],
    seed: u64,
    device: &B::Device,
) -> Tensor<B, D> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut uniform = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // (0, 1]: never 0, so the logarithm below is finite.
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON
    };
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| {
            let (u, v) = (uniform().min(1.0), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Largest |a − b| relative to the largest |b|.
pub(crate) fn rel_err<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f32 {
    assert_eq!(a.dims(), b.dims());
    let scale = b.clone().abs().max().into_scalar().elem::<f32>().max(1e-6);
    (a - b).abs().max().into_scalar().elem::<f32>() / scale
}

/// Panics with `what` when the [`rel_err`] of `a` against `b` exceeds `tol`.
pub(crate) fn assert_close<B: Backend, const D: usize>(
    what: &str,
    a: Tensor<B, D>,
    b: Tensor<B, D>,
    tol: f32,
) {
    let e = rel_err(a, b);
    assert!(e <= tol, "{what}: relative error {e:e} > {tol:e}");
}

/// Runs `f` on fresh tracked copies of `inputs`, reduces the output with fixed random weights,
/// and returns the output and the gradient of every input.
pub(crate) fn forward_backward<B: AutodiffBackend, const D: usize, const O: usize>(
    inputs: &[Tensor<B, D>],
    f: impl Fn(&[Tensor<B, D>]) -> Tensor<B, O>,
) -> (Tensor<B::InnerBackend, O>, Vec<Tensor<B::InnerBackend, D>>) {
    let tracked: Vec<_> = inputs
        .iter()
        .map(|t| t.clone().detach().require_grad())
        .collect();
    let out = f(&tracked);
    let weights = random_on::<B, O>(out.dims(), 99, &out.device());
    let grads = (out.clone() * weights).sum().backward();
    let input_grads = tracked
        .iter()
        .map(|t| t.grad(&grads).expect("input gradient"))
        .collect();
    (out.inner(), input_grads)
}

/// The autotune settings of the GPU tests: the cache pinned under the workspace's `target/`,
/// the coarsest level (the fewest shapes timed).
#[cfg(feature = "wgpu")]
pub(crate) fn autotune() -> crate::Autotune {
    crate::Autotune {
        cache_dir: testkit::autotune_cache(),
        level: crate::AutotuneLevel::Minimal,
    }
}

/// The first wgpu adapter (lavapipe in CI), or `None` with a skip note where this machine has
/// none; under `CI=true` a missing adapter fails the test instead.
#[cfg(feature = "wgpu")]
pub(crate) fn wgpu_device() -> Option<burn::backend::wgpu::WgpuDevice> {
    crate::set_autotune(&autotune()).expect("the tests' autotune settings");
    match crate::wgpu_adapter(0) {
        Ok(adapter) => {
            eprintln!("wgpu adapter: {adapter}");
            Some(adapter.device)
        }
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true needs a wgpu adapter (lavapipe: mesa-vulkan-drivers): {e}")
        }
        Err(e) => {
            eprintln!("skipping the wgpu case: {e}");
            None
        }
    }
}

/// Serialises the tests that draw from the backend's global RNG (lazily initialised layers,
/// `B::seed`): one that seeds it and expects the same draws twice must not see another test's
/// draws in between. Hold the guard for the whole test.
pub(crate) fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
