//! Losses for class imbalance, next to HF's cross-entropy: Dice, focal and Lovász-softmax,
//! optionally with per-class weights, alone or as a weighted sum ([`SegLoss`]).
//!
//! Every term is computed on the logits upsampled bilinearly to the labels' size (HF's rule)
//! over the pixels whose label is a class (`0 <= label < classes`, `label != ignore`).
//! An unweighted cross-entropy term runs the model's upsample + cross-entropy op (fused or
//! recomputing: the full-resolution logits are never kept); every other term runs burn's
//! composition on one shared full-resolution copy of the logits, which autodiff keeps for the
//! backward pass (what the memory planner adds for them).

use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};

/// One loss of a [`SegLoss`].
#[derive(Clone, Debug, PartialEq)]
pub enum LossKind {
    /// Cross-entropy (`torch.nn.CrossEntropyLoss(weight, ignore_index)`): the class-weighted
    /// mean `Σ w_y·(−log p_y) / Σ w_y` over the valid pixels (plain mean without weights).
    CrossEntropy,
    /// segmentation_models_pytorch's `DiceLoss(mode="multiclass", from_logits=True)`:
    /// softmax, then per class `c` over the whole batch
    /// `1 − (2·Σ p_c·t_c + smooth) / max(Σ p_c + Σ t_c + smooth, 1e-7)`, zero for the classes
    /// absent from the labels, averaged over all classes (smp's `loss.mean()`).
    Dice {
        /// Added to numerator and denominator (smp's default 0).
        smooth: f64,
    },
    /// Softmax focal loss `−(1 − p_y)^γ · log p_y` (Lin et al.), averaged over the valid
    /// pixels (class-weighted like cross-entropy when weights are given). NOTE: smp's
    /// multiclass `FocalLoss` sums one-vs-rest sigmoid focal losses instead; this is the
    /// softmax form, which is cross-entropy at `γ = 0`.
    Focal {
        /// The focusing exponent γ (2 in the paper).
        gamma: f64,
    },
    /// Lovász-softmax (Berman et al. 2018, `lovasz_softmax_flat`, `classes="present"`): per
    /// class present in the labels, the Lovász extension of the Jaccard loss on the errors
    /// `|t_c − p_c|` over all valid pixels of the batch; averaged over those classes.
    Lovasz,
}

impl LossKind {
    /// The config name: `ce`, `dice`, `focal` or `lovasz`.
    pub fn name(&self) -> &'static str {
        match self {
            LossKind::CrossEntropy => "ce",
            LossKind::Dice { .. } => "dice",
            LossKind::Focal { .. } => "focal",
            LossKind::Lovasz => "lovasz",
        }
    }
}

/// One weighted term of a [`SegLoss`].
#[derive(Clone, Debug, PartialEq)]
pub struct LossTerm {
    /// The loss.
    pub kind: LossKind,
    /// Its factor in the sum.
    pub weight: f64,
}

/// The training loss: `Σ weight_i · term_i`, with optional per-class weights for the
/// cross-entropy and focal terms. [`SegLoss::default`] is HF's plain cross-entropy.
#[derive(Clone, Debug, PartialEq)]
pub struct SegLoss {
    /// The terms summed.
    pub terms: Vec<LossTerm>,
    /// One weight per class for cross-entropy and focal (`None`: all 1).
    pub class_weights: Option<Vec<f32>>,
}

impl Default for SegLoss {
    fn default() -> Self {
        Self {
            terms: vec![LossTerm {
                kind: LossKind::CrossEntropy,
                weight: 1.0,
            }],
            class_weights: None,
        }
    }
}

impl SegLoss {
    /// Whether the cross-entropy terms run the model's upsample + cross-entropy op (no class
    /// weights), which never keeps full-resolution logits.
    pub fn ce_is_fused(&self) -> bool {
        self.class_weights.is_none()
    }

    /// Whether some term needs the full-resolution logits kept for the backward pass
    /// (Dice, focal, Lovász, or a class-weighted cross-entropy).
    pub fn keeps_full_logits(&self) -> bool {
        self.terms
            .iter()
            .any(|t| t.kind != LossKind::CrossEntropy || !self.ce_is_fused())
    }

    /// The sum on full-resolution logits (what [`crate::Segformer::loss_with`] runs after the
    /// upsampling); `ce` computes an unweighted cross-entropy term when given.
    ///
    /// # Shapes
    /// - logits: `[batch, classes, H, W]`
    /// - labels: `[batch, H, W]`
    /// - output: `[1]`
    pub(crate) fn sum<B: Backend>(
        &self,
        full: impl FnOnce() -> Tensor<B, 4>,
        labels: Tensor<B, 3, Int>,
        ignore: i64,
        mut ce: impl FnMut() -> Tensor<B, 1>,
    ) -> Tensor<B, 1> {
        let mut full = Some(full);
        let mut logits: Option<Tensor<B, 4>> = None;
        let mut total: Option<Tensor<B, 1>> = None;
        for term in &self.terms {
            let value = if term.kind == LossKind::CrossEntropy && self.ce_is_fused() {
                ce()
            } else {
                let x = logits
                    .get_or_insert_with(|| (full.take().expect("computed once"))())
                    .clone();
                self.term(&term.kind, x, labels.clone(), ignore)
            };
            let value = value.mul_scalar(term.weight);
            total = Some(match total {
                Some(t) => t + value,
                None => value,
            });
        }
        total.unwrap_or_else(|| Tensor::zeros([1], &labels.device()))
    }

    /// One term on full-resolution logits.
    ///
    /// # Shapes
    /// - logits: `[batch, classes, H, W]`; labels: `[batch, H, W]`; output: `[1]`
    pub fn term<B: Backend>(
        &self,
        kind: &LossKind,
        logits: Tensor<B, 4>,
        labels: Tensor<B, 3, Int>,
        ignore: i64,
    ) -> Tensor<B, 1> {
        let weights = self.class_weights.as_deref();
        match kind {
            LossKind::CrossEntropy => focal(logits, labels, ignore, 0.0, weights),
            LossKind::Focal { gamma } => focal(logits, labels, ignore, *gamma, weights),
            LossKind::Dice { smooth } => dice(logits, labels, ignore, *smooth),
            LossKind::Lovasz => lovasz_softmax(logits, labels, ignore),
        }
    }
}

/// The pixels whose label is a class: `0 <= label < classes` and `label != ignore`.
fn valid_mask<B: Backend>(
    labels: &Tensor<B, 3, Int>,
    classes: usize,
    ignore: i64,
) -> Tensor<B, 3, Bool> {
    labels
        .clone()
        .not_equal_elem(ignore)
        .bool_and(labels.clone().greater_equal_elem(0))
        .bool_and(labels.clone().lower_elem(classes as i64))
}

/// `[B, H, W]` labels -> `[B, C, H, W]` one-hot (0 where the label is not a class).
fn one_hot<B: Backend>(labels: &Tensor<B, 3, Int>, classes: usize) -> Tensor<B, 4> {
    let planes = (0..classes)
        .map(|c| labels.clone().equal_elem(c as i64).float())
        .collect();
    Tensor::stack(planes, 1)
}

/// `Σ w_y·(1 − p_y)^γ·(−log p_y) / Σ w_y` over the valid pixels (`w = 1` without weights);
/// γ = 0 is the (weighted) cross-entropy. 0 when no pixel is valid.
fn focal<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore: i64,
    gamma: f64,
    class_weights: Option<&[f32]>,
) -> Tensor<B, 1> {
    let [_, classes, _, _] = logits.dims();
    let device = logits.device();
    let valid = valid_mask(&labels, classes, ignore);
    let safe = labels.mask_fill(valid.clone().bool_not(), 0);
    // [B, C, H, W] gather [B, 1, H, W] -> [B, H, W]
    let log_p = log_softmax(logits, 1)
        .gather(1, safe.clone().unsqueeze_dim(1))
        .squeeze_dim::<3>(1);
    let per_pixel = if gamma == 0.0 {
        log_p.neg()
    } else {
        let focus = (log_p.clone().exp().neg() + 1.0)
            .clamp_min(0.0)
            .powf_scalar(gamma);
        focus * log_p.neg()
    };
    let mut w = valid.float();
    if let Some(cw) = class_weights {
        let table = Tensor::<B, 1>::from_data(TensorData::new(cw.to_vec(), [cw.len()]), &device);
        let dims = safe.dims();
        // [B, H, W] -> [B·H·W] -> weights [B·H·W] -> [B, H, W]
        w = w * table.select(0, safe.flatten::<1>(0, 2)).reshape(dims);
    }
    (per_pixel * w.clone()).sum() / w.sum().clamp_min(1e-12)
}

/// smp's multiclass Dice loss from logits (see [`LossKind::Dice`]).
fn dice<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore: i64,
    smooth: f64,
) -> Tensor<B, 1> {
    let [_, classes, _, _] = logits.dims();
    // [B, H, W] -> [B, 1, H, W]
    let valid = valid_mask(&labels, classes, ignore)
        .float()
        .unsqueeze_dim::<4>(1);
    let probs = softmax(logits, 1) * valid.clone();
    let target = one_hot(&labels, classes) * valid;
    // Σ over batch and pixels: [B, C, H, W] -> [C]
    let per_class = |t: Tensor<B, 4>| t.sum_dims(&[0, 2, 3]).reshape([classes]);
    let intersection = per_class(probs.clone() * target.clone());
    let present = per_class(target.clone());
    let cardinality = per_class(probs) + present.clone();
    let score = (intersection.mul_scalar(2.0) + smooth) / (cardinality + smooth).clamp_min(1e-7);
    let loss = (score.neg() + 1.0) * present.greater_elem(0.0).float();
    loss.mean()
}

/// Lovász-softmax over the valid pixels of the batch (see [`LossKind::Lovasz`]).
///
/// The sort that orders the errors is taken on the host and turned into one constant weight
/// per pixel (the Lovász gradient, put back in pixel order), so the loss is `Σ_c Σ_i g_ci·e_ci`
/// and autodiff differentiates it like the reference, through the errors only.
fn lovasz_softmax<B: Backend>(
    logits: Tensor<B, 4>,
    labels: Tensor<B, 3, Int>,
    ignore: i64,
) -> Tensor<B, 1> {
    let [batch, classes, h, w] = logits.dims();
    let device = logits.device();
    let valid = valid_mask(&labels, classes, ignore)
        .float()
        .unsqueeze_dim::<4>(1);
    let target = one_hot(&labels, classes);
    // Errors |t − p| on valid pixels: [B, C, H, W] -> [C, B·H·W]
    let errors = ((target.clone() - softmax(logits, 1)).abs() * valid.clone())
        .swap_dims(0, 1)
        .reshape([classes, batch * h * w]);
    let e_host: Vec<f32> = errors
        .clone()
        .into_data()
        .convert::<f32>()
        .into_vec()
        .unwrap();
    let t_host: Vec<f32> = (target * valid.clone())
        .swap_dims(0, 1)
        .reshape([classes, batch * h * w])
        .into_data()
        .convert::<f32>()
        .into_vec()
        .unwrap();
    let v_host: Vec<f32> = valid
        .reshape([batch * h * w])
        .into_data()
        .convert::<f32>()
        .into_vec()
        .unwrap();
    let n = batch * h * w;
    let mut weights = vec![0f32; classes * n];
    let mut present = 0usize;
    for c in 0..classes {
        let (e, t) = (&e_host[c * n..(c + 1) * n], &t_host[c * n..(c + 1) * n]);
        if !t.iter().any(|&v| v > 0.0) {
            continue;
        }
        present += 1;
        let mut order: Vec<usize> = (0..n).filter(|&i| v_host[i] > 0.0).collect();
        // Descending errors; a stable sort keeps ties in pixel order.
        order.sort_by(|&a, &b| e[b].total_cmp(&e[a]));
        let fg: Vec<f32> = order.iter().map(|&i| t[i]).collect();
        for (k, g) in lovasz_grad(&fg).into_iter().enumerate() {
            weights[c * n + order[k]] = g;
        }
    }
    if present == 0 {
        return (errors.sum() * 0.0).reshape([1]);
    }
    let weights = Tensor::<B, 2>::from_data(TensorData::new(weights, [classes, n]), &device);
    (errors * weights).sum() / present as f32
}

/// The gradient of the Lovász extension of the Jaccard loss for foreground indicators sorted
/// by decreasing error (Berman et al., `lovasz_grad`).
fn lovasz_grad(fg: &[f32]) -> Vec<f32> {
    let total: f32 = fg.iter().sum();
    let mut out = Vec::with_capacity(fg.len());
    let (mut cum_fg, mut prev) = (0f32, 0f32);
    for (k, &f) in fg.iter().enumerate() {
        cum_fg += f;
        let cum_bg = (k + 1) as f32 - cum_fg;
        let jaccard = 1.0 - (total - cum_fg) / (total + cum_bg);
        out.push(jaccard - prev);
        prev = jaccard;
    }
    out
}

/// Median-frequency class weights (Eigen & Fergus 2015): `w_c = median(f) / f_c` with
/// `f_c` = class `c`'s share of the labelled pixels and the median over the classes that
/// occur; classes that never occur get weight 1.
pub fn median_frequency_weights(class_pixels: &[u64]) -> Vec<f32> {
    let total: u64 = class_pixels.iter().sum();
    let mut freq: Vec<f64> = class_pixels
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| n as f64 / total as f64)
        .collect();
    if freq.is_empty() {
        return vec![1.0; class_pixels.len()];
    }
    freq.sort_by(f64::total_cmp);
    let m = freq.len();
    let median = if m % 2 == 1 {
        freq[m / 2]
    } else {
        (freq[m / 2 - 1] + freq[m / 2]) / 2.0
    };
    class_pixels
        .iter()
        .map(|&n| {
            if n == 0 {
                1.0
            } else {
                (median / (n as f64 / total as f64)) as f32
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "losses_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "losses_mutants_tests.rs"]
mod mutants_tests;
