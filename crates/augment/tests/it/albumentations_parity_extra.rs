//! Parity with albumentations 2.0.8 for the transforms the shared fixtures do not cover:
//! `tests/data/albumentations-extra.*`, made by `tests/data/make_albumentations_extra.py`
//! (albumentations 2.0.8, opencv-python-headless 5.1).

use std::path::PathBuf;

use augment::Pipeline;

use crate::common::{Tensors, assert_u8_close, pipeline, u8s};

fn fixtures() -> Tensors {
    Tensors::open_path(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/albumentations-extra.safetensors"),
    )
}

/// `toml` (one transform) on the extra input vs `<case>.image` within `tol` grey levels and
/// `<case>.mask` exactly.
fn check(case: &str, toml: &str, tol: u8) {
    let fx = fixtures();
    let p: Pipeline = pipeline(&format!("[[transforms]]\n{toml}"));
    let (img, mask) = p
        .apply_seeded(
            fx.raster("input.image"),
            Some(fx.mask("input.mask")),
            0,
            0,
            0,
        )
        .unwrap();
    let want = fx.raster(&format!("{case}.image"));
    assert_eq!(
        (img.height, img.width, img.bands),
        (want.height, want.width, want.bands),
        "{case}: shape"
    );
    assert_u8_close(u8s(&img), u8s(&want), tol, case);
    assert_eq!(mask, Some(fx.mask(&format!("{case}.mask"))), "{case}: mask");
}

#[test]
fn rotate_bit_exact() {
    check("Rotate_30", "name = 'Rotate'\np = 1\nlimit = [30, 30]", 0);
}

#[test]
fn affine_bit_exact() {
    check(
        "Affine_s1.2_r15_t0.1",
        "name = 'Affine'\np = 1\nscale = 1.2\nrotate = [15, 15]\ntranslate_percent = [0.1, 0.1]",
        0,
    );
}

#[test]
fn affine_translation_truncates_to_whole_pixels() {
    // 0.05 × 50 = 2.5 px: albumentations shifts by int(2.5) = 2.
    check(
        "Affine_t0.05",
        "name = 'Affine'\np = 1\ntranslate_percent = [0.05, 0.05]",
        0,
    );
}

#[test]
fn shift_scale_rotate_bit_exact() {
    check(
        "ShiftScaleRotate_0.05_0.1_20",
        "name = 'ShiftScaleRotate'\np = 1\nshift_limit = [0.05, 0.05]\nscale_limit = [0.1, 0.1]\nrotate_limit = [20, 20]",
        0,
    );
}

#[test]
fn gamma_bit_exact() {
    check(
        "RandomGamma_150",
        "name = 'RandomGamma'\np = 1\ngamma_limit = [150, 150]",
        0,
    );
}

#[test]
fn gaussian_blur_bit_exact() {
    check(
        "GaussianBlur_5_s1.2",
        "name = 'GaussianBlur'\np = 1\nblur_limit = [5, 5]\nsigma_limit = [1.2, 1.2]",
        0,
    );
}

#[test]
fn area_and_nearest_resize_bit_exact() {
    check(
        "Resize_20x25_area",
        "name = 'Resize'\nheight = 20\nwidth = 25\ninterpolation = 'area'",
        0,
    );
    check(
        "Resize_13x17_area",
        "name = 'Resize'\nheight = 13\nwidth = 17\ninterpolation = 'area'",
        0,
    );
    check(
        "Resize_33x71_nearest",
        "name = 'Resize'\nheight = 33\nwidth = 71\ninterpolation = 'nearest'",
        0,
    );
}

#[test]
fn hue_saturation_value_bit_exact() {
    // OpenCV's 8-bit HSV round trip (hue in 2° steps, table divisions), reproduced exactly.
    check(
        "HueSaturationValue_10_20_-15",
        "name = 'HueSaturationValue'\np = 1\nhue_shift_limit = [10, 10]\nsat_shift_limit = [20, 20]\nval_shift_limit = [-15, -15]",
        0,
    );
}
