//! Prints forward / train-step timings of a SegFormer on the CPU backend.
//!
//! `cargo run --release -p segformer --example bench_model -- [b0|b1|b2] [size] [batch] [iters]`

use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::tensor::{Distribution, Int, Tensor};
use segformer::SegformerConfig;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset = args.first().map(String::as_str).unwrap_or("b0");
    let size: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(256);
    let batch: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let iters: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let config = match preset {
        "b1" => SegformerConfig::mit_b1(),
        "b2" => SegformerConfig::mit_b2(),
        _ => SegformerConfig::mit_b0(),
    }
    .with_num_labels(2);
    let device = Default::default();

    let model = config.init::<Flex>(&device).expect("valid preset");
    println!(
        "mit-{preset}: {} parameters (incl. BatchNorm running stats), input [{batch}, 3, {size}, {size}]",
        model.num_params()
    );
    let x = Tensor::<Flex, 4>::random(
        [batch, 3, size, size],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    let _ = model.forward(x.clone()).into_data(); // warm-up
    let start = Instant::now();
    for _ in 0..iters {
        let _ = model.forward(x.clone()).into_data();
    }
    let eval = start.elapsed().as_secs_f64() / iters as f64;
    println!(
        "eval forward: {:.1} ms/batch, {:.1} images/s",
        eval * 1e3,
        batch as f64 / eval
    );

    let model = config
        .init::<Autodiff<Flex>>(&device)
        .expect("valid preset");
    let x = Tensor::<Autodiff<Flex>, 4>::random(
        [batch, 3, size, size],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    let labels = Tensor::<Autodiff<Flex>, 3, Int>::zeros([batch, size, size], &device);
    let step = || {
        let loss = model.loss(model.forward(x.clone()), labels.clone());
        let _ = loss.backward();
    };
    step(); // warm-up
    let start = Instant::now();
    for _ in 0..iters {
        step();
    }
    let train = start.elapsed().as_secs_f64() / iters as f64;
    println!(
        "train forward+backward: {:.1} ms/batch, {:.1} images/s",
        train * 1e3,
        batch as f64 / train
    );
}
