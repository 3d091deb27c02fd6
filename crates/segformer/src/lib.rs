//! segformer crate.
#![deny(missing_docs)]
