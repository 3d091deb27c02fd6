//! Small building blocks shared by the encoder and the decode head: HF-style initialisers,
//! PyTorch-exact BatchNorm, stochastic depth and the Mix-FFN activations.

use burn::module::{Module, Param, ParamId, RunningState};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, FloatDType, Tensor, module};

use crate::config::Activation;

/// PyTorch's default LayerNorm eps, which HF's SegFormer uses everywhere.
pub(crate) const LAYER_NORM_EPS: f64 = 1e-5;

/// `nn.Linear(d_in, d_out)` with HF's init: weight ~ N(0, std), bias 0.
pub(crate) fn linear<B: Backend>(
    d_in: usize,
    d_out: usize,
    std: f64,
    device: &B::Device,
) -> Linear<B> {
    let mut layer = LinearConfig::new(d_in, d_out)
        .with_initializer(Initializer::Normal { mean: 0.0, std })
        .init(device);
    layer.bias = Some(Param::from_tensor(Tensor::zeros([d_out], device)));
    layer
}

/// Geometry of a square `nn.Conv2d`.
pub(crate) struct ConvSpec {
    pub channels: [usize; 2],
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub groups: usize,
    pub bias: bool,
}

/// `nn.Conv2d` with HF's init: weight ~ N(0, std), bias 0.
pub(crate) fn conv2d<B: Backend>(spec: ConvSpec, std: f64, device: &B::Device) -> Conv2d<B> {
    let p = spec.padding;
    let mut layer = Conv2dConfig::new(spec.channels, [spec.kernel, spec.kernel])
        .with_stride([spec.stride, spec.stride])
        .with_padding(PaddingConfig2d::Explicit(p, p, p, p))
        .with_groups(spec.groups)
        .with_bias(spec.bias)
        .with_initializer(Initializer::Normal { mean: 0.0, std })
        .init(device);
    if spec.bias {
        layer.bias = Some(Param::from_tensor(Tensor::zeros(
            [spec.channels[1]],
            device,
        )));
    }
    layer
}

/// `nn.LayerNorm(d)`: weight 1, bias 0, eps 1e-5.
pub(crate) fn layer_norm<B: Backend>(d: usize, device: &B::Device) -> LayerNorm<B> {
    LayerNormConfig::new(d)
        .with_epsilon(LAYER_NORM_EPS)
        .init(device)
}

/// `nn.LayerNorm` forward with eps 1e-5 (fused on the CPU backend).
///
/// # Shapes
/// - x: `[..., d]` -> `[..., d]`
pub(crate) fn norm<B: Backend, const D: usize>(
    layer: &LayerNorm<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    crate::fused::layer_norm(layer, x, LAYER_NORM_EPS)
}

/// `nn.BatchNorm2d(channels)` with PyTorch's exact semantics (eps 1e-5, momentum 0.1).
///
/// NOTE: burn's own `BatchNorm` updates `running_var` with the biased batch variance;
/// PyTorch uses the unbiased one (`n / (n - 1)`), so we keep our own module to match the
/// running statistics of HF checkpoints after a training step. Both use the same momentum
/// convention, `running = (1 - momentum) * running + momentum * batch`.
#[derive(Module, Debug)]
pub(crate) struct BatchNorm2d<B: Backend> {
    /// Scale (`weight` in PyTorch).
    pub gamma: Param<Tensor<B, 1>>,
    /// Shift (`bias` in PyTorch).
    pub beta: Param<Tensor<B, 1>>,
    /// `running_mean`.
    pub running_mean: RunningState<Tensor<B, 1>>,
    /// `running_var` (unbiased).
    pub running_var: RunningState<Tensor<B, 1>>,
    momentum: f64,
    pub(crate) epsilon: f64,
}

impl<B: Backend> BatchNorm2d<B> {
    pub(crate) fn new(channels: usize, device: &B::Device) -> Self {
        Self {
            gamma: Param::from_tensor(Tensor::ones([channels], device)),
            beta: Param::from_tensor(Tensor::zeros([channels], device)),
            running_mean: RunningState::new(Tensor::zeros([channels], device)),
            running_var: RunningState::new(Tensor::ones([channels], device)),
            momentum: 0.1,
            epsilon: 1e-5,
        }
    }

    /// `running = (1 - momentum) · running + momentum · batch` for the mean and the unbiased
    /// variance of a batch.
    ///
    /// # Shapes
    /// - mean, unbiased_var: `[channels]`
    pub(crate) fn update_running(&self, mean: Tensor<B, 1>, unbiased_var: Tensor<B, 1>) {
        let m = self.momentum;
        let running_mean = self.running_mean.value_sync() * (1.0 - m) + mean * m;
        let running_var = self.running_var.value_sync() * (1.0 - m) + unbiased_var * m;
        self.running_mean.update(running_mean.detach());
        self.running_var.update(running_var.detach());
    }

    /// Batch statistics (and a running-stats update) under autodiff, running stats otherwise.
    ///
    /// # Shapes
    /// - input: `[batch, channels, height, width]`
    /// - output: `[batch, channels, height, width]`
    pub(crate) fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [batch, channels, height, width] = x.dims();
        let (mean, var) = if B::ad_enabled(&x.device()) {
            let n = batch * height * width;
            // Mean over batch and pixels without a transpose: [B, C, H*W] -> [B, C, 1] -> [1, C, 1]
            // (equal counts per image, so the mean of the means is the mean).
            let flat = x.clone().reshape([batch, channels, height * width]);
            let mean = flat.clone().mean_dim(2).mean_dim(0); // [1, C, 1]
            let var = (flat - mean.clone()).square().mean_dim(2).mean_dim(0); // biased, [1, C, 1]
            let mean = mean.reshape([channels]);
            let var = var.reshape([channels]);
            let unbiased = if n > 1 {
                var.clone().detach() * (n as f64 / (n - 1) as f64)
            } else {
                var.clone().detach()
            };
            self.update_running(mean.clone().detach(), unbiased);
            (mean, var)
        } else {
            (self.running_mean.value(), self.running_var.value())
        };
        let shape = [1, channels, 1, 1];
        let std = var.add_scalar(self.epsilon).sqrt().reshape(shape);
        let x = (x - mean.reshape(shape)) / std;
        x * self.gamma.val().reshape(shape) + self.beta.val().reshape(shape)
    }
}

/// Stochastic depth: drops the whole residual branch per sample with probability `prob`
/// (training only), scaling survivors by `1 / (1 - prob)` like timm/HF `drop_path`.
#[derive(Module, Debug, Clone)]
pub(crate) struct DropPath {
    prob: f64,
}

impl DropPath {
    pub(crate) fn new(prob: f64) -> Self {
        Self { prob }
    }

    /// # Shapes
    /// - input: `[batch, seq, channels]`
    /// - output: `[batch, seq, channels]`
    pub(crate) fn forward<B: Backend>(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        if self.prob == 0.0 || !B::ad_enabled(&x.device()) {
            return x;
        }
        let keep = 1.0 - self.prob;
        let batch = x.dims()[0];
        let mask =
            Tensor::<B, 3>::random([batch, 1, 1], Distribution::Bernoulli(keep), &x.device());
        if crate::fused::route::<B>(&[x.dtype()]).is_none() {
            return x * mask / keep;
        }
        // On the CPU a [B, N, C] × [B, 1, 1] broadcast takes burn-flex's slow strided path:
        // scale (or zero) each sample's contiguous slice instead.
        let mask = mask
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap_or_default();
        let samples = (0..batch)
            .map(|i| {
                let sample = x.clone().narrow(0, i, 1);
                if mask.get(i).copied().unwrap_or(1.0) > 0.5 {
                    sample.mul_scalar(1.0 / keep)
                } else {
                    sample.zeros_like()
                }
            })
            .collect();
        Tensor::cat(samples, 0)
    }
}

/// Applies the Mix-FFN activation element-wise.
pub(crate) fn activate<B: Backend, const D: usize>(
    act: Activation,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    match act {
        // NOTE: written out with erf instead of `activation::gelu` because several burn
        // backends differentiate `gelu` with the tanh approximation; erf's derivative is exact.
        Activation::Gelu => x.clone() * ((x / core::f64::consts::SQRT_2).erf() + 1.0) * 0.5,
        Activation::GeluTanh => activation::gelu_approximate(x),
        Activation::Relu => activation::relu(x),
        Activation::Silu => activation::silu(x),
    }
}

/// Autocast-style mixed precision: where set, every Linear, Conv2d and attention matmul
/// runs on inputs and weights cast to this dtype, and its result is cast back to the
/// input's dtype, so LayerNorm, BatchNorm, softmax and the loss stay in full precision
/// (PyTorch autocast's rules for these ops).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Compute(pub Option<FloatDType>);

impl Compute {
    /// # Shapes
    /// - x: `[..., d_input]` -> `[..., d_output]`
    pub(crate) fn linear<B: Backend, const D: usize>(
        self,
        layer: &Linear<B>,
        x: Tensor<B, D>,
    ) -> Tensor<B, D> {
        let Some(dt) = self.0 else {
            return crate::fused::linear(layer, x);
        };
        let out = FloatDType::from(x.dtype());
        let bias = layer.bias.as_ref().map(|b| b.val().cast(dt));
        module::linear(x.cast(dt), layer.weight.val().cast(dt), bias).cast(out)
    }

    /// # Shapes
    /// - x: `[batch, c_in, h, w]` -> `[batch, c_out, h', w']`
    pub(crate) fn conv<B: Backend>(self, layer: &Conv2d<B>, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let Some(dt) = self.0 else {
            return layer.forward(x);
        };
        let out = FloatDType::from(x.dtype());
        // `Param::initialized` keeps the cast weights attached to the autodiff graph.
        let cast = Conv2d {
            weight: Param::initialized(ParamId::new(), layer.weight.val().cast(dt)),
            bias: layer
                .bias
                .as_ref()
                .map(|b| Param::initialized(ParamId::new(), b.val().cast(dt))),
            stride: layer.stride,
            kernel_size: layer.kernel_size,
            dilation: layer.dilation,
            groups: layer.groups,
            padding: layer.padding.clone(),
        };
        cast.forward(x.cast(dt)).cast(out)
    }

    /// # Shapes
    /// - a: `[..., n, k]`, b: `[..., k, m]` -> `[..., n, m]`
    pub(crate) fn matmul<B: Backend, const D: usize>(
        self,
        a: Tensor<B, D>,
        b: Tensor<B, D>,
    ) -> Tensor<B, D> {
        let Some(dt) = self.0 else {
            return a.matmul(b);
        };
        let out = FloatDType::from(a.dtype());
        a.cast(dt).matmul(b.cast(dt)).cast(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};

    #[test]
    fn drop_path_zeroes_or_rescales_whole_samples() {
        type A = Autodiff<Flex>;
        let device = Default::default();
        A::seed(&device, 3);
        let x = Tensor::<A, 3>::random([16, 5, 4], Distribution::Normal(0.0, 1.0), &device)
            .require_grad();
        let y = DropPath::new(0.5).forward(x.clone());
        let grads = y.clone().sum().backward();
        let dx = x.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();
        let (x, y) = (
            x.into_data().to_vec::<f32>().unwrap(),
            y.into_data().to_vec::<f32>().unwrap(),
        );
        let mut kept = 0;
        for s in 0..16 {
            let r = s * 20..(s + 1) * 20;
            let dropped = y[r.clone()].iter().all(|v| *v == 0.0);
            let scaled = y[r.clone()]
                .iter()
                .zip(&x[r.clone()])
                .all(|(y, x)| (y - 2.0 * x).abs() < 1e-6);
            assert!(
                dropped || scaled,
                "sample {s} is neither dropped nor scaled by 1/keep"
            );
            let g = if dropped { 0.0 } else { 2.0 };
            assert!(dx[r].iter().all(|d| *d == g), "sample {s} gradient");
            kept += usize::from(!dropped);
        }
        assert!((2..=14).contains(&kept), "{kept} of 16 kept at p = 0.5");
    }
}
