//! `Segformer`: the MiT encoder plus the all-MLP decode head
//! (`SegformerForSemanticSegmentation`).

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Int, Tensor};

use crate::config::SegformerConfig;
use crate::encoder::Encoder;
use crate::layers::{BatchNorm2d, ConvSpec, conv2d, linear};
use crate::loss;

/// Bilinear resize with PyTorch's `align_corners = False` (burn defaults to `true`).
///
/// # Shapes
/// - input: `[batch, channels, h, w]`
/// - output: `[batch, channels, size[0], size[1]]`
pub(crate) fn resize_bilinear<B: Backend>(x: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    if [h, w] == size {
        // Half-pixel bilinear at scale 1 is the identity.
        return x;
    }
    let options = InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(false);
    interpolate(x, size, options)
}

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
    pub(crate) fn forward(&self, hidden_states: &[Tensor<B, 4>]) -> Tensor<B, 4> {
        let [_, _, h0, w0] = hidden_states[0].dims();
        let mut upsampled: Vec<Tensor<B, 4>> = hidden_states
            .iter()
            .zip(&self.linear_projections)
            .map(|(x, mlp)| {
                let [batch, channels, h, w] = x.dims();
                // [B, C, h, w] -> [B, h*w, C] -> [B, h*w, D]
                let x = x.clone().reshape([batch, channels, h * w]).swap_dims(1, 2);
                let x = mlp.proj.forward(x);
                let d = x.dims()[2];
                // [B, h*w, D] -> [B, D, h, w]
                let x = x.swap_dims(1, 2).reshape([batch, d, h, w]);
                resize_bilinear(x, [h0, w0])
            })
            .collect();
        // HF concatenates the deepest stage first.
        upsampled.reverse();
        let x = self.linear_fuse.forward(Tensor::cat(upsampled, 1));
        let x = relu(self.batch_norm.forward(x));
        self.classifier.forward(self.dropout.forward(x))
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
}

impl<B: Backend> Segformer<B> {
    /// Builds from a config that has already been validated.
    pub(crate) fn new(config: &SegformerConfig, device: &B::Device) -> Self {
        Self {
            segformer: Encoder::new(config, device),
            decode_head: DecodeHead::new(config, device),
            config: config.clone(),
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
        let hidden_states = self.segformer.forward(pixel_values);
        (self.decode_head.forward(&hidden_states), hidden_states)
    }

    /// The encoder stage outputs only (`SegformerModel(..., output_hidden_states=True)`).
    ///
    /// # Shapes
    /// - pixel_values: `[batch, num_channels, H, W]`
    /// - output: `[batch, hidden_sizes[i], H/(4·2^i), W/(4·2^i)]` for each stage `i`
    pub fn encode(&self, pixel_values: Tensor<B, 4>) -> Vec<Tensor<B, 4>> {
        self.segformer.forward(pixel_values)
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
        let [_, height, width] = labels.dims();
        let logits = resize_bilinear(logits, [height, width]);
        let ignore = self.config.semantic_loss_ignore_index;
        if self.num_labels() == 1 {
            loss::masked_bce_with_logits(logits, labels, ignore)
        } else {
            loss::cross_entropy(logits, labels, ignore)
        }
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
