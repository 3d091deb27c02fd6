//! Shared helpers for the parity tests: expected tensors, relative and worst-element error
//! (fixtures are found by `testkit::fixture`).

use std::collections::HashMap;
use std::path::Path;

use burn::tensor::{DType, TensorData};

/// Every tensor of `dir/expected.safetensors`, read with the `safetensors` crate directly.
pub fn expected(dir: &Path) -> HashMap<String, TensorData> {
    let bytes = std::fs::read(dir.join("expected.safetensors")).expect("read expected.safetensors");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("parse expected.safetensors");
    file.tensors()
        .into_iter()
        .map(|(key, view)| {
            let dtype = match view.dtype() {
                safetensors::Dtype::F32 => DType::F32,
                safetensors::Dtype::I64 => DType::I64,
                other => panic!("unexpected dtype {other:?} for {key}"),
            };
            let data =
                TensorData::from_bytes_vec(view.data().to_vec(), view.shape().to_vec(), dtype);
            (key, data)
        })
        .collect()
}

/// ‖ours − reference‖ / ‖reference‖, after checking the shapes agree.
pub fn rel_err(what: &str, ours: &TensorData, reference: &TensorData) -> f64 {
    assert_eq!(
        ours.shape, reference.shape,
        "{what}: shape differs from the reference"
    );
    let a = ours.to_vec::<f32>().unwrap();
    let b = reference.to_vec::<f32>().unwrap();
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(&b) {
        diff += (*x as f64 - *y as f64).powi(2);
        norm += (*y as f64).powi(2);
    }
    if norm == 0.0 {
        return diff.sqrt();
    }
    (diff / norm).sqrt()
}

/// The worst element: `max |ours − reference|` over the elements, divided by
/// `max |reference|` (so that one tolerance fits tensors of any scale), with its index.
pub fn worst_err(what: &str, ours: &TensorData, reference: &TensorData) -> (f64, usize) {
    assert_eq!(
        ours.shape, reference.shape,
        "{what}: shape differs from the reference"
    );
    let a = ours.to_vec::<f32>().unwrap();
    let b = reference.to_vec::<f32>().unwrap();
    let scale = b.iter().map(|y| (*y as f64).abs()).fold(0.0, f64::max);
    let (diff, at) = a
        .iter()
        .zip(&b)
        .enumerate()
        .map(|(i, (x, y))| ((*x as f64 - *y as f64).abs(), i))
        .fold((0.0, 0), |m, d| if d.0 > m.0 { d } else { m });
    (if scale == 0.0 { diff } else { diff / scale }, at)
}

/// Tolerances of one comparison: on the relative Frobenius error ([`rel_err`]), and on the
/// worst element ([`worst_err`]), which the norm would let one bad element hide in.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    /// Bound on `‖ours − reference‖ / ‖reference‖`.
    pub rel: f64,
    /// Bound on `max |ours − reference| / max |reference|`.
    pub worst: f64,
}

/// Asserts both bounds of `tol`, naming the tensor, the errors and the worst element on
/// failure; returns `(rel, worst)` for reporting.
pub fn assert_close(what: &str, ours: &TensorData, reference: &TensorData, tol: Tol) -> (f64, f64) {
    let err = rel_err(what, ours, reference);
    let (worst, at) = worst_err(what, ours, reference);
    eprintln!("{what}: relative error {err:.2e}, worst element {worst:.2e}");
    assert!(
        err <= tol.rel,
        "{what}: relative error {err:.3e} > {:.0e}",
        tol.rel
    );
    assert!(
        worst <= tol.worst,
        "{what}: worst element (index {at}) off by {worst:.3e} of the largest reference magnitude > {:.0e}",
        tol.worst
    );
    (err, worst)
}

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use segformer::Kernels;

type Train = Autodiff<Flex>;

// The parity tolerances (CPU: `Flex`, fused and recomputing paths; wgpu on lavapipe shares
// them). `worst` bounds the worst element as a fraction of the tensor's largest magnitude: an
// error spread over the tensor gives `worst <= rel`, so the relative bound applied element by
// element catches one bad element that the norm would dilute (a wrong border pixel, one
// channel). The `worst` bounds sit 7-13x above the largest worst-element errors measured over
// the suite (CPU and wgpu/lavapipe; each comparison prints both): eval 2.4e-6, gradients 1.4e-5,
// BatchNorm statistics 4.1e-7. The loss keeps its 1e-5: burn's composed and recomputing paths
// measure 2.4e-6 (the fused one 7.6e-8).

/// Eval outputs (logits, every hidden state), eval and train mode.
pub const EVAL: Tol = Tol {
    rel: 1e-4,
    worst: 2e-5,
};
/// The scalar loss (`worst` is its relative error too).
pub const LOSS: Tol = Tol {
    rel: 1e-5,
    worst: 1e-5,
};
/// Every gradient but the zero-by-construction ones.
pub const GRAD: Tol = Tol {
    rel: 1e-3,
    worst: 1e-4,
};
/// The decode head's BatchNorm running statistics after the step.
pub const STATS: Tol = Tol {
    rel: 1e-5,
    worst: 5e-6,
};

/// Eval-mode logits and every encoder stage output against `eval.*`, the layers run by
/// `kernels`.
pub fn check_eval(dir: &Path, kernels: Kernels) {
    check_eval_on::<Flex>(dir, kernels, &Default::default());
}

/// [`check_eval`] on backend `B`, tensors on `device`.
pub fn check_eval_on<B: Backend>(dir: &Path, kernels: Kernels, device: &B::Device) {
    let (model, report) = segformer::load_hf_dir::<B>(dir, device).expect("load model dir");
    assert!(report.is_exact(), "unexpected load report:\n{report}");
    let model = model.with_kernels(kernels);
    let exp = expected(dir);
    let pixels = Tensor::<B, 4>::from_data(exp["pixel_values"].clone(), device);
    let (logits, hidden) = model.forward_with_hidden_states(pixels);
    assert_close(
        "eval.logits",
        &logits.into_data(),
        &exp["eval.logits"],
        EVAL,
    );
    assert_eq!(hidden.len(), 4);
    for (i, h) in hidden.into_iter().enumerate() {
        let key = format!("eval.hidden_state.{i}");
        assert_close(&key, &h.into_data(), &exp[&key], EVAL);
    }
}

fn norm(d: &TensorData) -> f64 {
    d.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| (*x as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// Parameters whose gradient is exactly zero in exact arithmetic, so both frameworks
/// return rounding noise (~1e-9): a key bias shifts every score of a query row equally
/// (softmax is shift-invariant), and train-mode BatchNorm subtracts any per-channel
/// constant, which is all that the projection biases and the last stage's LayerNorm bias
/// contribute (the last stage feeds only the decode head).
fn zero_by_construction(name: &str) -> bool {
    name.ends_with("attention.k_proj.bias")
        || (name.starts_with("decode_head.linear_projections.") && name.ends_with(".proj.bias"))
        || name == "segformer.stages.3.layer_norm.bias"
}

/// One train-mode step under `Autodiff<Flex>`: loss, logits, every gradient and the
/// BatchNorm running statistics against `train.*` / `grad.*`, the layers run by `kernels`.
pub fn check_train(dir: &Path, kernels: Kernels) {
    check_train_on::<Train>(dir, kernels, &Default::default());
}

/// [`check_train`] on the autodiff backend `B`, tensors on `device`.
pub fn check_train_on<B: AutodiffBackend>(dir: &Path, kernels: Kernels, device: &B::Device) {
    let (model, _) = segformer::load_hf_dir::<B>(dir, device).expect("load model dir");
    let model = model.with_kernels(kernels);
    let exp = expected(dir);
    let pixels = Tensor::<B, 4>::from_data(exp["pixel_values"].clone(), device);
    let labels = Tensor::<B, 3, Int>::from_data(exp["labels"].clone(), device);
    let logits = model.forward(pixels);
    assert_close(
        "train.logits",
        &logits.clone().into_data(),
        &exp["train.logits"],
        EVAL,
    );
    let loss = model.loss(logits, labels);
    assert_close(
        "train.loss",
        &loss.clone().into_data(),
        &exp["train.loss"],
        LOSS,
    );
    let grads = loss.backward();
    let ours: HashMap<String, TensorData> = segformer::hf_gradients(&model, &grads)
        .into_iter()
        .collect();
    let reference: Vec<_> = exp
        .keys()
        .filter(|k| k.starts_with("grad."))
        .cloned()
        .collect();
    assert_eq!(ours.len(), reference.len(), "one gradient per HF parameter");
    let mut worst = (0.0, String::new(), 0.0, String::new());
    for key in &reference {
        let name = &key["grad.".len()..];
        let g = ours
            .get(name)
            .unwrap_or_else(|| panic!("no gradient for {name}"));
        if zero_by_construction(name) {
            // Relative error of rounding noise is meaningless: check both are ~0 instead.
            for (who, d) in [("ours", g), ("reference", &exp[key])] {
                assert!(
                    norm(d) < 1e-6,
                    "{key}: {who} should be ~0 by construction, norm {:.3e}",
                    norm(d)
                );
            }
            continue;
        }
        let (err, elem) = assert_close(key, g, &exp[key], GRAD);
        if err > worst.0 {
            worst.0 = err;
            worst.1 = key.clone();
        }
        if elem > worst.2 {
            worst.2 = elem;
            worst.3 = key.clone();
        }
    }
    eprintln!(
        "worst gradient relative error: {:.3e} ({}); worst gradient element: {:.3e} ({})",
        worst.0, worst.1, worst.2, worst.3
    );
    let state: HashMap<String, TensorData> = segformer::hf_state_dict(&model).into_iter().collect();
    for stat in ["running_mean", "running_var"] {
        let key = format!("decode_head.batch_norm.{stat}");
        assert_close(
            &key,
            &state[&key],
            &exp[&format!("train.buffer.{key}")],
            STATS,
        );
    }
}

/// The first wgpu adapter (lavapipe in CI), or `None` with a skip note where this machine has
/// no Vulkan/Metal/DX12 adapter; under `CI=true` a missing adapter is a failure.
pub fn wgpu_device() -> Option<burn::backend::wgpu::WgpuDevice> {
    // CubeCL's autotune cache pinned under the workspace's target/ (its default would be this
    // crate's own directory), at the level that times the fewest shapes.
    segformer::set_autotune(&segformer::Autotune {
        cache_dir: testkit::autotune_cache(),
        level: segformer::AutotuneLevel::Minimal,
    })
    .expect("the tests' autotune settings");
    match segformer::wgpu_adapter(0) {
        Ok(adapter) => {
            eprintln!("wgpu adapter: {adapter}, driver {}", adapter.driver);
            Some(adapter.device)
        }
        Err(e) if testkit::is_ci() => panic!(
            "CI=true needs a wgpu adapter (Debian: apt-get install mesa-vulkan-drivers libvulkan1): {e}"
        ),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}
