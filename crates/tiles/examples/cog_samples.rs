//! The maps `crates/tiles/verify/cog.sh` hands to GDAL's eyes: `CogWriter` outputs of several
//! sizes (with and without overviews, odd sizes), sample kinds and band counts, with a class
//! legend, band names and a scale, plus `manifest.json` saying how each was made so the
//! checker can recompute every pixel.
//!
//! `cargo run --release -p tiles --example cog_samples -- OUT_DIR`

use std::path::PathBuf;

use tiles::{
    BandInfo, ClassLegend, CogOptions, CogWriter, GeoRef, OverviewResampling, RasterData,
    RasterShape, SampleKind,
};

/// One map: name, size, bands, kind, resampling, legend?, nodata.
struct Sample {
    name: &'static str,
    width: usize,
    height: usize,
    bands: usize,
    kind: SampleKind,
    average: bool,
    legend: bool,
    nodata: Option<f64>,
    scale: Option<f64>,
}

/// The value of sample `(x, y, b)`, the formula the checker repeats: classes 0–2 with nodata
/// (255) on a diagonal for u8 class maps, bytes for other u8, ramps for u16 and f32.
fn value(s: &Sample, x: usize, y: usize, b: usize) -> f64 {
    let v = x * 3 + y * 5 + b * 7;
    match s.kind {
        SampleKind::U8 if s.legend => {
            if (x + 2 * y) % 29 == 0 {
                255.0
            } else {
                ((x / 37 + y / 23) % 3) as f64
            }
        }
        SampleKind::U8 => (v % 251) as f64,
        SampleKind::U16 => (v * 11 % 65_000) as f64,
        SampleKind::F32 => (v % 4001) as f64 * 0.25,
    }
}

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: cog_samples OUT_DIR"));
    std::fs::create_dir_all(&out).unwrap();
    let samples = [
        Sample {
            name: "classes_2000x1500",
            width: 2000,
            height: 1500,
            bands: 1,
            kind: SampleKind::U8,
            average: false,
            legend: true,
            nodata: Some(255.0),
            scale: None,
        },
        Sample {
            name: "classes_200x130_no_overviews",
            width: 200,
            height: 130,
            bands: 1,
            kind: SampleKind::U8,
            average: false,
            legend: true,
            nodata: Some(255.0),
            scale: None,
        },
        Sample {
            name: "odd_1025x513_u8",
            width: 1025,
            height: 513,
            bands: 1,
            kind: SampleKind::U8,
            average: false,
            legend: false,
            nodata: None,
            scale: None,
        },
        Sample {
            name: "prob_777x611_f32x3",
            width: 777,
            height: 611,
            bands: 3,
            kind: SampleKind::F32,
            average: true,
            legend: false,
            nodata: None,
            scale: None,
        },
        Sample {
            name: "prob_900x700_u8x2_scaled",
            width: 900,
            height: 700,
            bands: 2,
            kind: SampleKind::U8,
            average: true,
            legend: false,
            nodata: Some(255.0),
            scale: Some(1.0 / 254.0),
        },
        Sample {
            name: "u16x4_600x300",
            width: 600,
            height: 300,
            bands: 4,
            kind: SampleKind::U16,
            average: false,
            legend: false,
            nodata: None,
            scale: None,
        },
    ];
    let mut manifest = Vec::new();
    for s in &samples {
        let path = out.join(format!("{}.tif", s.name));
        let shape = RasterShape {
            width: s.width,
            height: s.height,
            bands: s.bands,
            kind: s.kind,
        };
        let geo = GeoRef {
            transform: [500_000.0, 10.0, 0.0, 4_200_000.0, 0.0, -10.0],
            geo_key_directory: Some(vec![
                1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32651,
            ]),
            geo_double_params: None,
            geo_ascii_params: None,
            nodata: s.nodata,
        };
        let options = CogOptions {
            resampling: if s.average {
                OverviewResampling::Average
            } else {
                OverviewResampling::Nearest
            },
            ..CogOptions::default()
        };
        let mut w = CogWriter::create(&path, shape, Some(&geo), options).unwrap();
        let names: Vec<String> = (0..s.bands).map(|b| format!("band {b}")).collect();
        let colours = vec![[40, 40, 40], [0, 200, 80], [30, 120, 255]];
        let classes = vec![
            "background".to_string(),
            "rice paddy".into(),
            "water".into(),
        ];
        if s.legend {
            w = w
                .with_legend(ClassLegend {
                    colours: colours.clone(),
                    names: classes.clone(),
                })
                .unwrap();
        } else {
            w = w
                .with_band_info(BandInfo {
                    names: names.clone(),
                    scale_offset: s.scale.map(|k| (k, 0.0)),
                })
                .unwrap();
        }
        // 100 rows at a time, as a scene streams.
        for y0 in (0..s.height).step_by(100) {
            let h = 100.min(s.height - y0);
            let vals = (y0..y0 + h).flat_map(|y| {
                (0..s.width).flat_map(move |x| (0..s.bands).map(move |b| value(s, x, y, b)))
            });
            let rows = match s.kind {
                SampleKind::U8 => RasterData::U8(vals.map(|v| v as u8).collect()),
                SampleKind::U16 => RasterData::U16(vals.map(|v| v as u16).collect()),
                SampleKind::F32 => RasterData::F32(vals.map(|v| v as f32).collect()),
            };
            w.write_rows(&rows).unwrap();
        }
        w.finish().unwrap();
        manifest.push(serde_json::json!({
            "file": format!("{}.tif", s.name),
            "width": s.width, "height": s.height, "bands": s.bands,
            "kind": s.kind.to_string(), "legend": s.legend, "nodata": s.nodata,
            "average": s.average, "scale": s.scale,
            "colours": if s.legend { colours } else { vec![] },
            "classes": if s.legend { classes } else { vec![] },
            "band_names": if s.legend { vec![] } else { names },
        }));
        eprintln!("{}", path.display());
    }
    std::fs::write(
        out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}
