//! A minimal unpickler for the `data.pkl` of a `torch.save` state dict.
//!
//! Nothing is ever executed: the few callables a state dict uses (`OrderedDict`,
//! `_rebuild_tensor_v2`, `_rebuild_parameter`) are recognised by name and everything else is
//! an error. Tensors come out as references into their storages, materialised later.

use std::collections::HashMap;
use std::rc::Rc;

use calls::{call, persistent_load};

mod calls;

/// A storage named by a persistent id: `('storage', torch.FloatStorage, key, location, numel)`.
#[derive(Debug, PartialEq)]
pub(super) struct StorageRef {
    /// The storage class, e.g. `FloatStorage`; it fixes the dtype.
    pub kind: String,
    /// The archive entry `data/<key>` holding the bytes.
    pub key: String,
    /// The number of elements.
    pub numel: u64,
}

/// A strided view of a storage, as `torch._utils._rebuild_tensor_v2` describes it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TensorRef {
    /// The storage viewed.
    pub storage: Rc<StorageRef>,
    /// The index, in elements, of the view's first element.
    pub offset: u64,
    /// The view's shape.
    pub shape: Vec<u64>,
    /// The step, in elements, along each dimension.
    pub stride: Vec<u64>,
}

/// Containers deeper than this are rejected, so that dropping a value cannot overflow the
/// stack; a state dict nests three or four levels.
const MAX_DEPTH: u32 = 64;

/// A container's items and how deeply it nests.
#[derive(Clone, Debug)]
struct Node<T> {
    items: Vec<T>,
    depth: u32,
}

/// A Python value. Containers are shared (`Rc`) so that memo lookups copy nothing.
#[derive(Clone, Debug)]
enum Value {
    None,
    // A state dict's tensors need only ints and strings; other scalars are kept as kinds.
    Bool,
    Int(i64),
    Float,
    Str(Rc<str>),
    Bytes,
    Tuple(Rc<Node<Value>>),
    List(Rc<Node<Value>>),
    Dict(Rc<Node<(Value, Value)>>),
    /// A class or function reference: `(module, name)`.
    Global(Rc<(String, String)>),
    Storage(Rc<StorageRef>),
    Tensor(Rc<TensorRef>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool => "bool",
            Value::Int(_) => "int",
            Value::Float => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Global(_) => "class or function",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }

    fn depth(&self) -> u32 {
        match self {
            Value::Tuple(n) | Value::List(n) => n.depth,
            Value::Dict(n) => n.depth,
            _ => 0,
        }
    }
}

/// Checks that a container holding values of `child` depth is not too deep.
fn container_depth(child: u32) -> Result<u32, String> {
    if child >= MAX_DEPTH {
        return Err(format!("containers nest more than {MAX_DEPTH} levels deep"));
    }
    Ok(child + 1)
}

fn seq(items: Vec<Value>) -> Result<Rc<Node<Value>>, String> {
    let depth = container_depth(items.iter().map(Value::depth).max().unwrap_or(0))?;
    Ok(Rc::new(Node { items, depth }))
}

/// The `(key, tensor)` entries of the state dict pickled in `data`, in file order.
pub(super) fn state_dict(data: &[u8]) -> Result<Vec<(String, TensorRef)>, String> {
    let mut unpickler = Unpickler {
        data,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let root = unpickler.run()?;
    let Value::Dict(dict) = root else {
        return Err(format!(
            "data.pkl holds a {}, not a state dict (a dict of tensors)",
            root.kind()
        ));
    };
    let mut out: Vec<(String, TensorRef)> = Vec::with_capacity(dict.items.len());
    let mut index = HashMap::new();
    for (key, value) in Rc::unwrap_or_clone(dict).items {
        let Value::Str(key) = key else {
            return Err(format!(
                "data.pkl: the state dict has a {} key; expected str keys",
                key.kind()
            ));
        };
        let Value::Tensor(tensor) = value else {
            return Err(format!(
                "data.pkl: entry {key} is a {}, not a tensor; expected a flat state dict \
                 such as `model.state_dict()`",
                value.kind()
            ));
        };
        let tensor = Rc::unwrap_or_clone(tensor);
        // Like Python, a key set twice keeps its last value.
        match index.get(&key) {
            Some(&i) => out[i] = (key.to_string(), tensor),
            None => {
                index.insert(key.clone(), out.len());
                out.push((key.to_string(), tensor));
            }
        }
    }
    Ok(out)
}

struct Unpickler<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    /// Stack lengths at each MARK still open.
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
}

impl<'a> Unpickler<'a> {
    /// Runs to STOP and returns the pickled value.
    fn run(&mut self) -> Result<Value, String> {
        loop {
            let at = self.pos;
            let Some(&op) = self.data.get(at) else {
                return Err(format!(
                    "data.pkl ends at byte {at} without a STOP opcode; the file is truncated"
                ));
            };
            self.pos += 1;
            match self.step(op) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(e) => {
                    return Err(format!("data.pkl: {e} (opcode 0x{op:02x} at byte {at})"));
                }
            }
        }
    }

    /// Executes one opcode; `Some` at STOP.
    fn step(&mut self, op: u8) -> Result<Option<Value>, String> {
        match op {
            0x80 => {
                let version = self.u8()?;
                if version > 5 {
                    return Err(format!("unsupported pickle protocol {version}"));
                }
            }
            0x95 => {
                self.take(8)?; // FRAME: a length hint
            }
            b'.' => return self.pop().map(Some),
            b'(' => self.marks.push(self.stack.len()),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let top = self.top()?.clone();
                self.stack.push(top);
            }
            b'}' => self.stack.push(Value::Dict(Rc::new(Node {
                items: Vec::new(),
                depth: 1,
            }))),
            b']' => self.stack.push(Value::List(seq(Vec::new())?)),
            b')' => self.stack.push(Value::Tuple(seq(Vec::new())?)),
            b'q' => {
                let i = self.u8()?.into();
                self.put(i)?;
            }
            b'r' => {
                let i = self.u32()?;
                self.put(i)?;
            }
            0x94 => {
                let i = u32::try_from(self.memo.len()).map_err(|_| "memo overflow")?;
                self.put(i)?;
            }
            b'h' => {
                let i = self.u8()?.into();
                self.get(i)?;
            }
            b'j' => {
                let i = self.u32()?;
                self.get(i)?;
            }
            0x8c => {
                let n = self.u8()?.into();
                self.unicode(n)?;
            }
            b'X' => {
                let n = self.u32()? as usize;
                self.unicode(n)?;
            }
            0x8d => {
                let n = usize::try_from(self.u64()?).map_err(|_| "string too long")?;
                self.unicode(n)?;
            }
            b'U' | b'T' => {
                // Python 2 `str`: bytes that Python 3 decodes as latin-1.
                let n = if op == b'U' {
                    self.u8()?.into()
                } else {
                    self.u32()? as usize
                };
                let text: String = self.take(n)?.iter().map(|&b| char::from(b)).collect();
                self.stack.push(Value::Str(text.into()));
            }
            b'C' | b'B' => {
                let n = if op == b'C' {
                    self.u8()?.into()
                } else {
                    self.u32()? as usize
                };
                self.take(n)?;
                self.stack.push(Value::Bytes);
            }
            b'J' => {
                let v = i32::from_le_bytes(self.array()?);
                self.stack.push(Value::Int(v.into()));
            }
            b'K' => {
                let v = self.u8()?;
                self.stack.push(Value::Int(v.into()));
            }
            b'M' => {
                let v = u16::from_le_bytes(self.array()?);
                self.stack.push(Value::Int(v.into()));
            }
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    self.u8()?.into()
                } else {
                    self.u32()? as usize
                };
                let v = long(self.take(n)?)?;
                self.stack.push(Value::Int(v));
            }
            b'N' => self.stack.push(Value::None),
            0x88 | 0x89 => self.stack.push(Value::Bool),
            b'G' => {
                self.take(8)?;
                self.stack.push(Value::Float);
            }
            b't' => {
                let items = self.pop_mark()?;
                self.stack.push(Value::Tuple(seq(items)?));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let at = self.stack.len().checked_sub(n).ok_or("stack underflow")?;
                self.check_mark(at)?;
                let items = self.stack.split_off(at);
                self.stack.push(Value::Tuple(seq(items)?));
            }
            b'l' => {
                let items = self.pop_mark()?;
                self.stack.push(Value::List(seq(items)?));
            }
            b'a' => {
                let item = self.pop()?;
                self.extend_list(vec![item])?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.extend_list(items)?;
            }
            b'd' => {
                let items = self.pop_mark()?;
                self.stack.push(Value::Dict(Rc::new(Node {
                    items: Vec::new(),
                    depth: 1,
                })));
                self.extend_dict(items)?;
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.extend_dict(vec![key, value])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.extend_dict(items)?;
            }
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                self.stack.push(Value::Global(Rc::new((module, name))));
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Value::Str(module), Value::Str(name)) = (module, name) else {
                    return Err("STACK_GLOBAL needs two strings".to_string());
                };
                self.stack.push(Value::Global(Rc::new((
                    module.to_string(),
                    name.to_string(),
                ))));
            }
            b'R' | 0x81 => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let value = call(callable, args)?;
                self.stack.push(value);
            }
            b'b' => {
                // An object's `__setstate__`: OrderedDict's `_metadata` and the like, which a
                // state dict's tensors do not depend on.
                self.pop()?;
                match self.top()? {
                    Value::Dict(_) | Value::Tensor(_) => {}
                    other => return Err(format!("BUILD on a {}", other.kind())),
                }
            }
            b'Q' => {
                let pid = self.pop()?;
                let storage = persistent_load(pid)?;
                self.stack.push(Value::Storage(Rc::new(storage)));
            }
            _ => return Err("unsupported or invalid pickle opcode".to_string()),
        }
        Ok(None)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let bytes = self
            .pos
            .checked_add(n)
            .and_then(|end| self.data.get(self.pos..end))
            .ok_or_else(|| format!("an argument of {n} bytes runs past the end of the pickle"))?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        self.array::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.array().map(u64::from_le_bytes)
    }

    /// A newline-terminated ASCII argument (GLOBAL's module and name).
    fn line(&mut self) -> Result<String, String> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("unterminated GLOBAL name")?;
        let text = std::str::from_utf8(&rest[..end]).map_err(|_| "non-UTF-8 GLOBAL name")?;
        self.pos += end + 1;
        Ok(text.to_string())
    }

    fn unicode(&mut self, n: usize) -> Result<(), String> {
        let bytes = self.take(n)?;
        let text = std::str::from_utf8(bytes).map_err(|_| "a string is not valid UTF-8")?;
        self.stack.push(Value::Str(text.into()));
        Ok(())
    }

    fn top(&mut self) -> Result<&mut Value, String> {
        if self.marks.last() == Some(&self.stack.len()) {
            return Err("stack underflow (at a MARK)".to_string());
        }
        self.stack
            .last_mut()
            .ok_or_else(|| "stack underflow".to_string())
    }

    fn pop(&mut self) -> Result<Value, String> {
        self.top()?;
        self.stack
            .pop()
            .ok_or_else(|| "stack underflow".to_string())
    }

    /// Errors if taking the stack from `at` up would reach below the innermost MARK.
    fn check_mark(&self, at: usize) -> Result<(), String> {
        if self.marks.last().is_some_and(|&mark| at < mark) {
            return Err("stack underflow (past a MARK)".to_string());
        }
        Ok(())
    }

    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self.marks.pop().ok_or("no MARK to pop back to")?;
        Ok(self.stack.split_off(mark))
    }

    fn put(&mut self, i: u32) -> Result<(), String> {
        let top = self.top()?.clone();
        self.memo.insert(i, top);
        Ok(())
    }

    fn get(&mut self, i: u32) -> Result<(), String> {
        let value = self
            .memo
            .get(&i)
            .cloned()
            .ok_or_else(|| format!("memo entry {i} is read before it is written"))?;
        self.stack.push(value);
        Ok(())
    }

    // NOTE: Python mutates a memoised list or dict in place; we copy on write (`make_mut`),
    // so a memo entry keeps the container as it was when memoised. State dicts never
    // read a container back after filling it.
    fn extend_list(&mut self, items: Vec<Value>) -> Result<(), String> {
        let child = items.iter().map(Value::depth).max().unwrap_or(0);
        let Value::List(list) = self.top()? else {
            return Err("APPEND to something that is not a list".to_string());
        };
        let list = Rc::make_mut(list);
        list.depth = list.depth.max(container_depth(child)?);
        list.items.extend(items);
        Ok(())
    }

    fn extend_dict(&mut self, items: Vec<Value>) -> Result<(), String> {
        if !items.len().is_multiple_of(2) {
            return Err("a dict needs key/value pairs but got an odd number of items".to_string());
        }
        let child = items.iter().map(Value::depth).max().unwrap_or(0);
        let Value::Dict(dict) = self.top()? else {
            return Err("SETITEM on something that is not a dict".to_string());
        };
        let dict = Rc::make_mut(dict);
        dict.depth = dict.depth.max(container_depth(child)?);
        let mut items = items.into_iter();
        while let (Some(key), Some(value)) = (items.next(), items.next()) {
            dict.items.push((key, value));
        }
        Ok(())
    }
}

/// A little-endian two's-complement integer (LONG1/LONG4).
fn long(bytes: &[u8]) -> Result<i64, String> {
    if bytes.len() > 8 {
        return Err(format!(
            "a {}-byte integer does not fit in 64 bits",
            bytes.len()
        ));
    }
    let negative = bytes.last().is_some_and(|&b| b & 0x80 != 0);
    let mut full = [if negative { 0xFF } else { 0 }; 8];
    full[..bytes.len()].copy_from_slice(bytes);
    Ok(i64::from_le_bytes(full))
}
