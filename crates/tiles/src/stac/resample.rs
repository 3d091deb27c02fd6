//! Nearest-neighbour resampling of an asset onto another asset's grid (GDAL's `-r near`: each
//! pixel takes the source pixel that contains its centre), and the copies that place an
//! asset's bands into a stack's window.

use raster::RasterData;

use super::StacItem;
use crate::error::TilesError;
use crate::tiff_read::ChunkedReader;

/// Where a pixel of the stack's grid lies in an asset on another grid: per column and per
/// row of the stack, the asset's column and row ([`OUTSIDE`] beyond its edge).
pub(super) struct GridMap {
    pub(super) cols: Vec<u32>,
    pub(super) rows: Vec<u32>,
}

pub(super) const OUTSIDE: u32 = u32::MAX;

/// Where each pixel centre of the target grid falls in `key`'s grid (GDAL's nearest: the
/// source pixel containing the centre).
pub(super) fn grid_map(
    item: &StacItem,
    key: &str,
    source: &ChunkedReader,
    target_key: &str,
    target: &ChunkedReader,
) -> Result<GridMap, TilesError> {
    let (s, t) = match (source.geo(), target.geo()) {
        (Some(s), Some(t)) => (s, t),
        _ => {
            return Err(item.error(format!(
                "`{key}` cannot be resampled to `{target_key}`'s grid: both need georeferencing"
            )));
        }
    };
    if !crate::scenes::same_crs(s, t) {
        return Err(item.error(format!(
            "`{key}` and `{target_key}` are in different CRSs; segfit resamples, it does not \
             reproject: warp them to one CRS first"
        )));
    }
    let (st, tt) = (&s.transform, &t.transform);
    if st[2] != 0.0 || st[4] != 0.0 || tt[2] != 0.0 || tt[4] != 0.0 {
        return Err(item.error(format!(
            "`{key}` or `{target_key}` has a rotated geotransform; only north-up grids resample"
        )));
    }
    let axis = |n: usize, t0: f64, td: f64, s0: f64, sd: f64, len: usize| -> Vec<u32> {
        (0..n)
            .map(|i| {
                let at = ((t0 + (i as f64 + 0.5) * td) - s0) / sd;
                // Like GDAL, test before truncating: -0.5 would truncate to 0.
                if at < 0.0 || at >= len as f64 {
                    OUTSIDE
                } else {
                    at as u32
                }
            })
            .collect()
    };
    Ok(GridMap {
        cols: axis(target.width(), tt[0], tt[1], st[0], st[1], source.width()),
        rows: axis(target.height(), tt[3], tt[5], st[3], st[5], source.height()),
    })
}

/// Copies `picks` of `src` (`[rows, cols, src_bands]`) into `out` (`[h, w, out_bands]`)
/// through the column and row maps; [`OUTSIDE`] pixels get `fill`.
#[allow(clippy::too_many_arguments)]
pub(super) fn place<T: Copy>(
    out: &mut [T],
    out_bands: usize,
    src: &[T],
    src_w: usize,
    src_bands: usize,
    picks: &[(usize, usize)],
    cols: &[u32],
    rows: &[u32],
    fill: T,
) {
    let w = cols.len();
    for (y, &r) in rows.iter().enumerate() {
        for (x, &c) in cols.iter().enumerate() {
            let o = (y * w + x) * out_bands;
            if r == OUTSIDE || c == OUTSIDE {
                for &(ob, _) in picks {
                    out[o + ob] = fill;
                }
                continue;
            }
            let s = (r as usize * src_w + c as usize) * src_bands;
            for &(ob, sb) in picks {
                out[o + ob] = src[s + sb];
            }
        }
    }
}

/// Sets `picks`' bands of every pixel to `fill`.
pub(super) fn fill_only(out: &mut RasterData, nb: usize, picks: &[(usize, usize)], fill: f64) {
    fn run<T: Copy>(v: &mut [T], nb: usize, picks: &[(usize, usize)], fill: T) {
        for px in v.chunks_exact_mut(nb) {
            for &(ob, _) in picks {
                px[ob] = fill;
            }
        }
    }
    match out {
        RasterData::U8(v) => run(v, nb, picks, fill as u8),
        RasterData::U16(v) => run(v, nb, picks, fill as u16),
        RasterData::F32(v) => run(v, nb, picks, fill as f32),
    }
}
