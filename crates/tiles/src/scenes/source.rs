//! Windowed access to a scene or label raster, and the pixel helpers tiling needs.

use std::path::Path;

use raster::{GeoRef, Mask, Raster, RasterData, SampleKind};

use crate::error::TilesError;
use crate::io::{is_tiff, read_image, read_mask};
use crate::tiff_read::ChunkedReader;

/// Windowed access to an image or mask: chunked for TIFF, whole for anything else.
pub(super) enum Source {
    Tiff(Box<ChunkedReader>),
    Image(Raster, Option<GeoRef>),
    Mask(Mask),
}

impl Source {
    pub(super) fn open_image(path: &Path) -> Result<Self, TilesError> {
        match ChunkedReader::open(path) {
            Ok(r) => Ok(Source::Tiff(Box::new(r))),
            Err(TilesError::Decode { .. }) if !is_tiff(path) => {
                let (r, g) = read_image(path)?;
                Ok(Source::Image(r, g))
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn open_mask(path: &Path) -> Result<Self, TilesError> {
        if is_tiff(path) {
            let r = ChunkedReader::open(path)?;
            if r.bands() != 1 || r.kind() == SampleKind::F32 {
                return Err(TilesError::unsupported(
                    path,
                    format!(
                        "label raster has {} bands of {}; it must be one band of 8-bit class values",
                        r.bands(),
                        r.kind()
                    ),
                ));
            }
            Ok(Source::Tiff(Box::new(r)))
        } else {
            Ok(Source::Mask(read_mask(path)?))
        }
    }

    /// `(width, height)`.
    pub(super) fn size(&self) -> (usize, usize) {
        match self {
            Source::Tiff(r) => (r.width(), r.height()),
            Source::Image(r, _) => (r.width, r.height),
            Source::Mask(m) => (m.width, m.height),
        }
    }

    /// Band count and sample type.
    pub(super) fn layout(&self) -> (usize, SampleKind) {
        match self {
            Source::Tiff(r) => (r.bands(), r.kind()),
            Source::Image(r, _) => (r.bands, r.kind()),
            Source::Mask(_) => (1, SampleKind::U8),
        }
    }

    pub(super) fn geo(&self) -> Option<&GeoRef> {
        match self {
            Source::Tiff(r) => r.geo(),
            Source::Image(_, g) => g.as_ref(),
            Source::Mask(_) => None,
        }
    }

    /// Rows `y..y + h` across the full width.
    pub(super) fn rows(&mut self, y: usize, h: usize) -> Result<Raster, TilesError> {
        match self {
            Source::Tiff(r) => {
                let w = r.width();
                r.read_window(0, y, w, h)
            }
            Source::Image(r, _) => Ok(crop(r, 0, y, r.width, h)),
            Source::Mask(m) => {
                let data = m.data[y * m.width..(y + h) * m.width].to_vec();
                Ok(Raster::new(m.width, h, 1, RasterData::U8(data)).expect("sliced from the mask"))
            }
        }
    }

    /// Rows `y..y + h` of a label raster as class values.
    pub(super) fn mask_rows(
        &mut self,
        path: &Path,
        y: usize,
        h: usize,
    ) -> Result<Mask, TilesError> {
        let r = self.rows(y, h)?;
        crate::io::raster_to_mask(path, &r)
    }
}

/// The `w × h` window at `(x, y)` of `r`.
pub(super) fn crop(r: &Raster, x: usize, y: usize, w: usize, h: usize) -> Raster {
    fn cut<T: Copy>(
        v: &[T],
        width: usize,
        bands: usize,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(w * h * bands);
        for row in y..y + h {
            let s = (row * width + x) * bands;
            out.extend_from_slice(&v[s..s + w * bands]);
        }
        out
    }
    let data = match &r.data {
        RasterData::U8(v) => RasterData::U8(cut(v, r.width, r.bands, x, y, w, h)),
        RasterData::U16(v) => RasterData::U16(cut(v, r.width, r.bands, x, y, w, h)),
        RasterData::F32(v) => RasterData::F32(cut(v, r.width, r.bands, x, y, w, h)),
    };
    Raster::new(w, h, r.bands, data).expect("window inside the raster")
}

/// The `t × t` window at column `x` of a row band of class values.
pub(super) fn crop_mask(band: &Mask, x: usize, t: usize) -> Mask {
    let w = band.width;
    let raw: Vec<u8> = (0..t)
        .flat_map(|r| band.data[r * w + x..r * w + x + t].iter().copied())
        .collect();
    Mask::new(t, t, raw).expect("t*t values")
}
