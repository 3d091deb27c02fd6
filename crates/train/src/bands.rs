//! `data.bands`: which stored bands the model sees, and in which order.

/// Why a band selection is unusable on its own (empty, repeated bands), if it is.
pub(crate) fn check_selection(bands: &[usize]) -> Option<String> {
    if bands.is_empty() {
        return Some(
            "`data.bands` = [] selects no band; list the 0-based bands to use, e.g. [3, 2, 1, 7], or drop the key for all bands".into(),
        );
    }
    for (i, b) in bands.iter().enumerate() {
        if bands[..i].contains(b) {
            return Some(format!(
                "`data.bands` = {bands:?} lists band {b} twice; list each band once"
            ));
        }
    }
    None
}

/// Checks a selection against the images' band count.
pub(crate) fn check_against(bands: &[usize], stored: usize) -> Result<(), String> {
    match bands.iter().find(|&&b| b >= stored) {
        Some(b) => Err(format!(
            "`data.bands` = {bands:?} selects band {b} but the images have {stored} bands (0..{stored}); use 0-based indices below {stored}"
        )),
        None => Ok(()),
    }
}
