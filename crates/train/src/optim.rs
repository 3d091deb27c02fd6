//! AdamW with PyTorch semantics, parameter groups by module path, and global-norm clipping.
//!
//! Burn's own `AdamW` applies one learning rate and weight decay to every parameter and clips
//! each gradient on its own; the SegFormer recipe needs a ×10 learning rate for the decode head,
//! no weight decay on norms and biases, and `clip_grad_norm_` over all parameters at once.

use std::collections::HashMap;

use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// Hyper-parameters of [`AdamW`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    /// Base learning rate (the schedule scales it).
    pub lr: f64,
    /// `(beta1, beta2)`.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Multiplier of the learning rate for parameters under `decode_head` (SegFormer uses 10).
    pub head_lr_mult: f64,
    /// No weight decay for 1-D parameters (biases, LayerNorm and BatchNorm affine).
    pub no_decay_norm_bias: bool,
    /// Clip the global gradient L2 norm to this value (`None`: no clipping).
    pub clip_grad_norm: Option<f64>,
}

impl Default for AdamWConfig {
    /// PyTorch's `torch.optim.AdamW` defaults, with the SegFormer learning rate.
    fn default() -> Self {
        Self {
            lr: 6e-5,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.01,
            head_lr_mult: 1.0,
            no_decay_norm_bias: false,
            clip_grad_norm: None,
        }
    }
}

/// First and second moments of one parameter, flattened.
#[derive(Clone, Debug)]
struct Moments<B: Backend> {
    m: Tensor<B, 1>,
    v: Tensor<B, 1>,
}

/// What one [`AdamW::step`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// Global L2 norm of the (unscaled) gradients before clipping.
    pub grad_norm: f64,
    /// Whether the parameters were updated (false when the gradients were not finite).
    pub applied: bool,
}

/// AdamW over every float parameter of a module, keyed by the parameter's module path.
#[derive(Clone, Debug)]
pub struct AdamW<B: AutodiffBackend> {
    config: AdamWConfig,
    state: HashMap<String, Moments<B::InnerBackend>>,
    steps: u64,
}

impl<B: AutodiffBackend> AdamW<B> {
    /// A fresh optimizer.
    pub fn new(config: AdamWConfig) -> Self {
        Self {
            config,
            state: HashMap::new(),
            steps: 0,
        }
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// Optimizer steps taken so far (the bias-correction time).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Global L2 norm of `grads` over the parameters of `module`, multiplied by `grad_scale`.
    pub fn grad_norm<M: AutodiffModule<B>>(
        module: &M,
        grads: &GradientsParams,
        grad_scale: f64,
    ) -> f64 {
        let mut v = NormVisitor::<B> { grads, sum: None };
        module.visit(&mut v);
        v.sum
            .map(|s| s.into_scalar_f64().sqrt() * grad_scale)
            .unwrap_or(0.0)
    }

    /// One step at learning rate `lr` (before group multipliers). Gradients are multiplied by
    /// `grad_scale` first (1/loss-scale for f16, 1 otherwise); non-finite gradients skip the step.
    pub fn step<M: AutodiffModule<B>>(
        &mut self,
        lr: f64,
        module: M,
        grads: GradientsParams,
        grad_scale: f64,
    ) -> (M, StepStats) {
        let grad_norm = Self::grad_norm(&module, &grads, grad_scale);
        if !grad_norm.is_finite() {
            return (
                module,
                StepStats {
                    grad_norm,
                    applied: false,
                },
            );
        }
        let clip = match self.config.clip_grad_norm {
            // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1
            Some(max) => (max / (grad_norm + 1e-6)).min(1.0),
            None => 1.0,
        };
        self.steps += 1;
        let mut mapper = AdamWMapper {
            opt: self,
            grads,
            lr,
            grad_factor: grad_scale * clip,
            path: Vec::new(),
        };
        let module = module.map(&mut mapper);
        (
            module,
            StepStats {
                grad_norm,
                applied: true,
            },
        )
    }

    /// This optimizer with its state on `device`: a data-parallel replica's.
    pub fn to_device(&self, device: &burn::tensor::Device<B::InnerBackend>) -> Self {
        let state = self
            .state
            .iter()
            .map(|(k, s)| {
                let moments = Moments {
                    m: s.m.clone().to_device(device),
                    v: s.v.clone().to_device(device),
                };
                (k.clone(), moments)
            })
            .collect();
        Self {
            config: self.config.clone(),
            state,
            steps: self.steps,
        }
    }

    /// The optimizer state as named flat tensors (`<path>.exp_avg`, `<path>.exp_avg_sq`), for checkpoints.
    pub fn state_tensors(&self) -> Vec<(String, TensorData)> {
        let mut out: Vec<(String, TensorData)> = Vec::new();
        for (k, s) in &self.state {
            out.push((format!("{k}.exp_avg"), s.m.to_data()));
            out.push((format!("{k}.exp_avg_sq"), s.v.to_data()));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Restores state saved by [`AdamW::state_tensors`] after `steps` optimizer steps.
    pub fn load_state(
        &mut self,
        steps: u64,
        tensors: Vec<(String, TensorData)>,
        device: &burn::tensor::Device<B::InnerBackend>,
    ) -> Result<(), String> {
        let mut m: HashMap<String, Tensor<B::InnerBackend, 1>> = HashMap::new();
        let mut v: HashMap<String, Tensor<B::InnerBackend, 1>> = HashMap::new();
        for (k, data) in tensors {
            let t = Tensor::from_data(data, device);
            if let Some(p) = k.strip_suffix(".exp_avg_sq") {
                v.insert(p.to_string(), t);
            } else if let Some(p) = k.strip_suffix(".exp_avg") {
                m.insert(p.to_string(), t);
            } else {
                return Err(format!("unexpected optimizer state key `{k}`"));
            }
        }
        self.state.clear();
        for (k, mt) in m {
            let vt = v
                .remove(&k)
                .ok_or_else(|| format!("optimizer state `{k}` has no exp_avg_sq"))?;
            self.state.insert(k, Moments { m: mt, v: vt });
        }
        if let Some(k) = v.keys().next() {
            return Err(format!("optimizer state `{k}` has no exp_avg"));
        }
        self.steps = steps;
        Ok(())
    }
}

struct NormVisitor<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    sum: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for NormVisitor<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let s = g.square().sum();
            self.sum = Some(match self.sum.take() {
                Some(acc) => acc + s,
                None => s,
            });
        }
    }
}

struct AdamWMapper<'a, B: AutodiffBackend> {
    opt: &'a mut AdamW<B>,
    grads: GradientsParams,
    lr: f64,
    grad_factor: f64,
    path: Vec<String>,
}

impl<B: AutodiffBackend> ModuleMapper<B> for AdamWMapper<'_, B> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<B::InnerBackend, D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let key = self.path.join(".");
        let updated = self.update(&key, tensor.inner(), grad);
        Param::from_mapped_value(id, Tensor::from_inner(updated).require_grad(), mapper)
    }
}

impl<B: AutodiffBackend> AdamWMapper<'_, B> {
    fn update<const D: usize>(
        &mut self,
        key: &str,
        param: Tensor<B::InnerBackend, D>,
        grad: Tensor<B::InnerBackend, D>,
    ) -> Tensor<B::InnerBackend, D> {
        let c = &self.opt.config;
        let is_head = key.starts_with("decode_head");
        let lr = self.lr * if is_head { c.head_lr_mult } else { 1.0 };
        let wd = if c.no_decay_norm_bias && D == 1 {
            0.0
        } else {
            c.weight_decay
        };
        let (b1, b2) = c.betas;
        let shape = param.shape();
        let n = shape.num_elements();
        let g: Tensor<B::InnerBackend, 1> = grad.reshape([n]);
        let g = if self.grad_factor != 1.0 {
            g.mul_scalar(self.grad_factor)
        } else {
            g
        };
        let p: Tensor<B::InnerBackend, 1> = param.reshape([n]);
        // PyTorch's order of operations (torch/optim/adamw.py, single-tensor path):
        // p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²;
        // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
        let p = if wd != 0.0 {
            p.mul_scalar(1.0 - lr * wd)
        } else {
            p
        };
        let (m, v) = match self.opt.state.remove(key) {
            Some(s) => (
                s.m.mul_scalar(b1).add(g.clone().mul_scalar(1.0 - b1)),
                s.v.mul_scalar(b2)
                    .add(g.clone().mul(g).mul_scalar(1.0 - b2)),
            ),
            None => (
                g.clone().mul_scalar(1.0 - b1),
                g.clone().mul(g).mul_scalar(1.0 - b2),
            ),
        };
        let t = self.opt.steps as i32;
        let bc1 = 1.0 - b1.powi(t);
        let bc2 = 1.0 - b2.powi(t);
        let denom = v.clone().sqrt().div_scalar(bc2.sqrt()).add_scalar(c.eps);
        let p = p - m.clone().div(denom).mul_scalar(lr / bc1);
        self.opt.state.insert(key.to_string(), Moments { m, v });
        p.reshape(shape)
    }
}

trait IntoF64 {
    fn into_scalar_f64(self) -> f64;
}

impl<B: Backend> IntoF64 for Tensor<B, 1> {
    fn into_scalar_f64(self) -> f64 {
        self.into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .map(|v| v[0])
            .unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};

    type AD = Autodiff<Flex>;

    #[derive(Module, Debug)]
    struct Net<B: Backend> {
        body: Linear<B>,
        decode_head: Linear<B>,
    }

    fn flat(t: Tensor<Flex, 2>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    /// PyTorch's AdamW, written out in f64 for one flat parameter.
    struct RefAdamW {
        m: Vec<f64>,
        v: Vec<f64>,
        t: i32,
    }

    impl RefAdamW {
        fn step(&mut self, p: &mut [f64], g: &[f64], lr: f64, wd: f64) {
            let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
            self.t += 1;
            for i in 0..p.len() {
                p[i] *= 1.0 - lr * wd;
                self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
                self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
                let bc1 = 1.0 - b1.powi(self.t);
                let bc2 = 1.0 - b2.powi(self.t);
                p[i] -= lr / bc1 * self.m[i] / (self.v[i].sqrt() / bc2.sqrt() + eps);
            }
        }
    }

    #[test]
    fn matches_pytorch_adamw_with_groups_over_three_steps() {
        let device = Default::default();
        let mut net = Net::<AD> {
            body: LinearConfig::new(4, 3).init(&device),
            decode_head: LinearConfig::new(3, 2).init(&device),
        };
        let cfg = AdamWConfig {
            lr: 1e-2,
            weight_decay: 0.1,
            head_lr_mult: 10.0,
            no_decay_norm_bias: true,
            ..Default::default()
        };
        let mut opt = AdamW::<AD>::new(cfg);
        let mut w_body: Vec<f64> = flat(net.body.weight.val().inner())
            .iter()
            .map(|&x| x as f64)
            .collect();
        let mut w_head: Vec<f64> = flat(net.decode_head.weight.val().inner())
            .iter()
            .map(|&x| x as f64)
            .collect();
        let mut b_body: Vec<f64> = net
            .body
            .bias
            .as_ref()
            .unwrap()
            .val()
            .inner()
            .into_data()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect();
        let (mut r1, mut r2, mut r3) = (
            RefAdamW {
                m: vec![0.0; 12],
                v: vec![0.0; 12],
                t: 0,
            },
            RefAdamW {
                m: vec![0.0; 6],
                v: vec![0.0; 6],
                t: 0,
            },
            RefAdamW {
                m: vec![0.0; 3],
                v: vec![0.0; 3],
                t: 0,
            },
        );
        for step in 0..3 {
            let x = Tensor::<AD, 2>::from_data(
                [[1.0, -2.0, 0.5, 3.0 + step as f32], [0.1, 0.2, -0.3, 0.4]],
                &device,
            );
            let y = net.decode_head.forward(net.body.forward(x));
            let grads = y.clone().mul(y).sum().backward();
            let gw_body: Vec<f64> = flat(net.body.weight.grad(&grads).unwrap())
                .iter()
                .map(|&x| x as f64)
                .collect();
            let gw_head: Vec<f64> = flat(net.decode_head.weight.grad(&grads).unwrap())
                .iter()
                .map(|&x| x as f64)
                .collect();
            let gb_body: Vec<f64> = net
                .body
                .bias
                .as_ref()
                .unwrap()
                .grad(&grads)
                .unwrap()
                .into_data()
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|&x| x as f64)
                .collect();
            let gp = GradientsParams::from_grads::<AD, _>(grads, &net);
            let (n, stats) = opt.step(1e-2, net, gp, 1.0);
            net = n;
            assert!(stats.applied);
            r1.step(&mut w_body, &gw_body, 1e-2, 0.1);
            r2.step(&mut w_head, &gw_head, 1e-1, 0.1);
            r3.step(&mut b_body, &gb_body, 1e-2, 0.0);
        }
        // The weights start at burn's random init (|w| up to 0.5), so f32 rounding leaves an
        // absolute error of a few ulp of 0.5 (~1e-7) on every entry, also on those that end
        // near zero; a wrong update is off by the step itself (~1e-2).
        let close = |got: Vec<f32>, want: &[f64]| {
            for (g, w) in got.iter().zip(want) {
                assert!((*g as f64 - w).abs() <= 1e-6 + 1e-5 * w.abs(), "{g} vs {w}");
            }
        };
        close(flat(net.body.weight.val().inner()), &w_body);
        close(flat(net.decode_head.weight.val().inner()), &w_head);
        close(
            net.body
                .bias
                .as_ref()
                .unwrap()
                .val()
                .inner()
                .into_data()
                .to_vec()
                .unwrap(),
            &b_body,
        );
    }

    #[test]
    fn non_finite_gradients_skip_the_step() {
        let device = Default::default();
        let net = Net::<AD> {
            body: LinearConfig::new(2, 2).init(&device),
            decode_head: LinearConfig::new(2, 1).init(&device),
        };
        let before = flat(net.body.weight.val().inner());
        let x = Tensor::<AD, 2>::from_data([[f32::INFINITY, 1.0]], &device);
        let grads = net
            .decode_head
            .forward(net.body.forward(x))
            .sum()
            .backward();
        let gp = GradientsParams::from_grads::<AD, _>(grads, &net);
        let mut opt = AdamW::<AD>::new(AdamWConfig::default());
        let (net, stats) = opt.step(1e-3, net, gp, 1.0);
        assert!(!stats.applied && !stats.grad_norm.is_finite());
        assert_eq!(flat(net.body.weight.val().inner()), before);
        assert_eq!(opt.steps(), 0);
    }

    #[test]
    fn clipping_scales_to_max_norm() {
        let device = Default::default();
        let net = Net::<AD> {
            body: LinearConfig::new(2, 2).init(&device),
            decode_head: LinearConfig::new(2, 1).init(&device),
        };
        let x = Tensor::<AD, 2>::from_data([[100.0, -50.0]], &device);
        let grads = net
            .decode_head
            .forward(net.body.forward(x))
            .sum()
            .backward();
        let gp = GradientsParams::from_grads::<AD, _>(grads, &net);
        let norm = AdamW::<AD>::grad_norm(&net, &gp, 1.0);
        assert!(norm > 1.0);
        assert!((AdamW::<AD>::grad_norm(&net, &gp, 0.5) - norm * 0.5).abs() < 1e-9 * norm);
    }
}
