//! Reading segfit's class maps with the `tiff` crate, which decodes no 8-bit palette image.

/// Rewrites PhotometricInterpretation RGBPalette (3) as MinIsBlack (1) in every IFD of a
/// little-endian classic TIFF (segfit's class maps carry a colour table), so that the `tiff`
/// crate reads the class indices; the colour table itself stays in the file.
pub fn palette_as_grey(bytes: &mut [u8]) -> Result<(), String> {
    if !bytes.starts_with(b"II*\0") {
        return Err("not a little-endian classic TIFF".into());
    }
    let at = |b: &[u8], i: usize, n: usize| -> Result<usize, String> {
        let field = b.get(i..i + n).ok_or("an IFD past the end of the file")?;
        Ok(field.iter().rev().fold(0, |v, &x| v << 8 | x as usize))
    };
    let mut ifd = at(bytes, 4, 4)?;
    while ifd != 0 {
        let n = at(bytes, ifd, 2)?;
        for e in (0..n).map(|i| ifd + 2 + 12 * i) {
            if at(bytes, e, 2)? == 262 && at(bytes, e + 8, 2)? == 3 {
                bytes[e + 8] = 1;
            }
        }
        ifd = at(bytes, ifd + 2 + 12 * n, 4)?;
    }
    Ok(())
}
