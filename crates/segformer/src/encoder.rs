//! The Mix Transformer (MiT) encoder: overlapping patch embeddings, efficient self-attention
//! with sequence reduction, Mix-FFN, and four stages each closed by a LayerNorm.
//!
//! Field names follow the transformers ≥ 5 checkpoint keys (`q_proj`, `sequence_reduction`,
//! `layernorm_before`, `fc1`, …); `weights` maps them to and from the original names.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{Dropout, DropoutConfig, LayerNorm, Linear};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::compute::{Activation, Compute};
use crate::config::SegformerConfig;
use crate::layers::{ConvSpec, DropPath, conv2d, layer_norm, linear};
use crate::ops;

/// Conv patch embedding followed by a LayerNorm (`SegformerOverlapPatchEmbeddings`).
#[derive(Module, Debug)]
pub(crate) struct OverlapPatchEmbeddings<B: Backend> {
    pub proj: Conv2d<B>,
    pub layer_norm: LayerNorm<B>,
}

impl<B: Backend> OverlapPatchEmbeddings<B> {
    /// # Shapes
    /// - input: `[batch, in_channels, H, W]`
    /// - output: `([batch, h*w, hidden], h, w)` with `h = (H + 2*(k/2) - k)/stride + 1`
    fn forward(&self, x: Tensor<B, 4>, c: Compute) -> (Tensor<B, 3>, usize, usize) {
        // [B, C, H, W] -> [B, h*w, hidden]
        let (x, h, w) = ops::patch_embed(&self.proj, x, c);
        (ops::layer_norm(&self.layer_norm, x, c), h, w)
    }
}

/// The strided conv + LayerNorm that shortens keys and values (`sr`, `layer_norm`).
#[derive(Module, Debug)]
pub(crate) struct SequenceReduction<B: Backend> {
    pub sequence_reduction: Conv2d<B>,
    pub layer_norm: LayerNorm<B>,
}

/// Multi-head self-attention whose keys/values come from a spatially reduced sequence
/// (`SegformerEfficientSelfAttention` + `SegformerSelfOutput`).
#[derive(Module, Debug)]
pub(crate) struct EfficientSelfAttention<B: Backend> {
    pub q_proj: Linear<B>,
    pub k_proj: Linear<B>,
    pub v_proj: Linear<B>,
    pub sequence_reduction: Option<SequenceReduction<B>>,
    pub o_proj: Linear<B>,
    attention_dropout: Dropout,
    dropout: Dropout,
    num_heads: usize,
}

impl<B: Backend> EfficientSelfAttention<B> {
    /// # Shapes
    /// - input: `[batch, h*w, hidden]`
    /// - output: `[batch, h*w, hidden]`
    fn forward(&self, x: Tensor<B, 3>, h: usize, w: usize, c: Compute) -> Tensor<B, 3> {
        let query = ops::linear(&self.q_proj, x.clone(), c);
        let kv = match &self.sequence_reduction {
            Some(sr) => {
                // [B, h*w, C] -> [B, h'*w', C]
                let reduced = ops::patch_conv(&sr.sequence_reduction, x, [h, w], c);
                ops::layer_norm(&sr.layer_norm, reduced, c)
            }
            None => x,
        };
        let key = ops::linear(&self.k_proj, kv.clone(), c);
        let value = ops::linear(&self.v_proj, kv, c);
        // [B, N, C] x [B, M, C] x [B, M, C] -> [B, N, C], per head
        let context = ops::attention(
            query,
            key,
            value,
            self.num_heads,
            &self.attention_dropout,
            c,
        );
        self.dropout.forward(ops::linear(&self.o_proj, context, c))
    }
}

/// The 3×3 depthwise conv inside the Mix-FFN (`SegformerDWConv`).
#[derive(Module, Debug)]
pub(crate) struct DwConv<B: Backend> {
    pub dwconv: Conv2d<B>,
}

/// Linear → 3×3 depthwise conv → activation → linear (`SegformerMixFFN`).
#[derive(Module, Debug)]
pub(crate) struct MixFfn<B: Backend> {
    pub fc1: Linear<B>,
    pub dwconv: DwConv<B>,
    pub fc2: Linear<B>,
    dropout: Dropout,
    activation: Activation,
}

impl<B: Backend> MixFfn<B> {
    /// # Shapes
    /// - input: `[batch, h*w, hidden]`
    /// - output: `[batch, h*w, hidden]`
    fn forward(&self, x: Tensor<B, 3>, h: usize, w: usize, c: Compute) -> Tensor<B, 3> {
        // [B, N, C] -> [B, N, C'] -> depthwise 3×3 over the h×w grid + activation
        let x = ops::linear(&self.fc1, x, c);
        let x = ops::dwconv3x3_act(&self.dwconv.dwconv, self.activation, x, [h, w], c);
        let x = self.dropout.forward(x);
        self.dropout.forward(ops::linear(&self.fc2, x, c))
    }
}

/// Pre-norm transformer block with stochastic depth (`SegformerLayer`).
#[derive(Module, Debug)]
pub(crate) struct Block<B: Backend> {
    pub layernorm_before: LayerNorm<B>,
    pub attention: EfficientSelfAttention<B>,
    pub layernorm_after: LayerNorm<B>,
    pub mlp: MixFfn<B>,
    drop_path: DropPath,
}

impl<B: Backend> Block<B> {
    /// # Shapes
    /// - input: `[batch, h*w, hidden]`
    /// - output: `[batch, h*w, hidden]`
    fn forward(&self, x: Tensor<B, 3>, h: usize, w: usize, c: Compute) -> Tensor<B, 3> {
        let attn = ops::layer_norm(&self.layernorm_before, x.clone(), c);
        let attn = self.attention.forward(attn, h, w, c);
        let x = self.drop_path.forward(attn, c) + x;
        let mlp = ops::layer_norm(&self.layernorm_after, x.clone(), c);
        let mlp = self.mlp.forward(mlp, h, w, c);
        self.drop_path.forward(mlp, c) + x
    }
}

/// One encoder stage: patch embedding, blocks, final LayerNorm.
#[derive(Module, Debug)]
pub(crate) struct Stage<B: Backend> {
    pub patch_embeddings: OverlapPatchEmbeddings<B>,
    pub blocks: Vec<Block<B>>,
    pub layer_norm: LayerNorm<B>,
}

impl<B: Backend> Stage<B> {
    fn new(config: &SegformerConfig, i: usize, drop_paths: &[f64], device: &B::Device) -> Self {
        let std = config.initializer_range;
        let hidden = config.hidden_sizes[i];
        let in_channels = if i == 0 {
            config.num_channels
        } else {
            config.hidden_sizes[i - 1]
        };
        let (patch, stride) = (config.patch_sizes[i], config.strides[i]);
        let act = config.activation().expect("validated config");
        let patch_embeddings = OverlapPatchEmbeddings {
            proj: conv2d(
                ConvSpec {
                    channels: [in_channels, hidden],
                    kernel: patch,
                    stride,
                    padding: patch / 2,
                    groups: 1,
                    bias: true,
                },
                std,
                device,
            ),
            layer_norm: layer_norm(hidden, device),
        };
        let sr = config.sr_ratios[i];
        let mlp_hidden = hidden * config.mlp_ratios[i];
        let blocks = drop_paths
            .iter()
            .map(|&drop_path| Block {
                layernorm_before: layer_norm(hidden, device),
                attention: EfficientSelfAttention {
                    q_proj: linear(hidden, hidden, std, device),
                    k_proj: linear(hidden, hidden, std, device),
                    v_proj: linear(hidden, hidden, std, device),
                    sequence_reduction: (sr > 1).then(|| SequenceReduction {
                        sequence_reduction: conv2d(
                            ConvSpec {
                                channels: [hidden, hidden],
                                kernel: sr,
                                stride: sr,
                                padding: 0,
                                groups: 1,
                                bias: true,
                            },
                            std,
                            device,
                        ),
                        layer_norm: layer_norm(hidden, device),
                    }),
                    o_proj: linear(hidden, hidden, std, device),
                    attention_dropout: DropoutConfig::new(config.attention_probs_dropout_prob)
                        .init(),
                    dropout: DropoutConfig::new(config.hidden_dropout_prob).init(),
                    num_heads: config.num_attention_heads[i],
                },
                layernorm_after: layer_norm(hidden, device),
                mlp: MixFfn {
                    fc1: linear(hidden, mlp_hidden, std, device),
                    dwconv: DwConv {
                        dwconv: conv2d(
                            ConvSpec {
                                channels: [mlp_hidden, mlp_hidden],
                                kernel: 3,
                                stride: 1,
                                padding: 1,
                                groups: mlp_hidden,
                                bias: true,
                            },
                            std,
                            device,
                        ),
                    },
                    fc2: linear(mlp_hidden, hidden, std, device),
                    dropout: DropoutConfig::new(config.hidden_dropout_prob).init(),
                    activation: act,
                },
                drop_path: DropPath::new(drop_path),
            })
            .collect();
        Self {
            patch_embeddings,
            blocks,
            layer_norm: layer_norm(hidden, device),
        }
    }

    /// # Shapes
    /// - input: `[batch, in_channels, H, W]`
    /// - output: `[batch, hidden, h, w]` (h, w: the patch embedding's output size)
    fn forward(&self, x: Tensor<B, 4>, c: Compute) -> Tensor<B, 4> {
        let (mut x, h, w) = self.patch_embeddings.forward(x, c);
        for block in &self.blocks {
            x = block.forward(x, h, w, c);
        }
        let x = ops::layer_norm(&self.layer_norm, x, c);
        let [batch, _, hidden] = x.dims();
        // [B, h*w, C] -> [B, C, h*w] -> [B, C, h, w]
        ops::transpose12(x, c).reshape([batch, hidden, h, w])
    }
}

/// The hierarchical encoder (`SegformerModel` / `SegformerEncoder`, `reshape_last_stage = true`).
#[derive(Module, Debug)]
pub(crate) struct Encoder<B: Backend> {
    pub stages: Vec<Stage<B>>,
}

impl<B: Backend> Encoder<B> {
    pub(crate) fn new(config: &SegformerConfig, device: &B::Device) -> Self {
        let rates = config.drop_path_rates();
        let stages = (0..config.num_encoder_blocks)
            .map(|i| Stage::new(config, i, &rates[i], device))
            .collect();
        Self { stages }
    }

    /// # Shapes
    /// - input: `[batch, num_channels, H, W]`
    /// - output: one `[batch, hidden_sizes[i], H_i, W_i]` map per stage (`H_i ≈ H / (4·2^i)`)
    pub(crate) fn forward(&self, pixel_values: Tensor<B, 4>, c: Compute) -> Vec<Tensor<B, 4>> {
        let mut x = pixel_values;
        let mut hidden_states = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            x = stage.forward(x, c);
            hidden_states.push(x.clone());
        }
        hidden_states
    }
}
