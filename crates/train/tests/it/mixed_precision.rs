//! Mixed precision: reduced-precision gradients stay close to f32, an f16 overflow makes the
//! scaler skip the step and halve the scale, and bf16 training learns.

use std::collections::HashMap;

use burn::backend::{Autodiff, Flex};
use burn::optim::GradientsParams;
use burn::tensor::{FloatDType, Int, Tensor, TensorData};
use safetensors::SafeTensors;
use segformer::Segformer;
use train::{AdamW, AdamWConfig, GradScaler, RunOptions, TrainConfig};

use crate::common::alone;

type B = Autodiff<Flex>;

fn fixture() -> (Segformer<B>, Tensor<B, 4>, Tensor<B, 3, Int>) {
    let dir = testkit::fixture("segformer-tiny");
    let bytes = std::fs::read(dir.join("expected.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<B>(&dir, &device).unwrap();
    let px = st.tensor("pixel_values").unwrap();
    let x: Vec<f32> = px
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let x = Tensor::from_data(TensorData::new(x, px.shape().to_vec()), &device);
    let lb = st.tensor("labels").unwrap();
    let y: Vec<i64> = lb
        .data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let y = Tensor::from_data(TensorData::new(y, lb.shape().to_vec()), &device);
    (model, x, y)
}

fn grads(
    model: &Segformer<B>,
    x: Tensor<B, 4>,
    y: Tensor<B, 3, Int>,
    scale: f64,
) -> HashMap<String, Vec<f32>> {
    let loss = model.loss(model.forward(x), y).mul_scalar(scale);
    let g = loss.backward();
    segformer::hf_gradients(model, &g)
        .into_iter()
        .map(|(k, d)| {
            (
                k,
                d.convert::<f32>()
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| (*v as f64 / scale) as f32)
                    .collect(),
            )
        })
        .collect()
}

fn rel(a: &[f32], b: &[f32]) -> f64 {
    let n: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let d: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (n / d.max(1e-30)).sqrt()
}

#[test]
fn reduced_precision_gradients_are_close_to_f32() {
    let (model, x, y) = fixture();
    let reference = grads(&model, x.clone(), y.clone(), 1.0);
    for (dtype, scale) in [
        (FloatDType::BF16, 1.0),
        (FloatDType::F16, GradScaler::default().scale()),
    ] {
        let m = model.clone().with_compute_dtype(Some(dtype));
        let ours = grads(&m, x.clone(), y.clone(), scale);
        let (mut num, mut den, mut worst) = (0.0f64, 0.0f64, 0.0f64);
        for (k, want) in &reference {
            let max = want.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            if max < 1e-6 {
                continue; // provably zero gradients (see the AdamW fixture test)
            }
            let got = &ours[k];
            assert!(
                got.iter().all(|v| v.is_finite()),
                "{dtype:?} {k}: non-finite gradient"
            );
            num += got
                .iter()
                .zip(want)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum::<f64>();
            den += want.iter().map(|b| (*b as f64).powi(2)).sum::<f64>();
            worst = worst.max(rel(got, want));
        }
        let overall = (num / den).sqrt();
        eprintln!(
            "{dtype:?}: overall gradient relative error {overall:.2e}, worst tensor {worst:.2e}"
        );
        assert!(overall < 0.05, "{dtype:?}: overall {overall}");
        assert!(worst < 0.2, "{dtype:?}: worst tensor {worst}");
    }
}

#[test]
fn planted_f16_overflow_skips_the_step_and_halves_the_scale() {
    let (model, x, y) = fixture();
    let model = model.with_compute_dtype(Some(FloatDType::F16));
    let before = segformer::hf_state_dict(&model);
    let mut scaler = GradScaler::default();
    // A loss scale far beyond f16's range (65504) overflows the half-precision backward.
    let loss = model.loss(model.forward(x), y).mul_scalar(1e30);
    let gp = GradientsParams::from_grads(loss.backward(), &model);
    let mut opt = AdamW::<B>::new(AdamWConfig::default());
    let (model, stats) = opt.step(1e-3, model, gp, 1.0 / scaler.scale());
    assert!(
        !stats.applied,
        "overflowed gradients must not be applied (norm {})",
        stats.grad_norm
    );
    assert!(!scaler.update(stats.applied));
    assert_eq!(scaler.scale(), 32768.0);
    assert_eq!(scaler.skipped(), 1);
    let after = segformer::hf_state_dict(&model);
    for ((k, a), (_, b)) in before.iter().zip(&after) {
        if k.contains("running_") || k.contains("num_batches") {
            continue; // buffers move in the forward pass, as in PyTorch; parameters must not
        }
        assert_eq!(a.as_bytes(), b.as_bytes(), "{k} changed by a skipped step");
    }
}

#[test]
fn bf16_training_reduces_the_loss() {
    alone!(bf16_training_reduces_the_loss);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    tiles::prepare_synthetic(&tiles::SyntheticOptions {
        count: 24,
        size: 64,
        seed: 9,
        out: root.clone(),
        ..Default::default()
    })
    .unwrap();
    let text = format!(
        "[model]\npreset = \"mit-tiny\"\n[data]\nroot = {:?}\nsize = [64, 64]\n[optimizer]\nlr = 2e-3\nhead_lr_mult = 10.0\n\
         [train]\nprogress = false\nepochs = 4\nbatch_size = 4\nprecision = \"bf16\"\nlog_every = 1\n",
        root.to_str().unwrap()
    );
    let cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
    let run = tmp.path().join("run");
    train::train::<B>(&cfg, &RunOptions::new(run.clone()), &Default::default()).unwrap();
    let losses: Vec<f64> = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "epoch")
        .map(|v| v["train_loss"].as_f64().unwrap())
        .collect();
    eprintln!("bf16 epoch train losses {losses:?}");
    assert_eq!(losses.len(), 4);
    assert!(losses[3] < losses[0] * 0.8, "{losses:?}");
}
