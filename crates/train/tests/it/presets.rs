//! The MiT presets B0–B5: each builds, runs one forward pass with the right output shape, and
//! has the parameter count of its architecture, computed here from the formula of HF's
//! `modeling_segformer.py` with the hyper-parameters of HF's `nvidia/mit-b*` configs, which
//! also matches the SegFormer paper's published totals.

use burn::backend::Flex;
use burn::module::Module;
use burn::tensor::{Distribution, Tensor};

/// One preset as HF's `config.json` of `nvidia/mit-bN` describes it, with the paper's total
/// parameter count (millions, ADE20K's 150 classes; Xie et al. 2021, Table 2).
struct Arch {
    name: &'static str,
    hidden_sizes: [usize; 4],
    depths: [usize; 4],
    decoder_hidden_size: usize,
    paper_millions: f64,
}

const HEADS: [usize; 4] = [1, 2, 5, 8];
const SR_RATIOS: [usize; 4] = [8, 4, 2, 1];
const PATCH_SIZES: [usize; 4] = [7, 3, 3, 3];
const STRIDES: [usize; 4] = [4, 2, 2, 2];
const MLP_RATIO: usize = 4;

const ARCHS: [Arch; 6] = [
    Arch {
        name: "mit-b0",
        hidden_sizes: [32, 64, 160, 256],
        depths: [2, 2, 2, 2],
        decoder_hidden_size: 256,
        paper_millions: 3.8,
    },
    Arch {
        name: "mit-b1",
        hidden_sizes: [64, 128, 320, 512],
        depths: [2, 2, 2, 2],
        decoder_hidden_size: 256,
        paper_millions: 13.7,
    },
    Arch {
        name: "mit-b2",
        hidden_sizes: [64, 128, 320, 512],
        depths: [3, 4, 6, 3],
        decoder_hidden_size: 768,
        paper_millions: 27.5,
    },
    Arch {
        name: "mit-b3",
        hidden_sizes: [64, 128, 320, 512],
        depths: [3, 4, 18, 3],
        decoder_hidden_size: 768,
        paper_millions: 47.3,
    },
    Arch {
        name: "mit-b4",
        hidden_sizes: [64, 128, 320, 512],
        depths: [3, 8, 27, 3],
        decoder_hidden_size: 768,
        paper_millions: 64.1,
    },
    Arch {
        name: "mit-b5",
        hidden_sizes: [64, 128, 320, 512],
        depths: [3, 6, 40, 3],
        decoder_hidden_size: 768,
        paper_millions: 84.7,
    },
];

/// Trainable parameters of `SegformerForSemanticSegmentation` with `channels` input bands and
/// `labels` classes (BatchNorm's running statistics are buffers, not parameters).
fn parameter_count(a: &Arch, channels: usize, labels: usize) -> usize {
    let linear = |i: usize, o: usize| i * o + o;
    let layer_norm = |c: usize| 2 * c;
    let mut n = 0;
    let mut c_in = channels;
    for s in 0..4 {
        let (c, k, r) = (a.hidden_sizes[s], PATCH_SIZES[s], SR_RATIOS[s]);
        // Overlapping patch embedding: a k×k convolution with bias, then LayerNorm.
        n += c_in * c * k * k + c + layer_norm(c);
        let hidden = MLP_RATIO * c;
        let block = layer_norm(c)
            + 3 * linear(c, c) // query, key, value
            + if r > 1 { c * c * r * r + c + layer_norm(c) } else { 0 } // sequence reduction
            + linear(c, c) // attention output
            + layer_norm(c)
            + linear(c, hidden) // Mix-FFN dense1
            + hidden * 9 + hidden // 3×3 depthwise convolution with bias
            + linear(hidden, c); // dense2
        n += a.depths[s] * block + layer_norm(c); // blocks, then the stage's LayerNorm
        c_in = c;
    }
    let d = a.decoder_hidden_size;
    n += a.hidden_sizes.iter().map(|&c| linear(c, d)).sum::<usize>(); // linear_c
    n += 4 * d * d; // linear_fuse: 1×1 convolution without bias
    n += 2 * d; // BatchNorm weight and bias
    n += linear(d, labels); // classifier
    n
}

#[test]
fn presets_match_their_architecture_and_run_forward() {
    let device = Default::default();
    for a in &ARCHS {
        let config = train::preset(a.name).unwrap();
        assert_eq!(
            (
                config.hidden_sizes.as_slice(),
                config.depths.as_slice(),
                config.num_attention_heads.as_slice(),
                config.sr_ratios.as_slice(),
                config.patch_sizes.as_slice(),
                config.strides.as_slice(),
                config.decoder_hidden_size,
            ),
            (
                a.hidden_sizes.as_slice(),
                a.depths.as_slice(),
                HEADS.as_slice(),
                SR_RATIOS.as_slice(),
                PATCH_SIZES.as_slice(),
                STRIDES.as_slice(),
                a.decoder_hidden_size,
            ),
            "{}",
            a.name
        );
        assert!(
            config.mlp_ratios.iter().all(|&m| m == MLP_RATIO),
            "{}",
            a.name
        );

        let model = config.with_num_labels(150).init::<Flex>(&device).unwrap();
        // HF's `sum(p.numel() for p in model.parameters())`: every exported tensor but
        // BatchNorm's buffers.
        let got: usize = segformer::hf_state_dict(&model)
            .iter()
            .filter(|(k, _)| !k.contains("running_") && !k.contains("num_batches"))
            .map(|(_, d)| d.shape.num_elements())
            .sum();
        let want = parameter_count(a, 3, 150);
        // burn's count also includes the two running statistics (`RunningState`) of the
        // decode head's BatchNorm.
        assert_eq!(
            model.num_params(),
            want + 2 * a.decoder_hidden_size,
            "{}: burn's num_params",
            a.name
        );
        let millions = want as f64 / 1e6;
        eprintln!(
            "{}: {got} parameters (formula {want}, paper {} M)",
            a.name, a.paper_millions
        );
        assert_eq!(got, want, "{}: parameter count", a.name);
        assert!(
            (millions - a.paper_millions).abs() <= 0.05,
            "{}: {millions:.3} M vs the paper's {} M",
            a.name,
            a.paper_millions
        );

        let x = Tensor::<Flex, 4>::random([1, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
        let logits = model.forward(x);
        assert_eq!(logits.dims(), [1, 150, 16, 16], "{}: logits shape", a.name);
        let values = logits.into_data().to_vec::<f32>().unwrap();
        assert!(
            values.iter().all(|v| v.is_finite()),
            "{}: non-finite logits",
            a.name
        );
    }
}
