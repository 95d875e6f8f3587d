//! Requests the HTTP API refuses before it changes or reads anything (issue #22): an offset
//! commit for a partition that does not exist, and a body whose announced length is over the
//! route's limit (answered 413 at once, before a byte of the body is read).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{read_answer, Broker, Client};
use serde_json::{json, Value};

/// Bound on every wait for an answer; an answer that waits for the body (the old behaviour)
/// runs into it, since no body byte is ever sent.
const BOUND: Duration = Duration::from_secs(30);

/// A commit from outside the group (no member id, generation -1) of `offsets`.
async fn commit(client: &Client, offsets: Value) -> (u16, Value) {
    client
        .post("/v1/groups/g/offsets", &json!({ "offsets": offsets }))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_commit_to_an_unknown_topic_or_partition_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    client.create_topic("t", 2, json!({})).await;

    let cases = [
        json!([{"topic": "missing", "partition": 0, "offset": 1}]),
        json!([{"topic": "t", "partition": 99, "offset": 1}]),
        // One bad entry refuses the whole commit, the good one included.
        json!([{"topic": "t", "partition": 0, "offset": 5}, {"topic": "t", "partition": 2, "offset": 1}]),
    ];
    for offsets in cases {
        let (status, answer) = commit(&client, offsets.clone()).await;
        assert_eq!(status, 404, "{offsets}: {answer}");
        assert_eq!(answer["error"], "UNKNOWN_TOPIC_OR_PARTITION", "{offsets}");
    }
    let (status, fetched) = client.get("/v1/groups/g/offsets").await;
    assert_eq!(status, 200, "{fetched}");
    assert_eq!(fetched["offsets"], json!([]), "nothing was committed");

    // A commit to partitions that exist is still stored.
    let good = json!([{"topic": "t", "partition": 1, "offset": 3}]);
    assert_eq!(commit(&client, good).await, (200, json!({})));
    let (_, fetched) = client.get("/v1/groups/g/offsets").await;
    assert_eq!(fetched["offsets"][0]["offset"], 3, "{fetched}");
}

/// Sends only the head of a request announcing `content_length` body bytes and reads the
/// answer: (status, body).
fn announce_body(broker: &Broker, method_path: &str, content_length: u64) -> (u16, Value) {
    let mut stream = TcpStream::connect(broker.url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let head =
        format!("{method_path} HTTP/1.1\r\nHost: x\r\nContent-Length: {content_length}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let (status, body) = read_answer(&mut stream);
    // The unread body cannot be skipped: the broker closes the connection after the answer.
    let mut rest = Vec::new();
    let closed = std::io::Read::read_to_end(&mut stream, &mut rest);
    assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
    let body = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body:?}: {e}"));
    (status, body)
}

#[tokio::test]
async fn a_body_announced_over_the_limit_is_answered_413_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    client.create_topic("t", 1, json!({})).await;

    let tera = 1_000_000_000_000;
    for route in [
        "POST /v1/topics/t/partitions/0/records",
        "POST /v1/topics",
        "POST /v1/topics/t/partitions/0/delete-records",
        "POST /v1/groups/g/offsets",
        "POST /v1/groups/g/join",
    ] {
        let (status, body) = announce_body(&broker, route, tera);
        assert_eq!(status, 413, "{route}: {body}");
        assert_eq!(body["error"], "MESSAGE_TOO_LARGE", "{route}: {body}");
    }
    // Nothing was written, and the broker still serves.
    let (_, status) = client.get("/v1/status").await;
    assert_eq!(status["replicas"][0]["log_end_offset"], 0, "{status}");
}
