//! Follows the requests of one connection through their HTTP/1.1 framing (a head, then a body
//! of `Content-Length` bytes) so that each request head is checked, whole, before the HTTP
//! library sees it. A malformed head is answered by the broker with its JSON error; the library
//! would answer it with an empty `400`.
//!
//! The checks are those the library (hyper, with httparse) applies to a request head: the
//! request line and header fields as httparse parses them, at most [`HEADER_FIELDS_MAX`]
//! fields, a request target that parses as a URI, `Content-Length` values that are numbers and
//! agree. A body must be announced by `Content-Length`: a chunked body (`Transfer-Encoding`),
//! an upgrade or CONNECT is refused as malformed, since a body of unknown length could not be
//! held to `tidewater.request.body.timeout.ms` (the library would wait for its end for as long
//! as the connection lives) and the broker's API takes no such requests.

use std::borrow::Cow;

/// Largest request head accepted. The broker's heads are a request line with a topic name
/// (at most 249 characters) and a few header fields; a bound keeps a head that never ends
/// from growing without limit (it is re-parsed as lines arrive).
pub const REQUEST_HEAD_BYTES_MAX: usize = 16 * 1024;

/// Header fields per request at most (hyper's default).
pub const HEADER_FIELDS_MAX: usize = 100;

/// Where in its request stream a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Receiving a request head (the bytes so far are held back).
    Head,
    /// Receiving a body: this many bytes belong to it.
    Body { remaining: u64 },
}

/// A connection's request stream, as far as its framing goes.
#[derive(Debug)]
pub struct RequestStream {
    state: State,
    /// Bytes of the head being received, held back until it is complete and checked.
    held: Vec<u8>,
    /// Request heads that were complete and valid.
    heads_completed: u64,
}

impl Default for RequestStream {
    fn default() -> RequestStream {
        RequestStream {
            state: State::Head,
            held: Vec::new(),
            heads_completed: 0,
        }
    }
}

impl RequestStream {
    /// Takes bytes just read from the client. Appends to `cleared` the bytes that may go to the
    /// library: complete, checked heads and the body bytes after them. A head still arriving
    /// is held back. Fails with a description for a client when a head is malformed (the
    /// connection is then answered and closed).
    pub fn feed(&mut self, input: &[u8], cleared: &mut Vec<u8>) -> Result<(), String> {
        let mut input = Cow::Borrowed(input);
        loop {
            match self.state {
                State::Body { remaining } => {
                    let n = remaining.min(input.len() as u64) as usize;
                    cleared.extend_from_slice(&input[..n]);
                    self.state = match remaining - n as u64 {
                        0 => State::Head,
                        remaining => State::Body { remaining },
                    };
                    input = match input {
                        Cow::Borrowed(bytes) => Cow::Borrowed(&bytes[n..]),
                        Cow::Owned(mut bytes) => {
                            bytes.drain(..n);
                            Cow::Owned(bytes)
                        }
                    };
                    if input.is_empty() {
                        return Ok(());
                    }
                }
                State::Head => {
                    if input.is_empty() {
                        return Ok(());
                    }
                    self.held.extend_from_slice(&input);
                    // A head ends with an empty line: parse only once a line ended, so a head
                    // arriving a byte at a time is not parsed once per byte.
                    let line_ended = input.contains(&b'\n');
                    let head = if line_ended {
                        check_head(&self.held)?
                    } else {
                        None
                    };
                    let Some((head_len, body)) = head else {
                        if self.held.len() > REQUEST_HEAD_BYTES_MAX {
                            return Err(format!(
                                "request head larger than {REQUEST_HEAD_BYTES_MAX} bytes"
                            ));
                        }
                        return Ok(());
                    };
                    cleared.extend_from_slice(&self.held[..head_len]);
                    let rest = self.held.split_off(head_len);
                    self.held.clear();
                    self.heads_completed += 1;
                    self.state = body;
                    input = Cow::Owned(rest);
                }
            }
        }
    }

    /// Whether part of a request head has arrived and the rest has not.
    pub fn holds_partial_head(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether a request body is arriving (its length is known and not all of it came yet).
    pub fn in_body(&self) -> bool {
        matches!(self.state, State::Body { .. })
    }

    /// Complete, valid request heads so far.
    pub fn heads_completed(&self) -> u64 {
        self.heads_completed
    }

    /// At most how many bytes the next read should take, so that a read never runs from a
    /// body into the next head unnoticed (`None`: any amount).
    pub fn read_limit(&self) -> Option<u64> {
        match self.state {
            State::Body { remaining } => Some(remaining),
            State::Head => None,
        }
    }
}

/// Checks the head at the start of `bytes`: `Ok(None)` while it is incomplete, else its length
/// and the state its body puts the stream in.
fn check_head(bytes: &[u8]) -> Result<Option<(usize, State)>, String> {
    let mut fields = [httparse::EMPTY_HEADER; HEADER_FIELDS_MAX];
    let mut request = httparse::Request::new(&mut fields);
    let head_len = match request.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(format!(
                "more than {HEADER_FIELDS_MAX} header fields in the request head"
            ))
        }
        Err(error) => return Err(format!("malformed request head: {error}")),
    };
    let target = request.path.unwrap_or_default();
    axum::http::Uri::try_from(target)
        .map_err(|e| format!("request target {target:?} is not a URI: {e}"))?;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut upgrade = false;
    for field in request.headers.iter() {
        if field.name.eq_ignore_ascii_case("content-length") {
            for value in field.value.split(|&b| b == b',') {
                let value = value.trim_ascii();
                let parsed = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok());
                match (parsed, content_length) {
                    (None, _) => {
                        return Err(format!(
                            "Content-Length {:?} is not a number",
                            String::from_utf8_lossy(field.value)
                        ))
                    }
                    (Some(a), Some(b)) if a != b => {
                        return Err(format!("conflicting Content-Length values {a} and {b}"))
                    }
                    (Some(length), _) => content_length = Some(length),
                }
            }
        } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = Some(field.value);
        } else if field.name.eq_ignore_ascii_case("upgrade") {
            upgrade = true;
        }
    }
    if transfer_encoding.is_some() {
        return Err(
            "Transfer-Encoding is not accepted: send the body with Content-Length (a body of \
             unknown length could not be held to tidewater.request.body.timeout.ms)"
                .to_string(),
        );
    }
    if upgrade || request.method == Some("CONNECT") {
        return Err("upgrades and CONNECT are not served".to_string());
    }
    let body = match content_length.unwrap_or(0) {
        0 => State::Head,
        remaining => State::Body { remaining },
    };
    Ok(Some((head_len, body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(stream: &mut RequestStream, parts: &[&[u8]]) -> Result<Vec<u8>, String> {
        let mut cleared = Vec::new();
        for part in parts {
            stream.feed(part, &mut cleared)?;
        }
        Ok(cleared)
    }

    #[test]
    fn heads_are_held_until_complete_and_bodies_pass_through() {
        let mut stream = RequestStream::default();
        let head = b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n";
        let mut cleared = Vec::new();
        stream.feed(&head[..20], &mut cleared).unwrap();
        assert!(cleared.is_empty() && stream.holds_partial_head());
        stream.feed(&head[20..], &mut cleared).unwrap();
        assert_eq!(cleared, head.to_vec());
        assert!(stream.in_body() && !stream.holds_partial_head());
        assert_eq!(stream.read_limit(), Some(5));
        // The body, then a pipelined second request in the same read.
        let next = b"{\"a\"}GET /v1/ping HTTP/1.1\r\n\r\n";
        stream.feed(next, &mut cleared).unwrap();
        assert_eq!(&cleared[head.len()..], &next[..]);
        assert_eq!(stream.heads_completed(), 2);
        assert!(!stream.in_body() && !stream.holds_partial_head());
    }

    #[test]
    fn malformed_heads_are_refused_with_a_reason() {
        let cases: &[&[u8]] = &[
            b"garbage\r\n\r\n",
            b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
            b"GET / HTTP/9.9\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n",
        ];
        for case in cases {
            let error = feed_all(&mut RequestStream::default(), &[case]).unwrap_err();
            assert!(!error.is_empty(), "{case:?}");
        }
        let many: String = (0..=HEADER_FIELDS_MAX)
            .map(|i| format!("h{i}: v\r\n"))
            .collect();
        let head = format!("GET / HTTP/1.1\r\n{many}\r\n");
        let error = feed_all(&mut RequestStream::default(), &[head.as_bytes()]).unwrap_err();
        assert!(error.contains("header fields"), "{error}");
    }

    #[test]
    fn a_head_that_never_ends_is_refused_at_the_size_bound() {
        let mut stream = RequestStream::default();
        let mut cleared = Vec::new();
        stream
            .feed(b"GET /v1/ping HTTP/1.1\r\nX-Long: ", &mut cleared)
            .unwrap();
        let chunk = vec![b'a'; 1024];
        let mut refused = None;
        for _ in 0..=REQUEST_HEAD_BYTES_MAX / chunk.len() {
            if let Err(error) = stream.feed(&chunk, &mut cleared) {
                refused = Some(error);
                break;
            }
        }
        assert!(refused.is_some_and(|e| e.contains("larger than")));
        assert!(cleared.is_empty());
    }

    #[test]
    fn chunked_bodies_upgrades_and_connect_are_refused() {
        // A chunked body was handed to the library unfollowed, so a client that stalled it
        // held its connection with no deadline; every such head is refused now.
        for head in [
            &b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"[..],
            b"GET /x HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
            b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
        ] {
            let mut stream = RequestStream::default();
            let err = feed_all(&mut stream, &[head]).unwrap_err();
            assert!(
                err.contains("Content-Length") || err.contains("not served"),
                "{err}"
            );
        }
    }
}
