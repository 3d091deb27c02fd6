//! The callables and persistent ids a torch state dict pickles, recognised by name.

use std::rc::Rc;

use super::{Node, StorageRef, TensorRef, Value};

fn items(args: &Value) -> Result<&[Value], String> {
    match args {
        Value::Tuple(t) => Ok(&t.items),
        other => Err(format!(
            "call arguments are a {}, not a tuple",
            other.kind()
        )),
    }
}

fn uint(value: &Value, what: &str) -> Result<u64, String> {
    match value {
        Value::Int(v) => u64::try_from(*v).map_err(|_| format!("{what} is negative ({v})")),
        other => Err(format!("{what} is a {}, not an int", other.kind())),
    }
}

fn uints(value: &Value, what: &str) -> Result<Vec<u64>, String> {
    match value {
        Value::Tuple(t) => t.items.iter().map(|v| uint(v, what)).collect(),
        other => Err(format!("{what} is a {}, not a tuple", other.kind())),
    }
}

/// Applies one of the callables a state dict uses (REDUCE and NEWOBJ).
pub(super) fn call(callable: Value, args: Value) -> Result<Value, String> {
    let Value::Global(global) = callable else {
        return Err(format!(
            "call of a {}, not a class or function",
            callable.kind()
        ));
    };
    let args = items(&args)?;
    match (global.0.as_str(), global.1.as_str()) {
        ("collections", "OrderedDict") if args.is_empty() => Ok(Value::Dict(Rc::new(Node {
            items: Vec::new(),
            depth: 1,
        }))),
        ("torch._utils", "_rebuild_tensor_v2") => rebuild_tensor(args),
        ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
            match args.first() {
                Some(tensor @ Value::Tensor(_)) => Ok(tensor.clone()),
                _ => Err(format!("{} needs a tensor as its first argument", global.1)),
            }
        }
        (module, name) => Err(format!(
            "calls {module}.{name} with {} arguments, which a state dict does not use; only \
             tensors, parameters and OrderedDicts are supported",
            args.len()
        )),
    }
}

/// `_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
/// backward_hooks[, metadata])`.
fn rebuild_tensor(args: &[Value]) -> Result<Value, String> {
    let [storage, offset, size, stride, _requires_grad, _hooks, ..] = args else {
        return Err(format!(
            "_rebuild_tensor_v2 takes 6 or 7 arguments, got {}",
            args.len()
        ));
    };
    if args.len() > 7 {
        return Err(format!(
            "_rebuild_tensor_v2 takes 6 or 7 arguments, got {}",
            args.len()
        ));
    }
    let Value::Storage(storage) = storage else {
        return Err(format!(
            "_rebuild_tensor_v2's storage is a {}",
            storage.kind()
        ));
    };
    let shape = uints(size, "a tensor size")?;
    let stride = uints(stride, "a tensor stride")?;
    if shape.len() != stride.len() {
        return Err(format!(
            "a tensor has {} sizes but {} strides",
            shape.len(),
            stride.len()
        ));
    }
    Ok(Value::Tensor(Rc::new(TensorRef {
        storage: storage.clone(),
        offset: uint(offset, "a storage offset")?,
        shape,
        stride,
    })))
}

/// Resolves a persistent id `('storage', torch.XStorage, key, location, numel)`.
pub(super) fn persistent_load(pid: Value) -> Result<StorageRef, String> {
    let pid = items(&pid).map_err(|_| format!("a persistent id is a {}", pid.kind()))?;
    let [
        Value::Str(tag),
        Value::Global(class),
        Value::Str(key),
        Value::Str(_location),
        numel,
    ] = pid
    else {
        return Err("a persistent id is not ('storage', class, key, location, numel)".to_string());
    };
    if &**tag != "storage" || class.0 != "torch" {
        return Err(format!(
            "unsupported persistent id ({tag}, {}.{})",
            class.0, class.1
        ));
    }
    Ok(StorageRef {
        kind: class.1.clone(),
        key: key.to_string(),
        numel: uint(numel, "a storage size")?,
    })
}
