//! Flips, quarter turns and transpose: index permutations shared by image and mask, so the two
//! always move together and results are bit-exact.

use raster::RasterData;
use serde::{Deserialize, Serialize};

use super::Transform;
use super::options::half;
use crate::AugmentError;
use crate::geometric::{self as geo, Dims};
use crate::pixel::Item;
use crate::rng::SampleRng;

/// `HorizontalFlip`: mirror left-right (image and mask).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HorizontalFlip {
    /// Probability of applying (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
}

impl Transform for HorizontalFlip {
    fn p(&self) -> f32 {
        self.p
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        permute(item, Perm::HFlip);
        Ok(())
    }
}

/// `VerticalFlip`: mirror top-bottom (image and mask).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerticalFlip {
    /// Probability of applying (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
}

impl Transform for VerticalFlip {
    fn p(&self) -> f32 {
        self.p
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        permute(item, Perm::VFlip);
        Ok(())
    }
}

/// `RandomRotate90`: rotate by a random number (0–3) of counter-clockwise quarter turns, like
/// `np.rot90`. `[H, W, C]` → `[W, H, C]` for odd turns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomRotate90 {
    /// Probability of applying (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
}

impl Transform for RandomRotate90 {
    fn p(&self) -> f32 {
        self.p
    }
    fn apply(&self, item: &mut Item, rng: &mut SampleRng) -> Result<(), AugmentError> {
        let k = rng.int(0, 3) as u8;
        permute(item, Perm::Rot90(k));
        Ok(())
    }
}

/// `Transpose`: swap rows and columns, `[H, W, C]` → `[W, H, C]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transpose {
    /// Probability of applying (default 0.5).
    #[serde(default = "half")]
    pub p: f32,
}

impl Transform for Transpose {
    fn p(&self) -> f32 {
        self.p
    }
    fn apply(&self, item: &mut Item, _: &mut SampleRng) -> Result<(), AugmentError> {
        permute(item, Perm::Transpose);
        Ok(())
    }
}

/// An index permutation shared by image and mask.
#[derive(Clone, Copy)]
enum Perm {
    HFlip,
    VFlip,
    Transpose,
    Rot90(u8),
}

/// In-place permutations keep the buffer; the others gather into a new one.
fn perm<T: Copy>(v: &mut Vec<T>, d: Dims, p: Perm) {
    match p {
        Perm::HFlip => geo::hflip(v, d),
        Perm::VFlip => geo::vflip(v, d),
        Perm::Rot90(k) if k % 2 == 0 => {
            if k % 4 == 2 {
                geo::rot180(v, d)
            }
        }
        Perm::Rot90(k) => *v = geo::rot90_odd(v, d, k),
        Perm::Transpose => *v = geo::transpose(v, d),
    }
}

fn permute(item: &mut Item, p: Perm) {
    let d = item.dims();
    let swaps = matches!(p, Perm::Transpose) || matches!(p, Perm::Rot90(k) if k % 2 == 1);
    match &mut item.image.data {
        RasterData::U8(v) => perm(v, d, p),
        RasterData::U16(v) => perm(v, d, p),
        RasterData::F32(v) => perm(v, d, p),
    }
    if swaps {
        (item.image.height, item.image.width) = (d.w, d.h);
    }
    if let Some(m) = &mut item.mask {
        perm(
            &mut m.data,
            Dims {
                h: d.h,
                w: d.w,
                c: 1,
            },
            p,
        );
        if swaps {
            (m.height, m.width) = (d.w, d.h);
        }
    }
}
