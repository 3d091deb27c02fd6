//! Bounded-memory tiling benchmark: writes a big 4-band u16 GeoTIFF scene and its label raster
//! to a temp dir (streamed, never whole in memory), tiles it with `prepare_scenes`, and prints
//! elapsed times and peak RSS (VmHWM).
//!
//! `cargo run --release -p tiles --example bench_tiling -- [SIZE] [tiled|striped] [DIR]`
//! (default 20000 tiled, in a temp dir under /tmp).

use std::path::PathBuf;
use std::time::Instant;

use tiles::{
    Compression, GeoRef, LabelMap, RasterData, RasterShape, SampleKind, SceneOptions, TiffOptions,
    prepare_scenes, write_geotiff_rows,
};

fn vm_hwm_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets the kernel's peak-RSS counter so the tiling phase is measured on its own.
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size: usize = args.first().map_or(Ok(20000), |s| s.parse())?;
    let layout = args.get(1).map_or("tiled", |s| s.as_str());
    let tmp;
    let dir = match args.get(2) {
        Some(d) => PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir_in("/tmp")?;
            tmp.path().to_path_buf()
        }
    };
    let bands = 4;
    let options = match layout {
        "tiled" => TiffOptions {
            compression: Compression::Deflate,
            tile_size: Some(512),
            rows_per_strip: None,
        },
        "striped" => TiffOptions {
            compression: Compression::Deflate,
            tile_size: None,
            rows_per_strip: Some(16),
        },
        other => return Err(format!("layout must be tiled or striped, not {other}").into()),
    };
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_700_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32651,
        ]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    let scene = dir.join("scene.tif");
    let labels = dir.join("labels.tif");
    println!(
        "scene {size}x{size}, {bands} bands u16 ({:.2} GB raw), {layout}, Deflate",
        (size * size * bands * 2) as f64 / 1e9
    );

    let t0 = Instant::now();
    let shape = RasterShape {
        width: size,
        height: size,
        bands,
        kind: SampleKind::U16,
    };
    write_geotiff_rows(&scene, &shape, Some(&geo), &options, |y, h| {
        // Smooth gradients plus a cheap hash: compressible like imagery, not constant.
        let mut v = Vec::with_capacity(h * size * bands);
        for row in y..y + h {
            for col in 0..size {
                let hash = (row.wrapping_mul(73_856_093) ^ col.wrapping_mul(19_349_663)) & 255;
                for b in 0..bands {
                    v.push(((row / 8 + col / 8 + b * 1000) % 4096 + hash) as u16);
                }
            }
        }
        Ok(RasterData::U16(v))
    })?;
    let mshape = RasterShape {
        width: size,
        height: size,
        bands: 1,
        kind: SampleKind::U8,
    };
    write_geotiff_rows(&labels, &mshape, Some(&geo), &options, |y, h| {
        // Parcels of 0/1 and a nodata (255) band along the top tenth, which tiling skips.
        let mut v = Vec::with_capacity(h * size);
        for row in y..y + h {
            for col in 0..size {
                v.push(if row < size / 10 {
                    255
                } else {
                    ((row / 300 + col / 300) % 2) as u8
                });
            }
        }
        Ok(RasterData::U8(v))
    })?;
    let write_s = t0.elapsed().as_secs_f64();
    let scene_mb = std::fs::metadata(&scene)?.len() as f64 / 1e6;
    println!(
        "write scene + labels: {write_s:.1} s, scene file {scene_mb:.0} MB, peak RSS {:.0} MiB",
        vm_hwm_mib()
    );

    let reset = reset_hwm();
    let t1 = Instant::now();
    let mut opts = SceneOptions::new(
        vec![scene],
        vec![labels],
        dir.join("prepared"),
        LabelMap::identity(&["outer", "rice_paddy"]),
    );
    opts.tile_size = 512;
    opts.overlap = 64;
    let report = prepare_scenes(&opts)?;
    let tile_s = t1.elapsed().as_secs_f64();
    println!(
        "tile 512 overlap 64: {tile_s:.1} s, {} tiles written ({:?}), {} skipped, peak RSS {:.0} MiB{}",
        report.meta.tiles.len(),
        report.meta.splits,
        report.skipped_tiles,
        vm_hwm_mib(),
        if reset {
            " (tiling phase only)"
        } else {
            " (whole run)"
        }
    );
    Ok(())
}
