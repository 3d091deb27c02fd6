//! Vector geometry for segfit: CRSs and reprojection, polygon layers as users have them
//! (GeoJSON, Shapefile, FlatGeobuf), and their rasterisation onto scene grids exactly as GDAL
//! does it.
//!
//! Pure: formats are parsed from bytes, files are opened by the caller.
//!
//! - [`Crs`] from GeoKeys, EPSG codes, user strings and WKT (`.prj`); [`Reprojector`] moves
//!   points between two CRSs with proj4rs.
//! - [`read_geojson`], [`read_shapefile`], [`read_flatgeobuf`] give a [`Layer`]: polygons and
//!   multipolygons with holes, attributes as text, the CRS of the file, and the
//!   [`LayerIssues`] met (rings closed or dropped, self-intersections, non-polygons skipped).
//! - [`rasterize`] burns polygons onto a [`SceneGrid`] with `gdal_rasterize`'s rules: a pixel
//!   is burned when its centre is inside the polygon, or (`all_touched`) when the polygon
//!   touches it, with GDAL's conventions for centres exactly on an edge (see `verify/`).
//! - [`Labels`] classifies label layers ([`ClassMapping`]), reprojects them to each scene's
//!   CRS (vertices only, as GDAL does) and burns them a band of rows at a time through an
//!   `rstar` index ([`SceneLabels::burn_rows`]), with [`Overlap`] rules, background or
//!   ignore ([`Unlabelled`]) and an optional survey extent. [`Zones`] does the same with zone
//!   indices, for per-zone sums.
//!
//! Where we differ from `gdal_rasterize`, on purpose:
//! - Unclosed rings are closed (and reported); GDAL would leave the closing edge out of the
//!   `all_touched` walk.
//! - Where GDAL's edge walk writes a pixel right of the raster's last column (it then lands in
//!   the next row of GDAL's buffer) or walks columns right of the raster, we stop at the border.
//! - Reprojection is proj4rs, within 1.4 nm of PROJ on a UTM zone (`verify/compare-gdal.txt`):
//!   only vertices within that distance of a pixel centre line can burn differently.
//!
//! ```
//! use geom::{read_geojson, ClassMapping, Crs, LabelOptions, Labels, Overlap, SceneGrid,
//!            Unlabelled, IGNORE};
//!
//! // One rice field in UTM 48N (a legacy `crs` member), 10 m pixels.
//! let fields = br#"{"type": "FeatureCollection",
//!   "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32648"}},
//!   "features": [{"type": "Feature", "properties": {"crop": "rice"},
//!     "geometry": {"type": "Polygon", "coordinates":
//!       [[[500010, 1499990], [500030, 1499990], [500030, 1499970], [500010, 1499970],
//!         [500010, 1499990]]]}}]}"#;
//! let layer = read_geojson("fields.geojson", fields)?;
//! let options = LabelOptions {
//!     classes: ClassMapping { field: Some("crop".into()), rules: vec![(1, vec!["rice".into()])] },
//!     all_touched: false,
//!     overlap: Overlap::LaterWins,
//!     unlabelled: Unlabelled::Background(0),
//! };
//! let mut labels = Labels::new(vec![layer], None, options)?;
//! let scene = SceneGrid::new(
//!     "scene.tif", 4, 3, [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
//!     Crs::parse("EPSG:32648")?,
//! )?;
//! let mut on_scene = labels.on_scene(&scene)?;
//! let mut rows = vec![IGNORE; 4 * 3];
//! on_scene.burn_rows(0, &mut rows)?;
//! assert_eq!(rows, [0, 0, 0, 0,
//!                   0, 1, 1, 0,
//!                   0, 1, 1, 0]);
//! # Ok::<(), geom::GeomError>(())
//! ```
#![deny(missing_docs)]

mod crs;
mod error;
mod labels;
mod layer;
mod rasterize;
mod read;
mod reproject;
mod scanline;
mod scene;
mod shapes;
mod validity;
mod wkt;
mod zones;

pub use crs::{Crs, Ellipsoid};
pub use error::GeomError;
pub use labels::{
    ClassMapping, IGNORE, LabelOptions, Labels, LayerSummary, Overlap, SceneLabels, Unlabelled,
};
pub use layer::{Feature, Layer, LayerIssues, Tally};
pub use rasterize::rasterize;
pub use read::{read_flatgeobuf, read_geojson, read_shapefile};
pub use reproject::Reprojector;
pub use scene::SceneGrid;
pub use zones::{SceneZones, Zones};
