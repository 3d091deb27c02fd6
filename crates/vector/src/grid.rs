//! The georeferencing of a class map and the ground area of its pixels.

use raster::GeoRef;

use crate::VectorError;
use crate::{Crs, Ellipsoid};

/// The georeferencing of a class map: its size, geotransform and CRS.
#[derive(Clone, Debug)]
pub struct Grid {
    width: usize,
    height: usize,
    /// GDAL `[x0, a, b, y0, d, e]`: `x = x0 + col·a + row·b`, `y = y0 + col·d + row·e`.
    transform: Option<[f64; 6]>,
    crs: Option<Crs>,
    /// Why areas are in pixels only, when they are.
    pixels_only: Option<String>,
}

impl Grid {
    /// The grid of a `width × height` class map; `geo` is its georeferencing, if any.
    ///
    /// A transform with a non-finite term or a zero determinant is an error. GeoKeys that name
    /// no usable CRS are not: areas are then counted in pixels, and
    /// [`pixels_only_reason`](Self::pixels_only_reason) says why.
    pub fn new(geo: Option<&GeoRef>, width: usize, height: usize) -> Result<Grid, VectorError> {
        let Some(geo) = geo else {
            return Ok(Grid {
                width,
                height,
                transform: None,
                crs: None,
                pixels_only: Some("has no georeferencing".into()),
            });
        };
        let t = geo.transform;
        if t.iter().any(|v| !v.is_finite()) {
            return Err(VectorError::BadTransform {
                transform: t,
                why: "a term is not finite",
            });
        }
        if t[1] * t[5] - t[2] * t[4] == 0.0 {
            return Err(VectorError::BadTransform {
                transform: t,
                why: "its determinant a·e − b·d is zero",
            });
        }
        let (crs, pixels_only) = match Crs::from_geokeys(geo) {
            Ok(crs) => (Some(crs), None),
            Err(why) => (None, Some(why)),
        };
        Ok(Grid {
            width,
            height,
            transform: Some(t),
            crs,
            pixels_only,
        })
    }

    /// Columns of the class map.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows of the class map.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The CRS; `None` when not georeferenced (or when the GeoKeys name no usable CRS).
    pub fn crs(&self) -> Option<&Crs> {
        self.crs.as_ref()
    }

    /// The geotransform, when georeferenced.
    pub fn transform(&self) -> Option<[f64; 6]> {
        self.transform
    }

    /// Why areas cannot be computed, as what the map has (`has no georeferencing`), or `None`
    /// when they can.
    pub fn pixels_only_reason(&self) -> Option<&str> {
        self.pixels_only.as_deref()
    }

    /// The ground area in m² of one pixel of `row`, `None` without a usable CRS.
    ///
    /// Projected: `|a·e − b·d|` times the squared linear unit, the same for every row.
    /// Geographic (north-up): the exact area of the row's lat/lon cell on the ellipsoid, through
    /// the authalic-latitude function `q(φ)`; with rotation terms, `|a·e − b·d|` times the local
    /// scale `M·N·cos φ` at the row's centre.
    pub fn pixel_area_m2(&self, row: usize) -> Option<f64> {
        let t = self.transform?;
        let det = (t[1] * t[5] - t[2] * t[4]).abs();
        match self.crs.as_ref()? {
            Crs::Projected {
                metres_per_unit, ..
            } => Some(det * metres_per_unit * metres_per_unit),
            Crs::Geographic {
                ellipsoid,
                degrees_per_unit,
                ..
            } => {
                let deg = |v: f64| v * degrees_per_unit;
                if t[2] == 0.0 && t[4] == 0.0 {
                    let lat1 = deg(t[3] + row as f64 * t[5]);
                    let lat2 = deg(t[3] + (row + 1) as f64 * t[5]);
                    Some(cell_area_m2(ellipsoid, deg(t[1]).abs(), lat1, lat2))
                } else {
                    let (_, lat) = self.pixel_to_world(self.width as f64 / 2.0, row as f64 + 0.5);
                    let (m, n) = radii(ellipsoid, deg(lat).to_radians());
                    let rad2 = (deg(1.0).to_radians()).powi(2);
                    Some(det * rad2 * m * n * deg(lat).to_radians().cos())
                }
            }
        }
    }

    /// World coordinates of the pixel corner `(col, row)`; `(col, row)` itself without a transform.
    pub fn pixel_to_world(&self, col: f64, row: f64) -> (f64, f64) {
        match self.transform {
            Some(t) => (
                t[0] + col * t[1] + row * t[2],
                t[3] + col * t[4] + row * t[5],
            ),
            None => (col, row),
        }
    }

    /// Ground metres per pixel along a column step and a row step near `row` (for tolerances),
    /// `None` without a usable CRS.
    pub(crate) fn pixel_size_m(&self, row: f64) -> Option<(f64, f64)> {
        let t = self.transform?;
        match self.crs.as_ref()? {
            Crs::Projected {
                metres_per_unit, ..
            } => Some((
                t[1].hypot(t[4]) * metres_per_unit,
                t[2].hypot(t[5]) * metres_per_unit,
            )),
            Crs::Geographic {
                ellipsoid,
                degrees_per_unit,
                ..
            } => {
                let (_, lat) = self.pixel_to_world(self.width as f64 / 2.0, row);
                let phi = (lat * degrees_per_unit).to_radians();
                let (m, n) = radii(ellipsoid, phi);
                let k = degrees_per_unit.to_radians();
                let metric = |dlon: f64, dlat: f64| (dlon * k * n * phi.cos()).hypot(dlat * k * m);
                Some((metric(t[1], t[4]), metric(t[2], t[5])))
            }
        }
    }

    /// `G(y)` for `y = 0..=height`: the ground area of one column's pixels above row `y`, so
    /// that a rectilinear pixel-edge ring's area is a sum over its horizontal edges.
    pub(crate) fn row_area_prefix(&self) -> Option<Vec<f64>> {
        let mut g = Vec::with_capacity(self.height + 1);
        let mut acc = 0.0;
        g.push(0.0);
        for row in 0..self.height {
            acc += self.pixel_area_m2(row)?;
            g.push(acc);
        }
        Some(g)
    }
}

/// Meridional (M) and prime-vertical (N) radii of curvature at latitude `phi` (radians).
fn radii(ell: &Ellipsoid, phi: f64) -> (f64, f64) {
    let e2 = ell.e2();
    let w2 = 1.0 - e2 * phi.sin().powi(2);
    let n = ell.semi_major_m / w2.sqrt();
    (n * (1.0 - e2) / w2, n)
}

/// `q(φ) = (1−e²)[sinφ/(1−e²sin²φ) − (1/2e)·ln((1−e sinφ)/(1+e sinφ))]` (Snyder, eq. 3-12).
fn authalic_q(e2: f64, phi: f64) -> f64 {
    let s = phi.sin();
    if e2 == 0.0 {
        return 2.0 * s;
    }
    let e = e2.sqrt();
    (1.0 - e2) * (s / (1.0 - e2 * s * s) - (1.0 / (2.0 * e)) * ((1.0 - e * s) / (1.0 + e * s)).ln())
}

/// Area in m² between latitudes `lat1` and `lat2` (degrees) over `dlon` degrees of longitude:
/// `a²/2 · Δλ · |q(φ2) − q(φ1)|`.
fn cell_area_m2(ell: &Ellipsoid, dlon_deg: f64, lat1_deg: f64, lat2_deg: f64) -> f64 {
    let e2 = ell.e2();
    let dq = authalic_q(e2, lat2_deg.to_radians()) - authalic_q(e2, lat1_deg.to_radians());
    0.5 * ell.semi_major_m.powi(2) * dlon_deg.to_radians() * dq.abs()
}
