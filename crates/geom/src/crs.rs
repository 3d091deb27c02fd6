//! Coordinate reference systems: read from a raster's GeoKeys (GeoTIFF 1.0 key ids), from an
//! EPSG code or a user's string (`EPSG:32648`), or from a layer's WKT, through the bundled EPSG
//! table of `crs-definitions`.

use raster::GeoRef;

use crate::GeomError;

const MODEL_TYPE: u16 = 1024;
const CITATION: u16 = 1026;
const GEOGRAPHIC_TYPE: u16 = 2048;
const GEOG_CITATION: u16 = 2049;
const GEOG_ANGULAR_UNITS: u16 = 2054;
const GEOG_ELLIPSOID: u16 = 2056;
const GEOG_SEMI_MAJOR: u16 = 2057;
const GEOG_SEMI_MINOR: u16 = 2058;
const GEOG_INV_FLATTENING: u16 = 2059;
const PROJECTED_CS_TYPE: u16 = 3072;
const PCS_CITATION: u16 = 3073;
const PROJ_LINEAR_UNITS: u16 = 3076;
const PROJ_LINEAR_UNIT_SIZE: u16 = 3077;
const USER_DEFINED: u16 = 32767;

/// A reference ellipsoid: semi-major axis and inverse flattening.
#[derive(Clone, Debug, PartialEq)]
pub struct Ellipsoid {
    /// Its name (`WGS 84`, `GRS 1980`).
    pub name: String,
    /// Semi-major axis in metres.
    pub semi_major_m: f64,
    /// Inverse flattening `1/f` (0 for a sphere).
    pub inv_flattening: f64,
}

impl Ellipsoid {
    /// WGS 84 (EPSG:7030), the default when a geographic CRS names no ellipsoid.
    pub fn wgs84() -> Self {
        Ellipsoid {
            name: "WGS 84".into(),
            semi_major_m: 6_378_137.0,
            inv_flattening: 298.257_223_563,
        }
    }

    /// The first eccentricity squared, `e² = f(2 − f)`.
    pub fn e2(&self) -> f64 {
        if self.inv_flattening == 0.0 {
            return 0.0;
        }
        let f = 1.0 / self.inv_flattening;
        f * (2.0 - f)
    }
}

/// The coordinate reference system of a class map, as far as areas and reprojection need it.
#[derive(Clone, Debug, PartialEq)]
pub enum Crs {
    /// A projected CRS: world coordinates in a linear unit.
    Projected {
        /// The EPSG code, when the GeoKeys give one (ProjectedCSTypeGeoKey).
        epsg: Option<u32>,
        /// A human-readable name (`WGS 84 / UTM zone 48N`).
        name: String,
        /// Metres per linear unit (1 for metres, 1200/3937 for US survey feet).
        metres_per_unit: f64,
    },
    /// A geographic CRS: world coordinates are longitude (x) and latitude (y).
    Geographic {
        /// The EPSG code, when the GeoKeys give one (GeographicTypeGeoKey).
        epsg: Option<u32>,
        /// A human-readable name (`WGS 84`).
        name: String,
        /// The datum's ellipsoid (WGS 84 when none is named).
        ellipsoid: Ellipsoid,
        /// Degrees per angular unit (1 for degrees).
        degrees_per_unit: f64,
    },
}

impl Crs {
    /// WGS 84 longitude/latitude in degrees (EPSG:4326), the CRS of RFC 7946 GeoJSON.
    pub fn wgs84() -> Crs {
        Crs::from_epsg(4326).expect("EPSG:4326 is in the bundled table")
    }

    /// The CRS of an EPSG code from the bundled table, `None` when the table lacks it (or it
    /// is neither a projected nor a geographic 2-D CRS).
    pub fn from_epsg(code: u32) -> Option<Crs> {
        let def = u16::try_from(code)
            .ok()
            .and_then(crs_definitions::from_code)?;
        let name = wkt_name(def.wkt).unwrap_or_else(|| format!("EPSG:{code}"));
        if def.wkt.starts_with("PROJCS[") {
            Some(Crs::Projected {
                epsg: Some(code),
                name,
                metres_per_unit: wkt_last_unit(def.wkt)?,
            })
        } else if def.wkt.starts_with("GEOGCS[") {
            // The table gives radians per unit (0.0174532925199433 for degrees).
            let deg = wkt_last_unit(def.wkt)?.to_degrees();
            let deg = if (deg - deg.round()).abs() < 1e-9 && deg.round() != 0.0 {
                deg.round()
            } else {
                deg
            };
            Some(Crs::Geographic {
                epsg: Some(code),
                name,
                ellipsoid: wkt_spheroid(def.wkt).unwrap_or_else(Ellipsoid::wgs84),
                degrees_per_unit: deg,
            })
        } else {
            None
        }
    }

    /// A CRS as a user writes it: `EPSG:32648`, `epsg:4326`, an OGC URN
    /// (`urn:ogc:def:crs:EPSG::32648`, `urn:ogc:def:crs:OGC:1.3:CRS84`) or WKT (see
    /// [`from_wkt`](Self::from_wkt)).
    pub fn parse(text: &str) -> Result<Crs, GeomError> {
        let t = text.trim();
        let unknown = |why: String| GeomError::UnknownCrs {
            crs: t.to_string(),
            why,
        };
        if t.contains('[') {
            return Crs::from_wkt(t);
        }
        let lower = t.to_ascii_lowercase();
        if lower.ends_with("crs84") || lower.ends_with("crs:84") {
            return Ok(Crs::wgs84());
        }
        let code = lower
            .strip_prefix("epsg:")
            .or_else(|| lower.strip_prefix("urn:ogc:def:crs:epsg::"))
            .or_else(|| {
                lower
                    .strip_prefix("urn:ogc:def:crs:epsg:")
                    .and_then(|r| r.rsplit(':').next())
            })
            .or_else(|| lower.strip_prefix("http://www.opengis.net/def/crs/epsg/0/"))
            .ok_or_else(|| unknown("expected EPSG:<code>, an OGC URN or WKT".into()))?;
        let code: u32 = code
            .trim()
            .parse()
            .map_err(|_| unknown(format!("`{code}` is not an EPSG code")))?;
        Crs::from_epsg(code).ok_or_else(|| {
            unknown(format!(
                "EPSG:{code} is not a 2-D projected or geographic CRS of the bundled EPSG table"
            ))
        })
    }

    /// The CRS a WKT string (a Shapefile's `.prj`, WKT1 or WKT2) describes, resolved to an
    /// EPSG code: the outermost `AUTHORITY["EPSG",…]`/`ID["EPSG",…]` when present, else the
    /// names and parameters of common CRSs written without one (ESRI's `GCS_WGS_1984`,
    /// `WGS_1984_UTM_Zone_48N`, NAD83 and ETRS89 UTM zones, Web Mercator, and any
    /// Transverse Mercator on WGS 84 with UTM parameters).
    pub fn from_wkt(wkt: &str) -> Result<Crs, GeomError> {
        crate::wkt::resolve(wkt)
    }

    /// The CRS of a raster's GeoKeys, or why none usable for areas can be read from them, as
    /// what the raster "has" (`has GeoKeys that name no CRS`).
    pub fn from_geokeys(geo: &GeoRef) -> Result<Crs, String> {
        crs_from_geokeys(geo)
    }

    /// The proj4 definition from the bundled EPSG table, when the CRS has a code there.
    pub fn proj4(&self) -> Option<&'static str> {
        self.epsg().and_then(proj4_of)
    }

    /// Whether the CRS is geographic (coordinates are longitude, latitude).
    pub fn is_geographic(&self) -> bool {
        matches!(self, Crs::Geographic { .. })
    }

    /// `EPSG:32648 (WGS 84 / UTM zone 48N)`, or the name alone without a code.
    pub fn describe(&self) -> String {
        match (self.epsg(), self.name()) {
            (Some(code), name) if name != format!("EPSG:{code}") => format!("EPSG:{code} ({name})"),
            (Some(code), _) => format!("EPSG:{code}"),
            (None, name) => name.to_string(),
        }
    }

    /// The EPSG code, when known.
    pub fn epsg(&self) -> Option<u32> {
        match self {
            Crs::Projected { epsg, .. } | Crs::Geographic { epsg, .. } => *epsg,
        }
    }

    /// The CRS's name (`WGS 84 / UTM zone 48N`).
    pub fn name(&self) -> &str {
        match self {
            Crs::Projected { name, .. } | Crs::Geographic { name, .. } => name,
        }
    }
}

/// See [`Crs::from_geokeys`].
fn crs_from_geokeys(geo: &GeoRef) -> Result<Crs, String> {
    let keys = GeoKeys::parse(geo);
    let model = keys.short(MODEL_TYPE).or_else(|| {
        if keys.short(PROJECTED_CS_TYPE).is_some() {
            Some(1)
        } else if keys.short(GEOGRAPHIC_TYPE).is_some() {
            Some(2)
        } else {
            None
        }
    });
    match model {
        Some(1) => projected(&keys),
        Some(2) => Ok(geographic(&keys)),
        Some(3) => Err("has a geocentric CRS (GTModelTypeGeoKey 3), which is not supported".into()),
        Some(m) => Err(format!("has an unknown GTModelTypeGeoKey {m}")),
        None => Err("has GeoKeys that name no CRS".into()),
    }
}

fn projected(keys: &GeoKeys) -> Result<Crs, String> {
    let code = keys.short(PROJECTED_CS_TYPE).filter(|&c| c != USER_DEFINED);
    let def = code.and_then(crs_definitions::from_code);
    let from_keys = match keys.short(PROJ_LINEAR_UNITS) {
        Some(USER_DEFINED) | None => keys.double(PROJ_LINEAR_UNIT_SIZE),
        Some(u) => linear_unit_metres(u),
    };
    let from_table = def.and_then(|d| wkt_last_unit(d.wkt));
    let name = def
        .and_then(|d| wkt_name(d.wkt))
        .or_else(|| keys.ascii(PCS_CITATION))
        .or_else(|| keys.ascii(CITATION))
        .unwrap_or_else(|| match code {
            Some(c) => format!("EPSG:{c}"),
            None => "a user-defined projected CRS".into(),
        });
    let Some(metres_per_unit) = from_keys.or(from_table) else {
        return Err(format!(
            "has a CRS whose linear unit is unknown ({}: no ProjLinearUnitsGeoKey, not in the EPSG table)",
            code.map_or(name.clone(), |c| format!("EPSG:{c}"))
        ));
    };
    Ok(Crs::Projected {
        epsg: code.map(u32::from),
        name,
        metres_per_unit,
    })
}

fn geographic(keys: &GeoKeys) -> Crs {
    let code = keys.short(GEOGRAPHIC_TYPE).filter(|&c| c != USER_DEFINED);
    let def = code.and_then(crs_definitions::from_code);
    let mut ellipsoid = def
        .and_then(|d| wkt_spheroid(d.wkt))
        .or_else(|| keys.short(GEOG_ELLIPSOID).and_then(ellipsoid_by_code))
        .unwrap_or_else(Ellipsoid::wgs84);
    if let Some(a) = keys.double(GEOG_SEMI_MAJOR) {
        let inv_f = keys.double(GEOG_INV_FLATTENING).or_else(|| {
            let b = keys.double(GEOG_SEMI_MINOR)?;
            Some(if a == b { 0.0 } else { a / (a - b) })
        });
        if let Some(inv_f) = inv_f {
            ellipsoid = Ellipsoid {
                name: "user-defined".into(),
                semi_major_m: a,
                inv_flattening: inv_f,
            };
        }
    }
    let degrees_per_unit = match keys.short(GEOG_ANGULAR_UNITS) {
        Some(9101) => 180.0 / std::f64::consts::PI,
        Some(9103) => 1.0 / 60.0,
        Some(9104) => 1.0 / 3600.0,
        Some(9105) | Some(9106) => 0.9,
        _ => 1.0,
    };
    let name = def
        .and_then(|d| wkt_name(d.wkt))
        .or_else(|| keys.ascii(GEOG_CITATION))
        .unwrap_or_else(|| match code {
            Some(c) => format!("EPSG:{c}"),
            None => "a user-defined geographic CRS".into(),
        });
    Crs::Geographic {
        epsg: code.map(u32::from),
        name,
        ellipsoid,
        degrees_per_unit,
    }
}

/// EPSG unit-of-measure codes for lengths (GeoTIFF 1.0 §6.3.1.3 and the EPSG registry).
fn linear_unit_metres(code: u16) -> Option<f64> {
    Some(match code {
        9001 => 1.0,
        9002 => 0.3048,
        9003 => 1200.0 / 3937.0,
        9005 => 0.304_797_265_4,
        9014 => 1.8288,
        9030 => 1852.0,
        9036 => 1000.0,
        9093 => 1609.344,
        9094 => 0.304_799_710_181_508_8,
        9096 => 0.9144,
        _ => return None,
    })
}

fn ellipsoid_by_code(code: u16) -> Option<Ellipsoid> {
    let (name, a, inv_f) = match code {
        7030 => ("WGS 84", 6_378_137.0, 298.257_223_563),
        7019 => ("GRS 1980", 6_378_137.0, 298.257_222_101),
        7043 => ("WGS 72", 6_378_135.0, 298.26),
        7008 => ("Clarke 1866", 6_378_206.4, 294.978_698_213_898),
        7004 => ("Bessel 1841", 6_377_397.155, 299.152_812_8),
        7022 => ("International 1924", 6_378_388.0, 297.0),
        7024 => ("Krassowsky 1940", 6_378_245.0, 298.3),
        _ => return None,
    };
    Some(Ellipsoid {
        name: name.into(),
        semi_major_m: a,
        inv_flattening: inv_f,
    })
}

/// `WGS 84 / UTM zone 48N` from `PROJCS["WGS 84 / UTM zone 48N",…`.
pub(crate) fn wkt_name(wkt: &str) -> Option<String> {
    let start = wkt.find("[\"")? + 2;
    let len = wkt[start..].find('"')?;
    Some(wkt[start..start + len].to_string())
}

/// The projected CRS's linear unit: the last `UNIT["name",factor` (the GEOGCS one comes first).
fn wkt_last_unit(wkt: &str) -> Option<f64> {
    let at = wkt.rfind("UNIT[\"")?;
    let rest = &wkt[at + 6..];
    let rest = &rest[rest.find("\",")? + 2..];
    rest[..rest.find([',', ']'])?].trim().parse().ok()
}

fn wkt_spheroid(wkt: &str) -> Option<Ellipsoid> {
    let at = wkt.find("SPHEROID[\"")?;
    let rest = &wkt[at + 10..];
    let name_end = rest.find('"')?;
    let mut numbers = rest[name_end + 2..].split([',', ']']);
    Some(Ellipsoid {
        name: rest[..name_end].to_string(),
        semi_major_m: numbers.next()?.trim().parse().ok()?,
        inv_flattening: numbers.next()?.trim().parse().ok()?,
    })
}

/// The proj4 definition of an EPSG code from the bundled table.
fn proj4_of(code: u32) -> Option<&'static str> {
    u16::try_from(code)
        .ok()
        .and_then(crs_definitions::from_code)
        .map(|d| d.proj4)
}

/// The GeoKeyDirectory's entries, with their values resolved.
struct GeoKeys<'a> {
    geo: &'a GeoRef,
    entries: Vec<[u16; 4]>,
}

impl<'a> GeoKeys<'a> {
    fn parse(geo: &'a GeoRef) -> Self {
        let dir = geo.geo_key_directory.as_deref().unwrap_or(&[]);
        let entries = dir
            .get(4..)
            .unwrap_or(&[])
            .chunks_exact(4)
            .map(|e| [e[0], e[1], e[2], e[3]])
            .collect();
        GeoKeys { geo, entries }
    }

    fn entry(&self, key: u16) -> Option<[u16; 4]> {
        self.entries.iter().copied().find(|e| e[0] == key)
    }

    fn short(&self, key: u16) -> Option<u16> {
        self.entry(key).filter(|e| e[1] == 0).map(|e| e[3])
    }

    fn double(&self, key: u16) -> Option<f64> {
        let e = self.entry(key).filter(|e| e[1] == 34736)?;
        self.geo
            .geo_double_params
            .as_ref()?
            .get(e[3] as usize)
            .copied()
    }

    fn ascii(&self, key: u16) -> Option<String> {
        let e = self.entry(key).filter(|e| e[1] == 34737)?;
        let (at, n) = (e[3] as usize, e[2] as usize);
        let s = self.geo.geo_ascii_params.as_ref()?.get(at..at + n)?;
        let s = s.trim_end_matches(['|', '\0']).trim();
        (!s.is_empty()).then(|| s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(keys: Vec<u16>) -> GeoRef {
        GeoRef {
            transform: [0.0, 1.0, 0.0, 0.0, 0.0, -1.0],
            geo_key_directory: Some(keys),
            geo_double_params: None,
            geo_ascii_params: None,
            nodata: None,
        }
    }

    #[test]
    fn utm_48n_is_named_from_the_table() {
        let crs =
            crs_from_geokeys(&geo(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, 32648])).unwrap();
        assert_eq!(crs.describe(), "EPSG:32648 (WGS 84 / UTM zone 48N)");
        assert_eq!(crs.epsg(), Some(32648));
    }

    #[test]
    fn us_foot_state_plane_takes_its_unit_from_the_table() {
        // NAD83 / California zone 3 (ftUS).
        let crs = crs_from_geokeys(&geo(vec![1, 1, 0, 1, 3072, 0, 1, 2227])).unwrap();
        let Crs::Projected {
            metres_per_unit, ..
        } = crs
        else {
            panic!("{crs:?}")
        };
        assert!((metres_per_unit - 1200.0 / 3937.0).abs() < 1e-12);
    }

    #[test]
    fn unknown_code_with_metre_units_still_gives_areas() {
        let crs =
            crs_from_geokeys(&geo(vec![1, 1, 0, 2, 3072, 0, 1, 65000, 3076, 0, 1, 9001])).unwrap();
        assert_eq!(crs.describe(), "EPSG:65000");
        let no_units = crs_from_geokeys(&geo(vec![1, 1, 0, 1, 3072, 0, 1, 65000]));
        assert!(
            no_units
                .unwrap_err()
                .contains("(EPSG:65000: no ProjLinearUnitsGeoKey")
        );
    }

    #[test]
    fn geographic_reads_its_ellipsoid() {
        let crs =
            crs_from_geokeys(&geo(vec![1, 1, 0, 2, 1024, 0, 1, 2, 2048, 0, 1, 4326])).unwrap();
        assert_eq!(crs.describe(), "EPSG:4326 (WGS 84)");
        let Crs::Geographic { ellipsoid, .. } = crs else {
            panic!()
        };
        assert_eq!(ellipsoid, Ellipsoid::wgs84());
    }
}
