//! Seeded mutation fuzzing (issue #30, item 4) of the binary's own parsers: `.npy` arrays
//! (`--pixel-values`), HF `preprocessor_config.json` and `config.json`. Each gets 5000 mutated
//! inputs and must answer every one with a value or an error, never a panic or a hang; a
//! share of the mutations must still parse, so the parsers are exercised past their first
//! check.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

/// xorshift64: cheap, seeded, no RNG crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte-level mutations: flips, edge values, deletions, duplicated runs, truncation.
fn mutate_bytes(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        if v.is_empty() {
            break;
        }
        let at = rng.below(v.len());
        match rng.below(5) {
            0 => v[at] ^= 1 << rng.below(8),
            1 => v[at] = [0, b'9', b'(', b',', 0xff][rng.below(5)],
            2 => {
                let end = (at + rng.below(12)).min(v.len());
                v.drain(at..end);
            }
            3 => {
                let end = (at + rng.below(24)).min(v.len());
                let run = v[at..end].to_vec();
                v.splice(at..at, run);
            }
            _ => v.truncate(at),
        }
    }
    v
}

/// Hostile JSON values, spliced in place of a value of the seed document.
const HOSTILE: [&str; 14] = [
    "-1",
    "0",
    "1e308",
    "-1e308",
    "18446744073709551616",
    "4294967296",
    "1.5",
    "null",
    "true",
    "\"\"",
    "[]",
    "{}",
    "[1e308, -0.0]",
    "\"\\u0000\"",
];

/// Value-level mutations of a JSON object (a value replaced, a key dropped or renamed), then
/// sometimes byte-level ones on its text.
fn mutate_json(rng: &mut Rng, seed: &Value) -> Vec<u8> {
    let mut doc = seed.clone();
    if let Value::Object(map) = &mut doc {
        for _ in 0..1 + rng.below(2) {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.below(keys.len())];
            match rng.below(4) {
                0 => {
                    map.remove(key);
                }
                1 => {
                    let v = map.remove(key).unwrap_or(Value::Null);
                    map.insert(format!("{key}_"), v);
                }
                _ => {
                    let v = serde_json::from_str(HOSTILE[rng.below(HOSTILE.len())]).unwrap();
                    // Inside an array or object value too, where sizes and means live.
                    match map.get_mut(key) {
                        Some(Value::Array(a)) if !a.is_empty() => {
                            let i = rng.below(a.len());
                            a[i] = v;
                        }
                        Some(Value::Object(o)) if !o.is_empty() => {
                            let k = o.keys().nth(rng.below(o.len())).unwrap().clone();
                            o.insert(k, v);
                        }
                        Some(slot) => *slot = v,
                        None => {}
                    }
                }
            }
        }
    }
    let text = serde_json::to_vec_pretty(&doc).unwrap();
    if rng.below(3) == 0 {
        mutate_bytes(rng, &text)
    } else {
        text
    }
}

/// Runs `parse` on 5000 mutations from `make`, catching panics; returns how many parsed.
fn fuzz(
    name: &str,
    seed: u64,
    mut make: impl FnMut(&mut Rng) -> Vec<u8>,
    parse: impl Fn(&[u8]) -> bool,
) -> usize {
    let mut rng = Rng(seed);
    let mut ok = 0;
    for case in 0..5000 {
        let input = make(&mut rng);
        match catch_unwind(AssertUnwindSafe(|| parse(&input))) {
            Ok(parsed) => ok += parsed as usize,
            Err(_) => panic!(
                "{name} case {case} panicked on {:?}",
                String::from_utf8_lossy(&input)
            ),
        }
    }
    ok
}

#[test]
fn mutated_npy_arrays_never_panic() {
    let seeds = [
        crate::npy::encode_f32(
            &[1, 3, 4, 5],
            &(0..60).map(|i| i as f32).collect::<Vec<_>>(),
        ),
        crate::npy::encode_f32(&[2, 2], &[1.0, -2.0, f32::NAN, 4.0]),
    ];
    let ok = fuzz(
        "npy",
        0x5eed_0001,
        |rng| {
            let i = rng.below(2);
            mutate_bytes(rng, &seeds[i])
        },
        |b| crate::npy::decode_f32(b).is_ok(),
    );
    assert!(ok > 100, "{ok} of 5000 parsed");
}

#[test]
fn mutated_hf_preprocessor_configs_never_panic() {
    let seed: Value = serde_json::from_str(
        r#"{"do_normalize": true, "do_reduce_labels": false, "do_rescale": true,
            "do_resize": true, "image_mean": [0.485, 0.456, 0.406],
            "image_processor_type": "SegformerImageProcessor",
            "image_std": [0.229, 0.224, 0.225], "resample": 2,
            "rescale_factor": 0.00392156862745098, "size": {"height": 512, "width": 512}}"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("preprocessor_config.json");
    let ok = fuzz(
        "preprocessor_config.json",
        0x5eed_0002,
        |rng| mutate_json(rng, &seed),
        |b| {
            std::fs::write(&path, b).unwrap();
            crate::hf_preprocessor::read_hf_preprocessor_config(&path).is_ok()
        },
    );
    assert!(ok > 100, "{ok} of 5000 parsed");
}

#[test]
fn mutated_hf_model_configs_never_panic() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/fixtures/segformer-tiny/config.json");
    let seed: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let ok = fuzz(
        "config.json",
        0x5eed_0003,
        |rng| mutate_json(rng, &seed),
        |b| {
            std::str::from_utf8(b)
                .ok()
                .is_some_and(|t| segformer::SegformerConfig::from_json_str(t).is_ok())
        },
    );
    assert!(ok > 100, "{ok} of 5000 parsed");
}
