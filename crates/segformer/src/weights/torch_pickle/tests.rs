//! Tests of the `torch.save` reader against torch-written fixtures and hand-built archives.

use burn::backend::Flex;
use burn::tensor::f16;
use burn::tensor::{DType, TensorData};

use super::{read, zip};
use crate::weights::{files, hf_state_dict, names, read_config};

fn tiny_bin() -> Vec<u8> {
    std::fs::read(testkit::fixture("segformer-tiny").join("pytorch_model.bin"))
        .expect("the segformer-tiny fixture is checked in")
}

fn read_ok(bytes: &[u8]) -> Vec<(String, TensorData)> {
    read(bytes).unwrap_or_else(|e| panic!("read failed: {e}"))
}

fn read_err(bytes: &[u8]) -> String {
    match read(bytes) {
        Ok(t) => panic!("expected an error, read {} tensors", t.len()),
        Err(e) => e,
    }
}

/// A zip archive of STORED entries, padding each local header's extra field like torch
/// does (so the reader must use the local header's own lengths), optionally in zip64 form.
fn zip_archive(entries: &[(&str, &[u8])], zip64: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (i, (name, data)) in entries.iter().enumerate() {
        let local = out.len() as u32;
        let crc = crc32fast::hash(data);
        let padding = vec![0u8; 3 + i % 5];
        let header = |sig: u32| {
            let mut h = sig.to_le_bytes().to_vec();
            if sig == 0x0201_4b50 {
                h.extend(20u16.to_le_bytes()); // version made by
            }
            h.extend(20u16.to_le_bytes()); // version needed
            h.extend([0; 6]); // flags, method (stored), time
            h.extend([0; 2]); // date
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h
        };
        out.extend(header(0x0403_4b50));
        out.extend((4 + padding.len() as u16).to_le_bytes());
        out.extend(name.as_bytes());
        out.extend(0x4246u16.to_le_bytes()); // "FB", torch's padding field
        out.extend((padding.len() as u16).to_le_bytes());
        out.extend(&padding);
        out.extend(*data);
        central.extend(header(0x0201_4b50));
        let (offset, extra) = if zip64 {
            let mut extra = 1u16.to_le_bytes().to_vec();
            extra.extend(8u16.to_le_bytes());
            extra.extend(u64::from(local).to_le_bytes());
            (u32::MAX, extra)
        } else {
            (local, Vec::new())
        };
        central.extend((extra.len() as u16).to_le_bytes());
        central.extend([0; 6]); // comment length, disk, internal attributes
        central.extend([0; 4]); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
        central.extend(extra);
    }
    let cd_offset = out.len() as u64;
    let cd_size = central.len() as u64;
    out.extend(central);
    let count = entries.len() as u64;
    if zip64 {
        let record = out.len() as u64;
        out.extend(0x0606_4b50u32.to_le_bytes());
        out.extend(44u64.to_le_bytes());
        out.extend([45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend(count.to_le_bytes());
        out.extend(count.to_le_bytes());
        out.extend(cd_size.to_le_bytes());
        out.extend(cd_offset.to_le_bytes());
        out.extend(0x0706_4b50u32.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend(record.to_le_bytes());
        out.extend(1u32.to_le_bytes());
    }
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0; 4]);
    let (count16, size32, offset32) = if zip64 {
        (u16::MAX, u32::MAX, u32::MAX)
    } else {
        (count as u16, cd_size as u32, cd_offset as u32)
    };
    out.extend(count16.to_le_bytes());
    out.extend(count16.to_le_bytes());
    out.extend(size32.to_le_bytes());
    out.extend(offset32.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

// Pickle opcodes, written out by hand as torch's pickler would emit them.
fn unicode(s: &str) -> Vec<u8> {
    let mut out = vec![b'X'];
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
    out
}

fn short_unicode(s: &str) -> Vec<u8> {
    let mut out = vec![0x8c, s.len() as u8];
    out.extend(s.as_bytes());
    out
}

fn int(v: u32) -> Vec<u8> {
    let mut out = vec![b'J'];
    out.extend(v.to_le_bytes());
    out
}

fn global(module: &str, name: &str) -> Vec<u8> {
    format!("c{module}\n{name}\n").into_bytes()
}

fn tuple(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![b'('];
    out.extend(items.concat());
    out.push(b't');
    out
}

/// `_rebuild_tensor_v2(storage, offset, shape, stride, False, OrderedDict())`, pickled.
fn tensor(
    kind: &str,
    key: &str,
    numel: u32,
    offset: u32,
    shape: &[u32],
    stride: &[u32],
) -> Vec<u8> {
    let storage = [
        tuple(&[
            unicode("storage"),
            global("torch", kind),
            unicode(key),
            unicode("cpu"),
            int(numel),
        ]),
        vec![b'Q'],
    ]
    .concat();
    let ints = |v: &[u32]| tuple(&v.iter().map(|&x| int(x)).collect::<Vec<_>>());
    let hooks = [global("collections", "OrderedDict"), vec![b')', b'R']].concat();
    [
        global("torch._utils", "_rebuild_tensor_v2"),
        tuple(&[
            storage,
            int(offset),
            ints(shape),
            ints(stride),
            vec![0x89],
            hooks,
        ]),
        vec![b'R'],
    ]
    .concat()
}

/// A protocol-2 pickle of a dict of the given (key, pickled value) pairs.
fn state_dict(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![0x80, 2, b'}', b'q', 0, b'('];
    for (key, value) in entries {
        out.extend(unicode(key));
        out.extend(value);
    }
    out.extend([b'u', b'.']);
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// An archive laid out like torch's: `archive/data.pkl` plus `archive/data/<key>` storages.
fn torch_zip(pkl: &[u8], storages: &[(&str, &[u8])], zip64: bool) -> Vec<u8> {
    let names: Vec<String> = storages
        .iter()
        .map(|(key, _)| format!("archive/data/{key}"))
        .collect();
    let mut entries: Vec<(&str, &[u8])> =
        vec![("archive/data.pkl", pkl), ("archive/byteorder", b"little")];
    entries.extend(
        names
            .iter()
            .map(String::as_str)
            .zip(storages.iter().map(|s| s.1)),
    );
    zip_archive(&entries, zip64)
}

#[test]
fn tiny_bin_is_bit_identical_to_its_safetensors() {
    let st = testkit::fixture("segformer-tiny").join("model.safetensors");
    let expected = files::read_safetensors(&st).unwrap();
    let loaded = read_ok(&tiny_bin());
    assert_eq!(loaded.len(), expected.len(), "tensor count");
    for (key, data) in &loaded {
        let current = names::to_current(key);
        let want = expected
            .get(&current)
            .unwrap_or_else(|| panic!("{key} ({current}) is not in model.safetensors"));
        assert_eq!(data.dtype, want.dtype, "{key} dtype");
        assert_eq!(data.shape, want.shape, "{key} shape");
        assert_eq!(data.as_bytes(), want.as_bytes(), "{key} bytes");
    }
    let counter = loaded
        .iter()
        .find(|(key, _)| key.ends_with("num_batches_tracked"))
        .expect("the decode head's BatchNorm counter");
    assert_eq!(counter.1.dtype, DType::I64);
}

/// The ImageNet MiT-B0 classifier (original names): every encoder tensor with the shape our
/// B0 model has, plus the classifier's weight and bias.
#[testkit::needs_fixtures]
#[test]
fn mit_b0_encoder_bin_has_every_encoder_tensor_with_model_shapes() {
    let dir = testkit::fixture("mit-b0-encoder");
    let bytes =
        std::fs::read(dir.join("pytorch_model.bin")).expect("mit-b0-encoder/pytorch_model.bin");
    let loaded: std::collections::HashMap<String, TensorData> = read_ok(&bytes)
        .into_iter()
        .map(|(key, data)| (names::to_current(&key), data))
        .collect();
    let config = read_config(&dir).unwrap();
    let model = config.init::<Flex>(&Default::default()).unwrap();
    let encoder: Vec<_> = hf_state_dict(&model)
        .into_iter()
        .filter(|(key, _)| key.starts_with("segformer."))
        .collect();
    assert_eq!(
        loaded.len(),
        encoder.len() + 2,
        "encoder + classifier.{{weight,bias}}"
    );
    for (key, data) in &encoder {
        let got = loaded.get(key).unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(got.shape, data.shape, "{key}");
        assert_eq!(got.dtype, DType::F32, "{key}");
    }
    let width = config.hidden_sizes.last().copied().unwrap();
    assert_eq!(loaded["classifier.weight"].shape.to_vec(), [1000, width]);
    assert_eq!(loaded["classifier.bias"].shape.to_vec(), [1000]);
}

/// A transposed view (stride (1, 3)) at storage offset 2, a parameter, an f16 tensor and an
/// i64 scalar, with memo references and STACK_GLOBAL, in plain and zip64 archives.
#[test]
fn hand_built_strided_views_materialise_row_major() {
    let storage: Vec<f32> = (0..16).map(|i| 1.0 + 0.5 * i as f32).collect();
    let halves = [f16::from_f32(1.5), f16::from_f32(-2.25)];
    let half_bytes: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
    let longs: Vec<u8> = [7i64, -3].iter().flat_map(|v| v.to_le_bytes()).collect();

    // `_rebuild_parameter(tensor, True, OrderedDict())` via STACK_GLOBAL, memoised as 9.
    let parameter = [
        short_unicode("torch._utils"),
        short_unicode("_rebuild_parameter"),
        vec![0x93, b'q', 9, b'('],
        tensor("FloatStorage", "0", 16, 12, &[2, 2], &[2, 1]),
        vec![0x88],
        global("collections", "OrderedDict"),
        vec![b')', b'R', b't', b'R'],
    ]
    .concat();
    // A second parameter through the memoised callable (BINGET).
    let again = [
        vec![b'h', 9, b'('],
        tensor("HalfStorage", "1", 2, 0, &[2], &[1]),
        vec![0x89, b'}', b't', b'R'],
    ]
    .concat();
    let pkl = state_dict(&[
        ("t", tensor("FloatStorage", "0", 16, 2, &[3, 4], &[1, 3])),
        ("p", parameter),
        ("h", again),
        ("n", tensor("LongStorage", "2", 2, 1, &[], &[])),
    ]);
    let storages: [(&str, &[u8]); 3] = [
        ("0", &f32_bytes(&storage)),
        ("1", &half_bytes),
        ("2", &longs),
    ];
    for zip64 in [false, true] {
        let loaded = read_ok(&torch_zip(&pkl, &storages, zip64));
        let keys: Vec<&str> = loaded.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["t", "p", "h", "n"]);

        let t = &loaded[0].1;
        assert_eq!((t.dtype, t.shape.to_vec()), (DType::F32, vec![3, 4]));
        let want: Vec<f32> = (0..3)
            .flat_map(|i| (0..4).map(move |j| 2 + i + 3 * j))
            .map(|k| storage[k])
            .collect();
        assert_eq!(t.as_slice::<f32>().unwrap(), want);
        assert_eq!(t.as_slice::<f32>().unwrap()[..4], [2.0, 3.5, 5.0, 6.5]);

        let p = &loaded[1].1;
        assert_eq!(p.shape.to_vec(), [2, 2]);
        assert_eq!(p.as_slice::<f32>().unwrap(), &storage[12..16]);

        let h = &loaded[2].1;
        assert_eq!(h.dtype, DType::F16);
        assert_eq!(h.as_slice::<f16>().unwrap(), halves);

        let n = &loaded[3].1;
        assert_eq!((n.dtype, n.shape.len()), (DType::I64, 0));
        assert_eq!(n.as_slice::<i64>().unwrap(), [-3]);
    }
}

#[test]
fn unsupported_inputs_get_clear_errors() {
    let floats = f32_bytes(&[0.0; 4]);
    let one = |value: Vec<u8>| torch_zip(&state_dict(&[("w", value)]), &[("0", &floats)], false);
    let check = |bytes: Vec<u8>, needle: &str| {
        let e = read_err(&bytes);
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    };
    // A legacy torch.save file opens with a pickled magic number.
    check(vec![0x80, 2, 0x8a, 10, 0x6c, 0xfc], "torch>=1.6");
    check(b"hello world, not a zip".to_vec(), "zip");
    check(
        one(tensor("BoolStorage", "0", 4, 0, &[4], &[1])),
        "torch.BoolStorage",
    );
    check(
        one(tensor("FloatStorage", "7", 4, 0, &[4], &[1])),
        "data/7 is missing",
    );
    check(
        one(tensor("FloatStorage", "0", 4, 1, &[4], &[1])),
        "reaches past",
    );
    check(
        one(tensor("FloatStorage", "0", 8, 0, &[8], &[1])),
        "fewer than 8 elements",
    );
    check(one(int(3)), "entry w is a int, not a tensor");
    check(
        one([global("os", "system"), tuple(&[unicode("rm")]), vec![b'R']].concat()),
        "os.system",
    );
    check(torch_zip(b"\x80\x02}q\x00(", &[], false), "without a STOP");

    // A compressed (deflate) entry: patch the method of a stored archive.
    let mut deflated = zip_archive(&[("archive/data.pkl", b"..")], false);
    deflated[8] = 8;
    let cd = deflated.len() - 22 - (46 + "archive/data.pkl".len());
    deflated[cd + 10] = 8;
    check(deflated, "compressed (method 8)");

    // A flipped bit in a storage's bytes is caught by the entry's CRC-32.
    let values = f32_bytes(&[1.25, -7.5, 3.0, 9.75]);
    let pkl = state_dict(&[("w", tensor("FloatStorage", "0", 4, 0, &[4], &[1]))]);
    let mut corrupt = torch_zip(&pkl, &[("0", &values)], false);
    read_ok(&corrupt);
    let at = corrupt
        .windows(values.len())
        .position(|w| w == values)
        .unwrap();
    corrupt[at + 5] ^= 1;
    check(corrupt, "entry archive/data/0 is corrupt: its CRC-32");
}

/// Every truncation of the fixture is an error, and flipped bytes anywhere in the file or in
/// its pickle give an error or a result, never a panic.
#[test]
fn truncated_and_corrupted_checkpoints_never_panic() {
    let bytes = tiny_bin();
    let n = bytes.len();
    for cut in (0..n).step_by(389).chain(n - 400..n) {
        read_err(&bytes[..cut]);
    }
    let mut copy = bytes.clone();
    for at in (0..n).step_by(97).chain(n - 3000..n) {
        let mask = [0x01, 0x80, 0xFF, 0x5A][at % 4];
        copy[at] ^= mask;
        let _ = read(&copy);
        copy[at] ^= mask;
    }

    // Behind the CRC check: mutate data.pkl itself and unpickle it against the real storages.
    let entries = zip::entries(&bytes).unwrap();
    let pkl = entries
        .iter()
        .find(|e| e.name.ends_with("data.pkl"))
        .unwrap()
        .data;
    let storage = |key: &str| {
        entries
            .iter()
            .find(|e| e.name.ends_with(&format!("/data/{key}")))
            .map(|e| e.data)
    };
    assert!(super::load(pkl, storage).is_ok());
    for cut in (0..pkl.len()).step_by(7) {
        assert!(super::load(&pkl[..cut], storage).is_err(), "cut at {cut}");
    }
    let mut pkl = pkl.to_vec();
    let mut accepted = 0;
    for at in (0..pkl.len()).step_by(3) {
        let mask = [0x01, 0x80, 0xFF, 0x20, 0x0F][at % 5];
        pkl[at] ^= mask;
        accepted += usize::from(super::load(&pkl, storage).is_ok());
        pkl[at] ^= mask;
    }
    // Flips inside key strings still parse; most others must not.
    assert!(
        accepted < pkl.len() / 3 / 2,
        "{accepted} corrupt pickles accepted"
    );
}
