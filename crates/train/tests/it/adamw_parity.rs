//! One AdamW step on the segformer-tiny fixture against `torch.optim.AdamW` (transformers 5.24,
//! torch 2.15): every parameter within 1e-5 relative.

use std::collections::HashMap;

use burn::backend::{Autodiff, Flex};
use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor, TensorData};
use safetensors::SafeTensors;
use train::{AdamW, AdamWConfig};

type B = Autodiff<Flex>;

fn read(st: &SafeTensors, name: &str) -> (Vec<f32>, Vec<usize>) {
    let v = st
        .tensor(name)
        .unwrap_or_else(|e| panic!("fixture tensor {name}: {e}"));
    let data = match v.dtype() {
        safetensors::Dtype::F32 => v
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        safetensors::Dtype::I64 => v
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
            .collect(),
        d => panic!("unexpected dtype {d:?}"),
    };
    (data, v.shape().to_vec())
}

fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt()
}

#[test]
fn one_adamw_step_matches_torch() {
    let dir = testkit::fixture("segformer-tiny");
    let bytes = std::fs::read(dir.join("expected.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    let a = &case["adamw"];

    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<B>(&dir, &device).unwrap();
    let (px, px_shape) = read(&st, "pixel_values");
    let (labels, l_shape) = read(&st, "labels");
    let x = Tensor::<B, 4>::from_data(TensorData::new(px, px_shape), &device);
    let labels: Vec<i64> = labels.iter().map(|&v| v as i64).collect();
    let y = Tensor::<B, 3, Int>::from_data(TensorData::new(labels, l_shape), &device);

    let loss = model.loss(model.forward(x), y);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let cfg = AdamWConfig {
        lr: a["lr"].as_f64().unwrap(),
        betas: (
            a["betas"][0].as_f64().unwrap(),
            a["betas"][1].as_f64().unwrap(),
        ),
        eps: a["eps"].as_f64().unwrap(),
        weight_decay: a["weight_decay"].as_f64().unwrap(),
        ..Default::default()
    };
    let lr = cfg.lr;
    let mut opt = AdamW::<B>::new(cfg);
    let (model, stats) = opt.step(lr, model, grads, 1.0);
    assert!(stats.applied);

    let ours: HashMap<String, TensorData> = segformer::hf_state_dict(&model).into_iter().collect();
    let mut checked = 0;
    let mut noise_only = 0;
    let mut worst = (0.0f64, String::new());
    for name in st.names() {
        let Some(key) = name.strip_prefix("adamw_step1.") else {
            continue;
        };
        let (want, shape) = read(&st, name);
        let got = ours
            .get(key)
            .unwrap_or_else(|| panic!("model has no parameter {key}"));
        assert_eq!(got.shape.to_vec(), shape, "{key}");
        let got: Vec<f32> = got.clone().convert::<f32>().to_vec().unwrap();
        let (grad, _) = read(&st, &format!("grad.{key}"));
        if grad.iter().all(|g| g.abs() < 1e-7) {
            // NOTE: some parameters have a true gradient of exactly 0 and torch's is rounding
            // noise (1e-13..1e-9): the decode head's projection biases and the last stage's
            // LayerNorm bias feed a train-mode BatchNorm, which removes per-channel constants, and
            // key biases shift every attention logit of a query equally, which softmax ignores. AdamW turns noise of that size into lr·g/(|g|+eps), a step that no
            // implementation reproduces. Check what is determined: the step stays below lr.
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    ((g - w).abs() as f64) <= lr,
                    "{key}: |{g} - {w}| > lr for a zero-gradient parameter"
                );
            }
            noise_only += 1;
            checked += 1;
            continue;
        }
        let e = rel_err(&got, &want);
        if e > worst.0 {
            worst = (e, key.to_string());
        }
        assert!(e <= 1e-5, "{key}: relative error {e:.2e} > 1e-5");
        checked += 1;
    }
    assert_eq!(checked, 121, "every parameter of the fixture is compared");
    // 4 projection biases + 4 key biases + stage-4 LayerNorm bias
    assert_eq!(
        noise_only, 9,
        "only the provably zero-gradient parameters are exempt"
    );
    eprintln!("worst relative error {:.2e} at {}", worst.0, worst.1);
}
