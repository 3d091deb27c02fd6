//! ESRI Shapefile: polygons from the `.shp`, attributes from the `.dbf`, CRS from the `.prj`.
//!
//! NOTE: parsed here rather than with the `shapefile` crate, whose reader allocates the point
//! and part counts a record claims before reading them (a corrupt count aborts the process);
//! every count here is checked against the bytes that hold it. Tests write their files with
//! that crate's writer.

use geo_types::{Coord, LineString, MultiPolygon, Polygon};

use crate::layer::Geometry;
use crate::{Crs, GeomError, Layer};

/// Reads a Shapefile's polygons (Polygon, PolygonZ, PolygonM; other shape types are skipped
/// and counted) with the attributes of its `.dbf` (optional) and the CRS of its `.prj` WKT
/// (optional; see [`Crs::from_wkt`]). Outer rings are clockwise, holes counter-clockwise; each
/// hole goes to the smallest outer ring that contains it (an orphan hole becomes an outer
/// ring). Feature ids are record positions `#0`, `#1`, …; records deleted in the `.dbf` are
/// skipped.
pub fn read_shapefile(
    name: &str,
    shp: &[u8],
    dbf: Option<&[u8]>,
    prj: Option<&str>,
) -> Result<Layer, GeomError> {
    let err = |why: String| GeomError::Read {
        layer: name.to_string(),
        why,
    };
    let mut layer = Layer::empty(name);
    match prj {
        None => layer.crs_source = "no .prj file".into(),
        Some(wkt) => match Crs::from_wkt(wkt) {
            Ok(crs) => {
                layer.crs = Some(crs);
                layer.crs_source = "its .prj".into();
            }
            Err(e) => layer.crs_source = format!("its .prj: {e}"),
        },
    }
    let table = match dbf {
        Some(bytes) => Some(Dbf::parse(bytes).map_err(|e| err(format!(".dbf: {e}")))?),
        None => None,
    };
    if let Some(t) = &table {
        layer.fields = t.fields.iter().map(|f| f.name.clone()).collect();
    }
    let records = shp_records(shp).map_err(|e| err(format!(".shp: {e}")))?;
    if let Some(t) = &table
        && t.records != records.len()
    {
        return Err(err(format!(
            "the .shp has {} records but the .dbf {}; the two files do not belong together",
            records.len(),
            t.records
        )));
    }
    for (i, geometry) in records.into_iter().enumerate() {
        let attributes = match &table {
            Some(t) => match t.record(i) {
                Some(values) => values,
                None => continue, // deleted
            },
            None => Vec::new(),
        };
        layer.push(format!("#{i}"), geometry, attributes);
    }
    Ok(layer)
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_f64(b: &[u8], at: usize) -> Option<f64> {
    Some(f64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Each record's geometry (`None` for a Null shape).
fn shp_records(b: &[u8]) -> Result<Vec<Option<Geometry>>, String> {
    if b.len() < 100 || be_i32(b, 0) != Some(9994) {
        return Err("not a Shapefile (no file code 9994 in a 100-byte header)".into());
    }
    let mut out = Vec::new();
    let mut at = 100;
    while at + 8 <= b.len() {
        let n = out.len();
        let words = be_i32(b, at + 4).unwrap_or(-1);
        let len =
            usize::try_from(words).map_err(|_| format!("record {n} has a negative length"))? * 2;
        let content = b
            .get(at + 8..at + 8 + len)
            .ok_or_else(|| format!("record {n} is truncated ({len} bytes claimed at byte {at})"))?;
        out.push(shape(content).map_err(|e| format!("record {n}: {e}"))?);
        at += 8 + len;
    }
    Ok(out)
}

fn shape(c: &[u8]) -> Result<Option<Geometry>, String> {
    let kind = le_i32(c, 0).ok_or("no shape type")?;
    match kind {
        0 => Ok(None),
        5 | 15 | 25 => {
            let parts = le_i32(c, 36).ok_or("truncated polygon header")?;
            let points = le_i32(c, 40).ok_or("truncated polygon header")?;
            let (Ok(parts), Ok(points)) = (usize::try_from(parts), usize::try_from(points)) else {
                return Err(format!("negative part or point count ({parts}, {points})"));
            };
            let need = 44usize
                .checked_add(parts.checked_mul(4).ok_or("part count overflows")?)
                .and_then(|v| v.checked_add(points.checked_mul(16)?))
                .ok_or("point count overflows")?;
            if need > c.len() {
                return Err(format!(
                    "{parts} parts and {points} points need {need} bytes, the record has {}",
                    c.len()
                ));
            }
            let starts: Vec<usize> = (0..parts)
                .map(|k| le_i32(c, 44 + 4 * k).unwrap_or(-1))
                .map(|s| usize::try_from(s).unwrap_or(usize::MAX))
                .collect();
            let base = 44 + 4 * parts;
            let pt = |k: usize| Coord {
                x: le_f64(c, base + 16 * k).unwrap_or(f64::NAN),
                y: le_f64(c, base + 16 * k + 8).unwrap_or(f64::NAN),
            };
            let mut rings = Vec::with_capacity(parts);
            for k in 0..parts {
                let end = starts.get(k + 1).copied().unwrap_or(points);
                let start = starts[k];
                if start > end || end > points {
                    return Err(format!(
                        "part {k} starts at point {start}, past its end {end}"
                    ));
                }
                rings.push(LineString((start..end).map(pt).collect()));
            }
            let unclosed = rings
                .iter()
                .any(|r| r.0.len() > 1 && r.0.first() != r.0.last());
            Ok(Some(Geometry::Polygons(organise(rings), unclosed)))
        }
        1 | 3 | 8 | 11 | 13 | 18 | 21 | 23 | 28 | 31 => Ok(Some(Geometry::NotPolygonal)),
        k => Err(format!("unknown shape type {k}")),
    }
}

fn signed_area(r: &LineString<f64>) -> f64 {
    r.0.windows(2)
        .map(|w| w[0].x * w[1].y - w[1].x * w[0].y)
        .sum::<f64>()
        / 2.0
}

fn contains(ring: &LineString<f64>, p: Coord<f64>) -> bool {
    let mut inside = false;
    for w in ring.0.windows(2) {
        let (a, b) = (w[0], w[1]);
        if (a.y > p.y) != (b.y > p.y) && p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x {
            inside = !inside;
        }
    }
    inside
}

/// Outer rings (clockwise) become polygons; each hole joins the smallest outer containing it.
fn organise(rings: Vec<LineString<f64>>) -> MultiPolygon<f64> {
    let (mut outers, mut holes) = (Vec::new(), Vec::new());
    for r in rings {
        if signed_area(&r) > 0.0 {
            holes.push(r);
        } else {
            outers.push((signed_area(&r).abs(), r, Vec::new()));
        }
    }
    for h in holes {
        let Some(&p) = h.0.first() else { continue };
        let best = outers
            .iter_mut()
            .filter(|(_, o, _)| contains(o, p))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((_, _, hs)) => hs.push(h),
            None => outers.push((signed_area(&h).abs(), h, Vec::new())),
        }
    }
    MultiPolygon(
        outers
            .into_iter()
            .map(|(_, o, hs)| Polygon::new(o, hs))
            .collect(),
    )
}

struct Field {
    name: String,
    offset: usize,
    len: usize,
}

/// A dBASE table: fields and fixed-width records, read lazily.
struct Dbf<'a> {
    bytes: &'a [u8],
    fields: Vec<Field>,
    records: usize,
    header_len: usize,
    record_len: usize,
}

impl<'a> Dbf<'a> {
    fn parse(b: &'a [u8]) -> Result<Dbf<'a>, String> {
        if b.len() < 32 {
            return Err("shorter than a dBASE header".into());
        }
        let records = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
        let header_len = u16::from_le_bytes([b[8], b[9]]) as usize;
        let record_len = u16::from_le_bytes([b[10], b[11]]) as usize;
        let mut fields = Vec::new();
        let mut at = 32;
        let mut offset = 1; // the deletion flag
        while at + 32 <= b.len().min(header_len) && b[at] != 0x0d {
            let raw = &b[at..at + 11];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(11);
            let name = text(&raw[..end]);
            let len = b[at + 16] as usize;
            fields.push(Field { name, offset, len });
            offset += len;
            at += 32;
        }
        if offset > record_len.max(1) {
            return Err(format!(
                "its fields span {offset} bytes but a record is {record_len}"
            ));
        }
        let need = records
            .checked_mul(record_len)
            .and_then(|v| v.checked_add(header_len))
            .ok_or("record count overflows")?;
        if need > b.len() {
            return Err(format!(
                "{records} records of {record_len} bytes after a {header_len}-byte header need {need} bytes, the file has {}",
                b.len()
            ));
        }
        Ok(Dbf {
            bytes: b,
            fields,
            records,
            header_len,
            record_len,
        })
    }

    /// Record `i`'s values, `None` when it is deleted.
    fn record(&self, i: usize) -> Option<Vec<Option<String>>> {
        let at = self.header_len + i * self.record_len;
        let r = self.bytes.get(at..at + self.record_len)?;
        if r.first() == Some(&b'*') {
            return None;
        }
        Some(
            self.fields
                .iter()
                .map(|f| {
                    let v = text(r.get(f.offset..f.offset + f.len).unwrap_or(&[]));
                    let v = v.trim_matches(|c: char| c == ' ' || c == '\0');
                    (!v.is_empty()).then(|| v.to_string())
                })
                .collect(),
        )
    }
}

/// UTF-8, or Latin-1 where the bytes are not UTF-8.
fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|&c| c as char).collect(),
    }
}
