//! Layer readers: each parses a format from bytes or readers (no file IO here).

mod fgb;
mod geojson;
mod shp;

pub use fgb::read_flatgeobuf;
pub use geojson::read_geojson;
pub use shp::read_shapefile;
