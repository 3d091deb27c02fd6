//! Test-time augmentation: the model sees an image in several poses (flips, rotations by 90°,
//! transposes: overhead imagery has no up), each prediction is turned back into the image's
//! frame, and the class probabilities are averaged.

use std::fmt;
use std::str::FromStr;

use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::backend::Backend;
use segformer::Segformer;

use crate::error::InferError;

/// One of the 8 symmetries of a rectangle's pixel grid (the dihedral group D4), acting on the
/// last two axes of `[B, C, H, W]` tensors: an optional transpose (`H` and `W` swapped), then
/// optional flips of the rows (vertical) and of the columns (horizontal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pose {
    transpose: bool,
    vflip: bool,
    hflip: bool,
}

impl Pose {
    /// `out[i, j] = in[i, j]`.
    pub const IDENTITY: Pose = Pose::new(false, false, false);
    /// Horizontal flip (left and right swapped): `out[i, j] = in[i, W-1-j]`.
    pub const HFLIP: Pose = Pose::new(false, false, true);
    /// Vertical flip (top and bottom swapped): `out[i, j] = in[H-1-i, j]`.
    pub const VFLIP: Pose = Pose::new(false, true, false);
    /// Rotation by 180°: `out[i, j] = in[H-1-i, W-1-j]`.
    pub const ROT180: Pose = Pose::new(false, true, true);
    /// Transpose (mirror on the main diagonal): `out[i, j] = in[j, i]`, `[W, H]`.
    pub const TRANSPOSE: Pose = Pose::new(true, false, false);
    /// Anti-transpose (mirror on the other diagonal): `out[i, j] = in[H-1-j, W-1-i]`, `[W, H]`.
    pub const ANTI_TRANSPOSE: Pose = Pose::new(true, true, true);
    /// Rotation by 90° counter-clockwise (`numpy.rot90`): `out[i, j] = in[j, W-1-i]`, `[W, H]`.
    pub const ROT90: Pose = Pose::new(true, true, false);
    /// Rotation by 270° counter-clockwise (90° clockwise): `out[i, j] = in[H-1-j, i]`, `[W, H]`.
    pub const ROT270: Pose = Pose::new(true, false, true);

    /// The 8 poses: the 4 flip poses (identity, horizontal and vertical flip, rotation by 180°),
    /// then the 4 that swap the axes.
    pub const ALL: [Pose; 8] = [
        Pose::IDENTITY,
        Pose::HFLIP,
        Pose::VFLIP,
        Pose::ROT180,
        Pose::TRANSPOSE,
        Pose::ANTI_TRANSPOSE,
        Pose::ROT90,
        Pose::ROT270,
    ];

    const fn new(transpose: bool, vflip: bool, hflip: bool) -> Self {
        Self {
            transpose,
            vflip,
            hflip,
        }
    }

    /// Whether the pose swaps height and width.
    pub fn swaps_axes(self) -> bool {
        self.transpose
    }

    /// The `[height, width]` of an `h × w` image in this pose.
    pub fn size(self, [h, w]: [usize; 2]) -> [usize; 2] {
        if self.transpose { [w, h] } else { [h, w] }
    }

    /// The image in this pose.
    ///
    /// # Shapes
    /// - x: `[B, C, H, W]`
    /// - output: `[B, C, H, W]`, or `[B, C, W, H]` when the pose [swaps the axes](Self::swaps_axes)
    pub fn apply<B: Backend>(self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = if self.transpose { x.swap_dims(2, 3) } else { x };
        self.flips(x)
    }

    /// The inverse of [`apply`](Self::apply): `pose.undo(pose.apply(x)) == x`, exactly (it only
    /// moves values).
    ///
    /// # Shapes
    /// - x: a tensor in this pose, `[B, C, H', W']`
    /// - output: `[B, C, H', W']`, or `[B, C, W', H']` when the pose swaps the axes
    pub fn undo<B: Backend>(self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        // The flips were applied last, in the posed frame, and each is its own inverse.
        let x = self.flips(x);
        if self.transpose { x.swap_dims(2, 3) } else { x }
    }

    fn flips<B: Backend>(self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match (self.vflip, self.hflip) {
            (false, false) => x,
            (true, false) => x.flip([2]),
            (false, true) => x.flip([3]),
            (true, true) => x.flip([2, 3]),
        }
    }
}

/// Which poses test-time augmentation averages over: `none`, `flips` (the 4 poses of
/// horizontal and vertical flips) or `d4` (all 8 poses of [`Pose::ALL`]).
///
/// Each pose of a window runs through the model (one after the other: memory is that of one
/// pass, time grows with the number of poses), its upsampled logits become class
/// probabilities, are turned back into the window's frame and averaged. The window's "logits"
/// handed on are then `ln(mean probability)` (for a single-logit model, the logit of the mean
/// sigmoid): [`probabilities`](crate::probabilities) of them is the mean probability and
/// [`classes_of`](crate::classes_of) its argmax, so every consumer of logits works unchanged.
/// Where windows overlap, these log-probabilities are what [`Blender`](crate::Blender) blends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Tta {
    /// The image as it is: the model's logits, untouched.
    #[default]
    None,
    /// Identity, horizontal flip, vertical flip, rotation by 180°.
    Flips,
    /// The 8 poses of the dihedral group: the flips, the transposes and the rotations by 90°.
    D4,
}

impl Tta {
    /// The poses averaged over, the identity first.
    pub fn poses(self) -> &'static [Pose] {
        match self {
            Tta::None => &Pose::ALL[..1],
            Tta::Flips => &Pose::ALL[..4],
            Tta::D4 => &Pose::ALL,
        }
    }
}

impl FromStr for Tta {
    type Err = InferError;

    fn from_str(s: &str) -> Result<Self, InferError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Tta::None),
            "flips" => Ok(Tta::Flips),
            "d4" => Ok(Tta::D4),
            _ => Err(InferError::UnknownTta(s.to_string())),
        }
    }
}

impl fmt::Display for Tta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tta::None => "none",
            Tta::Flips => "flips",
            Tta::D4 => "d4",
        })
    }
}

/// The smallest probability kept before the logarithm, so that no "logit" is `-inf`.
const FLOOR: f32 = f32::MIN_POSITIVE;

/// Full-resolution logits of a batch, bilinearly upsampled (`align_corners = false`, HF's
/// post-processing) to the batch's pixels. With [`Tta::None`] that is all; otherwise every pose
/// of `tta` runs through the model, its upsampled logits become class probabilities (softmax,
/// or the sigmoid of a single-logit model), are turned back into the image's frame and averaged,
/// and the result is returned as logits of that mean: `ln(p)` (`ln(p / (1 - p))` for a single
/// logit), whose softmax (sigmoid) is the mean probability and whose argmax is its argmax, so
/// every consumer of logits ([`classes_of`](crate::classes_of),
/// [`probabilities`](crate::probabilities), the window blending) works unchanged.
/// Probabilities are floored at `f32::MIN_POSITIVE` (and a single logit's at `1 - 2⁻²⁴`), so
/// the values stay finite. `forward`, when given, is `model.forward(x)` already computed by the
/// caller (the identity pose's quarter-resolution logits). The poses run one after the other,
/// so memory is that of one forward pass.
///
/// # Shapes
/// - x: `[n, C, h, w]`
/// - forward: `[n, k, h/4, w/4]`
/// - output: `[n, k, h, w]`
pub(crate) fn upsampled_logits<B: Backend>(
    model: &Segformer<B>,
    x: Tensor<B, 4>,
    tta: Tta,
    forward: Option<Tensor<B, 4>>,
) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    let mut forward = forward;
    let mut upsampled = |pose: Pose, x: Tensor<B, 4>| {
        let logits = match (pose == Pose::IDENTITY, forward.take()) {
            (true, Some(logits)) => logits,
            _ => model.forward(pose.apply(x)),
        };
        // [n, k, h'/4, w'/4] -> [n, k, h', w'] in the posed frame ([h', w'] = pose.size([h, w]))
        segformer::resize_bilinear(logits, pose.size([h, w]))
    };
    if tta == Tta::None {
        return upsampled(Pose::IDENTITY, x);
    }
    let poses = tta.poses();
    let mut sum: Option<Tensor<B, 4>> = None;
    for &pose in poses {
        let logits = upsampled(pose, x.clone());
        let p = if logits.dims()[1] == 1 {
            sigmoid(logits)
        } else {
            softmax(logits, 1)
        };
        // [n, k, h', w'] -> [n, k, h, w], back in the image's frame
        let p = pose.undo(p);
        sum = Some(match sum {
            Some(s) => s + p,
            None => p,
        });
    }
    let mean = sum.expect("every Tta has a pose") / poses.len() as f32;
    if mean.dims()[1] == 1 {
        let p = mean.clamp(FLOOR, 1.0 - f32::EPSILON / 2.0);
        return p.clone().log() - (p.neg() + 1.0).log();
    }
    mean.clamp_min(FLOOR).log()
}

#[cfg(test)]
mod tests;
