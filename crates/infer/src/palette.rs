//! The one class palette and the one overlay: training reports, `segfit predict --overlay` and
//! every other picture of a class map use the same colour for the same class, painted over the
//! image by the same rule.

use raster::{Mask, Raster, RasterData};

/// The colours of classes 0, 1, 2, … (class `c` gets `PALETTE[c % 8]`): class 0, usually the
/// background, dark grey; then distinct hues, rice paddies (class 1 in the usual two-class
/// setup) green.
const PALETTE: [[u8; 3]; 8] = [
    [40, 40, 40],
    [0, 200, 80],
    [30, 120, 255],
    [255, 200, 0],
    [230, 50, 50],
    [160, 80, 255],
    [0, 220, 220],
    [255, 120, 200],
];

/// The colour of class `c`; 255 (ignore / no data) is black.
pub fn class_colour(c: u8) -> [u8; 3] {
    if c == Mask::IGNORE {
        [0, 0, 0]
    } else {
        PALETTE[c as usize % PALETTE.len()]
    }
}

/// One pixel of an overlay: the image's RGB `pixel` with class `class` painted over it.
///
/// - Class 0 (the background) is left unpainted: the image shows as it is, so the painted
///   classes stand out against the scene itself rather than against a grey wash.
/// - Class 255 (ignore / no data) is black, as in [`class_colour`].
/// - Every other class is half image, half [`class_colour`], halves rounded up:
///   `(pixel + colour + 1) / 2`. At one half the colour is plain on any image while the field
///   edges and roads under it stay visible, which is what an overlay is for: checking the map
///   against the picture. (The training report used to paint at ⅔ and `predict` at ½; ½ is
///   the one ratio now.)
pub fn overlay_pixel(pixel: [u8; 3], class: u8) -> [u8; 3] {
    match class {
        0 => pixel,
        Mask::IGNORE => class_colour(Mask::IGNORE),
        c => {
            let colour = class_colour(c);
            [0, 1, 2].map(|k| ((pixel[k] as u16 + colour[k] as u16 + 1) / 2) as u8)
        }
    }
}

/// `image` with `classes` painted over it by [`overlay_pixel`], as an 8-bit RGB raster of the
/// same size.
///
/// The image's first three bands are shown (a band repeats when it has fewer), 8-bit as they
/// are and any other sample type contrast-stretched band by band from its smallest to its
/// largest finite value over the valid pixels. Pixels marked in `holes` (no data) are black and
/// left out of the stretch.
///
/// # Shapes
/// - image: `[H, W, C]`
/// - classes and holes: `[H, W]`
/// - output: `[H, W, 3]`
pub fn overlay(image: &Raster, classes: &[u8], holes: Option<&[bool]>) -> Raster {
    let is_hole = |i: usize| holes.is_some_and(|h| h[i]);
    let (h, w, b) = (image.height, image.width, image.bands);
    let bands: Vec<usize> = (0..3).map(|i| i.min(b - 1)).collect();
    let values = image.to_f32();
    let range: Vec<(f32, f32)> = bands
        .iter()
        .map(|&band| {
            if matches!(image.data, RasterData::U8(_)) {
                return (0.0, 255.0);
            }
            let it = values
                .iter()
                .skip(band)
                .step_by(b)
                .enumerate()
                .filter(|&(i, v)| v.is_finite() && !is_hole(i))
                .map(|(_, &v)| v);
            let (lo, hi) = it.fold((f32::INFINITY, f32::NEG_INFINITY), |(l, u), v| {
                (l.min(v), u.max(v))
            });
            (lo, if hi > lo { hi } else { lo + 1.0 })
        })
        .collect();
    let mut rgb = Vec::with_capacity(h * w * 3);
    for (i, &class) in classes.iter().enumerate() {
        let pixel = [0, 1, 2].map(|j| {
            let (lo, hi) = range[j];
            let v = (values[i * b + bands[j]] - lo) / (hi - lo) * 255.0;
            v.clamp(0.0, 255.0).round() as u8
        });
        let class = if is_hole(i) { Mask::IGNORE } else { class };
        rgb.extend_from_slice(&overlay_pixel(pixel, class));
    }
    Raster::new(w, h, 3, RasterData::U8(rgb)).expect("overlay sized from the image")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_eight_classes_are_distinct_and_ignore_is_black() {
        let colours: Vec<[u8; 3]> = (0..8).map(class_colour).collect();
        for (i, a) in colours.iter().enumerate() {
            assert!(colours[i + 1..].iter().all(|b| b != a), "class {i} repeats");
        }
        assert!(!colours.contains(&[0, 0, 0]));
        assert_eq!(class_colour(255), [0, 0, 0]);
        assert_eq!(class_colour(9), class_colour(1));
    }

    #[test]
    fn a_class_is_half_image_half_colour_and_the_background_is_the_image() {
        // Class 1 is [0, 200, 80]: (100 + 0 + 1) / 2, (51 + 200 + 1) / 2, (255 + 80 + 1) / 2.
        assert_eq!(overlay_pixel([100, 51, 255], 1), [50, 126, 168]);
        // Class 2 is [30, 120, 255] over black and white.
        assert_eq!(overlay_pixel([0, 0, 0], 2), [15, 60, 128]);
        assert_eq!(overlay_pixel([255, 255, 255], 2), [143, 188, 255]);
        assert_eq!(overlay_pixel([7, 8, 9], 0), [7, 8, 9]);
        assert_eq!(overlay_pixel([7, 8, 9], 255), [0, 0, 0]);
    }

    #[test]
    fn other_sample_types_are_stretched_over_the_valid_pixels_and_holes_are_black() {
        // 1 × 4, one u16 band shown as grey: 1000 and 3000 bound the stretch; the hole (60000)
        // would otherwise be the maximum.
        let image = Raster::new(4, 1, 1, RasterData::U16(vec![1000, 2000, 3000, 60000])).unwrap();
        let out = overlay(&image, &[0, 0, 1, 0], Some(&[false, false, false, true]));
        let RasterData::U8(rgb) = out.data else {
            panic!("u8 overlay")
        };
        // 2000 is half-way: 127.5 rounds to 128; 3000 is white under class 1's colour.
        let white_under_1 = overlay_pixel([255; 3], 1);
        let want: Vec<u8> = [[0; 3], [128; 3], white_under_1, [0; 3]].concat();
        assert_eq!((out.width, out.height, out.bands), (4, 1, 3));
        assert_eq!(rgb, want);

        // 8-bit images are shown as they are, without a stretch.
        let image = Raster::new(2, 1, 3, RasterData::U8(vec![10, 20, 30, 40, 50, 60])).unwrap();
        let out = overlay(&image, &[0, 3], None);
        // Class 3 is [255, 200, 0].
        assert_eq!(out.data, RasterData::U8(vec![10, 20, 30, 148, 125, 30]));
    }
}
