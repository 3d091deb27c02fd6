//! A synthetic "satellite" dataset: textured field parcels, rice paddies, roads, water, haze and
//! sensor noise, with matching masks. Deterministic by `(seed, index)`.

use std::path::{Path, PathBuf};

use image::{GrayImage, Luma};
use imageproc::drawing::draw_polygon_mut;
use imageproc::point::Point;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use raster::{GeoRef, Mask, Raster, RasterData, SampleKind};

use crate::error::TilesError;
use crate::io::{write_mask_png, write_png};
use crate::labels::LabelMap;
use crate::meta::DatasetMeta;
use crate::prepare::{PrepareReport, into_fresh_output};
use crate::stats::StatsAccumulator;
use crate::tiff_write::write_geotiff;

/// What to generate.
#[derive(Clone, Debug)]
pub struct SyntheticOptions {
    /// Number of image/mask pairs (default 64).
    pub count: usize,
    /// Side of each square image in pixels (default 256).
    pub size: usize,
    /// Seed; the same seed gives byte-identical files (default 0).
    pub seed: u64,
    /// Output root.
    pub out: PathBuf,
    /// Fraction of samples in `val` (default 0.2; at least one sample goes to each split).
    pub val_ratio: f64,
    /// `false` (default): classes `outer`, `rice_paddy` stored as 0/1. `true`: `background`,
    /// `rice_paddy`, `crop_field`, `road`, `water` stored as 0..=4.
    pub multi_class: bool,
    /// `false` (default): RGB u8 PNGs. `true`: 4-band (R, G, B, NIR) u16 GeoTIFFs with a
    /// synthetic UTM georeferencing, to exercise the multispectral path.
    pub multispectral: bool,
}

impl Default for SyntheticOptions {
    fn default() -> Self {
        Self {
            count: 64,
            size: 256,
            seed: 0,
            out: PathBuf::from("data/synthetic"),
            val_ratio: 0.2,
            multi_class: false,
            multispectral: false,
        }
    }
}

impl SyntheticOptions {
    /// The label map of the generated masks.
    pub fn labels(&self) -> LabelMap {
        if self.multi_class {
            LabelMap::identity(&["background", "rice_paddy", "crop_field", "road", "water"])
        } else {
            LabelMap::identity(&["outer", "rice_paddy"])
        }
    }
}

/// Land cover of a pixel; each has its own reflectance and texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cover {
    Background,
    Paddy,
    Field,
    Soil,
    Road,
    Water,
}

impl Cover {
    fn class(self, multi: bool) -> u8 {
        match (self, multi) {
            (Cover::Paddy, _) => 1,
            (_, false) | (Cover::Background | Cover::Soil, true) => 0,
            (Cover::Field, true) => 2,
            (Cover::Road, true) => 3,
            (Cover::Water, true) => 4,
        }
    }
}

/// Per-parcel look: base reflectance (R, G, B, NIR) and texture parameters.
#[derive(Clone, Copy, Debug)]
struct Look {
    cover: Cover,
    base: [f32; 4],
    angle: f32,
    freq: f32,
    amp: f32,
}

/// Smooth noise in [0, 1]: random values on a coarse grid, bilinearly interpolated.
struct ValueNoise {
    grid: Vec<f32>,
    n: usize,
    cell: f32,
}

impl ValueNoise {
    fn new(rng: &mut ChaCha8Rng, size: usize, cell: usize) -> Self {
        let n = size / cell + 2;
        Self {
            grid: (0..n * n).map(|_| rng.random::<f32>()).collect(),
            n,
            cell: cell as f32,
        }
    }

    fn at(&self, x: usize, y: usize) -> f32 {
        let (fx, fy) = (x as f32 / self.cell, y as f32 / self.cell);
        let (ix, iy) = (fx as usize, fy as usize);
        let (tx, ty) = (fx - ix as f32, fy - iy as f32);
        // Smoothstep weights hide the grid.
        let (tx, ty) = (tx * tx * (3.0 - 2.0 * tx), ty * ty * (3.0 - 2.0 * ty));
        let g = |i: usize, j: usize| self.grid[j * self.n + i];
        let top = g(ix, iy) * (1.0 - tx) + g(ix + 1, iy) * tx;
        let bottom = g(ix, iy + 1) * (1.0 - tx) + g(ix + 1, iy + 1) * tx;
        top * (1.0 - ty) + bottom * ty
    }
}

const ROAD: u8 = 250;
const WATER: u8 = 251;

/// Generates sample `index` of the synthetic dataset: a `[size, size, 3]` u8 (or `[size, size,
/// 4]` u16 when `multispectral`) image and its mask of stored class values.
pub fn generate_sample(opts: &SyntheticOptions, index: usize) -> (Raster, Mask) {
    let s = opts.size;
    // Each sample has its own stream, so changing `count` never changes existing samples.
    let mut rng =
        ChaCha8Rng::seed_from_u64(opts.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // The scene as region ids (0: background, then one per parcel, WATER, ROAD) and the look
    // of each parcel; drawn in this order, so roads cross water and parcels.
    let mut ids = GrayImage::new(s as u32, s as u32);
    let mut looks = vec![Look {
        cover: Cover::Background,
        base: [0.30, 0.32, 0.18, 0.35],
        angle: 0.0,
        freq: 0.0,
        amp: 0.0,
    }];
    draw_parcels(&mut ids, &mut looks, &mut rng, s);
    draw_water(&mut ids, &mut rng, s);
    draw_roads(&mut ids, &mut rng, s);
    render(&ids, &looks, &mut rng, opts)
}

/// Fills `poly` with region id `id`. At small sizes a polygon's last vertex can round onto its
/// first, which imageproc refuses (it closes polygons itself): such a vertex is dropped, and a
/// polygon left with fewer than three vertices draws nothing.
fn fill_polygon(ids: &mut GrayImage, poly: &[Point<i32>], id: u8) {
    let mut end = poly.len();
    while end > 1 && poly[end - 1] == poly[0] {
        end -= 1;
    }
    if end >= 3 {
        draw_polygon_mut(ids, &poly[..end], Luma([id]));
    }
}

/// Parcels on a jittered grid, each a convex quadrilateral inset from its cell with a look of
/// its own.
fn draw_parcels(ids: &mut GrayImage, looks: &mut Vec<Look>, rng: &mut ChaCha8Rng, s: usize) {
    let cells = rng.random_range(3..=6usize);
    let cell = s as f32 / cells as f32;
    for cy in 0..cells {
        for cx in 0..cells {
            let (x0, y0) = (cx as f32 * cell, cy as f32 * cell);
            let inset = |rng: &mut ChaCha8Rng| rng.random_range(0.04..0.16) * cell;
            let pts = [
                (x0 + inset(rng), y0 + inset(rng)),
                (x0 + cell - inset(rng), y0 + inset(rng)),
                (x0 + cell - inset(rng), y0 + cell - inset(rng)),
                (x0 + inset(rng), y0 + cell - inset(rng)),
            ];
            let poly: Vec<Point<i32>> = pts
                .iter()
                .map(|&(x, y)| Point::new(x as i32, y as i32))
                .collect();
            let id = looks.len() as u8;
            looks.push(random_look(rng));
            fill_polygon(ids, &poly, id);
        }
    }
}

/// Water: an irregular blob with a fair chance per image.
fn draw_water(ids: &mut GrayImage, rng: &mut ChaCha8Rng, s: usize) {
    if rng.random_bool(0.5) {
        let (cx, cy) = (
            rng.random_range(0.0..s as f32),
            rng.random_range(0.0..s as f32),
        );
        let r = rng.random_range(0.08..0.2) * s as f32;
        let n = 10;
        let poly: Vec<Point<i32>> = (0..n)
            .map(|k| {
                let a = k as f32 / n as f32 * std::f32::consts::TAU;
                let rr = r * rng.random_range(0.6..1.3);
                Point::new((cx + rr * a.cos()) as i32, (cy + rr * a.sin()) as i32)
            })
            .collect();
        fill_polygon(ids, &poly, WATER);
    }
}

/// Roads: straight strips crossing the scene between parcels or over them.
fn draw_roads(ids: &mut GrayImage, rng: &mut ChaCha8Rng, s: usize) {
    for _ in 0..rng.random_range(1..=2) {
        let w = rng.random_range(2.0..4.5f32);
        let (a, b) = if rng.random_bool(0.5) {
            (
                (rng.random_range(0.0..s as f32), 0.0),
                (rng.random_range(0.0..s as f32), s as f32),
            )
        } else {
            (
                (0.0, rng.random_range(0.0..s as f32)),
                (s as f32, rng.random_range(0.0..s as f32)),
            )
        };
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let len = (dx * dx + dy * dy).sqrt().max(1.0);
        let (nx, ny) = (-dy / len * w, dx / len * w);
        let poly = [
            Point::new((a.0 + nx) as i32, (a.1 + ny) as i32),
            Point::new((b.0 + nx) as i32, (b.1 + ny) as i32),
            Point::new((b.0 - nx) as i32, (b.1 - ny) as i32),
            Point::new((a.0 - nx) as i32, (a.1 - ny) as i32),
        ];
        fill_polygon(ids, &poly, ROAD);
    }
}

/// Pixel values from the region map: each region's look and texture, shaded by low-frequency
/// terrain, patchy haze and sensor noise; the mask from each region's cover.
fn render(
    ids: &GrayImage,
    looks: &[Look],
    rng: &mut ChaCha8Rng,
    opts: &SyntheticOptions,
) -> (Raster, Mask) {
    let s = opts.size;
    let terrain = ValueNoise::new(rng, s, (s / 6).max(4));
    let haze = ValueNoise::new(rng, s, (s / 3).max(4));
    let haze_strength = rng.random_range(0.0..0.55f32);
    let noise_sigma = rng.random_range(0.01..0.03f32);
    let bands = if opts.multispectral { 4 } else { 3 };
    let mut px = Vec::with_capacity(s * s * bands);
    let mut mask = Vec::with_capacity(s * s);
    for y in 0..s {
        for x in 0..s {
            let id = ids.get_pixel(x as u32, y as u32)[0];
            let look = match id {
                ROAD => Look {
                    cover: Cover::Road,
                    base: [0.46, 0.45, 0.43, 0.30],
                    angle: 0.0,
                    freq: 0.0,
                    amp: 0.0,
                },
                WATER => Look {
                    cover: Cover::Water,
                    base: [0.06, 0.13, 0.24, 0.04],
                    angle: 0.0,
                    freq: 0.0,
                    amp: 0.01,
                },
                i => looks[i as usize],
            };
            mask.push(look.cover.class(opts.multi_class));
            let t = texture(&look, x as f32, y as f32, rng);
            let shade = 0.85 + 0.3 * terrain.at(x, y);
            // Haze only where the low-frequency field is high: patchy clouds, not a global veil.
            let cloud = ((haze.at(x, y) - 0.45) * 2.5).clamp(0.0, 1.0) * haze_strength;
            for &base in look.base.iter().take(bands) {
                let v = base * shade * (1.0 + t) + gaussian(rng) * noise_sigma;
                let v = v * (1.0 - cloud) + 0.85 * cloud;
                px.push(v.clamp(0.0, 1.0));
            }
        }
    }
    let data = if opts.multispectral {
        RasterData::U16(px.iter().map(|&v| (v * 10000.0).round() as u16).collect())
    } else {
        RasterData::U8(px.iter().map(|&v| (v * 255.0).round() as u8).collect())
    };
    let raster = Raster::new(s, s, bands, data).expect("sized from its loops");
    (raster, Mask::new(s, s, mask).expect("sized from its loops"))
}

fn random_look(rng: &mut ChaCha8Rng) -> Look {
    let kind = rng.random::<f32>();
    let j = |rng: &mut ChaCha8Rng, v: f32| v * rng.random_range(0.85..1.15);
    let (cover, base, freq, amp) = if kind < 0.35 {
        // Flooded or young paddies: teal, more blue than any field, low NIR, bund grid texture.
        let green = rng.random_range(0.0..1.0f32);
        let base = [
            j(rng, 0.12),
            j(rng, 0.30 + 0.10 * green),
            j(rng, 0.30 - 0.06 * green),
            j(rng, 0.18 + 0.15 * green),
        ];
        (Cover::Paddy, base, rng.random_range(0.5..0.9), 0.12)
    } else if kind < 0.75 {
        // Crop fields: yellow-green to tan, high NIR, row stripes.
        let ripe = rng.random_range(0.0..1.0f32);
        let base = [
            j(rng, 0.28 + 0.2 * ripe),
            j(rng, 0.38 + 0.05 * ripe),
            j(rng, 0.12 + 0.04 * ripe),
            j(rng, 0.50 - 0.2 * ripe),
        ];
        (Cover::Field, base, rng.random_range(0.3..0.7), 0.10)
    } else {
        let base = [j(rng, 0.42), j(rng, 0.33), j(rng, 0.24), j(rng, 0.30)];
        (Cover::Soil, base, 0.0, 0.0)
    };
    Look {
        cover,
        base,
        angle: rng.random_range(0.0..std::f32::consts::PI),
        freq,
        amp,
    }
}

/// Relative brightness change from the parcel's texture.
fn texture(look: &Look, x: f32, y: f32, rng: &mut ChaCha8Rng) -> f32 {
    let (c, s) = (look.angle.cos(), look.angle.sin());
    let u = x * c + y * s;
    match look.cover {
        Cover::Field => look.amp * (u * look.freq).sin(),
        Cover::Paddy => {
            // Bunds every ~12 px in both directions, plus water glint speckle.
            let v = -x * s + y * c;
            let bund = if u.rem_euclid(12.0) < 1.5 || v.rem_euclid(12.0) < 1.5 {
                0.35
            } else {
                0.0
            };
            bund + look.amp * (rng.random::<f32>() - 0.5)
        }
        Cover::Soil | Cover::Background => 0.08 * (rng.random::<f32>() - 0.5),
        Cover::Road | Cover::Water => look.amp * (rng.random::<f32>() - 0.5),
    }
}

/// A standard normal sample (Box–Muller).
pub(crate) fn gaussian(rng: &mut ChaCha8Rng) -> f32 {
    let u1 = rng.random::<f32>().max(1e-7);
    let u2 = rng.random::<f32>();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// The split of sample `i` of `count` when `n_val` of them go to `val`: val samples are spread
/// evenly (i is val when `i * n_val` wraps past a multiple of `count`).
fn split_of(i: usize, count: usize, n_val: usize) -> &'static str {
    if (i * n_val) % count < n_val {
        "val"
    } else {
        "train"
    }
}

/// What a generated dataset is, for [`write_generated`].
pub(crate) struct Generated<'a> {
    /// The output directory (must be fresh).
    pub out: &'a Path,
    /// `dataset.json`'s `source`.
    pub source: &'a str,
    /// The sample id prefix (`<prefix>_00000`).
    pub prefix: &'a str,
    pub labels: LabelMap,
    pub count: usize,
    pub size: usize,
    pub val_ratio: f64,
    pub bands: usize,
    pub kind: SampleKind,
}

/// The writer shared by the generated datasets (synthetic paddies, texture task): checks the
/// count, size and split ratio, then writes each sample `sample(i)` into the split layout (the
/// image through `write_image(dir, id, i, image)`, the mask as PNG), accumulates the train
/// split's band statistics and saves `dataset.json`.
pub(crate) fn write_generated(
    spec: &Generated,
    mut sample: impl FnMut(usize) -> (Raster, Mask),
    mut write_image: impl FnMut(&Path, &str, usize, &Raster) -> Result<(), TilesError>,
) -> Result<PrepareReport, TilesError> {
    if spec.count < 2 {
        return Err(TilesError::option(
            "count",
            spec.count,
            "need at least 2 samples (one per split)",
        ));
    }
    if spec.size < 16 {
        return Err(TilesError::option(
            "size",
            spec.size,
            "images must be at least 16 pixels wide",
        ));
    }
    if !(0.0..1.0).contains(&spec.val_ratio) {
        return Err(TilesError::option(
            "val_ratio",
            spec.val_ratio,
            "must be in [0, 1)",
        ));
    }
    let out = spec.out.to_path_buf();
    into_fresh_output(&out, || {
        let n_val =
            ((spec.count as f64 * spec.val_ratio).round() as usize).clamp(1, spec.count - 1);
        let mut stats = StatsAccumulator::new(spec.bands, spec.kind);
        let mut meta =
            DatasetMeta::new(spec.source, &spec.labels, spec.kind, spec.bands, Vec::new());
        for i in 0..spec.count {
            let split = split_of(i, spec.count, n_val);
            let (image, mask) = sample(i);
            let id = format!("{}_{i:05}", spec.prefix);
            write_image(&out.join("images").join(split), &id, i, &image)?;
            write_mask_png(
                &out.join("masks").join(split).join(format!("{id}.png")),
                &mask,
            )?;
            if split == "train" {
                stats.add(&image, None);
            }
            *meta.splits.entry(split.to_string()).or_insert(0) += 1;
        }
        meta.band_stats = stats.finish();
        meta.save(&out)?;
        Ok(PrepareReport {
            out: out.clone(),
            meta,
            audit: None,
            skipped_tiles: 0,
            dropped_tiles: 0,
            notes: Vec::new(),
        })
    })
}

/// Writes the synthetic dataset in the split layout with `dataset.json`.
pub fn prepare_synthetic(opts: &SyntheticOptions) -> Result<PrepareReport, TilesError> {
    let (bands, kind) = if opts.multispectral {
        (4, SampleKind::U16)
    } else {
        (3, SampleKind::U8)
    };
    let spec = Generated {
        out: &opts.out,
        source: "synthetic",
        prefix: "syn",
        labels: opts.labels(),
        count: opts.count,
        size: opts.size,
        val_ratio: opts.val_ratio,
        bands,
        kind,
    };
    write_generated(
        &spec,
        |i| generate_sample(opts, i),
        |dir, id, i, image| {
            if !opts.multispectral {
                return write_png(&dir.join(format!("{id}.png")), image);
            }
            // A 10 m grid somewhere in UTM 51N (EPSG:32651), one sample per kilometre square.
            let geo = GeoRef {
                transform: [
                    300_000.0 + 1000.0 * i as f64,
                    10.0,
                    0.0,
                    1_600_000.0,
                    0.0,
                    -10.0,
                ],
                geo_key_directory: Some(vec![
                    1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32651,
                ]),
                geo_double_params: None,
                geo_ascii_params: None,
                nodata: None,
            };
            write_geotiff(&dir.join(format!("{id}.tif")), image, Some(&geo))
        },
    )
}
