//! HF model directories in and out: `config.json` + `model.safetensors` / `pytorch_model.bin`.
//!
//! Both naming schemes load (SegFormer's original one, used by every Hub checkpoint, and
//! the one transformers ≥ 5 writes); we save the original names, which transformers 4 and 5
//! both read.

mod adapt;
mod files;
mod names;
mod torch_pickle;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use burn::module::{Param, RunningState};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};

use crate::config::{ConfigError, SegformerConfig};
use crate::model::Segformer;
use names::{TensorVisitor, walk};

pub use adapt::{Adapted, InputAdapt};

/// Why a model directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `config.json` is invalid.
    #[error("{}: {source}", path.display())]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        source: ConfigError,
    },
    /// The directory has neither `model.safetensors` nor `pytorch_model.bin`.
    #[error(
        "{}: no model.safetensors or pytorch_model.bin found; point at an HF model directory",
        dir.display()
    )]
    NoWeights {
        /// The directory searched.
        dir: PathBuf,
    },
    /// A weights file is corrupt or uses an unsupported format or dtype.
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// An encoder tensor the model needs is not in the checkpoint.
    #[error(
        "{}: encoder tensor {key} is missing; is this a SegFormer/MiT checkpoint matching config.json?",
        path.display()
    )]
    Missing {
        /// The weights file.
        path: PathBuf,
        /// The (5.x) key.
        key: String,
    },
    /// An encoder tensor has a different shape in the checkpoint than in the model.
    #[error(
        "{}: tensor {key} has shape {checkpoint:?} in the checkpoint but {model:?} in the model; make the config (hidden_sizes, num_channels, …) match the checkpoint",
        path.display()
    )]
    ShapeMismatch {
        /// The weights file.
        path: PathBuf,
        /// The (5.x) key.
        key: String,
        /// The shape in the file.
        checkpoint: Vec<usize>,
        /// The shape the model expects.
        model: Vec<usize>,
    },
}

/// What happened to each tensor while loading a checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Keys (5.x names) read from the checkpoint.
    pub loaded: Vec<String>,
    /// Decode-head keys absent from the checkpoint, freshly initialised.
    pub initialized: Vec<String>,
    /// Checkpoint keys the model has no use for (e.g. an ImageNet `classifier.*`).
    pub unused: Vec<String>,
    /// Decode-head keys whose checkpoint shape differs: `(key, checkpoint, model)`;
    /// these are freshly initialised, like HF's `ignore_mismatched_sizes`.
    pub mismatched: Vec<(String, Vec<usize>, Vec<usize>)>,
    /// Encoder tensors adapted to the model's band count (the first patch-embedding kernel,
    /// see [`InputAdapt`]); also listed in `loaded` unless the rule is `random`.
    pub adapted: Vec<Adapted>,
}

impl LoadReport {
    /// True when every model tensor came from the checkpoint and nothing was left over.
    pub fn is_exact(&self) -> bool {
        self.initialized.is_empty() && self.unused.is_empty() && self.mismatched.is_empty()
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "loaded {} tensors from the checkpoint",
            self.loaded.len()
        )?;
        if !self.initialized.is_empty() {
            writeln!(
                f,
                "newly initialised (not in the checkpoint): {}",
                self.initialized.len()
            )?;
            for key in &self.initialized {
                writeln!(f, "  {key}")?;
            }
        }
        if !self.mismatched.is_empty() {
            writeln!(
                f,
                "newly initialised (shape mismatch): {}",
                self.mismatched.len()
            )?;
            for (key, checkpoint, model) in &self.mismatched {
                writeln!(f, "  {key}: checkpoint {checkpoint:?}, model {model:?}")?;
            }
        }
        for a in &self.adapted {
            writeln!(f, "adapted to the dataset's bands: {a}")?;
        }
        if !self.unused.is_empty() {
            writeln!(f, "unused checkpoint tensors: {}", self.unused.len())?;
            for key in &self.unused {
                writeln!(f, "  {key}")?;
            }
        }
        Ok(())
    }
}

/// Keys whose absence or shape mismatch means "re-initialise" rather than "error".
fn is_head(key: &str) -> bool {
    key.starts_with("decode_head.")
}

/// Copies checkpoint tensors into the model.
struct Loader<'a, B: Backend> {
    source: HashMap<String, TensorData>,
    path: &'a Path,
    device: B::Device,
    report: LoadReport,
    error: Option<WeightsError>,
    /// A key to leave freshly initialised (`InputAdapt::Random`).
    keep_fresh: Option<&'static str>,
}

impl<B: Backend> Loader<'_, B> {
    /// The checkpoint tensor for `key` if it fits `model_shape` (PyTorch layout).
    fn take(&mut self, key: &str, model_shape: Vec<usize>) -> Option<TensorData> {
        if self.error.is_some() || self.keep_fresh == Some(key) {
            return None;
        }
        let Some(data) = self.source.remove(key) else {
            if is_head(key) {
                self.report.initialized.push(key.to_string());
            } else {
                self.error = Some(WeightsError::Missing {
                    path: self.path.to_path_buf(),
                    key: key.to_string(),
                });
            }
            return None;
        };
        let checkpoint = data.shape.to_vec();
        if checkpoint != model_shape {
            if is_head(key) {
                self.report
                    .mismatched
                    .push((key.to_string(), checkpoint, model_shape));
            } else {
                self.error = Some(WeightsError::ShapeMismatch {
                    path: self.path.to_path_buf(),
                    key: key.to_string(),
                    checkpoint,
                    model: model_shape,
                });
            }
            return None;
        }
        self.report.loaded.push(key.to_string());
        Some(data.convert::<f32>())
    }
}

impl<B: Backend> TensorVisitor<B> for Loader<'_, B> {
    fn param<const D: usize>(
        &mut self,
        key: &str,
        param: &mut Param<Tensor<B, D>>,
        transposed: bool,
    ) {
        // The shape without sampling the initial values: a parameter the checkpoint replaces
        // is never initialised (sampling every weight was ~70 ms of each model load).
        let mut shape = param.lazy_shape().to_vec();
        if transposed {
            shape.reverse();
        }
        let Some(data) = self.take(key, shape) else {
            // Kept as built (a fresh decode head, `InputAdapt::Random`): initialised here, in
            // walk order, not at its first use.
            let _ = param.shape();
            return;
        };
        let tensor = match transposed.then(|| row_major_transpose(&data)).flatten() {
            Some(rows) => Tensor::<B, D>::from_data(rows, &self.device),
            None if transposed => Tensor::<B, D>::from_data(data, &self.device).transpose(),
            None => Tensor::<B, D>::from_data(data, &self.device),
        };
        *param = Param::initialized(param.id, tensor.require_grad());
    }

    fn buffer(&mut self, key: &str, state: &mut RunningState<Tensor<B, 1>>) {
        let shape = state.value().dims().to_vec();
        if let Some(data) = self.take(key, shape) {
            *state = RunningState::new(Tensor::from_data(data, &self.device));
        }
    }
}

/// A checkpoint's linear weight, PyTorch's row-major `[out, in]`, as burn's `[in, out]`, stored
/// row-major. A transposed view of the checkpoint's storage would hold the same values, but the
/// fused kernels would copy it back to row-major on every forward (a small-window scene
/// prediction spent 6 % of its time doing that); this copies once, at load.
fn row_major_transpose(data: &TensorData) -> Option<TensorData> {
    let &[rows, cols] = data.shape.as_slice() else {
        return None;
    };
    // `take` converts to f32; anything else keeps the transposed view.
    let values = data.as_slice::<f32>().ok()?;
    Some(TensorData::new(
        crate::fused::transpose_batched(values, 1, rows, cols),
        [cols, rows],
    ))
}

/// Copies the model's tensors out in PyTorch layout.
struct Exporter {
    out: Vec<(String, TensorData)>,
}

impl<B: Backend> TensorVisitor<B> for Exporter {
    fn param<const D: usize>(
        &mut self,
        key: &str,
        param: &mut Param<Tensor<B, D>>,
        transposed: bool,
    ) {
        let tensor = param.val();
        let tensor = if transposed {
            tensor.transpose()
        } else {
            tensor
        };
        self.out
            .push((key.to_string(), tensor.into_data().convert::<f32>()));
    }

    fn buffer(&mut self, key: &str, state: &mut RunningState<Tensor<B, 1>>) {
        self.out.push((
            key.to_string(),
            state.value_sync().into_data().convert::<f32>(),
        ));
    }
}

/// Copies the gradients out in PyTorch layout.
struct GradExporter<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: Vec<(String, TensorData)>,
}

impl<B: AutodiffBackend> TensorVisitor<B> for GradExporter<'_, B> {
    fn param<const D: usize>(
        &mut self,
        key: &str,
        param: &mut Param<Tensor<B, D>>,
        transposed: bool,
    ) {
        let tensor = param.val();
        let grad = tensor
            .grad(self.grads)
            .unwrap_or_else(|| tensor.inner().zeros_like());
        let grad = if transposed { grad.transpose() } else { grad };
        self.out
            .push((key.to_string(), grad.into_data().convert::<f32>()));
    }

    fn buffer(&mut self, _key: &str, _state: &mut RunningState<Tensor<B, 1>>) {}
}

/// Every parameter and BatchNorm running statistic, under transformers ≥ 5 names
/// (`segformer.stages.0.blocks.0.attention.q_proj.weight`, …), in PyTorch layout (linear
/// weights `[out, in]`) and f32.
pub fn hf_state_dict<B: Backend>(model: &Segformer<B>) -> Vec<(String, TensorData)> {
    let mut exporter = Exporter { out: Vec::new() };
    walk(&mut model.clone(), &mut exporter);
    exporter.out
}

/// [`hf_state_dict`] under SegFormer's original names
/// (`segformer.encoder.block.0.0.attention.self.query.weight`, …).
pub fn hf_state_dict_original<B: Backend>(model: &Segformer<B>) -> Vec<(String, TensorData)> {
    hf_state_dict(model)
        .into_iter()
        .map(|(key, data)| (names::to_original(&key), data))
        .collect()
}

/// The gradient of every parameter under its transformers ≥ 5 name, in PyTorch layout
/// (a parameter that received no gradient reports zeros).
pub fn hf_gradients<B: AutodiffBackend>(
    model: &Segformer<B>,
    grads: &B::Gradients,
) -> Vec<(String, TensorData)> {
    let mut exporter = GradExporter {
        grads,
        out: Vec::new(),
    };
    walk(&mut model.clone(), &mut exporter);
    exporter.out
}

/// Reads `dir/config.json`.
pub fn read_config(dir: &Path) -> Result<SegformerConfig, WeightsError> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|source| WeightsError::Io {
        path: path.clone(),
        source,
    })?;
    SegformerConfig::from_json_str(&text).map_err(|source| WeightsError::Config { path, source })
}

/// Reads every tensor of `dir/model.safetensors` (preferred) or `dir/pytorch_model.bin`,
/// keys normalised to the 5.x names.
fn read_checkpoint(dir: &Path) -> Result<(PathBuf, HashMap<String, TensorData>), WeightsError> {
    let safetensors = dir.join("model.safetensors");
    let bin = dir.join("pytorch_model.bin");
    let (path, tensors) = if safetensors.is_file() {
        let t = files::read_safetensors(&safetensors)?;
        (safetensors, t)
    } else if bin.is_file() {
        let t = files::read_pytorch(&bin)?;
        (bin, t)
    } else {
        return Err(WeightsError::NoWeights {
            dir: dir.to_path_buf(),
        });
    };
    let tensors = tensors
        .into_iter()
        .map(|(key, data)| (names::to_current(&key), data))
        .collect();
    Ok((path, tensors))
}

/// Loads an HF model directory with its own `config.json`.
///
/// Encoder tensors must all be present with the right shape; decode-head tensors that are
/// missing or mis-shaped are freshly initialised and listed in the report.
pub fn load_hf_dir<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(Segformer<B>, LoadReport), WeightsError> {
    let config = read_config(dir)?;
    load_pretrained(dir, &config, device)
}

/// Loads the weights of `dir` into a model built from `config` — e.g. the ImageNet encoder
/// `nvidia/mit-b0` into a 2-class segmentation model. The encoder comes from the
/// checkpoint; the decode head is kept where it fits and freshly initialised where it is
/// absent or its shape differs (another `num_labels`), as the report lists. A model with
/// another band count than the checkpoint gets its first kernel adapted by
/// [`InputAdapt::Repeat`] (see [`load_pretrained_adapted`]).
pub fn load_pretrained<B: Backend>(
    dir: &Path,
    config: &SegformerConfig,
    device: &B::Device,
) -> Result<(Segformer<B>, LoadReport), WeightsError> {
    load_pretrained_adapted(dir, config, InputAdapt::default(), device)
}

/// [`load_pretrained`] with the rule that adapts the first patch-embedding kernel when
/// `config.num_channels` differs from the checkpoint's bands (e.g. an RGB `nvidia/mit-b0`
/// for 4-band Sentinel-2 tiles); the report lists the adapted tensor and the rule.
pub fn load_pretrained_adapted<B: Backend>(
    dir: &Path,
    config: &SegformerConfig,
    adapt: InputAdapt,
    device: &B::Device,
) -> Result<(Segformer<B>, LoadReport), WeightsError> {
    let mut model = config
        .init::<B>(device)
        .map_err(|source| WeightsError::Config {
            path: dir.join("config.json"),
            source,
        })?;
    let (path, mut source) = read_checkpoint(dir)?;
    let adapted = adapt_input_kernel(&mut source, config.num_channels, adapt);
    let mut loader = Loader::<B> {
        source,
        path: &path,
        device: device.clone(),
        report: LoadReport::default(),
        error: None,
        keep_fresh: None,
    };
    if let Some(a) = &adapted
        && a.rule == InputAdapt::Random
    {
        loader.keep_fresh = Some(adapt::INPUT_KERNEL);
    }
    walk(&mut model, &mut loader);
    if let Some(error) = loader.error {
        return Err(error);
    }
    let mut report = loader.report;
    report.adapted.extend(adapted);
    // PyTorch's BatchNorm step counter does not affect momentum-0.1 BatchNorm.
    loader
        .source
        .remove("decode_head.batch_norm.num_batches_tracked");
    report.unused = loader.source.into_keys().collect();
    report.unused.sort();
    Ok((model, report))
}

/// Replaces the checkpoint's first kernel by its adaptation to `bands` (removes it for
/// `Random`) when its band count differs; says what was done.
fn adapt_input_kernel(
    source: &mut HashMap<String, TensorData>,
    bands: usize,
    rule: InputAdapt,
) -> Option<Adapted> {
    let kernel = source.get(adapt::INPUT_KERNEL)?;
    let from_bands = *kernel.shape.get(1)?;
    if kernel.shape.len() != 4 || from_bands == bands {
        return None;
    }
    match rule.apply(kernel, bands) {
        Some(new) => {
            source.insert(adapt::INPUT_KERNEL.to_string(), new);
        }
        None => {
            source.remove(adapt::INPUT_KERNEL);
        }
    }
    Some(Adapted {
        key: adapt::INPUT_KERNEL.to_string(),
        rule,
        from_bands,
        to_bands: bands,
    })
}

/// Writes `dir/config.json` and `dir/model.safetensors` (original key names, f32),
/// each atomically; creates `dir` if needed.
pub fn save_hf_dir<B: Backend>(model: &Segformer<B>, dir: &Path) -> Result<(), WeightsError> {
    std::fs::create_dir_all(dir).map_err(|source| WeightsError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut tensors = hf_state_dict_original(model);
    // transformers expects the counter; we do not track it.
    tensors.push((
        "decode_head.batch_norm.num_batches_tracked".to_string(),
        TensorData::new(vec![0i64], Vec::<usize>::new()),
    ));
    let bytes = files::safetensors_bytes(&tensors)?;
    files::write_atomic(&dir.join("model.safetensors"), &bytes)?;
    let config = model.config().to_json_string();
    files::write_atomic(&dir.join("config.json"), config.as_bytes())
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    /// Reports, for every linear weight, whether burn-flex stores it row-major and whether its
    /// values are the checkpoint's `[out, in]` matrix transposed.
    struct LinearLayout {
        checkpoint: HashMap<String, TensorData>,
        seen: usize,
    }

    impl TensorVisitor<Flex> for LinearLayout {
        fn param<const D: usize>(
            &mut self,
            key: &str,
            param: &mut Param<Tensor<Flex, D>>,
            transposed: bool,
        ) {
            if !transposed {
                return;
            }
            self.seen += 1;
            let tensor = param.val();
            let [rows, cols] = <[usize; 2]>::try_from(tensor.dims().as_slice()).expect("2-D");
            let stored = tensor.clone().into_primitive().tensor();
            assert!(stored.is_contiguous(), "{key} is a strided view");
            let loaded = tensor.into_data().to_vec::<f32>().unwrap();
            let source = self.checkpoint[key].to_vec::<f32>().unwrap();
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(
                        loaded[i * cols + j],
                        source[j * rows + i],
                        "{key} ({i}, {j})"
                    );
                }
            }
        }

        fn buffer(&mut self, _key: &str, _state: &mut RunningState<Tensor<Flex, 1>>) {}
    }

    /// Linear weights are loaded as contiguous `[in, out]` matrices holding the checkpoint's
    /// `[out, in]` values transposed (not as transposed views, which the fused kernels would
    /// copy on every forward).
    #[test]
    fn loaded_linear_weights_are_row_major_transposes_of_the_checkpoint() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures/segformer-tiny");
        let (model, _) = load_hf_dir::<Flex>(&dir, &Default::default()).unwrap();
        let (_, checkpoint) = read_checkpoint(&dir).unwrap();
        let mut visitor = LinearLayout {
            checkpoint: checkpoint
                .into_iter()
                .map(|(k, v)| (k, v.convert::<f32>()))
                .collect(),
            seen: 0,
        };
        walk(&mut model.clone(), &mut visitor);
        // Per block: q, k, v, o, fc1, fc2; plus one projection per stage in the decode head.
        assert!(
            visitor.seen > 6,
            "only {} linear weights visited",
            visitor.seen
        );
    }

    /// A parameter the checkpoint replaces is never initialised (its random initial values are
    /// not sampled); one the checkpoint lacks (a fresh decode head) is, at load, not later.
    #[test]
    fn the_loader_initialises_only_what_the_checkpoint_lacks() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let inits = Arc::new(AtomicUsize::new(0));
        let lazy = |shape: [usize; 2]| {
            let inits = inits.clone();
            Param::uninitialized(
                burn::module::ParamId::new(),
                move |device: &burn::backend::flex::FlexDevice, _| {
                    inits.fetch_add(1, Ordering::SeqCst);
                    Tensor::<Flex, 2>::zeros(shape, device)
                },
                Default::default(),
                true,
                shape.into(),
            )
        };
        let key = "segformer.stages.0.blocks.0.attention.q_proj.weight";
        let head = "decode_head.classifier.weight";
        let checkpoint = TensorData::new((0..6).map(|v| v as f32).collect::<Vec<_>>(), [3, 2]);
        let mut loader = Loader::<Flex> {
            source: HashMap::from([(key.to_string(), checkpoint)]),
            path: Path::new("model.safetensors"),
            device: Default::default(),
            report: LoadReport::default(),
            error: None,
            keep_fresh: None,
        };
        // burn's `[in, out]` = [2, 3] for PyTorch's `[out, in]` = [3, 2].
        let mut loaded = lazy([2, 3]);
        loader.param(key, &mut loaded, true);
        assert_eq!(
            inits.load(Ordering::SeqCst),
            0,
            "a loaded parameter was sampled"
        );
        assert_eq!(
            loaded.val().into_data().to_vec::<f32>().unwrap(),
            [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]
        );
        let mut fresh = lazy([4, 4]);
        loader.param(head, &mut fresh, false);
        assert_eq!(
            inits.load(Ordering::SeqCst),
            1,
            "the fresh head was not initialised at load"
        );
        assert!(loader.error.is_none());
        assert_eq!(loader.report.initialized, [head]);
    }
}
