//! A scene's pixel grid: size, geotransform and CRS.

use raster::GeoRef;

use crate::scanline::PixelTransform;
use crate::{Crs, GeomError};

/// The grid layers are burned onto: `width × height` pixels, a GDAL geotransform
/// `[x0, a, b, y0, d, e]` (`x = x0 + col·a + row·b`, `y = y0 + col·d + row·e`) and a CRS.
///
/// Rotated transforms (`b`, `d` ≠ 0) are supported exactly as GDAL supports them: world
/// coordinates go to pixel coordinates through GDAL's inverse transform and the polygons are
/// burned there, so a pixel is still burned when its centre lies inside the polygon.
#[derive(Clone, Debug)]
pub struct SceneGrid {
    pub(crate) name: String,
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) transform: [f64; 6],
    pub(crate) crs: Crs,
    pub(crate) pixels: PixelTransform,
}

impl SceneGrid {
    /// The grid of scene `name`; an error when the transform has a non-finite term or cannot
    /// be inverted, or the grid has no pixels.
    pub fn new(
        name: &str,
        width: usize,
        height: usize,
        transform: [f64; 6],
        crs: Crs,
    ) -> Result<SceneGrid, GeomError> {
        let pixels = PixelTransform::new(transform).ok_or(GeomError::BadTransform {
            transform,
            why: "a term is not finite or a·e − b·d is (nearly) zero",
        })?;
        if width == 0 || height == 0 || width > i32::MAX as usize || height > i32::MAX as usize {
            return Err(GeomError::Config(format!(
                "scene {name} is {width}×{height} pixels; expected 1 to 2^31−1 on each side"
            )));
        }
        Ok(SceneGrid {
            name: name.to_string(),
            width,
            height,
            transform,
            crs,
            pixels,
        })
    }

    /// The grid of a georeferenced raster: its transform and the CRS of its GeoKeys.
    pub fn from_georef(
        name: &str,
        width: usize,
        height: usize,
        geo: &GeoRef,
    ) -> Result<SceneGrid, GeomError> {
        let crs = Crs::from_geokeys(geo).map_err(|why| GeomError::SceneCrs {
            scene: name.to_string(),
            why: format!("the raster {why}"),
        })?;
        SceneGrid::new(name, width, height, geo.transform, crs)
    }

    /// The scene's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The geotransform.
    pub fn transform(&self) -> [f64; 6] {
        self.transform
    }

    /// The CRS.
    pub fn crs(&self) -> &Crs {
        &self.crs
    }

    /// World coordinates of pixel corner `(col, row)`.
    pub fn pixel_to_world(&self, col: f64, row: f64) -> (f64, f64) {
        let t = &self.transform;
        (
            t[0] + col * t[1] + row * t[2],
            t[3] + col * t[4] + row * t[5],
        )
    }
}
