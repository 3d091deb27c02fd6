//! `cargo xtask bench gpu [--smoke] [--out DIR] [--python PY] [--no-build]`: the GPU benchmark,
//! built here and run on a GPU machine that has the NVIDIA driver, CUDA 13.0's libraries and a
//! Python with torch + transformers, but no Rust toolchain and no network.
//!
//! Builds in release, with `--features cuda,wgpu` and the CUDA 13.0 driver API pinned
//! (`segformer/cuda-13000`: cudarc would otherwise bind the version `nvcc` reports here, or its
//! newest): `segfit`, the step benchmark `bench_memory`, the scene maker `make_scene` and this
//! xtask (its `class-agreement` compares class maps there). Strips them and packs them with
//! `crates/train/bench/gpu/` (`run.sh`, `table.py`, and the PyTorch side `torch_steps.py` and
//! `torch_loop.py`) and a `BUILD.txt` (commit, toolchain, features) into
//! `DIR/segfit-gpu-bench.tar.gz` (default `target/bench-gpu`), which must stay under 64 MiB. The
//! data is made there by the packed `segfit prepare --synthetic --multispectral` and
//! `make_scene`. On the GPU machine:
//!
//! ```text
//! tar xzf segfit-gpu-bench.tar.gz && bash segfit-gpu-bench/run.sh --python PY
//! ```
//!
//! prints the one table (see `run.sh`). `--smoke` then unpacks the archive here and runs
//! `run.sh --smoke`: the same flow at toy sizes on `--device wgpu` (lavapipe without a GPU),
//! so that the first run on a real card does not fail on a typo. `--no-build` packs the
//! binaries already built.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::bench_predict::{build_release, quiet};
use crate::project_root;

/// The most one transfer to the GPU machine carries.
const LIMIT: u64 = 64 << 20;
const FEATURES: &str = "cuda,wgpu,segformer/cuda-13000";
const NAME: &str = "segfit-gpu-bench";

struct Flags {
    smoke: bool,
    out: Option<PathBuf>,
    python: String,
    build: bool,
}

fn parse(args: &[String]) -> Result<Flags> {
    let mut flags = Flags {
        smoke: false,
        out: None,
        python: "python3".into(),
        build: true,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || crate::flag_value(&mut it, flag);
        match flag.as_str() {
            "--smoke" => flags.smoke = true,
            "--out" => flags.out = Some(value()?.into()),
            "--python" => flags.python = value()?,
            "--no-build" => flags.build = false,
            other => bail!(
                "unknown flag `{other}` for bench gpu; expected --smoke, --out DIR, --python PY \
                 or --no-build"
            ),
        }
    }
    Ok(flags)
}

pub fn run(args: &[String]) -> Result<()> {
    let flags = parse(args)?;
    let root = project_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let release = target.join("release");
    if flags.build {
        eprintln!("building in release with --features {FEATURES} (the first build takes long)");
        build_release(
            &root,
            &["-p", "segfit", "--bin", "segfit", "--features", FEATURES],
        )?;
        build_release(
            &root,
            &[
                "-p",
                "train",
                "--example",
                "bench_memory",
                "--features",
                FEATURES,
            ],
        )?;
        build_release(&root, &["-p", "tiles", "--example", "make_scene"])?;
        build_release(&root, &["-p", "xtask"])?;
    }
    let binaries = [
        release.join("segfit"),
        release.join("examples").join("bench_memory"),
        release.join("examples").join("make_scene"),
        release.join("xtask"),
    ];
    let out = flags
        .out
        .clone()
        .unwrap_or_else(|| target.join("bench-gpu"));
    let archive = pack(&root, &out, &binaries)?;
    let size = std::fs::metadata(&archive)?.len();
    println!(
        "{} ({:.1} MiB): on the GPU machine, `tar xzf {NAME}.tar.gz && bash {NAME}/run.sh \
         --python PY`",
        archive.display(),
        size as f64 / (1 << 20) as f64
    );
    ensure!(
        size < LIMIT,
        "{} is {size} bytes, over the 64 MiB one transfer carries",
        archive.display()
    );
    if flags.smoke {
        smoke(&archive, &out, &flags.python)?;
    }
    Ok(())
}

/// Strips the binaries into `out/NAME/bin`, adds the scripts and `BUILD.txt`, and archives the
/// directory as `out/NAME.tar.gz`.
fn pack(root: &Path, out: &Path, binaries: &[PathBuf]) -> Result<PathBuf> {
    let dir = out.join(NAME);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    for binary in binaries {
        ensure!(
            binary.exists(),
            "{} is missing: build it (drop --no-build)",
            binary.display()
        );
        let name = binary.file_name().context("a binary has a file name")?;
        let stripped = bin.join(name);
        quiet(
            Command::new("strip")
                .arg("--strip-all")
                .arg(binary)
                .arg("-o")
                .arg(&stripped),
        )
        .context("stripping the binaries (binutils' strip)")?;
        eprintln!(
            "{:>14}: {:.1} MiB stripped",
            name.to_string_lossy(),
            std::fs::metadata(&stripped)?.len() as f64 / (1 << 20) as f64
        );
    }
    let scripts = root.join("crates/train/bench/gpu");
    for script in ["run.sh", "table.py", "torch_steps.py", "torch_loop.py"] {
        std::fs::copy(scripts.join(script), dir.join(script))
            .with_context(|| format!("copying {}", scripts.join(script).display()))?;
    }
    std::fs::write(dir.join("BUILD.txt"), build_info(root))
        .with_context(|| format!("writing {}", dir.join("BUILD.txt").display()))?;
    let tar = out.join(format!("{NAME}.tar"));
    let archive = out.join(format!("{NAME}.tar.gz"));
    let _ = std::fs::remove_file(&archive);
    quiet(
        Command::new("tar")
            .arg("-C")
            .arg(out)
            .arg("-cf")
            .arg(&tar)
            .arg(NAME),
    )
    .context("archiving (tar)")?;
    quiet(Command::new("gzip").args(["-9", "-f"]).arg(&tar)).context("compressing (gzip)")?;
    Ok(archive)
}

/// The commit, toolchain and features the binaries were built from.
fn build_info(root: &Path) -> String {
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    let commit = run("git", &["rev-parse", "HEAD"]);
    let dirty = if run("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
        ""
    } else {
        " (with uncommitted changes)"
    };
    format!(
        "commit: {commit}{dirty}\nbuilt with: {}\nfeatures: {FEATURES} (burn-fusion and autotune \
         on; cudarc bound to the CUDA 13.0 driver API)\n",
        run("rustc", &["-V"])
    )
}

/// Unpacks the archive beside it and runs `run.sh --smoke` from there.
fn smoke(archive: &Path, out: &Path, python: &str) -> Result<()> {
    let dir = out.join("smoke");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    quiet(
        Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .arg("-xzf")
            .arg(archive),
    )
    .context("unpacking the archive")?;
    let results = dir.join("out");
    let status = Command::new("bash")
        .arg(dir.join(NAME).join("run.sh"))
        .arg("--smoke")
        .args(["--python", python])
        .arg("--out")
        .arg(&results)
        .status()
        .context("running run.sh --smoke")?;
    ensure!(status.success(), "run.sh --smoke failed ({status})");
    let runs = std::fs::read_to_string(results.join("runs.jsonl"))?;
    let failed: Vec<&str> = runs.lines().filter(|l| !l.contains("\"rc\": 0,")).collect();
    ensure!(
        failed.is_empty(),
        "steps of the smoke run failed (logs in {}):\n{}",
        results.display(),
        failed.join("\n")
    );
    println!("smoke run passed: {}", results.join("table.md").display());
    Ok(())
}
