//! `cargo xtask bench memory --budgets B1,B2,… [--calibrate] [--steps N] [--json FILE]`: is a
//! memory budget a promise about the whole process? For each budget, `segfit plan --json`
//! gives the configuration the planner picks for `--effective-batch 8` (MiT-B0, 256², the
//! synthetic set) and its predicted whole-process peak; then `segfit train --memory-budget B
//! --effective-batch 8` runs a few steps (and the end-of-run evaluation) in a child process
//! whose peak RSS the kernel reports (`wait4`). A row is `ok` when the measured peak is within
//! the budget. `--calibrate` first runs a grid without a budget (sizes, micro-batches,
//! workers and prefetch) whose measured peak minus the predicted step and loader is what the
//! planner's process baseline is fitted on.
//!
//! segfit is built in the dev profile (the workspace builds burn with opt-level 3 even there):
//! RSS does not depend on the profile or on the machine's load, only the times do.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};

use crate::bench_predict::measure;

/// One run: what was asked, what the planner predicted, what the process measured.
struct Row {
    budget: Option<String>,
    size: usize,
    workers: usize,
    prefetch: usize,
    /// `(micro-batch, accumulation, precision, checkpointing)`.
    chosen: (usize, usize, String, bool),
    live_mib: f64,
    loader_mib: f64,
    baseline_mib: f64,
    whole_mib: f64,
    rss_mib: f64,
    seconds: f64,
}

impl Row {
    fn budget_mib(&self) -> Option<f64> {
        self.budget
            .as_deref()
            .map(|b| parse_mib(b).unwrap_or(f64::NAN))
    }
}

/// `120MiB` / `1GiB` in MiB (the bench's own budgets only).
fn parse_mib(text: &str) -> Result<f64> {
    let t = text.trim();
    let (n, scale) = if let Some(n) = t.strip_suffix("GiB") {
        (n, 1024.0)
    } else if let Some(n) = t.strip_suffix("MiB") {
        (n, 1.0)
    } else {
        bail!("budget `{text}`: write it in MiB or GiB (e.g. 160MiB)")
    };
    Ok(n.trim().parse::<f64>().context("budget number")? * scale)
}

/// `name` in segfit plan's JSON: at its top (what a budget fit chose) or in its `estimate`.
fn plan_value<'a>(plan: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    plan.get(name).or_else(|| plan.get("estimate")?.get(name))
}

fn number(plan: &serde_json::Value, name: &str) -> Result<f64> {
    plan_value(plan, name)
        .and_then(serde_json::Value::as_f64)
        .with_context(|| format!("`{name}` in segfit plan's JSON:\n{plan}"))
}

struct Setup {
    segfit: PathBuf,
    config: PathBuf,
    dir: PathBuf,
    steps: usize,
}

/// A case: a budget (the planner picks the batch) or a micro-batch, at `size`² with the loader
/// settings.
struct Case {
    budget: Option<String>,
    batch: usize,
    size: usize,
    workers: usize,
    prefetch: usize,
}

pub fn run(args: &[String]) -> Result<()> {
    let mut budgets = Vec::new();
    let mut calibrate = false;
    let mut steps = 2;
    let mut json = None;
    let mut segfit = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--budgets" => {
                let list = it
                    .next()
                    .context("--budgets needs a list, e.g. 120MiB,200MiB")?;
                budgets = list.split(',').map(str::to_string).collect();
            }
            "--calibrate" => calibrate = true,
            "--steps" => steps = it.next().context("--steps needs N")?.parse()?,
            "--json" => json = Some(PathBuf::from(it.next().context("--json needs FILE")?)),
            // A segfit binary already built (skips `cargo build -p segfit`).
            "--segfit" => segfit = Some(PathBuf::from(it.next().context("--segfit needs FILE")?)),
            other => bail!("bench memory --budgets: unknown flag `{other}`"),
        }
    }
    for b in &budgets {
        parse_mib(b)?;
    }
    let setup = setup(steps, segfit)?;
    let mut cases = Vec::new();
    if calibrate {
        for (batch, size, workers, prefetch) in [
            (1, 128, 2, 8),
            (1, 256, 2, 8),
            (2, 256, 2, 8),
            (4, 256, 2, 8),
            (1, 256, 1, 1),
            (1, 256, 2, 1),
            (1, 256, 2, 32),
            (1, 256, 2, 64),
            (1, 384, 2, 8),
            (2, 512, 2, 8),
        ] {
            cases.push(Case {
                budget: None,
                batch,
                size,
                workers,
                prefetch,
            });
        }
    }
    for b in budgets {
        cases.push(Case {
            budget: Some(b),
            batch: 0,
            size: 256,
            workers: 2,
            prefetch: 8,
        });
    }
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if let Some(row) = run_case(&setup, case, i)? {
            eprintln!("{}", line(&row));
            rows.push(row);
        }
    }
    println!("{}", table(&rows));
    if let Some(path) = json {
        std::fs::write(&path, to_json(&rows, steps))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let over: Vec<String> = rows
        .iter()
        .filter(|r| r.budget_mib().is_some_and(|b| r.rss_mib > b))
        .map(|r| r.budget.clone().unwrap_or_default())
        .collect();
    ensure!(
        over.is_empty(),
        "the measured peak RSS went over the budget for {}",
        over.join(", ")
    );
    Ok(())
}

/// Builds segfit, prepares the synthetic set (100 samples: enough that the loader's queue
/// fills whatever the prefetch) and a config in a temporary directory.
fn setup(steps: usize, segfit: Option<PathBuf>) -> Result<Setup> {
    let segfit = match segfit {
        Some(path) => path,
        None => crate::segfit::build()?,
    };
    let dir = std::env::temp_dir().join(format!("segfit-bench-budgets-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let data = dir.join("data");
    let out = Command::new(&segfit)
        .args(["prepare", "--synthetic", "--count", "100", "--size", "512"])
        .arg("--out")
        .arg(&data)
        .stdout(Stdio::null())
        .status()
        .context("segfit prepare")?;
    ensure!(out.success(), "segfit prepare --synthetic failed");
    let config = dir.join("bench.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\npreset = \"mit-b0\"\n[data]\nroot = {:?}\nsize = [256, 256]\n\
             [train]\nepochs = 1\nprogress = false\noverlay_samples = 0\n",
            data.to_str().context("utf-8 temp path")?
        ),
    )?;
    Ok(Setup {
        segfit,
        config,
        dir,
        steps,
    })
}

/// One case's row, or `None` when the planner refuses the budget (printed: the refusal is the
/// promise kept, nothing is run).
fn run_case(s: &Setup, c: &Case, index: usize) -> Result<Option<Row>> {
    let size = c.size.to_string();
    let (workers, prefetch) = (c.workers.to_string(), c.prefetch.to_string());
    let mut plan = Command::new(&s.segfit);
    plan.args(["plan", "--json", "--model", "mit-b0", "--num-labels", "2"])
        .args([
            "--size",
            &size,
            "--workers",
            &workers,
            "--prefetch",
            &prefetch,
        ]);
    match &c.budget {
        Some(b) => plan.args(["--memory-budget", b, "--effective-batch", "8"]),
        None => plan.args(["--batch", &c.batch.to_string()]),
    };
    let out = plan.output().context("segfit plan")?;
    if let (Some(b), false) = (&c.budget, out.status.success()) {
        let why = String::from_utf8_lossy(&out.stderr);
        println!("| {b} | refused by the planner: {} |", why.trim());
        return Ok(None);
    }
    ensure!(
        out.status.success(),
        "segfit plan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("segfit plan --json printed no JSON")?;
    let chosen = match &c.budget {
        Some(_) => (
            number(&plan, "micro_batch")? as usize,
            number(&plan, "accumulation_steps")? as usize,
            plan_value(&plan, "precision")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
                .to_string(),
            plan_value(&plan, "checkpointing") == Some(&serde_json::Value::Bool(true)),
        ),
        None => (c.batch, 1, "f32".into(), false),
    };
    let mib = |name: &str| number(&plan, name).map(|b| b / (1024.0 * 1024.0));
    let run_dir = s.dir.join(format!("run{index}"));
    let mut train = Command::new(&s.segfit);
    train
        .arg("train")
        .arg("--config")
        .arg(&s.config)
        .arg("--output")
        .arg(&run_dir)
        .args(["--set", &format!("train.max_steps={}", s.steps)])
        .args(["--set", &format!("data.size=[{size}, {size}]")])
        .args(["--set", &format!("train.workers={workers}")])
        .args(["--set", &format!("train.prefetch={prefetch}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match &c.budget {
        Some(b) => train.args(["--memory-budget", b, "--effective-batch", "8"]),
        None => train.args(["--set", &format!("train.batch_size={}", c.batch)]),
    };
    let usage = measure(&mut train)?;
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok(Some(Row {
        budget: c.budget.clone(),
        size: c.size,
        workers: c.workers,
        prefetch: c.prefetch,
        chosen,
        live_mib: mib("live_peak")?,
        loader_mib: mib("loader")?,
        baseline_mib: mib("process_baseline")?,
        whole_mib: mib("whole_process")?,
        rss_mib: usage.peak_rss_mib,
        seconds: usage.seconds,
    }))
}

fn line(r: &Row) -> String {
    let (b, a, p, ck) = &r.chosen;
    let verdict = match r.budget_mib() {
        Some(budget) if r.rss_mib <= budget => "ok",
        Some(_) => "OVER",
        None => "-",
    };
    format!(
        "| {} | {}² | {} | {} | {b} × {a} {p}{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.1} | {verdict} | {:.0} |",
        r.budget.as_deref().unwrap_or("-"),
        r.size,
        r.workers,
        r.prefetch,
        if *ck { " ckpt" } else { "" },
        r.live_mib,
        r.loader_mib,
        r.baseline_mib,
        r.whole_mib,
        r.rss_mib,
        r.rss_mib - r.live_mib - r.loader_mib,
        r.seconds
    )
}

fn table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| budget | size | workers | prefetch | chosen | live MiB | loader MiB | baseline MiB | \
         whole predicted MiB | peak RSS MiB | RSS − live − loader | ≤ budget | s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t.push_str(&line(r));
        t.push('\n');
    }
    t
}

fn to_json(rows: &[Row], steps: usize) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            let (b, a, p, ck) = &r.chosen;
            format!(
                "  {{\"budget\": {}, \"size\": {}, \"workers\": {}, \"prefetch\": {}, \
                 \"micro_batch\": {b}, \"accumulation_steps\": {a}, \"precision\": \"{p}\", \
                 \"checkpointing\": {ck}, \"live_peak_mib\": {:.2}, \"loader_mib\": {:.2}, \
                 \"process_baseline_mib\": {:.2}, \"whole_process_mib\": {:.2}, \
                 \"peak_rss_mib\": {:.2}, \"within_budget\": {}, \"seconds\": {:.1}}}",
                r.budget
                    .as_ref()
                    .map_or("null".into(), |b| format!("\"{b}\"")),
                r.size,
                r.workers,
                r.prefetch,
                r.live_mib,
                r.loader_mib,
                r.baseline_mib,
                r.whole_mib,
                r.rss_mib,
                r.budget_mib()
                    .map_or("null".into(), |b| (r.rss_mib <= b).to_string()),
                r.seconds
            )
        })
        .collect();
    format!(
        "{{\n\"command\": \"cargo xtask bench memory --budgets … (MiT-B0, synthetic, {steps} steps)\",\n\"rows\": [\n{}\n]\n}}\n",
        items.join(",\n")
    )
}
