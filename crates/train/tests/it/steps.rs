//! Single optimizer steps through `train::train` (the path `segfit train` runs) against
//! gradients computed here, directly from the model and the same samples: gradient clipping,
//! gradient accumulation, and f16 training with the loss scaler beside f32.
//!
//! Every run starts from the same saved weights (`model.pretrained`) with dropout and drop path
//! off, so a run's first update is a function of its gradients alone. AdamW's first step is
//! `Δ = -lr · g / (|g| + eps)` (bias correction cancels); with a large `eps` it is nearly
//! linear in `g`, so a wrong factor on the gradients (clipping, averaging, unscaling) shows in
//! the update instead of being normalised away as it is with the usual `eps = 1e-8`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use augment::{Pipeline, PipelineConfig, SegformerProcessor, collate};
use burn::backend::{Autodiff, Flex};
use tiles::SegDataset;
use train::{RunOptions, SampleSource, TrainConfig};

type B = Autodiff<Flex>;
type Params = BTreeMap<String, Vec<f64>>;

const SIZE: usize = 64;
/// AdamW's learning rate and eps for the one-step runs (see the module docs).
const LR: f64 = 1.0;
const EPS: f64 = 1.0;

struct Setup {
    tmp: tempfile::TempDir,
    root: PathBuf,
    init: PathBuf,
}

/// A synthetic dataset of `count` samples (a fifth of them in val) and a saved initial mit-tiny
/// model. With `identical`, every train sample is a copy of the first one.
fn setup(count: usize, identical: bool) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    tiles::prepare_synthetic(&tiles::SyntheticOptions {
        count,
        size: SIZE,
        seed: 21,
        out: root.clone(),
        ..Default::default()
    })
    .unwrap();
    if identical {
        for kind in ["images", "masks"] {
            let dir = root.join(kind).join("train");
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            for f in &files[1..] {
                std::fs::copy(&files[0], f).unwrap();
            }
        }
    }
    let init = tmp.path().join("init");
    let cfg = config(&root, None, &[]);
    let names = SegDataset::open(&root, "train")
        .unwrap()
        .labels()
        .class_names();
    let arch = train::model_config(&cfg.model, &names, 3).unwrap();
    let device = Default::default();
    <Flex as burn::tensor::backend::Backend>::seed(&device, 3);
    let model = arch.init::<Flex>(&device).unwrap();
    segformer::save_hf_dir(&model, &init).unwrap();
    Setup { tmp, root, init }
}

fn config(root: &Path, init: Option<&Path>, extra: &[String]) -> TrainConfig {
    let pretrained = init
        .map(|p| format!("pretrained = {:?}\n", p.to_str().unwrap()))
        .unwrap_or_default();
    let text = format!(
        "[model]\npreset = \"mit-tiny\"\n{pretrained}drop_path_rate = 0.0\nclassifier_dropout_prob = 0.0\n\
         [data]\nroot = {:?}\nsize = [{SIZE}, {SIZE}]\n\
         [optimizer]\nlr = {LR:?}\neps = {EPS:?}\nweight_decay = 0.0\nhead_lr_mult = 1.0\n\
         [schedule]\nkind = \"constant\"\n\
         [train]\nprogress = false\nworkers = 1\nepochs = 1\nmax_steps = 1\nbatch_size = 4\nseed = 1\noverlay_samples = 0\nlog_every = 1\n",
        root.to_str().unwrap()
    );
    TrainConfig::from_toml_str(&text, extra).unwrap()
}

/// The trainable parameters of an HF state dict, in f64 (BatchNorm's running statistics and
/// counters are buffers: they move in the forward pass, not by the optimizer).
fn params(state: Vec<(String, burn::tensor::TensorData)>) -> Params {
    state
        .into_iter()
        .filter(|(k, _)| !k.contains("running_") && !k.contains("num_batches"))
        .map(|(k, d)| {
            let v = d.convert::<f32>().to_vec::<f32>().unwrap();
            (k, v.into_iter().map(f64::from).collect())
        })
        .collect()
}

fn load(dir: &Path) -> Params {
    let (m, _) = segformer::load_hf_dir::<Flex>(dir, &Default::default()).unwrap();
    params(segformer::hf_state_dict(&m))
}

/// Trains `s`'s config with `extra` overrides in run directory `name`; the run's directory and
/// its final parameters.
fn run(s: &Setup, name: &str, extra: &[&str]) -> (PathBuf, Params) {
    let extra: Vec<String> = extra.iter().map(|e| e.to_string()).collect();
    let cfg = config(&s.root, Some(&s.init), &extra);
    let dir = s.tmp.path().join(name);
    let summary =
        train::train::<B>(&cfg, &RunOptions::new(dir.clone()), &Default::default()).unwrap();
    assert_eq!(summary.skipped_steps, 0, "{name}: a step was skipped");
    let p = load(&dir.join("checkpoints/last"));
    (dir, p)
}

/// The mean over `groups` of the gradient of each group's loss (one forward of the group's
/// train samples as a batch, BatchNorm on the group's statistics, as in training), computed
/// here from the initial weights.
fn gradient(s: &Setup, groups: &[Vec<usize>]) -> Params {
    let device = Default::default();
    let (model, _) = segformer::load_hf_dir::<B>(&s.init, &device).unwrap();
    let source = Arc::new(SampleSource {
        dataset: SegDataset::open(&s.root, "train").unwrap(),
        pipeline: Pipeline::new(&PipelineConfig::default()).unwrap(),
        processor: SegformerProcessor {
            size: Some((SIZE, SIZE)),
            ..Default::default()
        },
        seed: 1,
    });
    let mut sum = Params::new();
    for group in groups {
        let items: Vec<_> = group.iter().map(|&i| source.load(0, i).unwrap()).collect();
        let batch = collate(&items).unwrap();
        let (x, y) = infer::batch_tensors::<B>(&batch, &device);
        let grads = model.loss(model.forward(x), y).backward();
        for (k, g) in params(segformer::hf_gradients(&model, &grads)) {
            let acc = sum.entry(k).or_insert_with(|| vec![0.0; g.len()]);
            for (a, v) in acc.iter_mut().zip(g) {
                *a += v / groups.len() as f64;
            }
        }
    }
    sum
}

fn global_norm(g: &Params) -> f64 {
    g.values().flatten().map(|v| v * v).sum::<f64>().sqrt()
}

/// AdamW's first update (weight decay off) from gradients `g` scaled by `factor`.
fn first_update(g: &Params, factor: f64) -> Params {
    g.iter()
        .map(|(k, v)| {
            let u = v
                .iter()
                .map(|g| {
                    let g = g * factor;
                    -LR * g / (g.abs() + EPS)
                })
                .collect();
            (k.clone(), u)
        })
        .collect()
}

fn delta(after: &Params, before: &Params) -> Params {
    after
        .iter()
        .map(|(k, a)| {
            (
                k.clone(),
                a.iter().zip(&before[k]).map(|(a, b)| a - b).collect(),
            )
        })
        .collect()
}

/// `‖a − b‖ / ‖b‖` over every parameter together.
fn rel(a: &Params, b: &Params) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (k, bv) in b {
        for (x, y) in a[k].iter().zip(bv) {
            num += (x - y).powi(2);
            den += y * y;
        }
    }
    (num / den).sqrt()
}

/// Float tolerance of an update reproduced here: the runs sum the same terms in another order
/// (batch order, accumulation), and the f32 weights round the update.
const TOL: f64 = 1e-4;

#[test]
fn clip_grad_norm_scales_the_applied_update() {
    let s = setup(5, false);
    let w0 = load(&s.init);
    // The one batch of the run: all four train samples (their order does not change the mean).
    let g = gradient(&s, &[vec![0, 1, 2, 3]]);
    let norm = global_norm(&g);

    let (_, plain) = run(&s, "plain", &[]);
    let unclipped = first_update(&g, 1.0);
    let e_plain = rel(&delta(&plain, &w0), &unclipped);

    let max = norm / 4.0;
    let (_, clipped) = run(
        &s,
        "clipped",
        &[&format!("optimizer.clip_grad_norm={max:?}")],
    );
    // torch.nn.utils.clip_grad_norm_: gradients × max_norm / (total_norm + 1e-6).
    let want = first_update(&g, max / (norm + 1e-6));
    let e_clip = rel(&delta(&clipped, &w0), &want);
    let e_clip_vs_plain = rel(&delta(&clipped, &w0), &unclipped);

    let loose = norm * 1e3;
    let (_, loose_run) = run(
        &s,
        "loose",
        &[&format!("optimizer.clip_grad_norm={loose:?}")],
    );
    eprintln!(
        "gradient norm {norm:.4}; update error: unclipped {e_plain:.2e}, clipped to {max:.4} {e_clip:.2e} \
         (vs the unclipped update {e_clip_vs_plain:.2})"
    );
    assert!(e_plain < TOL, "unclipped update off by {e_plain}");
    assert!(e_clip < TOL, "clipped update off by {e_clip}");
    assert!(
        e_clip_vs_plain > 0.5,
        "clipping to a quarter of the norm barely changed the update ({e_clip_vs_plain})"
    );
    assert!(
        loose_run == plain,
        "a max_norm far above the gradient norm changed the update"
    );
}

#[test]
fn accumulated_micro_batches_step_on_their_mean_gradient() {
    // Distinct samples, micro-batches of one: the step must use the mean of the four
    // single-sample gradients, whatever order the epoch visits them in.
    let s = setup(5, false);
    let w0 = load(&s.init);
    let singles = gradient(&s, &[vec![0], vec![1], vec![2], vec![3]]);
    let (_, acc) = run(
        &s,
        "k4b1",
        &["train.batch_size=1", "train.accumulation_steps=4"],
    );
    let e_acc = rel(&delta(&acc, &w0), &first_update(&singles, 1.0));
    // NOTE: one batch of four is not the same step here: the decode head's BatchNorm
    // normalises with the statistics of each micro-batch in training mode (as in PyTorch), so
    // the gradients of one sample at a time differ from those of the four together.
    let batch = gradient(&s, &[vec![0, 1, 2, 3]]);
    let bn_gap = rel(&first_update(&batch, 1.0), &first_update(&singles, 1.0));
    eprintln!(
        "k=4 × b=1: update error {e_acc:.2e}; one batch of 4 differs by {bn_gap:.2e} (BatchNorm statistics)"
    );
    assert!(e_acc < TOL, "accumulated update off by {e_acc}");
    assert!(
        bn_gap > 10.0 * TOL,
        "the test cannot tell the mean of micro-batch gradients from the batch gradient"
    );

    // Identical samples: every micro-batch has the batch's BatchNorm statistics, so k
    // micro-batches of b must give the step of one batch of k·b.
    let s = setup(5, true);
    let w0 = load(&s.init);
    let g = gradient(&s, &[vec![0, 1, 2, 3]]);
    let (_, one) = run(&s, "k1b4", &[]);
    let (_, two) = run(
        &s,
        "k2b2",
        &["train.batch_size=2", "train.accumulation_steps=2"],
    );
    let (_, four) = run(
        &s,
        "k4b1",
        &["train.batch_size=1", "train.accumulation_steps=4"],
    );
    let want = first_update(&g, 1.0);
    let (d1, d2, d4) = (delta(&one, &w0), delta(&two, &w0), delta(&four, &w0));
    let (e1, e2, e4) = (rel(&d1, &want), rel(&d2, &want), rel(&d4, &want));
    let (e21, e41) = (rel(&d2, &d1), rel(&d4, &d1));
    eprintln!(
        "identical samples: update error k1b4 {e1:.2e}, k2b2 {e2:.2e}, k4b1 {e4:.2e}; vs k1b4: k2b2 {e21:.2e}, k4b1 {e41:.2e}"
    );
    for (what, e) in [
        ("k1b4", e1),
        ("k2b2", e2),
        ("k4b1", e4),
        ("k2b2 vs k1b4", e21),
        ("k4b1 vs k1b4", e41),
    ] {
        assert!(e < TOL, "{what}: off by {e}");
    }
}

/// The `loss` of every step record of a run's `metrics.jsonl`.
fn step_losses(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "step")
        .map(|v| v["loss"].as_f64().unwrap())
        .collect()
}

fn trainer_state(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("checkpoints/last/trainer_state.json")).unwrap())
        .unwrap()
}

#[test]
fn f16_steps_track_f32_and_the_scaler_stays_clean() {
    // Eight real steps of two samples from the same weights, in f32 and in f16 with the
    // GradScaler. eps = 1e-3 keeps AdamW sensitive to the gradients' scale (with 1e-8 its
    // update is nearly scale-free), so gradients left scaled by 2^16 would not track f32.
    let s = setup(10, false);
    let w0 = load(&s.init);
    let common = [
        "optimizer.lr=2e-3",
        "optimizer.eps=1e-3",
        "train.batch_size=2",
        "train.epochs=2",
        "train.max_steps=8",
    ];
    let with = |p: &'static str| -> Vec<&str> {
        let mut v = common.to_vec();
        v.push(p);
        v
    };
    let (d32, w32) = run(&s, "f32", &with("train.precision=\"f32\""));
    let (d16, w16) = run(&s, "f16", &with("train.precision=\"f16\""));
    let (l32, l16) = (step_losses(&d32), step_losses(&d16));
    eprintln!("f32 losses {l32:.4?}\nf16 losses {l16:.4?}");
    assert_eq!((l32.len(), l16.len()), (8, 8), "one logged loss per step");
    assert!(l16.iter().all(|l| l.is_finite()), "{l16:?}");
    let worst_loss = l16
        .iter()
        .zip(&l32)
        .map(|(a, b)| (a - b).abs() / b)
        .fold(0.0, f64::max);
    let (start, end) = (l16[0], (l16[6] + l16[7]) / 2.0);
    assert!(end < 0.9 * start, "f16 loss did not decrease: {l16:?}");

    assert!(
        w16.values().flatten().all(|v| v.is_finite()),
        "non-finite f16 weights"
    );
    let (u16, u32) = (delta(&w16, &w0), delta(&w32, &w0));
    let moved = global_norm(&u16);
    let gap = rel(&u16, &u32);
    eprintln!(
        "f16 vs f32: worst step loss gap {worst_loss:.2e}, update gap {gap:.2e} (f16 update norm {moved:.3e})"
    );
    assert!(moved > 0.0, "f16 steps left the weights unchanged");
    assert!(worst_loss < 0.02, "f16 step loss off f32's by {worst_loss}");
    assert!(gap < 0.15, "f16 updates off f32's by {gap}");

    // PyTorch GradScaler semantics: eight clean steps at the initial scale 2^16 (growth only
    // after 2000), nothing skipped; f32 never touches the scaler.
    let st16 = trainer_state(&d16);
    assert_eq!(st16["scaler"]["scale"].as_f64(), Some(65536.0), "{st16}");
    assert_eq!(st16["scaler"]["clean_steps"].as_u64(), Some(8), "{st16}");
    assert_eq!(st16["scaler"]["skipped"].as_u64(), Some(0), "{st16}");
    let st32 = trainer_state(&d32);
    assert_eq!(st32["scaler"]["clean_steps"].as_u64(), Some(0), "{st32}");
}
