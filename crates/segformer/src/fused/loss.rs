//! HF's segmentation loss without the full-resolution logits: each label pixel's logits are
//! interpolated (bilinear, `align_corners = false`) from the quarter-resolution map on the fly,
//! in bands of rows, forward and backward. burn's composition keeps `classes × H × W` floats
//! several times over (upsampled logits, log-softmax, their gradients): 150 MiB per 512² image
//! and copy for ADE20K's 150 classes.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use kernels::CrossEntropy;

use super::{apply, route};
use crate::compute::{primitive, tensor};

/// Mean cross-entropy over the valid label pixels (`0 <= label < classes`, `!= ignore`) of the
/// logits upsampled to the labels' size, or `None` where no fused route serves `B`.
///
/// # Shapes
/// - logits: `[batch, classes, h, w]`
/// - labels: `[batch, H, W]`
/// - output: `[1]`
pub(crate) fn upsample_cross_entropy<B: Backend>(
    logits: &Tensor<B, 4>,
    labels: &Tensor<B, 3, Int>,
    ignore: i64,
) -> Option<Tensor<B, 1>> {
    let route = route::<B>(&[logits.dtype()])?;
    let [_, height, width] = labels.dims();
    let classes = logits.dims()[1];
    let labels = labels.clone().into_data().convert::<i64>();
    let op = CrossEntropy::new(
        labels.as_slice::<i64>().ok()?,
        [height, width],
        classes,
        ignore,
    );
    Some(tensor(apply::<B, _, 1>(
        route,
        &op,
        [primitive(logits.clone())],
    )))
}
