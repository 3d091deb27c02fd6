//! Class maps as the benchmarks compare them: segfit's u8 GeoTIFFs and PyTorch's u8 `.npy`
//! files, and the share of pixels where two of them agree. `cargo xtask class-agreement A B`
//! prints it as one JSON line (the GPU benchmark runs the packed xtask binary for it, on a
//! machine without Rust or tifffile).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};

/// How far two class maps agree.
pub struct Agreement {
    pub pixels: usize,
    pub same: usize,
    /// The share of the first map's pixels outside its most common class: how much the
    /// agreement says (a map of one class agrees trivially).
    pub minority_percent: f64,
}

impl Agreement {
    pub fn agree_percent(&self) -> f64 {
        100.0 * self.same as f64 / self.pixels.max(1) as f64
    }
}

/// `cargo xtask class-agreement A B`: one JSON line.
pub fn run(args: &[String]) -> Result<()> {
    let [a, b] = args else {
        bail!("usage: cargo xtask class-agreement A.tif|A.npy B.tif|B.npy");
    };
    let r = agreement(Path::new(a), Path::new(b))?;
    println!(
        "{{\"pixels\": {}, \"same\": {}, \"agree_percent\": {:.6}, \"minority_percent\": {:.4}}}",
        r.pixels,
        r.same,
        r.agree_percent(),
        r.minority_percent
    );
    Ok(())
}

/// Compares two class maps of the same size.
pub fn agreement(a: &Path, b: &Path) -> Result<Agreement> {
    let (shape_a, ours) = read(a)?;
    let (shape_b, theirs) = read(b)?;
    ensure!(
        shape_a == shape_b && ours.len() == theirs.len(),
        "class maps differ in size: {} is {shape_a:?}, {} is {shape_b:?}",
        a.display(),
        b.display()
    );
    let same = ours.iter().zip(&theirs).filter(|(x, y)| x == y).count();
    let mut counts = [0usize; 256];
    for &c in &ours {
        counts[c as usize] += 1;
    }
    let majority = counts.iter().max().copied().unwrap_or(0);
    Ok(Agreement {
        pixels: ours.len(),
        same,
        minority_percent: 100.0 * (ours.len() - majority) as f64 / ours.len().max(1) as f64,
    })
}

/// A class map, `[height, width]` and its row-major classes, from a `.npy` or a GeoTIFF.
fn read(path: &Path) -> Result<([usize; 2], Vec<u8>)> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        read_npy_u8(path)
    } else {
        read_tiff_u8(path)
    }
}

/// A single-band u8 GeoTIFF (what `segfit predict` writes: its colour table shown as
/// MinIsBlack, since the `tiff` crate decodes no 8-bit palette images, so the indices read).
fn read_tiff_u8(path: &Path) -> Result<([usize; 2], Vec<u8>)> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    testkit::tiff::palette_as_grey(&mut bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // A 20000² class map is 400 MB, past the decoder's default buffer limit.
    let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(bytes))
        .with_context(|| format!("reading {}", path.display()))?
        .with_limits(tiff::decoder::Limits::unlimited());
    let (w, h) = decoder.dimensions()?;
    match decoder
        .read_image()
        .with_context(|| format!("decoding {}", path.display()))?
    {
        tiff::decoder::DecodingResult::U8(v) => Ok(([h as usize, w as usize], v)),
        _ => bail!("{}: expected a u8 class map", path.display()),
    }
}

/// A C-ordered 2-D uint8 .npy (what `np.save` writes for a `uint8 [H, W]` array).
fn read_npy_u8(path: &Path) -> Result<([usize; 2], Vec<u8>)> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        bytes.len() > 10 && bytes.starts_with(b"\x93NUMPY"),
        "{}: not a .npy file",
        path.display()
    );
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let header = String::from_utf8_lossy(&bytes[start..start + len]).into_owned();
    ensure!(
        header.contains("'|u1'") && header.contains("'fortran_order': False"),
        "{}: expected a C-ordered uint8 array, found header {header}",
        path.display()
    );
    let dims: Vec<usize> = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .map(|s| s.split(',').filter_map(|d| d.trim().parse().ok()).collect())
        .unwrap_or_default();
    let [h, w] = dims[..] else {
        bail!(
            "{}: expected a 2-D array, found header {header}",
            path.display()
        );
    };
    Ok(([h, w], bytes.split_off(start + len)))
}
