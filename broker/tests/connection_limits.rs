//! Clients that hold connections without finishing their requests (issue #22, item 5): a
//! request body or Kafka frame that stalls once begun is closed after
//! `tidewater.request.body.timeout.ms`, so stalled clients cannot hold `max.connections`, while
//! a connection idle between requests stays (that is `connections.max.idle.ms`'s business); and
//! `max.connections.per.ip` closes a client's connections over its limit at once, on both front
//! doors together. Every wait is bounded by [`BOUND`]; nothing here measures time.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use common::{read_answer, Client, Node};
use serde_json::json;

/// Bound on every wait for an answer or a close; far above the deadlines the tests set.
const BOUND: Duration = Duration::from_secs(30);

/// A blocking connection to `address` from the loopback address `from` (Linux routes all of
/// 127/8 to loopback, so each test address is a distinct client address to the broker).
async fn connect_from(from: &str, address: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    let from: IpAddr = from.parse().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let stream = socket.connect(address.parse().unwrap()).await.unwrap();
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    stream
}

fn http_address(node: &Node) -> String {
    node.url.trim_start_matches("http://").to_string()
}

/// Reads until the broker closes the connection: `Ok(bytes read)`, or `Err` when [`BOUND`]
/// passes first.
fn read_until_closed(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(seen),
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(seen),
            Err(e) => return Err(format!("still open after {BOUND:?}: {e}")),
        }
    }
}

fn ping(stream: &mut TcpStream) -> (u16, String) {
    stream
        .write_all(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    read_answer(stream)
}

/// An ApiVersions v0 request with `correlation_id`, size prefix included.
fn api_versions(correlation_id: i32) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    frame.extend_from_slice(&0i16.to_be_bytes()); // v0
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    let mut out = (frame.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&frame);
    out
}

/// Sends ApiVersions and returns the correlation id of the answer.
fn kafka_round_trip(stream: &mut TcpStream, correlation_id: i32) -> i32 {
    stream.write_all(&api_versions(correlation_id)).unwrap();
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).expect("an ApiVersions answer");
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut answer).unwrap();
    i32::from_be_bytes(answer[..4].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_and_frames_are_closed_after_the_body_deadline_idle_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(
        &dir.path().join("broker"),
        &[
            "max.connections=4".into(),
            "tidewater.request.body.timeout.ms=1000".into(),
            "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
        ],
    );
    let http = http_address(&node);
    let kafka = node.kafka.clone().unwrap();

    // Each listener's four slots: one connection idle between requests, three stalled.
    let mut idle_http = connect_from("127.0.0.1", &http).await;
    assert_eq!(ping(&mut idle_http), (200, "pong".into()));
    let mut idle_kafka = connect_from("127.0.0.1", &kafka).await;
    assert_eq!(kafka_round_trip(&mut idle_kafka, 1), 1);
    let mut stalled = Vec::new();
    for i in 0..3 {
        let mut stream = connect_from("127.0.0.1", &http).await;
        // A whole head, then part of the body, or none of it.
        let body = ["", "{\"name\"", "{\"name\": \"t\", "][i];
        let head = "POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
        stream
            .write_all(format!("{head}{body}").as_bytes())
            .unwrap();
        stalled.push(("http", i, stream));
    }
    for i in 0..3 {
        let mut stream = connect_from("127.0.0.1", &kafka).await;
        // Half a size prefix, a prefix alone, a prefix and part of the frame.
        let sent: &[u8] = [&[0u8, 0][..], &[0, 0, 0, 100], &[0, 0, 0, 100, 0, 18, 0]][i];
        stream.write_all(sent).unwrap();
        stalled.push(("kafka", i, stream));
    }

    // Well-behaved clients are served: the stalled connections make room.
    let client = Client::new(&node.url);
    let served = tokio::time::timeout(BOUND, client.get("/v1/ping")).await;
    assert_eq!(
        served.expect("an HTTP client is served"),
        (200, json!("pong"))
    );
    let mut fresh_kafka = connect_from("127.0.0.1", &kafka).await;
    let answered = tokio::task::spawn_blocking(move || kafka_round_trip(&mut fresh_kafka, 7));
    assert_eq!(answered.await.unwrap(), 7, "a Kafka client is served");

    // Because every stalled connection was closed.
    for (door, i, mut stream) in stalled {
        let closed = tokio::task::spawn_blocking(move || read_until_closed(&mut stream));
        let closed = closed.await.unwrap();
        assert!(closed.is_ok(), "{door} stalled connection {i}: {closed:?}");
        if door == "kafka" {
            assert_eq!(closed, Ok(Vec::new()), "kafka {i} closes unanswered");
        }
    }
    // While the connections idle between requests, older than the deadline, still serve.
    assert_eq!(ping(&mut idle_http), (200, "pong".into()));
    assert_eq!(kafka_round_trip(&mut idle_kafka, 2), 2);
    let (_, topics) = client.get("/v1/topics").await;
    assert_eq!(
        topics,
        json!({"topics": []}),
        "no stalled body created a topic"
    );
}

/// Whether the broker closed `stream` without an answer when it sent a request (`bytes`).
fn refused(mut stream: TcpStream, bytes: &[u8]) -> bool {
    // The write may already fail: the broker closed the connection when it accepted it.
    let _ = stream.write_all(bytes);
    read_until_closed(&mut stream) == Ok(Vec::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_ip_limit_are_closed_at_once_on_both_front_doors() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(
        &dir.path().join("broker"),
        &[
            "max.connections=16".into(),
            "max.connections.per.ip=2".into(),
            "max.connections.per.ip.overrides=127.0.0.3:3".into(),
            "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
        ],
    );
    let http = http_address(&node);
    let kafka = node.kafka.clone().unwrap();

    // 127.0.0.2 holds its two: one HTTP, one Kafka (counted together).
    let mut held_http = connect_from("127.0.0.2", &http).await;
    assert_eq!(ping(&mut held_http), (200, "pong".into()));
    let mut held_kafka = connect_from("127.0.0.2", &kafka).await;
    assert_eq!(kafka_round_trip(&mut held_kafka, 1), 1);
    let ping_request = b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n";
    let third = connect_from("127.0.0.2", &http).await;
    assert!(refused(third, ping_request), "a third HTTP connection");
    let third = connect_from("127.0.0.2", &kafka).await;
    assert!(refused(third, &api_versions(3)), "a third Kafka connection");

    // 127.0.0.3 has an override of three.
    let mut three = Vec::new();
    for _ in 0..3 {
        let mut stream = connect_from("127.0.0.3", &http).await;
        assert_eq!(ping(&mut stream), (200, "pong".into()));
        three.push(stream);
    }
    let fourth = connect_from("127.0.0.3", &http).await;
    assert!(refused(fourth, ping_request), "a fourth from the override");

    // Other addresses are served, and the held connections still are.
    let client = Client::new(&node.url);
    assert_eq!(client.get("/v1/ping").await, (200, json!("pong")));
    assert_eq!(ping(&mut held_http), (200, "pong".into()));

    // Once 127.0.0.2 closes one, it may open another (the broker sees the close in its own
    // time, so try until admitted, within the bound).
    drop(held_http);
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        let mut stream = connect_from("127.0.0.2", &http).await;
        let _ = stream.write_all(ping_request);
        let mut first = [0u8; 12];
        if stream.read_exact(&mut first).is_ok() {
            assert_eq!(&first, b"HTTP/1.1 200", "admitted again");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never admitted again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
