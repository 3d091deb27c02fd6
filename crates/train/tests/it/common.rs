//! What train's tests share: running a test alone in a child process, and for the planner
//! tests a counting global allocator (the peak live heap of the process), real training steps
//! to measure, the prediction to set beside them and the ±10% check.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, FloatDType, Int, Tensor};
use segformer::Kernels;
use train::{AdamW, AdamWConfig, KernelPath, MemoryPlan, PlanInput, Precision};

/// Tells a child started by [`ran_alone`] which test it is there to run.
const ALONE: &str = "SEGFIT_TEST_ALONE";

/// The name the harness gives test `test` of module `module` (a `module_path!()`, which starts
/// with the binary's root `it`), as `--exact` takes it: `training::resume_child`.
pub fn test_name(module: &str, test: &str) -> String {
    let (_, path) = module
        .split_once("::")
        .expect("a module below the test binary's root");
    format!("{path}::{test}")
}

/// In the test process: runs test `test` of `module` again in a child process where it is the
/// only test, asserts that it passed there, forwards what it printed, and returns true (the
/// caller then returns). In that child: returns false, and the caller runs its body.
///
/// For the tests that must not share their process with the others of this binary, which run
/// on the threads beside them: those whose outcome depends on the draws of burn-flex's one
/// process-wide RNG (`B::seed`, weight initialisation, dropout and stochastic depth all take
/// from it, so another test's draws would shift theirs), and those that measure the process's
/// allocations. Use it through [`alone!`].
pub fn ran_alone(module: &str, test: &str) -> bool {
    let name = test_name(module, test);
    if std::env::var(ALONE).is_ok_and(|v| v == name) {
        return false;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name.as_str(),
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ALONE, &name)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprint!("{stderr}");
    // A test name that matches nothing passes with "0 passed": require this one test.
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} alone in a child process: {}\n{stdout}",
        out.status
    );
    true
}

/// `alone!(test_fn)` at the top of `test_fn`: the rest of its body runs in a child process of
/// its own ([`ran_alone`]).
macro_rules! alone {
    ($test:ident) => {
        if $crate::common::ran_alone(module_path!(), stringify!($test)) {
            return;
        }
    };
}
pub(crate) use alone;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak live heap bytes of the second of two real training steps (the first allocates the
/// AdamW moments) of a model whose layers run `kernels`, everything the process holds
/// included, like the prediction. The counters are process-wide: call it only from a test
/// that runs alone in its process ([`alone!`]), where no other test allocates meanwhile.
pub fn measured_peak<B: AutodiffBackend>(
    kernels: Kernels,
    size: usize,
    batch: usize,
    bf16: bool,
) -> u64 {
    // What the process already holds is not part of training: the harness, and e.g. the
    // symbol cache a panicking test's backtrace leaves behind (~90 MiB with RUST_BACKTRACE).
    let baseline = LIVE.load(Ordering::Relaxed);
    let device = Default::default();
    B::seed(&device, 0);
    let config = train::preset("mit-b0").unwrap().with_num_labels(2);
    let mut model = config
        .init::<B>(&device)
        .unwrap()
        .with_compute_dtype(bf16.then_some(FloatDType::BF16))
        .with_kernels(kernels);
    let x = Tensor::<B, 4>::random(
        [batch, 3, size, size],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    let y = Tensor::<B, 3, Int>::random(
        [batch, size, size],
        Distribution::Uniform(0.0, 2.0),
        &device,
    );
    let mut opt = AdamW::<B>::new(AdamWConfig::default());
    let mut peak = 0;
    for i in 0..2 {
        if i == 1 {
            PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let loss = model.loss(model.forward(x.clone()), y.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = opt.step(6e-5, model, grads, 1.0).0;
        peak = PEAK.load(Ordering::Relaxed);
    }
    peak.saturating_sub(baseline) as u64
}

pub fn predicted_for(
    kernels: KernelPath,
    size: usize,
    batch: usize,
    precision: Precision,
    checkpointing: bool,
) -> u64 {
    let config = train::preset("mit-b0").unwrap().with_num_labels(2);
    MemoryPlan::predict(&PlanInput {
        kernels,
        config: &config,
        height: size,
        width: size,
        batch,
        precision,
        checkpointing,
        allocator: train::Allocator::Heap,
        loss: None,
    })
    .peak_bytes()
}

pub fn check(measured: u64, predicted: u64, what: &str) {
    let err = (predicted as f64 - measured as f64) / measured as f64;
    eprintln!(
        "{what}: predicted {:.1} MiB, measured {:.1} MiB ({:+.1}%)",
        predicted as f64 / 1048576.0,
        measured as f64 / 1048576.0,
        100.0 * err
    );
    assert!(
        err.abs() <= 0.10,
        "{what}: predicted {predicted} B vs measured {measured} B ({:+.1}%)",
        100.0 * err
    );
}
