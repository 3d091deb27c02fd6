//! Sample-type plumbing: one generic code path for u8, u16 and f32 rasters.

use raster::{Mask, Raster, RasterData};

use crate::AugmentError;
use crate::geometric::Dims;

/// A sample type a raster can hold.
pub(crate) trait Pixel: Copy + Default + Send + Sync + 'static {
    /// The value that means "full scale" (255, 65535, or 1.0 for floats).
    const MAX: f32;
    /// True for integer types, whose results are rounded and clamped to `0..=MAX`.
    const INTEGER: bool;
    /// The sample as `f32`.
    fn to_f32(self) -> f32;
    /// Round (integers, half away from zero) and saturate; floats pass through.
    fn from_f32(v: f32) -> Self;
}

impl Pixel for u8 {
    const MAX: f32 = 255.0;
    const INTEGER: bool = true;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        // `as` saturates and maps NaN to 0.
        v.round() as u8
    }
}

impl Pixel for u16 {
    const MAX: f32 = 65535.0;
    const INTEGER: bool = true;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v.round() as u16
    }
}

impl Pixel for f32 {
    const MAX: f32 = 1.0;
    const INTEGER: bool = false;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

/// Run a generic expression over the samples of a [`RasterData`], rebuilding the same variant.
///
/// `map_samples!(data, |v| expr)` binds `v` to the `Vec<T>` (by value or reference, as given)
/// and expects `expr` to produce a `Vec<T>` of the same `T`.
macro_rules! map_samples {
    ($data:expr, |$v:ident| $body:expr) => {
        match $data {
            raster::RasterData::U8($v) => raster::RasterData::U8($body),
            raster::RasterData::U16($v) => raster::RasterData::U16($body),
            raster::RasterData::F32($v) => raster::RasterData::F32($body),
        }
    };
}
pub(crate) use map_samples;

/// A fill value per band, in the image's sample type (clamped to its range for integers).
pub(crate) fn fill_px<T: Pixel>(fill: f32, bands: usize) -> Vec<T> {
    vec![
        T::from_f32(if T::INTEGER {
            fill.clamp(0.0, T::MAX)
        } else {
            fill
        });
        bands
    ]
}

/// An image and its optional mask, the unit every transform works on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item {
    pub image: Raster,
    pub mask: Option<Mask>,
}

impl Item {
    /// Check that the raster's buffer and the mask agree with their declared sizes.
    pub fn new(image: Raster, mask: Option<Mask>) -> Result<Self, AugmentError> {
        if image.data.is_empty() {
            return Err(AugmentError::Shape(format!(
                "image is empty ({}x{}x{} h x w x bands); skip such samples before augmenting",
                image.height, image.width, image.bands
            )));
        }
        if image.data.len() != image.width * image.height * image.bands {
            return Err(AugmentError::Shape(format!(
                "image says {}x{}x{} (h x w x bands) but holds {} samples",
                image.height,
                image.width,
                image.bands,
                image.data.len()
            )));
        }
        if let Some(m) = &mask
            && (m.width != image.width
                || m.height != image.height
                || m.data.len() != m.width * m.height)
        {
            return Err(AugmentError::Shape(format!(
                "image is {}x{} (h x w) but mask is {}x{} with {} values",
                image.height,
                image.width,
                m.height,
                m.width,
                m.data.len()
            )));
        }
        Ok(Self { image, mask })
    }

    /// The image's `[H, W, C]`.
    pub fn dims(&self) -> Dims {
        Dims {
            h: self.image.height,
            w: self.image.width,
            c: self.image.bands,
        }
    }

    /// Replace the image with `data` of `height × width` (same band count).
    pub fn set_image(&mut self, height: usize, width: usize, data: RasterData) {
        debug_assert_eq!(data.len(), height * width * self.image.bands);
        self.image.height = height;
        self.image.width = width;
        self.image.data = data;
    }

    /// Apply `f(data, height, width)` to the mask if there is one.
    pub fn map_mask(&mut self, f: impl FnOnce(&[u8], usize, usize) -> (Vec<u8>, usize, usize)) {
        if let Some(m) = &mut self.mask {
            let (data, h, w) = f(&m.data, m.height, m.width);
            *m = Mask {
                width: w,
                height: h,
                data,
            };
        }
    }
}
