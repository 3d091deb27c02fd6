//! One object store client per URL, built from the options' settings.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use crate::{RemoteError, RemoteOptions};

/// The store holding `url` and the object's path in it.
pub(crate) fn store_for(
    url: &str,
    options: &RemoteOptions,
) -> Result<(Arc<dyn ObjectStore>, Path), RemoteError> {
    let bad = |reason: String| RemoteError::Url {
        url: url.to_string(),
        reason,
    };
    let parsed = Url::parse(url).map_err(|e| bad(format!("not a URL ({e})")))?;
    // Retries are ours (one loop for 5xx, dropped connections and short bodies alike), so the
    // store gives up at once.
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 0,
        retry_timeout: Duration::from_secs(3600),
    };
    let store: Arc<dyn ObjectStore> = match parsed.scheme() {
        // NOTE: any http(s) URL is a plain HTTP object, also one on an S3 or Azure host:
        // object_store would sign those, and public buckets and pre-signed URLs need no
        // signature. The whole URL is the store's base, so a query (a SAS token) is kept.
        "http" | "https" => {
            let client = ClientOptions::new().with_allow_http(parsed.scheme() == "http");
            let store = HttpBuilder::new()
                .with_url(url)
                .with_client_options(client)
                .with_retry(retry)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            return Ok((Arc::new(store), Path::default()));
        }
        "s3" | "s3a" => {
            let mut b = AmazonS3Builder::new().with_url(url).with_retry(retry);
            for (k, v) in settings(options, "aws_") {
                let key = k.parse().map_err(|e| bad(format!("setting `{k}`: {e}")))?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(|e| bad(e.to_string()))?)
        }
        "gs" => {
            let mut b = GoogleCloudStorageBuilder::new()
                .with_url(url)
                .with_retry(retry);
            for (k, v) in settings(options, "google_") {
                let key = k.parse().map_err(|e| bad(format!("setting `{k}`: {e}")))?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(|e| bad(e.to_string()))?)
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let mut b = MicrosoftAzureBuilder::new().with_url(url).with_retry(retry);
            for (k, v) in settings(options, "azure_") {
                let key = k.parse().map_err(|e| bad(format!("setting `{k}`: {e}")))?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(|e| bad(e.to_string()))?)
        }
        other => {
            return Err(bad(format!(
                "scheme `{other}` is not one of https, http, s3, gs, az"
            )));
        }
    };
    let (_, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(e.to_string()))?;
    Ok((store, path))
}

/// The `(key, value)` settings of one store (keys starting with `prefix`), keys lowercased.
fn settings<'a>(
    options: &'a RemoteOptions,
    prefix: &'a str,
) -> impl Iterator<Item = (String, String)> + 'a {
    options
        .config
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .filter(move |(k, _)| k.starts_with(prefix))
}
