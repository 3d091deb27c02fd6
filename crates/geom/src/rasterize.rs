//! One-shot rasterisation of polygons already in the grid's CRS.

use geo_types::{Coord, MultiPolygon};

use crate::SceneGrid;
use crate::scanline::PixelPolygon;
use crate::shapes::Shapes;

/// Burns `shapes` (polygons in the grid's CRS, with the value each burns) onto `grid` as
/// `gdal_rasterize`/`rasterio.features.rasterize` do, later shapes over earlier ones, and
/// returns the `width × height` raster, row-major, `fill` where nothing was burned.
pub fn rasterize<T: Copy>(
    grid: &SceneGrid,
    shapes: &[(MultiPolygon<f64>, T)],
    fill: T,
    all_touched: bool,
) -> Vec<T> {
    let mut polys = Vec::new();
    for (order, (mp, value)) in shapes.iter().enumerate() {
        for p in &mp.0 {
            let rings: Vec<&[Coord<f64>]> = std::iter::once(p.exterior())
                .chain(p.interiors())
                .map(|r| r.0.as_slice())
                .collect();
            if let Some(pp) = PixelPolygon::new(&rings, &grid.pixels) {
                polys.push((order, pp, *value));
            }
        }
    }
    let mut out = vec![fill; grid.width * grid.height];
    Shapes::new(grid.width, grid.height, polys).burn_rows(0, &mut out, all_touched);
    out
}
