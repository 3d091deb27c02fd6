//! The attribute end to end: with the shared fixtures this runs and finds every large case;
//! without them `cargo test` lists it as ignored with the reason, and under `CI=true` it runs
//! and fails, naming where it looked.

/// The cases only the shared fixtures hold (README.md of `tests/data/fixtures`).
const SHARED_ONLY: [&str; 2] = ["segformer-b0", "mit-b0-encoder"];

#[testkit::needs_fixtures]
#[test]
fn the_shared_fixtures_hold_the_large_cases() {
    for case in SHARED_ONLY {
        let dir = testkit::fixture(case);
        assert!(
            dir.join("expected.safetensors").is_file(),
            "{case}: no expected.safetensors in {}",
            dir.display()
        );
    }
}

#[test]
fn the_repository_holds_the_small_cases() {
    for case in [
        "segformer-tiny",
        "processor-300x200",
        "processor-reduce-labels",
        "albumentations",
    ] {
        let repo = testkit::Fixtures {
            env_root: Some("/nonexistent".into()),
            workspace: testkit::workspace(),
            ci: true,
        };
        assert_eq!(
            repo.find(case).unwrap(),
            testkit::workspace().join("tests/data/fixtures").join(case)
        );
    }
}
