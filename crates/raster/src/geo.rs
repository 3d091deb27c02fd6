//! GeoTIFF-style georeferencing carried with samples and tiles (the tags themselves are read
//! and written by `tiles`).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_moves_the_origin_along_rotated_axes() {
        let g = GeoRef {
            transform: [100.0, 2.0, 0.5, 50.0, 0.25, -2.0],
            geo_key_directory: Some(vec![1, 1, 0, 0]),
            geo_double_params: None,
            geo_ascii_params: None,
            nodata: Some(0.0),
        };
        let s = g.shifted(3, 4);
        assert_eq!(s.pixel_to_world(0.0, 0.0), g.pixel_to_world(3.0, 4.0));
        assert_eq!(s.pixel_to_world(1.0, 1.0), g.pixel_to_world(4.0, 5.0));
        assert_eq!(
            (s.geo_key_directory, s.nodata),
            (g.geo_key_directory, g.nodata)
        );
    }
}
