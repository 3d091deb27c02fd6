//! `RemoteFile` against a real HTTP server started by each test (`testkit::http::RangeServer`
//! on 127.0.0.1): reads match the served bytes, prefetches fetch exactly what is missing with
//! bounded concurrency, memory stays within the cache budget, failures are retried and the
//! last one names the URL.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use remote::{Remote, RemoteError, RemoteOptions, is_url};
use testkit::http::{Fault, RangeServer};

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn fast() -> RemoteOptions {
    RemoteOptions {
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..Default::default()
    }
}

fn served(n: usize) -> (RangeServer, Vec<u8>) {
    let server = RangeServer::start();
    let data = bytes(n);
    server.serve("obj.bin", data.clone());
    (server, data)
}

#[test]
fn reads_and_seeks_return_the_served_bytes() {
    let (server, data) = served(300_000);
    let opts = RemoteOptions {
        block_bytes: 4096,
        ..fast()
    };
    let remote = Remote::new(opts);
    let mut f = remote.open(&server.url("obj.bin")).unwrap();
    assert_eq!(f.len(), 300_000);
    for (at, n) in [(0u64, 10usize), (4090, 20), (299_990, 10), (123_456, 9000)] {
        f.seek(SeekFrom::Start(at)).unwrap();
        let mut buf = vec![0; n];
        f.read_exact(&mut buf).unwrap();
        assert_eq!(buf, data[at as usize..at as usize + n], "at {at}");
    }
    f.seek(SeekFrom::End(-5)).unwrap();
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, data[299_995..]);
    assert!(f.seek(SeekFrom::Current(-400_000)).is_err());
    // A read outside the fetched bytes fetches one block (4 KiB) around it.
    let log = server.requests();
    assert_eq!(log[0].method, "HEAD");
    assert!(log[1..].iter().all(|r| {
        let (a, b) = r.range.unwrap();
        b - a <= 4096 && a % 4096 == 0
    }));
}

#[test]
fn a_prefetch_fetches_only_what_is_missing_with_bounded_concurrency() {
    let (server, data) = served(1 << 20);
    server.set_delay(Duration::from_millis(30));
    let opts = RemoteOptions {
        concurrency: 3,
        ..fast()
    };
    let remote = Remote::new(opts);
    let mut f = remote.open(&server.url("obj.bin")).unwrap();
    server.clear_requests();
    // Twelve ranges 10 KiB apart: twelve requests, at most three at once.
    let ranges: Vec<_> = (0..12u64)
        .map(|i| i * 20_000..i * 20_000 + 10_000)
        .collect();
    f.prefetch(&ranges).unwrap();
    let log = server.requests();
    let mut got: Vec<_> = log.iter().map(|r| r.range.unwrap()).collect();
    got.sort();
    let want: Vec<_> = ranges.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(got, want);
    assert!(
        (2..=3).contains(&server.max_in_flight()),
        "{}",
        server.max_in_flight()
    );
    // The bytes are there: reads of them send nothing.
    server.clear_requests();
    let mut buf = vec![0; 10_000];
    f.seek(SeekFrom::Start(20_000)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(buf, data[20_000..30_000]);
    // Overlapping and nearly adjacent ranges: only the missing parts, adjacent ones together.
    f.prefetch(&[5_000..25_000, 25_500..26_000, 250_000..250_100])
        .unwrap();
    let mut got: Vec<_> = server.requests().iter().map(|r| r.range.unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![(10_000, 20_000), (250_000, 250_100)]);
    assert_eq!(remote.stats().retries, 0);
}

#[test]
fn memory_stays_within_the_cache_budget_plus_the_current_prefetch() {
    let (server, _) = served(1 << 20);
    let opts = RemoteOptions {
        cache_bytes: 50_000,
        request_bytes: 16_384,
        ..fast()
    };
    let remote = Remote::new(opts);
    let mut f = remote.open(&server.url("obj.bin")).unwrap();
    for i in 0..20u64 {
        let r = i * 40_000..i * 40_000 + 40_000;
        f.prefetch(std::slice::from_ref(&r)).unwrap();
        assert!(f.cached_bytes() <= 50_000 + 40_000, "{}", f.cached_bytes());
    }
    // 40 KB ranges came in pieces of at most 16 KiB.
    assert!(
        server
            .requests()
            .iter()
            .filter_map(|r| r.range)
            .all(|(a, b)| b - a <= 16_384)
    );
}

#[test]
fn failures_are_retried_with_backoff_and_the_last_one_names_the_url() {
    let (server, data) = served(100_000);
    let remote = Remote::new(fast());
    let url = server.url("obj.bin");
    server.fail_next(Fault::Unavailable);
    let mut f = remote.open(&url).unwrap();
    server.fail_next(Fault::Drop);
    server.fail_next(Fault::Unavailable);
    f.prefetch(std::slice::from_ref(&(1000..60_000))).unwrap();
    let mut buf = vec![0; 59_000];
    f.seek(SeekFrom::Start(1000)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(buf, data[1000..60_000]);
    assert_eq!(remote.stats().retries, 3);
    // Past the retries: the error names the URL, the range and the attempts.
    let opts = RemoteOptions {
        retries: 1,
        ..fast()
    };
    let strict = Remote::new(opts);
    let mut f = strict.open(&url).unwrap();
    server.fail_next(Fault::Unavailable);
    server.fail_next(Fault::Drop);
    let err = f.prefetch(std::slice::from_ref(&(0..5000))).unwrap_err();
    assert!(
        matches!(
            &err,
            RemoteError::Fetch {
                attempts: 2,
                start: 0,
                end: 5000,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(&url), "{err}");
    // The same through `Read`: an I/O error, and the RemoteError behind it.
    server.fail_next(Fault::Unavailable);
    server.fail_next(Fault::Unavailable);
    f.seek(SeekFrom::Start(70_000)).unwrap();
    assert!(f.read(&mut [0; 10]).is_err());
    assert!(matches!(f.take_error(), Some(RemoteError::Fetch { .. })));
    assert!(f.take_error().is_none());
}

#[test]
fn missing_objects_and_unreadable_urls_are_named() {
    let (server, _) = served(10);
    let remote = Remote::new(fast());
    let url = server.url("missing.bin");
    let err = remote.open(&url).unwrap_err();
    assert!(
        matches!(&err, RemoteError::NotFound { url: u, .. } if *u == url),
        "{err:?}"
    );
    // Not found is final: one request, no retry.
    assert_eq!(server.requests().len(), 1);
    let err = remote.open("ftp://host/a.tif").unwrap_err();
    assert!(err.to_string().contains("scheme `ftp`"), "{err}");
    assert_eq!(remote.read_all(&server.url("obj.bin")).unwrap(), bytes(10));
    assert!(is_url("s3://b/k") && is_url("https://h/a.tif") && is_url("GS://b/k"));
    assert!(!is_url("/data/a.tif") && !is_url("C:\\a.tif") && !is_url("s3://"));
}
