//! An object read as a file: `Read + Seek` over a byte cache that [`RemoteFile::prefetch`]
//! fills in parallel and a read outside it fills one block at a time.

use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;

use crate::RemoteError;
use crate::cache::Cache;
use crate::fetch::Object;

/// Ranges closer than this are fetched as one: COG tiles are separated by a few bytes of
/// GDAL's leader and trailer, and a request costs more than a kilobyte.
const MERGE_GAP: u64 = 1024;

/// One object opened for reading: its size is known, its bytes are fetched when read.
///
/// `Read` and `Seek` make it a file for decoders (TIFF). A read outside the bytes fetched so
/// far fetches the block of [`crate::RemoteOptions::block_bytes`] around it (how the header
/// and IFDs come in, usually in one request); [`RemoteFile::prefetch`] fetches the ranges a
/// decoder is about to read, in parallel. When a read fails, `Read` returns an I/O error and
/// [`RemoteFile::take_error`] the [`RemoteError`] behind it (naming the URL).
pub struct RemoteFile {
    object: Arc<Object>,
    runtime: Arc<tokio::runtime::Runtime>,
    len: u64,
    pos: u64,
    cache: Cache,
    error: Option<RemoteError>,
}

impl std::fmt::Debug for RemoteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFile")
            .field("url", &self.object.url)
            .field("len", &self.len)
            .field("cached", &self.cache.bytes())
            .finish_non_exhaustive()
    }
}

impl RemoteFile {
    pub(crate) fn new(
        object: Arc<Object>,
        runtime: Arc<tokio::runtime::Runtime>,
        len: u64,
    ) -> Self {
        let budget = object.options.cache_bytes;
        Self {
            object,
            runtime,
            len,
            pos: 0,
            cache: Cache::new(budget),
            error: None,
        }
    }

    /// The URL it was opened from.
    pub fn url(&self) -> &str {
        &self.object.url
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held in memory now.
    pub fn cached_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Fetches the bytes of `ranges` that are not held yet, with at most
    /// [`crate::RemoteOptions::concurrency`] requests in flight, and holds them (with those
    /// already held) until the next prefetch, whatever the cache budget. Ranges are clamped
    /// to the object; nearly adjacent ones are fetched together, long ones in pieces of at
    /// most [`crate::RemoteOptions::request_bytes`].
    pub fn prefetch(&mut self, ranges: &[Range<u64>]) -> Result<(), RemoteError> {
        self.cache.begin();
        let mut wanted: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| r.start.min(self.len)..r.end.min(self.len))
            .filter(|r| r.start < r.end)
            .collect();
        wanted.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(wanted.len());
        for r in wanted {
            match merged.last_mut() {
                Some(last) if r.start <= last.end + MERGE_GAP => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let piece = self.object.options.request_bytes.max(1) as u64;
        let mut requests = Vec::new();
        for r in merged {
            for gap in self.cache.missing(r) {
                let mut at = gap.start;
                while at < gap.end {
                    let end = (at + piece).min(gap.end);
                    requests.push(at..end);
                    at = end;
                }
            }
        }
        if requests.is_empty() {
            return Ok(());
        }
        let object = Arc::clone(&self.object);
        let fetched = self.runtime.block_on(object.ranges(requests))?;
        for (start, bytes) in fetched {
            self.cache.insert(start, bytes);
        }
        Ok(())
    }

    /// The error behind the last failed `read`, if any (taken: a second call gives `None`).
    pub fn take_error(&mut self) -> Option<RemoteError> {
        self.error.take()
    }

    /// Fetches the missing block around `pos` into the cache.
    fn fill(&mut self, pos: u64) -> Result<(), RemoteError> {
        let block = self.object.options.block_bytes.max(1) as u64;
        let start = pos - pos % block;
        let gap = self
            .cache
            .gap_around(pos, start..(start + block).min(self.len));
        let object = Arc::clone(&self.object);
        let bytes = self.runtime.block_on(object.range(gap.clone()))?;
        self.cache.insert(gap.start, bytes);
        Ok(())
    }
}

impl Read for RemoteFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.pos >= self.len {
            return Ok(0);
        }
        let n = match self.cache.read_at(self.pos, buf) {
            Some(n) => n,
            None => {
                if let Err(e) = self.fill(self.pos) {
                    let err = io::Error::other(e.to_string());
                    self.error = Some(e);
                    return Err(err);
                }
                self.cache
                    .read_at(self.pos, buf)
                    .expect("the block around the position was just fetched")
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match pos {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("seek before the start of {}", self.object.url),
            )),
        }
    }
}
