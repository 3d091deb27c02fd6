//! Helpers shared by the binary's integration tests: running `segfit`, paths, the tiny HF
//! fixture and an independent .npy reader/writer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the real `segfit` binary (CubeCL's autotune cache pinned where every GPU test keeps
/// it, under the workspace's target/).
pub fn segfit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_segfit"))
        .env("SEGFIT_AUTOTUNE_CACHE", testkit::autotune_cache())
        .args(args)
        .output()
        .expect("segfit runs")
}

/// Runs segfit, asserts success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = segfit(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "segfit {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout.into_owned()
}

/// Runs segfit, asserts a clean failure (exit 1, one `error:` line, no panic), returns stderr.
pub fn fails(args: &[&str]) -> String {
    let out = segfit(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "segfit {args:?} should fail cleanly; stderr:\n{stderr}"
    );
    assert!(
        stderr.starts_with("error: ") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line expected:\n{stderr}"
    );
    stderr
}

/// Runs `segfit predict --model <model> --input <input> --output <output> <extra…>` and
/// asserts success; returns stdout.
pub fn predict_ok(model: &Path, input: &Path, output: &Path, extra: &[&str]) -> String {
    let base = [
        "predict",
        "--model",
        s(model),
        "--input",
        s(input),
        "--output",
        s(output),
    ];
    ok(&[&base[..], extra].concat())
}

/// Runs `predict --pixel-values … --raw-logits` (plus `extra`, e.g. a `--device`) on the tiny
/// fixture's pixel values and returns the largest difference from HF transformers' logits for
/// them (`SegformerForSemanticSegmentation(...).eval()(pixel_values).logits`, in the fixture).
pub fn raw_logits_diff_from_hf(extra: &[&str]) -> f32 {
    let fixture = fixture();
    let bytes = std::fs::read(fixture.join("expected.safetensors")).unwrap();
    let expected = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |name: &str| {
        let view = expected.tensor(name).unwrap();
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        (view.shape().to_vec(), data)
    };
    let (pv_shape, pv) = f32s("pixel_values");
    let (hf_shape, hf_logits) = f32s("eval.logits");
    let tmp = tempfile::tempdir().unwrap();
    let (pv_path, out) = (tmp.path().join("pv.npy"), tmp.path().join("logits.npy"));
    write_npy(&pv_path, &pv_shape, &pv);
    let base = [
        "predict",
        "--model",
        s(&fixture),
        "--pixel-values",
        s(&pv_path),
        "--raw-logits",
        "--logits",
        s(&out),
        "--output",
        s(tmp.path()),
    ];
    ok(&[&base[..], extra].concat());
    let (shape, logits) = read_npy(&out);
    assert_eq!(shape, hf_shape);
    logits
        .iter()
        .zip(&hf_logits)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max)
}

/// A temp path as the `&str` an argument list wants.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The tiny HF fixture: 3 classes, 3 channels.
pub fn fixture() -> PathBuf {
    testkit::fixture("segformer-tiny")
}

/// A copy of the tiny fixture in `dir/name` whose classifier (`decode_head.classifier`) is
/// replaced: `weight` is `[k, hidden]` row-major, `bias` `[k]`, with classes `class_<i>`.
pub fn fixture_with_head(dir: &Path, name: &str, weight: Vec<f32>, bias: Vec<f32>) -> PathBuf {
    let src = fixture();
    let dst = dir.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    let k = bias.len();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    let id2label: serde_json::Map<String, serde_json::Value> = (0..k)
        .map(|i| (i.to_string(), format!("class_{i}").into()))
        .collect();
    let label2id: serde_json::Map<String, serde_json::Value> =
        (0..k).map(|i| (format!("class_{i}"), i.into())).collect();
    config["id2label"] = id2label.into();
    config["label2id"] = label2id.into();
    std::fs::write(dst.join("config.json"), config.to_string()).unwrap();

    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let hidden = classifier_width();
    assert_eq!(weight.len(), k * hidden, "weight must be [k, {hidden}]");
    let weight: Vec<u8> = weight.iter().flat_map(|v| v.to_le_bytes()).collect();
    let bias: Vec<u8> = bias.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut tensors: Vec<(String, safetensors::tensor::TensorView)> = Vec::new();
    for (name, view) in st.tensors() {
        let view = match name.as_str() {
            "decode_head.classifier.weight" => safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                vec![k, hidden, 1, 1],
                &weight,
            )
            .unwrap(),
            "decode_head.classifier.bias" => {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![k], &bias)
                    .unwrap()
            }
            _ => view,
        };
        tensors.push((name, view));
    }
    let out = safetensors::serialize(tensors, &None).unwrap();
    std::fs::write(dst.join("model.safetensors"), out).unwrap();
    dst
}

/// The tiny fixture with a sharper 3-class head (fixed pseudo-random weights, no bias), so
/// that its class map has regions of every class rather than one class everywhere.
pub fn varied_model(dir: &Path) -> PathBuf {
    let mut state = 0x2545_f491_u32;
    let weight = (0..3 * classifier_width())
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 * 8.0 - 4.0
        })
        .collect();
    fixture_with_head(dir, "varied", weight, vec![0.0; 3])
}

/// The input width of the tiny fixture's classifier (its decoder hidden size).
pub fn classifier_width() -> usize {
    let bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensor("decode_head.classifier.weight").unwrap().shape()[1]
}

/// A tiny independent .npy reader (float32, C order): `(shape, data)`.
pub fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(
        header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"),
        "{header}"
    );
    let shape = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape: Vec<usize> = shape
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().parse().unwrap())
        .collect();
    let data: Vec<f32> = bytes[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data.len(), shape.iter().product::<usize>());
    (shape, data)
}

/// A float32 C-order .npy file, written independently of segfit's writer.
pub fn write_npy(path: &Path, shape: &[usize], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(data.iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(path, bytes).unwrap();
}

/// A TIFF's bytes with each palette image (`PhotometricInterpretation` 3, which the `tiff`
/// crate refuses to decode) shown as MinIsBlack, so the `tiff` crate reads the class map's
/// indices; the colour table itself is checked where it matters (`gis.rs`).
pub fn palette_as_grey(path: &Path) -> std::io::Cursor<Vec<u8>> {
    let mut bytes = std::fs::read(path).unwrap();
    testkit::tiff::palette_as_grey(&mut bytes).unwrap();
    std::io::Cursor::new(bytes)
}

/// The files of `dir` (names starting with a dot included) and their bytes; a file that vanished
/// between the listing and the read (a killed run's temporary) reads as empty.
pub fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap_or_default())
        })
        .collect()
}
