//! The numerics of the training loop against independent references, written to kill the
//! mutants `crates/train/bench/mutants.sh` reports (issue #17): AdamW with clipping, loss
//! scaling and state round trips against PyTorch's formulas in f64, the schedules against the
//! mmseg/HF closed forms, and `GradScaler` against PyTorch's documented growth/backoff rules.

use burn::backend::{Autodiff, Flex};
use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use train::{AdamW, AdamWConfig, GradScaler, ScheduleConfig, ScheduleKind};

type AD = Autodiff<Flex>;

#[derive(Module, Debug)]
struct Lin<B: Backend> {
    weight: Param<Tensor<B, 2>>,
    bias: Param<Tensor<B, 1>>,
}

/// Two blocks, so that the decode-head learning-rate group and the 1-D no-decay group show.
#[derive(Module, Debug)]
struct Net<B: Backend> {
    body: Lin<B>,
    decode_head: Lin<B>,
}

/// The four parameters in a fixed order: body.weight [2, 3], body.bias [3],
/// decode_head.weight [3, 2], decode_head.bias [2].
const SHAPES: [&[usize]; 4] = [&[2, 3], &[3], &[3, 2], &[2]];

fn tensor<const D: usize>(v: &[f64], shape: [usize; D]) -> Tensor<AD, D> {
    let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_data(TensorData::new(v, shape), &Default::default())
}

fn net(p: &[Vec<f64>; 4]) -> Net<AD> {
    Net {
        body: Lin {
            weight: Param::from_tensor(tensor(&p[0], [2, 3])),
            bias: Param::from_tensor(tensor(&p[1], [3])),
        },
        decode_head: Lin {
            weight: Param::from_tensor(tensor(&p[2], [3, 2])),
            bias: Param::from_tensor(tensor(&p[3], [2])),
        },
    }
}

fn values<const D: usize>(p: &Param<Tensor<AD, D>>) -> Vec<f64> {
    p.val()
        .inner()
        .into_data()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|&x| x as f64)
        .collect()
}

fn params(n: &Net<AD>) -> [Vec<f64>; 4] {
    [
        values(&n.body.weight),
        values(&n.body.bias),
        values(&n.decode_head.weight),
        values(&n.decode_head.bias),
    ]
}

/// Gradients exactly `g` (f32-representable): the loss is `Σ_p Σ_i p_i·g_i`.
fn grads_of(n: &Net<AD>, g: &[Vec<f64>; 4]) -> GradientsParams {
    let loss = (n.body.weight.val() * tensor(&g[0], [2, 3])).sum()
        + (n.body.bias.val() * tensor(&g[1], [3])).sum()
        + (n.decode_head.weight.val() * tensor(&g[2], [3, 2])).sum()
        + (n.decode_head.bias.val() * tensor(&g[3], [2])).sum();
    GradientsParams::from_grads::<AD, _>(loss.backward(), n)
}

/// Deterministic values of magnitude `scale` with mixed signs, different per step.
fn pattern(step: usize, scale: f64) -> [Vec<f64>; 4] {
    let mut k = 0usize;
    SHAPES.map(|s| {
        let n: usize = s.iter().product();
        (0..n)
            .map(|_| {
                k += 1;
                let x = ((k * 7 + step * 13) % 11) as f64 - 5.0 + 0.25 * step as f64;
                // dyadic values: exact in f32 once scaled by a power of two
                scale * x / 4.0
            })
            .collect()
    })
}

/// `torch.optim.AdamW` (single-tensor path) after `torch.nn.utils.clip_grad_norm_`, in f64, on
/// gradients that were computed from a loss multiplied by `1 / grad_scale`.
struct Reference {
    cfg: AdamWConfig,
    p: [Vec<f64>; 4],
    m: [Vec<f64>; 4],
    v: [Vec<f64>; 4],
    t: i32,
}

impl Reference {
    fn new(cfg: AdamWConfig, p: [Vec<f64>; 4]) -> Self {
        let zeros = p.clone().map(|v| vec![0.0; v.len()]);
        Self {
            cfg,
            p,
            m: zeros.clone(),
            v: zeros,
            t: 0,
        }
    }

    fn step(&mut self, lr: f64, g: &[Vec<f64>; 4], grad_scale: f64) {
        let unscaled: Vec<Vec<f64>> = g
            .iter()
            .map(|v| v.iter().map(|x| x * grad_scale).collect())
            .collect();
        let norm = unscaled.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
        let coef = match self.cfg.clip_grad_norm {
            Some(max) => (max / (norm + 1e-6)).min(1.0),
            None => 1.0,
        };
        let (b1, b2) = self.cfg.betas;
        self.t += 1;
        let (bc1, bc2) = (1.0 - b1.powi(self.t), 1.0 - b2.powi(self.t));
        for (k, g) in unscaled.iter().enumerate() {
            let head = k >= 2;
            let lr = if head { lr * self.cfg.head_lr_mult } else { lr };
            let one_d = SHAPES[k].len() == 1;
            let wd = if self.cfg.no_decay_norm_bias && one_d {
                0.0
            } else {
                self.cfg.weight_decay
            };
            for i in 0..g.len() {
                let gi = g[i] * coef;
                self.p[k][i] *= 1.0 - lr * wd;
                self.m[k][i] = b1 * self.m[k][i] + (1.0 - b1) * gi;
                self.v[k][i] = b2 * self.v[k][i] + (1.0 - b2) * gi * gi;
                let denom = self.v[k][i].sqrt() / bc2.sqrt() + self.cfg.eps;
                self.p[k][i] -= lr / bc1 * self.m[k][i] / denom;
            }
        }
    }
}

/// `|got - want| <= tol * max(|want|, floor)` element-wise.
fn assert_close(got: &[Vec<f64>; 4], want: &[Vec<f64>; 4], tol: f64, floor: f64, what: &str) {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= tol * b.abs().max(floor),
                "{what}: parameter {k} element {i}: got {a}, want {b}"
            );
        }
    }
}

/// Runs `steps` AdamW steps on both sides from parameters of magnitude `p_mag`, checking
/// every step to `tol` relative; returns the optimizer, the reference and the model.
fn run(
    cfg: AdamWConfig,
    steps: usize,
    (p_mag, grad_mag, grad_scale): (f64, f64, f64),
    tol: f64,
) -> (AdamW<AD>, Reference, Net<AD>) {
    let p0 = pattern(100, p_mag);
    let mut model = net(&p0);
    let mut opt = AdamW::<AD>::new(cfg.clone());
    let mut reference = Reference::new(cfg, p0);
    for s in 0..steps {
        let lr = 1e-2 * (1.0 + s as f64);
        // The loss was scaled by 1/grad_scale: so are the gradients the optimizer sees.
        let g = pattern(s, grad_mag / grad_scale);
        let gp = grads_of(&model, &g);
        let (m, stats) = opt.step(lr, model, gp, grad_scale);
        model = m;
        assert!(stats.applied);
        reference.step(lr, &g, grad_scale);
        assert_close(
            &params(&model),
            &reference.p,
            tol,
            p_mag,
            &format!("step {s}"),
        );
    }
    assert_eq!(opt.steps(), steps as u64);
    (opt, reference, model)
}

#[test]
fn adamw_groups_and_loss_scale_match_pytorch() {
    let cfg = AdamWConfig {
        lr: 1e-2,
        betas: (0.8, 0.99),
        // large against the gradients: the update then depends on the gradient's scale
        eps: 0.5,
        weight_decay: 0.1,
        head_lr_mult: 10.0,
        no_decay_norm_bias: true,
        clip_grad_norm: None,
    };
    let (opt, _, _) = run(cfg.clone(), 3, (0.5, 1e-1, 0.25), 4e-6);
    assert_eq!(opt.config(), &cfg);
}

#[test]
fn adamw_clips_the_global_norm_like_clip_grad_norm() {
    // Norms of the unscaled gradients ≈ 3: the clip coefficient is ≈ 1/3 at every step.
    let cfg = AdamWConfig {
        eps: 0.5,
        weight_decay: 0.05,
        clip_grad_norm: Some(1.0),
        ..Default::default()
    };
    run(cfg, 3, (0.5, 1.0, 0.5), 4e-6);
}

#[test]
fn adamw_clip_keeps_torch_epsilon_on_tiny_gradients() {
    // Gradient norm ≈ 3e-6 against torch's 1e-6 in `max_norm / (norm + 1e-6)`: the epsilon
    // changes the coefficient by a third, and eps dominates the denominator.
    let cfg = AdamWConfig {
        eps: 1e-3,
        weight_decay: 0.0,
        clip_grad_norm: Some(1e-6),
        ..Default::default()
    };
    // Parameters of the size of the steps, so that the comparison sees the steps.
    run(cfg, 2, (1e-5, 1e-6, 1.0), 1e-4);
}

#[test]
fn grad_norm_is_the_global_l2_norm_of_the_unscaled_gradients() {
    let model = net(&pattern(100, 0.5));
    let g = pattern(3, 1.0);
    let gp = grads_of(&model, &g);
    let want = g.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
    let got = AdamW::<AD>::grad_norm(&model, &gp, 1.0);
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    let got = AdamW::<AD>::grad_norm(&model, &gp, 0.125);
    assert!((got - want / 8.0).abs() < 1e-6 * want, "{got} vs {want}");
}

#[test]
fn state_round_trip_continues_exactly_and_names_the_moments() {
    let cfg = AdamWConfig {
        eps: 0.5,
        head_lr_mult: 10.0,
        ..Default::default()
    };
    let (opt, reference, model) = run(cfg.clone(), 2, (0.5, 1e-1, 1.0), 4e-6);
    let state = opt.state_tensors();
    let names: Vec<&str> = state.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "body.bias.exp_avg",
            "body.bias.exp_avg_sq",
            "body.weight.exp_avg",
            "body.weight.exp_avg_sq",
            "decode_head.bias.exp_avg",
            "decode_head.bias.exp_avg_sq",
            "decode_head.weight.exp_avg",
            "decode_head.weight.exp_avg_sq",
        ]
    );
    // exp_avg / exp_avg_sq are torch's m and v, flattened
    let order = [1, 1, 0, 0, 3, 3, 2, 2];
    for ((name, data), &k) in state.iter().zip(&order) {
        let want = if name.ends_with("_sq") {
            &reference.v[k]
        } else {
            &reference.m[k]
        };
        let got = data.to_vec::<f32>().unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (a, b) in got.iter().zip(want) {
            assert!((*a as f64 - b).abs() <= 1e-6 * b.abs().max(1e-3), "{name}");
        }
    }

    // A fresh optimizer given the state steps exactly as the original does.
    let mut restored = AdamW::<AD>::new(cfg.clone());
    restored
        .load_state(2, state.clone(), &Default::default())
        .unwrap();
    assert_eq!(restored.steps(), 2);
    let g = pattern(7, 1e-1);
    let mut original = opt;
    let (a, _) = original.step(3e-2, model.clone(), grads_of(&model, &g), 1.0);
    let (b, _) = restored.step(3e-2, model.clone(), grads_of(&model, &g), 1.0);
    assert_eq!(params(&a), params(&b));
    let mut fresh = AdamW::<AD>::new(cfg.clone());
    let (c, _) = fresh.step(3e-2, model.clone(), grads_of(&model, &g), 1.0);
    assert_ne!(params(&c), params(&b), "the restored state is used");

    // Keys that do not pair up are refused.
    let mut bad = state.clone();
    bad.push(("body.weight.momentum".into(), state[0].1.clone()));
    assert!(restored.load_state(2, bad, &Default::default()).is_err());
    let no_sq: Vec<_> = state
        .iter()
        .filter(|(k, _)| k != "body.bias.exp_avg_sq")
        .cloned()
        .collect();
    assert!(restored.load_state(2, no_sq, &Default::default()).is_err());
    let no_avg: Vec<_> = state
        .iter()
        .filter(|(k, _)| k != "body.bias.exp_avg")
        .cloned()
        .collect();
    assert!(restored.load_state(2, no_avg, &Default::default()).is_err());
}

// ---- schedules -------------------------------------------------------------------------

#[test]
fn warmup_follows_mmseg_linear_warmup_with_a_ratio() {
    // mmseg: lr = regular_lr * (1 - (1 - i / warmup_iters) * (1 - warmup_ratio))
    let s = ScheduleConfig {
        kind: ScheduleKind::Constant,
        warmup_steps: 5,
        warmup_ratio: 0.2,
        ..Default::default()
    };
    for i in 0..5 {
        let want = 3.0 * (1.0 - (1.0 - i as f64 / 5.0) * (1.0 - 0.2));
        let got = s.lr(3.0, i, 20);
        assert!((got - want).abs() < 1e-12, "step {i}: {got} vs {want}");
    }
    assert_eq!(s.lr(3.0, 5, 20), 3.0);
    // the warmup never outlasts the run
    assert!((s.lr(3.0, 2, 4) - 3.0 * (1.0 - (1.0 - 2.0 / 4.0) * 0.8)).abs() < 1e-12);
}

#[test]
fn without_warmup_the_first_step_has_the_base_rate() {
    // HF's get_*_schedule_with_warmup(num_warmup_steps=0): the multiplier at step 0 is 1.
    for kind in [
        ScheduleKind::Poly,
        ScheduleKind::Cosine,
        ScheduleKind::Constant,
    ] {
        let s = ScheduleConfig {
            kind,
            min_lr: 0.1,
            ..Default::default()
        };
        assert_eq!(s.lr(0.5, 0, 10), 0.5, "{kind:?}");
    }
}

#[test]
fn poly_decay_matches_the_closed_form_with_min_lr_and_power() {
    // mmseg PolyLR / HF get_polynomial_decay_schedule_with_warmup:
    // (base - end) * (1 - (i - warmup) / (total - warmup))^power + end
    let s = ScheduleConfig {
        kind: ScheduleKind::Poly,
        warmup_steps: 3,
        warmup_ratio: 0.1,
        power: 0.9,
        min_lr: 0.05,
    };
    for i in 3..=13 {
        let frac = (i as f64 - 3.0) / 10.0;
        let want = (2.0 - 0.05) * (1.0 - frac).powf(0.9) + 0.05;
        let got = s.lr(2.0, i, 13);
        assert!((got - want).abs() < 1e-12, "step {i}: {got} vs {want}");
    }
    // past the end it stays at min_lr
    assert!((s.lr(2.0, 40, 13) - 0.05).abs() < 1e-12);
}

#[test]
fn cosine_after_warmup_matches_cosine_annealing() {
    let s = ScheduleConfig {
        kind: ScheduleKind::Cosine,
        warmup_steps: 4,
        warmup_ratio: 0.0,
        power: 1.0,
        min_lr: 0.25,
    };
    for i in 4..=16 {
        let t = (i as f64 - 4.0) / 12.0;
        let want = 0.25 + (1.5 - 0.25) * (1.0 + (std::f64::consts::PI * t).cos()) / 2.0;
        let got = s.lr(1.5, i, 16);
        assert!((got - want).abs() < 1e-12, "step {i}: {got} vs {want}");
    }
}

// ---- GradScaler ------------------------------------------------------------------------

#[test]
fn grad_scaler_counts_skips_and_grows_after_an_unbroken_interval() {
    // torch.amp.GradScaler: scale *= backoff_factor on inf/NaN (step skipped, growth tracker
    // reset), scale *= growth_factor after growth_interval consecutive finite steps.
    let mut s = GradScaler::default();
    assert_eq!((s.scale(), s.skipped()), (65536.0, 0));
    assert!(!s.update(false));
    assert!(!s.update(false));
    assert_eq!((s.scale(), s.skipped()), (16384.0, 2));
    for i in 0..2000 {
        assert_eq!(s.scale(), 16384.0, "grew early, after {i} clean steps");
        assert!(s.update(true));
    }
    assert_eq!((s.scale(), s.skipped()), (32768.0, 2));
    for _ in 0..4000 {
        s.update(true);
    }
    assert_eq!(s.scale(), 131072.0);
}
