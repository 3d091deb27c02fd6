//! The texture task: deterministic, balanced, the same colour distribution in both classes,
//! and stripes that run the way the mask says.

use tiles::{RasterData, TextureOptions, generate_texture_sample, prepare_texture};

fn opts() -> TextureOptions {
    TextureOptions {
        count: 12,
        size: 64,
        seed: 5,
        ..Default::default()
    }
}

/// Whether a pixel is the darker stripe colour (green bands 0.42 vs 0.40 are too close to
/// tell; red is 0.25 vs 0.52, far beyond the noise).
fn is_dark(rgb: &[u8]) -> bool {
    f32::from(rgb[0]) / 255.0 < (0.25 + 0.52) / 2.0
}

#[test]
fn classes_share_colours_and_differ_in_stripe_direction() {
    let o = opts();
    assert_eq!(
        generate_texture_sample(&o, 3),
        generate_texture_sample(&o, 3)
    );
    assert_ne!(
        generate_texture_sample(&o, 3),
        generate_texture_sample(&o, 4)
    );
    // [class] -> (pixels, dark pixels, neighbours along the stripes with the same shade,
    // neighbours across them with the same shade)
    let mut tally = [[0usize; 4]; 2];
    let s = o.size;
    for i in 0..o.count {
        let (image, mask) = generate_texture_sample(&o, i);
        let RasterData::U8(px) = &image.data else {
            panic!("u8 image")
        };
        let dark = |y: usize, x: usize| is_dark(&px[(y * s + x) * 3..][..3]);
        for y in 0..s - 1 {
            for x in 0..s - 1 {
                let c = mask.data[y * s + x] as usize;
                let t = &mut tally[c];
                t[0] += 1;
                t[1] += dark(y, x) as usize;
                // Only pairs inside one region: both neighbours of the same class.
                let (right, down) = (mask.data[y * s + x + 1], mask.data[(y + 1) * s + x]);
                if right as usize == c && down as usize == c {
                    let same_right = (dark(y, x) == dark(y, x + 1)) as usize;
                    let same_down = (dark(y, x) == dark(y + 1, x)) as usize;
                    // Horizontal stripes (0) run along x, vertical ones (1) along y.
                    let (along, across) = if c == 0 {
                        (same_right, same_down)
                    } else {
                        (same_down, same_right)
                    };
                    t[2] += along;
                    t[3] += across;
                }
            }
        }
    }
    let total = (tally[0][0] + tally[1][0]) as f64;
    let share1 = tally[1][0] as f64 / total;
    assert!((0.35..0.65).contains(&share1), "class balance {share1}");
    for (c, t) in tally.iter().enumerate() {
        let dark_share = t[1] as f64 / t[0] as f64;
        assert!(
            (dark_share - 0.5).abs() < 0.03,
            "class {c}: {dark_share} of its pixels dark"
        );
        // Along the stripes the shade changes only where two regions of the class meet (or
        // the noise crosses the midpoint); across a period of 6 it changes at every third pixel.
        let pairs = t[2].max(t[3]) as f64;
        let (along, across) = (t[2] as f64 / pairs, t[3] as f64 / pairs);
        assert!(
            along > 0.98,
            "class {c}: {along} of pairs along the stripes agree"
        );
        assert!(
            (across - 2.0 / 3.0).abs() < 0.05,
            "class {c}: {across} across"
        );
    }
}

#[test]
fn prepared_texture_dataset_loads() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts();
    o.out = d.path().to_path_buf();
    let r = prepare_texture(&o).unwrap();
    assert_eq!(r.meta.classes, ["horizontal_stripes", "vertical_stripes"]);
    assert_eq!(r.meta.splits["train"] + r.meta.splits["val"], 12);
    // Sample 0 goes to val (val samples are spread evenly from the first).
    let val = tiles::SegDataset::open(d.path(), "val").unwrap();
    let s = val.get(0).unwrap();
    assert_eq!(s.image, generate_texture_sample(&o, 0).0);
    let mut odd = opts();
    odd.period = 5;
    odd.out = d.path().join("odd");
    assert!(
        prepare_texture(&odd)
            .unwrap_err()
            .to_string()
            .contains("period")
    );
}
