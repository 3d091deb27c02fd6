//! GeoJSON: RFC 7946 (WGS84 lon/lat) unless a legacy top-level `crs` member names another CRS.

use geo_types::{Coord, LineString, MultiPolygon, Polygon};

use geojson::{GeoJson, JsonObject, Value};

use crate::layer::Geometry;
use crate::{Crs, GeomError, Layer};

/// Reads a GeoJSON FeatureCollection (or a single Feature or Geometry) of polygons.
///
/// Coordinates are WGS84 longitude/latitude (RFC 7946) unless the document has a legacy
/// (2008) `crs` member: `{"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32648"}}`
/// or `{"type": "EPSG", "properties": {"code": 32648}}`, read, as GDAL does, in x/y order.
/// Property values become text (numbers as written); a feature's id is its `id` member, else
/// its position `#N`.
pub fn read_geojson(name: &str, bytes: &[u8]) -> Result<Layer, GeomError> {
    let read_err = |why: String| GeomError::Read {
        layer: name.to_string(),
        why,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| read_err(format!("not UTF-8 text: {e}")))?;
    let doc: GeoJson = text
        .parse()
        .map_err(|e: geojson::Error| read_err(format!("not GeoJSON: {e}")))?;
    let mut layer = Layer::empty(name);
    let (features, foreign) = match doc {
        GeoJson::FeatureCollection(fc) => (fc.features, fc.foreign_members),
        GeoJson::Feature(f) => {
            let foreign = f.foreign_members.clone();
            (vec![f], foreign)
        }
        GeoJson::Geometry(g) => {
            let foreign = g.foreign_members.clone();
            let feature = geojson::Feature {
                bbox: None,
                geometry: Some(g),
                id: None,
                properties: None,
                foreign_members: None,
            };
            (vec![feature], foreign)
        }
    };
    match legacy_crs(foreign.as_ref()).map_err(read_err)? {
        Some(crs) => {
            layer.crs = Some(crs);
            layer.crs_source = "the `crs` member".into();
        }
        None => {
            layer.crs = Some(Crs::wgs84());
            layer.crs_source = "RFC 7946 (WGS84)".into();
        }
    }
    for f in &features {
        for key in f.properties.iter().flat_map(|p| p.keys()) {
            if !layer.fields.iter().any(|k| k == key) {
                layer.fields.push(key.clone());
            }
        }
    }
    for (i, f) in features.into_iter().enumerate() {
        let id = match &f.id {
            Some(geojson::feature::Id::String(s)) => s.clone(),
            Some(geojson::feature::Id::Number(n)) => n.to_string(),
            None => format!("#{i}"),
        };
        let attributes = layer
            .fields
            .iter()
            .map(|k| {
                f.properties
                    .as_ref()
                    .and_then(|p| p.get(k))
                    .and_then(value_text)
            })
            .collect();
        let geometry = f.geometry.map(|g| convert(&g.value));
        layer.push(id, geometry, attributes);
    }
    Ok(layer)
}

/// A property value as text: strings as they are, numbers and booleans as written, objects
/// and arrays as JSON, null as `None`.
pub(crate) fn value_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn legacy_crs(foreign: Option<&JsonObject>) -> Result<Option<Crs>, String> {
    let Some(crs) = foreign.and_then(|m| m.get("crs")) else {
        return Ok(None);
    };
    if crs.is_null() {
        return Ok(None);
    }
    let props = crs.get("properties");
    let text = match crs.get("type").and_then(|t| t.as_str()) {
        Some("name") => props
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_string),
        Some("EPSG") | Some("epsg") => props.and_then(|p| p.get("code")).map(|c| {
            format!(
                "EPSG:{}",
                c.as_str().map_or_else(|| c.to_string(), str::to_string)
            )
        }),
        _ => None,
    };
    let Some(text) = text else {
        return Err(format!(
            "its `crs` member {crs} names no CRS (expected type \"name\" with properties.name)"
        ));
    };
    Crs::parse(&text)
        .map(Some)
        .map_err(|e| format!("its `crs` member: {e}"))
}

fn ring(positions: &[Vec<f64>]) -> LineString<f64> {
    LineString(
        positions
            .iter()
            .map(|p| Coord {
                x: p.first().copied().unwrap_or(f64::NAN),
                y: p.get(1).copied().unwrap_or(f64::NAN),
            })
            .collect(),
    )
}

fn polygon(rings: &[Vec<Vec<f64>>], unclosed: &mut bool) -> Option<Polygon<f64>> {
    crate::layer::polygon(rings.iter().map(|r| ring(r)).collect(), unclosed)
}

fn convert(value: &Value) -> Geometry {
    let mut unclosed = false;
    match value {
        Value::Polygon(rings) => {
            let p = polygon(rings, &mut unclosed);
            Geometry::Polygons(MultiPolygon(p.into_iter().collect()), unclosed)
        }
        Value::MultiPolygon(polys) => {
            let ps = polys
                .iter()
                .filter_map(|p| polygon(p, &mut unclosed))
                .collect();
            Geometry::Polygons(MultiPolygon(ps), unclosed)
        }
        Value::GeometryCollection(geoms) => {
            let mut out = Vec::new();
            let mut polygonal = false;
            for g in geoms {
                if let Geometry::Polygons(mp, u) = convert(&g.value) {
                    polygonal = true;
                    unclosed |= u;
                    out.extend(mp.0);
                }
            }
            if polygonal {
                Geometry::Polygons(MultiPolygon(out), unclosed)
            } else {
                Geometry::NotPolygonal
            }
        }
        _ => Geometry::NotPolygonal,
    }
}
