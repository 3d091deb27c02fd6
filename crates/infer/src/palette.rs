//! The one class palette: training overlays, `segfit predict --overlay` and every other picture
//! of a class map use the same colour for the same class.

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
    if c == 255 {
        [0, 0, 0]
    } else {
        PALETTE[c as usize % PALETTE.len()]
    }
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
}
