//! Each fused op against its composition from burn ops: outputs and the gradients of every
//! input, on `Autodiff<Flex>` (plain and with activation checkpointing) and on `Flex`.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::module::{Param, ParamId};
use burn::nn::conv::Conv2d;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor};
use kernels::gemm;

use super::*;
use crate::batch_norm::BatchNorm2d;
use crate::compute::{Activation, Compute, KernelPath, Kernels, Route};
use crate::layers::{ConvSpec, conv2d, layer_norm as new_layer_norm, linear as new_linear};
use crate::ops::{attention_composed, decode_tail_composed, dwconv3x3_act_composed};
use crate::test_support::{assert_close, forward_backward, random};

type A = Autodiff<Flex>;
type AC = Autodiff<Flex, BalancedCheckpointing>;

/// A parameter that stays attached to the graph its tensor came from.
fn attached<B: Backend, const D: usize>(t: Tensor<B, D>) -> Param<Tensor<B, D>> {
    Param::initialized(ParamId::new(), t)
}

#[test]
fn transpose_matches_swap_dims() {
    let x = random::<A, 3>([2, 37, 45], 1);
    let (fo, fg) = forward_backward(&[x.clone()], |t| transpose12(&t[0]).unwrap());
    let (go, gg) = forward_backward(&[x], |t| t[0].clone().swap_dims(1, 2));
    assert_eq!(
        fo.to_data().as_slice::<f32>().unwrap(),
        go.to_data().as_slice::<f32>().unwrap()
    );
    assert_close("dx", fg[0].clone(), gg[0].clone(), 0.0);
}

/// A 24 → 40 linear layer with a bias, and an input for it.
fn linear_case() -> (Linear<A>, Tensor<A, 3>) {
    let device = Default::default();
    let mut layer: Linear<A> = new_linear(24, 40, 0.5, &device);
    layer.bias = Some(Param::from_tensor(random([40], 3)));
    (layer, random::<A, 3>([3, 50, 24], 2))
}

/// `f(layer, x)` and the gradients of x, the weight and the bias (the layer rebuilt from the
/// tracked tensors).
fn linear_run(
    layer: &Linear<A>,
    x: &Tensor<A, 3>,
    f: impl Fn(&Linear<A>, &Tensor<A, 3>) -> Tensor<A, 3>,
) -> (Tensor<Flex, 3>, Vec<Tensor<Flex, 3>>) {
    let w = layer.weight.val();
    let b = layer.bias.as_ref().unwrap().val();
    forward_backward::<A, 3, 3>(
        &[x.clone(), w.unsqueeze(), b.unsqueeze::<2>().unsqueeze()],
        |t| {
            let l = Linear {
                weight: attached(t[1].clone().squeeze_dim(0)),
                bias: Some(attached(t[2].clone().squeeze_dim::<2>(0).squeeze_dim(0))),
            };
            f(&l, &t[0])
        },
    )
}

/// The fused linear against burn's, values and gradients, with the weight contiguous and as
/// loaded from a PyTorch `[out, in]` checkpoint: a transposed view of its storage.
#[test]
fn linear_matches_burn_linear() {
    let _rng = crate::test_support::rng_lock();
    let (mut layer, x) = linear_case();
    let torch_layout = layer.weight.val().transpose().to_data();
    let view = Tensor::<A, 2>::from_data(torch_layout, &Default::default()).transpose();
    assert!(!crate::compute::primitive(view.clone().inner()).is_contiguous());
    for weight in ["contiguous", "transposed view"] {
        if weight == "transposed view" {
            layer.weight = Param::from_tensor(view.clone());
        }
        let (fo, fg) = linear_run(&layer, &x, |l, x| {
            linear(l, x, Precision::F32).expect("fused route")
        });
        let (go, gg) = linear_run(&layer, &x, |l, x| l.forward(x.clone()));
        assert_close(&format!("y, {weight}"), fo, go, 1e-5);
        for (i, (f, g)) in fg.into_iter().zip(gg).enumerate() {
            assert_close(&format!("grad {i}, {weight}"), f, g, 1e-5);
        }
    }
}

/// The bf16 products: the forward is f32 arithmetic on bf16-rounded operands (checked against
/// exactly that, computed by burn), and values and gradients stay within bf16 rounding of
/// autocast's composition (burn's bf16 linear, whose results are rounded to bf16 as well).
#[test]
fn bf16_linear_rounds_operands_and_sums_in_f32() {
    let _rng = crate::test_support::rng_lock();
    if !cpu::has_bf16() {
        eprintln!("skipped: this CPU has no AVX512-BF16");
        return;
    }
    use burn::tensor::FloatDType::BF16;
    let (layer, x) = linear_case();
    let (fo, fg) = linear_run(&layer, &x, |l, x| {
        linear(l, x, Precision::Bf16).expect("fused route")
    });
    // The reference rounds with `round_bf16` (to nearest even, tested on its own), not with
    // burn-flex's f32 → bf16 cast, which does not round every value to nearest: it takes
    // 0xbddc8006 (−0.107666) to 0xbddc (−0.107422) where nearest is 0xbddd (−0.107910), so
    // about one random weight draw in 40 made this test fail against it.
    let round = |t: Tensor<Flex, 2>| {
        let data = t.into_data();
        let shape = data.shape.clone();
        let values: Vec<f32> = data
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(gemm::round_bf16)
            .collect();
        Tensor::<Flex, 2>::from_data(
            burn::tensor::TensorData::new(values, shape),
            &Default::default(),
        )
    };
    let rounded = Linear::<Flex> {
        weight: Param::from_tensor(round(layer.weight.val().inner())),
        bias: layer
            .bias
            .as_ref()
            .map(|b| Param::from_tensor(b.val().inner())),
    };
    let x_rounded = round(x.clone().inner().reshape([150, 24])).reshape([3, 50, 24]);
    let exact = rounded.forward(x_rounded);
    assert_close("y vs f32 on rounded operands", fo.clone(), exact, 1e-6);
    let (f32o, _) = linear_run(&layer, &x, |l, x| l.forward(x.clone()));
    let e = crate::test_support::rel_err(fo.clone(), f32o);
    assert!(
        e > 1e-5,
        "the bf16 product should round its operands (error {e:e})"
    );
    let (ao, ag) = linear_run(&layer, &x, |l, x| {
        crate::ops::linear_autocast(l, x.clone(), BF16)
    });
    assert_close("y vs autocast", fo, ao, 1e-2);
    for (i, (f, a)) in fg.into_iter().zip(ag).enumerate() {
        assert_close(&format!("grad {i} vs autocast"), f, a, 2e-2);
    }
}

/// A bf16 model on a CPU without AVX512-BF16 computes exactly what the f32 model does; with
/// the instructions it rounds, within bf16's error.
#[test]
fn bf16_without_the_instructions_is_f32() {
    use burn::tensor::FloatDType::BF16;
    let device = Default::default();
    // Weights from a file: a randomly initialised model would draw from the backend's global
    // RNG, which tests running alongside seed and expect to be theirs.
    let dir = testkit::fixture("segformer-tiny");
    let (model, _) = crate::load_hf_dir::<Flex>(&dir, &device).unwrap();
    let channels = model.config().num_channels;
    let x = random::<Flex, 4>([1, channels, 64, 64], 21);
    let bits = |t: Tensor<Flex, 4>| t.into_data().to_vec::<f32>().unwrap();
    let f32_out = model.forward(x.clone());
    let fallback = cpu::without_bf16(|| {
        model
            .clone()
            .with_compute_dtype(Some(BF16))
            .forward(x.clone())
    });
    assert_eq!(bits(fallback), bits(f32_out.clone()));
    if cpu::has_bf16() {
        let model = model.with_compute_dtype(Some(BF16));
        let bf16 = model.clone().forward(x.clone());
        let e = crate::test_support::rel_err(bf16.clone(), f32_out);
        assert!(e > 1e-6 && e < 3e-2, "bf16 logits relative error {e:e}");
        // Not burn's composed autocast either (which rounds every result to bf16 too).
        let composed = model.with_kernels(Kernels::Recompute).forward(x);
        assert_ne!(bits(bf16), bits(composed), "bf16 took the composed path");
    }
}

/// Which products the fused path runs for each compute dtype and kernel choice.
#[test]
fn fused_products_follow_the_compute_dtype() {
    use burn::tensor::FloatDType::{BF16, F16};
    let device = Default::default();
    let c = |dtype, kernels| Compute { dtype, kernels };
    let products = |c| crate::ops::fused_products::<A>(c, &device);
    assert_eq!(products(c(None, Kernels::Auto)), Some(Precision::F32));
    let bf16 = if cpu::has_bf16() {
        Precision::Bf16
    } else {
        Precision::F32
    };
    assert_eq!(products(c(Some(BF16), Kernels::Auto)), Some(bf16));
    assert_eq!(products(c(Some(F16), Kernels::Auto)), None);
    assert_eq!(products(c(Some(BF16), Kernels::Recompute)), None);
    assert_eq!(products(c(None, Kernels::Composed)), None);
}

#[test]
fn layer_norm_matches_burn_layer_norm() {
    let device = Default::default();
    let mut norm: LayerNorm<A> = new_layer_norm(48, &device);
    norm.gamma = Param::from_tensor(random([48], 5));
    norm.beta = Some(Param::from_tensor(random([48], 6)));
    // Offset and scaled rows, as in a residual stream.
    let x = random::<A, 3>([2, 33, 48], 4) * 3.0 + 1.5;
    let run = |fused: bool| {
        let (g, b) = (norm.gamma.val(), norm.beta.as_ref().unwrap().val());
        forward_backward::<A, 3, 3>(&[x.clone(), g.unsqueeze(), b.unsqueeze()], |t| {
            let mut n = norm.clone();
            n.gamma = attached(t[1].clone().squeeze_dim::<2>(0).squeeze_dim(0));
            n.beta = Some(attached(t[2].clone().squeeze_dim::<2>(0).squeeze_dim(0)));
            if fused {
                layer_norm(&n, &t[0], 1e-5).expect("fused route")
            } else {
                n.forward(t[0].clone())
            }
        })
    };
    let (fo, fg) = run(true);
    let (go, gg) = run(false);
    assert_close("y", fo, go, 1e-5);
    for (i, (f, g)) in fg.into_iter().zip(gg).enumerate() {
        assert_close(&format!("grad {i}"), f, g, 1e-4);
    }
}

/// The fused attention in `precision` against the composition (in bf16 autocast for bf16,
/// within `tol` for the output and `grad_tol` for the gradients); returns the fused output.
fn attention_against<B: burn::tensor::backend::AutodiffBackend>(
    (heads, n, m): (usize, usize, usize),
    precision: Precision,
    (tol, grad_tol): (f32, f32),
) -> Tensor<B::InnerBackend, 3> {
    let q = random::<B, 3>([2, n, 8 * heads], 7);
    let k = random::<B, 3>([2, m, 8 * heads], 8) * 2.0;
    let v = random::<B, 3>([2, m, 8 * heads], 9);
    let inputs = [q, k, v];
    let (fo, fg) = forward_backward(&inputs, |t| {
        attention(&t[0], &t[1], &t[2], heads, precision).expect("fused route")
    });
    let dtype = (precision == Precision::Bf16).then_some(burn::tensor::FloatDType::BF16);
    let (go, gg) = forward_backward(&inputs, |t| {
        attention_composed(t[0].clone(), t[1].clone(), t[2].clone(), heads, dtype)
    });
    assert_close("out", fo.clone(), go, tol);
    for (name, (f, g)) in ["dq", "dk", "dv"].into_iter().zip(fg.into_iter().zip(gg)) {
        assert_close(name, f, g, grad_tol);
    }
    fo
}

fn attention_case<B: burn::tensor::backend::AutodiffBackend>(heads: usize, n: usize, m: usize) {
    attention_against::<B>((heads, n, m), Precision::F32, (1e-5, 1e-4));
}

/// bf16 products (keys and values packed once per head, queries per block) stay within bf16
/// rounding of autocast's composition, and do round: they differ from the f32 kernel.
#[test]
fn bf16_attention_matches_the_autocast_composition() {
    if !cpu::has_bf16() {
        eprintln!("skipped: this CPU has no AVX512-BF16");
        return;
    }
    let shape = (2, 700, 37);
    let bf16 = attention_against::<A>(shape, Precision::Bf16, (2e-2, 3e-2));
    let f32_out = attention_against::<A>(shape, Precision::F32, (1e-5, 1e-4));
    let e = crate::test_support::rel_err(bf16, f32_out);
    assert!(e > 1e-5, "the bf16 products should round (error {e:e})");
    attention_against::<AC>((3, 300, 20), Precision::Bf16, (2e-2, 3e-2));
}

#[test]
fn attention_matches_the_composition() {
    // More query rows than one block, several heads, a reduced key sequence.
    attention_case::<A>(2, 700, 37);
    attention_case::<A>(1, 64, 64);
}

#[test]
fn attention_with_activation_checkpointing() {
    attention_case::<AC>(3, 300, 20);
}

fn dwconv_case(act: Activation) {
    let device = Default::default();
    let c = 12;
    let (h, w) = (9, 7);
    let mut conv: Conv2d<A> = conv2d(
        ConvSpec {
            channels: [c, c],
            kernel: 3,
            stride: 1,
            padding: 1,
            groups: c,
            bias: true,
        },
        0.3,
        &device,
    );
    conv.bias = Some(Param::from_tensor(random([c], 11)));
    let x = random::<A, 3>([2, h * w, c], 10);
    let run = |fused: bool| {
        let (wt, b) = (conv.weight.val(), conv.bias.as_ref().unwrap().val());
        forward_backward::<A, 4, 3>(
            &[
                x.clone().unsqueeze(),
                wt,
                b.unsqueeze::<2>().unsqueeze::<3>().unsqueeze(),
            ],
            |t| {
                let mut cv = conv.clone();
                cv.weight = attached(t[1].clone());
                cv.bias = Some(attached(t[2].clone().reshape([c])));
                let x = t[0].clone().squeeze_dim(0);
                if fused {
                    dwconv3x3_act(&cv, act, &x, h, w).expect("fused route")
                } else {
                    dwconv3x3_act_composed(&cv, act, x, h, w)
                }
            },
        )
    };
    let (fo, fg) = run(true);
    let (go, gg) = run(false);
    assert_close(&format!("{act:?} y"), fo, go, 1e-5);
    for (name, (f, g)) in ["dx", "dw", "db"].into_iter().zip(fg.into_iter().zip(gg)) {
        assert_close(&format!("{act:?} {name}"), f, g, 1e-4);
    }
}

#[test]
fn dwconv_matches_the_composition_for_every_activation() {
    let _rng = crate::test_support::rng_lock();
    for act in [
        Activation::Gelu,
        Activation::GeluTanh,
        Activation::Relu,
        Activation::Silu,
    ] {
        dwconv_case(act);
    }
}

#[test]
fn inference_route_matches_the_composition() {
    let q = random::<Flex, 3>([1, 130, 32], 12);
    let k = random::<Flex, 3>([1, 17, 32], 13);
    let v = random::<Flex, 3>([1, 17, 32], 14);
    assert_eq!(route::<Flex>(&[q.dtype()]), Some(Route::Flex));
    let f = attention(&q, &k, &v, 2, Precision::F32).expect("fused route");
    let g = attention_composed(q, k, v, 2, None);
    assert_close("out", f, g, 1e-5);
}

#[test]
fn other_dtypes_take_the_generic_path() {
    use burn::tensor::DType;
    assert_eq!(route::<A>(&[DType::F32, DType::BF16]), None);
    assert_eq!(
        route::<AC>(&[DType::F32]),
        Some(Route::FlexAutodiffBalanced)
    );
}

/// The decode head's tail through `ops`, which must take the fused kernel here.
fn fused_tail<B: Backend>(
    maps: Vec<Tensor<B, 4>>,
    shift: Tensor<B, 1>,
    norm: &BatchNorm2d<B>,
    dropout: f64,
) -> Tensor<B, 4> {
    let c = Compute {
        dtype: None,
        kernels: Kernels::Auto,
    };
    assert_eq!(c.path::<B>(&shift.device()), KernelPath::Fused);
    assert!(route::<B>(&[shift.dtype()]).is_some());
    let size = [maps[0].dims()[2], maps[0].dims()[3]];
    let dropout = burn::nn::DropoutConfig::new(dropout).init();
    crate::ops::decode_tail(maps, shift, norm, &dropout, size, c)
}

/// The decode head's tail: maps at four resolutions (odd ratios included), shift, BatchNorm
/// parameters; outputs, every gradient and the running statistics.
fn decode_tail_case<B: burn::tensor::backend::AutodiffBackend>() {
    let d = 5;
    let sizes = [[12, 10], [6, 5], [3, 3], [2, 1]];
    let maps: Vec<Tensor<B, 4>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &[h, w])| random([2, d, h, w], 20 + i as u64))
        .collect();
    let shift = random::<B, 1>([d], 30);
    let gamma = random::<B, 1>([d], 31);
    let beta = random::<B, 1>([d], 32);
    let mut inputs: Vec<Tensor<B, 4>> = maps.clone();
    for v in [shift, gamma, beta] {
        inputs.push(v.reshape([1, 1, 1, d]));
    }
    let run = |fused: bool| {
        let bn = std::cell::RefCell::new(None);
        let (out, grads) = forward_backward::<B, 4, 4>(&inputs, |t| {
            let mut norm = BatchNorm2d::<B>::new(d, &Default::default());
            norm.gamma = attached(t[5].clone().reshape([d]));
            norm.beta = attached(t[6].clone().reshape([d]));
            let shift = t[4].clone().reshape([d]);
            let out = if fused {
                fused_tail(t[..4].to_vec(), shift, &norm, 0.0)
            } else {
                decode_tail_composed(&norm, t[..4].to_vec(), shift, [12, 10])
            };
            *bn.borrow_mut() = Some(norm);
            out
        });
        let norm = bn.into_inner().unwrap();
        let stats = (
            norm.running_mean.value().inner(),
            norm.running_var.value().inner(),
        );
        (out, grads, stats)
    };
    let (fo, fg, fs) = run(true);
    let (go, gg, gs) = run(false);
    assert_close("out", fo, go, 1e-5);
    let scale = gg[0].clone().abs().max().into_scalar().elem::<f32>();
    for (i, (f, g)) in fg.into_iter().zip(gg).enumerate() {
        if i == 4 {
            // A per-channel shift is removed by the batch mean: its true gradient is 0, and
            // both implementations give rounding noise.
            for t in [f, g] {
                let m = t.abs().max().into_scalar().elem::<f32>();
                assert!(m <= 1e-5 * scale, "shift gradient {m:e} is not ~0");
            }
            continue;
        }
        assert_close(&format!("grad {i}"), f, g, 1e-4);
    }
    assert_close("running mean", fs.0, gs.0, 1e-5);
    assert_close("running var", fs.1, gs.1, 1e-5);
}

#[test]
fn decode_tail_matches_the_composition() {
    decode_tail_case::<A>();
    decode_tail_case::<AC>();
}

/// The classifier dropout fused into the tail: every output is 0 or the undropped value
/// over `keep`, about `p` of the positive ones are dropped, the same seed draws the same mask,
/// and the gradients are those of the composition times that mask.
#[test]
fn decode_tail_dropout_masks_output_and_gradient() {
    let _rng = crate::test_support::rng_lock();
    let (d, p) = (16, 0.3);
    let sizes = [[24, 20], [12, 10], [6, 5], [3, 3]];
    let maps: Vec<Tensor<A, 4>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &[h, w])| random([2, d, h, w], 70 + i as u64))
        .collect();
    let mut inputs = maps;
    for (i, v) in [80, 81, 82].into_iter().enumerate() {
        let t = random::<A, 1>([d], v);
        // A positive γ keeps most outputs of the ReLU alive.
        let t = if i == 1 { t.abs() + 0.5 } else { t };
        inputs.push(t.reshape([1, 1, 1, d]));
    }
    let bn = |t: &[Tensor<A, 4>]| {
        let mut norm = BatchNorm2d::<A>::new(d, &Default::default());
        norm.gamma = attached(t[5].clone().reshape([d]));
        norm.beta = attached(t[6].clone().reshape([d]));
        norm
    };
    let device = Default::default();
    let fused = || {
        forward_backward::<A, 4, 4>(&inputs, |t| {
            fused_tail(t[..4].to_vec(), t[4].clone().reshape([d]), &bn(t), p)
        })
    };
    A::seed(&device, 5);
    let (fo, fg) = fused();
    A::seed(&device, 5);
    let (again, _) = fused();
    assert_eq!(
        fo.to_data(),
        again.to_data(),
        "the same seed draws the same mask"
    );
    A::seed(&device, 6);
    let (other, _) = fused();
    assert_ne!(
        fo.to_data(),
        other.to_data(),
        "another seed draws another mask"
    );

    let kept = fo.clone().not_equal_elem(0.0).float();
    let mask = Tensor::<A, 4>::from_data(kept.to_data(), &device);
    let (plain, _) = forward_backward::<A, 4, 4>(&inputs, |t| {
        decode_tail_composed(&bn(t), t[..4].to_vec(), t[4].clone().reshape([d]), [24, 20])
    });
    let (go, gg) = forward_backward::<A, 4, 4>(&inputs, |t| {
        let y = decode_tail_composed(&bn(t), t[..4].to_vec(), t[4].clone().reshape([d]), [24, 20]);
        y * mask.clone() / (1.0 - p)
    });
    assert_close("out", fo, go, 1e-5);
    let positive: Vec<f32> = plain.to_data().to_vec().unwrap();
    let kept: Vec<f32> = kept.to_data().to_vec().unwrap();
    let alive = positive.iter().filter(|v| **v > 0.0).count();
    let dropped = positive
        .iter()
        .zip(&kept)
        .filter(|(v, k)| **v > 0.0 && **k == 0.0)
        .count();
    let rate = dropped as f64 / alive as f64;
    assert!(alive > 5_000, "{alive} positive outputs");
    assert!(
        (rate - p).abs() < 0.025,
        "dropped {rate:.4} of the outputs, want {p}"
    );
    for (i, (f, g)) in fg.into_iter().zip(gg).enumerate() {
        if i != 4 {
            assert_close(&format!("grad {i}"), f, g, 1e-4);
        }
    }
}

#[test]
fn decode_tail_inference_uses_running_statistics() {
    let d = 3;
    let mut norm = BatchNorm2d::<Flex>::new(d, &Default::default());
    norm.gamma = Param::from_tensor(random([d], 40));
    norm.running_mean = burn::module::RunningState::new(random([d], 41));
    norm.running_var = burn::module::RunningState::new(random::<Flex, 1>([d], 42).abs() + 0.5);
    let maps: Vec<Tensor<Flex, 4>> = [[8, 8], [4, 4], [2, 2], [1, 1]]
        .iter()
        .enumerate()
        .map(|(i, &[h, w])| random([1, d, h, w], 43 + i as u64))
        .collect();
    let shift = random::<Flex, 1>([d], 50);
    let f = fused_tail(maps.clone(), shift.clone(), &norm, 0.5);
    let g = decode_tail_composed(&norm, maps, shift, [8, 8]);
    assert_close("out", f, g, 1e-5);
}

fn cross_entropy_case(logit_size: [usize; 2], label_size: [usize; 2]) {
    use burn::tensor::{Int, TensorData};
    let classes = 5;
    let logits = random::<A, 4>([2, classes, logit_size[0], logit_size[1]], 60) * 3.0;
    let n = 2 * label_size[0] * label_size[1];
    // Every class, the ignore index and an out-of-range label.
    let labels: Vec<i64> = (0..n)
        .map(|i| [0, 1, 2, 3, 4, 255, 7, 1][(i * 7 + i / 3) % 8])
        .collect();
    let labels = Tensor::<A, 3, Int>::from_data(
        TensorData::new(labels, [2, label_size[0], label_size[1]]),
        &Default::default(),
    );
    let (fo, fg) = forward_backward::<A, 4, 1>(&[logits.clone()], |t| {
        upsample_cross_entropy(&t[0], &labels, 255).expect("fused route")
    });
    let (go, gg) = forward_backward::<A, 4, 1>(&[logits], |t| {
        let up = crate::bilinear::resize_bilinear(t[0].clone(), label_size);
        crate::ops::cross_entropy(up, labels.clone(), 255)
    });
    assert_close("loss", fo, go, 1e-5);
    assert_close("dlogits", fg[0].clone(), gg[0].clone(), 1e-4);
}

#[test]
fn cross_entropy_matches_upsample_then_loss() {
    cross_entropy_case([7, 6], [28, 24]);
    cross_entropy_case([5, 5], [17, 23]);
    cross_entropy_case([6, 4], [6, 4]);
}

/// A conv the fused path writes as a matrix product (`f`, taking the layer, the input and the
/// kernels to use) against burn's conv: `f` on a copy of `layer` whose weight and bias are
/// tracked, with `Kernels::Auto` (which must take the fused route: a layer `plain_conv`
/// accepts, on `Autodiff<Flex>`) and with `Kernels::Composed`; the outputs and the gradients
/// of the input, the kernel and the bias must agree. Returns the fused output.
fn conv_paths_agree(
    what: &str,
    layer: &Conv2d<A>,
    x: Tensor<A, 4>,
    f: impl Fn(&Conv2d<A>, Tensor<A, 4>, Compute) -> Tensor<A, 3>,
) -> Tensor<Flex, 3> {
    let [cout, ..] = layer.weight.dims();
    assert!(
        crate::ops::plain_conv(layer).is_some(),
        "{what}: the layer must be one the fused path writes as a product"
    );
    let compute = |kernels| Compute {
        dtype: None,
        kernels,
    };
    assert_eq!(
        compute(Kernels::Auto).path::<A>(&x.device()),
        KernelPath::Fused
    );
    let inputs = [x, layer.weight.val(), random::<A, 4>([1, 1, 1, cout], 91)];
    let run = |kernels| {
        forward_backward::<A, 4, 3>(&inputs, |t| {
            let mut l = layer.clone();
            l.weight = attached(t[1].clone());
            l.bias = Some(attached(t[2].clone().reshape([cout])));
            f(&l, t[0].clone(), compute(kernels))
        })
    };
    let (fo, fg) = run(Kernels::Auto);
    let (go, gg) = run(Kernels::Composed);
    assert_close(&format!("{what} out"), fo.clone(), go, 1e-5);
    for (i, (f, g)) in fg.into_iter().zip(gg).enumerate() {
        assert_close(&format!("{what} grad {i}"), f, g, 1e-5);
    }
    fo
}

/// The sequence reduction as a linear map of gathered patches against the strided conv it
/// replaces: outputs and the gradients of the input, kernel and bias, for sizes the stride
/// does not divide (the conv drops the remainder, whose gradient is then 0).
#[test]
fn patch_conv_matches_the_strided_conv() {
    let _rng = crate::test_support::rng_lock();
    let device = Default::default();
    for (s, [h, w]) in [(2, [6, 8]), (4, [13, 10]), (8, [17, 16])] {
        let (batch, cin, cout) = (2, 6, 5);
        let spec = ConvSpec {
            channels: [cin, cout],
            kernel: s,
            stride: s,
            padding: 0,
            groups: 1,
            bias: true,
        };
        let layer: Conv2d<A> = conv2d(spec, 0.5, &device);
        let x = random::<A, 4>([1, batch, h * w, cin], 90 + s as u64);
        let out = conv_paths_agree(&format!("s{s}"), &layer, x, |l, x, c| {
            crate::ops::patch_conv(l, x.reshape([batch, h * w, cin]), [h, w], c)
        });
        assert_eq!(out.dims(), [batch, (h / s) * (w / s), cout]);
    }
}

/// The overlapping patch embedding as im2col times the kernel matrix against burn's conv
/// followed by the transpose: outputs and the gradients of the input (overlapping taps summed
/// in the scatter), kernel and bias, with the padding and sizes the stride does not divide.
#[test]
fn patch_embed_matches_the_padded_conv() {
    let _rng = crate::test_support::rng_lock();
    let device = Default::default();
    for (k, s, p, [h, w]) in [(7, 4, 3, [17, 19]), (3, 2, 1, [9, 8]), (3, 2, 1, [1, 2])] {
        let (batch, cin, cout) = (2, 3, 4);
        let spec = ConvSpec {
            channels: [cin, cout],
            kernel: k,
            stride: s,
            padding: p,
            groups: 1,
            bias: true,
        };
        let layer: Conv2d<A> = conv2d(spec, 0.5, &device);
        let x = random::<A, 4>([batch, cin, h, w], 95 + k as u64);
        let o = |n: usize| (n + 2 * p - k) / s + 1;
        let out = conv_paths_agree(&format!("k{k}"), &layer, x, |l, x, c| {
            let (y, oh, ow) = crate::ops::patch_embed(l, x, c);
            assert_eq!((oh, ow), (o(h), o(w)));
            y
        });
        assert_eq!(out.dims(), [batch, o(h) * o(w), cout]);
    }
}
