//! vector's integration tests, one binary (linked once) with a module per behaviour.

mod areas;
mod common;
mod geojson;
mod polygons;
mod simplify;
mod validity;
