//! One entry per op the layers run, each choosing its implementation from the [`Compute`] it
//! is given: the fused CPU kernel (`crate::fused`) where the model's kernels resolve to
//! [`KernelPath::Fused`] and the kernel serves the inputs, else the recomputing op
//! (`crate::recompute`, attention and the loss) unless they resolve to
//! [`KernelPath::Composed`], else burn's composition ([`composed`]). The encoder and the
//! decode head call only these.
//!
//! Autocast (`Compute::dtype`) runs Linear, Conv2d and the attention matmuls in the compute
//! dtype. On the fused path, bf16 is the fused kernels' own: the linear layers, the
//! patch-embedding and sequence-reduction convs and attention's four products multiply bf16
//! operands with f32 sums (AVX512-BF16, [`fused::Precision::Bf16`]); their results, the
//! softmax and every other kernel stay f32, and the decode-head matmuls (and any layer a fused
//! kernel does not serve) run in f32. On a CPU without those instructions a bf16 model
//! computes in f32 there ([`fused_products`]). f16 is always composed (its attention fused,
//! in f32).

mod composed;

use burn::nn::conv::Conv2d;
use burn::nn::{Dropout, LayerNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, FloatDType, Int, Tensor};

use crate::batch_norm::BatchNorm2d;
use crate::bilinear::resize_bilinear;
use crate::compute::{Activation, Compute, KernelPath};
use crate::fused;
use crate::recompute::{self, CHUNK_ELEMENTS};

#[cfg(test)]
pub(crate) use composed::{
    attention as attention_composed, cross_entropy, decode_tail as decode_tail_composed,
    dwconv3x3_act as dwconv3x3_act_composed, linear_autocast,
};

/// PyTorch's default LayerNorm eps, which HF's SegFormer uses everywhere.
pub(crate) const LAYER_NORM_EPS: f64 = 1e-5;

/// Whether the model's kernels resolve to the fused ones on `B`.
fn fused_path<B: Backend>(c: Compute, device: &B::Device) -> bool {
    c.path::<B>(device) == KernelPath::Fused
}

/// The precision of the fused kernels' products for this model on `B`, or `None` where the
/// layers do not take the fused path: f32 without a compute dtype, bf16 for a bf16 model on a
/// CPU with AVX512-BF16 and f32 on one without (`None` for f16, which is composed).
pub(crate) fn fused_products<B: Backend>(
    c: Compute,
    device: &B::Device,
) -> Option<fused::Precision> {
    if !fused_path::<B>(c, device) {
        return None;
    }
    match c.dtype {
        None => Some(fused::Precision::F32),
        Some(FloatDType::BF16) => Some(fused::Precision::bf16_or_f32()),
        Some(_) => None,
    }
}

/// The compute dtype of the ops that the fused path leaves to burn: none (f32) where the
/// fused kernels serve the model's dtype, the model's otherwise.
fn composed_dtype<B: Backend>(c: Compute, device: &B::Device) -> Option<FloatDType> {
    match fused_products::<B>(c, device) {
        Some(_) => None,
        None => c.dtype,
    }
}

/// `nn.Linear` on the last dimension.
///
/// # Shapes
/// - x: `[..., d_input]` -> `[..., d_output]`
pub(crate) fn linear<B: Backend, const D: usize>(
    layer: &Linear<B>,
    x: Tensor<B, D>,
    c: Compute,
) -> Tensor<B, D> {
    if let Some(precision) = fused_products::<B>(c, &x.device())
        && let Some(y) = fused::linear(layer, &x, precision)
    {
        return y;
    }
    match composed_dtype::<B>(c, &x.device()) {
        Some(dtype) => composed::linear_autocast(layer, x, dtype),
        None => layer.forward(x),
    }
}

/// `nn.LayerNorm` with eps 1e-5 on the last dimension (always in the input's dtype).
///
/// # Shapes
/// - x: `[..., d]` -> `[..., d]`
pub(crate) fn layer_norm<B: Backend, const D: usize>(
    layer: &LayerNorm<B>,
    x: Tensor<B, D>,
    c: Compute,
) -> Tensor<B, D> {
    if fused_path::<B>(c, &x.device())
        && let Some(y) = fused::layer_norm(layer, &x, LAYER_NORM_EPS)
    {
        return y;
    }
    layer.forward(x)
}

/// `nn.Conv2d` (burn's composition; in the compute dtype where set and not served by the
/// fused path).
///
/// # Shapes
/// - x: `[batch, c_in, h, w]` -> `[batch, c_out, h', w']`
pub(crate) fn conv<B: Backend>(layer: &Conv2d<B>, x: Tensor<B, 4>, c: Compute) -> Tensor<B, 4> {
    let dtype = composed_dtype::<B>(c, &x.device());
    composed::conv(layer, x, dtype)
}

/// `(k, stride, pad)` of a conv with a square kernel, equal strides, the same zero padding on
/// every side, no dilation and no groups: the convs [`patch_conv`] and [`patch_embed`] write
/// as one matrix product.
pub(crate) fn plain_conv<B: Backend>(layer: &Conv2d<B>) -> Option<(usize, usize, usize)> {
    use burn::nn::PaddingConfig2d as P;
    let [_, _, kh, kw] = layer.weight.dims();
    let pad = match layer.padding {
        P::Valid => 0,
        P::Explicit(t, l, b, r) if t == l && l == b && b == r => t,
        _ => return None,
    };
    let [sy, sx] = layer.stride;
    (kh == kw && sy == sx && layer.dilation == [1, 1] && layer.groups == 1).then_some((kh, sy, pad))
}

/// The conv's weight `[C_out, K]` (a reshape whose `K` order is given by the caller's
/// permutation) as the fused linear's `[K, C_out]`, and its bias (zeros when it has none).
fn conv_as_linear<B: Backend>(
    layer: &Conv2d<B>,
    weight: Tensor<B, 4>,
) -> (Tensor<B, 2>, Tensor<B, 1>) {
    let [c_out, a, b, d] = weight.dims();
    let bias = match &layer.bias {
        Some(bias) => bias.val(),
        None => Tensor::zeros([c_out], &weight.device()),
    };
    (weight.reshape([c_out, a * b * d]).transpose(), bias)
}

/// The sequence reduction's conv (kernel = stride = `s`, no padding) on a channels-last
/// sequence. On the fused path it is what it is, a linear map of non-overlapping `s × s`
/// patches: the patches are gathered straight from `[batch, h·w, C]` (slice copies) and
/// multiplied by the kernel as a `[s·s·C, C_out]` matrix through the fused linear, with no
/// transposes to and from channels-first and no im2col; elsewhere the conv itself.
///
/// # Shapes
/// - x: `[batch, h·w, C]` (row-major `h × w`)
/// - output: `[batch, (h/s)·(w/s), C_out]` (floor division, as the conv drops the remainder)
pub(crate) fn patch_conv<B: Backend>(
    layer: &Conv2d<B>,
    x: Tensor<B, 3>,
    [h, w]: [usize; 2],
    c: Compute,
) -> Tensor<B, 3> {
    let [batch, _, channels] = x.dims();
    if let Some((s, stride, 0)) = plain_conv(layer)
        && s == stride
        && layer.weight.dims()[1] == channels
        && let Some(precision) = fused_products::<B>(c, &x.device())
        && let Some(patches) = fused::patches(&x, [h, w], s)
    {
        // [C_out, C, s, s] -> [C_out, C, s·s] -> [C_out, s·s, C]: the patches' (ky, kx, c)
        // order, by the blocked transpose (a permuted view would be copied element by element
        // by the reshape in `conv_as_linear`, on every forward).
        let c_out = layer.weight.dims()[0];
        let weight = transpose12(layer.weight.val().reshape([c_out, channels, s * s]), c)
            .reshape([c_out, s, s, channels]);
        let (weight, bias) = conv_as_linear(layer, weight);
        if let Some(y) = fused::linear_with(&patches, weight, bias, precision) {
            return y;
        }
    }
    // [B, N, C] -> [B, C, N] -> [B, C, h, w] -> conv -> [B, C', h', w'] -> [B, h'·w', C']
    let map = transpose12(x, c).reshape([batch, channels, h, w]);
    transpose12(conv(layer, map, c).flatten::<3>(2, 3), c)
}

/// An overlapping patch embedding's conv, read channels-last as the encoder wants it. On the
/// fused path: the zero-padded patches gathered into rows (im2col) times the kernel as a
/// `[C·k·k, C_out]` matrix through the fused linear, which yields `[batch, h·w, C_out]`
/// directly; elsewhere the conv, then a transpose.
///
/// # Shapes
/// - x: `[batch, C, H, W]`
/// - output: `([batch, h·w, C_out], h, w)` with `h = (H + 2·pad − k) / stride + 1`
pub(crate) fn patch_embed<B: Backend>(
    layer: &Conv2d<B>,
    x: Tensor<B, 4>,
    c: Compute,
) -> (Tensor<B, 3>, usize, usize) {
    let [_, channels, height, width] = x.dims();
    if let Some((k, s, pad)) = plain_conv(layer)
        && layer.weight.dims()[1] == channels
        && let Some(precision) = fused_products::<B>(c, &x.device())
        && let Some(cols) = fused::im2col(&x, k, s, pad)
    {
        let (weight, bias) = conv_as_linear(layer, layer.weight.val());
        if let Some(y) = fused::linear_with(&cols, weight, bias, precision) {
            let o = |n: usize| (n + 2 * pad - k) / s + 1;
            return (y, o(height), o(width));
        }
    }
    let y = conv(layer, x, c);
    let [_, _, h, w] = y.dims();
    // [B, C, h, w] -> [B, C, h*w] -> [B, h*w, C]
    (transpose12(y.flatten::<3>(2, 3), c), h, w)
}

/// A batched matmul (burn's composition; in the compute dtype where set and not served by
/// the fused path).
///
/// # Shapes
/// - a: `[..., n, k]`, b: `[..., k, m]` -> `[..., n, m]`
pub(crate) fn matmul<B: Backend, const D: usize>(
    a: Tensor<B, D>,
    b: Tensor<B, D>,
    c: Compute,
) -> Tensor<B, D> {
    let dtype = composed_dtype::<B>(c, &a.device());
    composed::matmul(a, b, dtype)
}

/// Swaps the last two dimensions.
///
/// # Shapes
/// - x: `[batch, X, Y]` -> `[batch, Y, X]`
pub(crate) fn transpose12<B: Backend>(x: Tensor<B, 3>, c: Compute) -> Tensor<B, 3> {
    if fused_path::<B>(c, &x.device())
        && let Some(y) = fused::transpose12(&x)
    {
        return y;
    }
    x.swap_dims(1, 2)
}

/// `softmax(Q·Kᵀ/√d)·V` per head, heads interleaved in the channel dimension (`C = heads·d`),
/// with `dropout` on the probabilities when training (then always burn's composition: the
/// fused and recomputing kernels have no dropout).
///
/// # Shapes
/// - query: `[batch, N, C]`, key and value: `[batch, M, C]`
/// - output: `[batch, N, C]`
pub(crate) fn attention<B: Backend>(
    query: Tensor<B, 3>,
    key: Tensor<B, 3>,
    value: Tensor<B, 3>,
    heads: usize,
    dropout: &Dropout,
    c: Compute,
) -> Tensor<B, 3> {
    let device = query.device();
    if dropout.prob > 0.0 && B::ad_enabled(&device) {
        let dtype = composed_dtype::<B>(c, &device);
        return composed::attention_with_dropout(query, key, value, heads, dropout, dtype);
    }
    let path = c.path::<B>(&device);
    // f16 on the fused path keeps the fused attention, in f32.
    let precision = fused_products::<B>(c, &device).unwrap_or(fused::Precision::F32);
    if path == KernelPath::Fused
        && let Some(y) = fused::attention(&query, &key, &value, heads, precision)
    {
        return y;
    }
    if path != KernelPath::Composed {
        return recompute::attention(query, key, value, heads, c.dtype, CHUNK_ELEMENTS);
    }
    composed::attention(query, key, value, heads, c.dtype)
}

/// The Mix-FFN's 3×3 depthwise conv and its activation on the token layout (in the input's
/// dtype: it is not autocast).
///
/// # Shapes
/// - x: `[batch, h*w, C]` -> `[batch, h*w, C]`
pub(crate) fn dwconv3x3_act<B: Backend>(
    conv: &Conv2d<B>,
    act: Activation,
    x: Tensor<B, 3>,
    [h, w]: [usize; 2],
    c: Compute,
) -> Tensor<B, 3> {
    if fused_path::<B>(c, &x.device())
        && let Some(y) = fused::dwconv3x3_act(conv, act, &x, h, w)
    {
        return y;
    }
    composed::dwconv3x3_act(conv, act, x, h, w)
}

/// The decode head's tail, `relu(bn(Σ_i up(maps[i]) + shift))` with bilinear upsampling to
/// `size`; BatchNorm uses (and updates the running statistics from) the batch statistics
/// under autodiff, the running statistics otherwise.
///
/// # Shapes
/// - maps: `[batch, D, h_i, w_i]`; shift: `[D]`
/// - output: `[batch, D, size[0], size[1]]`
pub(crate) fn decode_tail<B: Backend>(
    maps: Vec<Tensor<B, 4>>,
    shift: Tensor<B, 1>,
    bn: &BatchNorm2d<B>,
    dropout: &Dropout,
    size: [usize; 2],
    c: Compute,
) -> Tensor<B, 4> {
    let device = shift.device();
    let training = B::ad_enabled(&device);
    if fused_path::<B>(c, &device) {
        let norm = fused::Norm {
            gamma: bn.gamma.val(),
            beta: bn.beta.val(),
            running: (!training).then(|| (bn.running_mean.value(), bn.running_var.value())),
            eps: bn.epsilon,
            dropout: (training && dropout.prob > 0.0).then(|| fused::Dropout {
                keep: 1.0 - dropout.prob,
                seed: backend_seed::<B>(&device),
            }),
        };
        if let Some((y, stats)) = fused::upsample_sum_bn_relu(&maps, &shift, norm) {
            if let Some((mean, unbiased_var)) = stats {
                bn.update_running(mean, unbiased_var);
            }
            return y;
        }
    }
    dropout.forward(composed::decode_tail(bn, maps, shift, size))
}

/// 64 random bits from the backend's RNG (so `B::seed` makes them reproducible), for a
/// fused kernel that draws its own random numbers.
fn backend_seed<B: Backend>(device: &B::Device) -> u64 {
    let bits: Vec<u64> = Tensor::<B, 1>::random([4], Distribution::Uniform(0.0, 1.0), device)
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default()
        .into_iter()
        .map(|v| u64::from(v.to_bits()))
        .collect();
    bits.iter().fold(0u64, |acc, b| acc.rotate_left(23) ^ b)
}

/// Stochastic depth: drops the whole residual branch per sample with probability `prob`
/// (training only), scaling survivors by `1 / (1 - prob)` like timm/HF `drop_path`.
///
/// # Shapes
/// - x: `[batch, seq, channels]` -> `[batch, seq, channels]`
pub(crate) fn drop_path<B: Backend>(x: Tensor<B, 3>, prob: f64, c: Compute) -> Tensor<B, 3> {
    let device = x.device();
    if prob == 0.0 || !B::ad_enabled(&device) {
        return x;
    }
    let keep = 1.0 - prob;
    let batch = x.dims()[0];
    let mask = Tensor::<B, 3>::random([batch, 1, 1], Distribution::Bernoulli(keep), &device);
    if fused_path::<B>(c, &device)
        && let Some(y) = fused::drop_samples(&x, &mask, keep)
    {
        return y;
    }
    x * mask / keep
}

/// HF's segmentation loss on logits upsampled bilinearly (`align_corners = false`) to the
/// labels' size: cross-entropy over the pixels whose label is a class other than `ignore`,
/// or for a single channel the BCE-with-logits masked by the valid pixels and averaged over
/// all pixels.
///
/// # Shapes
/// - logits: `[batch, classes, h, w]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn segmentation_loss<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore: i64,
    c: Compute,
) -> Tensor<B, 1> {
    let [_, height, width] = labels.dims();
    let classes = logits.dims()[1];
    if classes > 1 {
        let path = c.path::<B>(&logits.device());
        if path == KernelPath::Fused
            && let Some(loss) = fused::upsample_cross_entropy(&logits, &labels, ignore)
        {
            return loss;
        }
        if path != KernelPath::Composed {
            return recompute::upsample_cross_entropy(&logits, &labels, ignore, CHUNK_ELEMENTS);
        }
    }
    let logits = resize_bilinear(logits, [height, width]);
    if classes == 1 {
        composed::masked_bce_with_logits(logits, labels, ignore)
    } else {
        composed::cross_entropy(logits, labels, ignore)
    }
}
