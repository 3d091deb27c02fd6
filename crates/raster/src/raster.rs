//! In-memory rasters: images with any number of bands and 8/16-bit or float samples, and class masks.

use crate::GeoRef;

/// Pixel samples of a [`Raster`], interleaved band-last (`[H, W, C]`, row-major).
#[derive(Clone, Debug, PartialEq)]
pub enum RasterData {
    /// 8-bit unsigned samples.
    U8(Vec<u8>),
    /// 16-bit unsigned samples.
    U16(Vec<u16>),
    /// 32-bit float samples.
    F32(Vec<f32>),
}

impl RasterData {
    /// Number of samples held.
    pub fn len(&self) -> usize {
        match self {
            RasterData::U8(v) => v.len(),
            RasterData::U16(v) => v.len(),
            RasterData::F32(v) => v.len(),
        }
    }

    /// True when no samples are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sample type's name (`u8`, `u16`, `f32`).
    pub fn kind(&self) -> SampleKind {
        match self {
            RasterData::U8(_) => SampleKind::U8,
            RasterData::U16(_) => SampleKind::U16,
            RasterData::F32(_) => SampleKind::F32,
        }
    }
}

/// The sample type of a raster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleKind {
    /// 8-bit unsigned.
    U8,
    /// 16-bit unsigned.
    U16,
    /// 32-bit float.
    F32,
}

impl SampleKind {
    /// The largest value of an integer sample type, `1.0` for floats (the value that rescales to 1).
    pub fn max_value(self) -> f32 {
        match self {
            SampleKind::U8 => 255.0,
            SampleKind::U16 => 65535.0,
            SampleKind::F32 => 1.0,
        }
    }
}

impl std::fmt::Display for SampleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SampleKind::U8 => "u8",
            SampleKind::U16 => "u16",
            SampleKind::F32 => "f32",
        })
    }
}

/// An image of `height × width` pixels with `bands` samples each, stored `[H, W, C]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Raster {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel (3 for RGB, 4 for RGBN, 13 for a Sentinel-2 stack…).
    pub bands: usize,
    /// The samples, `height * width * bands` of them.
    pub data: RasterData,
}

impl Raster {
    /// A raster from its parts; `None` when `data` does not hold `height * width * bands` samples.
    pub fn new(width: usize, height: usize, bands: usize, data: RasterData) -> Option<Self> {
        (data.len() == width * height * bands && bands > 0).then_some(Self {
            width,
            height,
            bands,
            data,
        })
    }

    /// The sample type.
    pub fn kind(&self) -> SampleKind {
        self.data.kind()
    }

    /// Sample `(y, x, band)` as `f32`, whatever the storage type.
    pub fn get_f32(&self, y: usize, x: usize, band: usize) -> f32 {
        let i = (y * self.width + x) * self.bands + band;
        match &self.data {
            RasterData::U8(v) => v[i] as f32,
            RasterData::U16(v) => v[i] as f32,
            RasterData::F32(v) => v[i],
        }
    }

    /// A raster of the bands `bands` (0-based, in that order); `None` when one is out of range
    /// or the list is empty.
    pub fn select_bands(&self, bands: &[usize]) -> Option<Raster> {
        if bands.is_empty() || bands.iter().any(|&b| b >= self.bands) {
            return None;
        }
        fn pick<T: Copy>(v: &[T], c: usize, bands: &[usize]) -> Vec<T> {
            v.chunks_exact(c)
                .flat_map(|px| bands.iter().map(move |&b| px[b]))
                .collect()
        }
        let data = match &self.data {
            RasterData::U8(v) => RasterData::U8(pick(v, self.bands, bands)),
            RasterData::U16(v) => RasterData::U16(pick(v, self.bands, bands)),
            RasterData::F32(v) => RasterData::F32(pick(v, self.bands, bands)),
        };
        Raster::new(self.width, self.height, bands.len(), data)
    }

    /// All samples converted to `f32`, `[H, W, C]`.
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            RasterData::U8(v) => v.iter().map(|&s| s as f32).collect(),
            RasterData::U16(v) => v.iter().map(|&s| s as f32).collect(),
            RasterData::F32(v) => v.clone(),
        }
    }
}

/// A class mask of `height × width` pixels, one `u8` each (`[H, W]`, row-major).
///
/// Before label mapping the values are those stored in the file; after it, class indices with
/// [`Mask::IGNORE`] (255) for pixels the loss and metrics skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// One value per pixel.
    pub data: Vec<u8>,
}

impl Mask {
    /// The conventional ignore value (HF's `semantic_loss_ignore_index`).
    pub const IGNORE: u8 = 255;

    /// A mask from its parts; `None` when `data` does not hold `height * width` values.
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Option<Self> {
        (data.len() == width * height).then_some(Self {
            width,
            height,
            data,
        })
    }
}

/// One training or evaluation example: an image, its mask (absent for inference) and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// A stable name: the file stem (for a tile, `<scene stem>_x<col>_y<row>`).
    pub id: String,
    /// The image.
    pub image: Raster,
    /// The class mask, already label-mapped, when the sample has one.
    pub mask: Option<Mask>,
    /// Georeferencing of the image, when the source had it.
    pub geo: Option<GeoRef>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_check_the_sample_count() {
        assert!(Raster::new(3, 2, 1, RasterData::U8(vec![0; 6])).is_some());
        assert!(Raster::new(3, 2, 1, RasterData::U8(vec![0; 5])).is_none());
        assert!(
            Raster::new(0, 0, 0, RasterData::U8(vec![])).is_none(),
            "bands must be > 0"
        );
        assert!(Mask::new(2, 2, vec![0; 4]).is_some());
        assert!(Mask::new(2, 2, vec![0; 3]).is_none());
    }

    #[test]
    fn samples_read_as_f32_band_last() {
        let r = Raster::new(2, 1, 2, RasterData::U16(vec![1, 2, 3, 65535])).unwrap();
        assert_eq!(r.get_f32(0, 1, 1), 65535.0);
        assert_eq!(r.to_f32(), vec![1.0, 2.0, 3.0, 65535.0]);
        assert_eq!((r.kind(), r.kind().max_value()), (SampleKind::U16, 65535.0));
        assert_eq!(SampleKind::F32.to_string(), "f32");
    }
}
