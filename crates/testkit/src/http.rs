//! A small HTTP/1.1 object server on 127.0.0.1 for tests and benchmarks of remote reads:
//! `HEAD` and `GET` with single `Range`s, keep-alive, a log of every request and the body
//! bytes sent, and faults on demand (a 503, a connection dropped half-way through a body).
//! Path-style S3 (`/bucket/key`) is the same protocol, so an S3 client pointed at
//! [`RangeServer::endpoint`] reads it too (the signature is logged, not checked).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A fault the server answers one request with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `503 Service Unavailable`, connection kept.
    Unavailable,
    /// The right headers and half of the body, then the connection is closed (for a `HEAD`,
    /// closed before any answer).
    Drop,
}

/// One request the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The `Range` asked for, as `start..end` (end exclusive).
    pub range: Option<(u64, u64)>,
    /// The status answered.
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// The `Authorization` header, when there was one.
    pub authorization: Option<String>,
    /// The fault it was answered with.
    pub fault: Option<Fault>,
}

enum Body {
    Bytes(Arc<Vec<u8>>),
    File(PathBuf, u64),
}

impl Body {
    fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::File(_, n) => *n,
        }
    }

    fn read(&self, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
        match self {
            Body::Bytes(b) => Ok(b[start as usize..end as usize].to_vec()),
            Body::File(p, _) => {
                let mut f = File::open(p)?;
                f.seek(SeekFrom::Start(start))?;
                let mut buf = vec![0; (end - start) as usize];
                f.read_exact(&mut buf)?;
                Ok(buf)
            }
        }
    }
}

#[derive(Default)]
struct State {
    objects: Mutex<HashMap<String, Arc<Body>>>,
    faults: Mutex<VecDeque<Fault>>,
    log: Mutex<Vec<Request>>,
    /// Wait before answering each request.
    delay: Mutex<Duration>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// The server; it stops when dropped.
pub struct RangeServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl RangeServer {
    /// Starts a server on a free port of 127.0.0.1, serving nothing yet.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port on 127.0.0.1");
        let addr = listener.local_addr().expect("the bound address");
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let state = Arc::clone(&state);
                    std::thread::spawn(move || serve_connection(conn, &state));
                }
            })
        };
        Self {
            addr,
            state,
            stop,
            accept: Some(accept),
        }
    }

    /// Serves `data` at `path` (`/dir/a.tif`; for S3 clients `/bucket/key`).
    pub fn serve(&self, path: &str, data: Vec<u8>) {
        self.insert(path, Body::Bytes(Arc::new(data)));
    }

    /// Serves the file at `file` at `path`, read from disk on each request (for objects too
    /// big to hold in memory).
    pub fn serve_file(&self, path: &str, file: PathBuf) -> std::io::Result<()> {
        let len = std::fs::metadata(&file)?.len();
        self.insert(path, Body::File(file, len));
        Ok(())
    }

    fn insert(&self, path: &str, body: Body) {
        let key = format!("/{}", path.trim_start_matches('/'));
        self.state
            .objects
            .lock()
            .unwrap()
            .insert(key, Arc::new(body));
    }

    /// `http://127.0.0.1:PORT`: the endpoint for an S3 client.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.endpoint(), path.trim_start_matches('/'))
    }

    /// Answers the next request (of any kind) with `fault`; faults queue in order.
    pub fn fail_next(&self, fault: Fault) {
        self.state.faults.lock().unwrap().push_back(fault);
    }

    /// Waits `delay` before answering each request (requests then overlap, so
    /// [`RangeServer::max_in_flight`] shows a client's concurrency).
    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock().unwrap() = delay;
    }

    /// The most requests that were being answered at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.state.log.lock().unwrap().clone()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.state.log.lock().unwrap().clear();
    }

    /// Body bytes sent so far (those of the logged requests).
    pub fn bytes_sent(&self) -> u64 {
        self.state.log.lock().unwrap().iter().map(|r| r.bytes).sum()
    }
}

impl Drop for RangeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `bytes=a-b` or `bytes=a-` as `start..end` (clamped to `len`); `None` if unparsable.
fn parse_range(value: &str, len: u64) -> Option<(u64, u64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let start: u64 = a.trim().parse().ok()?;
    let end = match b.trim() {
        "" => len,
        b => b.parse::<u64>().ok()?.saturating_add(1).min(len),
    };
    Some((start, end))
}

fn serve_connection(conn: TcpStream, state: &State) {
    // Idle keep-alive connections end on their own.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        // Request bodies (none expected) are skipped.
        if let Some(n) = headers
            .get("content-length")
            .and_then(|v| v.parse::<u64>().ok())
        {
            let _ = std::io::copy(&mut (&mut reader).take(n), &mut std::io::sink());
        }
        let path = percent_decode(target.split('?').next().unwrap_or(""));
        let fault = state.faults.lock().unwrap().pop_front();
        let mut req = Request {
            method: method.clone(),
            path: path.clone(),
            range: None,
            status: 0,
            bytes: 0,
            authorization: headers.get("authorization").cloned(),
            fault,
        };
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = *state.delay.lock().unwrap();
        std::thread::sleep(delay);
        let reply = answer(state, &headers, &mut req);
        // Logged before the client can see the answer, so a client that got it finds it.
        state.log.lock().unwrap().push(req);
        let sent = out
            .write_all(reply.head.as_bytes())
            .and_then(|_| out.write_all(&reply.body))
            .and_then(|_| out.flush());
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        if sent.is_err() || reply.close {
            let _ = out.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// What to send back for one request.
struct Reply {
    head: String,
    body: Vec<u8>,
    /// Close the connection after sending.
    close: bool,
}

impl Reply {
    fn empty(status: &str) -> Self {
        Reply {
            head: format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n"),
            body: Vec::new(),
            close: false,
        }
    }
}

/// The answer to one request; fills in `req`'s status, range and bytes.
fn answer(state: &State, headers: &HashMap<String, String>, req: &mut Request) -> Reply {
    if req.fault == Some(Fault::Unavailable) {
        req.status = 503;
        return Reply::empty("503 Service Unavailable");
    }
    let body = state.objects.lock().unwrap().get(&req.path).cloned();
    let Some(body) = body else {
        req.status = 404;
        return Reply::empty("404 Not Found");
    };
    let len = body.len();
    let (status, start, end) = match headers.get("range") {
        Some(r) => match parse_range(r, len) {
            Some((s, e)) if s < e => (206, s, e),
            _ => {
                req.status = 416;
                let mut reply = Reply::empty("416 Range Not Satisfiable");
                reply.head = format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\n\
                     Content-Length: 0\r\n\r\n"
                );
                return reply;
            }
        },
        None => (200, 0, len),
    };
    if status == 206 {
        req.range = Some((start, end));
    }
    req.status = status;
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\nETag: \"{len:x}\"\r\n\
         Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\nContent-Type: application/octet-stream\r\n",
        if status == 206 {
            "206 Partial Content"
        } else {
            "200 OK"
        },
        end - start
    );
    if status == 206 {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{len}\r\n",
            end - 1
        ));
    }
    head.push_str("\r\n");
    if req.method == "HEAD" {
        if req.fault == Some(Fault::Drop) {
            // No body to cut short: the connection closes before any answer.
            return Reply {
                head: String::new(),
                body: Vec::new(),
                close: true,
            };
        }
        return Reply {
            head,
            body: Vec::new(),
            close: false,
        };
    }
    let Ok(mut data) = body.read(start, end) else {
        return Reply {
            close: true,
            ..Reply::empty("500 Internal Server Error")
        };
    };
    let close = req.fault == Some(Fault::Drop);
    if close {
        // The headers announce the whole body; half of it comes, then the connection closes.
        data.truncate(data.len() / 2);
    }
    req.bytes = data.len() as u64;
    Reply {
        head,
        body: data,
        close,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_inclusive_ends_and_open_ends() {
        assert_eq!(parse_range("bytes=0-9", 100), Some((0, 10)));
        assert_eq!(parse_range("bytes=90-", 100), Some((90, 100)));
        assert_eq!(parse_range("bytes=90-200", 100), Some((90, 100)));
        assert_eq!(parse_range("items=0-1", 100), None);
        assert_eq!(percent_decode("/a%20b/c%2Fd"), "/a b/c/d");
    }
}
