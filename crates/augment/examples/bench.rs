//! Throughput of the original flips/rot90 pipeline (+ Normalize, + the SegFormer processor) on
//! 512×512 tiles, single-threaded. Run in release:
//!
//! ```text
//! cargo run --release -p augment --example bench
//! ```
//!
//! Compare with `bench/albu_bench.py` (albumentations 2.0.8); figures go to `BENCH.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use augment::{Pipeline, SegformerProcessor};
use raster::{Mask, Raster, RasterData};

const ORIGINAL: &str = include_str!("../../../configs/augment/original-flips.toml");

/// Tiles per second of `f` over at least `budget` of wall time (after a short warm-up).
fn rate(budget: Duration, mut f: impl FnMut(u64)) -> f64 {
    for i in 0..20 {
        f(i);
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        f(n);
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A named benchmark body, called with the sample index.
type Case<'a> = (&'static str, Box<dyn FnMut(u64) + 'a>);

fn main() {
    let budget = Duration::from_secs_f64(
        std::env::var("BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0),
    );
    let (h, w) = (512, 512);
    let rgb = Raster::new(
        w,
        h,
        3,
        RasterData::U8((0..h * w * 3).map(|i| (i * 31 % 251) as u8).collect()),
    )
    .unwrap();
    let u16x4 = Raster::new(
        w,
        h,
        4,
        RasterData::U16((0..h * w * 4).map(|i| (i * 997 % 65536) as u16).collect()),
    )
    .unwrap();
    let mask = Mask::new(w, h, (0..h * w).map(|i| (i % 7) as u8).collect()).unwrap();

    let flips = Pipeline::from_toml_str(ORIGINAL).unwrap();
    let flips_norm_rgb = Pipeline::from_toml_str(&format!(
        "{ORIGINAL}\n[[transforms]]\nname = \"Normalize\"\nmax_pixel_value = 255.0"
    ))
    .unwrap();
    let flips_norm_4 = Pipeline::from_toml_str(&format!(
        "{ORIGINAL}\n[[transforms]]\nname = \"Normalize\"\nmean = [0.1, 0.2, 0.3, 0.4]\nstd = [0.2, 0.2, 0.2, 0.2]"
    ))
    .unwrap();
    let proc_rgb = SegformerProcessor::default(); // 512×512: no resize, rescale + normalise + HWC→CHW
    let proc_4 = SegformerProcessor {
        image_mean: vec![0.1, 0.2, 0.3, 0.4],
        image_std: vec![0.2; 4],
        ..Default::default()
    };
    let proc_down = SegformerProcessor {
        size: Some((256, 256)),
        ..Default::default()
    };

    println!(
        "augment bench: 512x512 tiles, one thread, {:.1} s per case, tiles/s (input clone included)",
        budget.as_secs_f64()
    );
    let cases: Vec<Case> = vec![
        (
            "rgb u8   clone of tile+mask only (baseline)",
            Box::new(|_| drop(black_box((rgb.clone(), mask.clone())))),
        ),
        (
            "rgb u8   flips/rot90 (image+mask)",
            Box::new(|i| {
                drop(black_box(
                    flips
                        .apply_seeded(rgb.clone(), Some(mask.clone()), 0, 0, i)
                        .unwrap(),
                ))
            }),
        ),
        (
            "rgb u8   flips/rot90 + Normalize",
            Box::new(|i| {
                drop(black_box(
                    flips_norm_rgb
                        .apply_seeded(rgb.clone(), Some(mask.clone()), 0, 0, i)
                        .unwrap(),
                ))
            }),
        ),
        (
            "rgb u8   flips/rot90 + processor",
            Box::new(|i| {
                let (img, m) = flips
                    .apply_seeded(rgb.clone(), Some(mask.clone()), 0, 0, i)
                    .unwrap();
                black_box(proc_rgb.process(&img, m.as_ref()).unwrap());
            }),
        ),
        (
            "rgb u8   processor 512->256 (PIL bilinear)",
            Box::new(|_| drop(black_box(proc_down.process(&rgb, Some(&mask)).unwrap()))),
        ),
        (
            "u16 x4   clone of tile+mask only (baseline)",
            Box::new(|_| drop(black_box((u16x4.clone(), mask.clone())))),
        ),
        (
            "u16 x4   flips/rot90 (image+mask)",
            Box::new(|i| {
                drop(black_box(
                    flips
                        .apply_seeded(u16x4.clone(), Some(mask.clone()), 0, 0, i)
                        .unwrap(),
                ))
            }),
        ),
        (
            "u16 x4   flips/rot90 + Normalize",
            Box::new(|i| {
                drop(black_box(
                    flips_norm_4
                        .apply_seeded(u16x4.clone(), Some(mask.clone()), 0, 0, i)
                        .unwrap(),
                ))
            }),
        ),
        (
            "u16 x4   flips/rot90 + processor",
            Box::new(|i| {
                let (img, m) = flips
                    .apply_seeded(u16x4.clone(), Some(mask.clone()), 0, 0, i)
                    .unwrap();
                black_box(proc_4.process(&img, m.as_ref()).unwrap());
            }),
        ),
    ];
    for (name, mut f) in cases {
        println!("{name:<44} {:>8.0}", rate(budget, &mut f));
    }
}
