//! Burns a label layer onto a scene grid and writes the class raster as raw bytes, for the
//! GDAL comparison in `verify/` (and a quick look at any layer):
//!
//! ```text
//! cargo run --release -p geom --example burn -- LAYER OUT.u8 W H X0,A,B,Y0,D,E EPSG:CODE \
//!     [--all-touched] [--field NAME] [--band ROWS] [--layer-crs EPSG:CODE] [--zones]
//! ```
//!
//! LAYER is `.geojson`/`.json`, `.shp` (with its `.dbf`/`.prj` beside it) or `.fgb`. With
//! `--field`, a feature burns the class given by its value (1..=254); without, every feature
//! burns 1. `--band` burns that many rows at a time (default: the whole scene). `--zones`
//! burns zone indices by `--field` instead and writes them as little-endian u32.

use std::path::Path;

use geom::{
    ClassMapping, Crs, LabelOptions, Labels, Layer, Overlap, SceneGrid, SceneZones, Unlabelled,
    Zones, read_flatgeobuf, read_geojson, read_shapefile,
};

fn read_layer(path: &Path) -> Result<Layer, Box<dyn std::error::Error>> {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let ext = path
        .extension()
        .unwrap_or_default()
        .to_string_lossy()
        .to_lowercase();
    Ok(match ext.as_str() {
        "shp" => {
            let shp = std::fs::read(path)?;
            let dbf = std::fs::read(path.with_extension("dbf")).ok();
            let prj = std::fs::read_to_string(path.with_extension("prj")).ok();
            read_shapefile(&name, &shp, dbf.as_deref(), prj.as_deref())?
        }
        "fgb" => read_flatgeobuf(&name, &std::fs::read(path)?)?,
        _ => read_geojson(&name, &std::fs::read(path)?)?,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 6 {
        return Err("usage: burn LAYER OUT W H X0,A,B,Y0,D,E EPSG:CODE [options]".into());
    }
    let (w, h): (usize, usize) = (args[2].parse()?, args[3].parse()?);
    let t: Vec<f64> = args[4]
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let transform: [f64; 6] = t.try_into().map_err(|_| "the transform has 6 terms")?;
    let scene = SceneGrid::new("scene", w, h, transform, Crs::parse(&args[5])?)?;
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
    };
    let all_touched = flag("--all-touched");
    let band: usize = value("--band").map_or(Ok(h), |b| b.parse())?;
    let mut layer = read_layer(Path::new(&args[0]))?;
    if let Some(crs) = value("--layer-crs") {
        layer.set_crs(Crs::parse(crs)?);
    }
    for line in layer.issues().lines() {
        eprintln!("{}: {line}", layer.name());
    }
    let mut bytes = Vec::new();
    if flag("--zones") {
        let field = value("--field").ok_or("--zones needs --field")?;
        let mut zones = Zones::new(layer, field, all_touched)?;
        let mut on = zones.on_scene(&scene)?;
        let mut rows = vec![SceneZones::NONE; band * w];
        for r0 in (0..h).step_by(band) {
            let n = band.min(h - r0);
            on.burn_rows(r0, &mut rows[..n * w])?;
            bytes.extend(rows[..n * w].iter().flat_map(|z| z.to_le_bytes()));
        }
    } else {
        let classes = match value("--field") {
            Some(f) => ClassMapping {
                field: Some(f.clone()),
                rules: (1..=254u8).map(|c| (c, vec![c.to_string()])).collect(),
            },
            None => ClassMapping::all(1),
        };
        let options = LabelOptions {
            classes,
            all_touched,
            overlap: Overlap::LaterWins,
            unlabelled: Unlabelled::Background(0),
        };
        let mut labels = Labels::new(vec![layer], None, options)?;
        let mut on = labels.on_scene(&scene)?;
        let mut rows = vec![0u8; band * w];
        for r0 in (0..h).step_by(band) {
            let n = band.min(h - r0);
            on.burn_rows(r0, &mut rows[..n * w])?;
            bytes.extend_from_slice(&rows[..n * w]);
        }
        for s in labels.summaries() {
            if !s.unmapped.is_empty() {
                eprintln!("{}: unmapped values {:?}", s.name, s.unmapped);
            }
        }
    }
    std::fs::write(&args[1], bytes)?;
    Ok(())
}
