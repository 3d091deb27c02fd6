//! A vector layer as read: polygons, attributes, CRS, and what was repaired or skipped.

use geo_types::{Coord, LineString, MultiPolygon, Polygon};

use crate::{Crs, GeomError};

/// How many feature ids a report keeps per kind of problem.
const FIRST_IDS: usize = 5;

/// A feature: its polygons and its attribute values.
#[derive(Clone, Debug, PartialEq)]
pub struct Feature {
    /// Its id for messages: the GeoJSON `id` when it has one, else its 0-based position in the
    /// layer (`#12`).
    pub id: String,
    /// Its polygons, holes included, rings closed, in the layer's CRS.
    pub geometry: MultiPolygon<f64>,
    /// Its attribute values as text (numbers as written, `null`/missing as `None`), aligned
    /// with [`Layer::fields`].
    pub attributes: Vec<Option<String>>,
}

/// A count of features with one kind of problem and the ids of the first few.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// How many features.
    pub count: usize,
    /// The ids of the first five.
    pub first_ids: Vec<String>,
}

impl Tally {
    pub(crate) fn add(&mut self, id: &str) {
        self.count += 1;
        if self.first_ids.len() < FIRST_IDS {
            self.first_ids.push(id.to_string());
        }
    }

    /// `3 (#4, #9, #12)`, or `0`.
    pub fn describe(&self) -> String {
        if self.count == 0 {
            return "0".into();
        }
        let more = if self.count > self.first_ids.len() {
            ", …"
        } else {
            ""
        };
        format!("{} ({}{more})", self.count, self.first_ids.join(", "))
    }
}

/// What reading a layer repaired, skipped or flagged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerIssues {
    /// Features with an unclosed ring, closed by repeating its first point.
    pub closed_rings: Tally,
    /// Features with a ring of fewer than three distinct points or a non-finite coordinate:
    /// those rings (or polygons) dropped, the feature skipped if nothing was left.
    pub dropped_rings: Tally,
    /// Features whose rings cross themselves or each other: burned as GDAL burns them, with
    /// the even-odd rule over the polygon's rings (a bow-tie burns both lobes, a crossing hole
    /// cuts only where it lies inside an odd number of rings).
    pub self_intersecting: Tally,
    /// Features skipped: no geometry, or no polygon left.
    pub skipped_empty: Tally,
    /// Features skipped because their geometry is not polygonal (points, lines).
    pub skipped_not_polygonal: Tally,
}

impl LayerIssues {
    /// One line per kind of problem that occurred, empty when the layer was clean.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut line = |t: &Tally, what: &str| {
            if t.count > 0 {
                out.push(format!("{} {what}", t.describe()));
            }
        };
        line(&self.closed_rings, "features had unclosed rings (closed)");
        line(
            &self.dropped_rings,
            "features had rings with fewer than 3 distinct points or non-finite coordinates (those rings dropped)",
        );
        line(
            &self.self_intersecting,
            "features self-intersect (burned with the even-odd rule, as GDAL does)",
        );
        line(&self.skipped_empty, "features had no polygon (skipped)");
        line(
            &self.skipped_not_polygonal,
            "features are points or lines (skipped)",
        );
        out
    }
}

/// A vector layer of polygons.
#[derive(Clone, Debug)]
pub struct Layer {
    pub(crate) name: String,
    pub(crate) crs: Option<Crs>,
    pub(crate) crs_source: String,
    pub(crate) fields: Vec<String>,
    pub(crate) features: Vec<Feature>,
    pub(crate) issues: LayerIssues,
}

impl Layer {
    /// A layer made in memory (a test, a generated layer): `features` in `crs`.
    pub fn new(name: &str, crs: Option<Crs>, fields: Vec<String>, features: Vec<Feature>) -> Layer {
        let mut layer = Layer {
            name: name.to_string(),
            crs,
            crs_source: "given".into(),
            fields,
            features: Vec::with_capacity(features.len()),
            issues: LayerIssues::default(),
        };
        for f in features {
            let attrs = f.attributes;
            layer.push(f.id, Some(Geometry::Polygons(f.geometry, false)), attrs);
        }
        layer
    }

    /// Its name (the file name it was read from).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its CRS, when the file gives one.
    pub fn crs(&self) -> Option<&Crs> {
        self.crs.as_ref()
    }

    /// Sets the CRS, for a layer whose file gives none (or to override it).
    pub fn set_crs(&mut self, crs: Crs) {
        self.crs = Some(crs);
        self.crs_source = "given".into();
    }

    /// The attribute fields, in the file's order.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The polygon features kept.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// What reading repaired, skipped or flagged.
    pub fn issues(&self) -> &LayerIssues {
        &self.issues
    }

    /// The index of `field` in [`fields`](Self::fields), or an error naming the layer's fields.
    pub fn field_index(&self, field: &str) -> Result<usize, GeomError> {
        self.fields
            .iter()
            .position(|f| f == field)
            .ok_or_else(|| GeomError::MissingField {
                layer: self.name.clone(),
                field: field.to_string(),
                fields: self.fields.clone(),
            })
    }

    /// The layer's CRS, or the error saying it has none.
    pub(crate) fn require_crs(&self) -> Result<&Crs, GeomError> {
        self.crs.as_ref().ok_or_else(|| GeomError::NoCrs {
            layer: self.name.clone(),
            why: self.crs_source.clone(),
        })
    }

    /// An error unless the layer holds at least one polygon feature.
    pub(crate) fn require_features(&self) -> Result<(), GeomError> {
        if !self.features.is_empty() {
            return Ok(());
        }
        let lines = self.issues.lines();
        Err(GeomError::EmptyLayer {
            layer: self.name.clone(),
            detail: if lines.is_empty() {
                String::new()
            } else {
                format!("; {}", lines.join("; "))
            },
        })
    }

    pub(crate) fn empty(name: &str) -> Layer {
        Layer {
            name: name.to_string(),
            crs: None,
            crs_source: String::new(),
            fields: Vec::new(),
            features: Vec::new(),
            issues: LayerIssues::default(),
        }
    }

    /// Adds a feature read from a file: rings closed, degenerate rings dropped, the rest
    /// recorded in the issues.
    pub(crate) fn push(
        &mut self,
        id: String,
        geometry: Option<Geometry>,
        attributes: Vec<Option<String>>,
    ) {
        let polygons = match geometry {
            None => {
                self.issues.skipped_empty.add(&id);
                return;
            }
            Some(Geometry::NotPolygonal) => {
                self.issues.skipped_not_polygonal.add(&id);
                return;
            }
            Some(Geometry::Polygons(p, unclosed)) => (p, unclosed),
        };
        let (polygons, unclosed) = polygons;
        let (mut closed, mut dropped) = (unclosed, false);
        let mut kept = Vec::with_capacity(polygons.0.len());
        for polygon in polygons {
            let (exterior, interiors) = polygon.into_inner();
            let Some(exterior) = clean_ring(exterior, &mut closed, &mut dropped) else {
                dropped = true;
                continue;
            };
            let interiors = interiors
                .into_iter()
                .filter_map(|r| clean_ring(r, &mut closed, &mut dropped))
                .collect();
            kept.push(Polygon::new(exterior, interiors));
        }
        if closed {
            self.issues.closed_rings.add(&id);
        }
        if dropped {
            self.issues.dropped_rings.add(&id);
        }
        if kept.is_empty() {
            self.issues.skipped_empty.add(&id);
            return;
        }
        if kept.iter().any(crate::validity::self_intersects) {
            self.issues.self_intersecting.add(&id);
        }
        let mut attributes = attributes;
        attributes.resize(self.fields.len(), None);
        self.features.push(Feature {
            id,
            geometry: MultiPolygon(kept),
            attributes,
        });
    }
}

/// A feature's geometry as a reader found it.
pub(crate) enum Geometry {
    /// The polygons, and whether some ring was not closed in the file (`geo_types` closes
    /// rings as it builds polygons).
    Polygons(MultiPolygon<f64>, bool),
    NotPolygonal,
}

/// A polygon of rings as read, noting in `unclosed` a ring whose last point is not its first.
pub(crate) fn polygon(
    mut rings: Vec<LineString<f64>>,
    unclosed: &mut bool,
) -> Option<Polygon<f64>> {
    for r in &rings {
        if r.0.len() > 1 && r.0.first() != r.0.last() {
            *unclosed = true;
        }
    }
    if rings.is_empty() {
        return None;
    }
    let exterior = rings.remove(0);
    Some(Polygon::new(exterior, rings))
}

/// The ring closed, `None` when it has a non-finite coordinate or fewer than 3 distinct points.
fn clean_ring(
    ring: LineString<f64>,
    closed: &mut bool,
    dropped: &mut bool,
) -> Option<LineString<f64>> {
    let mut pts: Vec<Coord<f64>> = ring.0;
    if pts.iter().any(|c| !c.x.is_finite() || !c.y.is_finite()) {
        *dropped = true;
        return None;
    }
    if pts.is_empty() {
        *dropped = true;
        return None;
    }
    if pts.first() != pts.last() {
        pts.push(pts[0]);
        *closed = true;
    }
    let mut distinct = Vec::with_capacity(3);
    for p in &pts {
        if !distinct.contains(p) {
            distinct.push(*p);
            if distinct.len() == 3 {
                return Some(LineString(pts));
            }
        }
    }
    *dropped = true;
    None
}
