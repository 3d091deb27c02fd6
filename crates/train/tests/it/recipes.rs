//! The fine-tuning recipes end to end on a 4-band synthetic set: a pretrained RGB fixture
//! adapted to the selected bands, CE + Dice with "auto" class weights, and early stopping
//! that ends the run and says why.

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use train::{RunOptions, TrainConfig};

type B = Autodiff<Flex>;

fn dataset(dir: &Path) -> PathBuf {
    let root = dir.join("data");
    let opts = tiles::SyntheticOptions {
        count: 8,
        size: 32,
        seed: 3,
        out: root.clone(),
        multispectral: true,
        ..Default::default()
    };
    tiles::prepare_synthetic(&opts).unwrap();
    root
}

fn tiny_fixture() -> PathBuf {
    testkit::fixture("segformer-tiny")
}

#[test]
fn pretrained_rgb_encoder_trains_on_selected_bands_and_stops_early() {
    let tmp = tempfile::tempdir().unwrap();
    let root = dataset(tmp.path());
    let text = format!(
        "[model]\npretrained = {:?}\ninput_adapt = \"mean\"\n\
         [data]\nroot = {:?}\nsize = [32, 32]\nnormalize = \"dataset\"\nbands = [3, 0, 1]\n\
         [loss]\nterms = [{{ kind = \"ce\" }}, {{ kind = \"dice\", weight = 0.5 }}]\nclass_weights = \"auto\"\n\
         [train]\nepochs = 6\nbatch_size = 4\nprogress = false\nworkers = 1\n\
         early_stopping = {{ metric = \"miou\", patience = 2, min_delta = 1.0 }}\n",
        tiny_fixture().to_str().unwrap(),
        root.to_str().unwrap()
    );
    let cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
    let run = tmp.path().join("run");
    let opts = RunOptions::new(run.clone());
    let summary = train::train::<B>(&cfg, &opts, &Default::default()).unwrap();

    // min_delta = 1 can never be met: the first evaluation sets the best, the next two do
    // not improve, and the run stops after epoch 3 of 6.
    let why = summary.stopped.expect("the run stopped early");
    assert!(
        why.contains("early stopping") && why.contains("miou"),
        "{why}"
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("checkpoints/last/trainer_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["stopped"].as_str(), Some(why.as_str()));
    assert_eq!(state["epoch"], 3);
    assert!(run.join("checkpoints/best/model.safetensors").is_file());

    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("checkpoints/best/config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["num_channels"], 3, "three selected bands");
    let pre = train::RunPreprocessing::load(&run).unwrap().unwrap();
    assert_eq!(pre.processor.band_indices, Some(vec![3, 0, 1]));
    assert_eq!(pre.bands, 3);
}
