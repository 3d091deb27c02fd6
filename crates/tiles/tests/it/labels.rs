//! Label mapping: explicit values, ignore, HF `reduce_labels`, validation, suggestions and
//! (de)serialisation order.

use std::path::Path;

use tiles::{LabelMap, Mask, TilesError};

fn mask(values: &[u8]) -> Mask {
    Mask::new(values.len(), 1, values.to_vec()).unwrap()
}

#[test]
fn explicit_values_map_to_class_indices_and_255_is_ignored() {
    let map = LabelMap::new(&[("outer", &[0, 7]), ("rice_paddy", &[128])]);
    let got = map
        .apply(&mask(&[0, 7, 128, 255, 0]), Path::new("m.png"))
        .unwrap();
    assert_eq!(got.data, [0, 0, 1, 255, 0]);
}

#[test]
fn a_class_value_wins_over_the_default_ignore() {
    let map = LabelMap::new(&[("outer", &[0]), ("rice_paddy", &[255])]);
    assert_eq!(
        map.apply(&mask(&[0, 255]), Path::new("m.png"))
            .unwrap()
            .data,
        [0, 1]
    );
}

#[test]
fn reduce_labels_follows_hf() {
    // HF: label[label == 0] = 255; label -= 1; label[label == 254] = 255.
    let mut map = LabelMap::identity(&["a", "b", "c"]);
    map.reduce_labels = true;
    let input = [0u8, 1, 2, 3, 255];
    let hf: Vec<u8> = input
        .iter()
        .map(|&v| if v == 0 { 255 } else { v.wrapping_sub(1) })
        .map(|v| if v == 254 { 255 } else { v })
        .collect();
    assert_eq!(
        map.apply(&mask(&input), Path::new("m.png")).unwrap().data,
        hf
    );
    // A value past the classes is not silently turned into a class.
    assert!(matches!(
        map.apply(&mask(&[4]), Path::new("m.png")),
        Err(TilesError::UnmappedValues { .. })
    ));
}

#[test]
fn binary_0_255_masks_get_the_rice_paddy_hint() {
    // With 255 not ignored it is reported as unmapped, with the hint. (With the default ignore
    // the audit catches the trap instead: see `folder.rs`.)
    let map = LabelMap::identity(&["outer", "rice_paddy"]);
    let strict = LabelMap {
        ignore: vec![],
        ..map
    };
    let msg = strict
        .apply(&mask(&[0, 255, 255, 0]), Path::new("masks/a.png"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("255 (2 px, first in masks/a.png)"), "{msg}");
    assert!(
        msg.contains("values {0, 255} with 2 classes: map 255 to rice_paddy?"),
        "{msg}"
    );
}

#[test]
fn one_based_masks_suggest_reduce_labels() {
    let map = LabelMap::identity(&["a", "b"]);
    assert_eq!(map.suggest(&[1, 2, 3]), None);
    assert!(
        map.suggest(&[1, 2])
            .unwrap()
            .contains("map 1 to a, 2 to b?")
    );
    let map3 = LabelMap::identity(&["a", "b", "c"]);
    assert!(map3.suggest(&[1, 2]).unwrap().contains("reduce_labels"));
}

#[test]
fn validation_names_the_problem() {
    let dup = LabelMap::new(&[("a", &[1]), ("b", &[1])]);
    assert!(
        dup.validate()
            .unwrap_err()
            .to_string()
            .contains("value 1 is listed for both `a` and `b`")
    );
    let names = LabelMap::new(&[("a", &[1]), ("a", &[2])]);
    assert!(
        names
            .validate()
            .unwrap_err()
            .to_string()
            .contains("`a` appears twice")
    );
    assert!(LabelMap::new(&[]).validate().is_err());
}

#[test]
fn deserialises_a_table_in_document_order_and_a_list() {
    // Names chosen so that alphabetical order differs from document order.
    let json = r#"{ "classes": { "zebra": [0], "apple": [255] }, "ignore": [7] }"#;
    let map: LabelMap = serde_json::from_str(json).unwrap();
    assert_eq!(map.class_names(), ["zebra", "apple"]);
    assert_eq!(map.ignore, [7]);
    assert!(!map.reduce_labels);
    let back: LabelMap = serde_json::from_str(&serde_json::to_string(&map).unwrap()).unwrap();
    assert_eq!(back, map);

    let list =
        r#"{ "classes": [ { "name": "b", "values": [1] }, { "name": "a", "values": [0] } ] }"#;
    let map: LabelMap = serde_json::from_str(list).unwrap();
    assert_eq!(map.class_names(), ["b", "a"]);
    assert_eq!(map.ignore, [255], "ignore defaults to 255");
}

#[test]
fn deserialises_the_toml_config_syntax_in_document_order() {
    let text = "[labels]\nreduce_labels = false\n[labels.classes]\nzebra = [0]\napple = [255]\n";
    #[derive(serde::Deserialize)]
    struct Config {
        labels: LabelMap,
    }
    let c: Config = toml::from_str(text).unwrap();
    assert_eq!(c.labels.class_names(), ["zebra", "apple"]);
    assert_eq!(
        c.labels
            .apply(&mask(&[255, 0]), Path::new("m.png"))
            .unwrap()
            .data,
        [1, 0]
    );
}
