//! A pure-Rust reader for `torch.save` checkpoints (`pytorch_model.bin`, torch ≥ 1.6).
//!
//! The file is a zip archive of uncompressed entries: `<name>/data.pkl`, a pickle of the
//! state dict in which each tensor is a strided view of a storage, and `<name>/data/<key>`,
//! the raw little-endian bytes of each storage. We parse the zip directory ([`zip`]), unpickle
//! the state dict without executing anything ([`pickle`]) and copy each view out row-major.

mod pickle;
mod zip;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use burn::tensor::{DType, TensorData};

use pickle::TensorRef;

/// Every tensor of the `torch.save` file `bytes`, by key in file order, contiguous and in its
/// stored dtype (f32, f16, bf16, f64, i64 or i32). Errors say what is wrong with the file.
pub(crate) fn read(bytes: &[u8]) -> Result<Vec<(String, TensorData)>, String> {
    let entries = zip::entries(bytes)?;
    let (prefix, pkl) = entries
        .iter()
        .find_map(|e| Some((e.name.strip_suffix("data.pkl")?, e.data)))
        .ok_or("the zip archive has no data.pkl; is this a torch.save checkpoint?")?;
    let entries: HashMap<&str, &[u8]> = entries.iter().map(|e| (e.name, e.data)).collect();
    if let Some(order) = entries.get(format!("{prefix}byteorder").as_str())
        && *order != b"little"
    {
        return Err(format!(
            "the checkpoint was saved with byte order {:?}; only little-endian is supported",
            String::from_utf8_lossy(order)
        ));
    }
    let storage = |key: &str| entries.get(format!("{prefix}data/{key}").as_str()).copied();
    load(pkl, storage)
}

/// The tensors of the state dict pickled in `pkl`, whose storage `key` is `storage(key)`.
fn load<'a>(
    pkl: &[u8],
    storage: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Vec<(String, TensorData)>, String> {
    pickle::state_dict(pkl)?
        .into_iter()
        .map(|(key, tensor)| {
            let bytes = storage(&tensor.storage.key).ok_or_else(|| {
                format!(
                    "tensor {key}: its storage data/{} is missing from the archive",
                    tensor.storage.key
                )
            })?;
            let data = materialise(&tensor, bytes).map_err(|e| format!("tensor {key}: {e}"))?;
            Ok((key, data))
        })
        .collect()
}

/// The dtype of a storage class such as `FloatStorage`.
fn dtype(kind: &str) -> Option<DType> {
    Some(match kind {
        "FloatStorage" => DType::F32,
        "HalfStorage" => DType::F16,
        "BFloat16Storage" => DType::BF16,
        "DoubleStorage" => DType::F64,
        "LongStorage" => DType::I64,
        "IntStorage" => DType::I32,
        _ => return None,
    })
}

/// Copies the view `tensor` of the storage `bytes` into a contiguous row-major tensor.
fn materialise(tensor: &TensorRef, bytes: &[u8]) -> Result<TensorData, String> {
    let storage = &tensor.storage;
    let dtype = dtype(&storage.kind).ok_or_else(|| {
        format!(
            "storage type torch.{} is not supported (only float32, float16, bfloat16, \
             float64, int64 and int32 tensors)",
            storage.kind
        )
    })?;
    let size = dtype.size();
    let too_big = || "its size overflows".to_string();
    let to_usize = |v: u64| usize::try_from(v).map_err(|_| too_big());
    let shape = tensor
        .shape
        .iter()
        .map(|&v| to_usize(v))
        .collect::<Result<Vec<_>, _>>()?;
    let stride = tensor
        .stride
        .iter()
        .map(|&v| to_usize(v))
        .collect::<Result<Vec<_>, _>>()?;
    let offset = to_usize(tensor.offset)?;
    let storage_len = to_usize(storage.numel)?;
    if storage_len
        .checked_mul(size)
        .is_none_or(|n| n > bytes.len())
    {
        return Err(format!(
            "storage data/{} holds {} bytes, fewer than {} elements of {size} bytes",
            storage.key,
            bytes.len(),
            storage.numel
        ));
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(too_big)?;
    if numel == 0 {
        return Ok(TensorData::from_bytes_vec(Vec::new(), shape, dtype));
    }
    // The last element viewed, which bounds every other.
    let last = shape
        .iter()
        .zip(&stride)
        .try_fold(offset, |i, (&d, &s)| i.checked_add((d - 1).checked_mul(s)?))
        .ok_or_else(too_big)?;
    if last >= storage_len || numel > storage_len {
        return Err(format!(
            "its view (offset {offset}, shape {shape:?}, stride {stride:?}) reaches past its \
             storage of {storage_len} elements or overlaps itself"
        ));
    }
    let bytes = &bytes[..storage_len * size];
    let mut out = Vec::with_capacity(numel * size);
    if is_row_major(&shape, &stride) {
        out.extend_from_slice(&bytes[offset * size..(offset + numel) * size]);
    } else {
        copy_strided(bytes, size, offset, &shape, &stride, &mut out);
    }
    Ok(TensorData::from_bytes_vec(out, shape, dtype))
}

/// Whether elements laid out by `stride` are already contiguous row-major (dimensions of
/// size 1 may have any stride).
fn is_row_major(shape: &[usize], stride: &[usize]) -> bool {
    let mut expected = 1;
    for (&d, &s) in shape.iter().zip(stride).rev() {
        if d != 1 && s != expected {
            return false;
        }
        expected *= d;
    }
    true
}

/// Appends the elements of a non-empty, in-bounds strided view to `out` in row-major order.
fn copy_strided(
    bytes: &[u8],
    size: usize,
    offset: usize,
    shape: &[usize],
    stride: &[usize],
    out: &mut Vec<u8>,
) {
    let dims = shape.len();
    let mut index = vec![0usize; dims];
    loop {
        let start: usize = offset
            + index
                .iter()
                .zip(stride)
                .map(|(&i, &s)| i * s)
                .sum::<usize>();
        let at = start * size;
        out.extend_from_slice(&bytes[at..at + size]);
        // Odometer step: the last dimension moves fastest.
        let mut d = dims;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}
