//! Label layers burned onto scenes: classes from an attribute, overlaps, background or
//! ignore, a survey extent.

use std::collections::BTreeMap;

use crate::layer::Tally;
use crate::shapes::{Indexed, Item, Shapes};
use crate::{GeomError, Layer, LayerIssues, SceneGrid};

/// The class index written where a pixel is not labelled (`raster::Mask::IGNORE`).
pub const IGNORE: u8 = 255;

/// Which features get which class.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassMapping {
    /// The attribute holding each feature's class value; `None` when every feature gets one
    /// class (then the one rule must be `*`).
    pub field: Option<String>,
    /// `(class index, values)`: a feature takes the class of the first rule listing its value
    /// (`*` lists every value, null included). Values compare as text, or as numbers when both
    /// parse as numbers (`1` matches `1.0`).
    pub rules: Vec<(u8, Vec<String>)>,
}

impl ClassMapping {
    /// Every feature gets `class`.
    pub fn all(class: u8) -> ClassMapping {
        ClassMapping {
            field: None,
            rules: vec![(class, vec!["*".into()])],
        }
    }

    fn class_of(&self, value: Option<&str>) -> Option<u8> {
        self.rules.iter().find_map(|(class, values)| {
            values
                .iter()
                .any(|v| v == "*" || value.is_some_and(|x| same_value(v, x)))
                .then_some(*class)
        })
    }
}

fn same_value(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
}

/// Which feature wins where features overlap.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Overlap {
    /// The later feature (layers in the order given, features in file order), as
    /// `gdal_rasterize` burns them.
    #[default]
    LaterWins,
    /// Classes in priority order: a class listed earlier wins over one listed later; classes
    /// not listed lose to all listed ones; the later feature wins between equals.
    Priority(Vec<u8>),
}

/// What unlabelled pixels get.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unlabelled {
    /// A background class.
    Background(u8),
    /// [`IGNORE`] (255): the pixel does not count in training.
    Ignore,
}

/// How layers become label masks.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelOptions {
    /// Features to classes.
    pub classes: ClassMapping,
    /// Burn every pixel a polygon touches (GDAL's `ALL_TOUCHED`) instead of those whose
    /// centre it contains.
    pub all_touched: bool,
    /// Overlaps.
    pub overlap: Overlap,
    /// Pixels no feature covers.
    pub unlabelled: Unlabelled,
}

/// One layer's summary: what was read, classified and burned.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerSummary {
    /// The layer's name.
    pub name: String,
    /// Its CRS, described.
    pub crs: String,
    /// Polygon features read.
    pub features: usize,
    /// Features per class index (256 entries).
    pub features_per_class: Vec<usize>,
    /// Class values that map to no class, with how many features have each (`(null)` for
    /// a missing value); those features are not burned.
    pub unmapped: Vec<(String, usize)>,
    /// What reading repaired or skipped.
    pub issues: LayerIssues,
    /// Features with a vertex that could not be reprojected to some scene's CRS (skipped
    /// there).
    pub unprojectable: Tally,
    /// Features that fell on no scene so far.
    pub outside_every_scene: Tally,
}

/// Label layers, classified and indexed, ready to burn onto any number of scenes.
pub struct Labels {
    options: LabelOptions,
    layers: Vec<Indexed<u8>>,
    summaries: Vec<LayerSummary>,
    extent: Option<Indexed<bool>>,
}

impl Labels {
    /// Classifies the features of `layers` (each must have a CRS and at least one polygon;
    /// the class field must exist in each) and indexes them. `extent`, when given, is the
    /// surveyed area: pixels outside its polygons are [`IGNORE`].
    pub fn new(
        layers: Vec<Layer>,
        extent: Option<Layer>,
        options: LabelOptions,
    ) -> Result<Labels, GeomError> {
        if layers.is_empty() {
            return Err(GeomError::Config("no label layers given".into()));
        }
        if options.classes.field.is_none()
            && !(options.classes.rules.len() == 1 && options.classes.rules[0].1 == ["*"])
        {
            return Err(GeomError::Config(
                "without a class field every feature gets one class: give exactly one class \
                 with the value `*`"
                    .into(),
            ));
        }
        let rank = |class: u8| match &options.overlap {
            Overlap::LaterWins => 0,
            Overlap::Priority(order) => order
                .iter()
                .position(|&c| c == class)
                .map_or(0, |p| order.len() - p),
        };
        let mut all = Vec::new();
        let mut summaries = Vec::new();
        for (li, layer) in layers.iter().enumerate() {
            let crs = layer.require_crs()?.clone();
            layer.require_features()?;
            let field = match &options.classes.field {
                Some(f) => Some(layer.field_index(f)?),
                None => None,
            };
            let mut per_class = vec![0usize; 256];
            let mut unmapped: BTreeMap<String, usize> = BTreeMap::new();
            for (fi, f) in layer.features.iter().enumerate() {
                let value = field.and_then(|k| f.attributes[k].as_deref());
                match options.classes.class_of(value) {
                    Some(class) => {
                        per_class[class as usize] += 1;
                        all.push((rank(class), li, fi, class));
                    }
                    None => {
                        *unmapped
                            .entry(value.unwrap_or("(null)").to_string())
                            .or_default() += 1
                    }
                }
            }
            summaries.push(LayerSummary {
                name: layer.name.clone(),
                crs: crs.describe(),
                features: layer.features.len(),
                features_per_class: per_class,
                unmapped: unmapped.into_iter().collect(),
                issues: layer.issues.clone(),
                unprojectable: Tally::default(),
                outside_every_scene: Tally::default(),
            });
        }
        // Burn order: lowest priority first, then layer and file order (later wins).
        all.sort_by_key(|&(rank, li, fi, _)| (rank, li, fi));
        let mut per_layer: Vec<Vec<Item<u8>>> = layers.iter().map(|_| Vec::new()).collect();
        let mut layers = layers;
        for (order, &(_, li, fi, class)) in all.iter().enumerate() {
            let f = &mut layers[li].features[fi];
            per_layer[li].push(Item {
                geometry: std::mem::replace(&mut f.geometry, geo_types::MultiPolygon(Vec::new())),
                value: class,
                id: std::mem::take(&mut f.id),
                order,
            });
        }
        let layers = layers
            .into_iter()
            .zip(per_layer)
            .map(|(l, items)| Indexed::new(l.crs.expect("checked above"), items))
            .collect();
        let extent = match extent {
            Some(e) => {
                let crs = e.require_crs()?.clone();
                e.require_features()?;
                let items = e
                    .features
                    .into_iter()
                    .enumerate()
                    .map(|(order, f)| Item {
                        geometry: f.geometry,
                        value: true,
                        id: f.id,
                        order,
                    })
                    .collect();
                Some(Indexed::new(crs, items))
            }
            None => None,
        };
        Ok(Labels {
            options,
            layers,
            summaries,
            extent,
        })
    }

    /// The options the labels burn with.
    pub fn options(&self) -> &LabelOptions {
        &self.options
    }

    /// Per layer: features read, per class, unmapped values, repairs, and (after
    /// [`on_scene`](Self::on_scene) for every scene) the features that fell on none.
    pub fn summaries(&self) -> Vec<LayerSummary> {
        self.summaries
            .iter()
            .zip(&self.layers)
            .map(|(s, l)| {
                let mut s = s.clone();
                s.unprojectable = l.unprojectable.clone();
                for (it, &t) in l.items.iter().zip(&l.touched) {
                    if !t {
                        s.outside_every_scene.add(&it.id);
                    }
                }
                s
            })
            .collect()
    }

    /// The labels of one scene: every layer reprojected to the scene's CRS (vertices only, as
    /// `gdal_rasterize` does: edges are not densified) and put on its pixel grid, ready to
    /// burn a band of rows at a time.
    pub fn on_scene(&mut self, scene: &SceneGrid) -> Result<SceneLabels, GeomError> {
        let mut polys = Vec::new();
        for l in &mut self.layers {
            polys.extend(l.on_scene(scene)?);
        }
        let features = polys.len();
        let extent = match &mut self.extent {
            Some(e) => Some(Shapes::new(scene.width, scene.height, e.on_scene(scene)?)),
            None => None,
        };
        Ok(SceneLabels {
            width: scene.width,
            height: scene.height,
            shapes: Shapes::new(scene.width, scene.height, polys),
            extent,
            inside: Vec::new(),
            polygons: features,
            all_touched: self.options.all_touched,
            unlabelled: match self.options.unlabelled {
                Unlabelled::Background(c) => c,
                Unlabelled::Ignore => IGNORE,
            },
        })
    }
}

/// One scene's labels, burned a band of rows at a time.
pub struct SceneLabels {
    width: usize,
    height: usize,
    shapes: Shapes<u8>,
    extent: Option<Shapes<bool>>,
    inside: Vec<bool>,
    polygons: usize,
    all_touched: bool,
    unlabelled: u8,
}

impl SceneLabels {
    /// Polygons (multipolygon parts) that fall on the scene.
    pub fn polygons(&self) -> usize {
        self.polygons
    }

    /// The scene's size `(width, height)`.
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// Writes the class indices of rows `first_row..first_row + out.len() / width` into
    /// `out` (row-major, `out.len()` a multiple of the width): the burned class, the
    /// unlabelled value elsewhere, [`IGNORE`] outside the survey extent. Bands may come in any
    /// order and any height: the pixels are those of burning the whole scene at once.
    pub fn burn_rows(&mut self, first_row: usize, out: &mut [u8]) -> Result<(), GeomError> {
        if out.len() % self.width != 0 || first_row + out.len() / self.width > self.height {
            return Err(GeomError::Config(format!(
                "a band of {} values at row {first_row} does not fit a {}×{} scene",
                out.len(),
                self.width,
                self.height
            )));
        }
        out.fill(self.unlabelled);
        self.shapes.burn_rows(first_row, out, self.all_touched);
        if let Some(extent) = &mut self.extent {
            self.inside.clear();
            self.inside.resize(out.len(), false);
            extent.burn_rows(first_row, &mut self.inside, self.all_touched);
            for (v, &inside) in out.iter_mut().zip(&self.inside) {
                if !inside {
                    *v = IGNORE;
                }
            }
        }
        Ok(())
    }
}
