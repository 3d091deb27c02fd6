//! Colour transforms against albumentations 2.0.8 where their special cases live: grey pixels
//! (R = G = B, S = 0 in OpenCV's HSV), black, white, fully saturated colours, every grey
//! level, and a crop of real-looking imagery with a quarter of its pixels grey
//! (issue 31: HueSaturationValue gave grey pixels colour). References:
//! `tests/data/albumentations-colour.*`, made by `tests/data/make_albumentations_colour.py`.

use std::path::PathBuf;

use crate::common::{Tensors, f32s, max_abs_diff, pipeline, u8s};
use augment::Pipeline;
use raster::{Raster, RasterData};
use safetensors::SafeTensors;

const INPUTS: [&str; 2] = ["extremes", "real"];

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/albumentations-colour.safetensors")
}

/// The fixture cases whose name starts with `prefix`, with their parameters.
fn cases(fx: &Tensors, prefix: &str) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path()).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st
        .names()
        .into_iter()
        .filter_map(|n| n.strip_suffix(".params"))
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let params = fx.f32s(&format!("{n}.params")).1;
            (n, params)
        })
        .collect()
}

/// `x` written so that TOML reads back the same f32 (its exact value as an f64).
fn num(x: f32) -> String {
    format!("{:?}", x as f64)
}

fn run(toml: &str, image: Raster) -> Raster {
    let p: Pipeline = pipeline(&format!("[[transforms]]\np = 1\n{toml}"));
    p.apply_seeded(image, None, 0, 0, 0).unwrap().0
}

/// Pixels (all bands) where `got` and `want` differ: the count, the worst difference, and the
/// first one as `input -> got / want` for a readable failure.
fn differing_pixels(input: &Raster, got: &Raster, want: &Raster) -> (usize, u8, String) {
    assert_eq!(
        (got.height, got.width, got.bands),
        (want.height, want.width, want.bands)
    );
    let (i, g, w) = (u8s(input), u8s(got), u8s(want));
    let c = got.bands;
    let mut first = String::new();
    let (mut n, mut worst) = (0, 0);
    for p in 0..g.len() / c {
        let px = p * c..(p + 1) * c;
        if g[px.clone()] != w[px.clone()] {
            if n == 0 {
                first = format!(
                    "first at pixel {p}: {:?} -> {:?}, albumentations {:?}",
                    &i[px.clone()],
                    &g[px.clone()],
                    &w[px.clone()]
                );
            }
            n += 1;
            worst = (0..c)
                .map(|b| g[p * c + b].abs_diff(w[p * c + b]))
                .fold(worst, u8::max);
        }
    }
    (n, worst, first)
}

/// Every case of `prefix`, configured by `toml(params)`, on both inputs: 0 differing pixels.
fn check_exact(prefix: &str, toml: impl Fn(&[f32]) -> String) -> Vec<String> {
    let fx = Tensors::open_path(&path());
    let cases = cases(&fx, prefix);
    assert!(!cases.is_empty(), "no {prefix} cases in the fixture");
    let mut failures = Vec::new();
    for (case, params) in &cases {
        for input in INPUTS {
            let img = fx.raster(&format!("{input}.image"));
            let got = run(&toml(params), img.clone());
            let want = fx.raster(&format!("{case}.{input}"));
            let (n, worst, first) = differing_pixels(&img, &got, &want);
            let total = img.width * img.height;
            // Shown with --nocapture: the figures the report quotes.
            eprintln!("{case} on {input}: {n} of {total} pixels differ (worst {worst} levels)");
            if n > 0 {
                failures.push(format!("{case} on {input}: {n} pixels differ; {first}"));
            }
        }
    }
    failures
}

fn hsv_toml(p: &[f32]) -> String {
    let (h, s, v) = (num(p[0]), num(p[1]), num(p[2]));
    format!(
        "name = 'HueSaturationValue'\nhue_shift_limit = [{h}, {h}]\nsat_shift_limit = [{s}, {s}]\nval_shift_limit = [{v}, {v}]"
    )
}

#[test]
fn hue_saturation_value_keeps_grey_pixels_grey_bit_exact() {
    // The four shift combinations of issue 31 must be among the cases, next to zero shifts,
    // the default limits' extremes, fractional shifts and random ones.
    let fx = Tensors::open_path(&path());
    let names: Vec<String> = cases(&fx, "HueSaturationValue")
        .into_iter()
        .map(|c| c.0)
        .collect();
    for want in [
        "10_15_-10",
        "0_15_0",
        "10_0_0",
        "0_0_-10",
        "0_0_0",
        "random0",
    ] {
        assert!(
            names.contains(&format!("HueSaturationValue_{want}")),
            "{want} missing from {names:?}"
        );
    }
    let failures = check_exact("HueSaturationValue", hsv_toml);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fixture's digest of an output over all 2^24 colours: per red level, the wrapping sum
/// of `byte_j * (2 j + 1)` over that plane's bytes.
fn cube_digests(v: &[u8]) -> Vec<i64> {
    v.chunks_exact(v.len() / 256)
        .map(|plane| {
            plane.iter().enumerate().fold(0u64, |acc, (j, &b)| {
                acc.wrapping_add((b as u64).wrapping_mul(2 * j as u64 + 1))
            }) as i64
        })
        .collect()
}

/// Every HueSaturationValue case on all 2^24 colours in rows of `width` pixels against the
/// fixture's `<case>.cube_<layout>` digests; one line per case that differs.
fn cube_failures(fx: &Tensors, cube: &[u8], layout: &str, width: usize) -> Vec<String> {
    let mut failures = Vec::new();
    for (case, params) in cases(fx, "HueSaturationValue") {
        let img = Raster::new(width, (1 << 24) / width, 3, RasterData::U8(cube.to_vec()));
        let got = cube_digests(u8s(&run(&hsv_toml(&params), img.unwrap())));
        let (_, want) = fx.i64s(&format!("{case}.cube_{layout}"));
        let planes: Vec<usize> = (0..256).filter(|&r| got[r] != want[r]).collect();
        eprintln!(
            "{case}, rows of {width}: {} of 256 red planes differ from albumentations",
            planes.len()
        );
        if !planes.is_empty() {
            failures.push(format!(
                "{case}, rows of {width}: red levels {planes:?} differ"
            ));
        }
    }
    failures
}

#[test]
fn hue_saturation_value_bit_exact_on_every_rgb_colour() {
    // Pixel `i` is `(i >> 16, (i >> 8) & 255, i & 255)`. OpenCV's u8 HSV -> RGB truncates in
    // its SIMD blocks and rounds in the scalar tail of a row: rows of 4096 pixels are all
    // blocks, rows of 8 all tail, on any CPU.
    let fx = Tensors::open_path(&path());
    let cube: Vec<u8> = (0u32..1 << 24)
        .flat_map(|i| [(i >> 16) as u8, (i >> 8) as u8, i as u8])
        .collect();
    // One thread per layout: 14 cases of 2^24 pixels take a while in a debug build.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let narrow = scope.spawn(|| cube_failures(&fx, &cube, "narrow", 8));
        let mut failures = cube_failures(&fx, &cube, "wide", 4096);
        failures.extend(narrow.join().unwrap());
        failures
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gamma_bit_exact_on_every_level() {
    // `extremes` holds every grey level, so each case checks the whole 256-entry table.
    let failures = check_exact("RandomGamma", |p| {
        let g = num(p[0]);
        format!("name = 'RandomGamma'\ngamma_limit = [{g}, {g}]")
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn brightness_contrast_bit_exact_on_every_level() {
    let failures = check_exact("RandomBrightnessContrast", |p| {
        let (b, c) = (num(p[0]), num(p[1]));
        format!(
            "name = 'RandomBrightnessContrast'\nbrightness_limit = [{b}, {b}]\ncontrast_limit = [{c}, {c}]\nbrightness_by_max = {}",
            p[2] != 0.0
        )
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn normalize_within_1e5_on_every_level() {
    // As `albumentations_parity.rs` claims on random pixels, here on every level and extreme.
    let fx = Tensors::open_path(&path());
    for input in INPUTS {
        let got = run(
            "name = 'Normalize'\nmean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\nmax_pixel_value = 255.0",
            fx.raster(&format!("{input}.image")),
        );
        let (shape, want) = fx.f32s(&format!("Normalize_imagenet.{input}"));
        assert_eq!(shape, vec![got.height, got.width, got.bands]);
        let (d, i) = max_abs_diff(f32s(&got), &want);
        eprintln!("Normalize_imagenet on {input}: max |diff| {d}");
        assert!(d <= 1e-5, "{input}: max |diff| {d} at {i}");
    }
}
