//! Overview decimation: each overview pixel made from the 2×2 pixels of the level above it,
//! by nearest or by average (GDAL's `NEAREST` and `AVERAGE`).

use raster::RasterData;

/// How an overview pixel is made from the 2×2 pixels below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OverviewResampling {
    /// The top-left sample of each 2×2 block (GDAL's `NEAREST`): right for class maps.
    #[default]
    Nearest,
    /// The mean of the valid samples of each 2×2 block (GDAL's `AVERAGE`): a sample is valid
    /// when it exists (the last row/column of an odd size has fewer), is not the GeoRef's
    /// nodata and is not NaN. Integers are rounded to nearest (halves up); a block with no valid
    /// sample keeps its top-left sample (the nodata value, or NaN).
    Average,
}

/// `[h, w, bands]` → `[ceil(h/2), ceil(w/2), bands]`, each pixel from the 2×2 block above it.
pub(super) fn decimate(
    data: &RasterData,
    width: usize,
    bands: usize,
    resampling: OverviewResampling,
    nodata: Option<f64>,
) -> RasterData {
    match data {
        RasterData::U8(v) => RasterData::U8(decimate_t(v, width, bands, resampling, nodata)),
        RasterData::U16(v) => RasterData::U16(decimate_t(v, width, bands, resampling, nodata)),
        RasterData::F32(v) => RasterData::F32(decimate_t(v, width, bands, resampling, nodata)),
    }
}

trait Sample: Copy {
    fn to_f64(self) -> f64;
    /// The mean of `n` samples summing to `sum`, as this type.
    fn mean(sum: f64, n: usize) -> Self;
}

impl Sample for u8 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mean(sum: f64, n: usize) -> Self {
        let (s, n) = (sum as u64, n as u64);
        ((s + n / 2) / n) as u8
    }
}

impl Sample for u16 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mean(sum: f64, n: usize) -> Self {
        let (s, n) = (sum as u64, n as u64);
        ((s + n / 2) / n) as u16
    }
}

impl Sample for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mean(sum: f64, n: usize) -> Self {
        (sum / n as f64) as f32
    }
}

fn decimate_t<T: Sample>(
    v: &[T],
    width: usize,
    bands: usize,
    resampling: OverviewResampling,
    nodata: Option<f64>,
) -> Vec<T> {
    let h = v.len() / (width * bands);
    let (w2, h2) = (width.div_ceil(2), h.div_ceil(2));
    let at = |x: usize, y: usize, b: usize| v[(y * width + x) * bands + b];
    let mut out = Vec::with_capacity(w2 * h2 * bands);
    for y in 0..h2 {
        for x in 0..w2 {
            for b in 0..bands {
                let first = at(2 * x, 2 * y, b);
                if resampling == OverviewResampling::Nearest {
                    out.push(first);
                    continue;
                }
                let (mut sum, mut n) = (0.0, 0);
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let (sx, sy) = (2 * x + dx, 2 * y + dy);
                    if sx >= width || sy >= h {
                        continue;
                    }
                    let s = at(sx, sy, b).to_f64();
                    if s.is_nan() || nodata.is_some_and(|nd| nd == s) {
                        continue;
                    }
                    sum += s;
                    n += 1;
                }
                out.push(if n == 0 { first } else { T::mean(sum, n) });
            }
        }
    }
    out
}
