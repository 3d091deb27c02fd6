//! `predict --stats FILE --zones districts.geojson --zone-field name`: pixels, hectares and
//! mean probability per class inside each zone, the zones burned onto each scene's grid with
//! `geom`'s rasteriser and streamed with the prediction's rows.
//!
//! A zone spanning several scenes sums over them. Where scenes overlap, a pixel counts once:
//! for the first scene (in input order) whose footprint contains the pixel's centre; later
//! scenes burn the footprints of the earlier ones and leave those pixels out.

use std::cell::RefCell;
use std::path::Path;

use anyhow::{Context, Result};
use geo_types::{Coord, LineString, MultiPolygon, Polygon};
use geom::{Crs, Feature, Layer, SceneGrid, SceneZones, Zones};
use tiles::GeoRef;
use vector::{Grid, NO_ZONE, ZoneStats};

/// What the report says about counting overlaps.
pub const OVERLAP_NOTE: &str = "a pixel covered by several scenes counts once, for the first \
                                input scene whose footprint contains its centre";

/// Pixels between the vertices of a scene footprint's edges: the edges are straight in the
/// scene's CRS and bend a little in another, and only vertices are reprojected.
const FOOTPRINT_STEP: usize = 64;

/// The zone layer and the footprints of the scenes started so far.
pub struct ZoneSource {
    zones: Zones,
    class_names: Vec<String>,
    earlier: Vec<Zones>,
}

impl ZoneSource {
    /// Reads the zone layer at `path`, zones named by `field`; `crs` for a file that names
    /// none.
    pub fn open(
        path: &Path,
        field: Option<&str>,
        crs: Option<&Crs>,
        class_names: Vec<String>,
    ) -> Result<RefCell<ZoneSource>> {
        let layer = crate::layers::read_layer(path, crs).context("--zones")?;
        let Some(field) = field else {
            anyhow::bail!(
                "--zones {} needs --zone-field: the attribute naming each zone; the layer's \
                 fields are: {}",
                path.display(),
                layer.fields().join(", ")
            );
        };
        let zones = Zones::new(layer, field, false).context("--zones")?;
        Ok(RefCell::new(ZoneSource {
            zones,
            class_names,
            earlier: Vec::new(),
        }))
    }

    /// Starts a `width × height` scene georeferenced by `geo`: its zones and the footprints of
    /// the scenes before it, on its grid.
    pub fn start(
        &mut self,
        name: &str,
        geo: Option<&GeoRef>,
        [height, width]: [usize; 2],
    ) -> Result<SceneZoneStats> {
        let geo = geo.with_context(|| {
            format!(
                "--zones: {name} has no georeferencing, so its pixels cannot be placed in zones"
            )
        })?;
        let grid = SceneGrid::from_georef(name, width, height, geo).context("--zones")?;
        let zones = self.zones.on_scene(&grid).context("--zones")?;
        let earlier = self
            .earlier
            .iter_mut()
            .map(|f| f.on_scene(&grid))
            .collect::<Result<Vec<_>, _>>()
            .context("--zones: placing the earlier scenes' footprints")?;
        self.earlier.push(footprint(&grid)?);
        Ok(SceneZoneStats {
            zones,
            earlier,
            stats: ZoneStats::new(self.zones.names().to_vec(), self.class_names.clone()),
            band: Vec::new(),
            covered: Vec::new(),
        })
    }

    /// Counts a scene predicted elsewhere (by another `--shard`, or by an earlier run that
    /// finished it) as covered: the scenes after it leave its pixels out, exactly as if it
    /// had been predicted here. A scene without georeferencing covers nothing.
    pub fn skip(
        &mut self,
        name: &str,
        geo: Option<&GeoRef>,
        [height, width]: [usize; 2],
    ) -> Result<()> {
        if let Some(geo) = geo {
            let grid = SceneGrid::from_georef(name, width, height, geo).context("--zones")?;
            self.earlier.push(footprint(&grid)?);
        }
        Ok(())
    }

    /// Warnings about the zone layer: repairs, and features that fell on no scene.
    pub fn warnings(&self) -> Vec<String> {
        let s = self.zones.summary();
        let mut out: Vec<String> = s
            .issues
            .lines()
            .into_iter()
            .map(|l| format!("--zones {}: {l}", s.name))
            .collect();
        if s.outside_every_scene.count > 0 {
            out.push(format!(
                "--zones {}: {} features lie outside every scene",
                s.name,
                s.outside_every_scene.describe()
            ));
        }
        if let Some((_, n)) = s.unmapped.first() {
            out.push(format!(
                "--zones {}: {n} features have no zone name (skipped)",
                s.name
            ));
        }
        out
    }
}

/// A scene's outline as a zone layer in its own CRS, vertices every [`FOOTPRINT_STEP`] pixels.
fn footprint(grid: &SceneGrid) -> Result<Zones> {
    let (w, h) = (grid.width(), grid.height());
    let along = |n: usize| (0..n).step_by(FOOTPRINT_STEP).map(|i| i as f64);
    let mut ring: Vec<(f64, f64)> = Vec::new();
    ring.extend(along(w).map(|c| (c, 0.0)));
    ring.extend(along(h).map(|r| (w as f64, r)));
    ring.extend(along(w).map(|c| (w as f64 - c, h as f64)));
    ring.extend(along(h).map(|r| (0.0, h as f64 - r)));
    ring.push((0.0, 0.0));
    let coords: Vec<Coord<f64>> = ring
        .into_iter()
        .map(|(c, r)| {
            let (x, y) = grid.pixel_to_world(c, r);
            Coord { x, y }
        })
        .collect();
    let feature = Feature {
        id: grid.name().to_string(),
        geometry: MultiPolygon(vec![Polygon::new(LineString(coords), Vec::new())]),
        attributes: vec![Some(grid.name().to_string())],
    };
    let layer = Layer::new(
        grid.name(),
        Some(grid.crs().clone()),
        vec!["scene".into()],
        vec![feature],
    );
    Ok(Zones::new(layer, "scene", false)?)
}

/// One scene's zone statistics, fed row band by row band.
pub struct SceneZoneStats {
    zones: SceneZones,
    earlier: Vec<SceneZones>,
    stats: ZoneStats,
    band: Vec<u32>,
    covered: Vec<u32>,
}

impl SceneZoneStats {
    /// Adds rows `row0..` of the class map (`classes` with the probability of each class).
    pub fn add_rows(
        &mut self,
        grid: &Grid,
        row0: usize,
        classes: &[u8],
        confidence: &[f32],
    ) -> Result<()> {
        self.band.resize(classes.len(), NO_ZONE);
        self.zones.burn_rows(row0, &mut self.band)?;
        for f in &mut self.earlier {
            self.covered.resize(classes.len(), NO_ZONE);
            f.burn_rows(row0, &mut self.covered)?;
            for (z, &c) in self.band.iter_mut().zip(&self.covered) {
                if c != SceneZones::NONE {
                    *z = NO_ZONE;
                }
            }
        }
        self.stats
            .add_rows(grid, row0, &self.band, classes, confidence);
        Ok(())
    }

    /// The statistics.
    pub fn finish(self) -> ZoneStats {
        self.stats
    }
}
