//! Inference in one place.
#![deny(missing_docs)]
