//! Objects read by URL with range requests: `https://…`, `http://…`, `s3://bucket/key`,
//! `gs://bucket/key` and `az://container/path`, through [`object_store`].
//!
//! A [`Remote`] opens [`RemoteFile`]s: `Read + Seek` views of objects whose bytes are fetched
//! when read and kept in a small cache, so a TIFF decoder reads a cloud-optimised GeoTIFF's
//! header once and then only the tiles a window needs ([`RemoteFile::prefetch`] fetches
//! those in parallel). Every request is retried with exponential backoff on 5xx answers,
//! dropped connections, timeouts and short bodies; after the last retry the error names the
//! URL and the byte range. [`Remote::stats`] counts requests, bytes and retries.
//!
//! Settings and credentials are values ([`RemoteOptions::config`]): the library reads no
//! environment variable; [`RemoteOptions::from_env`] is how a binary takes the standard ones
//! (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `GOOGLE_*`,
//! `AZURE_*`). Without keys, S3 falls back to the web identity token, the container's
//! credentials and the instance metadata service, as object_store does; AWS profiles
//! (`~/.aws/config`) are not read (object_store has no profile support).
//!
//! ```
//! use std::io::Read;
//! use remote::{Remote, RemoteOptions};
//!
//! # let server = testkit::http::RangeServer::start();
//! # server.serve("cogs/B04.tif", b"II*\0 and the rest of a TIFF".to_vec());
//! # let url = server.url("cogs/B04.tif");
//! // A binary passes `RemoteOptions::from_env()`; `url` may be https://, s3://, gs://, az://.
//! let remote = Remote::new(RemoteOptions::default());
//! let mut file = remote.open(&url)?;
//! file.prefetch(&[0..4])?;
//! let mut magic = [0u8; 4];
//! file.read_exact(&mut magic)?;
//! assert_eq!(&magic, b"II*\0");
//! assert_eq!(remote.stats().requests, 2); // the HEAD of `open`, one range
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod cache;
mod error;
mod fetch;
mod file;
mod store;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use error::RemoteError;
pub use file::RemoteFile;

use fetch::{Counters, Object};

/// How objects are fetched. [`Default`] suits cloud stores; settings and credentials go in
/// [`RemoteOptions::config`].
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Range requests in flight at once while prefetching (8).
    pub concurrency: usize,
    /// Attempts after the first one before a request fails for good (5).
    pub retries: u32,
    /// Wait before the first retry (200 ms), doubled for each further one.
    pub backoff: Duration,
    /// Longest wait between two attempts (10 s).
    pub max_backoff: Duration,
    /// Bytes of an object kept between prefetches (32 MiB); the current prefetch's bytes are
    /// always kept, so memory is this plus one window's compressed tiles, per open object.
    pub cache_bytes: usize,
    /// What a read outside the prefetched ranges fetches (64 KiB around it): a COG's header
    /// and IFDs usually come in one such block.
    pub block_bytes: usize,
    /// Longest single range request (8 MiB): longer ranges are fetched in parallel pieces.
    pub request_bytes: usize,
    /// object_store settings as `(key, value)`, keys prefixed by store: `aws_endpoint`,
    /// `aws_region`, `aws_allow_http`, `aws_access_key_id`, `aws_skip_signature`,
    /// `google_service_account`, `azure_storage_account_name`… (object_store's
    /// `AmazonS3ConfigKey`, `GoogleConfigKey`, `AzureConfigKey`). An unknown key fails
    /// [`Remote::open`] for that store.
    pub config: Vec<(String, String)>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            retries: 5,
            backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
            cache_bytes: 32 << 20,
            block_bytes: 64 << 10,
            request_bytes: 8 << 20,
            config: Vec::new(),
        }
    }
}

impl RemoteOptions {
    /// The defaults, with [`RemoteOptions::config`] taken from this process's `AWS_*`,
    /// `GOOGLE_*` and `AZURE_*` variables (lowercased, as object_store's `from_env` builders
    /// do; variables object_store does not know, such as `AWS_PROFILE`, are left out),
    /// `SERVICE_ACCOUNT` and `MSI_ENDPOINT`.
    pub fn from_env() -> Self {
        let vars = std::env::vars().map(|(k, v)| match k.as_str() {
            "SERVICE_ACCOUNT" => ("google_service_account".to_string(), v),
            "MSI_ENDPOINT" => ("azure_msi_endpoint".to_string(), v),
            _ => (k.to_ascii_lowercase(), v),
        });
        Self {
            config: vars.filter(|(k, _)| known_key(k)).collect(),
            ..Self::default()
        }
    }
}

/// Whether object_store has a setting named `key` (lowercase, with its store's prefix).
fn known_key(key: &str) -> bool {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;
    (key.starts_with("aws_") && key.parse::<AmazonS3ConfigKey>().is_ok())
        || (key.starts_with("google_") && key.parse::<GoogleConfigKey>().is_ok())
        || (key.starts_with("azure_") && key.parse::<AzureConfigKey>().is_ok())
}

/// Whether `location` is a URL this crate reads (`http(s)://`, `s3://`, `gs://`, `az://`…)
/// rather than a local path.
pub fn is_url(location: &str) -> bool {
    let Some((scheme, rest)) = location.split_once("://") else {
        return false;
    };
    !rest.is_empty()
        && matches!(
            scheme.to_ascii_lowercase().as_str(),
            "http" | "https" | "s3" | "s3a" | "gs" | "az" | "azure" | "abfs" | "abfss" | "adl"
        )
}

/// Requests, bytes and retries of everything a [`Remote`] fetched so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchStats {
    /// Requests sent (HEAD and GET, retries included).
    pub requests: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Requests that were retries of a failed one.
    pub retries: u64,
}

/// Opens objects by URL with one set of [`RemoteOptions`], and counts what they fetch.
///
/// Cheap to create: the async runtime object_store needs starts with the first
/// [`Remote::open`]. Clones share the runtime and the counters.
#[derive(Clone, Debug)]
pub struct Remote {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: RemoteOptions,
    runtime: OnceLock<Arc<tokio::runtime::Runtime>>,
    counters: Arc<Counters>,
}

impl Remote {
    /// A remote reader with these options.
    pub fn new(options: RemoteOptions) -> Self {
        Self {
            shared: Arc::new(Shared {
                options,
                runtime: OnceLock::new(),
                counters: Arc::default(),
            }),
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &RemoteOptions {
        &self.shared.options
    }

    fn runtime(&self, url: &str) -> Result<Arc<tokio::runtime::Runtime>, RemoteError> {
        if let Some(rt) = self.shared.runtime.get() {
            return Ok(Arc::clone(rt));
        }
        // One worker drives every request's IO (they wait on the network, not on the CPU),
        // whichever threads are blocked on them: readers of several assets run in parallel.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("segfit-remote")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Url {
                url: url.to_string(),
                reason: format!("cannot start the async runtime: {e}"),
            })?;
        Ok(Arc::clone(self.shared.runtime.get_or_init(|| Arc::new(rt))))
    }

    fn object(&self, url: &str) -> Result<Arc<Object>, RemoteError> {
        let (store, path) = store::store_for(url, &self.shared.options)?;
        Ok(Arc::new(Object {
            url: url.to_string(),
            store,
            path,
            options: self.shared.options.clone(),
            counters: Arc::clone(&self.shared.counters),
        }))
    }

    /// Opens the object at `url`: one HEAD request for its size, no bytes yet.
    pub fn open(&self, url: &str) -> Result<RemoteFile, RemoteError> {
        let runtime = self.runtime(url)?;
        let object = self.object(url)?;
        let len = runtime.block_on(object.size())?;
        Ok(RemoteFile::new(object, runtime, len))
    }

    /// The whole object at `url` (a STAC item, a scene list): one GET.
    pub fn read_all(&self, url: &str) -> Result<Vec<u8>, RemoteError> {
        let runtime = self.runtime(url)?;
        let object = self.object(url)?;
        Ok(runtime.block_on(object.all())?.to_vec())
    }

    /// What every object opened by this remote (and its clones) fetched so far.
    pub fn stats(&self) -> FetchStats {
        let c = &self.shared.counters;
        FetchStats {
            requests: c.requests.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }
}
