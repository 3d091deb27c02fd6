//! A synthetic task that no per-pixel classifier can solve: regions of horizontal and of
//! vertical stripes, drawn with the same two colours, the same duty cycle and the same noise.
//!
//! Every pixel of either class is colour A or colour B with probability ½ each (each region's
//! stripe phase is random), plus the same Gaussian noise, so the colour of a pixel says nothing
//! about its class: only the orientation of its neighbourhood does. The regions are the cells
//! of a random Voronoi diagram, half of them of each class, so the classes are balanced.
//! Deterministic by `(seed, index)`.

use std::path::PathBuf;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use raster::{Mask, Raster, RasterData, SampleKind};

use crate::error::TilesError;
use crate::io::write_png;
use crate::labels::LabelMap;
use crate::prepare::PrepareReport;
use crate::synthetic::{Generated, gaussian, write_generated};

/// What to generate (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct TextureOptions {
    /// Number of image/mask pairs (default 64).
    pub count: usize,
    /// Side of each square image in pixels (default 64).
    pub size: usize,
    /// Seed; the same seed gives byte-identical files (default 0).
    pub seed: u64,
    /// Output root.
    pub out: PathBuf,
    /// Fraction of samples in `val` (default 0.2; at least one sample goes to each split).
    pub val_ratio: f64,
    /// Stripe period in pixels: half of it colour A, half colour B (default 6; even).
    pub period: usize,
    /// Voronoi cells per image (default 6; at least 2).
    pub cells: usize,
}

impl Default for TextureOptions {
    fn default() -> Self {
        Self {
            count: 64,
            size: 64,
            seed: 0,
            out: PathBuf::from("data/texture"),
            val_ratio: 0.2,
            period: 6,
            cells: 6,
        }
    }
}

impl TextureOptions {
    /// The label map of the generated masks: 0 horizontal stripes, 1 vertical stripes.
    pub fn labels(&self) -> LabelMap {
        LabelMap::identity(&["horizontal_stripes", "vertical_stripes"])
    }
}

/// The two stripe colours (RGB reflectance), shared by both classes.
const COLOURS: [[f32; 3]; 2] = [[0.25, 0.42, 0.20], [0.52, 0.40, 0.30]];
/// Standard deviation of the per-pixel, per-band noise.
const NOISE_SIGMA: f32 = 0.04;

/// Generates sample `index` of the texture task: a `[size, size, 3]` u8 image and its mask
/// (0: horizontal stripes, 1: vertical stripes).
pub fn generate_texture_sample(opts: &TextureOptions, index: usize) -> (Raster, Mask) {
    let s = opts.size;
    let half = (opts.period / 2).max(1);
    let period = 2 * half;
    let mut rng =
        ChaCha8Rng::seed_from_u64(opts.seed ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let cells = opts.cells.max(2);
    let sites: Vec<(f32, f32)> = (0..cells)
        .map(|_| {
            (
                rng.random_range(0.0..s as f32),
                rng.random_range(0.0..s as f32),
            )
        })
        .collect();
    // Half the cells of each class, in a random order.
    let mut classes: Vec<u8> = (0..cells).map(|i| (i % 2) as u8).collect();
    classes.shuffle(&mut rng);
    let phases: Vec<usize> = (0..cells).map(|_| rng.random_range(0..period)).collect();
    let mut px = Vec::with_capacity(s * s * 3);
    let mut mask = Vec::with_capacity(s * s);
    for y in 0..s {
        for x in 0..s {
            let d2 = |&(sx, sy): &(f32, f32)| (sx - x as f32).powi(2) + (sy - y as f32).powi(2);
            let cell = (0..cells)
                .min_by(|&a, &b| d2(&sites[a]).total_cmp(&d2(&sites[b])))
                .expect("at least two cells");
            let class = classes[cell];
            // Horizontal stripes vary along y, vertical ones along x.
            let t = if class == 0 { y } else { x };
            let colour = COLOURS[((t + phases[cell]) % period) / half];
            for c in colour {
                let v = c + gaussian(&mut rng) * NOISE_SIGMA;
                px.push((v.clamp(0.0, 1.0) * 255.0).round() as u8);
            }
            mask.push(class);
        }
    }
    let raster = Raster::new(s, s, 3, RasterData::U8(px)).expect("sized from its loops");
    (raster, Mask::new(s, s, mask).expect("sized from its loops"))
}

/// Writes the texture task in the split layout with `dataset.json` (RGB u8 PNGs).
pub fn prepare_texture(opts: &TextureOptions) -> Result<PrepareReport, TilesError> {
    if opts.period < 2 || opts.period % 2 != 0 {
        return Err(TilesError::option(
            "period",
            opts.period,
            "must be even and at least 2 (half of it each colour)",
        ));
    }
    let spec = Generated {
        out: &opts.out,
        source: "texture",
        prefix: "tex",
        labels: opts.labels(),
        count: opts.count,
        size: opts.size,
        val_ratio: opts.val_ratio,
        bands: 3,
        kind: SampleKind::U8,
    };
    write_generated(
        &spec,
        |i| generate_texture_sample(opts, i),
        |dir, id, _, image| write_png(&dir.join(format!("{id}.png")), image),
    )
}
