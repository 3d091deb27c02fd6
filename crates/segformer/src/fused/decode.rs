//! The decode head's tail in one op: bilinear upsampling (`align_corners = false`) of the four
//! per-stage maps to the first stage's size, their sum plus a per-channel shift, BatchNorm
//! (batch statistics when training, running statistics otherwise) and ReLU. burn-flex runs the
//! BatchNorm's per-channel broadcasts through its generic strided path and keeps every
//! intermediate for autodiff; here only the pre-norm sum is kept.

use std::sync::Arc;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
pub(crate) use kernels::Dropout;
use kernels::{DecodeTail, Stats};

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// The decode head's BatchNorm as the fused tail reads it.
pub(crate) struct Norm<B: Backend> {
    /// Scale, `[D]`.
    pub gamma: Tensor<B, 1>,
    /// Shift, `[D]`.
    pub beta: Tensor<B, 1>,
    /// `(running mean, running var)`, each `[D]`, to normalise with; `None` normalises with
    /// the batch statistics (training).
    pub running: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    /// Added to the variance.
    pub eps: f64,
    /// Inverted dropout on the output (training), when set.
    pub dropout: Option<Dropout>,
}
pub(crate) type BatchStats<B> = (Tensor<B, 1>, Tensor<B, 1>);

/// `relu(bn(Σ_i up(maps[i]) + shift))` and, when `norm` has no running statistics, the
/// batch's statistics; `None` for another number of maps than four or without a fused route
/// for the tensors.
///
/// # Shapes
/// - maps: `[batch, D, h_i, w_i]`, the first at the output size `[H, W]`
/// - shift: `[D]`
/// - output: `[batch, D, H, W]`
pub(crate) fn upsample_sum_bn_relu<B: Backend>(
    maps: &[Tensor<B, 4>],
    shift: &Tensor<B, 1>,
    norm: Norm<B>,
) -> Option<(Tensor<B, 4>, Option<BatchStats<B>>)> {
    let [m0, m1, m2, m3] = maps else {
        return None;
    };
    let Norm {
        gamma,
        beta,
        running,
        eps,
        dropout,
    } = norm;
    let dtypes = [
        m0.dtype(),
        m1.dtype(),
        m2.dtype(),
        m3.dtype(),
        shift.dtype(),
        gamma.dtype(),
    ];
    let route = route::<B>(&dtypes)?;
    let stats = match running {
        None => Stats::Batch(Arc::default()),
        Some((mean, var)) => {
            let host = |t: Tensor<B, 1>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();
            Stats::Running {
                mean: host(mean).into(),
                var: host(var).into(),
            }
        }
    };
    let op = DecodeTail {
        stats: stats.clone(),
        eps: eps as f32,
        dropout: dropout.filter(|d| d.keep < 1.0),
    };
    let inputs = [
        primitive(m0.clone()),
        primitive(m1.clone()),
        primitive(m2.clone()),
        primitive(m3.clone()),
        primitive(shift.clone()),
        primitive(gamma),
        primitive(beta),
    ];
    let out = tensor(apply::<B, _, 7>(route, &op, inputs));
    let Stats::Batch(batch) = &stats else {
        return Some((out, None));
    };
    let (mean, var, n) = batch
        .lock()
        .unwrap()
        .take()
        .expect("forward stored its statistics");
    let device = m0.device();
    let d = mean.len();
    let to = |v: Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(v, [d]), &device);
    let unbiased: Vec<f32> = var
        .iter()
        .map(|v| {
            if n > 1 {
                v * n as f32 / (n - 1) as f32
            } else {
                *v
            }
        })
        .collect();
    Some((out, Some((to(mean), to(unbiased)))))
}
