//! STAC items (and item collections: saved search results) read as scenes: assets picked by
//! key or by band common name and stacked, in the order asked for, into one windowed raster
//! ([`BandStack`]).
//!
//! Band descriptions come from the asset's `eo:bands` (objects, or in STAC 0.9 indices into
//! the item's `properties.eo:bands`), its STAC 1.1 `bands` (`eo:common_name`), or, for an
//! asset that describes none, the item's `properties.eo:bands` / `bands`.

mod resample;
mod stack;

use std::collections::BTreeMap;
use std::path::Path;

use remote::Remote;
use serde_json::Value;

use crate::error::TilesError;

pub use stack::{BandStack, StackOptions};

/// What an asset says about one of its bands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BandName {
    /// The band's `name` (`B04`).
    pub name: Option<String>,
    /// Its common name (`red`): `common_name` in `eo:bands`, `eo:common_name` in `bands`.
    pub common_name: Option<String>,
}

/// One asset of a STAC item.
#[derive(Clone, Debug, PartialEq)]
pub struct StacAsset {
    /// Its key in the item's `assets`.
    pub key: String,
    /// Where it is: a URL or a local path (a relative `href` is resolved against the item's
    /// own location).
    pub href: String,
    /// Its media type (`type`), when given.
    pub media_type: Option<String>,
    /// Its `roles`.
    pub roles: Vec<String>,
    /// Its bands, when described.
    pub bands: Vec<BandName>,
    /// `proj:shape` as `[height, width]`, from the asset or the item.
    pub proj_shape: Option<[usize; 2]>,
    /// `proj:transform` as a GDAL geotransform (`[x0, dx, rx, y0, ry, dy]`), from the asset
    /// or the item.
    pub proj_transform: Option<[f64; 6]>,
}

/// A STAC item: its id, where it was read from and its assets.
#[derive(Clone, Debug, PartialEq)]
pub struct StacItem {
    id: String,
    origin: String,
    assets: BTreeMap<String, StacAsset>,
}

/// One band of a stack: which asset holds it and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackBand {
    /// The name it was asked for (an asset key or a band's common name).
    pub requested: String,
    /// The key of the asset that holds it.
    pub asset: String,
    /// Its index among the asset's bands (0-based); `None` until the asset is opened when
    /// an asset key was given and the asset does not describe its bands (then every band of
    /// the file is taken).
    pub band: Option<usize>,
    /// What the asset says about it.
    pub name: BandName,
}

impl StacItem {
    /// The item's `id`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file or URL it was read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Its assets, by key.
    pub fn assets(&self) -> impl Iterator<Item = &StacAsset> {
        self.assets.values()
    }

    /// The asset with key `key`.
    pub fn asset(&self, key: &str) -> Option<&StacAsset> {
        self.assets.get(key)
    }

    /// `id (origin)`: how errors name the item.
    pub(crate) fn label(&self) -> String {
        format!("`{}` ({})", self.id, self.origin)
    }

    pub(crate) fn error(&self, reason: impl ToString) -> TilesError {
        TilesError::Stac {
            item: self.label(),
            reason: reason.to_string(),
        }
    }

    /// The bands `names` pick, in order: a name is an asset key (every band of that asset),
    /// else a band's common name or name (`red`, `nir`, `B04`). Among several assets with the
    /// band, a single-band one is preferred, then a GeoTIFF; a tie is an error naming them.
    /// Needs no IO: the CLI checks a run's band order with it before reading anything.
    pub fn select(&self, names: &[String]) -> Result<Vec<StackBand>, TilesError> {
        if names.is_empty() {
            return Err(self.error(format!(
                "no assets named; pick them by key or band common name (e.g. red, green, blue, \
                 nir); this item has {}",
                self.describe_assets()
            )));
        }
        let mut out = Vec::new();
        for n in names {
            if let Some(a) = self.assets.get(n) {
                if a.bands.is_empty() {
                    out.push(StackBand {
                        requested: n.clone(),
                        asset: a.key.clone(),
                        band: None,
                        name: BandName::default(),
                    });
                } else {
                    out.extend(a.bands.iter().enumerate().map(|(i, b)| StackBand {
                        requested: n.clone(),
                        asset: a.key.clone(),
                        band: Some(i),
                        name: b.clone(),
                    }));
                }
                continue;
            }
            out.push(self.by_band_name(n)?);
        }
        Ok(out)
    }

    fn by_band_name(&self, n: &str) -> Result<StackBand, TilesError> {
        let matches = |b: &BandName| {
            [&b.common_name, &b.name]
                .into_iter()
                .flatten()
                .any(|s| s.eq_ignore_ascii_case(n))
        };
        // Lower ranks first: single-band assets, then GeoTIFFs.
        let rank = |a: &StacAsset| {
            let tiff = a.media_type.as_deref().is_some_and(|t| t.contains("tiff"))
                || a.href.ends_with(".tif")
                || a.href.ends_with(".tiff");
            (usize::from(a.bands.len() > 1), usize::from(!tiff))
        };
        let mut found: Vec<(&StacAsset, usize)> = self
            .assets
            .values()
            .filter_map(|a| a.bands.iter().position(matches).map(|i| (a, i)))
            .collect();
        let Some(best) = found.iter().map(|(a, _)| rank(a)).min() else {
            return Err(self.error(format!(
                "no asset has the key or band `{n}`; it has {}",
                self.describe_assets()
            )));
        };
        found.retain(|(a, _)| rank(a) == best);
        if found.len() > 1 {
            let keys: Vec<&str> = found.iter().map(|(a, _)| a.key.as_str()).collect();
            return Err(self.error(format!(
                "band `{n}` is in assets {}; name the asset by its key instead",
                keys.join(", ")
            )));
        }
        let (asset, band) = found[0];
        Ok(StackBand {
            requested: n.to_string(),
            asset: asset.key.clone(),
            band: Some(band),
            name: asset.bands[band].clone(),
        })
    }

    /// `key (common names)` of every asset, for error messages.
    fn describe_assets(&self) -> String {
        let list: Vec<String> = self
            .assets
            .values()
            .map(|a| {
                let names: Vec<&str> = a
                    .bands
                    .iter()
                    .filter_map(|b| b.common_name.as_deref().or(b.name.as_deref()))
                    .collect();
                if names.is_empty() {
                    a.key.clone()
                } else {
                    format!("{} ({})", a.key, names.join(", "))
                }
            })
            .collect();
        if list.is_empty() {
            "no assets".into()
        } else {
            format!("assets {}", list.join(", "))
        }
    }
}

/// Reads the STAC item or item collection at `location` (a local `item.json` or a URL):
/// one item, or every item of a collection.
pub fn read_stac(location: &str, remote: &Remote) -> Result<Vec<StacItem>, TilesError> {
    let text = if remote::is_url(location) {
        let bytes = remote.read_all(location)?;
        String::from_utf8(bytes).map_err(|e| TilesError::Metadata {
            path: location.into(),
            reason: format!("not UTF-8 text ({e})"),
        })?
    } else {
        std::fs::read_to_string(location).map_err(|e| TilesError::io(Path::new(location), e))?
    };
    parse_stac(&text, location)
}

/// Parses a STAC Item, or an ItemCollection / FeatureCollection of items, read from
/// `origin` (a path or URL: relative asset `href`s are resolved against it).
pub fn parse_stac(json: &str, origin: &str) -> Result<Vec<StacItem>, TilesError> {
    let malformed = |reason: String| TilesError::Metadata {
        path: origin.into(),
        reason,
    };
    let v: Value = serde_json::from_str(json).map_err(|e| malformed(format!("not JSON ({e})")))?;
    match v.get("type").and_then(Value::as_str) {
        Some("Feature") => Ok(vec![parse_item(&v, origin)?]),
        Some("FeatureCollection") => {
            let features = v
                .get("features")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed("a FeatureCollection without `features`".into()))?;
            features.iter().map(|f| parse_item(f, origin)).collect()
        }
        other => Err(malformed(format!(
            "`type` is {}; a STAC Item has \"Feature\", an ItemCollection \"FeatureCollection\"",
            other.map_or("missing".to_string(), |t| format!("\"{t}\""))
        ))),
    }
}

fn parse_item(v: &Value, origin: &str) -> Result<StacItem, TilesError> {
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("(no id)")
        .to_string();
    let bad = |reason: String| TilesError::Stac {
        item: format!("`{id}` ({origin})"),
        reason,
    };
    let props = v.get("properties").unwrap_or(&Value::Null);
    let item_bands = band_list(props.get("eo:bands"))
        .or_else(|| band_list(props.get("bands")))
        .unwrap_or_default();
    let assets = v
        .get("assets")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("it has no `assets` object".into()))?;
    let mut out = BTreeMap::new();
    for (key, a) in assets {
        let href = a
            .get("href")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("asset `{key}` has no `href`")))?;
        let href = resolve(href, origin).map_err(|e| bad(format!("asset `{key}`: {e}")))?;
        let roles: Vec<String> = a
            .get("roles")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let own = match a.get("eo:bands").and_then(Value::as_array) {
            // STAC 0.9: indices into the item's `eo:bands`.
            Some(list) if list.iter().all(Value::is_u64) && !list.is_empty() => {
                let picked: Option<Vec<BandName>> = list
                    .iter()
                    .map(|i| item_bands.get(i.as_u64()? as usize).cloned())
                    .collect();
                Some(picked.ok_or_else(|| {
                    bad(format!(
                        "asset `{key}` refers to eo:bands indices past the item's {}",
                        item_bands.len()
                    ))
                })?)
            }
            _ => band_list(a.get("eo:bands")).or_else(|| band_list(a.get("bands"))),
        };
        let auxiliary = roles
            .iter()
            .any(|r| matches!(r.as_str(), "thumbnail" | "overview" | "metadata"));
        let bands = match own {
            Some(b) => b,
            None if !auxiliary => item_bands.clone(),
            None => Vec::new(),
        };
        let field = |name: &str| a.get(name).or_else(|| props.get(name));
        out.insert(
            key.clone(),
            StacAsset {
                key: key.clone(),
                href,
                media_type: a.get("type").and_then(Value::as_str).map(String::from),
                roles,
                bands,
                proj_shape: field("proj:shape").and_then(proj_shape),
                proj_transform: field("proj:transform").and_then(proj_transform),
            },
        );
    }
    Ok(StacItem {
        id: id.clone(),
        origin: origin.to_string(),
        assets: out,
    })
}

/// An `eo:bands` or `bands` list of band objects.
fn band_list(v: Option<&Value>) -> Option<Vec<BandName>> {
    let list = v?.as_array()?;
    if list.is_empty() || !list.iter().all(Value::is_object) {
        return None;
    }
    let text = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).map(String::from);
    Some(
        list.iter()
            .map(|b| BandName {
                name: text(b, "name"),
                common_name: text(b, "common_name").or_else(|| text(b, "eo:common_name")),
            })
            .collect(),
    )
}

fn proj_shape(v: &Value) -> Option<[usize; 2]> {
    let a = v.as_array()?;
    Some([a.first()?.as_u64()? as usize, a.get(1)?.as_u64()? as usize])
}

/// STAC's `proj:transform` is rasterio's affine `[a, b, c, d, e, f]` (`x = a·col + b·row + c`,
/// `y = d·col + e·row + f`); GDAL orders it `[c, a, b, f, d, e]`.
fn proj_transform(v: &Value) -> Option<[f64; 6]> {
    let a: Vec<f64> = v
        .as_array()?
        .iter()
        .map(Value::as_f64)
        .collect::<Option<_>>()?;
    if a.len() < 6 {
        return None;
    }
    Some([a[2], a[0], a[1], a[5], a[3], a[4]])
}

/// An asset `href` as a URL or local path: URLs and absolute paths as they are, relative ones
/// against the item's own location (`file://` URLs become paths).
fn resolve(href: &str, origin: &str) -> Result<String, String> {
    if let Some(path) = href.strip_prefix("file://") {
        return Ok(path.to_string());
    }
    if remote::is_url(href) || Path::new(href).is_absolute() {
        return Ok(href.to_string());
    }
    if href.contains("://") {
        return Err(format!(
            "`{href}` is a URL of a kind segfit does not read (https, http, s3, gs, az)"
        ));
    }
    if remote::is_url(origin) {
        let base = url::Url::parse(origin).map_err(|e| format!("item URL `{origin}`: {e}"))?;
        let joined = base
            .join(href)
            .map_err(|e| format!("`{href}` relative to {origin}: {e}"))?;
        return Ok(joined.to_string());
    }
    let dir = Path::new(origin).parent().unwrap_or(Path::new(""));
    Ok(dir.join(href).to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str = r#"{
      "type": "Feature", "stac_version": "1.0.0", "id": "S2B_T48PXS",
      "properties": {"proj:epsg": 32648},
      "assets": {
        "red": {"href": "B04.tif", "type": "image/tiff; application=geotiff; profile=cloud-optimized",
                "eo:bands": [{"name": "B04", "common_name": "red"}], "proj:shape": [100, 200],
                "proj:transform": [10, 0, 600000, 0, -10, 1700000, 0, 0, 1]},
        "red-jp2": {"href": "B04.jp2", "type": "image/jp2", "eo:bands": [{"name": "B04", "common_name": "red"}]},
        "B08": {"href": "https://example.com/S2/B08.tif", "bands": [{"name": "B08", "eo:common_name": "nir"}]},
        "visual": {"href": "/data/TCI.tif", "eo:bands": [{"name": "B04", "common_name": "red"},
                   {"name": "B03", "common_name": "green"}, {"name": "B02", "common_name": "blue"}]},
        "thumbnail": {"href": "thumb.png", "roles": ["thumbnail"]}
      }
    }"#;

    fn item() -> StacItem {
        parse_stac(ITEM, "/scenes/a/item.json").unwrap().remove(0)
    }

    fn pick(names: &[&str]) -> Result<Vec<(String, Option<usize>)>, TilesError> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        Ok(item()
            .select(&names)?
            .into_iter()
            .map(|b| (b.asset, b.band))
            .collect())
    }

    #[test]
    fn hrefs_resolve_against_the_item_and_proj_fields_convert_to_gdal_order() {
        let it = item();
        assert_eq!(it.id(), "S2B_T48PXS");
        let red = it.asset("red").unwrap();
        assert_eq!(red.href, "/scenes/a/B04.tif");
        assert_eq!(red.proj_shape, Some([100, 200]));
        assert_eq!(
            red.proj_transform,
            Some([600000.0, 10.0, 0.0, 1700000.0, 0.0, -10.0])
        );
        assert_eq!(
            it.asset("B08").unwrap().href,
            "https://example.com/S2/B08.tif"
        );
        assert_eq!(it.asset("visual").unwrap().href, "/data/TCI.tif");
        let from_url = parse_stac(ITEM, "https://host/cat/a/item.json").unwrap();
        assert_eq!(
            from_url[0].asset("red").unwrap().href,
            "https://host/cat/a/B04.tif"
        );
    }

    #[test]
    fn names_pick_keys_then_single_band_geotiffs_by_common_name() {
        // `red` is a key; `nir` is B08's common name (STAC 1.1 `bands`); `B03` a band name
        // found only in the three-band `visual`; `visual` as a key gives all three bands.
        assert_eq!(
            pick(&["red", "nir", "B03", "visual"]).unwrap(),
            vec![
                ("red".into(), Some(0)),
                ("B08".into(), Some(0)),
                ("visual".into(), Some(1)),
                ("visual".into(), Some(0)),
                ("visual".into(), Some(1)),
                ("visual".into(), Some(2)),
            ]
        );
        // By band name `B04`: red (GeoTIFF, one band) beats red-jp2 and visual.
        assert_eq!(pick(&["B04"]).unwrap(), vec![("red".into(), Some(0))]);
        let missing = pick(&["swir16"]).unwrap_err().to_string();
        assert!(
            missing.contains("no asset has the key or band `swir16`")
                && missing.contains("B08 (nir)"),
            "{missing}"
        );
    }

    #[test]
    fn ties_and_malformed_items_are_errors_naming_what_to_fix() {
        let two = ITEM.replace("\"B04.jp2\", \"type\": \"image/jp2\"", "\"B04b.tif\"");
        let it = parse_stac(&two, "item.json").unwrap().remove(0);
        let err = it.select(&["B04".to_string()]).unwrap_err().to_string();
        assert!(
            err.contains("band `B04` is in assets red, red-jp2"),
            "{err}"
        );
        let err = parse_stac(r#"{"type": "Catalog"}"#, "cat.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cat.json") && err.contains("\"Catalog\""),
            "{err}"
        );
        let err = parse_stac(
            r#"{"type": "Feature", "id": "x", "assets": {"a": {}}}"#,
            "i.json",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("asset `a` has no `href`"), "{err}");
    }

    #[test]
    fn stac_0_9_band_indices_and_item_level_bands_apply() {
        let old = r#"{"type": "FeatureCollection", "features": [{"type": "Feature", "id": "old",
          "properties": {"eo:bands": [{"name": "B1", "common_name": "blue"}, {"name": "B2", "common_name": "nir"}]},
          "assets": {"b2": {"href": "b2.tif", "eo:bands": [1]}, "all": {"href": "all.tif"},
                     "thumb": {"href": "t.png", "roles": ["thumbnail"]}}}]}"#;
        let items = parse_stac(old, "dir/items.json").unwrap();
        let it = &items[0];
        assert_eq!(
            it.asset("b2").unwrap().bands[0].common_name.as_deref(),
            Some("nir")
        );
        assert_eq!(it.asset("all").unwrap().bands.len(), 2);
        assert!(it.asset("thumb").unwrap().bands.is_empty());
        // `nir` is in b2 (one band) and all (two): the single-band asset wins.
        let picked = it.select(&["nir".to_string()]).unwrap();
        assert_eq!((picked[0].asset.as_str(), picked[0].band), ("b2", Some(0)));
    }
}
