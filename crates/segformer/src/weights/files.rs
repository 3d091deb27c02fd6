//! Reading checkpoint files into `TensorData` and writing them atomically.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use burn::tensor::{DType, TensorData};
use safetensors::{Dtype, SafeTensors};

use super::{WeightsError, torch_pickle};

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> WeightsError + '_ {
    move |source| WeightsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// All tensors of a `.safetensors` file, by key.
pub(crate) fn read_safetensors(path: &Path) -> Result<HashMap<String, TensorData>, WeightsError> {
    let bytes = fs::read(path).map_err(io_error(path))?;
    let bad = |message: String| WeightsError::Format {
        path: path.to_path_buf(),
        message,
    };
    let file = SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
    let mut out = HashMap::new();
    for (key, view) in file.tensors() {
        let dtype = match view.dtype() {
            Dtype::F32 => DType::F32,
            Dtype::F16 => DType::F16,
            Dtype::BF16 => DType::BF16,
            Dtype::F64 => DType::F64,
            Dtype::I64 => DType::I64,
            Dtype::I32 => DType::I32,
            other => return Err(bad(format!("tensor {key} has unsupported dtype {other:?}"))),
        };
        let data = TensorData::from_bytes_vec(view.data().to_vec(), view.shape().to_vec(), dtype);
        out.insert(key, data);
    }
    Ok(out)
}

/// All tensors of a PyTorch `pytorch_model.bin` (a `torch.save` zip archive), by key.
pub(crate) fn read_pytorch(path: &Path) -> Result<HashMap<String, TensorData>, WeightsError> {
    let bytes = fs::read(path).map_err(io_error(path))?;
    let tensors = torch_pickle::read(&bytes).map_err(|message| WeightsError::Format {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(tensors.into_iter().collect())
}

/// Writes `bytes` to `path` atomically, through segfit's one atomic write ([`fsio`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WeightsError> {
    fsio::write_atomic(path, bytes).map_err(|e| {
        let (path, source) = e.into_parts();
        WeightsError::Io { path, source }
    })
}

/// Serialises `(key, data)` pairs (f32 or i64) as a safetensors file with `format: pt`
/// metadata, which transformers requires.
pub(crate) fn safetensors_bytes(tensors: &[(String, TensorData)]) -> Result<Vec<u8>, WeightsError> {
    let views = tensors
        .iter()
        .map(|(key, data)| {
            let dtype = match data.dtype {
                DType::F32 => Dtype::F32,
                DType::I64 => Dtype::I64,
                other => unreachable!("we only write f32 and i64 tensors, got {other:?}"),
            };
            let view =
                safetensors::tensor::TensorView::new(dtype, data.shape.to_vec(), data.as_bytes())
                    .map_err(|e| WeightsError::Format {
                    path: PathBuf::from(key),
                    message: e.to_string(),
                })?;
            Ok((key.clone(), view))
        })
        .collect::<Result<Vec<_>, WeightsError>>()?;
    let metadata = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    safetensors::serialize(views, &metadata).map_err(|e| WeightsError::Format {
        path: PathBuf::from("model.safetensors"),
        message: e.to_string(),
    })
}
