//! The SegFormer image processor: HF `SegformerImageProcessor` (PIL backend) semantics, turning
//! a sample into the model's `pixel_values` and `labels`.

use raster::{Mask, Raster, RasterData};
use serde::{Deserialize, Serialize};

use crate::AugmentError;
use crate::geometric::Dims;
use crate::photometric::{imagenet_mean, imagenet_std, per_band};
use crate::pil;
use crate::pixel::Pixel;

/// Image resampling used by [`SegformerProcessor`] (masks are always nearest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resample {
    /// Pillow's `NEAREST`.
    Nearest,
    /// Pillow's antialiased `BILINEAR` (HF's default for SegFormer).
    #[default]
    Bilinear,
}

/// HF's `SegformerImageProcessor` settings. `Default` is HF's default (512×512, bilinear,
/// rescale 1/255, ImageNet normalisation, no label reduction).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SegformerProcessor {
    /// Output `(height, width)`; `None` keeps the input size.
    pub size: Option<(usize, usize)>,
    /// Image resampling.
    pub resample: Resample,
    /// Multiply samples by the rescale factor.
    pub do_rescale: bool,
    /// The rescale factor; `None` means `1 / max` of the sample type (1/255 for u8 as in HF,
    /// 1/65535 for u16, 1 for f32).
    /// NOTE: HF always uses 1/255, which would blow 16-bit imagery up to ~257.
    pub rescale_factor: Option<f32>,
    /// Subtract `image_mean` and divide by `image_std`, per band.
    pub do_normalize: bool,
    /// Per-band means (one value, or one per band).
    pub image_mean: Vec<f32>,
    /// Per-band standard deviations (one value, or one per band).
    pub image_std: Vec<f32>,
    /// Label 0 becomes 255 (ignored) and every other label `l` becomes `l - 1` (for datasets
    /// such as ADE20k whose 0 means "other").
    pub do_reduce_labels: bool,
    /// The input bands the model sees, in this order (0-based), picked before anything else
    /// (`data.bands`); `None` takes all. `image_mean`/`image_std` are per selected band.
    /// Not an HF key: HF's processor ignores it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band_indices: Option<Vec<usize>>,
}

impl Default for SegformerProcessor {
    fn default() -> Self {
        Self {
            size: Some((512, 512)),
            resample: Resample::Bilinear,
            do_rescale: true,
            rescale_factor: None,
            do_normalize: true,
            image_mean: imagenet_mean(),
            image_std: imagenet_std(),
            do_reduce_labels: false,
            band_indices: None,
        }
    }
}

/// One processed sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Processed {
    /// The model input, `[C, H, W]` (channels first).
    pub pixel_values: Vec<f32>,
    /// The label map, `[H, W]`, 255 = ignore; `None` when no mask was given.
    pub labels: Option<Vec<u8>>,
    /// `C`.
    pub channels: usize,
    /// `H`.
    pub height: usize,
    /// `W`.
    pub width: usize,
}

impl SegformerProcessor {
    /// Resize, rescale and normalise `image` and resize (and optionally reduce) `mask`.
    ///
    /// # Shapes
    /// `image` `[H, W, C]` (u8, u16 or f32, any `C`), `mask` `[H, W]`
    /// → `pixel_values` `[C, h, w]`, `labels` `[h, w]` with `(h, w) = size` (or `(H, W)`).
    ///
    /// # Errors
    /// [`AugmentError::Shape`] when mask and image sizes differ or a size is 0;
    /// [`AugmentError::Unsupported`] when `image_mean`/`image_std` do not fit the band count.
    pub fn process(&self, image: &Raster, mask: Option<&Mask>) -> Result<Processed, AugmentError> {
        let selected;
        let image = match &self.band_indices {
            None => image,
            Some(bands) => {
                selected = image.select_bands(bands).ok_or_else(|| {
                    AugmentError::Unsupported {
                        transform: "SegformerProcessor",
                        reason: format!(
                            "band selection {bands:?} does not fit an image of {} bands; select 0-based bands below {}",
                            image.bands, image.bands
                        ),
                    }
                })?;
                &selected
            }
        };
        let d = Dims {
            h: image.height,
            w: image.width,
            c: image.bands,
        };
        if image.data.len() != d.h * d.w * d.c || d.c == 0 {
            return Err(AugmentError::Shape(format!(
                "image says {}x{}x{} but holds {} samples",
                d.h,
                d.w,
                d.c,
                image.data.len()
            )));
        }
        if let Some(m) = mask
            && (m.height, m.width) != (d.h, d.w)
        {
            return Err(AugmentError::Shape(format!(
                "image is {}x{} (h x w) but mask is {}x{}",
                d.h, d.w, m.height, m.width
            )));
        }
        let (oh, ow) = self.size.unwrap_or((d.h, d.w));
        if oh == 0 || ow == 0 || d.h == 0 || d.w == 0 {
            return Err(AugmentError::Shape(format!(
                "cannot resize {}x{} to {oh}x{ow}",
                d.h, d.w
            )));
        }
        let (scale, offset) = self.affine(image)?;
        let resized = (oh, ow) != (d.h, d.w);
        let pixel_values = match (&image.data, self.resample) {
            (RasterData::U8(v), Resample::Bilinear) if resized => {
                to_chw_u8(&pil::bilinear_u8(v, d, oh, ow), &scale, &offset)
            }
            (RasterData::U8(v), Resample::Nearest) if resized => {
                to_chw_u8(&pil::nearest(v, d, oh, ow), &scale, &offset)
            }
            (RasterData::U8(v), _) => to_chw_u8(v, &scale, &offset),
            (RasterData::U16(v), _) if !resized => to_chw(v, &scale, &offset),
            (RasterData::F32(v), _) if !resized => to_chw(v, &scale, &offset),
            (data, r) => {
                let f = match data {
                    RasterData::U16(v) => v.iter().map(|&s| s as f32).collect(),
                    RasterData::F32(v) => v.clone(),
                    RasterData::U8(_) => unreachable!("u8 handled above"),
                };
                let out = match r {
                    Resample::Bilinear => pil::bilinear_f32(&f, d, oh, ow),
                    Resample::Nearest => pil::nearest(&f, d, oh, ow),
                };
                to_chw(&out, &scale, &offset)
            }
        };
        let labels = mask.map(|m| {
            let reduced;
            let data = if self.do_reduce_labels {
                // HF: 0 -> 255, l -> l - 1, and 255 stays 255.
                reduced = m
                    .data
                    .iter()
                    .map(|&l| if l == 0 || l == 255 { 255 } else { l - 1 })
                    .collect::<Vec<u8>>();
                &reduced
            } else {
                &m.data
            };
            if resized {
                pil::nearest(
                    data,
                    Dims {
                        h: d.h,
                        w: d.w,
                        c: 1,
                    },
                    oh,
                    ow,
                )
            } else {
                data.clone()
            }
        });
        Ok(Processed {
            pixel_values,
            labels,
            channels: d.c,
            height: oh,
            width: ow,
        })
    }

    /// The bands the model sees for an image of `stored` bands ([`Self::band_indices`]).
    pub fn output_bands(&self, stored: usize) -> usize {
        self.band_indices.as_ref().map_or(stored, Vec::len)
    }

    /// The per-band `x * scale + offset` that rescaling and normalising amount to.
    ///
    /// NOTE: in f64, where HF computes `(x * rescale - mean) / std` in f32: folded into one
    /// multiply-add, f32 would lose up to ~1e-6 to cancellation when `mean / std` is large
    /// (16-bit imagery with narrow bands), f64 keeps the result correctly rounded.
    fn affine(&self, image: &Raster) -> Result<(Vec<f64>, Vec<f64>), AugmentError> {
        let c = image.bands;
        let rescale = if self.do_rescale {
            self.rescale_factor
                .unwrap_or(1.0 / image.kind().max_value()) as f64
        } else {
            1.0
        };
        if !self.do_normalize {
            return Ok((vec![rescale; c], vec![0.0; c]));
        }
        let (mean, std) = per_band("SegformerProcessor", &self.image_mean, &self.image_std, c)?;
        Ok((
            std.iter().map(|&s| rescale / s as f64).collect(),
            mean.iter()
                .zip(&std)
                .map(|(&m, &s)| -(m as f64) / s as f64)
                .collect(),
        ))
    }
}

/// `[H, W, C]` u8 → `[C, H, W]` f32 through one 256-entry table per band.
fn to_chw_u8(v: &[u8], scale: &[f64], offset: &[f64]) -> Vec<f32> {
    let c = scale.len();
    let luts: Vec<[f32; 256]> = (0..c)
        .map(|b| std::array::from_fn(|i| (i as f64 * scale[b] + offset[b]) as f32))
        .collect();
    let hw = v.len() / c;
    let mut out = vec![0f32; v.len()];
    if c == 3 {
        let (r, rest) = out.split_at_mut(hw);
        let (g, b) = rest.split_at_mut(hw);
        for (i, px) in v.as_chunks::<3>().0.iter().enumerate() {
            r[i] = luts[0][px[0] as usize];
            g[i] = luts[1][px[1] as usize];
            b[i] = luts[2][px[2] as usize];
        }
    } else {
        for (i, px) in v.chunks_exact(c).enumerate() {
            for (b, &s) in px.iter().enumerate() {
                out[b * hw + i] = luts[b][s as usize];
            }
        }
    }
    out
}

/// `[H, W, C]` samples → `[C, H, W]` f32 with `x * scale + offset` per band (in f64), one output plane
/// at a time so writes are sequential.
fn to_chw<T: Pixel>(v: &[T], scale: &[f64], offset: &[f64]) -> Vec<f32> {
    fn fixed<T: Pixel, const N: usize>(v: &[T], scale: &[f64], offset: &[f64]) -> Vec<f32> {
        let px = v.as_chunks::<N>().0;
        let mut out = vec![0f32; v.len()];
        for (b, plane) in out.chunks_exact_mut(px.len()).enumerate() {
            let (s, o) = (scale[b], offset[b]);
            for (dst, p) in plane.iter_mut().zip(px) {
                *dst = (p[b].to_f32() as f64 * s + o) as f32;
            }
        }
        out
    }
    match scale.len() {
        1 => fixed::<T, 1>(v, scale, offset),
        2 => fixed::<T, 2>(v, scale, offset),
        3 => fixed::<T, 3>(v, scale, offset),
        4 => fixed::<T, 4>(v, scale, offset),
        c => {
            let hw = v.len() / c;
            let mut out = vec![0f32; v.len()];
            for (i, px) in v.chunks_exact(c).enumerate() {
                for (b, s) in px.iter().enumerate() {
                    out[b * hw + i] = (s.to_f32() as f64 * scale[b] + offset[b]) as f32;
                }
            }
            out
        }
    }
}

/// A batch of processed samples, ready to become tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// `[N, C, H, W]`.
    pub pixel_values: Vec<f32>,
    /// `[N, H, W]` as i64 (HF's label dtype), 255 = ignore; `None` when the samples have no labels.
    pub labels: Option<Vec<i64>>,
    /// `N`.
    pub n: usize,
    /// `C`.
    pub c: usize,
    /// `H`.
    pub h: usize,
    /// `W`.
    pub w: usize,
}

/// Stack processed samples into one batch.
///
/// # Shapes
/// `N` × (`[C, H, W]`, `[H, W]`) → `[N, C, H, W]`, `[N, H, W]`.
///
/// # Errors
/// [`AugmentError::Shape`] when the batch is empty, sizes differ, or only some samples have labels.
pub fn collate(items: &[Processed]) -> Result<Batch, AugmentError> {
    let first = items
        .first()
        .ok_or_else(|| AugmentError::Shape("cannot collate an empty batch".into()))?;
    let (c, h, w) = (first.channels, first.height, first.width);
    let with_labels = first.labels.is_some();
    let mut pixel_values = Vec::with_capacity(items.len() * c * h * w);
    let mut labels = with_labels.then(|| Vec::with_capacity(items.len() * h * w));
    for (i, p) in items.iter().enumerate() {
        if (p.channels, p.height, p.width) != (c, h, w) {
            return Err(AugmentError::Shape(format!(
                "batch item {i} is {}x{}x{} (c x h x w) but item 0 is {c}x{h}x{w}; give the processor a fixed `size`",
                p.channels, p.height, p.width
            )));
        }
        pixel_values.extend_from_slice(&p.pixel_values);
        match (&mut labels, &p.labels) {
            (Some(all), Some(l)) => all.extend(l.iter().map(|&v| v as i64)),
            (None, None) => {}
            _ => {
                return Err(AugmentError::Shape(format!(
                    "batch item {i} {} labels but item 0 {}",
                    if p.labels.is_some() { "has" } else { "lacks" },
                    if with_labels { "has" } else { "lacks" }
                )));
            }
        }
    }
    Ok(Batch {
        pixel_values,
        labels,
        n: items.len(),
        c,
        h,
        w,
    })
}
