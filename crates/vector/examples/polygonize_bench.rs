//! Streams a synthetic class map through `Polygonizer` and `GeoJsonWriter` and reports time,
//! regions, output size and peak RSS (Linux `VmHWM`).
//!
//! ```sh
//! cargo run --release -p vector --example polygonize_bench -- 4000 4000 all 15 noise
//! #                                         width height all|one simplify_m noise|fields
//! ```
//! `noise` is value noise (blobs of ~24 px, three classes, 2% nodata specks), `fields` paddy
//! fields (see [`fields_row`]), on a 10 m UTM grid, generated row by row so that only the
//! polygonizer holds anything.

use std::io::Write;
use std::time::Instant;

use raster::GeoRef;
use vector::{GeoJsonWriter, Grid, OutputCrs, Polygonizer, VectorOptions};

fn hash(x: u64, y: u64) -> f64 {
    let mut h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ y.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h ^= h >> 31;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 29;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Paddy fields: 48-row bands cut into fields 30–90 px wide, each rice (class 1) with
/// probability 0.4, separated by 2 px bunds of class 0; no nodata.
fn fields_row(r: usize, row: &mut [u8]) {
    let band = r / 48;
    if r % 48 < 2 {
        row.fill(0);
        return;
    }
    let (mut x, mut field) = (0, 0u64);
    while x < row.len() {
        let width = 30 + (hash(band as u64, field) * 60.0) as usize;
        let rice = u8::from(hash(field + 1_000_000, band as u64) < 0.4);
        for (i, v) in row.iter_mut().enumerate().skip(x).take(width) {
            *v = if i - x < 2 { 0 } else { rice };
        }
        x += width;
        field += 1;
    }
}

fn noise_row(r: usize, row: &mut [u8]) {
    for (c, v) in row.iter_mut().enumerate() {
        *v = noise_at(r, c);
    }
}

fn noise_at(r: usize, c: usize) -> u8 {
    let cell = 24.0;
    let (fy, fx) = (r as f64 / cell, c as f64 / cell);
    let (y0, x0) = (fy.floor(), fx.floor());
    let (ty, tx) = (fy - y0, fx - x0);
    let (y0, x0) = (y0 as u64, x0 as u64);
    let top = hash(x0, y0) * (1.0 - tx) + hash(x0 + 1, y0) * tx;
    let bottom = hash(x0, y0 + 1) * (1.0 - tx) + hash(x0 + 1, y0 + 1) * tx;
    let v = top * (1.0 - ty) + bottom * ty;
    if hash(c as u64 + 7_000_000, r as u64) < 0.02 {
        255
    } else if v < 0.45 {
        0
    } else if v < 0.7 {
        1
    } else {
        2
    }
}

/// Counts bytes instead of keeping them.
struct Count(u64);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() -> Result<(), vector::VectorError> {
    let args: Vec<String> = std::env::args().collect();
    let w: usize = args.get(1).map_or(4000, |s| s.parse().unwrap());
    let h: usize = args.get(2).map_or(4000, |s| s.parse().unwrap());
    let selected = match args.get(3).map(String::as_str) {
        Some("one") => vec![false, true],
        _ => vec![true, true, true],
    };
    let simplify_m = args
        .get(4)
        .and_then(|s| s.parse().ok())
        .filter(|&v: &f64| v > 0.0);
    let fields = args.get(5).is_some_and(|s| s == "fields");
    let fill = if fields { fields_row } else { noise_row };
    let geo = GeoRef {
        transform: [500_000.0, 10.0, 0.0, 1_600_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, 32648]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(255.0),
    };
    let grid = Grid::new(Some(&geo), w, h)?;
    let names = vec!["outer".into(), "rice_paddy".into(), "water".into()];
    let options = VectorOptions {
        simplify_m,
        min_area_ha: None,
        crs: OutputCrs::Wgs84,
    };
    let start = Instant::now();
    let mut poly = Polygonizer::new(w, h, selected);
    let mut out = GeoJsonWriter::new(Count(0), &grid, &names, &options)?;
    let mut row = vec![0u8; w];
    let conf = vec![0.9f32; w];
    let (mut regions, mut largest) = (0, 0);
    let corners = |rs: &[vector::Region]| {
        rs.iter()
            .map(|r| r.rings.iter().map(|ring| ring.len() - 1).sum::<usize>())
            .max()
            .unwrap_or(0)
    };
    for r in 0..h {
        fill(r, &mut row);
        let done = poly.push_rows(&row, &conf);
        regions += done.len();
        largest = largest.max(corners(&done));
        out.write(&done)?;
    }
    let done = poly.finish();
    regions += done.len();
    largest = largest.max(corners(&done));
    out.write(&done)?;
    let written = out.finish()?.0;
    println!(
        "{w}x{h} {} {} classes, simplify {:?} m: {regions} regions (largest {largest} corners), {:.1} MiB of GeoJSON in {:.2} s, peak RSS {:.1} MiB",
        if fields { "fields" } else { "noise" },
        args.get(3).map_or("all", String::as_str),
        simplify_m,
        written as f64 / 1048576.0,
        start.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    Ok(())
}
