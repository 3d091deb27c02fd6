//! The NumPy `.npy` format for float32 arrays: enough to exchange logits and pixel values with
//! PyTorch/NumPy (`np.load`, `np.save`).
//!
//! Layout: magic `\x93NUMPY`, version byte pair, little-endian header length (u16 for 1.0,
//! u32 for 2.0/3.0), a Python dict literal padded with spaces to a multiple of 64 bytes and
//! ending in `\n`, then the raw C-order data.

use std::path::Path;

use anyhow::{Context, Result, bail, ensure};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Encodes a C-order float32 array of `shape` as `.npy` (format 1.0) bytes.
pub fn encode_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    // A 1-tuple needs its trailing comma in Python.
    let tuple = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}");
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Writes a float32 array atomically.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<()> {
    debug_assert_eq!(shape.iter().product::<usize>(), data.len());
    fsio::write_atomic(path, &encode_f32(shape, data))
        .with_context(|| format!("writing {}", path.display()))
}

/// Reads a float32 (`<f4`) or float64 (`<f8`, converted) C-order array: `(shape, data)`.
pub fn read_f32(path: &Path) -> Result<(Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    decode_f32(&bytes).with_context(|| format!("{} is not a usable .npy array", path.display()))
}

/// Decodes `.npy` bytes; see [`read_f32`].
pub fn decode_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>)> {
    ensure!(
        bytes.len() >= 10 && bytes.starts_with(MAGIC),
        "the file does not start with the .npy magic"
    );
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => bail!("unsupported .npy format version {v}"),
    };
    let header = bytes
        .get(start..start + header_len)
        .context("the header is cut short")?;
    let header = std::str::from_utf8(header).context("the header is not text")?;
    let descr = dict_value(header, "descr").context("the header has no 'descr'")?;
    let fortran =
        dict_value(header, "fortran_order").context("the header has no 'fortran_order'")?;
    ensure!(
        fortran.starts_with("False"),
        "Fortran-order arrays are not supported; save with np.ascontiguousarray"
    );
    let shape_text = dict_value(header, "shape").context("the header has no 'shape'")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .context("'shape' is not a tuple")?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!("shape entry `{s}` is not a size"))
        })
        .collect::<Result<_>>()?;
    let n: usize = shape.iter().product();
    let body = &bytes[start + header_len..];
    let quoted = descr.trim_start_matches(['\'', '"']);
    let data = if quoted.starts_with("<f4") {
        ensure!(
            body.len() == n * 4,
            "shape {shape:?} needs {} bytes of data, found {}",
            n * 4,
            body.len()
        );
        body.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else if quoted.starts_with("<f8") {
        ensure!(
            body.len() == n * 8,
            "shape {shape:?} needs {} bytes of data, found {}",
            n * 8,
            body.len()
        );
        body.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32)
            .collect()
    } else {
        bail!(
            "dtype {} is not supported; save float32 little-endian ('<f4')",
            descr.split(',').next().unwrap_or(descr)
        );
    };
    Ok((shape, data))
}

/// The text after `'key':` in a header dict.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = &header[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_numpy_byte_for_byte() {
        // np.save of np.zeros((1, 2, 3), np.float32): the preamble and dict padded to 128
        // bytes (a multiple of 64), then 6 × 4 data bytes.
        let bytes = encode_f32(&[1, 2, 3], &[0.0; 6]);
        assert_eq!(bytes.len(), 128 + 6 * 4);
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 118);
        let header = std::str::from_utf8(&bytes[10..128]).unwrap();
        assert_eq!(
            header.trim_end(),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }"
        );
        assert!(header.ends_with('\n'));
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    }

    #[test]
    fn round_trips_and_rejects_bad_input() {
        let data: Vec<f32> = (0..12).map(|v| v as f32 * 0.5 - 1.0).collect();
        let bytes = encode_f32(&[12], &data);
        assert_eq!(decode_f32(&bytes).unwrap(), (vec![12], data));
        assert!(decode_f32(b"not numpy").is_err());
        let mut cut = encode_f32(&[2, 2], &[1.0; 4]);
        cut.truncate(cut.len() - 1);
        assert!(format!("{:#}", decode_f32(&cut).unwrap_err()).contains("bytes of data"));
        let int = String::from_utf8(encode_f32(&[1], &[0.0]))
            .unwrap_or_default()
            .replace("<f4", "<i4");
        assert!(decode_f32(int.as_bytes()).is_err());
    }
}
