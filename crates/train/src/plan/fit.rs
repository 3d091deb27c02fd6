//! Fitting a run into a memory budget: the micro-batch, accumulation, precision and
//! checkpointing whose predicted peak fits, and the byte sizes budgets are written in.

use serde::Serialize;

use super::{GIB, LoaderInput, MIB, MemoryEstimate, MemoryPlan, PlanInputTemplate};
use crate::config::Precision;

/// How a run fits its budget: micro-batch, accumulation, precision, checkpointing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitChoice {
    /// Images per forward/backward.
    pub micro_batch: usize,
    /// Micro-batches per optimizer step (`micro_batch × accumulation_steps` = the effective batch).
    pub accumulation_steps: usize,
    /// The precision to train in.
    pub precision: Precision,
    /// Whether to enable activation checkpointing.
    pub checkpointing: bool,
    /// The budget, in bytes.
    pub budget: u64,
    /// The prediction for the chosen micro-batch.
    pub estimate: MemoryEstimate,
}

impl FitChoice {
    /// One line for logs: `batch 2 × 8 steps in bf16: predicted 3.1 GiB of 8 GiB` (the whole
    /// process when the fit counted it, see [`fit_whole_process`]).
    pub fn reason(&self) -> String {
        let prec = self.precision.name();
        let ck = if self.checkpointing {
            " with checkpointing"
        } else {
            ""
        };
        format!(
            "batch {} × {} steps in {prec}{ck}: predicted {} of {}",
            self.micro_batch,
            self.accumulation_steps,
            human(self.estimate.whole_process_bytes()),
            human(self.budget)
        )
    }
}

/// `3.1 GiB`, `512 MiB`: one decimal, trailing `.0` dropped.
pub fn human(bytes: u64) -> String {
    let (v, unit) = if bytes as f64 >= GIB {
        (bytes as f64 / GIB, "GiB")
    } else {
        (bytes as f64 / MIB, "MiB")
    };
    let s = format!("{v:.1}");
    format!("{} {unit}", s.strip_suffix(".0").unwrap_or(&s))
}

/// Chooses the largest micro-batch dividing `effective_batch` whose predicted peak fits
/// `budget_bytes`, and the accumulation steps that make the effective batch exact. When even
/// one image does not fit, tries the device's half precision (if the template is f32), then
/// checkpointing, then both.
///
/// Errors when `effective_batch` is 0, or nothing fits; the message names the budget and the
/// smallest predicted peak.
pub fn fit_budget(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
) -> Result<FitChoice, String> {
    fit(budget_bytes, effective_batch, template, None)
}

/// [`fit_budget`] against the whole process ([`MemoryEstimate::whole_process_bytes`]): the
/// step's peak plus the process baseline and the `loader`'s samples, so that a budget the
/// planner accepts holds for the process, not only for its tensors. What `--memory-budget`
/// uses.
pub fn fit_whole_process(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
    loader: &LoaderInput,
) -> Result<FitChoice, String> {
    fit(budget_bytes, effective_batch, template, Some(loader))
}

fn fit(
    budget_bytes: u64,
    effective_batch: usize,
    template: &PlanInputTemplate<'_>,
    loader: Option<&LoaderInput>,
) -> Result<FitChoice, String> {
    if effective_batch == 0 {
        return Err("the effective batch must be at least 1".into());
    }
    let half = match (template.precision, template.reduced) {
        (Precision::F32, Some(reduced)) => reduced,
        (precision, _) => precision,
    };
    let mut modes = vec![(template.precision, template.checkpointing)];
    for m in [
        (half, template.checkpointing),
        (template.precision, true),
        (half, true),
    ] {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    let predict = |batch, (precision, checkpointing)| {
        let input = template.mode(batch, precision, checkpointing);
        let estimate = MemoryPlan::predict(&input);
        match loader {
            Some(l) => estimate.with_process(&input, l),
            None => estimate,
        }
    };
    for &mode in &modes {
        for micro in (1..=effective_batch).rev() {
            if !effective_batch.is_multiple_of(micro) {
                continue;
            }
            let estimate = predict(micro, mode);
            if estimate.whole_process_bytes() <= budget_bytes {
                return Ok(FitChoice {
                    micro_batch: micro,
                    accumulation_steps: effective_batch / micro,
                    precision: mode.0,
                    checkpointing: mode.1,
                    budget: budget_bytes,
                    estimate,
                });
            }
        }
    }
    let (smallest, (precision, checkpointing)) = modes
        .iter()
        .map(|&m| (predict(1, m).whole_process_bytes(), m))
        .min_by_key(|&(bytes, _)| bytes)
        .unwrap_or((0, (template.precision, template.checkpointing)));
    let ck = if checkpointing {
        " with checkpointing"
    } else {
        ""
    };
    Err(format!(
        "a memory budget of {} is too small for {}×{} inputs: the smallest predicted peak is {} \
         (batch 1 in {}{ck}); raise the budget or lower data.size",
        human(budget_bytes),
        template.height,
        template.width,
        human(smallest),
        precision.name()
    ))
}

/// Parses a byte size: a number with an optional unit, `8GiB`, `7.5G`, `512MiB`, `8000MB`,
/// `1048576`. Units are case-insensitive.
///
/// NOTE: bare `K`/`M`/`G`/`T` are binary (like `GiB`), as memory sizes are usually meant;
/// `KB`/`MB`/`GB`/`TB` are decimal (SI).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s
        .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (s[..split].trim(), s[split..].trim());
    let bad = |why: &str| {
        Err(format!(
            "`{text}` is not a memory size ({why}); write e.g. 8GiB, 7.5G, 512MiB or 8000MB"
        ))
    };
    let value: f64 = match number.parse() {
        Ok(v) => v,
        Err(_) => return bad("no number"),
    };
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => MIB,
        "g" | "gib" => GIB,
        "t" | "tib" => GIB * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return bad(&format!("unknown unit `{unit}`")),
    };
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return bad("expected between 1 byte and 16 EiB");
    }
    Ok(bytes.round() as u64)
}
