//! Does a label raster cover its scene pixel for pixel? Compares the CRS-defining GeoKeys and
//! where the scene's pixel corners fall in the label raster.

use std::collections::BTreeMap;
use std::path::Path;

use raster::GeoRef;

use crate::error::TilesError;

/// How far (in label pixels) a scene pixel corner may land from the same corner of the label
/// raster before the two are considered misaligned.
const TOLERANCE_PX: f64 = 0.5;

/// GTModelTypeGeoKey, GeographicTypeGeoKey, ProjectedCSTypeGeoKey, VerticalCSTypeGeoKey.
const MODEL_TYPE: u16 = 1024;
const GEOGRAPHIC_TYPE: u16 = 2048;
const PROJECTED_CS_TYPE: u16 = 3072;

/// Checks a same-size label raster against its scene. `Ok(Some(note))` when one of the two has
/// no georeferencing (accepted: the sizes already match) or no CRS keys.
pub(super) fn check_alignment(
    scene: &Path,
    scene_geo: Option<&GeoRef>,
    mask: &Path,
    mask_geo: Option<&GeoRef>,
    size: (usize, usize),
) -> Result<Option<String>, TilesError> {
    let (s, m) = match (scene_geo, mask_geo) {
        (Some(s), Some(m)) => (s, m),
        (Some(_), None) => {
            return Ok(Some(format!(
                "label raster {} has no georeferencing; taken as aligned with {} pixel for pixel \
                 (both are {}x{})",
                mask.display(),
                scene.display(),
                size.0,
                size.1
            )));
        }
        (None, Some(_)) => {
            return Ok(Some(format!(
                "scene {} has no georeferencing, so its label raster {} is taken as aligned \
                 pixel for pixel and the tiles are written without georeferencing",
                scene.display(),
                mask.display()
            )));
        }
        (None, None) => return Ok(None),
    };
    let misaligned = |reason: String| TilesError::Misaligned {
        scene: scene.to_path_buf(),
        mask: mask.to_path_buf(),
        reason,
    };
    let (sk, mk) = (crs_keys(s), crs_keys(m));
    if let Some(reason) = crs_difference(&sk, &mk) {
        return Err(misaligned(format!(
            "it is in another CRS ({reason}); reproject the labels onto the scene's grid{}",
            warp_hint(s, size, &sk, mask)
        )));
    }
    if let Some(reason) = grid_offset(s, m, size) {
        return Err(misaligned(format!(
            "{reason}; they must agree within half a pixel: resample the labels onto the \
             scene's grid{}",
            warp_hint(s, size, &sk, mask)
        )));
    }
    if sk.is_empty() != mk.is_empty() {
        let (without, with) = if mk.is_empty() {
            (mask, scene)
        } else {
            (scene, mask)
        };
        return Ok(Some(format!(
            "{} has a geotransform but no CRS keys; taken to be in the CRS of {}",
            without.display(),
            with.display()
        )));
    }
    Ok(None)
}

/// Whether two rasters are in one CRS: no CRS-defining key that both set differs (a raster
/// without CRS keys is taken to be in the other's CRS).
pub(crate) fn same_crs(a: &GeoRef, b: &GeoRef) -> bool {
    crs_difference(&crs_keys(a), &crs_keys(b)).is_none()
}

/// One GeoKey's value, resolved from wherever the directory stores it.
#[derive(Clone, Debug, PartialEq)]
enum KeyValue {
    Short(u16),
    Doubles(Vec<f64>),
    Ascii(String),
}

impl std::fmt::Display for KeyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyValue::Short(v) => write!(f, "{v}"),
            KeyValue::Doubles(v) => write!(f, "{v:?}"),
            KeyValue::Ascii(s) => write!(f, "`{s}`"),
        }
    }
}

/// The keys that define the CRS: model type, geographic (2048–2061), projected (3072–3095) and
/// vertical (4096–4099) keys. Citations (free text that writers fill differently) and the raster
/// type (already folded into the transform by the reader) are left out.
fn crs_keys(g: &GeoRef) -> BTreeMap<u16, KeyValue> {
    let Some(dir) = g.geo_key_directory.as_deref() else {
        return BTreeMap::new();
    };
    let defines_crs = |k: u16| {
        k == MODEL_TYPE
            || (2048..=2061).contains(&k)
            || (3072..=3095).contains(&k)
            || (4096..=4099).contains(&k)
    };
    let citation = |k: u16| matches!(k, 2049 | 3073 | 4097);
    let mut out = BTreeMap::new();
    for e in dir.get(4..).unwrap_or(&[]).chunks_exact(4) {
        let (key, location, count, value) = (e[0], e[1], e[2] as usize, e[3] as usize);
        if !defines_crs(key) || citation(key) {
            continue;
        }
        let v = match location {
            0 => Some(KeyValue::Short(e[3])),
            34736 => g
                .geo_double_params
                .as_ref()
                .and_then(|d| d.get(value..value + count))
                .map(|d| KeyValue::Doubles(d.to_vec())),
            34737 => g
                .geo_ascii_params
                .as_ref()
                .and_then(|a| a.get(value..value + count))
                .map(|a| KeyValue::Ascii(a.trim_end_matches(['|', '\0']).to_string())),
            _ => None,
        };
        if let Some(v) = v {
            out.insert(key, v);
        }
    }
    out
}

/// GTModelTypeGeoKey, or what the other keys imply (1 projected, 2 geographic).
fn model_type(keys: &BTreeMap<u16, KeyValue>) -> Option<KeyValue> {
    keys.get(&MODEL_TYPE).cloned().or_else(|| {
        if keys.contains_key(&PROJECTED_CS_TYPE) {
            Some(KeyValue::Short(1))
        } else if keys.contains_key(&GEOGRAPHIC_TYPE) {
            Some(KeyValue::Short(2))
        } else {
            None
        }
    })
}

fn key_name(k: u16) -> String {
    match k {
        MODEL_TYPE => "GTModelTypeGeoKey (1024)".into(),
        GEOGRAPHIC_TYPE => "GeographicTypeGeoKey (2048)".into(),
        PROJECTED_CS_TYPE => "ProjectedCSTypeGeoKey (3072)".into(),
        4096 => "VerticalCSTypeGeoKey (4096)".into(),
        k => format!("GeoKey {k}"),
    }
}

/// The first CRS key that both rasters set to different values, described; `None` when they
/// agree wherever both say something. Keys only one of them sets are not compared: writers
/// differ in how much redundant detail they store.
fn crs_difference(
    scene: &BTreeMap<u16, KeyValue>,
    mask: &BTreeMap<u16, KeyValue>,
) -> Option<String> {
    let same = |a: &KeyValue, b: &KeyValue| match (a, b) {
        (KeyValue::Doubles(x), KeyValue::Doubles(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0))
        }
        _ => a == b,
    };
    let differ = |k: u16, a: &KeyValue, b: &KeyValue| {
        (!same(a, b)).then(|| format!("{} is {b} in the labels but {a} in the scene", key_name(k)))
    };
    if let (Some(a), Some(b)) = (model_type(scene), model_type(mask))
        && let Some(d) = differ(MODEL_TYPE, &a, &b)
    {
        return Some(d);
    }
    scene
        .iter()
        .filter_map(|(k, a)| mask.get(k).and_then(|b| differ(*k, a, b)))
        .next()
}

/// Where the scene's pixel corners fall in the label raster: `None` when every corner of the
/// scene lands within half a label pixel of the same corner, else what is off and by how much.
fn grid_offset(scene: &GeoRef, mask: &GeoRef, (w, h): (usize, usize)) -> Option<String> {
    let Some(inv) = inverse(&mask.transform) else {
        return Some("the label raster's geotransform is degenerate (zero pixel size)".into());
    };
    let corners = [
        (0.0, 0.0),
        (w as f64, 0.0),
        (0.0, h as f64),
        (w as f64, h as f64),
    ];
    let offset = |(c, r): (f64, f64)| {
        let (x, y) = scene.pixel_to_world(c, r);
        let (mc, mr) = apply(&inv, x, y);
        (mc - c, mr - r)
    };
    let (dx, dy) = offset(corners[0]);
    if dx.abs() > TOLERANCE_PX || dy.abs() > TOLERANCE_PX {
        let (mx, my) = mask.pixel_to_world(0.0, 0.0);
        let (sx, sy) = scene.pixel_to_world(0.0, 0.0);
        return Some(format!(
            "the scene's top-left corner ({sx}, {sy}) falls at label pixel ({dx:.2}, {dy:.2}) \
             instead of (0, 0), an offset of {dx:+.2} columns and {dy:+.2} rows (the labels' \
             top-left corner is ({mx}, {my}))"
        ));
    }
    for &(c, r) in &corners[1..] {
        let (dx, dy) = offset((c, r));
        if dx.abs() > TOLERANCE_PX || dy.abs() > TOLERANCE_PX {
            let t = (&scene.transform, &mask.transform);
            return Some(format!(
                "the pixel size differs (scene {} x {}, labels {} x {}): the scene's corner \
                 ({c}, {r}) falls {dx:+.2} columns and {dy:+.2} rows away in the labels",
                t.0[1], t.0[5], t.1[1], t.1[5]
            ));
        }
    }
    None
}

/// The inverse of a GDAL geotransform (world → pixel), `None` when it is singular.
fn inverse(t: &[f64; 6]) -> Option<[f64; 6]> {
    let det = t[1] * t[5] - t[2] * t[4];
    if det == 0.0 || !det.is_finite() {
        return None;
    }
    let (a, b, d, e) = (t[5] / det, -t[2] / det, -t[4] / det, t[1] / det);
    Some([-(a * t[0] + b * t[3]), a, b, -(d * t[0] + e * t[3]), d, e])
}

fn apply(t: &[f64; 6], x: f64, y: f64) -> (f64, f64) {
    (t[0] + x * t[1] + y * t[2], t[3] + x * t[4] + y * t[5])
}

/// `, e.g. gdalwarp …` with the scene's extent and size, for a north-up scene.
fn warp_hint(
    scene: &GeoRef,
    (w, h): (usize, usize),
    keys: &BTreeMap<u16, KeyValue>,
    mask: &Path,
) -> String {
    let t = &scene.transform;
    if t[2] != 0.0 || t[4] != 0.0 {
        return " (e.g. gdalwarp with the scene's CRS, extent and size)".into();
    }
    let (x0, x1) = (t[0], t[0] + w as f64 * t[1]);
    let (y0, y1) = (t[3], t[3] + h as f64 * t[5]);
    let srs = [PROJECTED_CS_TYPE, GEOGRAPHIC_TYPE]
        .iter()
        .find_map(|k| match keys.get(k) {
            Some(KeyValue::Short(code)) if *code != 32767 => Some(format!("-t_srs EPSG:{code} ")),
            _ => None,
        })
        .unwrap_or_default();
    format!(
        ", e.g. `gdalwarp {srs}-te {} {} {} {} -ts {w} {h} -r near {} labels_aligned.tif`",
        x0.min(x1),
        y0.min(y1),
        x0.max(x1),
        y0.max(y1),
        mask.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_undoes_a_rotated_transform() {
        let t = [100.0, 2.0, 0.5, 50.0, 0.25, -2.0];
        let inv = inverse(&t).unwrap();
        let (x, y) = apply(&t, 3.0, 7.0);
        let (c, r) = apply(&inv, x, y);
        assert!((c - 3.0).abs() < 1e-9 && (r - 7.0).abs() < 1e-9, "{c} {r}");
    }
}
