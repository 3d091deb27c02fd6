//! Checkpoint key names: a walk over every tensor of the model under its transformers ≥ 5
//! name, and the translation to and from SegFormer's original names.

use burn::module::{Param, RunningState};
use burn::nn::conv::Conv2d;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::batch_norm::BatchNorm2d;
use crate::model::Segformer;

/// Receives every tensor of the model under its 5.x state-dict key.
pub(crate) trait TensorVisitor<B: Backend> {
    /// A trainable parameter; `transposed` is true for linear weights, which burn stores
    /// `[in, out]` and PyTorch `[out, in]`.
    fn param<const D: usize>(
        &mut self,
        key: &str,
        param: &mut Param<Tensor<B, D>>,
        transposed: bool,
    );
    /// A BatchNorm running statistic.
    fn buffer(&mut self, key: &str, state: &mut RunningState<Tensor<B, 1>>);
}

fn linear<B: Backend, V: TensorVisitor<B>>(v: &mut V, prefix: &str, m: &mut Linear<B>) {
    v.param(&format!("{prefix}.weight"), &mut m.weight, true);
    if let Some(bias) = &mut m.bias {
        v.param(&format!("{prefix}.bias"), bias, false);
    }
}

fn conv<B: Backend, V: TensorVisitor<B>>(v: &mut V, prefix: &str, m: &mut Conv2d<B>) {
    v.param(&format!("{prefix}.weight"), &mut m.weight, false);
    if let Some(bias) = &mut m.bias {
        v.param(&format!("{prefix}.bias"), bias, false);
    }
}

fn layer_norm<B: Backend, V: TensorVisitor<B>>(v: &mut V, prefix: &str, m: &mut LayerNorm<B>) {
    v.param(&format!("{prefix}.weight"), &mut m.gamma, false);
    if let Some(beta) = &mut m.beta {
        v.param(&format!("{prefix}.bias"), beta, false);
    }
}

fn batch_norm<B: Backend, V: TensorVisitor<B>>(v: &mut V, prefix: &str, m: &mut BatchNorm2d<B>) {
    v.param(&format!("{prefix}.weight"), &mut m.gamma, false);
    v.param(&format!("{prefix}.bias"), &mut m.beta, false);
    v.buffer(&format!("{prefix}.running_mean"), &mut m.running_mean);
    v.buffer(&format!("{prefix}.running_var"), &mut m.running_var);
}

/// Visits every tensor of `model` in HF state-dict order.
pub(crate) fn walk<B: Backend, V: TensorVisitor<B>>(model: &mut Segformer<B>, v: &mut V) {
    for (i, stage) in model.segformer.stages.iter_mut().enumerate() {
        let s = format!("segformer.stages.{i}");
        conv(
            v,
            &format!("{s}.patch_embeddings.proj"),
            &mut stage.patch_embeddings.proj,
        );
        layer_norm(
            v,
            &format!("{s}.patch_embeddings.layer_norm"),
            &mut stage.patch_embeddings.layer_norm,
        );
        for (j, block) in stage.blocks.iter_mut().enumerate() {
            let b = format!("{s}.blocks.{j}");
            let attn = &mut block.attention;
            linear(v, &format!("{b}.attention.q_proj"), &mut attn.q_proj);
            linear(v, &format!("{b}.attention.k_proj"), &mut attn.k_proj);
            linear(v, &format!("{b}.attention.v_proj"), &mut attn.v_proj);
            if let Some(sr) = &mut attn.sequence_reduction {
                let r = format!("{b}.attention.sequence_reduction");
                conv(
                    v,
                    &format!("{r}.sequence_reduction"),
                    &mut sr.sequence_reduction,
                );
                layer_norm(v, &format!("{r}.layer_norm"), &mut sr.layer_norm);
            }
            linear(v, &format!("{b}.attention.o_proj"), &mut attn.o_proj);
            layer_norm(
                v,
                &format!("{b}.layernorm_before"),
                &mut block.layernorm_before,
            );
            layer_norm(
                v,
                &format!("{b}.layernorm_after"),
                &mut block.layernorm_after,
            );
            linear(v, &format!("{b}.mlp.fc1"), &mut block.mlp.fc1);
            conv(
                v,
                &format!("{b}.mlp.dwconv.dwconv"),
                &mut block.mlp.dwconv.dwconv,
            );
            linear(v, &format!("{b}.mlp.fc2"), &mut block.mlp.fc2);
        }
        layer_norm(v, &format!("{s}.layer_norm"), &mut stage.layer_norm);
    }
    let head = &mut model.decode_head;
    for (i, p) in head.linear_projections.iter_mut().enumerate() {
        linear(
            v,
            &format!("decode_head.linear_projections.{i}.proj"),
            &mut p.proj,
        );
    }
    conv(v, "decode_head.linear_fuse", &mut head.linear_fuse);
    batch_norm(v, "decode_head.batch_norm", &mut head.batch_norm);
    conv(v, "decode_head.classifier", &mut head.classifier);
}

/// Renames that hold anywhere in a key, original name first (make_fixtures.py's LEGACY table).
const RENAMES: [(&str, &str); 11] = [
    ("attention.self.query", "attention.q_proj"),
    ("attention.self.key", "attention.k_proj"),
    ("attention.self.value", "attention.v_proj"),
    (
        "attention.self.sr",
        "attention.sequence_reduction.sequence_reduction",
    ),
    (
        "attention.self.layer_norm",
        "attention.sequence_reduction.layer_norm",
    ),
    ("attention.output.dense", "attention.o_proj"),
    ("mlp.dense1", "mlp.fc1"),
    ("mlp.dense2", "mlp.fc2"),
    ("layer_norm_1", "layernorm_before"),
    ("layer_norm_2", "layernorm_after"),
    ("decode_head.linear_c.", "decode_head.linear_projections."),
];

/// Stage-indexed prefixes: `(original, 5.x)`, with the stage index following each.
const STAGE_PREFIXES: [(&str, &str); 3] = [
    ("encoder.patch_embeddings.", "patch_embeddings."),
    ("encoder.block.", "blocks."),
    ("encoder.layer_norm.", "layer_norm."),
];

/// Maps a checkpoint key of either naming scheme to the 5.x name. Keys of a bare
/// `SegformerModel` (`encoder.…`) gain the `segformer.` prefix.
pub(crate) fn to_current(key: &str) -> String {
    let mut key = key.to_string();
    if key.starts_with("encoder.") {
        key = format!("segformer.{key}");
    }
    for (old, new) in STAGE_PREFIXES {
        let old = format!("segformer.{old}");
        if let Some(rest) = key.strip_prefix(&old)
            && let Some((stage, tail)) = rest.split_once('.').or(Some((rest, "")))
            && stage.parse::<usize>().is_ok()
        {
            // `encoder.layer_norm.0.weight` -> `stages.0.layer_norm.weight`
            let tail = if tail.is_empty() {
                String::new()
            } else {
                format!(".{tail}")
            };
            let new = new.trim_end_matches('.');
            key = format!("segformer.stages.{stage}.{new}{tail}");
            break;
        }
    }
    for (old, new) in RENAMES {
        key = key.replace(old, new);
    }
    key
}

/// Maps a 5.x key to SegFormer's original name (what every Hub checkpoint uses).
pub(crate) fn to_original(key: &str) -> String {
    let mut key = key.to_string();
    if let Some(rest) = key.strip_prefix("segformer.stages.")
        && let Some((stage, tail)) = rest.split_once('.')
    {
        for (old, new) in STAGE_PREFIXES {
            let new = new.trim_end_matches('.');
            if let Some(after) = tail.strip_prefix(new)
                && (after.is_empty() || after.starts_with('.'))
            {
                let old = old.trim_end_matches('.');
                key = format!("segformer.{old}.{stage}{after}");
                break;
            }
        }
    }
    for (old, new) in RENAMES {
        key = key.replace(new, old);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs from make_fixtures.py's LEGACY table applied by hand.
    const PAIRS: [(&str, &str); 8] = [
        (
            "segformer.encoder.block.0.0.attention.self.query.weight",
            "segformer.stages.0.blocks.0.attention.q_proj.weight",
        ),
        (
            "segformer.encoder.block.1.2.attention.self.sr.bias",
            "segformer.stages.1.blocks.2.attention.sequence_reduction.sequence_reduction.bias",
        ),
        (
            "segformer.encoder.block.1.2.attention.self.layer_norm.weight",
            "segformer.stages.1.blocks.2.attention.sequence_reduction.layer_norm.weight",
        ),
        (
            "segformer.encoder.block.3.0.attention.output.dense.weight",
            "segformer.stages.3.blocks.0.attention.o_proj.weight",
        ),
        (
            "segformer.encoder.block.2.1.layer_norm_2.bias",
            "segformer.stages.2.blocks.1.layernorm_after.bias",
        ),
        (
            "segformer.encoder.patch_embeddings.0.proj.weight",
            "segformer.stages.0.patch_embeddings.proj.weight",
        ),
        (
            "segformer.encoder.layer_norm.3.weight",
            "segformer.stages.3.layer_norm.weight",
        ),
        (
            "decode_head.linear_c.2.proj.bias",
            "decode_head.linear_projections.2.proj.bias",
        ),
    ];

    #[test]
    fn original_and_current_names_map_both_ways() {
        for (original, current) in PAIRS {
            assert_eq!(to_current(original), current);
            assert_eq!(to_original(current), original);
            assert_eq!(to_current(current), current, "5.x names are left alone");
        }
        assert_eq!(
            to_current("encoder.block.0.1.mlp.dense1.weight"),
            "segformer.stages.0.blocks.1.mlp.fc1.weight"
        );
        assert_eq!(to_current("classifier.weight"), "classifier.weight");
    }
}
