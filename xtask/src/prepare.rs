//! `cargo xtask prepare`: the synthetic dataset the default config trains on.

use anyhow::Result;

/// The synthetic set of `configs/synthetic-quick.toml`: 80 tiles of 128×128 (64 train, 16 val),
/// as flag/value pairs that a flag of the caller's replaces.
pub const SYNTHETIC_ARGS: [(&str, &str); 2] = [("--count", "80"), ("--size", "128")];

/// Where the synthetic set goes unless `--out` is given.
pub const SYNTHETIC_OUT: &str = "data/synthetic";

/// Runs `segfit prepare` with `extra` flags: the synthetic set (default count and size unless
/// given) unless `--images` or `--scenes` points at real data.
pub fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["prepare".to_string()];
    // Synthetic unless the caller points at real data.
    if !extra.iter().any(|a| a == "--images" || a == "--scenes") {
        if !extra.iter().any(|a| a == "--synthetic") {
            args.push("--synthetic".to_string());
        }
        for (flag, value) in SYNTHETIC_ARGS {
            if !extra.iter().any(|a| a == flag) {
                args.extend([flag.to_string(), value.to_string()]);
            }
        }
    }
    if !extra.iter().any(|a| a == "--out") {
        args.extend(["--out".to_string(), SYNTHETIC_OUT.to_string()]);
    }
    args.extend(extra.iter().cloned());
    crate::segfit::run(&args)
}
