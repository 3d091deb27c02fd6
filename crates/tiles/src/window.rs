//! The windowed-read interface shared by one raster ([`ChunkedReader`], local or by URL) and
//! a stack of STAC assets ([`crate::BandStack`]), so a scene is predicted the same way from
//! either.

use raster::{GeoRef, Raster, SampleKind};

use crate::error::TilesError;
use crate::tiff_read::ChunkedReader;

/// A raster read a window at a time.
pub trait WindowSource: Send {
    /// Width in pixels.
    fn width(&self) -> usize;
    /// Height in pixels.
    fn height(&self) -> usize;
    /// Bands per pixel.
    fn bands(&self) -> usize;
    /// Sample type.
    fn kind(&self) -> SampleKind;
    /// Georeferencing of the whole raster, when known.
    fn geo(&self) -> Option<&GeoRef>;
    /// `(width, height)` of the storage blocks: windows aligned to them read each block once.
    fn chunk_size(&self) -> (usize, usize);
    /// The `[h, w, bands]` window whose top-left pixel is `(x, y)`; it must lie inside the
    /// raster.
    fn read_window(&mut self, x: usize, y: usize, w: usize, h: usize)
    -> Result<Raster, TilesError>;
}

impl WindowSource for ChunkedReader {
    fn width(&self) -> usize {
        ChunkedReader::width(self)
    }

    fn height(&self) -> usize {
        ChunkedReader::height(self)
    }

    fn bands(&self) -> usize {
        ChunkedReader::bands(self)
    }

    fn kind(&self) -> SampleKind {
        ChunkedReader::kind(self)
    }

    fn geo(&self) -> Option<&GeoRef> {
        ChunkedReader::geo(self)
    }

    fn chunk_size(&self) -> (usize, usize) {
        ChunkedReader::chunk_size(self)
    }

    fn read_window(
        &mut self,
        x: usize,
        y: usize,
        w: usize,
        h: usize,
    ) -> Result<Raster, TilesError> {
        ChunkedReader::read_window(self, x, y, w, h)
    }
}
