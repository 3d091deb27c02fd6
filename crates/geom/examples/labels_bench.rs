//! Memory and time of burning a large label layer onto a large scene, a band of rows at a
//! time (the figures of `BENCH.md`):
//!
//! ```text
//! cargo run --release -p geom --example labels_bench -- make FIELDS.fgb N SIDE
//! cargo run --release -p geom --example labels_bench -- run FIELDS.fgb SIDE BAND [--all-touched]
//! ```
//!
//! `make` writes N paddy fields (rotated rectangles of 40–160 m, one in eight with a hole,
//! classes 1–3 in a `crop` field) as FlatGeobuf in WGS84 lon/lat, spread over a SIDE × SIDE
//! scene of 10 m pixels in UTM zone 48N. `run` reads the file, classifies and indexes the
//! features, reprojects them to the scene's CRS, burns the scene BAND rows at a time into one
//! reused buffer and counts the pixels per class; it prints the time of each step and the
//! peak RSS (`VmHWM`).

use std::time::Instant;

use geom::{
    ClassMapping, Crs, LabelOptions, Labels, Overlap, Reprojector, SceneGrid, Unlabelled,
    read_flatgeobuf,
};

const X0: f64 = 300_000.0;
const Y0: f64 = 1_700_000.0;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn make(path: &str, n: usize, side: usize) -> Result<(), Box<dyn std::error::Error>> {
    use flatgeobuf::{ColumnType, FgbCrs, FgbWriter, FgbWriterOptions, GeometryType};
    use geo_types::{Coord, LineString, Polygon};
    use geozero::{ColumnValue, PropertyProcessor};
    let to_wgs84 = Reprojector::new(&Crs::parse("EPSG:32648")?, &Crs::wgs84())?;
    let mut w = FgbWriter::create_with_options(
        "fields",
        GeometryType::Polygon,
        FgbWriterOptions {
            crs: FgbCrs {
                code: 4326,
                ..Default::default()
            },
            write_index: false,
            ..Default::default()
        },
    )?;
    w.add_column("crop", ColumnType::String, |_, _| {});
    // A deterministic scatter (an LCG), no RNG crate needed here.
    let mut state = 0x2028_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let extent = side as f64 * 10.0;
    for i in 0..n {
        let (cx, cy) = (X0 + next() * extent, Y0 - next() * extent);
        let (hw, hh, a) = (
            20.0 + next() * 60.0,
            20.0 + next() * 60.0,
            next() * std::f64::consts::PI,
        );
        let corner = |u: f64, v: f64| -> Result<Coord<f64>, String> {
            let (x, y) = (
                cx + u * a.cos() - v * a.sin(),
                cy + u * a.sin() + v * a.cos(),
            );
            let (lon, lat) = to_wgs84.transform(x, y)?;
            Ok(Coord { x: lon, y: lat })
        };
        let ring = |s: f64| -> Result<LineString<f64>, String> {
            let c = [(-hw, -hh), (hw, -hh), (hw, hh), (-hw, hh), (-hw, -hh)];
            Ok(LineString(
                c.iter()
                    .map(|&(u, v)| corner(u * s, v * s))
                    .collect::<Result<_, _>>()?,
            ))
        };
        let holes = if i % 8 == 0 { vec![ring(0.3)?] } else { vec![] };
        let polygon = Polygon::new(ring(1.0)?, holes);
        let crop = ["rice", "maize", "fallow"][i % 3];
        w.add_feature_geom(geo_types::Geometry::Polygon(polygon), |f| {
            f.property(0, "crop", &ColumnValue::String(crop))
                .expect("a string property");
        })?;
    }
    w.write(std::io::BufWriter::new(std::fs::File::create(path)?))?;
    println!("wrote {n} fields over a {side}x{side} scene to {path}");
    Ok(())
}

fn run(
    path: &str,
    side: usize,
    band: usize,
    all_touched: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let bytes = std::fs::read(path)?;
    let layer = read_flatgeobuf(path, &bytes)?;
    drop(bytes);
    let features = layer.features().len();
    let t_read = t.elapsed();
    let t = Instant::now();
    let options = LabelOptions {
        classes: ClassMapping {
            field: Some("crop".into()),
            rules: vec![
                (1, vec!["rice".into()]),
                (2, vec!["maize".into()]),
                (3, vec!["fallow".into()]),
            ],
        },
        all_touched,
        overlap: Overlap::LaterWins,
        unlabelled: Unlabelled::Background(0),
    };
    let mut labels = Labels::new(vec![layer], None, options)?;
    let scene = SceneGrid::new(
        "scene",
        side,
        side,
        [X0, 10.0, 0.0, Y0, 0.0, -10.0],
        Crs::parse("EPSG:32648")?,
    )?;
    let mut on = labels.on_scene(&scene)?;
    let t_prepare = t.elapsed();
    let t = Instant::now();
    let mut rows = vec![0u8; band * side];
    let mut counts = [0u64; 256];
    for r0 in (0..side).step_by(band) {
        let n = band.min(side - r0);
        on.burn_rows(r0, &mut rows[..n * side])?;
        for &v in &rows[..n * side] {
            counts[v as usize] += 1;
        }
    }
    let t_burn = t.elapsed();
    println!(
        "{features} features, scene {side}x{side}, bands of {band} rows, {}",
        if all_touched {
            "all_touched"
        } else {
            "centre rule"
        }
    );
    println!(
        "read {:.2} s, classify+index+reproject {:.2} s, burn {:.2} s, total {:.2} s",
        t_read.as_secs_f64(),
        t_prepare.as_secs_f64(),
        t_burn.as_secs_f64(),
        (t_read + t_prepare + t_burn).as_secs_f64()
    );
    println!(
        "pixels: background {}, rice {}, maize {}, fallow {}; polygons on the scene {}",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        on.polygons()
    );
    println!("peak RSS {:.1} MiB", peak_rss_mib());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("make") if args.len() == 4 => make(&args[1], args[2].parse()?, args[3].parse()?),
        Some("run") if args.len() >= 4 => run(
            &args[1],
            args[2].parse()?,
            args[3].parse()?,
            args.iter().any(|a| a == "--all-touched"),
        ),
        _ => {
            Err("usage: labels_bench make FILE N SIDE | run FILE SIDE BAND [--all-touched]".into())
        }
    }
}
