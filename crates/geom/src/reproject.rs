//! Point reprojection between two CRSs with proj4rs.

use proj4rs::Proj;

use crate::{Crs, GeomError};

/// Reprojects points from one CRS to another: proj4rs on the definitions of the bundled EPSG
/// table, the identity when both are the same EPSG code. Geographic coordinates are degrees
/// (longitude, latitude) on both sides.
pub struct Reprojector {
    from: String,
    to: String,
    how: How,
}

enum How {
    Identity,
    Proj {
        src: Box<Proj>,
        dst: Box<Proj>,
        src_latlong: bool,
        dst_latlong: bool,
    },
}

impl Reprojector {
    /// The reprojection from `from` to `to`; an error when either CRS has no definition in the
    /// bundled table (no EPSG code, or a code the table lacks).
    pub fn new(from: &Crs, to: &Crs) -> Result<Reprojector, GeomError> {
        let (fd, td) = (from.describe(), to.describe());
        if from.epsg().is_some() && from.epsg() == to.epsg() {
            return Ok(Reprojector {
                from: fd,
                to: td,
                how: How::Identity,
            });
        }
        let proj = |crs: &Crs| -> Result<Proj, GeomError> {
            let unprojectable = |why: String| GeomError::Unprojectable {
                crs: crs.describe(),
                why,
            };
            let Some(code) = crs.epsg() else {
                return Err(unprojectable(
                    "it has no EPSG code (a user-defined CRS)".into(),
                ));
            };
            let Some(def) = crs.proj4() else {
                return Err(unprojectable(format!(
                    "EPSG:{code} is not in the bundled EPSG table (crs-definitions)"
                )));
            };
            Proj::from_proj_string(def)
                .map_err(|e| unprojectable(format!("proj4rs cannot build `{def}`: {e}")))
        };
        let (src, dst) = (proj(from)?, proj(to)?);
        Ok(Reprojector {
            from: fd,
            to: td,
            how: How::Proj {
                src_latlong: src.is_latlong(),
                dst_latlong: dst.is_latlong(),
                src: Box::new(src),
                dst: Box::new(dst),
            },
        })
    }

    /// Whether points pass through unchanged.
    pub fn is_identity(&self) -> bool {
        matches!(self.how, How::Identity)
    }

    /// The source CRS, described (`EPSG:4326 (WGS 84)`).
    pub fn from_crs(&self) -> &str {
        &self.from
    }

    /// The target CRS, described.
    pub fn to_crs(&self) -> &str {
        &self.to
    }

    /// `(x, y)` in the target CRS, or why the point cannot be reprojected (outside the
    /// projection's domain, or a non-finite result).
    pub fn transform(&self, x: f64, y: f64) -> Result<(f64, f64), String> {
        match &self.how {
            How::Identity => Ok((x, y)),
            How::Proj {
                src,
                dst,
                src_latlong,
                dst_latlong,
            } => {
                let mut p = if *src_latlong {
                    (x.to_radians(), y.to_radians(), 0.0)
                } else {
                    (x, y, 0.0)
                };
                proj4rs::transform::transform(src, dst, &mut p).map_err(|e| e.to_string())?;
                let out = if *dst_latlong {
                    (p.0.to_degrees(), p.1.to_degrees())
                } else {
                    (p.0, p.1)
                };
                if out.0.is_finite() && out.1.is_finite() {
                    Ok(out)
                } else {
                    Err("not a finite coordinate".into())
                }
            }
        }
    }
}
