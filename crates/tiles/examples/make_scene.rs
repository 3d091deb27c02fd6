//! A synthetic scene for the prediction benchmark (`cargo xtask bench predict`): a SIZE×SIZE
//! (or W×H) 4-band u16 Cloud-Optimized GeoTIFF (UTM zone 51N, 10 m pixels, 512² tiles, Deflate,
//! overviews), written a band of rows at a time with [`CogWriter`], so a 20000² scene never sits
//! whole in memory.
//!
//! `cargo run --release -p tiles --example make_scene -- SIZE|WxH OUT.tif`
//!
//! The values are fields: a grid of ~300 px parcels, each with its own reflectance per band,
//! plus a gentle gradient and a little per-pixel noise (imagery-like structure, not realism).

use std::path::PathBuf;
use std::time::Instant;

use tiles::{CogOptions, CogWriter, GeoRef, RasterData, RasterShape, SampleKind};

const BANDS: usize = 4;
const FIELD: usize = 300;

/// A cheap integer hash (splitmix-style) of a few coordinates.
fn hash(a: usize, b: usize, c: usize) -> u64 {
    let mut x = (a as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((b as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add((c as u64).wrapping_mul(0x94D0_49BB_1331_11EB));
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

/// The value of band `b` at (`row`, `col`).
fn value(row: usize, col: usize, b: usize, size: usize) -> u16 {
    // Field boundaries wobble a little so parcels are not a perfect grid.
    let (fy, fx) = ((row + col / 7) / FIELD, (col + row / 11) / FIELD);
    let field = hash(fy, fx, b) % 6000;
    let gradient = ((row + col) * 2000 / (2 * size.max(1))) as u64;
    let noise = hash(row, col, b + 17) % 200;
    (1000 + field + gradient + noise) as u16
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [size, out] = args.as_slice() else {
        return Err("usage: make_scene SIZE|WxH OUT.tif".into());
    };
    let side = |s: &str| -> Result<usize, String> {
        s.parse()
            .map_err(|e| format!("SIZE must be a pixel count or WxH, not `{size}`: {e}"))
    };
    let (width, height) = match size.split_once('x') {
        Some((w, h)) => (side(w)?, side(h)?),
        None => (side(size)?, side(size)?),
    };
    let out = PathBuf::from(out);
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_700_000.0, 0.0, -10.0],
        // Projected, metres, EPSG:32651 (WGS 84 / UTM zone 51N).
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32651,
        ]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    let shape = RasterShape {
        width,
        height,
        bands: BANDS,
        kind: SampleKind::U16,
    };
    let t0 = Instant::now();
    let mut writer = CogWriter::create(&out, shape, Some(&geo), CogOptions::default())?;
    let diagonal = width.max(height);
    for y in (0..height).step_by(512) {
        let h = 512.min(height - y);
        let mut v = Vec::with_capacity(h * width * BANDS);
        for row in y..y + h {
            for col in 0..width {
                for b in 0..BANDS {
                    v.push(value(row, col, b, diagonal));
                }
            }
        }
        writer.write_rows(&RasterData::U16(v))?;
    }
    writer.finish()?;
    println!(
        "{}: {width}x{height}, {BANDS} bands u16, {:.0} MB, {:.1} s",
        out.display(),
        std::fs::metadata(&out)?.len() as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
