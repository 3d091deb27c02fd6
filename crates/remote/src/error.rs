//! The crate's one error type: every variant names the URL.

/// Everything that can go wrong while reading an object by URL.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The text is not a URL of a store this crate reads, or the store's settings are invalid.
    #[error("cannot read `{url}`: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// The object does not exist.
    #[error("{url} not found ({reason}); check the URL")]
    NotFound {
        /// The URL.
        url: String,
        /// What the store answered.
        reason: String,
    },
    /// The store refused the credentials, or there were none.
    #[error(
        "access to {url} was denied ({reason}); check the credentials (AWS_*, GOOGLE_*, AZURE_* \
         variables, or the machine's role)"
    )]
    Denied {
        /// The URL.
        url: String,
        /// What the store answered.
        reason: String,
    },
    /// A request kept failing (5xx, dropped connections, timeouts) after every retry.
    #[error("reading bytes {start}..{end} of {url} failed after {attempts} attempt(s): {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// Requests made, the first one included.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
}
