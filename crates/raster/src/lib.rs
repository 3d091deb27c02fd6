//! segfit's in-memory raster types: images of u8/u16/f32 samples with any number of bands,
//! class masks and georeferencing, with no codec behind them.
#![deny(missing_docs)]
