//! Zones (districts, fields) burned onto scenes as zone indices, for per-zone sums that stream
//! with a prediction's rows.

use crate::shapes::{Indexed, Item, Shapes};
use crate::{GeomError, Layer, LayerSummary, SceneGrid};

/// A zone layer: each feature's zone is its value of a name field; features with the same name
/// make one zone (a district in several pieces).
pub struct Zones {
    names: Vec<String>,
    layer: Indexed<u32>,
    summary: LayerSummary,
    all_touched: bool,
}

impl Zones {
    /// The zones of `layer` by `name_field` (features without a name are skipped and listed
    /// as `(null)` in the summary's unmapped values). Where zones overlap the later feature
    /// wins, as with labels.
    pub fn new(layer: Layer, name_field: &str, all_touched: bool) -> Result<Zones, GeomError> {
        let crs = layer.require_crs()?.clone();
        layer.require_features()?;
        let k = layer.field_index(name_field)?;
        let mut names: Vec<String> = Vec::new();
        let mut lookup = std::collections::HashMap::new();
        let mut items = Vec::new();
        let mut nameless = 0;
        let summary_base = (
            layer.name.clone(),
            layer.features.len(),
            layer.issues.clone(),
        );
        for (order, f) in layer.features.into_iter().enumerate() {
            let Some(name) = f.attributes[k].clone() else {
                nameless += 1;
                continue;
            };
            let zone = *lookup.entry(name.clone()).or_insert_with(|| {
                names.push(name);
                names.len() as u32 - 1
            });
            items.push(Item {
                geometry: f.geometry,
                value: zone,
                id: f.id,
                order,
            });
        }
        if names.len() >= u32::MAX as usize {
            return Err(GeomError::Config("more zones than fit a u32".into()));
        }
        let summary = LayerSummary {
            name: summary_base.0.clone(),
            crs: crs.describe(),
            features: summary_base.1,
            features_per_class: Vec::new(),
            unmapped: if nameless > 0 {
                vec![("(null)".into(), nameless)]
            } else {
                Vec::new()
            },
            issues: summary_base.2,
            unprojectable: Default::default(),
            outside_every_scene: Default::default(),
        };
        Ok(Zones {
            names,
            layer: Indexed::new(crs, items),
            summary,
            all_touched,
        })
    }

    /// The zone names; zone `i` of a [`SceneZones`] band is `names()[i]`.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// What was read, and (after every scene) the features that fell on none.
    pub fn summary(&self) -> LayerSummary {
        let mut s = self.summary.clone();
        s.unprojectable = self.layer.unprojectable.clone();
        for (it, &t) in self.layer.items.iter().zip(&self.layer.touched) {
            if !t {
                s.outside_every_scene.add(&it.id);
            }
        }
        s
    }

    /// The zones of one scene, reprojected to its CRS and put on its grid.
    pub fn on_scene(&mut self, scene: &SceneGrid) -> Result<SceneZones, GeomError> {
        let polys = self.layer.on_scene(scene)?;
        Ok(SceneZones {
            width: scene.width,
            height: scene.height,
            shapes: Shapes::new(scene.width, scene.height, polys),
            all_touched: self.all_touched,
        })
    }
}

/// One scene's zone raster, burned a band of rows at a time.
pub struct SceneZones {
    width: usize,
    height: usize,
    shapes: Shapes<u32>,
    all_touched: bool,
}

impl SceneZones {
    /// The value of pixels in no zone.
    pub const NONE: u32 = u32::MAX;

    /// Writes the zone index of each pixel of rows `first_row..first_row + out.len() / width`
    /// into `out` ([`NONE`](Self::NONE) outside every zone).
    pub fn burn_rows(&mut self, first_row: usize, out: &mut [u32]) -> Result<(), GeomError> {
        if out.len() % self.width != 0 || first_row + out.len() / self.width > self.height {
            return Err(GeomError::Config(format!(
                "a band of {} values at row {first_row} does not fit a {}×{} scene",
                out.len(),
                self.width,
                self.height
            )));
        }
        out.fill(Self::NONE);
        self.shapes.burn_rows(first_row, out, self.all_touched);
        Ok(())
    }
}
