//! `Segformer`: the MiT encoder plus the all-MLP decode head
//! (`SegformerForSemanticSegmentation`).

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Int, Tensor};

use crate::batch_norm::BatchNorm2d;
use crate::bilinear::resize_bilinear;
use crate::compute::{Compute, KernelPath, Kernels};
use crate::config::SegformerConfig;
use crate::encoder::Encoder;
use crate::layers::{ConvSpec, conv2d, linear};
use crate::losses::SegLoss;
use crate::ops;

/// The per-stage channel projection (`SegformerMLP`).
#[derive(Module, Debug)]
pub(crate) struct Projection<B: Backend> {
    pub proj: Linear<B>,
}

/// All-MLP decode head (`SegformerDecodeHead`).
#[derive(Module, Debug)]
pub(crate) struct DecodeHead<B: Backend> {
    pub linear_projections: Vec<Projection<B>>,
    pub linear_fuse: Conv2d<B>,
    pub batch_norm: BatchNorm2d<B>,
    pub classifier: Conv2d<B>,
    dropout: Dropout,
}

impl<B: Backend> DecodeHead<B> {
    pub(crate) fn new(config: &SegformerConfig, device: &B::Device) -> Self {
        let std = config.initializer_range;
        let d = config.decoder_hidden_size;
        let stages = config.num_encoder_blocks;
        let one_by_one = |channels: [usize; 2], bias| ConvSpec {
            channels,
            kernel: 1,
            stride: 1,
            padding: 0,
            groups: 1,
            bias,
        };
        Self {
            linear_projections: config
                .hidden_sizes
                .iter()
                .map(|&c| Projection {
                    proj: linear(c, d, std, device),
                })
                .collect(),
            linear_fuse: conv2d(one_by_one([d * stages, d], false), std, device),
            batch_norm: BatchNorm2d::new(d, device),
            classifier: conv2d(one_by_one([d, config.num_labels()], true), std, device),
            dropout: DropoutConfig::new(config.classifier_dropout_prob).init(),
        }
    }

    /// # Shapes
    /// - input: the encoder maps `[batch, hidden_sizes[i], H_i, W_i]`
    /// - output: `[batch, num_labels, H_0, W_0]`
    ///
    /// HF projects every map to `D` channels, upsamples all four to `H_0 × W_0`, concatenates
    /// them (deepest first) and applies the 1×1 `linear_fuse` (`4D → D`). Both the projection
    /// and `linear_fuse` are per-pixel linear maps and bilinear upsampling is linear with
    /// weights summing to one, so the same result is `Σ_i up(F_i·(P_i·x_i + b_i))`, with
    /// `F_i` the slice of `linear_fuse` for stage `i`: each stage is fused at its own
    /// resolution with the `D × C_i` matrix `F_i·P_i`, and only `D`-channel maps are upsampled
    /// and summed. That is the same function up to float rounding, at a fraction of the work
    /// and without the `[batch, 4D, H_0, W_0]` concatenation.
    pub(crate) fn forward(&self, hidden_states: &[Tensor<B, 4>], c: Compute) -> Tensor<B, 4> {
        let [batch, _, h0, w0] = hidden_states[0].dims();
        let stages = hidden_states.len();
        // linear_fuse weight [D, stages*D, 1, 1] -> [D, stages*D]
        let [d, fused_in, _, _] = self.linear_fuse.weight.dims();
        let fuse = self.linear_fuse.weight.val().reshape([d, fused_in]);
        // Per stage, at its own resolution: F_i·P_i·x_i ([B, D, h_i, w_i]) and F_i·b_i ([D]).
        let mut shift: Option<Tensor<B, 1>> = None;
        let maps: Vec<Tensor<B, 4>> = hidden_states
            .iter()
            .zip(&self.linear_projections)
            .enumerate()
            .map(|(i, (x, mlp))| {
                let [_, channels, h, w] = x.dims();
                // HF concatenates the deepest stage first.
                let j = stages - 1 - i;
                let f = fuse.clone().slice([0..d, j * d..(j + 1) * d]); // [D, D]
                // Linear weight [C_i, D] -> P_i [D, C_i]; F_i·P_i [D, C_i]
                let m = ops::matmul(f.clone(), mlp.proj.weight.val().transpose(), c);
                let y = ops::matmul(
                    m.unsqueeze::<3>(),
                    x.clone().reshape([batch, channels, h * w]),
                    c,
                );
                if let Some(b) = &mlp.proj.bias {
                    let fb = ops::matmul(f, b.val().reshape([d, 1]), c).reshape([d]);
                    shift = Some(match shift.take() {
                        Some(s) => s + fb,
                        None => fb,
                    });
                }
                y.reshape([batch, d, h, w])
            })
            .collect();
        let shift = match (shift, &self.linear_fuse.bias) {
            (Some(s), Some(b)) => s + b.val(),
            (Some(s), None) => s,
            (None, Some(b)) => b.val(),
            (None, None) => Tensor::zeros([d], &fuse.device()),
        };
        // relu(bn(Σ_i up(maps[i]) + shift)) at the first stage's size: [B, D, H_0, W_0]
        // relu(bn(·)) and the classifier's dropout (fused into one pass where it can be).
        let x = ops::decode_tail(maps, shift, &self.batch_norm, &self.dropout, [h0, w0], c);
        // The 1×1 classifier as one matmul: [L, D] x [B, D, H_0*W_0] -> [B, L, H_0, W_0]
        let [labels, _, _, _] = self.classifier.weight.dims();
        let w = self.classifier.weight.val().reshape([labels, d]);
        let logits = ops::matmul(w.unsqueeze::<3>(), x.reshape([batch, d, h0 * w0]), c);
        let logits = match &self.classifier.bias {
            Some(b) => logits + b.val().reshape([1, labels, 1]),
            None => logits,
        };
        logits.reshape([batch, labels, h0, w0])
    }
}

/// SegFormer for semantic segmentation, numerically HF's `SegformerForSemanticSegmentation`.
///
/// Build one with [`SegformerConfig::init`] or load weights with
/// [`load_hf_dir`](crate::load_hf_dir) / [`load_pretrained`](crate::load_pretrained).
/// Dropout, drop path and BatchNorm batch statistics are active only on an autodiff
/// backend (training), like burn's `Dropout`.
#[derive(Module, Debug)]
pub struct Segformer<B: Backend> {
    pub(crate) segformer: Encoder<B>,
    pub(crate) decode_head: DecodeHead<B>,
    #[module(skip)]
    config: SegformerConfig,
    #[module(skip)]
    compute: Compute,
}

impl<B: Backend> Segformer<B> {
    /// Builds from a config that has already been validated.
    pub(crate) fn new(config: &SegformerConfig, device: &B::Device) -> Self {
        Self {
            segformer: Encoder::new(config, device),
            decode_head: DecodeHead::new(config, device),
            config: config.clone(),
            compute: Compute::default(),
        }
    }

    /// Per-pixel class logits at a quarter of the input resolution.
    ///
    /// # Shapes
    /// - pixel_values: `[batch, num_channels, H, W]`
    /// - output: `[batch, num_labels, ⌈H/4⌉, ⌈W/4⌉]`
    pub fn forward(&self, pixel_values: Tensor<B, 4>) -> Tensor<B, 4> {
        self.forward_with_hidden_states(pixel_values).0
    }

    /// The logits and the four encoder stage outputs.
    ///
    /// # Shapes
    /// - pixel_values: `[batch, num_channels, H, W]`
    /// - logits: `[batch, num_labels, H/4, W/4]`
    /// - hidden states: `[batch, hidden_sizes[i], H/(4·2^i), W/(4·2^i)]`
    pub fn forward_with_hidden_states(
        &self,
        pixel_values: Tensor<B, 4>,
    ) -> (Tensor<B, 4>, Vec<Tensor<B, 4>>) {
        let hidden_states = self.segformer.forward(pixel_values, self.compute);
        (
            self.decode_head.forward(&hidden_states, self.compute),
            hidden_states,
        )
    }

    /// The encoder stage outputs only (`SegformerModel(..., output_hidden_states=True)`).
    ///
    /// # Shapes
    /// - pixel_values: `[batch, num_channels, H, W]`
    /// - output: `[batch, hidden_sizes[i], H/(4·2^i), W/(4·2^i)]` for each stage `i`
    pub fn encode(&self, pixel_values: Tensor<B, 4>) -> Vec<Tensor<B, 4>> {
        self.segformer.forward(pixel_values, self.compute)
    }

    /// HF's segmentation loss: logits are upsampled bilinearly (`align_corners = false`) to
    /// the label size; cross-entropy over the pixels whose label is not
    /// `semantic_loss_ignore_index`, or for `num_labels == 1` the BCE-with-logits masked by
    /// the valid pixels and averaged over all pixels (HF's exact reduction).
    ///
    /// NOTE: labels outside `0..num_labels` are skipped like ignored pixels (PyTorch would
    /// abort), and an all-ignored batch gives loss 0 instead of NaN.
    ///
    /// # Shapes
    /// - logits: `[batch, num_labels, h, w]`
    /// - labels: `[batch, H, W]`
    /// - output: `[1]`
    pub fn loss(&self, logits: Tensor<B, 4>, labels: Tensor<B, 3, Int>) -> Tensor<B, 1> {
        let ignore = self.config.semantic_loss_ignore_index;
        ops::segmentation_loss(logits, labels, ignore, self.compute)
    }

    /// The training loss `loss` describes (Dice, focal, Lovász, class weights, sums): every
    /// term on the logits upsampled to the labels' size; unweighted cross-entropy terms run
    /// the same upsample + cross-entropy op as [`Segformer::loss`] (never keeping the
    /// full-resolution logits), the others burn's composition on one shared upsampled copy.
    /// With `num_labels == 1` this is [`Segformer::loss`] (HF's BCE) whatever `loss` says.
    ///
    /// # Shapes
    /// - logits: `[batch, num_labels, h, w]`
    /// - labels: `[batch, H, W]`
    /// - output: `[1]`
    pub fn loss_with(
        &self,
        logits: Tensor<B, 4>,
        labels: Tensor<B, 3, Int>,
        loss: &SegLoss,
    ) -> Tensor<B, 1> {
        if self.num_labels() == 1 || *loss == SegLoss::default() {
            return self.loss(logits, labels);
        }
        let ignore = self.config.semantic_loss_ignore_index;
        let [_, height, width] = labels.dims();
        let full = || resize_bilinear(logits.clone(), [height, width]);
        let ce = || ops::segmentation_loss(logits.clone(), labels.clone(), ignore, self.compute);
        loss.sum(full, labels.clone(), ignore, ce)
    }

    /// Mixed precision hook: with `Some(BF16 | F16)` every Linear, Conv2d and attention
    /// matmul runs on inputs and weights cast to that dtype, with results cast back to the
    /// parameters' dtype before LayerNorm, BatchNorm, softmax and the loss (PyTorch
    /// autocast's rules). Parameters and gradients stay in full precision. `None` (the
    /// default) runs everything in the parameters' dtype.
    ///
    /// On burn-flex with the fused kernels ([`Kernels::Auto`]), bf16 is theirs: the linear
    /// layers, the patch-embedding and sequence-reduction convs and attention's products
    /// multiply bf16-rounded operands with f32 sums (AVX512-BF16) and keep f32 results and
    /// activations; the decode-head matmuls stay f32. On a CPU without AVX512-BF16
    /// ([`cpu_has_bf16_kernels`](crate::cpu_has_bf16_kernels)) that path computes in f32.
    pub fn with_compute_dtype(mut self, dtype: Option<FloatDType>) -> Self {
        self.compute.dtype = dtype;
        self
    }

    /// A copy of this model on `device` for data-parallel training: the same parameters (ids
    /// and values) as `self.clone().fork(device)`, with BatchNorm running statistics of its
    /// own. burn's running states are shared between clones (and `fork` would move the
    /// shared one to `device`), so without this every replica would update one running
    /// estimate, in thread order.
    pub fn replica(&self, device: &B::Device) -> Self {
        let mut copy = self.clone();
        copy.decode_head.batch_norm = copy.decode_head.batch_norm.with_own_running_stats();
        copy.fork(device)
    }

    /// The mixed-precision compute dtype, if any (see [`Segformer::with_compute_dtype`]).
    pub fn compute_dtype(&self) -> Option<FloatDType> {
        self.compute.dtype
    }

    /// Which implementation of the layers the forward pass and the loss run (default
    /// [`Kernels::Auto`]); the choice belongs to this model, not to the process.
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.compute.kernels = kernels;
        self
    }

    /// The kernel choice (see [`Segformer::with_kernels`]).
    pub fn kernels(&self) -> Kernels {
        self.compute.kernels
    }

    /// The path the kernel choice takes on this model's backend, for tensors on `device`.
    pub fn kernel_path(&self, device: &B::Device) -> KernelPath {
        self.compute.path::<B>(device)
    }

    /// The configuration the model was built from.
    pub fn config(&self) -> &SegformerConfig {
        &self.config
    }

    /// The number of output classes.
    pub fn num_labels(&self) -> usize {
        self.config.num_labels()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::{Distribution, TensorData};

    type B = Flex;

    /// Parameter count of a SegFormer derived from the layer shapes alone.
    fn expected_params(c: &SegformerConfig) -> usize {
        let mut total = 0;
        let mut c_in = c.num_channels;
        for i in 0..c.num_encoder_blocks {
            let (h, k, r) = (c.hidden_sizes[i], c.patch_sizes[i], c.sr_ratios[i]);
            let m = h * c.mlp_ratios[i];
            total += c_in * h * k * k + h + 2 * h; // patch conv + LayerNorm
            let sr = if r > 1 { h * h * r * r + h + 2 * h } else { 0 };
            let block =
                2 * h + 4 * (h * h + h) + sr + 2 * h + (h * m + m) + (9 * m + m) + (m * h + h);
            total += c.depths[i] * block + 2 * h; // blocks + stage LayerNorm
            c_in = h;
        }
        let d = c.decoder_hidden_size;
        total += c.hidden_sizes.iter().map(|&h| h * d + d).sum::<usize>();
        total += 4 * d * d + 2 * d + d * c.num_labels() + c.num_labels();
        total
    }

    /// `num_params` also counts the two BatchNorm running statistics.
    fn trainable(model: &Segformer<B>) -> usize {
        model.num_params() - 2 * model.config().decoder_hidden_size
    }

    #[test]
    fn mit_b0_ade_has_3_7m_parameters() {
        let config = SegformerConfig::mit_b0().with_num_labels(150);
        let model = config.init::<B>(&Default::default()).unwrap();
        let n = trainable(&model);
        assert_eq!(n, expected_params(&config));
        // The paper's 3.7 M (HF's nvidia/segformer-b0-finetuned-ade-512-512: 3.75 M).
        assert!((3_700_000..3_800_000).contains(&n), "{n}");
    }

    #[test]
    fn preset_parameter_counts_match_the_layer_shapes() {
        for config in [SegformerConfig::mit_b1(), SegformerConfig::mit_b2()] {
            let model = config.init::<B>(&Default::default()).unwrap();
            assert_eq!(trainable(&model), expected_params(&config));
        }
    }

    fn tiny(num_channels: usize, num_labels: usize) -> SegformerConfig {
        let mut c = SegformerConfig::mit_b0()
            .with_num_channels(num_channels)
            .with_num_labels(num_labels);
        c.hidden_sizes = vec![8, 16, 24, 32];
        c.num_attention_heads = vec![1, 2, 3, 4];
        c.depths = vec![1, 1, 1, 1];
        c.decoder_hidden_size = 16;
        c
    }

    #[test]
    fn four_band_input_gives_quarter_resolution_logits() {
        let device = Default::default();
        let model = tiny(4, 5).init::<B>(&device).unwrap();
        let x = Tensor::<B, 4>::random([2, 4, 64, 48], Distribution::Normal(0.0, 1.0), &device);
        let (logits, hidden) = model.forward_with_hidden_states(x);
        assert_eq!(logits.dims(), [2, 5, 16, 12]);
        let dims: Vec<_> = hidden.iter().map(|h| h.dims()).collect();
        assert_eq!(
            dims,
            [[2, 8, 16, 12], [2, 16, 8, 6], [2, 24, 4, 3], [2, 32, 2, 2]]
        );
        // Odd sizes round up like PyTorch's conv arithmetic.
        let odd = model.forward(Tensor::zeros([1, 4, 33, 30], &device));
        assert_eq!(odd.dims(), [1, 5, 9, 8]);
    }

    #[test]
    fn thirteen_bands_with_bce_head_trains() {
        let device = Default::default();
        let model = tiny(13, 1).init::<Autodiff<B>>(&device).unwrap();
        let x = Tensor::random([1, 13, 32, 32], Distribution::Normal(0.0, 1.0), &device);
        let labels = Tensor::<Autodiff<B>, 3, Int>::from_data(
            TensorData::new(
                (0..32 * 32)
                    .map(|i| [0i64, 1, 255][i % 3])
                    .collect::<Vec<_>>(),
                [1, 32, 32],
            ),
            &device,
        );
        let loss = model.loss(model.forward(x), labels);
        let value = loss.clone().into_scalar();
        assert!(value.is_finite() && value > 0.0, "{value}");
        let grads = loss.backward();
        let grad = model
            .decode_head
            .classifier
            .weight
            .val()
            .grad(&grads)
            .unwrap();
        assert!(grad.abs().sum().into_scalar() > 0.0);
    }

    #[test]
    fn kernel_choice_belongs_to_each_model() {
        // Two models in one process, same weights: one on the fused kernels, one on burn's
        // plain composition. Same logits, loss and gradients up to float rounding.
        type A = Autodiff<B>;
        let device = Default::default();
        let mut config = tiny(3, 4);
        // Deterministic training-mode passes: no dropout, no drop path.
        config.hidden_dropout_prob = 0.0;
        config.attention_probs_dropout_prob = 0.0;
        config.classifier_dropout_prob = 0.0;
        config.drop_path_rate = 0.0;
        let fused = config.init::<A>(&device).unwrap();
        let x = Tensor::<A, 4>::random([2, 3, 32, 32], Distribution::Normal(0.0, 1.0), &device);
        let labels = Tensor::<A, 3, Int>::from_data(
            TensorData::new(
                (0..2 * 32 * 32).map(|i| i % 5).collect::<Vec<i64>>(),
                [2, 32, 32],
            ),
            &device,
        );
        let run = |model: &Segformer<A>| {
            let logits = model.forward(x.clone());
            let loss = model.loss(logits.clone(), labels.clone());
            let grads = loss.clone().backward();
            let weight = model.segformer.stages[0].patch_embeddings.proj.weight.val();
            let grad = weight.grad(&grads).unwrap();
            (logits.inner(), loss.inner(), grad)
        };
        let (fl, fo, fg) = run(&fused);
        // Cloned after a forward pass: parameters are initialised lazily, on first use, and a
        // clone of an uninitialised one would draw its own weights.
        let composed = fused.clone().with_kernels(Kernels::Composed);
        assert_eq!(fused.kernels(), Kernels::Auto);
        assert_eq!(fused.kernel_path(&device), KernelPath::Fused);
        assert_eq!(composed.kernel_path(&device), KernelPath::Composed);
        let (cl, co, cg) = run(&composed);
        crate::test_support::assert_close("logits", fl, cl, 1e-5);
        crate::test_support::assert_close("loss", fo, co, 1e-5);
        crate::test_support::assert_close("patch embedding grad", fg, cg, 1e-4);
    }

    #[test]
    fn dropout_is_off_without_autodiff() {
        let device = Default::default();
        let mut config = tiny(3, 2);
        config.hidden_dropout_prob = 0.5;
        config.classifier_dropout_prob = 0.5;
        config.drop_path_rate = 0.5;
        let model = config.init::<B>(&device).unwrap();
        let x = Tensor::<B, 4>::random([1, 3, 32, 32], Distribution::Normal(0.0, 1.0), &device);
        let a = model.forward(x.clone()).into_data();
        let b = model.forward(x).into_data();
        assert_eq!(a.as_bytes(), b.as_bytes(), "inference is deterministic");
    }

    #[test]
    fn dropout_and_drop_path_are_on_under_autodiff() {
        let device = Default::default();
        let mut config = tiny(3, 2);
        config.hidden_dropout_prob = 0.5;
        config.drop_path_rate = 0.5;
        let model = config.init::<Autodiff<B>>(&device).unwrap();
        let x = Tensor::<Autodiff<B>, 4>::random(
            [2, 3, 32, 32],
            Distribution::Normal(0.0, 1.0),
            &device,
        );
        let a = model.encode(x.clone()).remove(3).into_data();
        let b = model.encode(x).remove(3).into_data();
        assert_ne!(
            a.as_bytes(),
            b.as_bytes(),
            "training forward passes are stochastic"
        );
    }
}
