//! Streaming GeoJSON output: one Polygon feature per region.

use std::io::Write;

use geom::Reprojector;

use crate::Crs;
use crate::polygonize::Region;
use crate::simplify::simplify_region;
use crate::stats::round6;
use crate::{Grid, VectorError};

/// The coordinates features are written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputCrs {
    /// WGS84 longitude/latitude in degrees (RFC 7946), reprojected from the scene's CRS.
    #[default]
    Wgs84,
    /// The scene's own coordinates, named by a top-level `crs` member when its EPSG code is known.
    Native,
}

/// How regions become features.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorOptions {
    /// Douglas–Peucker tolerance in metres; in pixels for a class map without a usable CRS.
    /// `None` keeps every pixel corner.
    ///
    /// Topology-preserving: each ring is cut into arcs where the class across it changes and
    /// at saddle corners, each arc is simplified from its lexicographically smaller end (so
    /// both neighbours get the same points) and keeps at least one inner point, arcs on the
    /// image border are kept, and a shortcut is taken only if the area it cuts off or adds
    /// holds no pixel corner. Every ring vertex is a pixel corner, so simplified rings never
    /// cross each other or themselves. The price: bumps deeper than about a pixel stay even
    /// when they are within the tolerance. Metres become grid units at each arc's latitude
    /// (its first corner's row) for geographic grids.
    pub simplify_m: Option<f64>,
    /// Regions whose raster area is below this many hectares are left out (ignored without a
    /// usable CRS, where there are no areas).
    pub min_area_ha: Option<f64>,
    /// The output coordinates.
    pub crs: OutputCrs,
}

/// How pixel-corner coordinates become output coordinates.
enum Output {
    /// No usable CRS: world coordinates of the transform (or pixel coordinates) as they are.
    Plain,
    /// Already WGS84 degrees, or native.
    Identity,
    /// Reprojected to WGS84 through proj4rs (radians in and out for lat/lon systems).
    Reproject {
        to_wgs84: Box<Reprojector>,
        describe: String,
    },
}

/// Writes a GeoJSON FeatureCollection to `out`, region by region, in bounded memory.
pub struct GeoJsonWriter<W: Write> {
    out: W,
    grid: Grid,
    class_names: Vec<String>,
    options: VectorOptions,
    output: Output,
    decimals: usize,
    area_prefix: Option<Vec<f64>>,
    features: u64,
}

impl<W: Write> GeoJsonWriter<W> {
    /// Starts the collection. Asking for WGS84 output from a CRS that cannot be reprojected (no
    /// usable CRS on a georeferenced map, a user-defined CRS, an EPSG code not in the bundled
    /// table) is an error here, before anything is written. A map without georeferencing is
    /// written in pixel coordinates `(col, row)`, whatever `options.crs` says.
    pub fn new(
        mut out: W,
        grid: &Grid,
        class_names: &[String],
        options: &VectorOptions,
    ) -> Result<Self, VectorError> {
        let (output, decimals, crs_member) = match (grid.transform(), grid.crs(), options.crs) {
            (None, _, _) => (Output::Plain, 3, None),
            (Some(_), None, OutputCrs::Native) => (Output::Plain, 3, None),
            (Some(_), None, OutputCrs::Wgs84) => {
                return Err(VectorError::Unprojectable {
                    crs: "the scene's CRS".into(),
                    why: format!(
                        "the class map {}",
                        grid.pixels_only_reason().unwrap_or("has no CRS")
                    ),
                });
            }
            (Some(_), Some(crs), OutputCrs::Native) => {
                let decimals = if matches!(crs, Crs::Geographic { .. }) {
                    9
                } else {
                    3
                };
                (Output::Identity, decimals, crs.epsg())
            }
            (Some(_), Some(crs), OutputCrs::Wgs84) => (reprojection(grid, crs)?, 9, None),
        };
        out.write_all(b"{\"type\":\"FeatureCollection\",")?;
        if let Some(code) = crs_member {
            // NOTE: EPSG:4326's URN means lat/lon axis order; OGC's CRS84 is the lon/lat one
            // we write (and what GDAL writes for it).
            let name = if code == 4326 {
                "urn:ogc:def:crs:OGC:1.3:CRS84".to_string()
            } else {
                format!("urn:ogc:def:crs:EPSG::{code}")
            };
            write!(
                out,
                "\"crs\":{{\"type\":\"name\",\"properties\":{{\"name\":\"{name}\"}}}},"
            )?;
        }
        out.write_all(b"\"features\":[")?;
        Ok(GeoJsonWriter {
            out,
            grid: grid.clone(),
            class_names: class_names.to_vec(),
            options: options.clone(),
            output,
            decimals,
            area_prefix: grid.row_area_prefix(),
            features: 0,
        })
    }

    /// Writes one Polygon feature per region (those under `min_area_ha` left out).
    pub fn write(&mut self, regions: &[Region]) -> Result<(), VectorError> {
        for region in regions {
            self.write_region(region)?;
        }
        Ok(())
    }

    /// Closes the collection and hands back the writer.
    pub fn finish(mut self) -> Result<W, VectorError> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// How many features were written so far.
    pub fn features(&self) -> u64 {
        self.features
    }

    fn write_region(&mut self, region: &Region) -> Result<(), VectorError> {
        let area_m2 = self.area_prefix.as_ref().map(|g| raster_area_m2(region, g));
        if let (Some(min), Some(a)) = (self.options.min_area_ha, area_m2)
            && a / 10_000.0 < min
        {
            return Ok(());
        }
        let simplified = match self.options.simplify_m {
            Some(tol) if tol > 0.0 => {
                let grid = &self.grid;
                let scale = |row: f64| grid.pixel_size_m(row + 0.5).unwrap_or((1.0, 1.0));
                Some(simplify_region(region, tol, &scale))
            }
            _ => None,
        };
        let class = self
            .class_names
            .get(region.class as usize)
            .cloned()
            .unwrap_or_else(|| format!("class {}", region.class));
        let mut props = serde_json::Map::new();
        props.insert("class".into(), class.into());
        props.insert("class_index".into(), region.class.into());
        if let Some(a) = area_m2 {
            props.insert("area_ha".into(), (a / 10_000.0).into());
        }
        props.insert(
            "mean_probability".into(),
            region
                .mean_probability()
                .map_or(serde_json::Value::Null, |p| round6(p).into()),
        );
        props.insert("pixels".into(), region.pixels.into());
        let sep = if self.features == 0 { "\n" } else { ",\n" };
        let mut buf = format!(
            "{sep}{{\"type\":\"Feature\",\"properties\":{},\"geometry\":{{\"type\":\"Polygon\",\"coordinates\":[",
            serde_json::Value::Object(props)
        );
        // Ring by ring, straight to the output: a region with millions of corners is never
        // held as text.
        let mut pts: Vec<[f64; 2]> = Vec::new();
        for k in 0..region.rings.len() {
            pts.clear();
            match &simplified {
                Some(rings) => {
                    for p in &rings[k] {
                        pts.push(self.project(p[0] as f64, p[1] as f64)?);
                    }
                }
                None => {
                    let ring = &region.rings[k];
                    for p in &ring[..ring.len() - 1] {
                        pts.push(self.project(p[0], p[1])?);
                    }
                }
            }
            // RFC 7946: exterior counter-clockwise, holes clockwise, in output coordinates.
            let ccw = signed_area(&pts) > 0.0;
            if ccw != (k == 0) {
                pts.reverse();
            }
            pts.push(pts[0]);
            buf.push_str(if k == 0 { "[" } else { ",[" });
            for (i, p) in pts.iter().enumerate() {
                if i > 0 {
                    buf.push(',');
                }
                buf.push('[');
                push_number(&mut buf, p[0], self.decimals);
                buf.push(',');
                push_number(&mut buf, p[1], self.decimals);
                buf.push(']');
                if buf.len() >= 1 << 16 {
                    self.out.write_all(buf.as_bytes())?;
                    buf.clear();
                }
            }
            buf.push(']');
        }
        buf.push_str("]}}");
        self.out.write_all(buf.as_bytes())?;
        self.features += 1;
        Ok(())
    }

    fn project(&self, col: f64, row: f64) -> Result<[f64; 2], VectorError> {
        let (x, y) = self.grid.pixel_to_world(col, row);
        match &self.output {
            Output::Plain | Output::Identity => Ok([x, y]),
            Output::Reproject { to_wgs84, describe } => {
                project(to_wgs84, x, y).map_err(|why| VectorError::Reprojection {
                    crs: describe.clone(),
                    x,
                    y,
                    why,
                })
            }
        }
    }
}

/// The reprojection from `crs` to WGS84, checked on the scene's centre.
fn reprojection(grid: &Grid, crs: &Crs) -> Result<Output, VectorError> {
    if let Crs::Geographic {
        epsg: Some(4326),
        degrees_per_unit,
        ..
    } = crs
        && *degrees_per_unit == 1.0
    {
        return Ok(Output::Identity);
    }
    let unprojectable = |why: String| VectorError::Unprojectable {
        crs: match crs.epsg() {
            Some(code) => format!("EPSG:{code}"),
            None => crs.describe(),
        },
        why,
    };
    let Some(code) = crs.epsg() else {
        return Err(unprojectable(
            "its GeoKeys give no EPSG code (a user-defined CRS)".into(),
        ));
    };
    if crs.proj4().is_none() {
        return Err(unprojectable(format!(
            "EPSG:{code} is not in the bundled EPSG table (crs-definitions)"
        )));
    }
    let to_wgs84 =
        Reprojector::new(crs, &Crs::wgs84()).map_err(|e| unprojectable(e.to_string()))?;
    let (cx, cy) = grid.pixel_to_world(grid.width() as f64 / 2.0, grid.height() as f64 / 2.0);
    project(&to_wgs84, cx, cy)
        .map_err(|e| unprojectable(format!("the scene's centre ({cx}, {cy}) fails: {e}")))?;
    Ok(Output::Reproject {
        to_wgs84: Box::new(to_wgs84),
        describe: crs.describe(),
    })
}

fn project(to_wgs84: &Reprojector, x: f64, y: f64) -> Result<[f64; 2], String> {
    to_wgs84.transform(x, y).map(|(lon, lat)| [lon, lat])
}

/// The region's raster area from its pixel-edge rings: `Σ (x_from − x_to)·G(y)` over the
/// horizontal edges, with `G(y)` the area of one column's pixels above row `y`.
fn raster_area_m2(region: &Region, g: &[f64]) -> f64 {
    let mut s = 0.0;
    for ring in &region.rings {
        for w in ring.windows(2) {
            if w[0][1] == w[1][1] {
                s += (w[0][0] - w[1][0]) * g[w[0][1] as usize];
            }
        }
    }
    s.abs()
}

fn signed_area(pts: &[[f64; 2]]) -> f64 {
    let n = pts.len();
    let (ox, oy) = (pts[0][0], pts[0][1]);
    (0..n)
        .map(|i| {
            let (p, q) = (pts[i], pts[(i + 1) % n]);
            (p[0] - ox) * (q[1] - oy) - (q[0] - ox) * (p[1] - oy)
        })
        .sum::<f64>()
        / 2.0
}

/// Appends `v` with at most `decimals` decimals, trailing zeros dropped (`12.5`, `-3`, `0`).
fn push_number(buf: &mut String, v: f64, decimals: usize) {
    use std::fmt::Write as _;
    let start = buf.len();
    write!(buf, "{v:.decimals$}").expect("writing to a String");
    if buf[start..].contains('.') {
        let trimmed = buf.trim_end_matches('0').trim_end_matches('.').len();
        buf.truncate(trimmed);
    }
    if &buf[start..] == "-0" {
        buf.truncate(start);
        buf.push('0');
    }
}
