//! Folder datasets end to end: pairing, splits, every audit error with a real malformed file,
//! `prepare_folder` and `SegDataset` over the result.

use std::path::Path;

use tiles::{
    FolderOptions, LabelMap, SegDataset, TilesError, audit, prepare_folder, write_mask_png,
    write_png,
};

use crate::common::{mask_of, u8_raster, write_pair};

fn labels() -> LabelMap {
    LabelMap::new(&[("outer", &[0]), ("rice_paddy", &[255])])
}

/// `n` pairs `img_000.png` … in flat `images/` and `masks/` folders under `root`.
fn flat(root: &Path, n: usize) {
    for i in 0..n {
        write_pair(
            &root.join(format!("images/img_{i:03}.png")),
            &root.join(format!("masks/img_{i:03}.png")),
            8,
            6,
            &[0, 255, 0],
            i as u64,
        );
    }
}

fn opts(root: &Path) -> FolderOptions {
    FolderOptions::new(
        root.join("images"),
        root.join("masks"),
        root.join("out"),
        labels(),
    )
}

#[test]
fn split_layout_is_prepared_and_loads_lazily_with_mapped_masks() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    for (split, n) in [("train", 3), ("val", 2)] {
        for i in 0..n {
            let id = format!("{split}{i}");
            write_pair(
                &r.join(format!("images/{split}/{id}.png")),
                &r.join(format!("masks/{split}/{id}.png")),
                10,
                4,
                &[0, 255, 255, 0, 0],
                i,
            );
        }
    }
    let report = prepare_folder(&opts(r)).unwrap();
    let a = report.audit.as_ref().unwrap();
    assert_eq!(a.pairs, 5);
    assert_eq!((a.splits["train"].samples, a.splits["val"].samples), (3, 2));
    // Each 10x4 mask cycles 0,255,255,0,0: 24 zeros and 16 paddies.
    assert_eq!(a.splits["train"].class_pixels, [3 * 24, 3 * 16]);
    assert_eq!(a.raw_values.get(&255), Some(&(5 * 16)));
    assert_eq!(a.sizes.get("10x4"), Some(&5));
    let shown = report.to_string();
    assert!(
        shown.contains("rice_paddy") && shown.contains("train 3"),
        "{shown}"
    );

    let meta = tiles::DatasetMeta::load(&r.join("out")).unwrap().unwrap();
    assert_eq!(meta.classes, ["outer", "rice_paddy"]);
    assert_eq!(meta.splits["val"], 2);
    assert_eq!(meta.band_stats.len(), 3);

    let train = SegDataset::open(&r.join("out"), "train").unwrap();
    assert_eq!(train.len(), 3);
    let s = train.get(1).unwrap();
    assert_eq!(s.id, "train1");
    assert_eq!(s.image, u8_raster(10, 4, 3, 1));
    assert_eq!(s.mask.unwrap().data, mask_of(10, 4, &[0, 1, 1, 0, 0]).data);
    assert!(matches!(
        train.get(3),
        Err(TilesError::IndexOutOfRange { index: 3, len: 3 })
    ));
    fn shared<T: Send + Sync>(_: &T) {}
    shared(&train);
}

#[test]
fn flat_split_is_deterministic_and_stable_when_files_are_added() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 40);
    let mut o = opts(d.path());
    o.val_ratio = 0.25;
    let first = prepare_folder(&o).unwrap();
    let ids = |split: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d.path().join("out/images").join(split))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let val1 = ids("val");
    assert_eq!(val1.len(), first.meta.splits["val"]);
    assert!(
        (4..=18).contains(&val1.len()),
        "~25% of 40 in val, got {}",
        val1.len()
    );

    // Same inputs, fresh output: identical split.
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    prepare_folder(&o).unwrap();
    assert_eq!(ids("val"), val1);

    // Add 20 files: none of the old ones changes side.
    for i in 40..60 {
        write_pair(
            &d.path().join(format!("images/img_{i:03}.png")),
            &d.path().join(format!("masks/img_{i:03}.png")),
            8,
            6,
            &[0, 255],
            i,
        );
    }
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    prepare_folder(&o).unwrap();
    let val2 = ids("val");
    let old: Vec<&String> = val2.iter().filter(|n| n.as_str() < "img_040").collect();
    assert_eq!(old, val1.iter().collect::<Vec<_>>());

    // A different seed gives a different split.
    o.seed = 7;
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    prepare_folder(&o).unwrap();
    assert_ne!(ids("val"), val2);
}

#[test]
fn mask_suffix_extension_and_list_files_pair_correctly() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    for i in 0..6 {
        write_png(&r.join(format!("data/s{i}.png")), &u8_raster(5, 5, 3, i)).unwrap();
        let m = tiles::Raster::new(
            5,
            5,
            1,
            tiles::RasterData::U8(mask_of(5, 5, &[0, 255]).data),
        )
        .unwrap();
        tiles::write_geotiff(&r.join(format!("data/s{i}_mask.tif")), &m, None).unwrap();
    }
    let mut o = FolderOptions::new(r.join("data"), r.join("data"), r.join("out"), labels());
    o.mask_suffix = "_mask".into();
    o.mask_ext = "tif".into();
    o.val_ratio = 0.5;
    let a = audit(&o).unwrap();
    assert_eq!(a.pairs, 6);

    let list = r.join("list.txt");
    std::fs::write(&list, "# image mask split\ndata/s0.png data/s0_mask.tif train\ndata/s1.png data/s1_mask.tif val\n").unwrap();
    o.list = Some(list.clone());
    let a = audit(&o).unwrap();
    assert_eq!((a.splits["train"].samples, a.splits["val"].samples), (1, 1));
    std::fs::write(&list, "data/s0.png data/nope.tif train\n").unwrap();
    let err = audit(&o).unwrap_err().to_string();
    assert!(err.contains("line 1") && err.contains("nope.tif"), "{err}");
}

#[test]
fn image_without_mask_lists_the_files_unless_skipped() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 12);
    std::fs::remove_file(d.path().join("masks/img_003.png")).unwrap();
    std::fs::remove_file(d.path().join("masks/img_007.png")).unwrap();
    let mut o = opts(d.path());
    let err = audit(&o).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, TilesError::MissingMasks { ref images, .. } if images.len() == 2),
        "{msg}"
    );
    assert!(
        msg.contains("img_003.png") && msg.contains("img_007.png") && msg.contains("skip_unpaired"),
        "{msg}"
    );
    o.skip_unpaired = true;
    let a = audit(&o).unwrap();
    assert_eq!((a.pairs, a.skipped.len()), (10, 2));
}

#[test]
fn mask_without_image_is_reported() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    write_mask_png(&d.path().join("masks/orphan.png"), &mask_of(8, 6, &[0])).unwrap();
    let msg = audit(&opts(d.path())).unwrap_err().to_string();
    assert!(
        msg.contains("1 mask(s) have no image") && msg.contains("orphan.png"),
        "{msg}"
    );
}

#[test]
fn size_mismatch_names_both_files_and_sizes() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    write_mask_png(&d.path().join("masks/img_004.png"), &mask_of(8, 5, &[0])).unwrap();
    let msg = audit(&opts(d.path())).unwrap_err().to_string();
    assert!(
        msg.contains("images/img_004.png is 8x6") && msg.contains("masks/img_004.png is 8x5"),
        "{msg}"
    );
}

#[test]
fn truncated_image_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    let p = d.path().join("images/img_002.png");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 20]).unwrap();
    let err = audit(&opts(d.path())).unwrap_err();
    assert!(
        matches!(err, TilesError::Decode { ref path, .. } if path == &p),
        "{err}"
    );
}

#[test]
fn unmapped_values_list_value_count_and_file_with_a_suggestion() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    write_mask_png(
        &d.path().join("masks/img_005.png"),
        &mask_of(8, 6, &[0, 255, 9]),
    )
    .unwrap();
    let msg = audit(&opts(d.path())).unwrap_err().to_string();
    assert!(
        msg.contains("9 (16 px, first in") && msg.contains("img_005.png"),
        "{msg}"
    );
}

#[test]
fn binary_0_255_masks_read_with_0_1_classes_are_caught() {
    // The classic trap: masks store 0/255, the config says rice_paddy = [1], and 255 is ignored by
    // default, so every paddy pixel would silently be dropped from the loss.
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    let mut o = opts(d.path());
    o.labels = LabelMap::identity(&["outer", "rice_paddy"]);
    let err = audit(&o).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, TilesError::EmptyClass { ref class, .. } if class == "rice_paddy"),
        "{msg}"
    );
    assert!(msg.contains("map 255 to rice_paddy?"), "{msg}");
}

#[test]
fn empty_split_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 2);
    let mut o = opts(d.path());
    o.val_ratio = 0.0;
    let err = audit(&o).unwrap_err();
    assert!(
        matches!(err, TilesError::EmptySplit { ref split, .. } if split == "val"),
        "{err}"
    );
}

#[test]
fn band_count_differences_are_errors() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    write_png(&d.path().join("images/img_006.png"), &u8_raster(8, 6, 4, 1)).unwrap();
    let msg = audit(&opts(d.path())).unwrap_err().to_string();
    assert!(
        msg.contains("img_006.png has 4 bands of u8") && msg.contains("3 bands of u8"),
        "{msg}"
    );
}

#[test]
fn prepare_refuses_to_mix_into_an_existing_dataset() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    prepare_folder(&opts(d.path())).unwrap();
    let msg = prepare_folder(&opts(d.path())).unwrap_err().to_string();
    assert!(msg.contains("already holds a dataset"), "{msg}");
}

#[test]
fn copies_when_hard_links_are_off() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 10);
    let mut o = opts(d.path());
    o.hard_link = false;
    let r = prepare_folder(&o).unwrap();
    let split = if r.meta.splits.get("train").copied().unwrap_or(0) > 0 {
        "train"
    } else {
        "val"
    };
    let ds = SegDataset::open(&d.path().join("out"), split).unwrap();
    let id = ds.ids().next().unwrap().to_string();
    let copied = d
        .path()
        .join("out/images")
        .join(split)
        .join(format!("{id}.png"));
    let source = d.path().join("images").join(format!("{id}.png"));
    assert_eq!(
        std::fs::read(&copied).unwrap(),
        std::fs::read(&source).unwrap()
    );
    // A copy, not a link: rewriting the source leaves the prepared file alone.
    std::fs::write(&source, b"changed").unwrap();
    assert_ne!(std::fs::read(&copied).unwrap(), b"changed");
}

/// Regression (issue #13): at the default ratio a hash split of a tiny folder could leave `val`
/// empty; with two or more pairs each split now gets at least one.
#[test]
fn two_pairs_at_the_default_ratio_give_one_val_sample_for_every_seed() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 2);
    for seed in 0..16 {
        let mut o = opts(d.path());
        o.seed = seed;
        let a = audit(&o).unwrap();
        assert_eq!(
            (a.splits["train"].samples, a.splits["val"].samples),
            (1, 1),
            "seed {seed}"
        );
    }
    // A high ratio still leaves train a sample.
    let mut o = opts(d.path());
    o.val_ratio = 0.99;
    let a = audit(&o).unwrap();
    assert_eq!((a.splits["train"].samples, a.splits["val"].samples), (1, 1));

    // The same for list lines without a split.
    let list = d.path().join("list.txt");
    std::fs::write(
        &list,
        "images/img_000.png masks/img_000.png\nimages/img_001.png masks/img_001.png\n",
    )
    .unwrap();
    let mut o = opts(d.path());
    o.list = Some(list);
    let a = audit(&o).unwrap();
    assert_eq!((a.splits["train"].samples, a.splits["val"].samples), (1, 1));
}

#[test]
fn adding_pairs_moves_no_existing_pair_once_both_splits_are_filled() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 20);
    let split_of = |root: &Path| {
        let r = prepare_folder(&opts(root)).unwrap();
        let ids = |s: &str| -> Vec<String> {
            std::fs::read_dir(r.out.join("images").join(s))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        (ids("train"), ids("val"))
    };
    let (train, val) = split_of(d.path());
    assert!(!val.is_empty() && !train.is_empty());
    let e = tempfile::tempdir().unwrap();
    flat(e.path(), 21);
    let (train2, val2) = split_of(e.path());
    assert!(train.iter().all(|f| train2.contains(f)));
    assert!(val.iter().all(|f| val2.contains(f)));
}

#[test]
fn a_single_pair_cannot_be_split_and_the_error_says_what_to_do() {
    let d = tempfile::tempdir().unwrap();
    flat(d.path(), 1);
    let err = prepare_folder(&opts(d.path())).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TilesError::TooLittleData { .. }), "{msg}");
    assert!(
        msg.contains("img_000.png") && msg.contains("add pairs") && msg.contains("--scenes"),
        "{msg}"
    );
    assert!(!d.path().join("out/images").exists());
}
