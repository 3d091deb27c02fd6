//! Spatial learning: on `tiles`' texture task (horizontal vs vertical stripes of the same two
//! colours) the best classifier of a pixel's colour is at chance, and MiT-B0 trained from
//! scratch through `train::train` (what `segfit train` runs) learns the task.
//!
//! The paddies of the synthetic dataset are nearly separable by colour alone, so learning them
//! does not show that the model uses its receptive field; this task does.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use tiles::{RasterData, SegDataset, TextureOptions};
use train::{RunOptions, TrainConfig};

use crate::common::alone;

type B = Autodiff<Flex>;

/// IoU per class and pixel accuracy of a 2×2 confusion matrix `[truth][prediction]`.
fn miou_and_accuracy(confusion: &[[u64; 2]; 2]) -> (f64, f64) {
    let total: u64 = confusion.iter().flatten().sum();
    let iou = |c: usize| {
        let tp = confusion[c][c] as f64;
        let fp = confusion[1 - c][c] as f64;
        let fn_ = confusion[c][1 - c] as f64;
        tp / (tp + fp + fn_)
    };
    let correct = (confusion[0][0] + confusion[1][1]) as f64;
    ((iou(0) + iou(1)) / 2.0, correct / total as f64)
}

/// Every pixel of a split as (colour quantised to 4 bits per band, class).
fn pixels(root: &Path, split: &str) -> Vec<(u16, u8)> {
    let d = SegDataset::open(root, split).unwrap();
    let mut out = Vec::new();
    for i in 0..d.len() {
        let s = d.get(i).unwrap();
        let RasterData::U8(px) = &s.image.data else {
            panic!("texture images are u8")
        };
        let mask = s.mask.unwrap();
        for (rgb, &c) in px.chunks(3).zip(&mask.data) {
            let q = (u16::from(rgb[0]) >> 4) << 8
                | (u16::from(rgb[1]) >> 4) << 4
                | u16::from(rgb[2]) >> 4;
            out.push((q, c));
        }
    }
    out
}

/// The Bayes-optimal per-pixel colour classifier, estimated on the train pixels (the majority
/// class of each quantised colour, the prior's majority for colours never seen), scored on val.
fn per_pixel_colour_classifier(root: &Path) -> (f64, f64) {
    let mut counts: HashMap<u16, [u64; 2]> = HashMap::new();
    let mut prior = [0u64; 2];
    for (q, c) in pixels(root, "train") {
        counts.entry(q).or_default()[c as usize] += 1;
        prior[c as usize] += 1;
    }
    let fallback = usize::from(prior[1] > prior[0]);
    let mut confusion = [[0u64; 2]; 2];
    for (q, c) in pixels(root, "val") {
        let pred = match counts.get(&q) {
            Some(n) if n[0] != n[1] => usize::from(n[1] > n[0]),
            _ => fallback,
        };
        confusion[c as usize][pred] += 1;
    }
    miou_and_accuracy(&confusion)
}

#[test]
fn mit_b0_learns_stripe_orientation_that_colour_cannot_tell() {
    alone!(mit_b0_learns_stripe_orientation_that_colour_cannot_tell);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    let report = tiles::prepare_texture(&TextureOptions {
        count: 80,
        size: 64,
        seed: 3,
        out: root.clone(),
        val_ratio: 0.2,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        report.meta.classes,
        ["horizontal_stripes", "vertical_stripes"]
    );

    // Balanced classes, and a colour classifier at chance.
    let val = pixels(&root, "val");
    let share1 = val.iter().filter(|p| p.1 == 1).count() as f64 / val.len() as f64;
    let (colour_miou, colour_acc) = per_pixel_colour_classifier(&root);
    eprintln!(
        "val share of vertical stripes {share1:.3}; per-pixel colour classifier: mIoU {colour_miou:.3}, accuracy {colour_acc:.3}"
    );
    assert!((0.35..0.65).contains(&share1), "val class balance {share1}");
    assert!(
        colour_miou <= 0.55 && (colour_acc - 0.5).abs() < 0.1,
        "a colour classifier should be at chance: mIoU {colour_miou}, accuracy {colour_acc}"
    );

    let text = format!(
        "[model]\npreset = \"mit-b0\"\n[data]\nroot = {:?}\nsize = [64, 64]\n\
         [optimizer]\nlr = 1e-3\nhead_lr_mult = 10.0\n\
         [train]\nprogress = false\nworkers = 2\nbatch_size = 8\nseed = 7\nepochs = 8\neval_every = 8\noverlay_samples = 0\n",
        root.to_str().unwrap()
    );
    let cfg = TrainConfig::from_toml_str(&text, &[]).unwrap();
    let started = Instant::now();
    let summary = train::train::<B>(
        &cfg,
        &RunOptions::new(tmp.path().join("run")),
        &Default::default(),
    )
    .unwrap();
    let eval = summary.last_eval.expect("evaluated");
    let rows = eval.confusion.rows();
    let confusion = [[rows[0][0], rows[0][1]], [rows[1][0], rows[1][1]]];
    let (miou, acc) = miou_and_accuracy(&confusion);
    eprintln!(
        "MiT-B0 after {} steps ({:.1} s): val mIoU {miou:.3}, accuracy {acc:.3} (colour classifier {colour_miou:.3})",
        summary.steps,
        started.elapsed().as_secs_f64()
    );
    assert!(
        (miou - eval.metrics.miou).abs() < 1e-9,
        "the run's mIoU {} vs the confusion's {miou}",
        eval.metrics.miou
    );
    assert!(
        miou >= 0.75 && miou >= colour_miou + 0.25,
        "val mIoU {miou} (colour classifier {colour_miou})"
    );
}
