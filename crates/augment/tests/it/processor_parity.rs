//! Parity with HF's `SegformerImageProcessor` (PIL backend, transformers 5.24): the
//! `processor-*` fixtures' PNGs through our processor, labels exact, pixels within 1e-6.

use augment::SegformerProcessor;
use raster::{Mask, Raster, RasterData};

use crate::common::{Tensors, fixture_dir, max_abs_diff};

fn load(case: &str) -> (Raster, Mask) {
    let dir = fixture_dir(case);
    let img = image::open(dir.join("image.png"))
        .expect("image.png")
        .to_rgb8();
    let (w, h) = img.dimensions();
    let raster = Raster::new(w as usize, h as usize, 3, RasterData::U8(img.into_raw())).unwrap();
    let m = image::open(dir.join("mask.png"))
        .expect("mask.png")
        .to_luma8();
    let mask = Mask::new(w as usize, h as usize, m.into_raw()).unwrap();
    (raster, mask)
}

fn check(case: &str, size: (usize, usize), reduce: bool) {
    let (image, mask) = load(case);
    let proc = SegformerProcessor {
        size: Some(size),
        do_reduce_labels: reduce,
        ..Default::default()
    };
    let out = proc.process(&image, Some(&mask)).unwrap();
    let fx = Tensors::open(case);
    let (shape, want) = fx.f32s("pixel_values");
    assert_eq!(shape, vec![1, 3, size.0, size.1]);
    assert_eq!((out.channels, out.height, out.width), (3, size.0, size.1));
    let (d, i) = max_abs_diff(&out.pixel_values, &want);
    eprintln!("{case}: max |pixel diff| {d}");
    // One grey level is 1 / 255 / std ≈ 0.017 here, so 1e-6 means every resized sample is
    // Pillow's exactly; what remains is HF's f32 `(x / 255 - mean) / std` against our
    // correctly rounded f64 affine: measured 4.8e-7 (2 ulp at |x| ≈ 2.6) on both cases.
    assert!(d <= 1e-6, "{case}: max |pixel diff| {d} at {i}");
    let (lshape, labels) = fx.i64s("labels");
    assert_eq!(lshape, vec![1, size.0, size.1]);
    let got: Vec<i64> = out.labels.unwrap().iter().map(|&l| l as i64).collect();
    let bad = got.iter().zip(&labels).filter(|(a, b)| a != b).count();
    assert_eq!(bad, 0, "{case}: {bad} labels differ");
}

#[test]
fn downscale_300x200_to_128x128() {
    check("processor-300x200", (128, 128), false);
}

#[test]
fn reduce_labels_70x90_to_48x64() {
    check("processor-reduce-labels", (64, 48), true);
}
