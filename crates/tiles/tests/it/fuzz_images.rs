//! Mutated PNG and JPEG files (issue #30, item 4): `read_image` and `read_mask` return a
//! value or an error for each of 5000 seeded mutations of small valid files, never a panic or
//! a hang; a share of them still decodes, so the decoders are exercised past the header.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use tiles::{Raster, RasterData};

use crate::common::noise;

/// A seeded mutation of `seed`: bit flips, byte overwrites with edge values, deletions,
/// duplicated or truncated runs, several at once.
fn mutate(state: &mut u64, seed: &[u8]) -> Vec<u8> {
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let mut v = seed.to_vec();
    for _ in 0..1 + next() % 4 {
        if v.is_empty() {
            break;
        }
        let at = (next() % v.len() as u64) as usize;
        match next() % 6 {
            0 => v[at] ^= 1 << (next() % 8),
            1 => v[at] = [0, 1, 0x7f, 0x80, 0xff][(next() % 5) as usize],
            2 => {
                let n = (next() % 16) as usize;
                v.drain(at..(at + n).min(v.len()));
            }
            3 => {
                let n = (next() % 32) as usize;
                let run: Vec<u8> = v[at..(at + n).min(v.len())].to_vec();
                v.splice(at..at, run);
            }
            4 => v.truncate(at),
            _ => {
                // Sizes and counts live in 2- and 4-byte fields: make one huge.
                for b in v.iter_mut().skip(at).take(2) {
                    *b = 0xff;
                }
            }
        }
    }
    v
}

fn seeds() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let mut pngs = Vec::new();
    for (i, bands) in [1usize, 3, 4].into_iter().enumerate() {
        let data = noise(i as u64 + 1, 24 * 16 * bands)
            .into_iter()
            .map(|v| (v % 7) as u8 * 30)
            .collect();
        let path = dir.path().join(format!("{i}.png"));
        tiles::write_png(
            &path,
            &Raster::new(24, 16, bands, RasterData::U8(data)).unwrap(),
        )
        .unwrap();
        pngs.push(std::fs::read(&path).unwrap());
    }
    let mut jpegs = Vec::new();
    for (i, color) in [image::ExtendedColorType::L8, image::ExtendedColorType::Rgb8]
        .into_iter()
        .enumerate()
    {
        let n = if i == 0 { 1 } else { 3 };
        let data: Vec<u8> = noise(i as u64 + 9, 32 * 24 * n)
            .into_iter()
            .map(|v| v as u8)
            .collect();
        let mut out = Cursor::new(Vec::new());
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 80)
            .encode(&data, 32, 24, color)
            .unwrap();
        jpegs.push(out.into_inner());
    }
    (pngs, jpegs)
}

/// Reads each mutation of `seeds` as an image and as a mask; returns how many decoded.
fn fuzz(seeds: &[Vec<u8>], ext: &str, cases: usize, mut state: u64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("case.{ext}"));
    let mut decoded = 0;
    for case in 0..cases {
        let bytes = mutate(&mut state, &seeds[case % seeds.len()]);
        std::fs::write(&path, &bytes).unwrap();
        let read = |p: &Path| {
            let image = tiles::read_image(p).map(|_| ()).map_err(|e| e.to_string());
            let mask = tiles::read_mask(p).map(|_| ()).map_err(|e| e.to_string());
            (image, mask)
        };
        match catch_unwind(AssertUnwindSafe(|| read(&path))) {
            Ok((image, _)) => {
                if let Err(e) = &image {
                    assert!(e.contains("case."), "the error names the file: {e}");
                }
                decoded += image.is_ok() as usize;
            }
            Err(_) => {
                let keep = std::env::temp_dir().join(format!("segfit-fuzz-{case}.{ext}"));
                std::fs::write(&keep, &bytes).unwrap();
                panic!(
                    "case {case} panicked; the file is kept at {}",
                    keep.display()
                );
            }
        }
    }
    decoded
}

#[test]
fn mutated_pngs_never_panic() {
    let (pngs, _) = seeds();
    let ok = fuzz(&pngs, "png", 5000, 0x1234_5678_9abc_def1);
    // PNG chunks carry CRCs, so most mutations stop at the first corrupt chunk; enough still
    // decode for the decoder to be exercised past the header.
    assert!(ok > 20, "{ok} of 5000 PNGs decoded");
}

#[test]
fn mutated_jpegs_never_panic() {
    let (_, jpegs) = seeds();
    let ok = fuzz(&jpegs, "jpg", 5000, 0x0fed_cba9_8765_4321);
    assert!(ok > 100, "{ok} of 5000 JPEGs decoded");
}
