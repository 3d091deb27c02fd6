//! From a predicted class map to answers: hectares per class, and polygons as GeoJSON.
//!
//! Pure: no file IO and no tensors. The class map comes as rows of `u8` class indices (255 =
//! nodata) top to bottom, with the probability of each pixel's class (NaN on nodata), and the
//! GeoJSON goes to any [`std::io::Write`].
//!
//! - [`Grid`] reads the georeferencing ([`raster::GeoRef`]: the GDAL transform and the GeoKeys)
//!   into a [`Crs`] and gives each pixel row its ground area: `|a·e − b·d|` times the squared
//!   linear unit for a projected CRS, the exact ellipsoidal area of the row's cells for a
//!   geographic one.
//! - [`ClassStats`] accumulates pixels, areas and mean probabilities per class;
//!   [`StatsReport`] writes them per input and in total, as JSON or CSV.
//! - [`Polygonizer`] streams rows into [`Region`]s: **4-connected** regions of one class
//!   (diagonal neighbours are separate regions, as GDAL's polygonize default), whose rings
//!   follow pixel edges exactly, holes included; rings touch at diagonal corners but never
//!   cross, and no ring passes a corner twice. Memory is two rows plus the boundary edges of
//!   the regions still open (see `BENCH.md`).
//! - [`GeoJsonWriter`] writes them as RFC 7946 features (WGS84 lon/lat through `proj4rs` and
//!   the bundled EPSG table of `crs-definitions`, through `geom`, or the scene's own CRS), optionally
//!   simplified: Douglas–Peucker on the arcs between neighbours, the same on both sides, taking
//!   a shortcut only where it sweeps over no pixel corner, so that no gaps, overlaps or
//!   crossings appear without seeing the neighbours (see [`VectorOptions::simplify_m`]).
//!
//! ```
//! use raster::GeoRef;
//! use vector::{ClassStats, GeoJsonWriter, Grid, OutputCrs, Polygonizer, StatsReport, VectorOptions};
//!
//! // 10 m pixels in UTM zone 48N (EPSG:32648).
//! let geo = GeoRef {
//!     transform: [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
//!     geo_key_directory: Some(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, 32648]),
//!     geo_double_params: None,
//!     geo_ascii_params: None,
//!     nodata: Some(255.0),
//! };
//! let (w, h) = (4, 3);
//! let classes = [0, 1, 1, 0, 0, 1, 1, 0, 255, 0, 0, 0];
//! let confidence = [0.9; 12];
//! let grid = Grid::new(Some(&geo), w, h)?;
//! assert_eq!(grid.crs().unwrap().describe(), "EPSG:32648 (WGS 84 / UTM zone 48N)");
//! assert_eq!(grid.pixel_area_m2(0), Some(100.0));
//!
//! let names = vec!["outer".to_string(), "rice_paddy".to_string()];
//! let mut stats = ClassStats::new(names.clone());
//! stats.add_rows(&grid, 0, &classes, &confidence);
//! let mut report = StatsReport::new();
//! report.add("scene.tif", &grid, stats);
//! assert!(report.to_csv().contains("scene.tif,1,rice_paddy,4,400,0.04,"));
//!
//! // Polygons of class 1 only, streamed one row at a time.
//! let mut poly = Polygonizer::new(w, h, vec![false, true]);
//! let options = VectorOptions { crs: OutputCrs::Wgs84, ..VectorOptions::default() };
//! let mut out = GeoJsonWriter::new(Vec::new(), &grid, &names, &options)?;
//! for r in 0..h {
//!     let regions = poly.push_rows(&classes[r * w..(r + 1) * w], &confidence[r * w..(r + 1) * w]);
//!     out.write(&regions)?;
//! }
//! out.write(&poly.finish())?;
//! let json: serde_json::Value = serde_json::from_slice(&out.finish()?).unwrap();
//! assert_eq!(json["features"][0]["properties"]["area_ha"], 0.04);
//! # Ok::<(), vector::VectorError>(())
//! ```
#![deny(missing_docs)]

mod error;
mod geojson;
mod grid;
mod polygonize;
mod rings;
mod simplify;
mod stats;
mod zones;

pub use error::VectorError;
pub use geojson::{GeoJsonWriter, OutputCrs, VectorOptions};
pub use geom::{Crs, Ellipsoid};
pub use grid::Grid;
pub use polygonize::{Polygonizer, Region};
pub use stats::{ClassStats, StatsReport};
pub use zones::{NO_ZONE, ZoneStats};
