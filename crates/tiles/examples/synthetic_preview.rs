//! Writes a few synthetic samples side by side with their masks, for a visual check.
//!
//! `cargo run -p tiles --example synthetic_preview -- OUT.png [SEED]`

use tiles::{Raster, RasterData, SyntheticOptions, generate_sample, write_png};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args
        .first()
        .ok_or("usage: synthetic_preview OUT.png [SEED]")?;
    let seed = args.get(1).map_or(Ok(0), |s| s.parse())?;
    let opts = SyntheticOptions {
        size: 256,
        seed,
        ..Default::default()
    };
    let (n, s) = (3, opts.size);
    // Row 1: images; row 2: masks (paddy white).
    let mut px = vec![0u8; 2 * s * n * s * 3];
    for i in 0..n {
        let (img, mask) = generate_sample(&opts, i);
        let RasterData::U8(v) = &img.data else {
            unreachable!()
        };
        for y in 0..s {
            for x in 0..s {
                for b in 0..3 {
                    px[(y * n * s + i * s + x) * 3 + b] = v[(y * s + x) * 3 + b];
                    px[((y + s) * n * s + i * s + x) * 3 + b] = mask.data[y * s + x] * 255;
                }
            }
        }
    }
    write_png(
        out.as_ref(),
        &Raster::new(n * s, 2 * s, 3, RasterData::U8(px)).ok_or("size")?,
    )?;
    Ok(())
}
