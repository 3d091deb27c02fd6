//! Outputs are `0o644` under the usual umask `022` (they were `0o600`: tempfile's default).
//!
//! The umask is process-global, so instead of changing it under other tests this test re-runs
//! itself in a child process started by `sh -c 'umask 022; exec …'`.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const CHILD: &str = "FSIO_UMASK_CHILD_DIR";

#[test]
fn outputs_are_0644_under_umask_022() {
    if let Ok(dir) = std::env::var(CHILD) {
        // The child: write and report through the exit status.
        let p = std::path::Path::new(&dir).join("out.bin");
        fsio::write_atomic(&p, b"x").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "mode {mode:o}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // The harness names a test by its path below the binary's root module (`umask::…`).
    let (_, module) = module_path!().split_once("::").unwrap();
    let name = format!("{module}::outputs_are_0644_under_umask_022");
    let status = Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" \"$@\"")
        .arg(exe)
        .args(["--exact", name.as_str(), "--test-threads=1"])
        .env(CHILD, dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "the child under umask 022 failed");
    assert!(
        dir.path().join("out.bin").is_file(),
        "the child did not run the test"
    );
}
