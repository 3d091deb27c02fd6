//! Behaviour of pipelines beyond the fixtures: determinism, probabilities, sample types and
//! band counts, mask fill, and config errors. References are direct computations in the test.

mod common;

use augment::{AugmentError, Pipeline, PipelineConfig, SampleRng};
use common::{f32s, u8s};
use tiles::{Mask, Raster, RasterData};

/// A `h × w × bands` u16 raster whose samples encode their position: `(y*w + x)*bands + b`.
fn indexed_u16(h: usize, w: usize, bands: usize) -> Raster {
    Raster::new(
        w,
        h,
        bands,
        RasterData::U16((0..h * w * bands).map(|i| (i * 7 % 65536) as u16).collect()),
    )
    .unwrap()
}

fn indexed_rgb(h: usize, w: usize) -> Raster {
    Raster::new(
        w,
        h,
        3,
        RasterData::U8((0..h * w * 3).map(|i| (i * 31 % 251) as u8).collect()),
    )
    .unwrap()
}

fn mask_of(h: usize, w: usize) -> Mask {
    Mask::new(w, h, (0..h * w).map(|i| (i % 5) as u8).collect()).unwrap()
}

fn pipeline(toml: &str) -> Pipeline {
    Pipeline::from_toml_str(toml).unwrap_or_else(|e| panic!("{e}"))
}

fn config_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../configs/augment")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn same_seed_epoch_index_gives_same_sample_whatever_the_thread_order() {
    let p = pipeline(&config_file("default-satellite.toml"));
    let run = |i: u64| {
        p.apply_seeded(indexed_u16(16, 12, 4), Some(mask_of(16, 12)), 9, 3, i)
            .unwrap()
    };
    let sequential: Vec<_> = (0..16).map(run).collect();
    // Two threads, each taking every other index, in reverse order.
    let mut threaded: Vec<_> = std::thread::scope(|s| {
        let a = s.spawn(|| {
            (0..16)
                .rev()
                .step_by(2)
                .map(|i| (i, run(i)))
                .collect::<Vec<_>>()
        });
        let b = s.spawn(|| {
            (0..15)
                .rev()
                .step_by(2)
                .map(|i| (i, run(i)))
                .collect::<Vec<_>>()
        });
        let mut v = a.join().unwrap();
        v.extend(b.join().unwrap());
        v
    });
    threaded.sort_by_key(|(i, _)| *i);
    for (i, out) in threaded {
        assert_eq!(out, sequential[i as usize], "sample {i}");
    }
    // And the stream does change with the index and the epoch.
    let distinct = (0..16).filter(|&i| sequential[i] != sequential[0]).count();
    assert!(
        distinct > 8,
        "only {distinct} of 16 samples differ from sample 0"
    );
    let same_epoch = p
        .apply_seeded(indexed_u16(16, 12, 4), Some(mask_of(16, 12)), 9, 3, 5)
        .unwrap();
    assert_eq!(same_epoch, sequential[5]);
    let differ = (0..32)
        .filter(|&i| {
            run(i)
                != p.apply_seeded(indexed_u16(16, 12, 4), Some(mask_of(16, 12)), 9, 4, i)
                    .unwrap()
        })
        .count();
    assert!(
        differ > 16,
        "epoch change altered only {differ} of 32 samples"
    );
}

#[test]
fn original_flips_apply_each_with_probability_0_3() {
    // On a 1×2 image, hflip swaps the two pixels; count how often over many samples.
    let p = pipeline("[[transforms]]\nname = 'HorizontalFlip'\np = 0.3");
    let img = Raster::new(2, 1, 1, RasterData::U8(vec![1, 2])).unwrap();
    let n = 4000;
    let flipped = (0..n)
        .filter(|&i| u8s(&p.apply_seeded(img.clone(), None, 5, 0, i).unwrap().0) == [2, 1])
        .count();
    let rate = flipped as f64 / n as f64;
    // Binomial sd = sqrt(0.21 / 4000) ≈ 0.0072; allow 4 sd.
    assert!((rate - 0.3).abs() < 0.03, "flip rate {rate}");

    // The shipped original pipeline: a square image stays itself with probability
    // P(no hflip, no vflip, no rot90-or-rot90-by-0) = 0.7 * 0.7 * (0.7 + 0.3/4) plus the
    // identity-composing combinations (hflip+vflip+rot180 etc.); compare against a direct simulation
    // of the three independent events instead of a closed form.
    let orig = pipeline(&config_file("original-flips.toml"));
    let sq = Raster::new(2, 2, 1, RasterData::U8(vec![1, 2, 3, 4])).unwrap();
    let unchanged = (0..n)
        .filter(|&i| orig.apply_seeded(sq.clone(), None, 1, 0, i).unwrap().0 == sq)
        .count() as f64
        / n as f64;
    // Identity happens for (no h, no v, k=0 or no rot) and (h, v, k=2): 0.49*(0.7+0.075) + 0.09*0.075.
    let expected = 0.49 * 0.775 + 0.09 * 0.075;
    assert!(
        (unchanged - expected).abs() < 0.035,
        "identity rate {unchanged}, expected {expected}"
    );
}

#[test]
fn one_of_picks_by_weight_and_some_of_picks_exactly_n() {
    let img = Raster::new(2, 2, 1, RasterData::U8(vec![1, 2, 3, 4])).unwrap();
    let (h, v) = (vec![2, 1, 4, 3], vec![3, 4, 1, 2]);
    let one_of = pipeline(
        "[[transforms]]\nname = 'OneOf'\n[[transforms.transforms]]\nname = 'HorizontalFlip'\np = 0.8\n[[transforms.transforms]]\nname = 'VerticalFlip'\np = 0.2",
    );
    let n = 2000;
    let mut hs = 0;
    for i in 0..n {
        let out = one_of.apply_seeded(img.clone(), None, 2, 0, i).unwrap().0;
        match u8s(&out) {
            o if o == h.as_slice() => hs += 1,
            o if o == v.as_slice() => {}
            o => panic!("OneOf applied neither or both: {o:?}"),
        }
    }
    let rate = hs as f64 / n as f64;
    assert!((rate - 0.8).abs() < 0.04, "HorizontalFlip chosen {rate}");

    let some_of = pipeline(
        "[[transforms]]\nname = 'SomeOf'\nn = 1\n[[transforms.transforms]]\nname = 'HorizontalFlip'\np = 1\n[[transforms.transforms]]\nname = 'VerticalFlip'\np = 1",
    );
    let picks: Vec<Vec<u8>> = (0..200)
        .map(|i| u8s(&some_of.apply_seeded(img.clone(), None, 2, 0, i).unwrap().0).to_vec())
        .collect();
    assert!(
        picks.iter().all(|o| *o == h || *o == v),
        "SomeOf n=1 must apply exactly one flip"
    );
    assert!(picks.contains(&h) && picks.contains(&v));
}

#[test]
fn geometric_transforms_handle_u16_four_band_images() {
    // Reference: direct index arithmetic per pixel, all four bands kept together.
    let (h, w, c) = (5, 7, 4);
    let img = indexed_u16(h, w, c);
    let RasterData::U16(src) = &img.data else {
        unreachable!()
    };
    let at = |y: usize, x: usize| &src[(y * w + x) * c..(y * w + x + 1) * c];
    let p = pipeline(
        "[[transforms]]\nname = 'Transpose'\np = 1\n[[transforms]]\nname = 'HorizontalFlip'\np = 1",
    );
    let (out, mask) = p
        .apply_seeded(img.clone(), Some(mask_of(h, w)), 0, 0, 0)
        .unwrap();
    // transpose then hflip = rotate 90° clockwise: out[i][j] = in[H-1-j][i], shape [W, H].
    assert_eq!((out.height, out.width, out.bands), (w, h, c));
    let RasterData::U16(o) = &out.data else {
        panic!("sample type changed")
    };
    for i in 0..w {
        for j in 0..h {
            assert_eq!(
                &o[(i * h + j) * c..(i * h + j + 1) * c],
                at(h - 1 - j, i),
                "pixel ({i}, {j})"
            );
        }
    }
    let m = mask_of(h, w);
    let mask = mask.unwrap();
    for i in 0..w {
        for j in 0..h {
            assert_eq!(mask.data[i * h + j], m.data[(h - 1 - j) * w + i]);
        }
    }
}

#[test]
fn normalize_uses_per_band_statistics_on_u16() {
    let img = indexed_u16(3, 4, 4);
    let p = pipeline(
        "[[transforms]]\nname = 'Normalize'\nmean = [0.1, 0.2, 0.3, 0.4]\nstd = [0.5, 0.25, 0.2, 0.1]",
    );
    let (out, _) = p.apply_seeded(img.clone(), None, 0, 0, 0).unwrap();
    let RasterData::U16(src) = &img.data else {
        unreachable!()
    };
    let (mean, std) = ([0.1f32, 0.2, 0.3, 0.4], [0.5f32, 0.25, 0.2, 0.1]);
    for (i, (&got, &s)) in f32s(&out).iter().zip(src).enumerate() {
        // Default max_pixel_value for u16 is 65535.
        let want = (s as f32 / 65535.0 - mean[i % 4]) / std[i % 4];
        assert!((got - want).abs() < 1e-4, "sample {i}: {got} vs {want}");
    }
    // ImageNet's three means on four bands is a clear error, not a panic.
    let err = pipeline("[[transforms]]\nname = 'Normalize'")
        .apply_seeded(img, None, 0, 0, 0)
        .unwrap_err();
    assert!(
        matches!(err, AugmentError::Unsupported { .. }) && err.to_string().contains("4 bands"),
        "{err}"
    );
}

#[test]
fn hue_saturation_value_rejects_non_rgb() {
    let p = pipeline("[[transforms]]\nname = 'HueSaturationValue'\np = 1");
    let err = p
        .apply_seeded(indexed_u16(4, 4, 4), None, 0, 0, 0)
        .unwrap_err();
    assert!(
        err.to_string().contains("HueSaturationValue") && err.to_string().contains("4 bands"),
        "{err}"
    );
    // On RGB it runs and keeps the size.
    let (out, _) = p.apply_seeded(indexed_rgb(4, 4), None, 0, 0, 0).unwrap();
    assert_eq!((out.height, out.width, out.bands), (4, 4, 3));
}

#[test]
fn new_mask_pixels_are_255() {
    let (h, w) = (21, 21);
    let mask = Mask::new(w, h, vec![1; h * w]).unwrap();
    // A 45° rotation uncovers the corners.
    let rot = pipeline("[[transforms]]\nname = 'Rotate'\np = 1\nlimit = [45, 45]");
    let (img, m) = rot
        .apply_seeded(indexed_rgb(h, w), Some(mask.clone()), 0, 0, 0)
        .unwrap();
    let m = m.unwrap();
    for (y, x) in [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)] {
        assert_eq!(m.data[y * w + x], 255, "corner ({y}, {x})");
        assert_eq!(
            &u8s(&img)[(y * w + x) * 3..(y * w + x + 1) * 3],
            &[0, 0, 0],
            "image corner fill"
        );
    }
    assert_eq!(m.data[(h / 2) * w + w / 2], 1, "centre keeps its class");
    // Constant padding: mask 255 outside, image 0; the original pixels untouched.
    let pad = pipeline("[[transforms]]\nname = 'PadIfNeeded'\nmin_height = 25\nmin_width = 23");
    let (img2, m2) = pad
        .apply_seeded(indexed_rgb(h, w), Some(mask), 0, 0, 0)
        .unwrap();
    let m2 = m2.unwrap();
    assert_eq!((m2.height, m2.width), (25, 23));
    assert_eq!(
        m2.data.iter().filter(|&&v| v == 255).count(),
        25 * 23 - h * w
    );
    assert_eq!(
        m2.data[2 * 23 + 1],
        1,
        "top pad is 2 rows, left pad 1 column"
    );
    assert_eq!(&u8s(&img2)[..3], &[0, 0, 0]);
}

#[test]
fn random_crop_cat_max_ratio_retries_like_mmseg() {
    // 64×64 mask: class 0 everywhere except a 16×16 block of class 1 in one corner.
    let (h, w, ch, ratio) = (64, 64, 24, 0.9f64);
    let mut data = vec![0u8; h * w];
    for y in 0..16 {
        data[y * w..y * w + 16].fill(1);
    }
    let mask = Mask::new(w, h, data).unwrap();
    // mmseg's acceptance rule for one window, from its class counts.
    let accepted = |m: &[u8]| {
        let ones = m.iter().filter(|&&v| v == 1).count() as f64;
        ones > 0.0
            && ones < m.len() as f64
            && (ones.max(m.len() as f64 - ones) / m.len() as f64) < ratio
    };
    // q: the fraction of all (64-24+1)^2 windows that pass, by enumeration.
    let n_pos = h - ch + 1;
    let pass = (0..n_pos)
        .flat_map(|y| (0..n_pos).map(move |x| (y, x)))
        .filter(|&(y0, x0)| {
            let win: Vec<u8> = (y0..y0 + ch)
                .flat_map(|y| mask.data[y * w + x0..y * w + x0 + ch].to_vec())
                .collect();
            accepted(&win)
        })
        .count();
    let q = pass as f64 / (n_pos * n_pos) as f64;
    let n = 600;
    let rate = |toml: &str| {
        let p = pipeline(toml);
        let hits = (0..n)
            .filter(|&i| {
                let m = p
                    .apply_seeded(indexed_rgb(h, w), Some(mask.clone()), 3, 0, i)
                    .unwrap()
                    .1
                    .unwrap();
                assert_eq!((m.height, m.width), (ch, ch));
                accepted(&m.data)
            })
            .count();
        hits as f64 / n as f64
    };
    let plain = rate("[[transforms]]\nname = 'RandomCrop'\nheight = 24\nwidth = 24");
    let guarded =
        rate("[[transforms]]\nname = 'RandomCrop'\nheight = 24\nwidth = 24\ncat_max_ratio = 0.9");
    // Ten draws, stopping at the first accepted one.
    let expect = 1.0 - (1.0 - q).powi(10);
    let sd = |p: f64| (p * (1.0 - p) / n as f64).sqrt();
    assert!((plain - q).abs() < 4.0 * sd(q), "plain {plain} vs q {q}");
    assert!(
        (guarded - expect).abs() < 4.0 * sd(expect),
        "guarded {guarded} vs {expect}"
    );
}

#[test]
fn area_resize_averages_u16_blocks() {
    let img = indexed_u16(4, 6, 2);
    let p =
        pipeline("[[transforms]]\nname = 'Resize'\nheight = 2\nwidth = 3\ninterpolation = 'area'");
    let (out, _) = p
        .apply_seeded(img.clone(), Some(mask_of(4, 6)), 0, 0, 0)
        .unwrap();
    let (RasterData::U16(o), RasterData::U16(s)) = (&out.data, &img.data) else {
        panic!()
    };
    for y in 0..2 {
        for x in 0..3 {
            for b in 0..2 {
                let sum: f64 = [(0, 0), (0, 1), (1, 0), (1, 1)]
                    .iter()
                    .map(|(dy, dx)| s[((2 * y + dy) * 6 + 2 * x + dx) * 2 + b] as f64)
                    .sum();
                assert_eq!(o[(y * 3 + x) * 2 + b], (sum / 4.0).round() as u16);
            }
        }
    }
}

#[test]
fn photometric_transforms_follow_their_formulas() {
    // Gamma fixed at 1.5 on u8: 255 * (x/255)^1.5, rounded.
    let img = indexed_rgb(4, 5);
    let (out, _) =
        pipeline("[[transforms]]\nname = 'RandomGamma'\np = 1\ngamma_limit = [150, 150]")
            .apply_seeded(img.clone(), None, 0, 0, 0)
            .unwrap();
    for (o, s) in u8s(&out).iter().zip(u8s(&img)) {
        assert_eq!(*o, (255.0 * (*s as f32 / 255.0).powf(1.5)).round() as u8);
    }
    // Gaussian noise of std 0.1 on a constant f32 image.
    let flat = Raster::new(64, 64, 2, RasterData::F32(vec![0.5; 64 * 64 * 2])).unwrap();
    let (noisy, _) = pipeline("[[transforms]]\nname = 'GaussNoise'\np = 1\nstd_range = [0.1, 0.1]")
        .apply_seeded(flat, None, 0, 0, 0)
        .unwrap();
    let v = f32s(&noisy);
    let mean = v.iter().sum::<f32>() / v.len() as f32;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt();
    assert!(
        (mean - 0.5).abs() < 0.01 && (sd - 0.1).abs() < 0.01,
        "mean {mean} sd {sd}"
    );
    // ChannelDropout of exactly 2 of 5 bands.
    let five = Raster::new(3, 3, 5, RasterData::U16(vec![100; 45])).unwrap();
    let (dropped, _) =
        pipeline("[[transforms]]\nname = 'ChannelDropout'\np = 1\nchannel_drop_range = [2, 2]")
            .apply_seeded(five, None, 0, 0, 0)
            .unwrap();
    let RasterData::U16(d) = &dropped.data else {
        panic!()
    };
    let zero_bands: Vec<usize> = (0..5)
        .filter(|&b| d.iter().skip(b).step_by(5).all(|&s| s == 0))
        .collect();
    assert_eq!(zero_bands.len(), 2);
    assert!(d.iter().all(|&s| s == 0 || s == 100));
}

#[test]
fn every_transform_runs_on_rgb_and_multiband() {
    // A pipeline naming every transform at p = 1 (HueSaturationValue only for RGB), on u8 RGB
    // and on f32 4-band, keeping the mask in step with the image.
    let common = r#"
        [[transforms]]
        name = "PadIfNeeded"
        min_height = 40
        min_width = 40
        border_mode = "reflect101"
        [[transforms]]
        name = "Rotate"
        p = 1
        [[transforms]]
        name = "Affine"
        p = 1
        scale = [0.9, 1.1]
        translate_percent = 0.1
        rotate = 10
        shear = 5
        [[transforms]]
        name = "ShiftScaleRotate"
        p = 1
        [[transforms]]
        name = "RandomScale"
        p = 1
        [[transforms]]
        name = "RandomResizedCrop"
        height = 32
        width = 30
        [[transforms]]
        name = "RandomCrop"
        height = 28
        width = 28
        [[transforms]]
        name = "CenterCrop"
        height = 24
        width = 26
        [[transforms]]
        name = "RandomBrightnessContrast"
        p = 1
        [[transforms]]
        name = "RandomGamma"
        p = 1
        [[transforms]]
        name = "GaussNoise"
        p = 1
        [[transforms]]
        name = "GaussianBlur"
        p = 1
        [[transforms]]
        name = "ChannelDropout"
        p = 1
        [[transforms]]
        name = "Resize"
        height = 16
        width = 20
    "#;
    let rgb = pipeline(&format!(
        "{common}\n[[transforms]]\nname = \"HueSaturationValue\"\np = 1\n[[transforms]]\nname = \"Normalize\""
    ));
    let (out, m) = rgb
        .apply_seeded(indexed_rgb(30, 33), Some(mask_of(30, 33)), 1, 1, 1)
        .unwrap();
    assert_eq!(
        (out.height, out.width, out.bands, out.kind()),
        (16, 20, 3, tiles::SampleKind::F32)
    );
    assert_eq!(m.map(|m| (m.height, m.width)), Some((16, 20)));
    let four = Raster::new(
        33,
        30,
        4,
        RasterData::F32((0..30 * 33 * 4).map(|i| (i % 97) as f32 / 97.0).collect()),
    )
    .unwrap();
    let multi = pipeline(&format!(
        "{common}\n[[transforms]]\nname = \"Normalize\"\nmean = [0.5]\nstd = [0.25]"
    ));
    let (out, m) = multi
        .apply_seeded(four, Some(mask_of(30, 33)), 1, 1, 1)
        .unwrap();
    assert_eq!((out.height, out.width, out.bands), (16, 20, 4));
    assert_eq!(m.map(|m| m.data.len()), Some(16 * 20));
    assert!(f32s(&out).iter().all(|v| v.is_finite()));
}

#[test]
fn unknown_transform_is_named_with_the_valid_ones() {
    let err = PipelineConfig::from_toml_str("[[transforms]]\nname = 'HorizontalFlipp'\np = 0.3")
        .unwrap_err()
        .to_string();
    assert!(err.contains("HorizontalFlipp"), "{err}");
    for valid in ["HorizontalFlip", "RandomRotate90", "SomeOf", "Normalize"] {
        assert!(err.contains(valid), "valid name {valid} not listed: {err}");
    }
}

#[test]
fn unknown_parameter_is_named_with_the_valid_ones() {
    let err = PipelineConfig::from_toml_str("[[transforms]]\nname = 'Rotate'\nlimt = 30")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("limt") && err.contains("`limit`") && err.contains("`border_mode`"),
        "{err}"
    );
    // Also inside a nested group.
    let err = PipelineConfig::from_toml_str(
        "[[transforms]]\nname = 'OneOf'\n[[transforms.transforms]]\nname = 'GaussNoise'\nstd = 0.1",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`std`") && err.contains("std_range"), "{err}");
}

#[test]
fn out_of_range_values_name_their_key() {
    let cases = [
        (
            "[[transforms]]\nname = 'HorizontalFlip'\np = 1.5",
            "transforms[0].p",
        ),
        (
            "[[transforms]]\nname = 'VerticalFlip'\n[[transforms]]\nname = 'CenterCrop'\nheight = 10",
            "transforms[1].width",
        ),
        (
            "[[transforms]]\nname = 'OneOf'\n[[transforms.transforms]]\nname = 'GaussianBlur'\nblur_limit = [4, 4]",
            "transforms[0].transforms[0].blur_limit",
        ),
        (
            "[[transforms]]\nname = 'SomeOf'\nn = 3\n[[transforms.transforms]]\nname = 'Transpose'",
            "transforms[0].n",
        ),
        (
            "[[transforms]]\nname = 'Normalize'\nmean = [0.5, 0.5]\nstd = [0.2]",
            "transforms[0].mean",
        ),
    ];
    for (toml, key) in cases {
        let err = Pipeline::from_toml_str(toml).unwrap_err();
        assert!(
            matches!(&err, AugmentError::InvalidParameter { key: k, .. } if k == key),
            "{toml}: {err}"
        );
    }
    // A crop larger than the image is reported at run time with the fix.
    let err = pipeline("[[transforms]]\nname = 'RandomCrop'\nheight = 64\nwidth = 64")
        .apply_seeded(indexed_rgb(8, 8), None, 0, 0, 0)
        .unwrap_err();
    assert!(err.to_string().contains("PadIfNeeded"), "{err}");
}

#[test]
fn pipeline_embeds_in_a_larger_config() {
    #[derive(serde::Deserialize)]
    struct TrainLike {
        #[allow(dead_code)]
        epochs: u32,
        augment: PipelineConfig,
    }
    let text = format!(
        "epochs = 3\n[augment]\n{}",
        config_file("original-flips.toml").replace("[[transforms]]", "[[augment.transforms]]")
    );
    let t: TrainLike = toml::from_str(&text).unwrap();
    assert_eq!(
        t.augment,
        PipelineConfig::from_toml_str(&config_file("original-flips.toml")).unwrap()
    );
    assert_eq!(t.augment.transforms.len(), 3);
    Pipeline::new(&t.augment).unwrap();
}

#[test]
fn shipped_configs_build() {
    for name in ["original-flips.toml", "default-satellite.toml"] {
        let p = pipeline(&config_file(name));
        let mut rng = SampleRng::new(0, 0, 0);
        let (img, m) = p
            .apply(indexed_u16(32, 32, 4), Some(mask_of(32, 32)), &mut rng)
            .unwrap();
        assert_eq!(
            (img.bands, m.unwrap().data.len()),
            (4, img.height * img.width),
            "{name}"
        );
    }
}
