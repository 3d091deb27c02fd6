//! `segfit plan --json` carries the predicted peak and the whole-process figure (issue #17
//! item 8: only the table printed them), and they are the sums of the terms beside them.

use std::process::Command;

use serde_json::Value;

fn plan_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_segfit"))
        .arg("plan")
        .arg("--json")
        .args(args)
        .output()
        .expect("segfit runs");
    assert!(
        out.status.success(),
        "segfit plan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("plan --json prints JSON")
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("`{key}` missing or not a byte count in {v}"))
}

/// The sums the JSON states, recomputed from its terms.
fn check_sums(e: &Value) {
    let activations: u64 = e["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| u(s, "activations") + u(s, "attention"))
        .sum();
    let backward = [
        "weights",
        "gradients",
        "optimizer",
        "decoder",
        "logits",
        "loss_terms",
        "inputs",
        "workspace",
    ]
    .iter()
    .map(|k| u(e, k))
    .sum::<u64>()
        + activations;
    assert_eq!(u(e, "backward_peak"), backward, "{e}");
    assert_eq!(
        u(e, "live_peak"),
        backward.max(u(e, "optimizer_step")),
        "{e}"
    );
    assert_eq!(u(e, "peak"), u(e, "live_peak") + u(e, "pool"), "{e}");
    assert_eq!(
        u(e, "whole_process"),
        u(e, "peak") + u(e, "process_baseline") + u(e, "loader"),
        "{e}"
    );
}

#[test]
fn plan_json_has_the_peak_and_the_whole_process_as_sums_of_their_parts() {
    let e = plan_json(&["--size", "256", "--batch", "2"]);
    check_sums(&e);
    // On the CPU the process around the step is counted: a baseline and the loader's samples.
    assert!(u(&e, "process_baseline") > 0 && u(&e, "loader") > 0, "{e}");
    assert!(u(&e, "whole_process") > u(&e, "peak"), "{e}");
    // More samples read ahead: a larger loader term and whole-process peak, the step unchanged.
    let more = plan_json(&["--size", "256", "--batch", "2", "--prefetch", "64"]);
    check_sums(&more);
    assert_eq!(u(&more, "peak"), u(&e, "peak"));
    assert!(u(&more, "loader") > u(&e, "loader"), "{more}");
    // The GPU path: the pool's reserve is in the peak.
    let gpu = plan_json(&["--size", "256", "--batch", "2", "--device", "cuda"]);
    check_sums(&gpu);
    assert!(u(&gpu, "pool") > 0, "{gpu}");
}

#[test]
fn a_fitted_budget_holds_the_whole_process() {
    let c = plan_json(&[
        "--size",
        "256",
        "--memory-budget",
        "300MiB",
        "--effective-batch",
        "8",
    ]);
    let e = &c["estimate"];
    check_sums(e);
    let budget = u(&c, "budget");
    assert_eq!(budget, 300 << 20);
    assert!(u(e, "whole_process") <= budget, "{c}");
    assert_eq!(u(&c, "micro_batch") * u(&c, "accumulation_steps"), 8, "{c}");
}
