//! The HTTP front door against clients that misbehave (issue #15): silent connections and
//! half-sent request heads cannot hold `max.connections`, a connection idle past
//! `connections.max.idle.ms` is closed while a request in progress is not, and malformed HTTP
//! is answered with the API's JSON error. Every wait is bounded by [`BOUND`], generous on a
//! loaded two-core machine; nothing here measures time.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{read_answer, Broker, Client};
use serde_json::{json, Value};

/// Bound on every wait for the broker to answer or to close a connection.
const BOUND: Duration = Duration::from_secs(30);

fn connect(broker: &Broker) -> TcpStream {
    let stream = TcpStream::connect(broker.url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    stream
}

/// Reads until the broker closes the connection; fails with what was read if [`BOUND`]
/// passes first.
fn read_until_closed(mut stream: TcpStream) -> Result<Vec<u8>, String> {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(seen),
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            // A reset after the answer also means closed.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(seen),
            Err(e) => {
                return Err(format!(
                    "still open after {BOUND:?} ({e}); read so far: {:?}",
                    String::from_utf8_lossy(&seen)
                ))
            }
        }
    }
}

/// Parses an HTTP answer read to its end: (status, JSON body).
fn parse_answer(bytes: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("body {body:?}: {e}"));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_half_sent_connections_cannot_hold_max_connections() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        &dir.path().join("logs"),
        &[
            "max.connections=10",
            "tidewater.request.header.timeout.ms=500",
        ],
    );
    // max.connections connections: nine that send nothing, one that sends half a head. The
    // test holds all of them open.
    let mut held: Vec<TcpStream> = (0..9).map(|_| connect(&broker)).collect();
    let mut half = connect(&broker);
    half.write_all(b"GET /v1/ping HTTP/1.1\r\nHo").unwrap();
    held.push(half);

    // Another client is served all the same.
    let client = Client::new(&broker.url);
    let served = tokio::time::timeout(BOUND, client.get("/v1/ping"))
        .await
        .unwrap_or_else(|_| panic!("another client was not served within {BOUND:?}"));
    assert_eq!(served, (200, json!("pong")));

    // Because the broker closed the held connections, without an answer.
    for (i, stream) in held.into_iter().enumerate() {
        let closed = tokio::task::spawn_blocking(move || read_until_closed(stream))
            .await
            .unwrap();
        assert_eq!(closed, Ok(Vec::new()), "held connection {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_but_a_request_in_progress_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &["connections.max.idle.ms=1000"]);
    let client = Client::new(&broker.url);
    client.create_topic("t", 1, json!({})).await;

    // A keep-alive connection that made a request and went quiet is closed.
    let idle = tokio::task::spawn_blocking({
        let mut stream = connect(&broker);
        move || {
            stream
                .write_all(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let answer = read_answer(&mut stream);
            (answer, read_until_closed(stream))
        }
    });
    // A long poll waiting three times the idle timeout is answered, not cut.
    let polling = tokio::task::spawn_blocking({
        let mut stream = connect(&broker);
        move || {
            let request = "GET /v1/topics/t/partitions/0/records?offset=0&max_wait_ms=3000 \
                           HTTP/1.1\r\nHost: x\r\n\r\n";
            stream.write_all(request.as_bytes()).unwrap();
            read_answer(&mut stream)
        }
    });
    // A request body that stalls is closed too (whatever the broker answered first).
    let stalled = tokio::task::spawn_blocking({
        let mut stream = connect(&broker);
        move || {
            let head = "POST /v1/topics/t/partitions/0/records HTTP/1.1\r\nHost: x\r\n\
                        Content-Length: 100\r\n\r\n{\"records\":";
            stream.write_all(head.as_bytes()).unwrap();
            read_until_closed(stream)
        }
    });

    let ((status, body), closed) = idle.await.unwrap();
    assert_eq!((status, body.as_str()), (200, "pong"));
    assert_eq!(closed, Ok(Vec::new()), "the idle connection is closed");
    let (status, body) = polling.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["records"], json!([]));
    assert!(
        stalled.await.unwrap().is_ok(),
        "the stalled body's connection is closed"
    );
    // Nothing was written by the stalled request.
    let (_, status) = client.get("/v1/status").await;
    assert_eq!(status["replicas"][0]["log_end_offset"], 0, "{status}");
}

#[tokio::test]
async fn malformed_http_is_answered_with_the_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let malformed: &[&[u8]] = &[
        b"garbage\r\n\r\n",
        b"GET /v1/ping HTTP/1.1\r\nbad header\r\n\r\n",
        b"GET /v1/ping HTTP/9.9\r\n\r\n",
        b"POST /v1/topics HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
        b"POST /v1/topics HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        // A chunked body that stalls after three bytes: it was handed to the library
        // unfollowed and held the connection with no deadline; refused at its head now.
        b"POST /v1/topics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"GET /v1/ping HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ];
    for request in malformed {
        let mut stream = connect(&broker);
        stream.write_all(request).unwrap();
        let answer = read_until_closed(stream).unwrap();
        let (status, body) = parse_answer(&answer);
        assert_eq!(status, 400, "{request:?}: {body}");
        assert_eq!(body["error"], "INVALID_REQUEST", "{request:?}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("malformed HTTP request"),
            "{body}"
        );
    }
    // On a connection that was already served, the next malformed request too.
    let mut stream = connect(&broker);
    stream
        .write_all(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut stream), (200, "pong".to_string()));
    stream
        .write_all(b"GET /v1/ping HTTP/1.1\r\n\x01\r\n\r\n")
        .unwrap();
    let (status, body) = parse_answer(&read_until_closed(stream).unwrap());
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("INVALID_REQUEST"))
    );
    // And the broker still serves.
    let client = Client::new(&broker.url);
    assert_eq!(client.get("/v1/ping").await, (200, json!("pong")));
}
