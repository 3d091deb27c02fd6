//! Per-zone, per-class pixel counts, areas and mean probabilities: hectares of rice per
//! district, summed over every scene that covers a district.

use crate::Grid;
use crate::stats::{Tally, round6};

/// The zone index of a pixel in no zone (`geom::SceneZones::NONE`).
pub const NO_ZONE: u32 = u32::MAX;

/// Per-zone class statistics over the rows of one or many class maps. Rows come with each
/// pixel's zone index (a zone raster on the class map's grid, e.g. `geom::SceneZones`); the
/// caller decides which pixels count (say, once where scenes overlap) by giving [`NO_ZONE`]
/// to the others.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneStats {
    zones: Vec<String>,
    classes: Vec<String>,
    /// `tallies[zone * (k + 1) + class]`, class `k` being nodata.
    tallies: Vec<Tally>,
    has_area: bool,
}

impl ZoneStats {
    /// Empty statistics for zones named `zones` and classes named `classes` (index order).
    pub fn new(zones: Vec<String>, classes: Vec<String>) -> ZoneStats {
        let n = zones.len() * (classes.len() + 1);
        ZoneStats {
            zones,
            classes,
            tallies: vec![Tally::default(); n],
            has_area: true,
        }
    }

    fn slot(&self, zone: u32, class: u8) -> Option<usize> {
        let k = self.classes.len();
        let z = zone as usize;
        if z >= self.zones.len() {
            return None;
        }
        let c = if class == 255 || class as usize >= k {
            k
        } else {
            class as usize
        };
        Some(z * (k + 1) + c)
    }

    /// Adds rows `row0..` of a class map on `grid` (`grid.width()` values a row; class 255 =
    /// nodata) with each pixel's zone index ([`NO_ZONE`] outside every zone) and the
    /// probability of its class (NaN is skipped).
    ///
    /// # Panics
    /// When `zones`, `classes` and `confidence` differ in length or are not whole rows.
    pub fn add_rows(
        &mut self,
        grid: &Grid,
        row0: usize,
        zones: &[u32],
        classes: &[u8],
        confidence: &[f32],
    ) {
        let w = grid.width();
        assert!(
            zones.len() == classes.len() && classes.len() == confidence.len(),
            "zones, classes and confidence differ in length"
        );
        if w == 0 {
            return;
        }
        assert_eq!(classes.len() % w, 0, "rows must be {w} values wide");
        for r in 0..classes.len() / w {
            let area = grid.pixel_area_m2(row0 + r);
            self.has_area &= area.is_some();
            let area = area.unwrap_or(0.0);
            for i in r * w..(r + 1) * w {
                let Some(s) = self.slot(zones[i], classes[i]) else {
                    continue;
                };
                let t = &mut self.tallies[s];
                t.pixels += 1;
                t.area_m2 += area;
                if confidence[i].is_finite() {
                    t.confidence_sum += confidence[i] as f64;
                    t.confidence_count += 1;
                }
            }
        }
    }

    /// Adds another scene's statistics of the same zones and classes.
    ///
    /// # Panics
    /// When the zones or classes differ.
    pub fn merge(&mut self, other: &ZoneStats) {
        assert!(
            self.zones == other.zones && self.classes == other.classes,
            "merging statistics of other zones or classes"
        );
        for (t, o) in self.tallies.iter_mut().zip(&other.tallies) {
            t.merge(o);
        }
        self.has_area &= other.has_area;
    }

    /// Whether every row added had a ground area.
    pub fn has_area(&self) -> bool {
        self.has_area
    }

    /// The CSV rows (no header): per zone with pixels, each class then nodata as class
    /// index 255: `zone,class_index,class,pixels,area_m2,area_ha,mean_probability`. Zones no
    /// pixel fell in are left out.
    pub(crate) fn rows(&self) -> Vec<ZoneRow> {
        let k = self.classes.len();
        let mut out = Vec::new();
        for (z, name) in self.zones.iter().enumerate() {
            let tallies = &self.tallies[z * (k + 1)..(z + 1) * (k + 1)];
            if tallies.iter().all(|t| t.pixels == 0) {
                continue;
            }
            for (c, t) in tallies.iter().enumerate() {
                let (index, class) = if c == k {
                    (255, "nodata".to_string())
                } else {
                    (c as u32, self.classes[c].clone())
                };
                let area = self.has_area.then_some(t.area_m2);
                out.push(ZoneRow {
                    zone: name.clone(),
                    class_index: index,
                    class,
                    pixels: t.pixels,
                    area_m2: area,
                    area_ha: area.map(|a| a / 10_000.0),
                    mean_probability: (t.confidence_count > 0)
                        .then(|| round6(t.confidence_sum / t.confidence_count as f64)),
                });
            }
        }
        out
    }
}

/// One zone and class of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct ZoneRow {
    pub(crate) zone: String,
    pub(crate) class_index: u32,
    pub(crate) class: String,
    pub(crate) pixels: u64,
    pub(crate) area_m2: Option<f64>,
    pub(crate) area_ha: Option<f64>,
    pub(crate) mean_probability: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use raster::GeoRef;

    #[test]
    fn pixels_count_for_their_zone_and_class_and_scenes_add_up() {
        // 10 m pixels in UTM 48N: 100 m² each.
        let geo = GeoRef {
            transform: [500_000.0, 10.0, 0.0, 1_500_000.0, 0.0, -10.0],
            geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32648]),
            geo_double_params: None,
            geo_ascii_params: None,
            nodata: None,
        };
        let grid = Grid::new(Some(&geo), 3, 2).unwrap();
        let names = vec!["outer".to_string(), "rice".to_string()];
        let mut a = ZoneStats::new(vec!["north".into(), "south".into()], names.clone());
        let zones = [0, 0, NO_ZONE, 1, 1, 0];
        let classes = [1, 0, 1, 1, 255, 1];
        let p = [0.5, 0.75, 0.9, 1.0, f32::NAN, 0.25];
        a.add_rows(&grid, 0, &zones, &classes, &p);
        let mut b = a.clone();
        b.merge(&a);
        let rows = b.rows();
        let find = |z: &str, c: u32| rows.iter().find(|r| r.zone == z && r.class_index == c);
        let north_rice = find("north", 1).unwrap();
        assert_eq!(north_rice.pixels, 4);
        assert_eq!(north_rice.area_ha, Some(0.04));
        assert_eq!(north_rice.mean_probability, Some(0.375));
        assert_eq!(find("north", 0).unwrap().pixels, 2);
        assert_eq!(find("south", 1).unwrap().pixels, 2);
        let nodata = find("south", 255).unwrap();
        assert_eq!((nodata.pixels, nodata.mean_probability), (2, None));
        assert_eq!(rows.len(), 6);
    }
}
