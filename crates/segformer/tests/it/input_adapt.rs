//! Pretrained RGB encoders for other band counts: the adapted first kernel equals the rule
//! applied to the fixture's own RGB kernel (read here with the `safetensors` crate), and
//! everything else loads unchanged.

use burn::backend::Flex;
use burn::tensor::TensorData;
use segformer::{InputAdapt, SegformerConfig, hf_state_dict, load_pretrained_adapted};

const KERNEL: &str = "segformer.stages.0.patch_embeddings.proj.weight";

/// The fixture's RGB kernel `[O, 3, k, k]` as `w[o][band][pixel]`.
fn rgb_kernel(dir: &std::path::Path) -> (Vec<Vec<Vec<f32>>>, Vec<usize>) {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let view = file.tensor(KERNEL).unwrap();
    let shape = view.shape().to_vec();
    let values: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let (o, i, plane) = (shape[0], shape[1], shape[2] * shape[3]);
    let w = (0..o)
        .map(|a| {
            (0..i)
                .map(|b| values[(a * i + b) * plane..(a * i + b + 1) * plane].to_vec())
                .collect()
        })
        .collect();
    (w, shape)
}

fn model_tensor(model: &segformer::Segformer<Flex>, key: &str) -> TensorData {
    hf_state_dict(model)
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap()
        .1
}

#[test]
#[allow(clippy::needless_range_loop)] // index loops read like the rules
fn adapted_kernels_follow_each_rule_on_the_fixture() {
    let dir = testkit::fixture("segformer-tiny");
    let (rgb, shape) = rgb_kernel(&dir);
    let base = segformer::read_config(&dir).unwrap();
    for bands in [1usize, 2, 4, 13] {
        for rule in [InputAdapt::Repeat, InputAdapt::Mean, InputAdapt::Random] {
            let config = base.clone().with_num_channels(bands);
            let (model, report) =
                load_pretrained_adapted::<Flex>(&dir, &config, rule, &Default::default()).unwrap();
            // The report names the tensor and the rule.
            assert_eq!(report.adapted.len(), 1);
            assert_eq!(report.adapted[0].key, KERNEL);
            assert_eq!(report.adapted[0].rule, rule);
            let text = report.to_string();
            assert!(
                text.contains(KERNEL) && text.contains(rule.name()),
                "{text}"
            );
            assert!(report.initialized.is_empty() && report.mismatched.is_empty());

            let got = model_tensor(&model, KERNEL);
            assert_eq!(
                got.shape.to_vec(),
                vec![shape[0], bands, shape[2], shape[3]]
            );
            let got: Vec<f32> = got.into_vec().unwrap();
            if rule == InputAdapt::Random {
                assert!(!report.loaded.iter().any(|k| k == KERNEL));
                continue;
            }
            let scale = 3.0 / bands as f32;
            let mut want = Vec::new();
            for o in &rgb {
                for j in 0..bands {
                    for p in 0..o[0].len() {
                        let sum = o[0][p] + o[1][p] + o[2][p];
                        want.push(match rule {
                            InputAdapt::Repeat if bands == 1 => sum,
                            InputAdapt::Repeat => o[j % 3][p] * scale,
                            _ => sum / 3.0 * scale,
                        });
                    }
                }
            }
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-7, "{rule:?} {bands} bands: off by {worst}");
        }
    }
}

#[test]
fn other_tensors_load_as_with_three_bands() {
    let dir = testkit::fixture("segformer-tiny");
    let device = Default::default();
    let (rgb, _) = segformer::load_hf_dir::<Flex>(&dir, &device).unwrap();
    let config = segformer::read_config(&dir).unwrap().with_num_channels(4);
    let (four, report) =
        load_pretrained_adapted::<Flex>(&dir, &config, InputAdapt::Repeat, &device).unwrap();
    assert!(report.unused.is_empty());
    for ((k, a), (_, b)) in hf_state_dict(&rgb).into_iter().zip(hf_state_dict(&four)) {
        if k != KERNEL {
            assert_eq!(a.as_bytes(), b.as_bytes(), "{k}");
        }
    }
    // A three-band model loads exactly, with nothing adapted.
    let (_, report) =
        segformer::load_pretrained::<Flex>(&dir, &segformer::read_config(&dir).unwrap(), &device)
            .unwrap();
    assert!(report.adapted.is_empty() && report.is_exact());
}

#[testkit::needs_fixtures]
#[test]
fn mit_b0_encoder_adapts_to_sentinel2_bands() {
    // The real ImageNet encoder (pytorch_model.bin), 13 bands: the 3-band kernel as our
    // (parity-tested) loader reads it, cycled and scaled by 3/13.
    let dir = testkit::fixture("mit-b0-encoder");
    let device = Default::default();
    let names: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
    let rgb_config = SegformerConfig::mit_b0().with_labels(names.clone());
    let (rgb, _) = segformer::load_pretrained::<Flex>(&dir, &rgb_config, &device).unwrap();
    let rgb: Vec<f32> = model_tensor(&rgb, KERNEL).into_vec().unwrap();
    let config = rgb_config.with_num_channels(13);
    let (model, report) = segformer::load_pretrained::<Flex>(&dir, &config, &device).unwrap();
    assert_eq!(report.adapted[0].rule, InputAdapt::Repeat);
    let got: Vec<f32> = model_tensor(&model, KERNEL).into_vec().unwrap();
    let plane = 49;
    for o in 0..32 {
        for j in 0..13 {
            for p in 0..plane {
                let want = rgb[(o * 3 + j % 3) * plane + p] * (3.0 / 13.0);
                let got = got[(o * 13 + j) * plane + p];
                assert!((got - want).abs() <= 1e-7 * want.abs(), "{got} vs {want}");
            }
        }
    }
}
