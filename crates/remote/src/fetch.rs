//! Range requests with retries and exponential backoff, several in flight at once.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::{RemoteError, RemoteOptions};

/// Requests, bytes and retries of every object a [`crate::Remote`] opened.
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
    pub retries: AtomicU64,
}

/// One object: where it is and how to ask for it.
pub(crate) struct Object {
    pub url: String,
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    pub options: RemoteOptions,
    pub counters: Arc<Counters>,
}

/// What one attempt's failure means.
enum Failure {
    /// Worth another attempt: 5xx, a dropped connection, a timeout, a short body.
    Transient(String),
    /// Final at once (missing object, refused credentials).
    Final(RemoteError),
}

impl Object {
    fn classify(&self, e: object_store::Error) -> Failure {
        let url = self.url.clone();
        match e {
            object_store::Error::NotFound { source, .. } => Failure::Final(RemoteError::NotFound {
                url,
                reason: source.to_string(),
            }),
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => {
                Failure::Final(RemoteError::Denied {
                    url,
                    reason: source.to_string(),
                })
            }
            // Everything else (5xx, connection, body and timeout errors all arrive as
            // `Generic`) may pass: a 4xx among them costs a few bounded retries.
            other => Failure::Transient(chain(&other)),
        }
    }

    /// The delay before retry `n` (1-based): `backoff · 2ⁿ⁻¹`, at most `max_backoff`.
    fn backoff(&self, n: u32) -> Duration {
        let o = &self.options;
        o.backoff
            .saturating_mul(1u32 << (n - 1).min(16))
            .min(o.max_backoff)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries are spent.
    async fn retried<T, F, Fut>(&self, what: Range<u64>, attempt: F) -> Result<T, RemoteError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            let reason = match attempt().await {
                Ok(v) => return Ok(v),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Transient(reason)) => reason,
            };
            if attempts > self.options.retries {
                return Err(RemoteError::Fetch {
                    url: self.url.clone(),
                    start: what.start,
                    end: what.end,
                    attempts,
                    reason,
                });
            }
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.backoff(attempts)).await;
        }
    }

    /// The object's size in bytes.
    pub(crate) async fn size(&self) -> Result<u64, RemoteError> {
        self.retried(0..0, || async move {
            self.store
                .head(&self.path)
                .await
                .map(|meta| meta.size)
                .map_err(|e| self.classify(e))
        })
        .await
    }

    /// Bytes `range`, exactly.
    pub(crate) async fn range(&self, range: Range<u64>) -> Result<Bytes, RemoteError> {
        let want = range.end - range.start;
        self.retried(range.clone(), || {
            let range = range.clone();
            async move {
                let bytes = self
                    .store
                    .get_range(&self.path, range.clone())
                    .await
                    .map_err(|e| self.classify(e))?;
                self.counters
                    .bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                if bytes.len() as u64 != want {
                    return Err(Failure::Transient(format!(
                        "{} bytes came back instead of {want}",
                        bytes.len()
                    )));
                }
                Ok(bytes)
            }
        })
        .await
    }

    /// The whole object (when its size is not known yet).
    pub(crate) async fn all(&self) -> Result<Bytes, RemoteError> {
        self.retried(0..0, || async move {
            let got = self
                .store
                .get(&self.path)
                .await
                .map_err(|e| self.classify(e))?;
            let bytes = got.bytes().await.map_err(|e| self.classify(e))?;
            self.counters
                .bytes
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            Ok(bytes)
        })
        .await
    }

    /// Every range of `ranges`, at most `concurrency` requests in flight; in any order.
    pub(crate) async fn ranges(
        &self,
        ranges: Vec<Range<u64>>,
    ) -> Result<Vec<(u64, Bytes)>, RemoteError> {
        stream::iter(ranges)
            .map(|r| async move { self.range(r.clone()).await.map(|b| (r.start, b)) })
            .buffer_unordered(self.options.concurrency.max(1))
            .try_collect()
            .await
    }
}

/// An error and its causes on one line: object_store's outer messages alone ("Generic HTTP
/// error") do not say what happened.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = cause.source();
    }
    s
}
