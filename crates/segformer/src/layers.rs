//! Small building blocks shared by the encoder and the decode head: HF-style initialisers
//! and stochastic depth.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::compute::Compute;
use crate::ops::{self, LAYER_NORM_EPS};

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
    pub(crate) fn forward<B: Backend>(&self, x: Tensor<B, 3>, c: Compute) -> Tensor<B, 3> {
        ops::drop_path(x, self.prob, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::Distribution;

    #[test]
    fn drop_path_zeroes_or_rescales_whole_samples() {
        let _rng = crate::test_support::rng_lock();
        type A = Autodiff<Flex>;
        let device = Default::default();
        A::seed(&device, 3);
        let x = Tensor::<A, 3>::random([16, 5, 4], Distribution::Normal(0.0, 1.0), &device)
            .require_grad();
        let y = DropPath::new(0.5).forward(x.clone(), Compute::default());
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
