//! Pretrained encoders for any band count: the first patch-embedding kernel of a checkpoint
//! trained on `I` bands (3 for every ImageNet MiT) adapted to a model taking `C`.

use std::fmt;

use burn::tensor::TensorData;

/// The checkpoint key (5.x names) of the only tensor whose shape depends on the band count.
pub(crate) const INPUT_KERNEL: &str = "segformer.stages.0.patch_embeddings.proj.weight";

/// How a pretrained first kernel `[O, I, k, k]` becomes `[O, C, k, k]` when the dataset has
/// `C != I` bands. Configs name it `repeat`, `mean` or `random` (serde, lowercase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputAdapt {
    /// timm's `adapt_input_conv`: band `j` gets checkpoint kernel `j mod I` (R, G, B, R, …),
    /// all scaled by `I / C` so a pixel whose bands are equal gives the same response; for
    /// `C = 1` the kernels are summed.
    #[default]
    Repeat,
    /// Every band gets the mean of the checkpoint's kernels, scaled by `I / C`.
    Mean,
    /// The kernel is freshly initialised (everything else still loads).
    Random,
}

impl InputAdapt {
    /// The config name: `repeat`, `mean` or `random`.
    pub fn name(self) -> &'static str {
        match self {
            InputAdapt::Repeat => "repeat",
            InputAdapt::Mean => "mean",
            InputAdapt::Random => "random",
        }
    }

    /// The adapted kernel `[O, bands, k, k]` from a checkpoint kernel `[O, I, k, k]`
    /// (`None` for [`InputAdapt::Random`], which keeps the model's fresh one).
    pub fn apply(self, kernel: &TensorData, bands: usize) -> Option<TensorData> {
        let [o, i, kh, kw] = kernel.shape[..] else {
            return None;
        };
        let w: Vec<f32> = kernel.clone().convert::<f32>().into_vec().ok()?;
        let plane = kh * kw;
        let scale = i as f32 / bands as f32;
        // w[o][i] as a slice of kh·kw values.
        let at = |oi: usize, ii: usize| &w[(oi * i + ii) * plane..(oi * i + ii + 1) * plane];
        let mut out = Vec::with_capacity(o * bands * plane);
        for oi in 0..o {
            for j in 0..bands {
                let band: Vec<f32> = match self {
                    InputAdapt::Random => return None,
                    // timm sums the kernels for a single band (the same as cycling and
                    // scaling when I = 1).
                    InputAdapt::Repeat if bands == 1 => (0..plane)
                        .map(|p| (0..i).map(|ii| at(oi, ii)[p]).sum())
                        .collect(),
                    InputAdapt::Repeat => at(oi, j % i).iter().map(|v| v * scale).collect(),
                    InputAdapt::Mean => (0..plane)
                        .map(|p| (0..i).map(|ii| at(oi, ii)[p]).sum::<f32>() / i as f32 * scale)
                        .collect(),
                };
                out.extend(band);
            }
        }
        Some(TensorData::new(out, [o, bands, kh, kw]))
    }
}

/// One adapted tensor, as the load report lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Adapted {
    /// The (5.x) key.
    pub key: String,
    /// The rule applied.
    pub rule: InputAdapt,
    /// Bands of the checkpoint's kernel.
    pub from_bands: usize,
    /// Bands of the model's kernel.
    pub to_bands: usize,
}

impl fmt::Display for Adapted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (i, c) = (self.from_bands, self.to_bands);
        let how = match self.rule {
            InputAdapt::Repeat if c == 1 => "the checkpoint kernels summed".to_string(),
            InputAdapt::Repeat => {
                format!("band j gets checkpoint band j mod {i}, scaled by {i}/{c}")
            }
            InputAdapt::Mean => format!("every band gets the mean kernel, scaled by {i}/{c}"),
            InputAdapt::Random => "freshly initialised".to_string(),
        };
        write!(
            f,
            "{}: {i} -> {c} bands, rule \"{}\" ({how})",
            self.key,
            self.rule.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_and_mean_follow_timm() {
        // O = 1, I = 3, 1×1 kernels [1, 2, 3].
        let k = TensorData::new(vec![1f32, 2.0, 3.0], [1, 3, 1, 1]);
        let get = |a: InputAdapt, c| a.apply(&k, c).unwrap().into_vec::<f32>().unwrap();
        assert_eq!(get(InputAdapt::Repeat, 4), [0.75, 1.5, 2.25, 0.75]);
        assert_eq!(get(InputAdapt::Repeat, 1), [6.0]);
        assert_eq!(get(InputAdapt::Mean, 2), [3.0, 3.0]);
        assert!(InputAdapt::Random.apply(&k, 4).is_none());
    }
}
