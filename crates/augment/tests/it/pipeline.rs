//! Pipeline behaviour beyond the fixtures: determinism by (seed, epoch, index), probabilities,
//! composition, and config loading and errors.

use augment::{AugmentError, Pipeline, PipelineConfig, SampleRng};
use raster::{Raster, RasterData};

use crate::common::{config_file, indexed_rgb, indexed_u16, mask_of, pipeline, u8s};

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

#[test]
fn malformed_samples_are_errors_not_panics() {
    let p = pipeline(&config_file("default-satellite.toml"));
    let empty = Raster::new(0, 4, 3, RasterData::U8(vec![])).unwrap();
    assert!(
        p.apply_seeded(empty, None, 0, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
    let small_mask = raster::Mask::new(3, 3, vec![0; 9]).unwrap();
    let err = p
        .apply_seeded(indexed_rgb(4, 4), Some(small_mask), 0, 0, 0)
        .unwrap_err();
    assert!(matches!(err, AugmentError::Shape(_)), "{err}");
}
