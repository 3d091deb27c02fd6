//! The processor and both resamplers against references written out in f64 from their
//! definitions, on tiny images, to kill the mutants `crates/train/bench/mutants.sh` reports
//! (issue #17):
//! - Pillow's antialiased `BILINEAR` (`libImaging/Resample.c`: triangle filter whose support
//!   widens with the downscale factor, taps normalised; the 8-bit path rounds after each pass)
//!   and `NEAREST` (source `floor((i + 0.5) * in / out)`), through `SegformerProcessor`;
//! - OpenCV's `INTER_LINEAR` (source `(d + 0.5) * scale - 0.5`, edge taps clamped),
//!   `INTER_AREA` (box average of the covered span) and `INTER_NEAREST` (`floor(d * scale)`),
//!   through the `Resize` transform;
//! - HF's `(x * rescale - mean) / std`, `do_reduce_labels`, band selection and collation.

use augment::{Pipeline, Resample, SegformerProcessor, collate};
use raster::{Mask, Raster, RasterData};

/// One axis of a separable filter: the `(source index, weight)` taps of every output.
type Taps = Vec<Vec<(usize, f64)>>;

/// Deterministic pseudo-random values in `0..1` (a 32-bit LCG).
fn noise(n: usize, seed: u32) -> Vec<f64> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f64 / (1u32 << 24) as f64
        })
        .collect()
}

/// Pillow's triangle filter taps (support 1, scaled by the downscale factor), normalised.
fn pil_bilinear(src: usize, dst: usize) -> Taps {
    let scale = src as f64 / dst as f64;
    let fs = scale.max(1.0);
    (0..dst)
        .map(|i| {
            let center = (i as f64 + 0.5) * scale;
            let lo = ((center - fs + 0.5).trunc() as i64).max(0) as usize;
            let hi = ((center + fs + 0.5).trunc() as i64).min(src as i64) as usize;
            let w: Vec<(usize, f64)> = (lo..hi)
                .map(|x| {
                    let t = ((x as f64 - center + 0.5) / fs).abs();
                    (x, (1.0 - t).max(0.0))
                })
                .collect();
            let sum: f64 = w.iter().map(|p| p.1).sum();
            w.into_iter().map(|(x, v)| (x, v / sum)).collect()
        })
        .collect()
}

/// Pillow's `NEAREST`: the pixel under the output pixel's centre.
fn pil_nearest(src: usize, dst: usize) -> Taps {
    (0..dst)
        .map(|i| {
            let x = ((i as f64 + 0.5) * src as f64 / dst as f64).floor() as usize;
            vec![(x.min(src - 1), 1.0)]
        })
        .collect()
}

/// OpenCV's `INTER_LINEAR` taps.
fn cv_linear(src: usize, dst: usize) -> Taps {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            let fx = (d as f64 + 0.5) * scale - 0.5;
            let sx = fx.floor();
            let (sx, f) = (sx as i64, fx - sx);
            if sx < 0 {
                vec![(0, 1.0)]
            } else if sx >= src as i64 - 1 {
                vec![(src - 1, 1.0)]
            } else {
                vec![(sx as usize, 1.0 - f), (sx as usize + 1, f)]
            }
        })
        .collect()
}

/// OpenCV's `INTER_AREA` when shrinking: the mean over `[d·scale, (d+1)·scale)`.
fn cv_area(src: usize, dst: usize) -> Taps {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            let (a, b) = (d as f64 * scale, (d + 1) as f64 * scale);
            (a.floor() as usize..(b.ceil() as usize).min(src))
                .filter_map(|s| {
                    let cover = b.min(s as f64 + 1.0) - a.max(s as f64);
                    (cover > 0.0).then_some((s, cover / scale))
                })
                .collect()
        })
        .collect()
}

/// OpenCV's `INTER_NEAREST`: `floor(d * src / dst)`.
fn cv_nearest(src: usize, dst: usize) -> Taps {
    (0..dst).map(|d| vec![((d * src) / dst, 1.0)]).collect()
}

/// Applies horizontal taps `tx` to `[h, w, c]`: `[h, tx.len(), c]`.
fn pass_x(v: &[f64], (h, w, c): (usize, usize, usize), tx: &Taps) -> Vec<f64> {
    let mut out = Vec::with_capacity(h * tx.len() * c);
    for y in 0..h {
        for taps in tx {
            for b in 0..c {
                out.push(
                    taps.iter()
                        .map(|&(x, wt)| v[(y * w + x) * c + b] * wt)
                        .sum(),
                );
            }
        }
    }
    out
}

/// Applies vertical taps `ty` to `[h, w, c]`: `[ty.len(), w, c]`.
fn pass_y(v: &[f64], (_, w, c): (usize, usize, usize), ty: &Taps) -> Vec<f64> {
    let mut out = Vec::with_capacity(ty.len() * w * c);
    for taps in ty {
        for i in 0..w * c {
            out.push(taps.iter().map(|&(y, wt)| v[y * w * c + i] * wt).sum());
        }
    }
    out
}

fn separable(v: &[f64], dims: (usize, usize, usize), tx: &Taps, ty: &Taps) -> Vec<f64> {
    let x = pass_x(v, dims, tx);
    pass_y(&x, (dims.0, tx.len(), dims.2), ty)
}

/// `[h, w, c]` -> `[c, h, w]`.
fn chw(v: &[f64], h: usize, w: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for i in 0..h * w {
        for b in 0..c {
            out[b * h * w + i] = v[i * c + b];
        }
    }
    out
}

/// Pillow's 8-bit arithmetic (`normalize_coeffs_8bpc`, `ImagingResample*_8bpc`): weights to
/// 22-bit fixed point rounded half away from zero, `2^21` added, shifted back and clipped.
fn pil_fixed(taps: &Taps) -> Taps {
    let one = (1u64 << 22) as f64;
    taps.iter()
        .map(|t| t.iter().map(|&(i, w)| (i, (w * one).round())).collect())
        .collect()
}

fn clip8_fixed(acc: f64) -> f64 {
    ((acc + (1u64 << 21) as f64) / (1u64 << 22) as f64)
        .floor()
        .clamp(0.0, 255.0)
}

fn assert_all_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// Shapes `(h, w) -> (oh, ow)` that shrink, enlarge, or keep one axis. Halving gives Pillow
/// dyadic weights (1/8, 3/8, 3/8, 1/8 inside), so exact ties show how fixed point rounds.
const SIZES: [((usize, usize), (usize, usize)); 6] = [
    ((6, 8), (3, 4)),
    ((7, 9), (3, 4)),
    ((4, 5), (9, 7)),
    ((6, 6), (2, 6)),
    ((5, 8), (5, 3)),
    ((10, 3), (4, 2)),
];

fn plain(size: (usize, usize), resample: Resample) -> SegformerProcessor {
    SegformerProcessor {
        size: Some(size),
        resample,
        do_rescale: false,
        do_normalize: false,
        ..Default::default()
    }
}

// ---- Pillow through the processor -------------------------------------------------------

#[test]
fn pil_bilinear_on_float_samples_matches_the_triangle_filter() {
    for (k, &((h, w), (oh, ow))) in SIZES.iter().enumerate() {
        for c in [1, 3] {
            let v = noise(h * w * c, k as u32 * 10 + c as u32);
            let img = Raster::new(
                w,
                h,
                c,
                RasterData::F32(v.iter().map(|&x| x as f32).collect()),
            )
            .unwrap();
            let out = plain((oh, ow), Resample::Bilinear)
                .process(&img, None)
                .unwrap();
            assert_eq!((out.channels, out.height, out.width), (c, oh, ow));
            let want = separable(&v, (h, w, c), &pil_bilinear(w, ow), &pil_bilinear(h, oh));
            let what = format!("{h}x{w} -> {oh}x{ow}, {c} bands");
            assert_all_close(&out.pixel_values, &chw(&want, oh, ow, c), 1e-5, &what);
        }
    }
}

#[test]
fn pil_bilinear_on_u8_rounds_after_each_pass() {
    for (k, &((h, w), (oh, ow))) in SIZES.iter().enumerate() {
        for c in [1, 2, 3, 4, 5] {
            let v: Vec<f64> = noise(h * w * c, 100 + k as u32 * 10 + c as u32)
                .iter()
                .map(|x| (x * 256.0).floor())
                .collect();
            let img = Raster::new(
                w,
                h,
                c,
                RasterData::U8(v.iter().map(|&x| x as u8).collect()),
            )
            .unwrap();
            let out = plain((oh, ow), Resample::Bilinear)
                .process(&img, None)
                .unwrap();
            // Pillow skips a pass whose size does not change, and stores u8 between passes.
            let x = if ow != w {
                let t = pass_x(&v, (h, w, c), &pil_fixed(&pil_bilinear(w, ow)));
                t.into_iter().map(clip8_fixed).collect()
            } else {
                v.clone()
            };
            let y = if oh != h {
                let t = pass_y(&x, (h, ow, c), &pil_fixed(&pil_bilinear(h, oh)));
                t.into_iter().map(clip8_fixed).collect()
            } else {
                x
            };
            let what = format!("{h}x{w} -> {oh}x{ow}, {c} bands");
            assert_all_close(&out.pixel_values, &chw(&y, oh, ow, c), 0.0, &what);
        }
    }
}

#[test]
fn pil_nearest_takes_the_pixel_under_each_centre() {
    for (k, &((h, w), (oh, ow))) in SIZES.iter().enumerate() {
        let c = 2;
        let v: Vec<f64> = noise(h * w * c, 200 + k as u32)
            .iter()
            .map(|x| (x * 256.0).floor())
            .collect();
        let want = chw(
            &separable(&v, (h, w, c), &pil_nearest(w, ow), &pil_nearest(h, oh)),
            oh,
            ow,
            c,
        );
        let what = format!("{h}x{w} -> {oh}x{ow}");
        for data in [
            RasterData::U8(v.iter().map(|&x| x as u8).collect()),
            RasterData::U16(v.iter().map(|&x| x as u16 * 200).collect()),
            RasterData::F32(v.iter().map(|&x| x as f32).collect()),
        ] {
            let scale = if matches!(data, RasterData::U16(_)) {
                200.0
            } else {
                1.0
            };
            let img = Raster::new(w, h, c, data).unwrap();
            let out = plain((oh, ow), Resample::Nearest)
                .process(&img, None)
                .unwrap();
            let scaled: Vec<f64> = want.iter().map(|x| x * scale).collect();
            assert_all_close(&out.pixel_values, &scaled, 0.0, &what);
        }
    }
}

#[test]
fn u16_bilinear_uses_the_float_path() {
    let ((h, w), (oh, ow)) = SIZES[1];
    let v: Vec<f64> = noise(h * w, 300)
        .iter()
        .map(|x| (x * 65536.0).floor())
        .collect();
    let img = Raster::new(
        w,
        h,
        1,
        RasterData::U16(v.iter().map(|&x| x as u16).collect()),
    )
    .unwrap();
    let out = plain((oh, ow), Resample::Bilinear)
        .process(&img, None)
        .unwrap();
    let want = separable(&v, (h, w, 1), &pil_bilinear(w, ow), &pil_bilinear(h, oh));
    // no rounding: f32 accumulation of values up to 65535
    assert_all_close(&out.pixel_values, &want, 0.02, "u16 bilinear");
    assert!(out.pixel_values.iter().any(|x| x.fract() != 0.0));
}

// ---- the processor's arithmetic ---------------------------------------------------------

/// HF: `(x * rescale - mean) / std`, per band, planes first.
fn hf_normalised(v: &[f64], c: usize, rescale: f64, mean: &[f32], std: &[f32]) -> Vec<f64> {
    let hw = v.len() / c;
    let mut out = vec![0.0; v.len()];
    for i in 0..hw {
        for b in 0..c {
            out[b * hw + i] = (v[i * c + b] * rescale - mean[b] as f64) / std[b] as f64;
        }
    }
    out
}

#[test]
fn rescale_and_normalise_follow_hf_for_every_sample_type_and_band_count() {
    let (h, w) = (3, 4);
    for c in 1..=6 {
        let mean: Vec<f32> = (0..c).map(|b| 0.1 + 0.07 * b as f32).collect();
        let std: Vec<f32> = (0..c).map(|b| 0.2 + 0.03 * b as f32).collect();
        let u: Vec<f64> = noise(h * w * c, 400 + c as u32);
        let cases = [
            (
                RasterData::U8(u.iter().map(|x| (x * 256.0) as u8).collect()),
                1.0 / 255.0,
                u.iter().map(|x| (x * 256.0).floor()).collect::<Vec<f64>>(),
            ),
            (
                RasterData::U16(u.iter().map(|x| (x * 65536.0) as u16).collect()),
                1.0 / 65535.0,
                u.iter().map(|x| (x * 65536.0).floor()).collect(),
            ),
            (
                RasterData::F32(u.iter().map(|&x| x as f32 * 3.0).collect()),
                1.0,
                u.iter().map(|&x| (x as f32 * 3.0) as f64).collect(),
            ),
        ];
        for (data, rescale, v) in cases {
            let img = Raster::new(w, h, c, data).unwrap();
            let what = format!("{c} bands, {:?}", img.kind());
            let p = SegformerProcessor {
                size: None,
                image_mean: mean.clone(),
                image_std: std.clone(),
                ..Default::default()
            };
            let out = p.process(&img, None).unwrap();
            assert_eq!((out.channels, out.height, out.width), (c, h, w));
            let want = hf_normalised(&v, c, rescale, &mean, &std);
            assert_all_close(&out.pixel_values, &want, 1e-5, &what);
            // an explicit factor, and rescaling off
            let p2 = SegformerProcessor {
                rescale_factor: Some(0.5),
                ..p.clone()
            };
            let want = hf_normalised(&v, c, 0.5, &mean, &std);
            let tol = 1e-5 * want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            assert_all_close(
                &p2.process(&img, None).unwrap().pixel_values,
                &want,
                tol,
                &what,
            );
            let p3 = SegformerProcessor {
                do_rescale: false,
                do_normalize: false,
                ..p.clone()
            };
            let want = hf_normalised(&v, c, 1.0, &vec![0.0; c], &vec![1.0; c]);
            assert_all_close(
                &p3.process(&img, None).unwrap().pixel_values,
                &want,
                1e-9,
                &what,
            );
            let p4 = SegformerProcessor {
                do_normalize: false,
                ..p.clone()
            };
            let want = hf_normalised(&v, c, rescale, &vec![0.0; c], &vec![1.0; c]);
            assert_all_close(
                &p4.process(&img, None).unwrap().pixel_values,
                &want,
                1e-6,
                &what,
            );
        }
    }
}

#[test]
fn non_finite_float_samples_stay_in_their_pixel_without_a_resize() {
    // Nodata as NaN/inf in a float raster: at the input size nothing is resampled, so the
    // neighbours keep their values (a filter pass would spread NaN through its zero weights).
    let v = [0.25f32, f32::NAN, 0.5, f32::INFINITY, 1.0, 2.0];
    let img = Raster::new(3, 2, 1, RasterData::F32(v.to_vec())).unwrap();
    for size in [None, Some((2, 3))] {
        let p = SegformerProcessor {
            size,
            ..plain((2, 3), Resample::Bilinear)
        };
        let out = p.process(&img, None).unwrap();
        for (i, (g, w)) in out.pixel_values.iter().zip(v).enumerate() {
            assert!(
                g == &w || (g.is_nan() && w.is_nan()),
                "{size:?} pixel {i}: {g}"
            );
        }
    }
}

#[test]
fn labels_are_reduced_then_resized_nearest() {
    let (h, w, oh, ow) = (5, 7, 3, 4);
    let m: Vec<u8> = (0..h * w).map(|i| [0u8, 1, 2, 255, 7][i * 7 % 5]).collect();
    let mask = Mask::new(w, h, m.clone()).unwrap();
    let img = Raster::new(w, h, 1, RasterData::U8(vec![9; h * w])).unwrap();
    let v: Vec<f64> = m.iter().map(|&x| x as f64).collect();
    let resized = separable(&v, (h, w, 1), &pil_nearest(w, ow), &pil_nearest(h, oh));
    let p = plain((oh, ow), Resample::Bilinear);
    let out = p.process(&img, Some(&mask)).unwrap();
    let got: Vec<f64> = out.labels.unwrap().iter().map(|&x| x as f64).collect();
    assert_eq!(got, resized);
    let reduced = SegformerProcessor {
        do_reduce_labels: true,
        ..p.clone()
    };
    // HF: 0 -> 255, l -> l - 1, 255 stays 255
    let want: Vec<f64> = resized
        .iter()
        .map(|&l| {
            if l == 0.0 || l == 255.0 {
                255.0
            } else {
                l - 1.0
            }
        })
        .collect();
    let out = reduced.process(&img, Some(&mask)).unwrap();
    let got: Vec<f64> = out.labels.unwrap().iter().map(|&x| x as f64).collect();
    assert_eq!(got, want);
    // not resized: the labels pass through (reduced)
    let same = SegformerProcessor {
        size: None,
        ..reduced
    };
    let out = same.process(&img, Some(&mask)).unwrap();
    let want: Vec<u8> = m
        .iter()
        .map(|&l| if l == 0 || l == 255 { 255 } else { l - 1 })
        .collect();
    assert_eq!(out.labels.unwrap(), want);
    // and the image is untouched
    assert!(out.pixel_values.iter().all(|&x| x == 9.0));
}

#[test]
fn band_indices_pick_bands_in_order_and_bad_inputs_are_refused() {
    let (h, w) = (2, 3);
    let v: Vec<u8> = (0..h * w * 4).map(|i| i as u8).collect();
    let img = Raster::new(w, h, 4, RasterData::U8(v.clone())).unwrap();
    let p = SegformerProcessor {
        size: None,
        do_rescale: false,
        do_normalize: false,
        band_indices: Some(vec![3, 1]),
        ..Default::default()
    };
    assert_eq!(p.output_bands(4), 2);
    assert_eq!(SegformerProcessor::default().output_bands(4), 4);
    let out = p.process(&img, None).unwrap();
    assert_eq!(out.channels, 2);
    let want: Vec<f32> = [3, 1]
        .iter()
        .flat_map(|&b| (0..h * w).map(move |i| (i * 4 + b) as f32))
        .collect();
    assert_eq!(out.pixel_values, want);
    let bad = SegformerProcessor {
        band_indices: Some(vec![4]),
        ..p.clone()
    };
    assert!(bad.process(&img, None).is_err());
    let mask = Mask::new(w, h + 1, vec![0; w * (h + 1)]).unwrap();
    assert!(p.process(&img, Some(&mask)).is_err());
    for size in [(0, 3), (3, 0)] {
        let zero = SegformerProcessor {
            size: Some(size),
            ..p.clone()
        };
        assert!(zero.process(&img, None).is_err(), "{size:?}");
    }
    // empty images cannot be resized, whichever side is empty
    let resize = SegformerProcessor {
        size: Some((2, 2)),
        band_indices: None,
        ..p.clone()
    };
    for (w, h) in [(3, 0), (0, 3)] {
        let empty = Raster::new(w, h, 1, RasterData::U8(vec![])).unwrap();
        assert!(resize.process(&empty, None).is_err(), "{w}x{h}");
    }
    // the fields are public: a raster whose samples do not fit its size, or without bands
    let short = Raster {
        width: 3,
        height: 2,
        bands: 1,
        data: RasterData::U8(vec![0; 5]),
    };
    assert!(resize.process(&short, None).is_err());
    let no_bands = Raster {
        width: 3,
        height: 2,
        bands: 0,
        data: RasterData::U8(vec![]),
    };
    assert!(resize.process(&no_bands, None).is_err());
}

#[test]
fn collate_stacks_samples_and_labels_as_i64() {
    let p = plain((2, 2), Resample::Nearest);
    let a = Raster::new(2, 2, 1, RasterData::U8(vec![1, 2, 3, 4])).unwrap();
    let b = Raster::new(2, 2, 1, RasterData::U8(vec![5, 6, 7, 8])).unwrap();
    let ma = Mask::new(2, 2, vec![0, 1, 255, 1]).unwrap();
    let mb = Mask::new(2, 2, vec![2, 2, 0, 1]).unwrap();
    let (pa, pb) = (
        p.process(&a, Some(&ma)).unwrap(),
        p.process(&b, Some(&mb)).unwrap(),
    );
    let batch = collate(&[pa.clone(), pb.clone()]).unwrap();
    assert_eq!((batch.n, batch.c, batch.h, batch.w), (2, 1, 2, 2));
    assert_eq!(batch.pixel_values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    assert_eq!(batch.labels, Some(vec![0, 1, 255, 1, 2, 2, 0, 1]));
    let unlabelled = p.process(&b, None).unwrap();
    assert!(collate(&[pa.clone(), unlabelled.clone()]).is_err());
    assert!(collate(&[unlabelled.clone(), pa.clone()]).is_err());
    assert_eq!(collate(&[unlabelled.clone()]).unwrap().labels, None);
    let big = plain((3, 2), Resample::Nearest).process(&b, None).unwrap();
    assert!(collate(&[unlabelled, big]).is_err());
    assert!(collate(&[]).is_err());
}

// ---- OpenCV through the Resize transform -------------------------------------------------

fn cv_resize(img: Raster, mask: Option<Mask>, (oh, ow): (usize, usize), interp: &str) -> Raster {
    let toml = format!(
        "[[transforms]]\nname = 'Resize'\nheight = {oh}\nwidth = {ow}\ninterpolation = '{interp}'"
    );
    let (out, m) = Pipeline::from_toml_str(&toml)
        .unwrap()
        .apply_seeded(img, mask, 0, 0, 0)
        .unwrap();
    if let Some(m) = m {
        assert_eq!((m.height, m.width), (oh, ow));
    }
    out
}

fn f32s(r: &Raster) -> Vec<f32> {
    match &r.data {
        RasterData::F32(v) => v.clone(),
        RasterData::U16(v) => v.iter().map(|&x| x as f32).collect(),
        RasterData::U8(v) => v.iter().map(|&x| x as f32).collect(),
    }
}

#[test]
fn cv2_linear_and_nearest_on_float_samples() {
    for (k, &((h, w), (oh, ow))) in SIZES.iter().enumerate() {
        for c in [1, 3] {
            let v = noise(h * w * c, 500 + k as u32 * 10 + c as u32);
            let img = || {
                Raster::new(
                    w,
                    h,
                    c,
                    RasterData::F32(v.iter().map(|&x| x as f32).collect()),
                )
                .unwrap()
            };
            let what = format!("{h}x{w} -> {oh}x{ow}, {c} bands");
            let out = cv_resize(img(), None, (oh, ow), "linear");
            let want = separable(&v, (h, w, c), &cv_linear(w, ow), &cv_linear(h, oh));
            assert_all_close(&f32s(&out), &want, 1e-5, &format!("linear {what}"));
            let out = cv_resize(img(), None, (oh, ow), "nearest");
            let want = separable(&v, (h, w, c), &cv_nearest(w, ow), &cv_nearest(h, oh));
            assert_all_close(&f32s(&out), &want, 0.0, &format!("nearest {what}"));
            // INTER_AREA box-filters shrinking axes; enlarging ones are linear
            let (tx, ty) = (
                if ow < w {
                    cv_area(w, ow)
                } else {
                    cv_linear(w, ow)
                },
                if oh < h {
                    cv_area(h, oh)
                } else {
                    cv_linear(h, oh)
                },
            );
            let out = cv_resize(img(), None, (oh, ow), "area");
            let want = separable(&v, (h, w, c), &tx, &ty);
            assert_all_close(&f32s(&out), &want, 1e-5, &format!("area {what}"));
        }
    }
}

#[test]
fn cv2_integer_samples_round_and_masks_follow_nearest() {
    for (k, &((h, w), (oh, ow))) in SIZES.iter().enumerate() {
        let c = 2;
        let v: Vec<f64> = noise(h * w * c, 600 + k as u32)
            .iter()
            .map(|x| (x * 256.0).floor())
            .collect();
        let m: Vec<u8> = (0..h * w).map(|i| (i * 5 % 7) as u8).collect();
        let want_mask: Vec<u8> = separable(
            &m.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            (h, w, 1),
            &cv_nearest(w, ow),
            &cv_nearest(h, oh),
        )
        .iter()
        .map(|&x| x as u8)
        .collect();
        let what = format!("{h}x{w} -> {oh}x{ow}");
        for interp in ["linear", "area"] {
            let (tx, ty) = if interp == "linear" {
                (cv_linear(w, ow), cv_linear(h, oh))
            } else {
                (
                    if ow < w {
                        cv_area(w, ow)
                    } else {
                        cv_linear(w, ow)
                    },
                    if oh < h {
                        cv_area(h, oh)
                    } else {
                        cv_linear(h, oh)
                    },
                )
            };
            let want = separable(&v, (h, w, c), &tx, &ty);
            // u16 (float taps, rounded once): within rounding of the f64 value
            let img = Raster::new(
                w,
                h,
                c,
                RasterData::U16(v.iter().map(|&x| x as u16 * 250).collect()),
            )
            .unwrap();
            let mask = Mask::new(w, h, m.clone()).unwrap();
            let toml = format!(
                "[[transforms]]\nname = 'Resize'\nheight = {oh}\nwidth = {ow}\ninterpolation = '{interp}'"
            );
            let (out, om) = Pipeline::from_toml_str(&toml)
                .unwrap()
                .apply_seeded(img, Some(mask), 0, 0, 0)
                .unwrap();
            assert_eq!(om.unwrap().data, want_mask, "mask {interp} {what}");
            let scaled: Vec<f64> = want.iter().map(|x| x * 250.0).collect();
            assert_all_close(&f32s(&out), &scaled, 0.51, &format!("u16 {interp} {what}"));
            // u8: OpenCV's 11-bit fixed point for linear, within one grey level
            let img = Raster::new(
                w,
                h,
                c,
                RasterData::U8(v.iter().map(|&x| x as u8).collect()),
            )
            .unwrap();
            let out = cv_resize(img, None, (oh, ow), interp);
            assert_all_close(&f32s(&out), &want, 1.0, &format!("u8 {interp} {what}"));
        }
    }
}
