//! Reads a GeoTIFF window by window (512² windows, row by row, as `segfit predict` does),
//! from the local file or through a local HTTP server (`testkit::http::RangeServer`, on
//! 127.0.0.1, started here and serving the file from disk), and prints wall time, requests,
//! bytes fetched and the process's peak RSS.
//!
//! ```sh
//! # a synthetic 4-band u16 tiled GeoTIFF of 8000², then each way in its own process
//! cargo run --release -p tiles --example read_remote -- make /tmp/s8000.tif 8000
//! cargo run --release -p tiles --example read_remote -- local /tmp/s8000.tif
//! cargo run --release -p tiles --example read_remote -- http /tmp/s8000.tif
//! ```
//! Run each mode in a fresh process: the peak RSS is the process's (`VmHWM`). The checksum
//! (the sum of all samples) is the same both ways; for a COG made by GDAL,
//! `bench/make_gdal_cog.py` prints the sum rasterio reads.

use std::path::Path;
use std::time::Instant;

use testkit::http::RangeServer;
use tiles::{
    ChunkedReader, CogOptions, CogWriter, GeoRef, RasterData, RasterShape, Remote, RemoteOptions,
    SampleKind,
};

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn make(path: &Path, size: usize) {
    let shape = RasterShape {
        width: size,
        height: size,
        bands: 4,
        kind: SampleKind::U16,
    };
    let geo = GeoRef {
        transform: [600_000.0, 10.0, 0.0, 1_200_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32648,
        ]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    };
    let mut w = CogWriter::create(path, shape, Some(&geo), CogOptions::default()).unwrap();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for y0 in (0..size).step_by(256) {
        let rows = 256.min(size - y0);
        let data = (0..rows * size * 4)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let (px, b) = (i / 4, i % 4);
                let (x, y) = (px % size, y0 + px / size);
                (((x / 9 + y / 13) % 300) * 7 + b * 900) as u16 + (s % 200) as u16
            })
            .collect();
        w.write_rows(&RasterData::U16(data)).unwrap();
    }
    w.finish().unwrap();
    println!("wrote {} ({size}x{size}, 4 bands u16)", path.display());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: read_remote make OUT.tif SIZE | local FILE.tif | http FILE.tif";
    let (mode, file) = match args.as_slice() {
        [m, f, ..] => (m.as_str(), Path::new(f)),
        _ => panic!("{usage}"),
    };
    if mode == "make" {
        let size = args.get(2).and_then(|s| s.parse().ok()).expect(usage);
        return make(file, size);
    }
    let server = RangeServer::start();
    server
        .serve_file("scene.tif", file.to_path_buf())
        .expect("the file to serve");
    let remote = Remote::new(RemoteOptions::default());
    let t = Instant::now();
    let mut reader = match mode {
        "local" => ChunkedReader::open(file).unwrap(),
        "http" => ChunkedReader::open_url(&server.url("scene.tif"), &remote).unwrap(),
        _ => panic!("{usage}"),
    };
    let (w, h) = (reader.width(), reader.height());
    let win = 512;
    let mut checksum = 0u64;
    for y in (0..h).step_by(win) {
        for x in (0..w).step_by(win) {
            let r = reader
                .read_window(x, y, win.min(w - x), win.min(h - y))
                .unwrap();
            if let RasterData::U16(v) = &r.data {
                checksum = v.iter().fold(checksum, |c, &s| c.wrapping_add(s as u64));
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let stats = remote.stats();
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    println!(
        "{mode}: {w}x{h}x{} in {secs:.2} s; requests {} (retries {}), bytes fetched {} of {size}; \
         peak RSS {:.0} MiB; checksum {checksum}",
        reader.bands(),
        stats.requests,
        stats.retries,
        stats.bytes,
        peak_rss_mib()
    );
}
