//! HF's `preprocessor_config.json` (`SegformerImageProcessor` settings) and segfit's
//! [`SegformerProcessor`]: read from an HF model directory given as `--model`, written by
//! `segfit export` so that HF preprocesses like segfit.

use std::path::Path;

use anyhow::{Context, Result, bail};
use augment::{Resample, SegformerProcessor};
use serde_json::{Map, Value};
use tiles::SampleKind;

/// HF's `preprocessor_config.json` file name.
pub const HF_PREPROCESSOR_CONFIG: &str = "preprocessor_config.json";

/// PIL's resampling codes, as HF stores them in `resample`.
const PIL_NEAREST: u64 = 0;
const PIL_BILINEAR: u64 = 2;

/// HF keys that carry no preprocessing.
const HF_METADATA_KEYS: [&str; 3] = [
    "image_processor_type",
    "feature_extractor_type",
    "processor_class",
];

/// Reads an HF `preprocessor_config.json` as a [`SegformerProcessor`], with HF's defaults for
/// missing keys (`do_resize`, 512×512, bilinear, rescale 1/255, ImageNet mean/std, no label
/// reduction). Keys `SegformerImageProcessor` does not use are ignored with a note.
pub fn read_hf_preprocessor_config(path: &Path) -> Result<SegformerProcessor> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON; fix or delete the file", path.display()))?;
    let Value::Object(map) = json else {
        bail!(
            "{}: expected a JSON object of SegformerImageProcessor settings, found {json}",
            path.display()
        );
    };
    let (p, ignored) = processor_from_hf(&map).with_context(|| format!("{}", path.display()))?;
    if !ignored.is_empty() {
        eprintln!(
            "note: {}: ignoring keys SegformerImageProcessor does not use: {}",
            path.display(),
            ignored.join(", ")
        );
    }
    Ok(p)
}

/// The processor the HF keys describe, and the keys it ignored.
fn processor_from_hf(map: &Map<String, Value>) -> Result<(SegformerProcessor, Vec<String>)> {
    let defaults = SegformerProcessor::default();
    for key in ["image_processor_type", "feature_extractor_type"] {
        if let Some(t) = map.get(key)
            && !t.as_str().is_some_and(|t| t.starts_with("Segformer"))
        {
            bail!(
                "{key} is {t}; segfit reads SegformerImageProcessor settings only; \
                 delete the file to use HF's defaults"
            );
        }
    }
    let bool_key = |key: &str, default: bool| -> Result<bool> {
        match map.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .with_context(|| format!("{key} is {v}; expected true or false")),
        }
    };
    let do_resize = bool_key("do_resize", true)?;
    let size = match map.get("size") {
        None => (512, 512),
        Some(v) => hf_size(v)?,
    };
    let resample = match map.get("resample") {
        None => Resample::Bilinear,
        Some(v) => match v.as_u64() {
            Some(PIL_NEAREST) => Resample::Nearest,
            Some(PIL_BILINEAR) => Resample::Bilinear,
            _ => bail!(
                "resample is {v}; segfit resizes with PIL's NEAREST ({PIL_NEAREST}) or BILINEAR ({PIL_BILINEAR}) only; set one of them"
            ),
        },
    };
    let rescale_factor = match map.get("rescale_factor") {
        None => 1.0 / 255.0,
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite())
            .with_context(|| format!("rescale_factor is {v}; expected a number such as 1/255"))?,
    };
    let floats = |key: &str, default: &[f32]| -> Result<Vec<f32>> {
        let bad = |v: &Value| format!("{key} is {v}; expected a number or a list of numbers");
        match map.get(key) {
            None => Ok(default.to_vec()),
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32).with_context(|| bad(x)))
                .collect(),
            Some(v) => v.as_f64().map(|f| vec![f as f32]).with_context(|| bad(v)),
        }
    };
    let image_mean = floats("image_mean", &defaults.image_mean)?;
    let image_std = floats("image_std", &defaults.image_std)?;
    if let Some(s) = image_std.iter().find(|s| !(**s > 0.0 && s.is_finite())) {
        bail!("image_std holds {s}; every standard deviation must be positive");
    }
    // HF's `from_dict` lets the legacy `reduce_labels` override `do_reduce_labels`.
    let do_reduce_labels = match map.get("reduce_labels") {
        Some(_) => bool_key("reduce_labels", false)?,
        None => bool_key("do_reduce_labels", false)?,
    };
    let processor = SegformerProcessor {
        size: do_resize.then_some(size),
        resample,
        do_rescale: bool_key("do_rescale", true)?,
        rescale_factor: Some(rescale_factor as f32),
        do_normalize: bool_key("do_normalize", true)?,
        image_mean,
        image_std,
        do_reduce_labels,
        // segfit's own key (`data.bands`), written by `segfit export`.
        band_indices: match map.get("band_indices") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                serde_json::from_value::<Vec<usize>>(v.clone())
                    .ok()
                    .with_context(|| {
                        format!("band_indices is {v}; expected a list of 0-based band numbers")
                    })?,
            ),
        },
    };
    const USED: [&str; 12] = [
        "band_indices",
        "do_resize",
        "size",
        "resample",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_reduce_labels",
        "reduce_labels",
        "image_processor_type",
    ];
    let ignored = map
        .keys()
        .filter(|k| !USED.contains(&k.as_str()) && !HF_METADATA_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok((processor, ignored))
}

/// HF's `size`: `{"height": H, "width": W}`, or one number for a square (older configs).
fn hf_size(v: &Value) -> Result<(usize, usize)> {
    let side = |x: Option<&Value>| x.and_then(Value::as_u64).filter(|&n| n > 0);
    let hw = match v {
        Value::Object(m) => side(m.get("height")).zip(side(m.get("width"))),
        n => side(Some(n)).map(|n| (n, n)),
    };
    hw.map(|(h, w)| (h as usize, w as usize)).with_context(|| {
        format!(
            "size is {v}; SegformerImageProcessor takes {{\"height\": H, \"width\": W}} (or one number for a square)"
        )
    })
}

/// HF `SegformerImageProcessor` settings under which `((x * rescale_factor) - mean) / std`
/// (after resizing to `size`) gives `p`'s pixel values for images of `kind`.
pub fn hf_preprocessor_config(p: &SegformerProcessor, kind: SampleKind) -> Value {
    // `p.size` is `None` only for an HF source with `do_resize: false`; the size is then unused.
    let (h, w) = p.size.unwrap_or((512, 512));
    let rescale_factor = match p.rescale_factor {
        Some(f) => f as f64,
        None => 1.0 / kind.max_value() as f64,
    };
    let mut json = serde_json::json!({
        "image_processor_type": "SegformerImageProcessor",
        "do_resize": p.size.is_some(),
        "size": { "height": h, "width": w },
        "resample": match p.resample {
            Resample::Nearest => PIL_NEAREST,
            Resample::Bilinear => PIL_BILINEAR,
        },
        "do_rescale": p.do_rescale,
        "rescale_factor": rescale_factor,
        "do_normalize": p.do_normalize,
        "image_mean": p.image_mean,
        "image_std": p.image_std,
        "do_reduce_labels": p.do_reduce_labels,
    });
    if let Some(b) = &p.band_indices {
        // segfit's own key: HF's processor ignores it, segfit selects these bands.
        json["band_indices"] = serde_json::json!(b);
    }
    json
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tiles::{Raster, RasterData};

    /// HF's formula, `((x * rescale_factor) - mean) / std`, in f64.
    pub(crate) fn hf_formula(x: f64, rescale: f64, mean: f64, std: f64) -> f64 {
        (x * rescale - mean) / std
    }

    /// segfit's pixel values against HF's formula applied with the keys `export` writes.
    fn check_export(p: &SegformerProcessor, image: &Raster) {
        let json = hf_preprocessor_config(p, image.kind());
        let f = |k: &str| json[k].as_f64().unwrap();
        let list = |k: &str| -> Vec<f64> {
            let v: Vec<f64> = serde_json::from_value(json[k].clone()).unwrap();
            (0..image.bands).map(|b| v[b % v.len()]).collect()
        };
        let (rescale, mean, std) = (f("rescale_factor"), list("image_mean"), list("image_std"));
        assert_eq!(json["do_rescale"], true);
        let samples: Vec<f64> = match &image.data {
            RasterData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            RasterData::U16(v) => v.iter().map(|&x| x as f64).collect(),
            RasterData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        };
        let out = p.process(image, None).unwrap();
        let (c, hw) = (image.bands, image.width * image.height);
        for (i, &x) in samples.iter().enumerate() {
            let (px, b) = (i / c, i % c);
            let want = hf_formula(x, rescale, mean[b], std[b]);
            let got = out.pixel_values[b * hw + px] as f64;
            assert!(
                // f32 output: half an ulp is 9.5e-7 at 16, so 1e-6 of the value above 1.
                (got - want).abs() < 1e-6 * want.abs().max(1.0),
                "{:?} sample {i}: segfit {got}, HF {want}",
                image.kind()
            );
        }
    }

    #[test]
    fn export_rescales_by_the_sample_type_so_hf_gives_segfits_values() {
        let p = SegformerProcessor {
            size: None,
            image_mean: vec![0.3, 0.4, 0.2, 0.5],
            image_std: vec![0.1, 0.2, 0.15, 0.05],
            ..Default::default()
        };
        let u16s: Vec<u16> = (0..4 * 5 * 4).map(|i| (i * 829 % 65536) as u16).collect();
        check_export(&p, &Raster::new(5, 4, 4, RasterData::U16(u16s)).unwrap());
        let u8s: Vec<u8> = (0..4 * 5 * 4).map(|i| (i * 37 % 256) as u8).collect();
        check_export(&p, &Raster::new(5, 4, 4, RasterData::U8(u8s)).unwrap());
        let f32s: Vec<f32> = (0..4 * 5 * 4).map(|i| i as f32 * 0.0123 - 0.2).collect();
        check_export(&p, &Raster::new(5, 4, 4, RasterData::F32(f32s)).unwrap());
        let rf = |k| {
            hf_preprocessor_config(&p, k)["rescale_factor"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(
            [rf(SampleKind::U8), rf(SampleKind::U16), rf(SampleKind::F32)],
            [1.0 / 255.0, 1.0 / 65535.0, 1.0]
        );
    }
}
