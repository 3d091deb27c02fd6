//! Per-band statistics for normalising 16-bit and multispectral imagery.

use raster::{Raster, RasterData, SampleKind};

/// Statistics of one band over a split.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BandStats {
    /// Mean sample value.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// 2nd percentile (integer samples only: from an exact histogram).
    pub p2: Option<f64>,
    /// 98th percentile (integer samples only).
    pub p98: Option<f64>,
    /// Samples counted (pixels nodata in every band, and non-finite floats, excluded).
    pub count: u64,
}

/// Accumulates [`BandStats`] raster by raster, in constant memory (one histogram per band for
/// integer samples: 256 or 65 536 bins).
#[derive(Clone, Debug)]
pub struct StatsAccumulator {
    kind: SampleKind,
    bands: Vec<BandAcc>,
}

#[derive(Clone, Debug)]
struct BandAcc {
    count: u64,
    sum: f64,
    sum_sq: f64,
    min: f64,
    max: f64,
    hist: Vec<u64>,
}

impl StatsAccumulator {
    /// An empty accumulator for `bands` bands of `kind`.
    pub fn new(bands: usize, kind: SampleKind) -> Self {
        let bins = match kind {
            SampleKind::U8 => 256,
            SampleKind::U16 => 65536,
            SampleKind::F32 => 0,
        };
        let acc = BandAcc {
            count: 0,
            sum: 0.0,
            sum_sq: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            hist: vec![0; bins],
        };
        Self {
            kind,
            bands: vec![acc; bands],
        }
    }

    /// Adds every pixel of `raster` (which must have this accumulator's bands and kind), skipping
    /// pixels that are nodata in every band (see [`nodata_pixels`]) and non-finite float samples.
    pub fn add(&mut self, raster: &Raster, nodata: Option<f64>) {
        debug_assert_eq!(raster.bands, self.bands.len());
        debug_assert_eq!(raster.kind(), self.kind);
        let nb = self.bands.len();
        let skip = nodata.map(|nd| nodata_pixels(raster, nd));
        let valid = |sample: usize| skip.as_ref().is_none_or(|s| !s[sample / nb]);
        match &raster.data {
            RasterData::U8(v) => self.add_int(v.iter().map(|&s| s as u32), nb, valid),
            RasterData::U16(v) => self.add_int(v.iter().map(|&s| s as u32), nb, valid),
            RasterData::F32(v) => {
                for (i, &s) in v.iter().enumerate() {
                    if !s.is_finite() || !valid(i) {
                        continue;
                    }
                    let b = &mut self.bands[i % nb];
                    let s = s as f64;
                    b.count += 1;
                    b.sum += s;
                    b.sum_sq += s * s;
                    b.min = b.min.min(s);
                    b.max = b.max.max(s);
                }
            }
        }
    }

    /// Adds everything `other` has counted (same bands and kind), e.g. from another thread.
    pub fn merge(&mut self, other: &StatsAccumulator) {
        debug_assert_eq!(self.kind, other.kind);
        for (a, b) in self.bands.iter_mut().zip(&other.bands) {
            a.count += b.count;
            a.sum += b.sum;
            a.sum_sq += b.sum_sq;
            a.min = a.min.min(b.min);
            a.max = a.max.max(b.max);
            for (x, y) in a.hist.iter_mut().zip(&b.hist) {
                *x += y;
            }
        }
    }

    fn add_int(
        &mut self,
        samples: impl Iterator<Item = u32>,
        nb: usize,
        valid: impl Fn(usize) -> bool,
    ) {
        // Integer samples only bump histogram bins; sums, min and max come from the histogram.
        for (i, s) in samples.enumerate() {
            if valid(i) {
                self.bands[i % nb].hist[s as usize] += 1;
            }
        }
    }

    /// The statistics so far, one entry per band.
    pub fn finish(&self) -> Vec<BandStats> {
        self.bands
            .iter()
            .map(|b| {
                let mut b = b.clone();
                if !b.hist.is_empty() {
                    for (v, &n) in b.hist.iter().enumerate() {
                        if n > 0 {
                            let (v, nf) = (v as f64, n as f64);
                            b.count += n;
                            b.sum += v * nf;
                            b.sum_sq += v * v * nf;
                            b.min = b.min.min(v);
                            b.max = b.max.max(v);
                        }
                    }
                }
                let n = b.count.max(1) as f64;
                let mean = b.sum / n;
                let var = (b.sum_sq / n - mean * mean).max(0.0);
                let pct = |q: f64| percentile(&b.hist, b.count, q);
                BandStats {
                    mean,
                    std: var.sqrt(),
                    min: if b.count > 0 { b.min } else { 0.0 },
                    max: if b.count > 0 { b.max } else { 0.0 },
                    p2: pct(0.02),
                    p98: pct(0.98),
                    count: b.count,
                }
            })
            .collect()
    }
}

/// Which pixels of `raster` are nodata, in row-major order: those whose every band equals
/// `nodata` (GDAL's rule for a dataset-wide nodata value). Float samples are compared with
/// `nodata` as `f32`, and a NaN `nodata` matches NaN samples; an integer raster has no nodata
/// pixels when `nodata` is not one of its values.
pub fn nodata_pixels(raster: &Raster, nodata: f64) -> Vec<bool> {
    fn all_bands<T: Copy>(v: &[T], bands: usize, is: impl Fn(T) -> bool) -> Vec<bool> {
        v.chunks_exact(bands)
            .map(|px| px.iter().all(|&s| is(s)))
            .collect()
    }
    let b = raster.bands;
    match &raster.data {
        RasterData::U8(v) => all_bands(v, b, |s| s as f64 == nodata),
        RasterData::U16(v) => all_bands(v, b, |s| s as f64 == nodata),
        RasterData::F32(v) => {
            let nd = nodata as f32;
            all_bands(v, b, |s| s == nd || (nd.is_nan() && s.is_nan()))
        }
    }
}

/// The smallest value whose cumulative count reaches `q` of `total` (nearest-rank percentile).
fn percentile(hist: &[u64], total: u64, q: f64) -> Option<f64> {
    if hist.is_empty() || total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (v, &n) in hist.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(v as f64);
        }
    }
    None
}
