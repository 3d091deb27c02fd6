//! GeoTIFF georeferencing carried with samples and tiles.

/// The georeferencing of a raster, as read from (and written back to) GeoTIFF tags.
///
/// The affine geotransform follows GDAL's convention: world `x = t[0] + col * t[1] + row * t[2]`,
/// `y = t[3] + col * t[4] + row * t[5]`, for the pixel corner `(col, row)`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeoRef {
    /// GDAL-style affine transform from pixel corner to world coordinates.
    pub transform: [f64; 6],
    /// GeoKeyDirectory (tag 34735) as stored, when present.
    pub geo_key_directory: Option<Vec<u16>>,
    /// GeoDoubleParams (tag 34736), when present.
    pub geo_double_params: Option<Vec<f64>>,
    /// GeoAsciiParams (tag 34737), when present.
    pub geo_ascii_params: Option<String>,
    /// GDAL_NODATA (tag 42113), when present.
    pub nodata: Option<f64>,
}

impl GeoRef {
    /// World coordinates of the corner of pixel `(col, row)`.
    pub fn pixel_to_world(&self, col: f64, row: f64) -> (f64, f64) {
        let t = &self.transform;
        (
            t[0] + col * t[1] + row * t[2],
            t[3] + col * t[4] + row * t[5],
        )
    }

    /// The same georeferencing for a window whose top-left pixel is `(col, row)` of this raster.
    pub fn shifted(&self, col: usize, row: usize) -> GeoRef {
        let (x, y) = self.pixel_to_world(col as f64, row as f64);
        let mut g = self.clone();
        g.transform[0] = x;
        g.transform[3] = y;
        g
    }
}
