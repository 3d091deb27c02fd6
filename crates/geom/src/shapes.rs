//! Features reprojected onto a scene's pixel grid, indexed by rows, burned a band at a time.

use geo_types::{Coord, MultiPolygon};
use rstar::{AABB, RTree, RTreeObject};

use crate::layer::Tally;
use crate::scanline::{Band, PixelPolygon, Scratch};
use crate::{Crs, GeomError, Reprojector, SceneGrid};

/// One feature of a layer: polygons in the layer's CRS, the value it burns, its id.
pub(crate) struct Item<T> {
    pub(crate) geometry: MultiPolygon<f64>,
    pub(crate) value: T,
    pub(crate) id: String,
    /// Its place in the burn order across layers.
    pub(crate) order: usize,
}

/// A bounding box with the index of what it bounds.
struct Boxed {
    env: AABB<[f64; 2]>,
    index: usize,
}

impl RTreeObject for Boxed {
    type Envelope = AABB<[f64; 2]>;
    fn envelope(&self) -> Self::Envelope {
        self.env
    }
}

fn bbox(g: &MultiPolygon<f64>) -> Option<AABB<[f64; 2]>> {
    let mut b = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    for c in g.0.iter().flat_map(|p| p.exterior().0.iter()) {
        b = [b[0].min(c.x), b[1].min(c.y), b[2].max(c.x), b[3].max(c.y)];
    }
    b.iter()
        .all(|v| v.is_finite())
        .then(|| AABB::from_corners([b[0], b[1]], [b[2], b[3]]))
}

/// A layer's features in burn order, indexed in the layer's CRS.
pub(crate) struct Indexed<T> {
    pub(crate) crs: Crs,
    pub(crate) items: Vec<Item<T>>,
    tree: RTree<Boxed>,
    /// Whether each item fell on some scene so far.
    pub(crate) touched: Vec<bool>,
    pub(crate) unprojectable: Tally,
}

impl<T: Copy> Indexed<T> {
    pub(crate) fn new(crs: Crs, items: Vec<Item<T>>) -> Indexed<T> {
        let boxes = items
            .iter()
            .enumerate()
            .filter_map(|(index, it)| {
                Some(Boxed {
                    env: bbox(&it.geometry)?,
                    index,
                })
            })
            .collect();
        Indexed {
            crs,
            touched: vec![false; items.len()],
            items,
            tree: RTree::bulk_load(boxes),
            unprojectable: Tally::default(),
        }
    }

    /// The scene's footprint in the layer's CRS, from 21 points along each edge (with a
    /// margin); `None` when some cannot be reprojected, and then every feature is a candidate.
    fn footprint(&self, scene: &SceneGrid) -> Option<AABB<[f64; 2]>> {
        let back = Reprojector::new(&scene.crs, &self.crs).ok()?;
        let (w, h) = (scene.width as f64, scene.height as f64);
        let mut b = [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ];
        for k in 0..=20 {
            let t = k as f64 / 20.0;
            for (c, r) in [(t * w, 0.0), (t * w, h), (0.0, t * h), (w, t * h)] {
                let (x, y) = scene.pixel_to_world(c, r);
                let (x, y) = back.transform(x, y).ok()?;
                b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
            }
        }
        // Edges between the samples may bulge: a tenth of the size on every side.
        let (mx, my) = ((b[2] - b[0]) * 0.1, (b[3] - b[1]) * 0.1);
        Some(AABB::from_corners(
            [b[0] - mx, b[1] - my],
            [b[2] + mx, b[3] + my],
        ))
    }

    /// The features that fall on `scene`, reprojected into its pixel grid, as `(order,
    /// polygon, value)`. Items whose vertices cannot all be reprojected are skipped and
    /// counted.
    pub(crate) fn on_scene(
        &mut self,
        scene: &SceneGrid,
    ) -> Result<Vec<(usize, PixelPolygon, T)>, GeomError> {
        let forward = Reprojector::new(&self.crs, &scene.crs)?;
        let mut candidates: Vec<usize> = match self.footprint(scene) {
            Some(env) => self
                .tree
                .locate_in_envelope_intersecting(&env)
                .map(|b| b.index)
                .collect(),
            None => (0..self.items.len()).collect(),
        };
        candidates.sort_unstable();
        let (w, h) = (scene.width as f64, scene.height as f64);
        let mut polys = Vec::new();
        let mut ring: Vec<Coord<f64>> = Vec::new();
        'items: for i in candidates {
            let item = &self.items[i];
            let mut parts = Vec::with_capacity(item.geometry.0.len());
            for polygon in &item.geometry.0 {
                let mut rings: Vec<Vec<Coord<f64>>> = Vec::new();
                for r in std::iter::once(polygon.exterior()).chain(polygon.interiors()) {
                    ring.clear();
                    for c in &r.0 {
                        match forward.transform(c.x, c.y) {
                            Ok((x, y)) => ring.push(Coord { x, y }),
                            Err(_) => {
                                self.unprojectable.add(&item.id);
                                continue 'items;
                            }
                        }
                    }
                    rings.push(ring.clone());
                }
                let refs: Vec<&[Coord<f64>]> = rings.iter().map(|r| r.as_slice()).collect();
                if let Some(p) = PixelPolygon::new(&refs, &scene.pixels) {
                    parts.push(p);
                }
            }
            let mut on = false;
            for p in parts {
                let [x0, y0, x1, y1] = p.bbox;
                if x1 >= 0.0 && x0 <= w && y1 >= 0.0 && y0 <= h {
                    on = true;
                    polys.push((item.order, p, item.value));
                }
            }
            if on {
                self.touched[i] = true;
            }
        }
        Ok(polys)
    }
}

/// Pixel polygons with the values they burn, in burn order, indexed by their pixel boxes.
pub(crate) struct Shapes<T> {
    width: usize,
    height: usize,
    polys: Vec<(PixelPolygon, T)>,
    tree: RTree<Boxed>,
    scratch: Scratch,
    hits: Vec<usize>,
}

impl<T: Copy> Shapes<T> {
    /// `polys` as `(order, polygon, value)` from any number of layers.
    pub(crate) fn new(
        width: usize,
        height: usize,
        mut polys: Vec<(usize, PixelPolygon, T)>,
    ) -> Shapes<T> {
        polys.sort_by_key(|p| p.0);
        let polys: Vec<(PixelPolygon, T)> = polys.into_iter().map(|(_, p, v)| (p, v)).collect();
        let boxes = polys
            .iter()
            .enumerate()
            .map(|(index, (p, _))| Boxed {
                env: AABB::from_corners([p.bbox[0], p.bbox[1]], [p.bbox[2], p.bbox[3]]),
                index,
            })
            .collect();
        Shapes {
            width,
            height,
            polys,
            tree: RTree::bulk_load(boxes),
            scratch: Scratch::default(),
            hits: Vec::new(),
        }
    }

    /// Burns every polygon touching rows `first_row..first_row + out.len() / width` into
    /// `out`, in burn order (later polygons over earlier ones).
    pub(crate) fn burn_rows(&mut self, first_row: usize, out: &mut [T], all_touched: bool) {
        let rows = out.len() / self.width;
        // Polygons whose box reaches the band, with a row of margin for the edge walk.
        let env = AABB::from_corners(
            [f64::NEG_INFINITY, first_row as f64 - 1.0],
            [f64::INFINITY, (first_row + rows) as f64 + 1.0],
        );
        self.hits.clear();
        self.hits.extend(
            self.tree
                .locate_in_envelope_intersecting(&env)
                .map(|b| b.index),
        );
        self.hits.sort_unstable();
        let mut band = Band {
            data: out,
            width: self.width,
            height: self.height,
            first_row,
            rows,
        };
        for &i in &self.hits {
            let (p, v) = &self.polys[i];
            p.burn(&mut band, *v, all_touched, &mut self.scratch);
        }
    }
}
