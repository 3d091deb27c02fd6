//! `SegDataset` through burn-dataset's trait and transforms: the composed datasets hold the same
//! decoded samples as the dataset itself, in the order the transforms say.

use burn_dataset::transform::{
    ComposedDataset, Mapper, MapperDataset, PartialDataset, ShuffledDataset,
};
use tiles::{Dataset, Sample, SampleError, SampleResult, SegDataset, SyntheticOptions};

fn prepared(dir: &std::path::Path) -> (SegDataset, SegDataset) {
    let opts = SyntheticOptions {
        count: 12,
        size: 32,
        out: dir.to_path_buf(),
        ..Default::default()
    };
    tiles::prepare_synthetic(&opts).unwrap();
    (
        SegDataset::open(dir, "train").unwrap(),
        SegDataset::open(dir, "val").unwrap(),
    )
}

fn sample(item: Option<SampleResult>) -> Sample {
    item.expect("in range").expect("decodes")
}

struct Id;
impl Mapper<SampleResult, Result<String, SampleError>> for Id {
    fn map(&self, item: &SampleResult) -> Result<String, SampleError> {
        item.as_ref().map(|s| s.id.clone()).map_err(Clone::clone)
    }
}

#[test]
fn composed_datasets_hold_the_datasets_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (train, val) = prepared(dir.path());
    let (n_train, n_val) = (train.len(), val.len());
    let expected: Vec<Sample> = (0..n_train)
        .map(|i| train.get(i).unwrap())
        .chain((0..n_val).map(|i| val.get(i).unwrap()))
        .collect();
    assert!(
        expected
            .iter()
            .all(|s| s.mask.is_some() && s.image.width == 32)
    );

    // train then val, in index order
    let all = ComposedDataset::new(vec![train.clone(), val.clone()]);
    assert_eq!(Dataset::len(&all), n_train + n_val);
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(&sample(all.get(i)), want, "composed item {i}");
    }
    assert!(all.get(n_train + n_val).is_none());

    // a seeded permutation of the same samples, the same for the same seed
    let shuffled = ShuffledDataset::new(all, 7);
    let ids: Vec<String> = (0..shuffled.len())
        .map(|i| sample(shuffled.get(i)).id)
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    let mut want_ids: Vec<String> = expected.iter().map(|s| s.id.clone()).collect();
    want_ids.sort();
    assert_eq!(sorted, want_ids);
    let again = ShuffledDataset::new(ComposedDataset::new(vec![train, val]), 7);
    assert_eq!(sample(again.get(3)), sample(shuffled.get(3)));
    let by_id = |id: &str| expected.iter().find(|s| s.id == id).unwrap().clone();
    assert_eq!(sample(shuffled.get(0)), by_id(&ids[0]));

    // a window of it, then mapped to ids
    let window = PartialDataset::new(shuffled, 2, 6);
    assert_eq!(window.len(), 4);
    assert_eq!(sample(window.get(0)), by_id(&ids[2]));
    let mapped = MapperDataset::new(window, Id);
    let got: Vec<String> = mapped.iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, ids[2..6]);
}

#[test]
fn a_corrupt_file_is_an_error_item_through_the_transforms() {
    let dir = tempfile::tempdir().unwrap();
    let (train, _) = prepared(dir.path());
    let first = train.ids().next().unwrap().to_string();
    let image = dir.path().join("images/train").join(format!("{first}.png"));
    assert!(image.is_file(), "{}", image.display());
    std::fs::write(&image, b"truncated").unwrap();
    let n = train.len();
    let mapped = MapperDataset::new(ShuffledDataset::new(train, 1), Id);
    let results: Vec<_> = mapped.iter().collect();
    assert_eq!(results.len(), n, "no item goes missing");
    let errors: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains(&first), "{}", errors[0]);
}
