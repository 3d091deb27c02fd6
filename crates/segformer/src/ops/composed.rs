//! burn's op-by-op composition of every op in `crate::ops`: the implementation for any
//! backend, the fallback of the fused and recomputing kernels, and the reference they are
//! tested against. Losses use HF's reductions in a numerically stable form.

use burn::module::{Param, ParamId};
use burn::nn::conv::Conv2d;
use burn::nn::{Dropout, Linear};
use burn::tensor::activation::{self, log_softmax, relu, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Int, Tensor, module};

use crate::batch_norm::BatchNorm2d;
use crate::bilinear::resize_bilinear;
use crate::compute::Activation;

/// `nn.Linear` under autocast: input, weight and bias cast to `dtype`, the result cast back to
/// the input's dtype.
///
/// # Shapes
/// - x: `[..., d_input]` -> `[..., d_output]`
pub(crate) fn linear_autocast<B: Backend, const D: usize>(
    layer: &Linear<B>,
    x: Tensor<B, D>,
    dtype: FloatDType,
) -> Tensor<B, D> {
    let out = FloatDType::from(x.dtype());
    let bias = layer.bias.as_ref().map(|b| b.val().cast(dtype));
    module::linear(x.cast(dtype), layer.weight.val().cast(dtype), bias).cast(out)
}

/// `nn.Conv2d`, in `dtype` where set (the result cast back to the input's dtype).
///
/// # Shapes
/// - x: `[batch, c_in, h, w]` -> `[batch, c_out, h', w']`
pub(crate) fn conv<B: Backend>(
    layer: &Conv2d<B>,
    x: Tensor<B, 4>,
    dtype: Option<FloatDType>,
) -> Tensor<B, 4> {
    let Some(dt) = dtype else {
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

/// `a·b`, in `dtype` where set (the result cast back to `a`'s dtype).
///
/// # Shapes
/// - a: `[..., n, k]`, b: `[..., k, m]` -> `[..., n, m]`
pub(crate) fn matmul<B: Backend, const D: usize>(
    a: Tensor<B, D>,
    b: Tensor<B, D>,
    dtype: Option<FloatDType>,
) -> Tensor<B, D> {
    let Some(dt) = dtype else {
        return a.matmul(b);
    };
    let out = FloatDType::from(a.dtype());
    a.cast(dt).matmul(b.cast(dt)).cast(out)
}

/// `[B, L, C] -> [B, heads, L, C/heads]`.
fn split_heads<B: Backend>(t: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
    let [batch, len, channels] = t.dims();
    t.reshape([batch, len, heads, channels / heads])
        .swap_dims(1, 2)
}

/// `[B, heads, L, d] -> [B, L, heads·d]`.
fn merge_heads<B: Backend>(t: Tensor<B, 4>) -> Tensor<B, 3> {
    let [batch, heads, len, d] = t.dims();
    t.swap_dims(1, 2).reshape([batch, len, heads * d])
}

/// Multi-head attention, both matmuls in `dtype` where set.
///
/// # Shapes
/// - query: `[batch, N, C]`, key and value: `[batch, M, C]`
/// - output: `[batch, N, C]`
pub(crate) fn attention<B: Backend>(
    query: Tensor<B, 3>,
    key: Tensor<B, 3>,
    value: Tensor<B, 3>,
    heads: usize,
    dtype: Option<FloatDType>,
) -> Tensor<B, 3> {
    let scores = scaled_scores(query, key, heads, dtype);
    // [B, heads, N, M] x [B, heads, M, d] -> [B, heads, N, d] -> [B, N, C]
    merge_heads(matmul(softmax(scores, 3), split_heads(value, heads), dtype))
}

/// `Q·Kᵀ/√d` per head, the matmul in `dtype` where set.
///
/// # Shapes
/// - query: `[batch, N, C]`, key: `[batch, M, C]`
/// - output: `[batch, heads, N, M]`
fn scaled_scores<B: Backend>(
    query: Tensor<B, 3>,
    key: Tensor<B, 3>,
    heads: usize,
    dtype: Option<FloatDType>,
) -> Tensor<B, 4> {
    let d = query.dims()[2] / heads;
    // [B, heads, N, d] x [B, heads, d, M] -> [B, heads, N, M]
    matmul(
        split_heads(query, heads),
        split_heads(key, heads).swap_dims(2, 3),
        dtype,
    ) / (d as f64).sqrt()
}

/// Multi-head attention with dropout on the probabilities (training with
/// `attention_probs_dropout_prob > 0`); the scores' matmul in `dtype` where set.
///
/// # Shapes
/// - query: `[batch, N, C]`, key and value: `[batch, M, C]`
/// - output: `[batch, N, C]`
pub(crate) fn attention_with_dropout<B: Backend>(
    query: Tensor<B, 3>,
    key: Tensor<B, 3>,
    value: Tensor<B, 3>,
    heads: usize,
    dropout: &Dropout,
    dtype: Option<FloatDType>,
) -> Tensor<B, 3> {
    let scores = scaled_scores(query, key, heads, dtype);
    let probs = dropout.forward(softmax(scores, 3));
    // [B, heads, N, M] x [B, heads, M, d] -> [B, N, C]
    merge_heads(probs.matmul(split_heads(value, heads)))
}

/// The Mix-FFN's depthwise conv and activation on the token layout.
///
/// # Shapes
/// - x: `[batch, h*w, C]` -> `[batch, h*w, C]`
pub(crate) fn dwconv3x3_act<B: Backend>(
    conv: &Conv2d<B>,
    act: Activation,
    x: Tensor<B, 3>,
    h: usize,
    w: usize,
) -> Tensor<B, 3> {
    let [batch, _, channels] = x.dims();
    // [B, N, C] -> [B, C, h, w] -> conv -> [B, h*w, C]
    let map = x.swap_dims(1, 2).reshape([batch, channels, h, w]);
    let y = conv.forward(map).flatten::<3>(2, 3).swap_dims(1, 2);
    activate(act, y)
}

/// Applies the Mix-FFN activation element-wise.
fn activate<B: Backend, const D: usize>(act: Activation, x: Tensor<B, D>) -> Tensor<B, D> {
    match act {
        // NOTE: written out with erf instead of `activation::gelu` because several burn
        // backends differentiate `gelu` with the tanh approximation; erf's derivative is exact.
        Activation::Gelu => x.clone() * ((x / core::f64::consts::SQRT_2).erf() + 1.0) * 0.5,
        Activation::GeluTanh => activation::gelu_approximate(x),
        Activation::Relu => activation::relu(x),
        Activation::Silu => activation::silu(x),
    }
}

/// `relu(bn(Σ_i up(maps[i]) + shift))`, the decode head's tail.
///
/// # Shapes
/// - maps: `[batch, D, h_i, w_i]`; shift: `[D]`
/// - output: `[batch, D, size[0], size[1]]`
pub(crate) fn decode_tail<B: Backend>(
    bn: &BatchNorm2d<B>,
    maps: Vec<Tensor<B, 4>>,
    shift: Tensor<B, 1>,
    size: [usize; 2],
) -> Tensor<B, 4> {
    let d = shift.dims()[0];
    let x = maps
        .into_iter()
        .map(|m| resize_bilinear(m, size))
        .reduce(|a, b| a + b)
        .expect("at least one encoder stage");
    relu(bn.forward(x + shift.reshape([1, d, 1, 1])))
}

/// `CrossEntropyLoss(ignore_index)`: mean NLL over the pixels whose label is a valid class.
///
/// # Shapes
/// - logits: `[batch, classes, H, W]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn cross_entropy<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore_index: i64,
) -> Tensor<B, 1> {
    let classes = logits.dims()[1] as i64;
    let valid = labels
        .clone()
        .not_equal_elem(ignore_index)
        .bool_and(labels.clone().greater_equal_elem(0))
        .bool_and(labels.clone().lower_elem(classes));
    // Invalid pixels gather class 0 and are then zeroed by the mask.
    let safe = labels.mask_fill(valid.clone().bool_not(), 0);
    let log_probs = log_softmax(logits, 1);
    // [B, C, H, W] gather [B, 1, H, W] -> [B, 1, H, W] -> [B, H, W]
    let picked = log_probs
        .gather(1, safe.unsqueeze_dim(1))
        .squeeze_dim::<3>(1);
    let mask = valid.float();
    let total = (picked * mask.clone()).sum().neg();
    let count = mask.sum().clamp_min(1.0);
    total / count
}

/// HF's `num_labels == 1` loss: `(BCEWithLogits(x, y) * valid).mean()` over all pixels,
/// valid meaning `0 <= label != ignore_index`.
///
/// # Shapes
/// - logits: `[batch, 1, H, W]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn masked_bce_with_logits<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore_index: i64,
) -> Tensor<B, 1> {
    let x = logits.squeeze_dim::<3>(1);
    let valid = labels
        .clone()
        .not_equal_elem(ignore_index)
        .bool_and(labels.clone().greater_equal_elem(0));
    let y = labels.float();
    // max(x, 0) - x*y + log(1 + exp(-|x|)): never overflows.
    let per_pixel = x.clone().clamp_min(0.0) - x.clone() * y + x.abs().neg().exp().log1p();
    (per_pixel * valid.float()).mean()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::TensorData;

    type B = Flex;

    /// Plain-f64 cross-entropy of one pixel: -log softmax(z)[y].
    fn nll(z: &[f64], y: usize) -> f64 {
        let m = z.iter().cloned().fold(f64::MIN, f64::max);
        let lse = m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        lse - z[y]
    }

    #[test]
    fn cross_entropy_skips_ignored_pixels() {
        let device = Default::default();
        // 1 image, 3 classes, 2x2 pixels; pixel (1,1) is ignored.
        let z = [
            [0.5, -1.0, 2.0, 0.0],
            [1.5, 0.2, -0.3, 9.0],
            [-2.0, 0.7, 0.1, -9.0],
        ];
        let labels = [[2i64, 0], [1, 255]];
        let flat: Vec<f32> = z.iter().flatten().map(|&v| v as f32).collect();
        let logits = Tensor::<B, 4>::from_data(TensorData::new(flat, [1, 3, 2, 2]), &device);
        let lab = Tensor::<B, 3, Int>::from_data(
            TensorData::new(
                labels.iter().flatten().copied().collect::<Vec<_>>(),
                [1, 2, 2],
            ),
            &device,
        );
        let loss = cross_entropy(logits, lab, 255).into_scalar() as f64;
        let pixel = |p: usize| [z[0][p], z[1][p], z[2][p]];
        let expected = (nll(&pixel(0), 2) + nll(&pixel(1), 0) + nll(&pixel(2), 1)) / 3.0;
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
    }

    #[test]
    fn cross_entropy_is_stable_for_huge_logits() {
        let device = Default::default();
        let logits =
            Tensor::<B, 4>::from_data(TensorData::new(vec![1e4f32, -1e4], [1, 2, 1, 1]), &device);
        let lab = Tensor::<B, 3, Int>::from_data(TensorData::new(vec![1i64], [1, 1, 1]), &device);
        let loss = cross_entropy(logits, lab, 255).into_scalar();
        assert!((loss - 2e4).abs() < 1.0, "{loss}");
    }

    #[test]
    fn all_ignored_gives_zero_not_nan() {
        let device = Default::default();
        let logits = Tensor::<B, 4>::ones([1, 2, 2, 2], &device);
        let lab = Tensor::<B, 3, Int>::full([1, 2, 2], 255, &device);
        assert_eq!(cross_entropy(logits, lab, 255).into_scalar(), 0.0);
    }

    #[test]
    fn bce_masks_invalid_pixels_and_averages_over_all() {
        let device = Default::default();
        let x = [0.3f64, -2.0, 50.0, 1.0];
        let y = [1i64, 0, 255, 1];
        let logits = Tensor::<B, 4>::from_data(
            TensorData::new(
                x.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                [1, 1, 2, 2],
            ),
            &device,
        );
        let lab = Tensor::<B, 3, Int>::from_data(TensorData::new(y.to_vec(), [1, 2, 2]), &device);
        let loss = masked_bce_with_logits(logits, lab, 255).into_scalar() as f64;
        let bce = |x: f64, y: f64| {
            -(y * (1.0 / (1.0 + (-x).exp())).ln() + (1.0 - y) * (1.0 / (1.0 + x.exp())).ln())
        };
        // HF: (loss * valid_mask).mean() -> divide by all 4 pixels, not the 3 valid ones.
        let expected = (bce(0.3, 1.0) + bce(-2.0, 0.0) + bce(1.0, 1.0)) / 4.0;
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
    }
}
