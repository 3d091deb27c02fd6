//! testkit's integration tests, one binary with a module per behaviour.

mod fixtures;
