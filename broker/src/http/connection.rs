//! One client connection as the HTTP library sees it: the socket, with the request heads
//! checked on the way in ([`super::head`]), the header and idle timeouts, and the JSON answer
//! to a malformed head.
//!
//! Timeouts (both end the connection without an answer, as Kafka closes idle connections):
//! - header: a request head must arrive whole within `tidewater.request.header.timeout.ms` of
//!   its first byte; for a new connection the clock starts at the accept, so a connection that
//!   sends nothing at all is closed after it too;
//! - body: a request body of `Content-Length` bytes must arrive whole within
//!   `tidewater.request.body.timeout.ms` of the end of its head (from the head, not from its
//!   first byte, so that a client sending no body byte at all is closed too);
//! - idle: a connection with no request in progress and no byte moving either way for
//!   `connections.max.idle.ms` is closed, and so is one whose request body stalls that long.
//!   A request being served (a long poll, a delayed produce) keeps its connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::head::RequestStream;
use super::ConnectionLimits;
use crate::error::ErrorKind;

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// After the last answer, how long a closing connection keeps reading (and dropping) what the
/// client still sends, so that closing with unread bytes does not reset the connection before
/// the client has read that answer (a "lingering close").
const LINGER_MAX: Duration = Duration::from_secs(2);
/// Bytes a lingering close reads at most.
const LINGER_BYTES_MAX: usize = 1 << 20;
/// Bound on writing the JSON answer to a malformed head during the close.
const REFUSAL_WRITE_MAX: Duration = Duration::from_secs(5);

/// Requests in progress on a connection, shared by the service (which starts and ends them)
/// and the [`Connection`] (which does not time out a connection serving one, and waits for
/// them to end before it refuses a malformed head that came after them).
#[derive(Debug, Default)]
pub struct Activity {
    requests_in_flight: AtomicUsize,
    /// Woken when the last request in progress ends.
    idle_waker: Mutex<Option<Waker>>,
}

impl Activity {
    /// Counts a request as in progress until the returned guard is dropped.
    pub fn request_started(self: &Arc<Self>) -> InFlight {
        self.requests_in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    fn in_flight(&self) -> bool {
        self.requests_in_flight.load(Ordering::SeqCst) > 0
    }

    /// Whether a request is in progress; if so, `waker` is woken when the last one ends.
    fn in_flight_or_wake(&self, waker: &Waker) -> bool {
        *self.idle_waker.lock().expect("idle waker lock") = Some(waker.clone());
        self.in_flight()
    }
}

/// A request in progress (see [`Activity::request_started`]).
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.requests_in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            let waker = self.0.idle_waker.lock().expect("idle waker lock").take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

/// The socket of one connection, wrapped (see the module documentation).
pub struct Connection {
    stream: TcpStream,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    /// The request framing, which holds back a head until it is complete and checked.
    requests: RequestStream,
    /// Bytes cleared for the library and not yet handed to it.
    cleared: Vec<u8>,
    /// How much of `cleared` was handed over.
    cleared_at: usize,
    /// When the request head now arriving started (the accept, until the first head is in).
    head_started: Option<Instant>,
    /// When the body now arriving started (its head was complete), while one is arriving.
    body_started: Option<Instant>,
    /// When a byte last moved either way.
    last_activity: Instant,
    /// Wakes a pending read at the current deadline.
    deadline: Pin<Box<Sleep>>,
    /// Why the head that arrived last is malformed, until the requests before it are
    /// answered and the refusal can go out.
    malformed: Option<String>,
    /// The answer to a malformed head, and how many of its bytes were written.
    refusal: Option<(Vec<u8>, usize)>,
    /// Set once the library was told the client's side ended (end of stream, timeout or
    /// refusal): nothing more is read for it.
    read_closed: bool,
    scratch: Vec<u8>,
}

impl Connection {
    /// Wraps a just-accepted socket.
    pub fn new(stream: TcpStream, limits: ConnectionLimits, activity: Arc<Activity>) -> Self {
        let now = Instant::now();
        let header_deadline = now + limits.header_timeout;
        Connection {
            stream,
            limits,
            activity,
            requests: RequestStream::default(),
            cleared: Vec::new(),
            cleared_at: 0,
            head_started: Some(now),
            body_started: None,
            last_activity: now,
            deadline: Box::pin(tokio::time::sleep_until(header_deadline)),
            malformed: None,
            refusal: None,
            read_closed: false,
            scratch: vec![0; READ_CHUNK_BYTES],
        }
    }

    /// When the connection times out as it is now, if it can: the header deadline while a
    /// head is arriving, the idle deadline while a body is or nothing is in progress. While a
    /// request is in progress there is none, and its end wakes the task (the library may not
    /// read again by itself) so that the idle deadline is armed then.
    fn current_deadline(&self, cx: &Context<'_>) -> Option<Instant> {
        if self.requests.in_body() {
            let idle = self.last_activity + self.limits.idle_timeout;
            let started = self.body_started.expect("a body in progress has a start");
            return Some(idle.min(started + self.limits.body_timeout));
        }
        if let Some(started) = self.head_started {
            return Some(started + self.limits.header_timeout);
        }
        if self.activity.in_flight_or_wake(cx.waker()) {
            return None;
        }
        Some(self.last_activity + self.limits.idle_timeout)
    }

    /// Takes bytes just read from the client through the request framing.
    fn take_input(&mut self, n: usize) {
        let now = Instant::now();
        self.last_activity = now;
        let heads_before = self.requests.heads_completed();
        let mut cleared = std::mem::take(&mut self.cleared);
        cleared.drain(..self.cleared_at);
        self.cleared_at = 0;
        let fed = self.requests.feed(&self.scratch[..n], &mut cleared);
        self.cleared = cleared;
        if self.requests.heads_completed() > heads_before {
            self.head_started = None;
            self.body_started = None;
        }
        self.body_started = match self.requests.in_body() {
            true => self.body_started.or(Some(now)),
            false => None,
        };
        if self.requests.holds_partial_head() && self.head_started.is_none() {
            self.head_started = Some(now);
        }
        if let Err(why) = fed {
            tracing::debug!(peer = ?self.stream.peer_addr().ok(), "malformed request: {why}");
            self.malformed = Some(why);
        }
    }

    /// Once no request is in progress (an answer of ours must not mix with the bytes of
    /// another), answers the malformed head with the JSON error and ends the client's side for
    /// the library, which then closes the connection (the answer goes out on the way).
    fn poll_refuse(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.activity.in_flight_or_wake(cx.waker()) {
            return Poll::Pending;
        }
        if let Some(why) = self.malformed.take() {
            self.refusal = Some((refusal(&why), 0));
            self.close_read();
        }
        Poll::Ready(())
    }

    fn close_read(&mut self) {
        self.read_closed = true;
        self.cleared.truncate(self.cleared_at);
    }

    /// Writes what is left of the refusal, if any.
    fn poll_write_refusal(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.refusal {
            if *written == bytes.len() {
                self.refusal = None;
                break;
            }
            let n =
                std::task::ready!(Pin::new(&mut self.stream).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Ends the connection once the library is done with it: the refusal if it is still
    /// unsent, then the end of our side, then a bounded lingering read (see [`LINGER_MAX`]).
    pub async fn close(mut self) {
        if self.refusal.is_some() {
            let write = std::future::poll_fn(|cx| self.poll_write_refusal(cx));
            let _ = tokio::time::timeout(REFUSAL_WRITE_MAX, write).await;
        }
        let _ = tokio::time::timeout(REFUSAL_WRITE_MAX, self.stream.shutdown()).await;
        let mut scratch = std::mem::take(&mut self.scratch);
        let drain = async {
            let mut total = 0;
            while total < LINGER_BYTES_MAX {
                match self.stream.read(&mut scratch).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_MAX, drain).await;
    }
}

/// The HTTP answer to a malformed request head: 400 with the API's JSON error, then close.
fn refusal(why: &str) -> Vec<u8> {
    let kind = ErrorKind::InvalidRequest;
    let body = serde_json::json!({
        "error": kind.name(),
        "message": format!("malformed HTTP request: {why}"),
    })
    .to_string();
    let status = super::errors::status(kind);
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.cleared_at < this.cleared.len() {
                let n = buf.remaining().min(this.cleared.len() - this.cleared_at);
                buf.put_slice(&this.cleared[this.cleared_at..this.cleared_at + n]);
                this.cleared_at += n;
                return Poll::Ready(Ok(()));
            }
            if this.malformed.is_some() {
                std::task::ready!(this.poll_refuse(cx));
            }
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            let limit = this.requests.read_limit().map_or(READ_CHUNK_BYTES, |l| {
                l.min(READ_CHUNK_BYTES as u64) as usize
            });
            let mut chunk = ReadBuf::new(&mut this.scratch[..limit]);
            match Pin::new(&mut this.stream).poll_read(cx, &mut chunk) {
                Poll::Ready(Ok(())) => {
                    let n = chunk.filled().len();
                    if n == 0 {
                        this.close_read();
                    } else {
                        this.take_input(n);
                    }
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => {
                    let Some(deadline) = this.current_deadline(cx) else {
                        return Poll::Pending;
                    };
                    if this.deadline.deadline() != deadline {
                        this.deadline.as_mut().reset(deadline);
                    }
                    if this.deadline.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    tracing::debug!(
                        peer = ?this.stream.peer_addr().ok(),
                        partial_head = this.requests.holds_partial_head(),
                        partial_body = this.requests.in_body(),
                        "closing a connection that timed out"
                    );
                    this.close_read();
                }
            }
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = std::task::ready!(Pin::new(&mut self.stream).poll_write(cx, buf))?;
        if written > 0 {
            self.last_activity = Instant::now();
        }
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_write_refusal(cx))?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_json_answer() {
        let answer = String::from_utf8(refusal("bad \"line\"")).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"], "INVALID_REQUEST");
        assert_eq!(body["message"], "malformed HTTP request: bad \"line\"");
    }
}
