//! The crate's error type.

/// Everything that can go wrong while building a pipeline or transforming a sample.
///
/// Messages are lowercase, say what was expected and what was found, and name the
/// transform or key involved so the user can fix the config or the data.
#[derive(Debug, thiserror::Error)]
pub enum AugmentError {
    /// The pipeline TOML did not parse or did not match the schema: an unknown transform
    /// name or parameter (the message lists the valid ones), a wrong type, a missing key.
    #[error("augment pipeline config: {0}")]
    Config(String),

    /// A parameter parsed but its value is out of range (e.g. `p = 1.5`, a negative size).
    #[error("augment pipeline config: `{key}` = {value}: {reason}")]
    InvalidParameter {
        /// Where the value sits, e.g. `transforms[2].limit`.
        key: String,
        /// The offending value as written.
        value: String,
        /// What was expected instead.
        reason: String,
    },

    /// A transform cannot handle this input (e.g. HueSaturationValue on a 4-band image,
    /// a crop bigger than the image, statistics for 3 bands on a 4-band image).
    #[error("{transform}: {reason}")]
    Unsupported {
        /// The transform's name as written in the config.
        transform: &'static str,
        /// What about the input is not supported and how to fix it.
        reason: String,
    },

    /// The image and mask sizes disagree, or a buffer does not hold `height * width * bands` samples.
    #[error("shape mismatch: {0}")]
    Shape(String),
}
