//! FlatGeobuf: polygons and attributes, the CRS from the header.

use flatgeobuf::{FallibleStreamingIterator, FeatureProperties, FgbReader, GeometryType};
use geo_types::{Coord, LineString, MultiPolygon, Polygon};

use crate::layer::Geometry;
use crate::{Crs, GeomError, Layer};

/// Reads a FlatGeobuf file's polygons and multipolygons (other geometry types are skipped
/// and counted) with their attributes as text. The CRS comes from the header: its
/// organisation and code (`EPSG`, 32648), else its WKT (see [`Crs::from_wkt`]). Feature ids
/// are positions `#0`, `#1`, ….
pub fn read_flatgeobuf(name: &str, bytes: &[u8]) -> Result<Layer, GeomError> {
    let err = |why: String| GeomError::Read {
        layer: name.to_string(),
        why,
    };
    let reader = FgbReader::open(bytes).map_err(|e| err(format!("not FlatGeobuf: {e}")))?;
    let header = reader.header();
    let mut layer = Layer::empty(name);
    layer.crs_source = "no CRS in its header".into();
    if let Some(crs) = header.crs() {
        let by_code = match crs.org() {
            Some(org) if !org.eq_ignore_ascii_case("EPSG") => None,
            _ if crs.code() > 0 => Some(Crs::parse(&format!("EPSG:{}", crs.code()))),
            _ => None,
        };
        let resolved = by_code.or_else(|| crs.wkt().map(Crs::from_wkt));
        match resolved {
            Some(Ok(c)) => {
                layer.crs = Some(c);
                layer.crs_source = "its header".into();
            }
            Some(Err(e)) => layer.crs_source = format!("its header: {e}"),
            None => {}
        }
    }
    layer.fields = header
        .columns()
        .map(|cols| cols.iter().map(|c| c.name().to_string()).collect())
        .unwrap_or_default();
    let header_type = header.geometry_type();
    let mut features = reader
        .select_all_seq()
        .map_err(|e| err(format!("reading its index: {e}")))?;
    let mut i = 0usize;
    while let Some(f) = features
        .next()
        .map_err(|e| err(format!("feature #{i}: {e}")))?
    {
        let props = f
            .properties()
            .map_err(|e| err(format!("feature #{i}: its properties: {e}")))?;
        let attributes = layer.fields.iter().map(|k| props.get(k).cloned()).collect();
        let geometry = f.geometry().map(|g| {
            let kind = if header_type == GeometryType::Unknown {
                g.type_()
            } else {
                header_type
            };
            convert(&g, kind)
        });
        layer.push(format!("#{i}"), geometry, attributes);
        i += 1;
    }
    Ok(layer)
}

fn polygon(g: &flatgeobuf::Geometry, unclosed: &mut bool) -> Option<Polygon<f64>> {
    let xy = g.xy()?;
    let n = xy.len() / 2;
    let pt = |k: usize| Coord {
        x: xy.get(2 * k),
        y: xy.get(2 * k + 1),
    };
    let ends: Vec<usize> = match g.ends() {
        Some(e) => e.iter().map(|v| (v as usize).min(n)).collect(),
        None => vec![n],
    };
    let mut rings = Vec::with_capacity(ends.len());
    let mut start = 0;
    for end in ends {
        if end < start {
            return None;
        }
        rings.push(LineString((start..end).map(pt).collect()));
        start = end;
    }
    crate::layer::polygon(rings, unclosed)
}

fn convert(g: &flatgeobuf::Geometry, kind: GeometryType) -> Geometry {
    let mut unclosed = false;
    match kind {
        GeometryType::Polygon => {
            let p = polygon(g, &mut unclosed);
            Geometry::Polygons(MultiPolygon(p.into_iter().collect()), unclosed)
        }
        GeometryType::MultiPolygon => {
            let ps = g
                .parts()
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| polygon(&p, &mut unclosed))
                        .collect()
                })
                .unwrap_or_default();
            Geometry::Polygons(MultiPolygon(ps), unclosed)
        }
        _ => Geometry::NotPolygonal,
    }
}
