//! The predicted peak memory of `segfit predict` ([`train::InferenceEstimate`]), by part, for
//! the calibration in `crates/cli/bench/predict_memory.sh`:
//!
//! ```sh
//! cargo run --release -p train --example inference_memory -- PRESET BANDS LABELS TILE OVERLAP BATCH WIDTH
//! # e.g. mit-b0 4 2 512 128 4 2000
//! ```
//! prints one JSON object: the batch, each part and the total in MiB.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: inference_memory PRESET BANDS LABELS TILE OVERLAP BATCH WIDTH";
    let [preset, bands, labels, tile, overlap, batch, width] = args.as_slice() else {
        return Err(usage.into());
    };
    let number = |s: &String| {
        s.parse::<usize>()
            .map_err(|e| format!("{usage}: `{s}`: {e}"))
    };
    let mut config = train::preset(preset)?.with_num_labels(number(labels)?);
    config.num_channels = number(bands)?;
    let tile = number(tile)?;
    let e = train::InferenceEstimate::new(&train::InferenceInput {
        config: &config,
        tile: [tile, tile],
        batch: number(batch)?,
        overlap: number(overlap)?,
        scene_width: number(width)?,
    });
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "{{\"batch\": {}, \"forward_mib\": {:.1}, \"queues_mib\": {:.1}, \"blend_mib\": {:.1}, \
         \"weights_mib\": {:.1}, \"process_mib\": {:.1}, \"total_mib\": {:.1}}}",
        e.batch,
        mib(e.forward),
        mib(e.queues),
        mib(e.blend),
        mib(e.weights),
        mib(e.process),
        mib(e.total())
    );
    Ok(())
}
