//! bf16 compute (`with_compute_dtype`) stays close to f32 on the tiny fixture.

use std::collections::HashMap;

use burn::backend::{Autodiff, Flex};
use burn::tensor::{FloatDType, Int, Tensor, TensorData};

use crate::common;

type Train = Autodiff<Flex>;

fn logits(dtype: Option<FloatDType>) -> (TensorData, TensorData) {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<Flex>(&dir, &device).unwrap();
    let model = model.with_compute_dtype(dtype);
    let exp = common::expected(&dir);
    let pixels = Tensor::<Flex, 4>::from_data(exp["pixel_values"].clone(), &device);
    let out = model.forward(pixels);
    assert_eq!(
        out.dtype(),
        burn::tensor::DType::F32,
        "results come back in f32"
    );
    (out.into_data(), exp["eval.logits"].clone())
}

fn gradients(dtype: Option<FloatDType>) -> HashMap<String, TensorData> {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<Train>(&dir, &device).unwrap();
    let model = model.with_compute_dtype(dtype);
    assert_eq!(model.compute_dtype(), dtype);
    let exp = common::expected(&dir);
    let pixels = Tensor::<Train, 4>::from_data(exp["pixel_values"].clone(), &device);
    let labels = Tensor::<Train, 3, Int>::from_data(exp["labels"].clone(), &device);
    let loss = model.loss(model.forward(pixels), labels);
    let grads = loss.backward();
    segformer::hf_gradients(&model, &grads)
        .into_iter()
        .collect()
}

#[test]
fn bf16_logits_are_close_to_f32() {
    let (bf16, reference) = logits(Some(FloatDType::BF16));
    let (f32_out, _) = logits(None);
    let err = common::rel_err("bf16 logits", &bf16, &reference);
    eprintln!("bf16 logits relative error vs HF f32: {err:.3e}");
    assert!(err < 3e-2, "bf16 logits relative error {err:.3e}");
    if segformer::cpu_has_bf16_kernels() {
        assert!(err > 1e-6, "bf16 should actually round (error {err:.3e})");
    } else {
        // Without AVX512-BF16 the bf16 request computes in f32 (model.rs), so the result
        // is the f32 one: as close to HF as f32 is.
        eprintln!("this CPU has no bf16 kernels: the bf16 request ran in f32");
        common::assert_close("bf16 logits (run in f32)", &bf16, &f32_out, common::EVAL);
    }
    common::assert_close("f32 logits", &f32_out, &reference, common::EVAL);
}

#[test]
fn bf16_gradients_are_close_to_f32() {
    let full = gradients(None);
    let half = gradients(Some(FloatDType::BF16));
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (key, g) in &full {
        assert_eq!(
            half[key].dtype,
            burn::tensor::DType::F32,
            "{key}: gradients stay f32"
        );
        let a = half[key].to_vec::<f32>().unwrap();
        let b = g.to_vec::<f32>().unwrap();
        for (x, y) in a.iter().zip(&b) {
            diff += (*x as f64 - *y as f64).powi(2);
            norm += (*y as f64).powi(2);
        }
    }
    let err = (diff / norm).sqrt();
    eprintln!("bf16 gradient relative error (all parameters): {err:.3e}");
    assert!(err < 5e-2, "bf16 gradients relative error {err:.3e}");
    for key in [
        "segformer.stages.0.patch_embeddings.proj.weight",
        "decode_head.classifier.weight",
    ] {
        let e = common::rel_err(key, &half[key], &full[key]);
        eprintln!("{key}: {e:.3e}");
        // The first conv's gradient sums bf16 products over every output pixel, so it
        // drifts most (bf16 keeps 8 mantissa bits, eps 7.8e-3).
        assert!(e < 1.5e-1, "{key}: bf16 gradient relative error {e:.3e}");
    }
}
