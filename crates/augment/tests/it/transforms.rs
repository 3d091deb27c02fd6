//! Individual transforms on other sample types and band counts than the fixtures: u16, f32,
//! 4 and 5 bands, mask fill, mmseg's crop rule. References are direct computations.

use augment::AugmentError;
use raster::{Mask, Raster, RasterData};

use crate::common::{f32s, indexed_rgb, indexed_u16, mask_of, pipeline, u8s};

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
    // Gamma fixed at 1.5 on u8: 255 * (x/255)^1.5, truncated like albumentations' table.
    let img = indexed_rgb(4, 5);
    let (out, _) =
        pipeline("[[transforms]]\nname = 'RandomGamma'\np = 1\ngamma_limit = [150, 150]")
            .apply_seeded(img.clone(), None, 0, 0, 0)
            .unwrap();
    for (o, s) in u8s(&out).iter().zip(u8s(&img)) {
        assert_eq!(*o, (255.0 * (*s as f32 / 255.0).powf(1.5)).floor() as u8);
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
        (16, 20, 3, raster::SampleKind::F32)
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
fn tiny_images_never_panic() {
    // Every transform alone on degenerate sizes: an Ok with a consistent mask, or a clear error.
    let transforms = [
        "name = 'HorizontalFlip'\np = 1",
        "name = 'VerticalFlip'\np = 1",
        "name = 'RandomRotate90'\np = 1",
        "name = 'Transpose'\np = 1",
        "name = 'Rotate'\np = 1",
        "name = 'Affine'\np = 1\nscale = [0.5, 2]\nshear = 30",
        "name = 'ShiftScaleRotate'\np = 1\nborder_mode = 'reflect101'",
        "name = 'RandomScale'\np = 1\nscale_limit = 0.9",
        "name = 'RandomResizedCrop'\nheight = 3\nwidth = 2",
        "name = 'RandomCrop'\nheight = 2\nwidth = 2\ncat_max_ratio = 0.5",
        "name = 'CenterCrop'\nheight = 1\nwidth = 1",
        "name = 'PadIfNeeded'\nmin_height = 9\nmin_width = 9\nborder_mode = 'reflect101'",
        "name = 'Resize'\nheight = 5\nwidth = 1\ninterpolation = 'area'",
        "name = 'Resize'\nheight = 1\nwidth = 4",
        "name = 'RandomBrightnessContrast'\np = 1\nbrightness_by_max = false",
        "name = 'RandomGamma'\np = 1",
        "name = 'HueSaturationValue'\np = 1",
        "name = 'GaussNoise'\np = 1\nper_channel = false",
        "name = 'GaussianBlur'\np = 1\nblur_limit = [7, 9]",
        "name = 'ChannelDropout'\np = 1",
        "name = 'Normalize'",
    ];
    for (h, w) in [(1, 1), (1, 7), (3, 2)] {
        for t in transforms {
            let p = pipeline(&format!("[[transforms]]\n{t}"));
            for img in [indexed_rgb(h, w), indexed_u16(h, w, 4)] {
                if let Ok((out, m)) = p.apply_seeded(img, Some(mask_of(h, w)), 0, 0, 0) {
                    let m = m.unwrap();
                    assert_eq!(
                        (m.height, m.width),
                        (out.height, out.width),
                        "{t} on {h}x{w}"
                    );
                    assert_eq!(out.data.len(), out.height * out.width * out.bands, "{t}");
                }
            }
        }
    }
}
