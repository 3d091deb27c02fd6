//! Helpers shared by the integration tests: small deterministic rasters and files on disk.

use std::path::Path;

use tiles::{Mask, Raster, RasterData};

/// A cheap deterministic pseudo-random sequence (xorshift), so tests need no RNG crate.
pub fn noise(seed: u64, n: usize) -> Vec<u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect()
}

pub fn u8_raster(w: usize, h: usize, bands: usize, seed: u64) -> Raster {
    let data = noise(seed, w * h * bands)
        .into_iter()
        .map(|v| v as u8)
        .collect();
    Raster::new(w, h, bands, RasterData::U8(data)).unwrap()
}

pub fn u16_raster(w: usize, h: usize, bands: usize, seed: u64) -> Raster {
    let data = noise(seed, w * h * bands)
        .into_iter()
        .map(|v| v as u16)
        .collect();
    Raster::new(w, h, bands, RasterData::U16(data)).unwrap()
}

pub fn f32_raster(w: usize, h: usize, bands: usize, seed: u64) -> Raster {
    let data = noise(seed, w * h * bands)
        .into_iter()
        .map(|v| (v % 100_000) as f32 / 7.0 - 3000.0)
        .collect();
    Raster::new(w, h, bands, RasterData::F32(data)).unwrap()
}

/// A mask whose values cycle through `values`, pixel by pixel.
pub fn mask_of(w: usize, h: usize, values: &[u8]) -> Mask {
    Mask::new(w, h, (0..w * h).map(|i| values[i % values.len()]).collect()).unwrap()
}

/// Writes an RGB PNG image and its mask PNG.
pub fn write_pair(img: &Path, mask: &Path, w: usize, h: usize, values: &[u8], seed: u64) {
    tiles::write_png(img, &u8_raster(w, h, 3, seed)).unwrap();
    tiles::write_mask_png(mask, &mask_of(w, h, values)).unwrap();
}

/// The `w × h` window at `(x, y)` of `r`, computed independently of the crate.
pub fn crop_u16(r: &Raster, x: usize, y: usize, w: usize, h: usize) -> Vec<u16> {
    let RasterData::U16(v) = &r.data else {
        panic!("u16 expected")
    };
    let mut out = Vec::new();
    for row in y..y + h {
        for col in x..x + w {
            for b in 0..r.bands {
                out.push(v[(row * r.width + col) * r.bands + b]);
            }
        }
    }
    out
}
