//! Vector layers from files (GeoJSON, Shapefile, FlatGeobuf), for `prepare --labels` and
//! `predict --zones`: `geom` parses bytes, the files are read here.

use std::path::Path;

use anyhow::{Context, Result, bail};
use geom::{Crs, Layer};

/// Reads the polygon layer at `path`, chosen by its extension (`.geojson`/`.json`, `.shp` with
/// its `.dbf` and `.prj` beside it, `.fgb`). `fallback_crs` (from `crs_flag`) is given to a
/// layer whose file names no CRS.
pub fn read_layer(path: &Path, fallback_crs: Option<&Crs>) -> Result<Layer> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let mut layer = match ext.as_str() {
        "geojson" | "json" => geom::read_geojson(&name, &read(path)?)?,
        "fgb" => geom::read_flatgeobuf(&name, &read(path)?)?,
        "shp" => {
            let shp = read(path)?;
            let dbf = sibling(path, "dbf").map(|p| read(&p)).transpose()?;
            let prj = match sibling(path, "prj") {
                Some(p) => Some(String::from_utf8_lossy(&read(&p)?).into_owned()),
                None => None,
            };
            geom::read_shapefile(&name, &shp, dbf.as_deref(), prj.as_deref())?
        }
        _ => bail!(
            "{name}: unknown vector format `.{ext}`; expected a GeoJSON (.geojson, .json), a \
             Shapefile (.shp) or a FlatGeobuf (.fgb) file"
        ),
    };
    if layer.crs().is_none()
        && let Some(crs) = fallback_crs
    {
        layer.set_crs(crs.clone());
    }
    Ok(layer)
}

/// `path` with extension `ext` (either case), when that file exists.
fn sibling(path: &Path, ext: &str) -> Option<std::path::PathBuf> {
    [ext.to_string(), ext.to_ascii_uppercase()]
        .iter()
        .map(|e| path.with_extension(e))
        .find(|p| p.is_file())
}

/// The CRS of a `--labels-crs`-like flag.
pub fn parse_crs(flag: &str, text: Option<&str>) -> Result<Option<Crs>> {
    text.map(|t| Crs::parse(t).with_context(|| format!("{flag} {t}")))
        .transpose()
}
