//! Nothing half-written (issue #30, item 4), through the real binary: a full disk, a read-only
//! output folder and SIGKILL at random points of a `predict` leave the earlier outputs of the
//! same names (class map and its sidecars, probabilities, GeoJSON, statistics) byte for byte,
//! no partial file under a final name, and, for the errors, one message naming the path.
//!
//! The full disk and the read-only folder are a tmpfs mounted in a private user and mount
//! namespace (`unshare -rm`), which also works as root (where `chmod` would not stop writes):
//! filled up, or remounted read-only. Where the system refuses namespaces the two tests say so
//! on stderr and pass without checking; the output under a file (no namespace needed) always
//! runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use tiles::{GeoRef, Raster, RasterData};

use crate::common::*;

/// A GeoTIFF scene of `side²` RGB pixels in UTM.
fn scene(path: &Path, side: usize) {
    let data = (0..side * side * 3)
        .map(|i| ((i * 2654435761usize) >> 7) as u8)
        .collect();
    let image = Raster::new(side, side, 3, RasterData::U8(data)).unwrap();
    let geo = GeoRef {
        transform: [300_000.0, 10.0, 0.0, 1_600_000.0, 0.0, -10.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32651]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    };
    tiles::write_geotiff(path, &image, Some(&geo)).unwrap();
}

/// Every output flag whose file must never be half-written.
fn predict_args<'a>(model: &'a str, input: &'a str, out: &'a str, stats: &'a str) -> Vec<&'a str> {
    vec![
        "predict",
        "--model",
        model,
        "--input",
        input,
        "--output",
        out,
        "--tile",
        "32",
        "--probabilities",
        "u8",
        "--vector",
        "--stats",
        stats,
    ]
}

/// Runs `script` as `sh -c` in a private user and mount namespace; `None` when the system
/// refuses the namespace or the mount.
fn in_namespace(script: &str) -> Option<std::process::Output> {
    let probe = Command::new("unshare")
        .args([
            "-rm",
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k none /tmp && echo ok",
        ])
        .output()
        .ok()?;
    if !String::from_utf8_lossy(&probe.stdout).contains("ok") {
        eprintln!("skipped: no user/mount namespace for a tmpfs here ({probe:?})");
        return None;
    }
    Some(
        Command::new("unshare")
            .args(["-rm", "sh", "-c", script])
            .output()
            .unwrap(),
    )
}

/// Predicts into a small tmpfs once (the earlier outputs), then again after `break_it(mnt)`
/// (a shell command: fill the disk, or remount it read-only); returns the second run's stderr
/// and the earlier and final contents of the output folder.
type Contents = BTreeMap<String, Vec<u8>>;
fn second_run_after(break_it: impl Fn(&str) -> String) -> Option<(String, Contents, Contents)> {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture();
    let input = tmp.path().join("scene.tif");
    scene(&input, 96);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let (before, after) = (tmp.path().join("before"), tmp.path().join("after"));
    let out = mnt.join("out");
    let stats = out.join("stats.json");
    let args = predict_args(s(&model), s(&input), s(&out), s(&stats));
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let run = format!("'{}' {}", env!("CARGO_BIN_EXE_segfit"), quoted.join(" "));
    let script = format!(
        "set -e; mount -t tmpfs -o size=2m none '{mnt}'; {run} >/dev/null; \
         cp -a '{out}' '{before}'; {broken}; \
         if {run} 2>&1 >/dev/null; then echo UNEXPECTED_SUCCESS; fi; cp -a '{out}' '{after}'",
        mnt = mnt.display(),
        out = out.display(),
        before = before.display(),
        after = after.display(),
        broken = break_it(s(&mnt)),
    );
    let output = in_namespace(&script)?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    assert!(
        !stdout.contains("UNEXPECTED_SUCCESS"),
        "the broken run succeeded: {stdout}"
    );
    Some((stdout, contents(&before), contents(&after)))
}

#[test]
fn a_full_disk_is_one_error_naming_the_path_and_leaves_earlier_outputs() {
    // Every free byte taken: the new outputs' temporary files cannot grow.
    let fill = |mnt: &str| format!("dd if=/dev/zero of='{mnt}/filler' bs=4k 2>/dev/null || true");
    let Some((stderr, before, after)) = second_run_after(fill) else {
        return;
    };
    check_intact(&stderr, &before, &after, "No space left on device");
}

#[test]
fn a_read_only_folder_is_one_error_naming_the_path_and_leaves_earlier_outputs() {
    let read_only = |mnt: &str| format!("mount -o remount,ro '{mnt}'");
    let Some((stderr, before, after)) = second_run_after(read_only) else {
        return;
    };
    check_intact(&stderr, &before, &after, "Read-only file system");
}

fn check_intact(stderr: &str, before: &Contents, after: &Contents, cause: &str) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("/mnt/out/"),
        "the error names the path: {stderr}"
    );
    assert!(stderr.contains(cause), "{stderr}");
    let names: Vec<_> = before.keys().collect();
    for want in [
        "scene.tif",
        "scene.tif.aux.xml",
        "scene.qml",
        "scene_prob.tif",
        "scene.geojson",
        "stats.json",
    ] {
        assert!(before.contains_key(want), "{want} not among {names:?}");
    }
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        names,
        "no file added or removed (temporary files included)"
    );
    for (name, bytes) in before {
        assert!(after[name] == *bytes, "{name} changed");
    }
}

#[test]
fn an_output_folder_under_a_file_is_one_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture();
    let input = tmp.path().join("scene.tif");
    scene(&input, 40);
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let out = blocker.join("out");
    let stats = tmp.path().join("stats.json");
    let args = predict_args(s(&model), s(&input), s(&out), s(&stats));
    let run = segfit(&args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&*blocker.to_string_lossy()), "{stderr}");
    assert!(!stats.exists());
}

#[test]
fn sigkill_at_random_points_never_leaves_a_partial_output() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture();
    let input = tmp.path().join("scene.tif");
    scene(&input, 256);
    let out = tmp.path().join("out");
    let stats = out.join("stats.json");
    let args = predict_args(s(&model), s(&input), s(&out), s(&stats));
    let start = Instant::now();
    assert!(segfit(&args).status.success());
    let full = start.elapsed();
    let earlier = contents(&out);
    // Seeded kill times spread over a whole run (xorshift; no RNG crate needed).
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..6 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let at = full.mul_f64((s % 1000) as f64 / 1000.0);
        let mut child = Command::new(env!("CARGO_BIN_EXE_segfit"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        // SIGKILL: no destructor runs, so only the atomic renames protect the outputs.
        let _ = child.kill();
        child.wait().unwrap();
        let now = contents(&out);
        for (name, bytes) in &earlier {
            // Each final name holds the earlier output or the same complete new one (the run
            // is deterministic): never a part of it.
            assert!(
                now.get(name) == Some(bytes),
                "{name} after a kill at {at:?}"
            );
        }
        for name in now.keys().filter(|n| !earlier.contains_key(*n)) {
            assert!(
                name.starts_with(".segfit-") && name.ends_with(".tmp"),
                "{name} appeared after a kill at {at:?}"
            );
        }
    }
}
