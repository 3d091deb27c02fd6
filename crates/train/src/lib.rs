//! train crate.
#![deny(missing_docs)]
