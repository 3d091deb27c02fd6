use thiserror::Error;

/// What can go wrong while turning a class map into statistics or polygons.
#[derive(Debug, Error)]
pub enum VectorError {
    /// The geotransform cannot map pixels to the world (a non-finite term or a zero determinant).
    #[error("unusable geotransform {transform:?}: {why}")]
    BadTransform {
        /// The transform `[x0, a, b, y0, d, e]` as given.
        transform: [f64; 6],
        /// What is wrong with it.
        why: &'static str,
    },
    /// WGS84 output was asked for but the scene's CRS cannot be reprojected.
    #[error(
        "cannot reproject {crs} to WGS84 lon/lat: {why}; write the scene's own coordinates with \
         --vector-crs native, or warp the class map first (gdalwarp -t_srs EPSG:4326)"
    )]
    Unprojectable {
        /// The CRS as far as it is known (`EPSG:12345`, `a user-defined projected CRS`).
        crs: String,
        /// Why it cannot be reprojected.
        why: String,
    },
    /// A point could not be reprojected (outside the projection's domain).
    #[error("reprojecting ({x}, {y}) from {crs} to WGS84 failed: {why}")]
    Reprojection {
        /// The CRS of the point.
        crs: String,
        /// The point's world x.
        x: f64,
        /// The point's world y.
        y: f64,
        /// proj4rs' message.
        why: String,
    },
    /// Writing the GeoJSON failed.
    #[error("writing GeoJSON: {0}")]
    Io(#[from] std::io::Error),
}
