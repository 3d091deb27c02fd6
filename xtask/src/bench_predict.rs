//! `cargo xtask bench predict [--sizes 2000,8000,20000] [--python PY] [--keep DIR] [--json FILE]
//! [--segfit PATH]`:
//! whole-scene prediction speed and peak memory, segfit next to PyTorch + transformers.
//!
//! Builds `segfit` (unless `--segfit PATH` names a binary to use) and the tiles `make_scene`
//! example in release, makes a MiT-B0 model with
//! segfit itself (8 training steps on the synthetic 4-band set, exported as an HF directory so
//! transformers loads the same weights), then for every size writes a 4-band u16 GeoTIFF scene
//! and runs `segfit predict` and `crates/cli/bench/pytorch_predict.py` on it with the same
//! windows (512, overlap 128, Hann blending). Each child's wall time and peak RSS come from the
//! kernel (`wait4`'s rusage), so both tools are measured the same way, start-up and model load
//! included. The last columns: the share of pixels where the two class maps agree, and the share
//! of segfit's pixels outside its most common class (how much that agreement says).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

use crate::project_root;

const TILE: usize = 512;
const OVERLAP: usize = TILE / 4;

struct Flags {
    sizes: Vec<usize>,
    python: String,
    keep: Option<PathBuf>,
    json: Option<PathBuf>,
    /// A `segfit` binary to measure instead of a fresh release build.
    segfit: Option<PathBuf>,
}

/// One child's cost, as the kernel counted it.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) seconds: f64,
    pub(crate) peak_rss_mib: f64,
}

struct Row {
    size: usize,
    segfit: Usage,
    pytorch: Option<Usage>,
    agree_percent: Option<f64>,
    /// The share of segfit's pixels outside its most common class: how much the agreement
    /// says (a map of one class agrees trivially).
    minority_percent: Option<f64>,
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
    print_table(&rows);
    if let Some(path) = &flags.json {
        std::fs::write(path, to_json(&rows))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("rows saved to {}", path.display());
    }
    Ok(())
}

fn parse(args: &[String]) -> Result<Flags> {
    let mut flags = Flags {
        sizes: vec![2000, 8000, 20000],
        python: "python3".into(),
        keep: None,
        json: None,
        segfit: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || crate::flag_value(&mut it, flag);
        match flag.as_str() {
            "--sizes" => {
                flags.sizes = value()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .with_context(|| format!("--sizes: expected pixel counts, found `{s}`"))
                    })
                    .collect::<Result<_>>()?
            }
            "--python" => flags.python = value()?,
            "--keep" => flags.keep = Some(value()?.into()),
            "--json" => flags.json = Some(value()?.into()),
            "--segfit" => flags.segfit = Some(value()?.into()),
            other => bail!(
                "unknown flag `{other}`; expected --sizes A,B,… --python PY --keep DIR --json FILE \
                 --segfit PATH"
            ),
        }
    }
    ensure!(!flags.sizes.is_empty(), "--sizes is empty");
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
    let mut rows = Vec::new();
    for &size in &flags.sizes {
        let scene = dir.join(format!("scene_{size}.tif"));
        if !scene.exists() {
            quiet(Command::new(make_scene).arg(size.to_string()).arg(&scene))?;
        }
        let (tile, overlap) = (TILE.to_string(), OVERLAP.to_string());
        let out = dir.join(format!("segfit_{size}"));
        eprintln!("== {size}x{size}: segfit predict");
        let segfit_usage = measure(
            Command::new(segfit)
                .args(["predict", "--model"])
                .arg(&run_dir)
                .arg("--input")
                .arg(&scene)
                .arg("--output")
                .arg(&out)
                .args(["--tile", &tile, "--overlap", &overlap]),
        )?;
        let segfit_map = out.join(format!("scene_{size}.tif"));
        let (mut pytorch, mut agree_percent, mut minority_percent) = (None, None, None);
        if python {
            eprintln!("== {size}x{size}: {}", script.display());
            let npy = dir.join(format!("pytorch_{size}.npy"));
            pytorch = Some(measure(
                Command::new(&flags.python)
                    .arg(&script)
                    .arg(&hf)
                    .arg(&scene)
                    .arg(&npy)
                    .args(["--tile", &tile, "--overlap", &overlap]),
            )?);
            let a = crate::class_map::agreement(&segfit_map, &npy)?;
            (agree_percent, minority_percent) = (Some(a.agree_percent()), Some(a.minority_percent));
            if flags.keep.is_none() {
                let _ = std::fs::remove_file(&npy);
            }
        }
        if flags.keep.is_none() {
            // The big scenes are gigabytes: gone as soon as both tools have read them.
            let _ = std::fs::remove_file(&scene);
            let _ = std::fs::remove_dir_all(&out);
        }
        rows.push(Row {
            size,
            segfit: segfit_usage,
            pytorch,
            agree_percent,
            minority_percent,
        });
    }
    Ok(rows)
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

fn print_table(rows: &[Row]) {
    println!(
        "\nMiT-B0, 4-band u16 scenes, window {TILE}, overlap {OVERLAP}, Hann blending; \
         wall time and peak RSS of each process (start-up and model load included)\n"
    );
    println!(
        "| size | segfit s | segfit MP/s | segfit peak RSS MiB | pytorch s | pytorch MP/s | pytorch peak RSS MiB | classes agree % | minority class % |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let mp = (r.size * r.size) as f64 / 1e6;
        let (ps, pmp, prss) = match r.pytorch {
            Some(u) => (
                format!("{:.1}", u.seconds),
                format!("{:.2}", mp / u.seconds),
                format!("{:.0}", u.peak_rss_mib),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let agree = r.agree_percent.map_or("-".into(), |a| format!("{a:.3}"));
        let minority = r.minority_percent.map_or("-".into(), |a| format!("{a:.2}"));
        println!(
            "| {0}² | {1:.1} | {2:.2} | {3:.0} | {ps} | {pmp} | {prss} | {agree} | {minority} |",
            r.size,
            r.segfit.seconds,
            mp / r.segfit.seconds,
            r.segfit.peak_rss_mib,
        );
    }
}

fn to_json(rows: &[Row]) -> String {
    let num = |v: Option<f64>| v.map_or("null".into(), |v| format!("{v:.4}"));
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            let mp = (r.size * r.size) as f64 / 1e6;
            format!(
                "  {{\"size\": {}, \"megapixels\": {mp:.4}, \"tile\": {TILE}, \"overlap\": {OVERLAP}, \
                 \"segfit_s\": {:.4}, \"segfit_mp_per_s\": {:.4}, \"segfit_peak_rss_mib\": {:.1}, \
                 \"pytorch_s\": {}, \"pytorch_mp_per_s\": {}, \"pytorch_peak_rss_mib\": {}, \
                 \"classes_agree_percent\": {}, \"minority_class_percent\": {}}}",
                r.size,
                r.segfit.seconds,
                mp / r.segfit.seconds,
                r.segfit.peak_rss_mib,
                num(r.pytorch.map(|u| u.seconds)),
                num(r.pytorch.map(|u| mp / u.seconds)),
                num(r.pytorch.map(|u| u.peak_rss_mib)),
                num(r.agree_percent),
                num(r.minority_percent),
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}
