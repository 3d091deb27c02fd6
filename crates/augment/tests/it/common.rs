//! Shared helpers for the integration tests: fixture loading and comparison.

use std::path::PathBuf;

use augment::Pipeline;
use raster::{Mask, Raster, RasterData};
use safetensors::{Dtype, SafeTensors};

/// Fixture `case` (`testkit::fixture`: the shared fixtures, else the repository's copy).
pub fn fixture_dir(case: &str) -> PathBuf {
    testkit::fixture(case)
}

/// The tensors of one fixture file, kept as raw bytes plus shape.
pub struct Tensors {
    bytes: Vec<u8>,
}

/// One tensor, decoded.
pub struct Tensor {
    pub shape: Vec<usize>,
    pub dtype: Dtype,
    pub data: Vec<u8>,
}

impl Tensors {
    pub fn open(case: &str) -> Self {
        Self::open_path(&fixture_dir(case).join("expected.safetensors"))
    }

    pub fn open_path(path: &std::path::Path) -> Self {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Self { bytes }
    }

    pub fn get(&self, name: &str) -> Tensor {
        let st = SafeTensors::deserialize(&self.bytes).expect("valid safetensors");
        let t = st
            .tensor(name)
            .unwrap_or_else(|e| panic!("fixture tensor {name}: {e}"));
        Tensor {
            shape: t.shape().to_vec(),
            dtype: t.dtype(),
            data: t.data().to_vec(),
        }
    }

    /// A `[H, W, C]` u8 tensor as a raster.
    pub fn raster(&self, name: &str) -> Raster {
        let t = self.get(name);
        assert_eq!(t.dtype, Dtype::U8, "{name}");
        let (h, w, c) = (t.shape[0], t.shape[1], t.shape[2]);
        Raster::new(w, h, c, RasterData::U8(t.data)).unwrap()
    }

    /// A `[H, W]` u8 tensor as a mask.
    pub fn mask(&self, name: &str) -> Mask {
        let t = self.get(name);
        assert_eq!(t.dtype, Dtype::U8, "{name}");
        Mask::new(t.shape[1], t.shape[0], t.data).unwrap()
    }

    pub fn f32s(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        let t = self.get(name);
        assert_eq!(t.dtype, Dtype::F32, "{name}");
        (
            t.shape,
            t.data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        )
    }

    pub fn i64s(&self, name: &str) -> (Vec<usize>, Vec<i64>) {
        let t = self.get(name);
        assert_eq!(t.dtype, Dtype::I64, "{name}");
        (
            t.shape,
            t.data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        )
    }
}

/// Largest absolute difference, with the index where it occurs, for readable failures.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> (f32, usize) {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(i, (x, y))| ((x - y).abs(), i))
        .fold((0.0, 0), |m, d| if d.0 > m.0 { d } else { m })
}

/// Compare two u8 buffers within `tol` grey levels; on failure name the first bad pixel.
pub fn assert_u8_close(got: &[u8], want: &[u8], tol: u8, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].abs_diff(want[i]) > tol)
        .collect();
    let off = (0..got.len()).filter(|&i| got[i] != want[i]).count();
    // Shown with --nocapture: how close the match is, not just that it is within tolerance.
    eprintln!(
        "{what}: {off} of {} samples differ (tolerance {tol})",
        got.len()
    );
    assert!(
        bad.is_empty(),
        "{what}: {} samples differ by more than {tol}; first at {}: got {} want {}",
        bad.len(),
        bad[0],
        got[bad[0]],
        want[bad[0]]
    );
}

pub fn u8s(r: &Raster) -> &[u8] {
    match &r.data {
        RasterData::U8(v) => v,
        other => panic!("expected u8 raster, got {}", other.kind()),
    }
}

pub fn f32s(r: &Raster) -> &[f32] {
    match &r.data {
        RasterData::F32(v) => v,
        other => panic!("expected f32 raster, got {}", other.kind()),
    }
}

/// A `h × w × bands` u16 raster of position-derived samples (`i * 7 mod 65536`).
pub fn indexed_u16(h: usize, w: usize, bands: usize) -> Raster {
    Raster::new(
        w,
        h,
        bands,
        RasterData::U16((0..h * w * bands).map(|i| (i * 7 % 65536) as u16).collect()),
    )
    .unwrap()
}

pub fn indexed_rgb(h: usize, w: usize) -> Raster {
    Raster::new(
        w,
        h,
        3,
        RasterData::U8((0..h * w * 3).map(|i| (i * 31 % 251) as u8).collect()),
    )
    .unwrap()
}

pub fn mask_of(h: usize, w: usize) -> Mask {
    Mask::new(w, h, (0..h * w).map(|i| (i % 5) as u8).collect()).unwrap()
}

pub fn pipeline(toml: &str) -> Pipeline {
    Pipeline::from_toml_str(toml).unwrap_or_else(|e| panic!("{e}"))
}

pub fn config_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../configs/augment")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
