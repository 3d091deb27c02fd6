//! The Mix-FFN's 3×3 depthwise conv (stride 1, zero padding 1, bias) and its activation, fused
//! and run channels-last on the `[B, h·w, C]` token layout, so neither the `[B, N, C] ↔
//! [B, C, h, w]` round trip nor the pre-activation map is materialised: the backward pass
//! recomputes the pre-activation from the kept input.

use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use kernels::DwConvOp;

use super::{apply, route};
use crate::compute::{Activation, primitive, tensor};

/// `act(dwconv3x3(x) + bias)` on a token sequence laid out row-major over an `h × w` grid, or
/// `None` for another conv geometry, without a bias or without a fused route for the tensors.
///
/// # Shapes
/// - x: `[batch, h*w, C]`; conv weight `[C, 1, 3, 3]`, bias `[C]`
/// - output: `[batch, h*w, C]`
pub(crate) fn dwconv3x3_act<B: Backend>(
    conv: &Conv2d<B>,
    act: Activation,
    x: &Tensor<B, 3>,
    h: usize,
    w: usize,
) -> Option<Tensor<B, 3>> {
    let channels = x.dims()[2];
    let fusable = conv.groups == channels
        && conv.weight.dims() == [channels, 1, 3, 3]
        && conv.stride == [1, 1]
        && conv.dilation == [1, 1];
    let bias = conv.bias.as_ref().filter(|_| fusable)?;
    let (weight, bias) = (conv.weight.val(), bias.val());
    let route = route::<B>(&[x.dtype(), weight.dtype(), bias.dtype()])?;
    let op = DwConvOp { h, w, act };
    Some(tensor(apply::<B, _, 3>(
        route,
        &op,
        [primitive(x.clone()), primitive(weight), primitive(bias)],
    )))
}
