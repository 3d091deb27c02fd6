//! Against HF transformers' own output: the `processor-reduce-labels` fixture holds a PIL-written
//! mask and the labels `SegformerImageProcessor(do_reduce_labels=True)` made from it.

use testkit::fixture;
use tiles::{LabelMap, read_mask};

#[test]
fn reduce_labels_matches_hf_on_a_pil_written_mask() {
    let dir = fixture("processor-reduce-labels");
    let mask = read_mask(&dir.join("mask.png")).unwrap();
    assert_eq!((mask.width, mask.height), (70, 90));
    let bytes = std::fs::read(dir.join("expected.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let labels = st.tensor("labels").unwrap();
    assert_eq!(labels.shape(), [1, 64, 48]);
    let hf: Vec<i64> = labels
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();

    let classes: Vec<String> = (0..254).map(|i| format!("c{i}")).collect();
    let names: Vec<&str> = classes.iter().map(String::as_str).collect();
    let mut map = LabelMap::identity(&names);
    map.reduce_labels = true;
    let ours = map.apply(&mask, &dir.join("mask.png")).unwrap();
    // HF resized the mask with PIL NEAREST (source = floor((dst + 0.5) * scale)); labels are
    // pointwise, so reducing before or after the resize is the same.
    let (sx, sy) = (70.0 / 48.0, 90.0 / 64.0);
    for y in 0..64 {
        for x in 0..48 {
            let (u, v) = (
                ((x as f64 + 0.5) * sx) as usize,
                ((y as f64 + 0.5) * sy) as usize,
            );
            assert_eq!(
                ours.data[v * 70 + u] as i64,
                hf[y * 48 + x],
                "label at ({x}, {y})"
            );
        }
    }
    assert!(hf.contains(&255), "the fixture exercises the ignore value");
}
