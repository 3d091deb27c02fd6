//! Data-parallel training (`train_data_parallel`, burn-collective's all-reduce of the
//! gradients) checked on the CPU without GPUs: two peers on burn-flex against one device.
//!
//! The reference for two peers with micro-batch `m` and `a` accumulation steps is one device
//! with micro-batch `m` and `2a` accumulation steps, fed the same micro-batches: the effective
//! batch is the same, and so are BatchNorm's batch statistics, which are per device (as in
//! PyTorch's DDP without SyncBatchNorm) and so per micro-batch on both sides. A single device
//! running the combined `2m` batch in one forward would normalise over `2m` samples and is
//! not the reference. The running statistics kept by two peers are the primary's (updated by
//! its own micro-batches only, as DDP keeps rank 0's), so they are left out of the comparison.
//! What remains differs only by the order of the gradient sums: peer sums `(g0 + g2) + (g1 + g3)`
//! against `((g0 + g1) + g2) + g3`, except for five parameters whose gradient is zero in exact
//! arithmetic and is rounding noise in practice ([`has_zero_gradient`]), where that order
//! decides AdamW's step.

use std::collections::BTreeMap;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use train::{RunOptions, TrainConfig};

use crate::common::alone;
use crate::training::{config, dataset};

type B = Autodiff<Flex>;

/// The f32 tensors of a checkpoint's `model.safetensors`, by name.
fn tensors(checkpoint: &Path) -> BTreeMap<String, Vec<f32>> {
    let bytes = std::fs::read(checkpoint.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, values)
        })
        .collect()
}

fn is_running_statistic(name: &str) -> bool {
    name.contains("running_mean") || name.contains("running_var")
}

/// The parameters whose gradient is zero in exact arithmetic: they add a constant per channel
/// to what the decode head's BatchNorm normalises with its batch mean, which removes it. The
/// four `linear_c` projection biases do, and so does the last encoder LayerNorm's bias, whose
/// output only feeds `linear_c.3`. Their computed gradient is rounding noise, which AdamW's
/// normalisation turns into steps of the learning rate's size, so the order of the gradient
/// sums changes them by that much: they are compared apart (see
/// [`their_gradient_is_rounding_noise`]).
fn has_zero_gradient(name: &str) -> bool {
    (name.starts_with("decode_head.linear_c.") && name.ends_with(".proj.bias"))
        || name == "segformer.encoder.layer_norm.3.bias"
}

/// The independent check of [`has_zero_gradient`]: one backward through a fresh mit-tiny in
/// training mode, where those five gradients (by module path) are noise next to the rest.
#[test]
fn their_gradient_is_rounding_noise() {
    use burn::module::{Module, ModuleVisitor};
    use burn::tensor::{Distribution, Int, Tensor};
    /// The largest |gradient| of every parameter, by module path (the field names, which
    /// burn's derive passes to `enter_module`).
    struct Grads<'a> {
        grads: &'a <B as burn::tensor::backend::AutodiffBackend>::Gradients,
        path: Vec<String>,
        out: Vec<(String, f32)>,
    }
    impl ModuleVisitor<B> for Grads<'_> {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            if let Some(g) = param.val().grad(self.grads) {
                let worst = g.abs().max().into_scalar();
                self.out.push((self.path.join("."), worst));
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path(), 4, 64);
    let cfg = run_config(&root, 1, 1);
    let device = Default::default();
    <B as burn::tensor::backend::Backend>::seed(&device, 5);
    let names = ["outer".to_string(), "rice_paddy".to_string()];
    let (model, _) = train::build_model::<B>(&cfg.model, &names, 3, &device).unwrap();
    let x = Tensor::<B, 4>::random([2, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
    let y = Tensor::<B, 3, Int>::random([2, 64, 64], Distribution::Uniform(0.0, 2.0), &device);
    let grads = model.loss(model.forward(x), y).backward();
    let mut visitor = Grads {
        grads: &grads,
        path: Vec::new(),
        out: Vec::new(),
    };
    model.visit(&mut visitor);
    let noise = |path: &str| {
        (path.starts_with("decode_head.linear_projections.") && path.ends_with(".bias"))
            || path == "segformer.stages.3.layer_norm.beta"
    };
    let (zero, rest): (Vec<_>, Vec<_>) = visitor.out.iter().partition(|(p, _)| noise(p));
    let paths: Vec<_> = visitor.out.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(zero.len(), 5, "the five parameters, among {paths:?}");
    let largest = rest.iter().map(|(_, g)| *g).fold(0f32, f32::max);
    for (path, g) in &zero {
        assert!(
            *g <= 1e-5 * largest,
            "{path}: |grad| up to {g:e}, the largest elsewhere is {largest:e}"
        );
    }
}

/// Micro-batches of 2 per epoch in the dataset at `root`.
fn micro_batches(root: &Path) -> usize {
    std::fs::read_dir(root.join("images/train"))
        .unwrap()
        .count()
        .div_ceil(2)
}

fn run_config(root: &Path, accumulation: usize, epochs: usize) -> TrainConfig {
    // Micro-batches of 2; stochastic depth and dropout stay on (mit-tiny's defaults): each
    // micro-batch draws its own seeded masks.
    config(
        root,
        &[
            &format!("train.epochs={epochs}"),
            "train.batch_size=2",
            &format!("train.accumulation_steps={accumulation}"),
            "schedule.kind=\"constant\"",
            "train.overlay_samples=0",
        ],
    )
}

#[test]
fn two_peers_step_like_one_device_accumulating_their_micro_batches() {
    alone!(two_peers_step_like_one_device_accumulating_their_micro_batches);
    let tmp = tempfile::tempdir().unwrap();
    // 22 samples, 18 of them for training: 9 micro-batches an epoch, so groups of 4 leave a
    // last group of one, where the second peer has none and adds zeros.
    let root = dataset(tmp.path(), 22, 64);
    assert_eq!(
        micro_batches(&root) % 4,
        1,
        "a last group of one micro-batch"
    );
    let (peers_dir, one_dir) = (tmp.path().join("peers"), tmp.path().join("one"));
    let peers = train::train_data_parallel::<B>(
        &run_config(&root, 2, 2),
        &RunOptions::new(&peers_dir),
        &[Default::default(), Default::default()],
    )
    .unwrap();
    let one = train::train::<B>(
        &run_config(&root, 4, 2),
        &RunOptions::new(&one_dir),
        &Default::default(),
    )
    .unwrap();
    // The same groups on both sides, so the same number of steps.
    assert_eq!(peers.steps, one.steps);
    assert!(peers.steps >= 4, "{} steps", peers.steps);
    let (a, b) = (
        tensors(&peers_dir.join("checkpoints/last")),
        tensors(&one_dir.join("checkpoints/last")),
    );
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same tensors"
    );
    let initial = {
        // The weights moved: the comparison is not between two untrained models. These are
        // the run's initial weights (seeded with train.seed before the model is built).
        let cfg = run_config(&root, 4, 1);
        let device = Default::default();
        <B as burn::tensor::backend::Backend>::seed(&device, cfg.train.seed);
        let names = ["outer".to_string(), "rice_paddy".to_string()];
        let (model, _) = train::build_model::<B>(&cfg.model, &names, 3, &device).unwrap();
        let fresh = tmp.path().join("fresh");
        segformer::save_hf_dir(&model, &fresh).unwrap();
        tensors(&fresh)
    };
    let (mut worst, mut moved, mut compared, mut zero_grad) = (0f32, 0f32, 0, 0);
    for (name, x) in &a {
        if is_running_statistic(name) || name.contains("num_batches_tracked") {
            continue;
        }
        if has_zero_gradient(name) {
            zero_grad += 1;
            continue;
        }
        compared += 1;
        for ((p, q), w0) in x.iter().zip(&b[name]).zip(&initial[name]) {
            worst = worst.max((p - q).abs());
            moved = moved.max((q - w0).abs());
        }
    }
    eprintln!(
        "{} steps, {compared} parameter tensors: worst |peers - one device| {worst:e}, largest move from \
         the initial weights {moved:e}",
        peers.steps
    );
    assert!(compared > 50, "{compared} tensors compared");
    assert_eq!(
        zero_grad, 5,
        "the parameters with a zero gradient are in the checkpoint"
    );
    assert!(moved > 1e-3, "training moved the weights by {moved}");
    // lr 2e-3 (×10 in the head) over a few AdamW steps; the sums' order changes the last bits.
    assert!(
        worst <= 1e-5,
        "peers and one device differ by {worst} (the weights moved by up to {moved})"
    );
    // The validation metrics come from the primary with its own running statistics: close to,
    // not equal to, the one device's.
    let (pm, om) = (
        peers.last_eval.unwrap().metrics.miou,
        one.last_eval.unwrap().metrics.miou,
    );
    eprintln!("val mIoU: peers {pm:.4}, one device {om:.4}");
}

#[test]
fn a_data_parallel_run_resumes_exactly() {
    alone!(a_data_parallel_run_resumes_exactly);
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path(), 18, 64);
    let two = [Default::default(), Default::default()];
    let whole = tmp.path().join("whole");
    train::train_data_parallel::<B>(&run_config(&root, 1, 2), &RunOptions::new(&whole), &two)
        .unwrap();
    // The same run stopped after its first epoch and resumed for the second.
    let split = tmp.path().join("split");
    train::train_data_parallel::<B>(&run_config(&root, 1, 1), &RunOptions::new(&split), &two)
        .unwrap();
    let mut resume = RunOptions::new(&split);
    resume.resume = true;
    train::train_data_parallel::<B>(&run_config(&root, 1, 2), &resume, &two).unwrap();
    let last = |dir: &Path| dir.join("checkpoints/last");
    for file in ["model.safetensors", "optimizer.safetensors"] {
        assert!(
            std::fs::read(last(&whole).join(file)).unwrap()
                == std::fs::read(last(&split).join(file)).unwrap(),
            "{file} differs between the uninterrupted and the resumed run"
        );
    }
}
