//! `cargo xtask bench predict [--sizes 2000,1947x1933,…] [--tile N] [--overlap N] [--batch N]
//! [--repeat N] [--http] [--python PY] [--keep DIR] [--json FILE] [--segfit PATH]
//! [--segfit-args "…"]`:
//! whole-scene prediction speed and peak memory, segfit next to PyTorch + transformers.
//!
//! Builds `segfit` (unless `--segfit PATH` names a binary to use) and the tiles `make_scene`
//! example in release, makes a MiT-B0 model with
//! segfit itself (8 training steps on the synthetic 4-band set, exported as an HF directory so
//! transformers loads the same weights), then for every size (a side, or `WxH`) writes a 4-band
//! u16 COG and runs `segfit predict` and `crates/cli/bench/pytorch_predict.py` on it, one after
//! the other, with the same windows (default 512, overlap a quarter, batch 4; Hann blending).
//! Each child's wall time and peak RSS come from the kernel (`wait4`'s rusage), so both tools
//! are measured the same way, start-up and model load included; PyTorch's own time after its
//! imports is reported too. The last columns: the share of pixels where the two class maps
//! agree, and the share of segfit's pixels outside its most common class (how much that
//! agreement says). `--repeat N` runs both tools N times per scene, alternating (segfit, then
//! PyTorch, N times), and reports the median time of each, the largest peak RSS, and every run's
//! time below the table: single runs on a small shared machine vary by ±10 % or more. With
//! `--http`, segfit also predicts each scene through a local HTTP server (`testkit`'s range
//! server on 127.0.0.1, in this process) by URL: its wall time, peak RSS, the requests and
//! bytes it fetched, and whether its class map equals the local one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

use crate::project_root;

struct Flags {
    /// `(width, height)` of each scene.
    sizes: Vec<(usize, usize)>,
    tile: usize,
    overlap: Option<usize>,
    /// Windows per forward on both sides (segfit's `--batch-size`, the script's `--batch`).
    batch: usize,
    /// Runs of each tool per scene (medians reported).
    repeat: usize,
    /// Also predict each scene by URL through a local HTTP server.
    http: bool,
    python: String,
    keep: Option<PathBuf>,
    json: Option<PathBuf>,
    /// A `segfit` binary to measure instead of a fresh release build.
    segfit: Option<PathBuf>,
    /// More `segfit predict` flags (space-separated), e.g. `--precision bf16`.
    segfit_args: Vec<String>,
}

impl Flags {
    fn overlap(&self) -> usize {
        self.overlap.unwrap_or(self.tile / 4)
    }
}

/// One child's cost, as the kernel counted it.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) seconds: f64,
    pub(crate) peak_rss_mib: f64,
}

struct Row {
    width: usize,
    height: usize,
    windows: Option<usize>,
    /// The median time and largest peak RSS of segfit's runs.
    segfit: Usage,
    /// Each segfit run's seconds, in order.
    segfit_runs: Vec<f64>,
    pytorch: Option<Usage>,
    /// The script's own time after its imports (model load, read, inference, write): the
    /// median over the runs.
    pytorch_loop_s: Option<f64>,
    /// Each PyTorch run's loop seconds, in order.
    pytorch_loop_runs: Vec<f64>,
    agree_percent: Option<f64>,
    /// The share of segfit's pixels outside its most common class: how much the agreement
    /// says (a map of one class agrees trivially).
    minority_percent: Option<f64>,
    http: Option<HttpRun>,
}

/// `segfit predict` on the scene by URL.
struct HttpRun {
    usage: Usage,
    requests: usize,
    bytes: u64,
    file_bytes: u64,
    /// Whether its class map is the local run's, byte for byte.
    same_map: bool,
}

impl Row {
    fn megapixels(&self) -> f64 {
        (self.width * self.height) as f64 / 1e6
    }
}

pub fn run(args: &[String]) -> Result<()> {
    let flags = parse(args)?;
    let root = project_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let release = target.join("release");
    let segfit = match &flags.segfit {
        Some(path) => path.clone(),
        None => {
            build_release(&root, &["--bin", "segfit", "-p", "segfit"])?;
            release.join("segfit")
        }
    };
    build_release(&root, &["--example", "make_scene", "-p", "tiles"])?;
    let make_scene = release.join("examples").join("make_scene");

    let dir = match &flags.keep {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("segfit-bench-predict-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Absolute, since segfit train runs from the project root.
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let result = bench(&flags, &root, &dir, &segfit, &make_scene);
    if flags.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let rows = result?;
    print_table(&flags, &rows);
    if let Some(path) = &flags.json {
        std::fs::write(path, to_json(&flags, &rows))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("rows saved to {}", path.display());
    }
    Ok(())
}

fn parse(args: &[String]) -> Result<Flags> {
    let mut flags = Flags {
        sizes: vec![(2000, 2000), (8000, 8000), (20000, 20000)],
        tile: 512,
        overlap: None,
        batch: 4,
        repeat: 1,
        http: false,
        python: "python3".into(),
        keep: None,
        json: None,
        segfit: None,
        segfit_args: Vec::new(),
    };
    let number = |flag: &str, v: &str| -> Result<usize> {
        v.trim()
            .parse()
            .with_context(|| format!("{flag}: expected a whole number, found `{v}`"))
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--http" {
            flags.http = true;
            continue;
        }
        let value = crate::flag_value(&mut it, flag)?;
        match flag.as_str() {
            "--sizes" => {
                flags.sizes = value
                    .split(',')
                    .map(|s| match s.split_once('x') {
                        Some((w, h)) => Ok((number("--sizes", w)?, number("--sizes", h)?)),
                        None => number("--sizes", s).map(|n| (n, n)),
                    })
                    .collect::<Result<_>>()?
            }
            "--tile" => flags.tile = number(flag, &value)?,
            "--overlap" => flags.overlap = Some(number(flag, &value)?),
            "--batch" => flags.batch = number(flag, &value)?,
            "--repeat" => flags.repeat = number(flag, &value)?,
            "--python" => flags.python = value,
            "--keep" => flags.keep = Some(value.into()),
            "--json" => flags.json = Some(value.into()),
            "--segfit" => flags.segfit = Some(value.into()),
            "--segfit-args" => {
                flags.segfit_args = value.split_whitespace().map(String::from).collect()
            }
            other => bail!(
                "unknown flag `{other}`; expected --sizes A,WxH,… --tile N --overlap N --batch N \
                 --repeat N --http --python PY --keep DIR --json FILE --segfit PATH --segfit-args \"…\""
            ),
        }
    }
    ensure!(!flags.sizes.is_empty(), "--sizes is empty");
    ensure!(
        flags.tile > 0 && flags.batch > 0 && flags.repeat > 0 && flags.overlap() < flags.tile,
        "--tile, --batch and --repeat must be positive and --overlap smaller than --tile"
    );
    Ok(flags)
}

/// `cargo build --release TARGET…` from the project root.
pub(crate) fn build_release(root: &Path, target: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--release"])
        .args(target)
        .status()
        .with_context(|| format!("running {cargo} build --release"))?;
    ensure!(status.success(), "building {target:?} failed ({status})");
    Ok(())
}

fn bench(
    flags: &Flags,
    root: &Path,
    dir: &Path,
    segfit: &Path,
    make_scene: &Path,
) -> Result<Vec<Row>> {
    let run_dir = dir.join("run");
    let hf = dir.join("hf");
    if hf.join("model.safetensors").exists() && run_dir.exists() {
        eprintln!("reusing the model in {}", run_dir.display());
    } else {
        make_model(root, dir, segfit)?;
    }
    let script = root.join("crates/cli/bench/pytorch_predict.py");
    let python = python_ok(&flags.python);
    let (tile, overlap, batch) = (
        flags.tile.to_string(),
        flags.overlap().to_string(),
        flags.batch.to_string(),
    );
    let predict = |input: &str, out: &Path| -> Result<Usage> {
        measure(
            Command::new(segfit)
                .args(["predict", "--model"])
                .arg(&run_dir)
                .args(["--input", input, "--output"])
                .arg(out)
                .args([
                    "--tile",
                    &tile,
                    "--overlap",
                    &overlap,
                    "--batch-size",
                    &batch,
                ])
                .args(&flags.segfit_args),
        )
    };
    let mut rows = Vec::new();
    for &(width, height) in &flags.sizes {
        let name = if width == height {
            format!("scene_{width}")
        } else {
            format!("scene_{width}x{height}")
        };
        let scene = dir.join(format!("{name}.tif"));
        if !scene.exists() {
            quiet(
                Command::new(make_scene)
                    .arg(format!("{width}x{height}"))
                    .arg(&scene),
            )?;
        }
        let out = dir.join(format!("segfit_{name}"));
        let segfit_map = out.join(format!("{name}.tif"));
        let npy = dir.join(format!("pytorch_{name}.npy"));
        let (mut segfit_runs, mut pytorch_runs, mut pytorch_loop_runs) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut windows = None;
        for run in 1..=flags.repeat {
            eprintln!(
                "== {width}x{height}: segfit predict (run {run} of {})",
                flags.repeat
            );
            segfit_runs.push(predict(&scene.display().to_string(), &out)?);
            if python {
                eprintln!(
                    "== {width}x{height}: {} (run {run} of {})",
                    script.display(),
                    flags.repeat
                );
                let (usage, stdout) = measure_stdout(
                    Command::new(&flags.python)
                        .arg(&script)
                        .arg(&hf)
                        .arg(&scene)
                        .arg(&npy)
                        .args(["--tile", &tile, "--overlap", &overlap, "--batch", &batch]),
                )?;
                pytorch_runs.push(usage);
                pytorch_loop_runs.extend(json_number(&stdout, "seconds"));
                windows = json_number(&stdout, "windows").map(|w| w as usize);
            }
        }
        let segfit_usage = Usage::median(&segfit_runs);
        let (pytorch, pytorch_loop_s) = (
            (!pytorch_runs.is_empty()).then(|| Usage::median(&pytorch_runs)),
            (!pytorch_loop_runs.is_empty()).then(|| median(&pytorch_loop_runs)),
        );
        let (mut agree_percent, mut minority_percent) = (None, None);
        if python {
            let a = crate::class_map::agreement(&segfit_map, &npy)?;
            (agree_percent, minority_percent) = (Some(a.agree_percent()), Some(a.minority_percent));
            if flags.keep.is_none() {
                let _ = std::fs::remove_file(&npy);
            }
        }
        let http = if flags.http {
            eprintln!("== {width}x{height}: segfit predict by URL (local HTTP server)");
            let server = testkit::http::RangeServer::start();
            let file = format!("{name}.tif");
            server
                .serve_file(&file, scene.clone())
                .with_context(|| format!("serving {}", scene.display()))?;
            let out_http = dir.join(format!("segfit_{name}_http"));
            let usage = predict(&server.url(&file), &out_http)?;
            let local = std::fs::read(&segfit_map)
                .with_context(|| format!("reading {}", segfit_map.display()))?;
            let by_url = out_http.join(&file);
            let remote =
                std::fs::read(&by_url).with_context(|| format!("reading {}", by_url.display()))?;
            let run = HttpRun {
                usage,
                requests: server.requests().len(),
                bytes: server.bytes_sent(),
                file_bytes: std::fs::metadata(&scene)?.len(),
                same_map: local == remote,
            };
            if flags.keep.is_none() {
                let _ = std::fs::remove_dir_all(&out_http);
            }
            Some(run)
        } else {
            None
        };
        if flags.keep.is_none() {
            // The big scenes are gigabytes: gone as soon as both tools have read them.
            let _ = std::fs::remove_file(&scene);
            let _ = std::fs::remove_dir_all(&out);
        }
        rows.push(Row {
            width,
            height,
            windows,
            segfit: segfit_usage,
            segfit_runs: segfit_runs.iter().map(|u| u.seconds).collect(),
            pytorch,
            pytorch_loop_s,
            pytorch_loop_runs,
            agree_percent,
            minority_percent,
            http,
        });
    }
    Ok(rows)
}

impl Usage {
    /// The median seconds of `runs` (not empty) and their largest peak RSS.
    fn median(runs: &[Usage]) -> Usage {
        Usage {
            seconds: median(&runs.iter().map(|u| u.seconds).collect::<Vec<_>>()),
            peak_rss_mib: runs.iter().map(|u| u.peak_rss_mib).fold(0.0, f64::max),
        }
    }
}

/// The median of `values` (not empty; the mean of the middle two for an even count).
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The number after `"key":` in a one-line JSON object.
fn json_number(text: &str, key: &str) -> Option<f64> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get(key)?.as_f64()
}

/// MiT-B0 after 8 training steps on the synthetic 4-band set (seconds), in `dir/run`, exported
/// to `dir/hf`. Speed does not depend on the weights; a single step gave a map of almost one
/// class (0.2% of pixels in the other), where the agreement column would say little.
fn make_model(root: &Path, dir: &Path, segfit: &Path) -> Result<()> {
    eprintln!("making the model (segfit prepare, train 8 steps, export)");
    let data = dir.join("data");
    let s = |p: &Path| p.display().to_string();
    quiet(Command::new(segfit).args([
        "prepare",
        "--synthetic",
        "--multispectral",
        "--count",
        "8",
        "--size",
        "64",
        "--out",
        &s(&data),
    ]))?;
    let _ = std::fs::remove_dir_all(dir.join("run"));
    quiet(Command::new(segfit).current_dir(root).args([
        "train",
        "--config",
        &s(&root.join("configs/synthetic-quick.toml")),
        "--set",
        "model.preset=\"mit-b0\"",
        "--set",
        &format!("data.root={:?}", s(&data)),
        "--set",
        "data.size=[64,64]",
        "--set",
        "train.max_steps=8",
        "--set",
        "data.normalize=\"dataset\"",
        "--output",
        &s(&dir.join("run")),
    ]))?;
    quiet(Command::new(segfit).args([
        "export",
        "--model",
        &s(&dir.join("run")),
        "--output",
        &s(&dir.join("hf")),
    ]))
}

/// Runs `cmd` with its output captured, shown only when it fails.
pub(crate) fn quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({})\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Whether `python` imports what the script needs; says why not when it does not.
fn python_ok(python: &str) -> bool {
    let out = Command::new(python)
        .args(["-c", "import torch, transformers, tifffile, numpy"])
        .stdout(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            eprintln!(
                "note: skipping PyTorch: {python} lacks torch, transformers, tifffile or numpy ({})",
                err.lines().last().unwrap_or("").trim()
            );
            false
        }
        Err(e) => {
            eprintln!("note: skipping PyTorch: cannot run {python}: {e}");
            false
        }
    }
}

/// Runs `cmd` (output shown) and reaps it with `wait4`, whose rusage holds this child's own
/// peak RSS, unlike `getrusage(RUSAGE_CHILDREN)`, the maximum over every child so far.
pub(crate) fn measure(cmd: &mut Command) -> Result<Usage> {
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    reap(cmd, child, start)
}

/// [`measure`], with the child's standard output captured (and echoed).
fn measure_stdout(cmd: &mut Command) -> Result<(Usage, String)> {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        // Until the child closes it (exits): then `reap` finds it done.
        std::io::Read::read_to_string(&mut pipe, &mut stdout)
            .with_context(|| format!("reading the output of {:?}", cmd.get_program()))?;
    }
    print!("{stdout}");
    Ok((reap(cmd, child, start)?, stdout))
}

fn reap(cmd: &Command, child: std::process::Child, start: Instant) -> Result<Usage> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value, and `wait4` only writes into the two locals.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).with_context(|| format!("waiting for {:?}", cmd.get_program()));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // The child is reaped: dropping the handle does not wait again.
    drop(child);
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed (wait status {status})");
    }
    Ok(Usage {
        seconds,
        // ru_maxrss is in KiB on Linux.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

fn print_table(flags: &Flags, rows: &[Row]) {
    println!(
        "\nMiT-B0, 4-band u16 scenes, window {}, overlap {}, batch {}, Hann blending; wall time \
         and peak RSS of each process (start-up and model load included); PyTorch loop s: the \
         script's own time after its imports{}\n",
        flags.tile,
        flags.overlap(),
        flags.batch,
        if flags.repeat > 1 {
            format!(
                "; medians of {} runs of each tool, alternating (peak RSS: the largest)",
                flags.repeat
            )
        } else {
            String::new()
        }
    );
    println!(
        "| scene | windows | segfit s | segfit MP/s | segfit peak RSS MiB | pytorch s | pytorch loop s | pytorch MP/s (loop) | pytorch peak RSS MiB | pytorch loop s / segfit s | classes agree % | minority class % |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let dash = || "-".to_string();
    for r in rows {
        let mp = r.megapixels();
        let (ps, prss) = r.pytorch.map_or((dash(), dash()), |u| {
            (
                format!("{:.2}", u.seconds),
                format!("{:.0}", u.peak_rss_mib),
            )
        });
        let (pl, pmp, ratio) = r.pytorch_loop_s.map_or((dash(), dash(), dash()), |l| {
            (
                format!("{l:.2}"),
                format!("{:.3}", mp / l),
                format!("{:.2}", l / r.segfit.seconds),
            )
        });
        let agree = r.agree_percent.map_or(dash(), |a| format!("{a:.3}"));
        let minority = r.minority_percent.map_or(dash(), |a| format!("{a:.2}"));
        let windows = r.windows.map_or(dash(), |w| w.to_string());
        println!(
            "| {}x{} | {windows} | {:.2} | {:.3} | {:.0} | {ps} | {pl} | {pmp} | {prss} | {ratio} | {agree} | {minority} |",
            r.width,
            r.height,
            r.segfit.seconds,
            mp / r.segfit.seconds,
            r.segfit.peak_rss_mib,
        );
    }
    if flags.repeat > 1 {
        let list = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!();
        for r in rows {
            print!(
                "runs, {}x{}: segfit s {}",
                r.width,
                r.height,
                list(&r.segfit_runs)
            );
            if !r.pytorch_loop_runs.is_empty() {
                print!("; pytorch loop s {}", list(&r.pytorch_loop_runs));
            }
            println!();
        }
    }
    if rows.iter().any(|r| r.http.is_some()) {
        println!(
            "\nsegfit predict by URL (local HTTP server, 127.0.0.1) against the same file read locally\n"
        );
        println!(
            "| scene | local s | local peak RSS MiB | http s | http peak RSS MiB | requests | bytes fetched | file bytes | class map identical |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for r in rows {
            if let Some(h) = &r.http {
                println!(
                    "| {}x{} | {:.2} | {:.0} | {:.2} | {:.0} | {} | {} | {} | {} |",
                    r.width,
                    r.height,
                    r.segfit.seconds,
                    r.segfit.peak_rss_mib,
                    h.usage.seconds,
                    h.usage.peak_rss_mib,
                    h.requests,
                    h.bytes,
                    h.file_bytes,
                    if h.same_map { "yes" } else { "no" }
                );
            }
        }
    }
}

fn to_json(flags: &Flags, rows: &[Row]) -> String {
    let num = |v: Option<f64>| v.map_or("null".into(), |v| format!("{v:.4}"));
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            let mp = r.megapixels();
            let http = r.http.as_ref().map_or("null".into(), |h| {
                format!(
                    "{{\"seconds\": {:.4}, \"peak_rss_mib\": {:.1}, \"requests\": {}, \"bytes\": {}, \
                     \"file_bytes\": {}, \"same_class_map\": {}}}",
                    h.usage.seconds, h.usage.peak_rss_mib, h.requests, h.bytes, h.file_bytes, h.same_map
                )
            });
            format!(
                "  {{\"width\": {}, \"height\": {}, \"megapixels\": {mp:.4}, \"tile\": {}, \
                 \"overlap\": {}, \"batch\": {}, \"windows\": {}, \"segfit_s\": {:.4}, \
                 \"segfit_mp_per_s\": {:.4}, \"segfit_peak_rss_mib\": {:.1}, \"pytorch_s\": {}, \
                 \"pytorch_loop_s\": {}, \"pytorch_peak_rss_mib\": {}, \
                 \"classes_agree_percent\": {}, \"minority_class_percent\": {}, \"http\": {http}}}",
                r.width,
                r.height,
                flags.tile,
                flags.overlap(),
                flags.batch,
                r.windows.map_or("null".into(), |w| w.to_string()),
                r.segfit.seconds,
                mp / r.segfit.seconds,
                r.segfit.peak_rss_mib,
                num(r.pytorch.map(|u| u.seconds)),
                num(r.pytorch_loop_s),
                num(r.pytorch.map(|u| u.peak_rss_mib)),
                num(r.agree_percent),
                num(r.minority_percent),
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}
