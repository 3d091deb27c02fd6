//! Test-time augmentation: the poses against index arithmetic written out by hand, and the
//! averaged prediction against a direct computation on the host.

use super::*;
use crate::postprocess::host;
use crate::{Blender, InferError, Windows, predict_streaming, predict_windows, probabilities};
use burn::backend::Flex;
use burn::tensor::TensorData;
use segformer::SegformerConfig;

type Map = fn(usize, usize, usize, usize) -> (usize, usize);

/// Every pose with its definition, independent of `Pose`'s transpose-then-flip decomposition:
/// whether the output is `[W, H]`, and where `out[i, j]` comes from in an `h × w` input.
fn reference() -> Vec<(Pose, &'static str, bool, Map)> {
    vec![
        (Pose::IDENTITY, "identity", false, |i, j, _, _| (i, j)),
        (Pose::HFLIP, "hflip", false, |i, j, _, w| (i, w - 1 - j)),
        (Pose::VFLIP, "vflip", false, |i, j, h, _| (h - 1 - i, j)),
        (Pose::ROT180, "rot180", false, |i, j, h, w| {
            (h - 1 - i, w - 1 - j)
        }),
        (Pose::TRANSPOSE, "transpose", true, |i, j, _, _| (j, i)),
        (
            Pose::ANTI_TRANSPOSE,
            "anti-transpose",
            true,
            |i, j, h, w| (h - 1 - j, w - 1 - i),
        ),
        (Pose::ROT90, "rot90", true, |i, j, _, w| (j, w - 1 - i)),
        (Pose::ROT270, "rot270", true, |i, j, h, _| (h - 1 - j, i)),
    ]
}

/// `x` (`[b, c, h, w]`) posed by index arithmetic: `(values, dims)`.
fn pose_on_host(
    x: &[f32],
    [b, c, h, w]: [usize; 4],
    swaps: bool,
    map: Map,
) -> (Vec<f32>, [usize; 4]) {
    let (ph, pw) = if swaps { (w, h) } else { (h, w) };
    let mut out = Vec::with_capacity(x.len());
    for plane in 0..b * c {
        for i in 0..ph {
            for j in 0..pw {
                let (si, sj) = map(i, j, h, w);
                out.push(x[(plane * h + si) * w + sj]);
            }
        }
    }
    (out, [b, c, ph, pw])
}

/// The inverse of [`pose_on_host`]: `posed` (in the pose's frame) put back into an `h × w` frame.
fn undo_on_host(posed: &[f32], [b, c, h, w]: [usize; 4], swaps: bool, map: Map) -> Vec<f32> {
    let (ph, pw) = if swaps { (w, h) } else { (h, w) };
    let mut out = vec![f32::NAN; posed.len()];
    for plane in 0..b * c {
        for i in 0..ph {
            for j in 0..pw {
                let (si, sj) = map(i, j, h, w);
                out[(plane * h + si) * w + sj] = posed[(plane * ph + i) * pw + j];
            }
        }
    }
    out
}

fn tensor(values: Vec<f32>, dims: [usize; 4]) -> Tensor<Flex, 4> {
    Tensor::from_data(TensorData::new(values, dims), &Default::default())
}

fn values(t: Tensor<Flex, 4>) -> (Vec<f32>, [usize; 4]) {
    let dims = t.dims();
    (host(t, "test").unwrap(), dims)
}

/// A non-square `[2, 3, 5, 7]` tensor of distinct values.
fn distinct() -> (Vec<f32>, [usize; 4]) {
    let dims = [2, 3, 5, 7];
    ((0..2 * 3 * 5 * 7).map(|v| v as f32).collect(), dims)
}

#[test]
fn each_pose_is_its_definition() {
    let (x, dims) = distinct();
    for (pose, name, swaps, map) in reference() {
        let got = values(pose.apply(tensor(x.clone(), dims)));
        assert_eq!(got, pose_on_host(&x, dims, swaps, map), "{name}");
        assert_eq!(pose.swaps_axes(), swaps, "{name}");
        assert_eq!(pose.size([5, 7]), [got.1[2], got.1[3]], "{name}");
    }
    // numpy.rot90([[1, 2, 3], [4, 5, 6]]) == [[3, 6], [2, 5], [1, 4]]
    let rot = values(Pose::ROT90.apply(tensor(vec![1., 2., 3., 4., 5., 6.], [1, 1, 2, 3])));
    assert_eq!(rot, (vec![3., 6., 2., 5., 1., 4.], [1, 1, 3, 2]));
}

#[test]
fn undo_restores_every_pose_exactly() {
    let (x, dims) = distinct();
    let x: Vec<f32> = x.iter().map(|v| (v * 0.37).sin() * 1e3).collect();
    for (pose, name, swaps, map) in reference() {
        let back = values(pose.undo(pose.apply(tensor(x.clone(), dims))));
        assert_eq!(back.1, dims, "{name}");
        assert!(
            back.0
                .iter()
                .zip(&x)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: undo(apply(x)) != x"
        );
        // undo on its own is the inverse map, written out independently.
        let (posed, posed_dims) = pose_on_host(&x, dims, swaps, map);
        let undone = values(pose.undo(tensor(posed.clone(), posed_dims)));
        assert_eq!(
            undone,
            (undo_on_host(&posed, dims, swaps, map), dims),
            "{name}"
        );
    }
}

#[test]
fn the_eight_poses_are_distinct_and_closed_under_composition() {
    let (x, dims) = distinct();
    let x = || tensor(x.clone(), dims);
    let images: Vec<_> = Pose::ALL.iter().map(|p| values(p.apply(x()))).collect();
    for a in 0..8 {
        for b in a + 1..8 {
            assert_ne!(images[a], images[b], "poses {a} and {b} coincide");
        }
    }
    for a in Pose::ALL {
        for b in Pose::ALL {
            let both = values(b.apply(a.apply(x())));
            assert!(images.contains(&both), "{b:?} after {a:?} is no pose");
        }
        // The inverse is a pose too.
        assert!(
            images.contains(&values(a.undo(x()))),
            "{a:?} has no inverse"
        );
    }
}

#[test]
fn tta_names_and_poses() {
    for (tta, n) in [(Tta::None, 1), (Tta::Flips, 4), (Tta::D4, 8)] {
        assert_eq!(tta.poses().len(), n);
        assert_eq!(tta.poses()[0], Pose::IDENTITY);
        assert_eq!(tta.to_string().parse::<Tta>().unwrap(), tta);
    }
    assert!(Tta::Flips.poses().iter().all(|p| !p.swaps_axes()));
    assert_eq!("D4".parse::<Tta>().unwrap(), Tta::D4);
    let e = "rot".parse::<Tta>().unwrap_err().to_string();
    assert!(
        e.contains("`rot`") && e.contains("flips") && e.contains("d4"),
        "{e}"
    );
    assert_eq!(Tta::default(), Tta::None);
}

fn tiny_model() -> Segformer<Flex> {
    model_with_labels(3)
}

fn model_with_labels(k: usize) -> Segformer<Flex> {
    let mut c = SegformerConfig::mit_b0().with_num_labels(k);
    c.hidden_sizes = vec![8, 16, 24, 32];
    c.num_attention_heads = vec![1, 2, 3, 4];
    c.depths = vec![1, 1, 1, 1];
    c.decoder_hidden_size = 16;
    c.init::<Flex>(&Default::default()).unwrap()
}

fn pixels(len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect()
}

/// Host softmax per pixel of `[n, k, h, w]`.
fn softmax_host(logits: &[f32], [n, k, h, w]: [usize; 4]) -> Vec<f32> {
    let size = k * h * w;
    (0..n)
        .flat_map(|i| probabilities(&logits[i * size..(i + 1) * size], k, h * w))
        .collect()
}

/// The mean class probability over `tta`'s poses, computed directly: each pose made on the
/// host, run through the model, upsampled, softmaxed on the host, put back by index arithmetic.
fn direct(model: &Segformer<Flex>, x: &[f32], dims: [usize; 4], tta: Tta) -> Vec<f32> {
    let [n, _, h, w] = dims;
    let k = model.num_labels();
    let mut sum = vec![0.0f64; n * k * h * w];
    for (pose, _, swaps, map) in reference() {
        if !tta.poses().contains(&pose) {
            continue;
        }
        let (posed, pd) = pose_on_host(x, dims, swaps, map);
        let logits = segformer::resize_bilinear(model.forward(tensor(posed, pd)), [pd[2], pd[3]]);
        let p = softmax_host(&values(logits).0, [n, k, pd[2], pd[3]]);
        for (s, v) in sum
            .iter_mut()
            .zip(undo_on_host(&p, [n, k, h, w], swaps, map))
        {
            *s += v as f64;
        }
    }
    let count = tta.poses().len() as f64;
    sum.iter().map(|s| (s / count) as f32).collect()
}

fn worst(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn averaged_probabilities_match_a_direct_computation() {
    let model = tiny_model();
    let dims = [2, 3, 40, 56];
    let x = pixels(dims.iter().product());
    for tta in [Tta::Flips, Tta::D4] {
        let out = upsampled_logits(&model, tensor(x.clone(), dims), tta, None);
        let (logits, out_dims) = values(out);
        assert_eq!(out_dims, [2, 3, 40, 56]);
        let expect = direct(&model, &x, dims, tta);
        let got = softmax_host(&logits, out_dims);
        let err = worst(&got, &expect);
        assert!(err < 1e-5, "{tta}: worst {err}");
        // The identity's forward handed in is the same computation.
        let forward = model.forward(tensor(x.clone(), dims));
        let again = upsampled_logits(&model, tensor(x.clone(), dims), tta, Some(forward));
        assert_eq!(values(again).0, logits, "{tta}");
    }
    // Not the plain prediction: the poses do change the answer.
    // (k = C = 3, so the logits have the input's dims.)
    let plain = upsampled_logits(&model, tensor(x.clone(), dims), Tta::None, None);
    let plain = softmax_host(&values(plain).0, dims);
    assert!(worst(&plain, &direct(&model, &x, dims, Tta::D4)) > 1e-4);
}

#[test]
fn a_single_logit_model_averages_its_sigmoids() {
    let model = model_with_labels(1);
    let dims = [1, 3, 44, 36];
    let x = pixels(dims.iter().product());
    let (logits, out_dims) = values(upsampled_logits(
        &model,
        tensor(x.clone(), dims),
        Tta::D4,
        None,
    ));
    assert_eq!(out_dims, [1, 1, 44, 36]);
    // `probabilities` of one logit is its sigmoid.
    let got = probabilities(&logits, 1, 44 * 36);
    let err = worst(&got, &direct(&model, &x, dims, Tta::D4));
    assert!(err < 1e-5, "worst {err}");
}

#[test]
fn a_symmetric_input_gives_the_plain_prediction_symmetrised() {
    // An image that every pose leaves unchanged: each pose's forward is the plain one, so TTA
    // must give the plain probabilities averaged over the poses' inverses, which is itself
    // unchanged by every pose (the model is not equivariant, so it differs from the plain one).
    let model = tiny_model();
    let s = 48;
    let dims = [1, 3, s, s];
    let x: Vec<f32> = (0..3 * s * s)
        .map(|i| {
            let (c, y, x) = (i / (s * s), i / s % s, i % s);
            let (a, b) = (y.min(s - 1 - y), x.min(s - 1 - x));
            ((a.min(b) * 7 + a.max(b) * 3 + c * 5) % 11) as f32 / 5.0 - 1.0
        })
        .collect();
    for (_, name, swaps, map) in reference() {
        assert_eq!(
            pose_on_host(&x, dims, swaps, map).0,
            x,
            "{name}: not symmetric"
        );
    }
    let plain = values(upsampled_logits(
        &model,
        tensor(x.clone(), dims),
        Tta::None,
        None,
    ));
    let plain = softmax_host(&plain.0, dims);
    for tta in [Tta::Flips, Tta::D4] {
        let mut expect = vec![0.0f32; plain.len()];
        for (pose, _, swaps, map) in reference() {
            if tta.poses().contains(&pose) {
                let back = undo_on_host(&plain, dims, swaps, map);
                expect.iter_mut().zip(back).for_each(|(e, v)| *e += v);
            }
        }
        expect
            .iter_mut()
            .for_each(|e| *e /= tta.poses().len() as f32);
        let got = values(upsampled_logits(&model, tensor(x.clone(), dims), tta, None));
        let got = softmax_host(&got.0, dims);
        let err = worst(&got, &expect);
        assert!(err < 1e-5, "{tta}: worst {err}");
        for &pose in tta.poses() {
            let posed = values(pose.apply(tensor(got.clone(), dims))).0;
            assert!(
                worst(&posed, &got) < 1e-5,
                "{tta}: not invariant under {pose:?}"
            );
        }
    }
}

#[test]
fn no_tta_is_the_plain_windowed_path_bit_for_bit() {
    // The blend of `resize_bilinear(model.forward(window))`, as before TTA existed.
    let model = tiny_model();
    let device = Default::default();
    let (h, w) = (70, 50);
    let px = pixels(3 * h * w);
    let windows = Windows::new([40, 32], Some(8), 3).unwrap();
    assert_eq!(windows.tta, Tta::None);
    let got = predict_windows(&model, &px, [3, h, w], &windows, &device).unwrap();
    let (spots, [th, tw]) = windows.spots(h, w);
    let mut blender = Blender::new(3, h, w);
    for (y0, x0) in spots {
        let win: Vec<f32> = (0..3)
            .flat_map(|c| (y0..y0 + th).map(move |y| (c * h + y) * w + x0))
            .flat_map(|row| px[row..row + tw].to_vec())
            .collect();
        let logits = model.forward(tensor(win, [1, 3, th, tw]));
        blender.add(
            &values(segformer::resize_bilinear(logits, [th, tw])).0,
            y0,
            x0,
            th,
            tw,
        );
    }
    let expect = blender.finish();
    assert!(
        got.iter()
            .zip(&expect)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[test]
fn one_window_with_tta_is_the_direct_average() {
    let model = tiny_model();
    let device = Default::default();
    let (h, w) = (36, 52);
    let px = pixels(3 * h * w);
    let windows = Windows::new([64, 64], None, 1).unwrap().with_tta(Tta::D4);
    let logits = predict_windows(&model, &px, [3, h, w], &windows, &device).unwrap();
    let got = probabilities(&logits, 3, h * w);
    let err = worst(&got, &direct(&model, &px, [1, 3, h, w], Tta::D4));
    assert!(err < 1e-5, "worst {err}");
    assert!(
        logits.iter().all(|v| v.is_finite() && *v <= 1e-6),
        "log-probabilities"
    );
}

#[test]
fn streaming_with_tta_gives_the_in_memory_logits_bit_for_bit() {
    let model = tiny_model();
    let device = Default::default();
    let (h, w) = (110, 60);
    let px = pixels(3 * h * w);
    let windows = Windows::new([40, 48], Some(12), 2)
        .unwrap()
        .with_tta(Tta::D4);
    let whole = predict_windows(&model, &px, [3, h, w], &windows, &device).unwrap();
    let mut streamed = vec![f32::NAN; whole.len()];
    predict_streaming::<Flex, InferError>(
        &model,
        [3, h, w],
        &windows,
        &device,
        |[y0, x0], [th, tw]| {
            Ok((0..3)
                .flat_map(|b| (y0..y0 + th).map(move |y| (b * h + y) * w + x0))
                .flat_map(|row| &px[row..row + tw])
                .copied()
                .collect())
        },
        |y0, logits, n| {
            for c in 0..3 {
                for r in 0..n {
                    let dst = (c * h + y0 + r) * w;
                    streamed[dst..dst + w]
                        .copy_from_slice(&logits[(c * n + r) * w..(c * n + r + 1) * w]);
                }
            }
            Ok(())
        },
    )
    .unwrap();
    assert!(
        whole
            .iter()
            .zip(&streamed)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    let plain = predict_windows(
        &model,
        &px,
        [3, h, w],
        &windows.with_tta(Tta::None),
        &device,
    );
    assert_ne!(plain.unwrap(), whole, "TTA was not applied");
}
