//! Decides, once per build, whether the tests marked `#[testkit::needs_fixtures]` are ignored:
//! sets `cfg(segfit_no_fixtures)` (and the reason) when the shared fixtures are absent and
//! `CI` is not `true`. Rebuilt when `SEGFIT_FIXTURES` or `CI` changes, or the shared root's
//! contents change; a root created later is noticed on the next change of either variable.

#[path = "../src/locate.rs"]
#[allow(dead_code)]
mod locate;

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(segfit_no_fixtures)");
    println!("cargo::rerun-if-env-changed=SEGFIT_FIXTURES");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../src/locate.rs");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let workspace = Path::new(&manifest).join("../../..");
    match locate::Fixtures::from_env(&workspace).shared() {
        // Watched so that removing it re-decides; a missing path would rerun every build.
        locate::Shared::Present(root) => println!("cargo::rerun-if-changed={}", root.display()),
        locate::Shared::Required(root) => println!(
            "cargo::warning=CI=true and no shared fixtures at {}: the tests that need them will fail",
            root.display()
        ),
        locate::Shared::Skip(reason) => {
            println!("cargo::rustc-cfg=segfit_no_fixtures");
            println!("cargo::rustc-env=SEGFIT_SKIP_REASON={reason}");
        }
    }
}
