//! augment crate.
#![deny(missing_docs)]
