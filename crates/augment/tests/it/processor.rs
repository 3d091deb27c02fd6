//! Processor behaviour beyond the HF fixtures: other sample types and band counts, collation.

use augment::{SegformerProcessor, collate};
use raster::{Mask, Raster, RasterData};

#[test]
fn u16_four_band_rescales_by_type_max_and_normalises_per_band() {
    let (h, w, c) = (3, 5, 4);
    let samples: Vec<u16> = (0..h * w * c).map(|i| (i * 997 % 65536) as u16).collect();
    let img = Raster::new(w, h, c, RasterData::U16(samples.clone())).unwrap();
    let proc = SegformerProcessor {
        size: None,
        image_mean: vec![0.1, 0.2, 0.3, 0.4],
        image_std: vec![0.2, 0.2, 0.1, 0.1],
        ..Default::default()
    };
    let out = proc.process(&img, None).unwrap();
    assert_eq!((out.channels, out.height, out.width), (4, 3, 5));
    for b in 0..c {
        for i in 0..h * w {
            let want =
                (samples[i * c + b] as f32 / 65535.0 - proc.image_mean[b]) / proc.image_std[b];
            let got = out.pixel_values[b * h * w + i];
            assert!(
                (got - want).abs() < 1e-5,
                "band {b} pixel {i}: {got} vs {want}"
            );
        }
    }
    // ImageNet's three values on four bands: an error naming the counts.
    let err = SegformerProcessor::default()
        .process(&img, None)
        .unwrap_err();
    assert!(err.to_string().contains("4 bands"), "{err}");
}

#[test]
fn u16_bilinear_downscale_of_a_constant_is_constant_and_masks_follow() {
    let img = Raster::new(40, 30, 2, RasterData::U16(vec![30000; 40 * 30 * 2])).unwrap();
    let mask = Mask::new(
        40,
        30,
        (0..1200).map(|i| if i % 40 < 20 { 1 } else { 2 }).collect(),
    )
    .unwrap();
    let proc = SegformerProcessor {
        size: Some((15, 20)),
        do_normalize: false,
        ..Default::default()
    };
    let out = proc.process(&img, Some(&mask)).unwrap();
    assert!(
        out.pixel_values
            .iter()
            .all(|v| (v - 30000.0 / 65535.0).abs() < 1e-5)
    );
    let labels = out.labels.unwrap();
    // Left half class 1, right half class 2, at half resolution.
    for y in 0..15 {
        assert_eq!(&labels[y * 20..y * 20 + 10], &[1; 10]);
        assert_eq!(&labels[y * 20 + 10..y * 20 + 20], &[2; 10]);
    }
}

#[test]
fn collate_stacks_and_rejects_mismatches() {
    let proc = SegformerProcessor {
        size: Some((4, 4)),
        ..Default::default()
    };
    let img = |v: u8| Raster::new(6, 6, 3, RasterData::U8(vec![v; 108])).unwrap();
    let mask = Mask::new(6, 6, vec![1; 36]).unwrap();
    let a = proc.process(&img(10), Some(&mask)).unwrap();
    let b = proc.process(&img(200), Some(&mask)).unwrap();
    let batch = collate(&[a.clone(), b.clone()]).unwrap();
    assert_eq!((batch.n, batch.c, batch.h, batch.w), (2, 3, 4, 4));
    assert_eq!(&batch.pixel_values[..48], a.pixel_values.as_slice());
    assert_eq!(&batch.pixel_values[48..], b.pixel_values.as_slice());
    assert_eq!(batch.labels, Some(vec![1i64; 32]));
    let unlabelled = proc.process(&img(10), None).unwrap();
    assert!(collate(&[a.clone(), unlabelled]).is_err());
    let other = SegformerProcessor {
        size: Some((5, 4)),
        ..Default::default()
    }
    .process(&img(1), Some(&mask))
    .unwrap();
    assert!(
        collate(&[a, other])
            .unwrap_err()
            .to_string()
            .contains("item 1")
    );
    assert!(collate(&[]).is_err());
}

#[test]
fn processor_settings_deserialise_with_defaults_and_reject_unknown_keys() {
    let p: SegformerProcessor =
        toml::from_str("size = [256, 128]\ndo_reduce_labels = true").unwrap();
    assert_eq!(p.size, Some((256, 128)));
    assert!(p.do_reduce_labels && p.do_normalize && p.do_rescale);
    assert_eq!(p.image_mean, SegformerProcessor::default().image_mean);
    let err = toml::from_str::<SegformerProcessor>("sise = [1, 1]")
        .unwrap_err()
        .to_string();
    assert!(err.contains("sise") && err.contains("size"), "{err}");
}
