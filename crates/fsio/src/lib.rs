//! Atomic writes for segfit's outputs and checkpoints.
#![deny(missing_docs)]
