//! Issue 22: settings within Kafka's bounds, and resource exhaustion that degrades instead of
//! wedging the broker.
//!
//! - `segment.bytes=1` (which rolled a segment per batch until file descriptors ran out) is
//!   refused, naming the setting, over HTTP, the Kafka listener's CreateTopics and `--set`.
//! - A broker whose `RLIMIT_NOFILE` is lowered to 200 (set in the child before `exec`) is
//!   driven out of file descriptors by a topic that rolls on every batch: the failed roll is
//!   answered KAFKA_STORAGE_ERROR, leaves no partial segment, and appends resume once
//!   connections close (a topic creation meanwhile fails the same way and creates nothing);
//!   after a kill -9 the broker refuses to start within the same limit,
//!   naming what it needs and touching no file, and with a hard limit it may raise it starts
//!   and serves every acknowledged record.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use common::{Broker, Client};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use serde_json::{json, Value};

/// The open-file limit of the exhausted broker: small, so exhaustion takes ~100 produces.
const FILES_MAX: u64 = 200;
/// Idle connections the test holds, then closes to give the broker file descriptors back.
const IDLE_CONNECTIONS: usize = 20;
/// Bound on the produces it takes to exhaust the broker (each rolls one segment: 2 files).
const PRODUCES_MAX: usize = 400;
/// Liveness bound for the broker to close the released connections and append again.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Sets the child's `RLIMIT_NOFILE` before it runs.
fn limit_open_files(command: &mut Command, soft: u64, hard: u64) {
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[tokio::test]
async fn segment_bytes_below_kafkas_minimum_is_refused_over_http_kafka_and_set() {
    let dir = tempfile::tempdir().unwrap();
    let node = common::Node::start(
        &dir.path().join("b"),
        &["kafka.listeners=PLAINTEXT://127.0.0.1:0".into()],
    );
    let client = Client::new(&node.url);

    let body = json!({"name": "tiny", "partitions": 1, "configs": {"segment.bytes": "1"}});
    let (status, answer) = client.post("/v1/topics", &body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"], "INVALID_CONFIG", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("\"segment.bytes\"") && message.contains("at least 1048576"),
        "{message}"
    );

    let kafka = node.kafka.clone().expect("a Kafka listener");
    let result = kafka_create_topic(&kafka, "tiny", "segment.bytes", "1");
    assert_eq!(result.0, 40, "INVALID_CONFIG: {result:?}");
    assert!(result.1.contains("\"segment.bytes\""), "{result:?}");
    assert_eq!(client.get("/v1/topics").await.1, json!({"topics": []}));

    // A broker setting out of bounds stops start-up, naming it.
    let (code, _, stderr) = common::run_to_exit(&["--set", "log.segment.bytes=1"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("\"log.segment.bytes\""), "{stderr}");
}

/// CreateTopics v5 of one topic with one config; returns (error code, error message).
fn kafka_create_topic(address: &str, topic: &str, name: &str, value: &str) -> (i16, String) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(name.to_string()))
                .with_value(Some(StrBytes::from_string(value.to_string())))])]);
    let version = 5;
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::CreateTopics as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .encode(
            &mut buf,
            ApiKey::CreateTopics.request_header_version(version),
        )
        .unwrap();
    request.encode(&mut buf, version).unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(buf.len() as i32);
    frame.put_slice(&buf);
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&frame).unwrap();
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut answer).unwrap();
    let mut body = bytes::Bytes::from(answer);
    let header_version = ApiKey::CreateTopics.response_header_version(version);
    kafka_protocol::messages::ResponseHeader::decode(&mut body, header_version).unwrap();
    let response = CreateTopicsResponse::decode(&mut body, version).unwrap();
    let topic = &response.topics[0];
    let message = topic.error_message.as_ref().map(|m| m.to_string());
    (topic.error_code, message.unwrap_or_default())
}

/// Opens a connection and has one request served on it, so the broker holds it (one file
/// descriptor) until the test drops it.
fn idle_connection(url: &str) -> TcpStream {
    let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _) = common::read_answer(&mut stream);
    assert_eq!(status, 200);
    stream
}

/// Produces one record with acks=1; (status, answer).
async fn produce_one(client: &Client, value: &str) -> (u16, Value) {
    let body = json!({"acks": "1", "records": [{"key": null, "value": value}]});
    client
        .post("/v1/topics/t/partitions/0/records", &body)
        .await
}

/// Base offsets of the `.log` and of the `.index` files of a partition directory.
fn segment_files(dir: &Path) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let (mut logs, mut indexes) = (BTreeSet::new(), BTreeSet::new());
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(base) = name.strip_suffix(".log") {
            logs.insert(base.parse().unwrap());
        } else if let Some(base) = name.strip_suffix(".index") {
            indexes.insert(base.parse().unwrap());
        }
    }
    (logs, indexes)
}

/// Runs the broker on `log_dir` within `soft`/`hard` open files and expects it to exit by
/// itself; returns (exit code, stderr). Killed (and the test failed) if it keeps running.
fn start_expecting_refusal(log_dir: &Path, soft: u64, hard: u64) -> (Option<i32>, String) {
    let mut command = Command::new(common::binary());
    command
        .arg("--set")
        .arg(format!("log.dirs={}", log_dir.display()))
        .arg("--set")
        .arg("listeners=http://127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    limit_open_files(&mut command, soft, hard);
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the broker started within {soft} open files instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_broker_out_of_file_descriptors_degrades_recovers_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let mut broker = Broker::start_with_command(&log_dir, &[], |command| {
        limit_open_files(command, FILES_MAX, FILES_MAX)
    });
    let client = Client::new(&broker.url);
    client
        .create_topic("t", 1, json!({"internal.segment.bytes": "1"}))
        .await;
    let idle: Vec<TcpStream> = (0..IDLE_CONNECTIONS)
        .map(|_| idle_connection(&broker.url))
        .collect();

    // (a) Every produce rolls a segment (two files) until the broker has no descriptor left.
    let mut acked: Vec<(u64, String)> = Vec::new();
    let refused = loop {
        assert!(acked.len() < PRODUCES_MAX, "never ran out of files");
        let value = format!("v{}", acked.len());
        let (status, answer) = produce_one(&client, &value).await;
        if status != 200 {
            break answer;
        }
        acked.push((answer["base_offset"].as_u64().unwrap(), value));
    };
    eprintln!(
        "out of files after {} acknowledged produces: {refused}",
        acked.len()
    );
    assert_eq!(refused["error"], "KAFKA_STORAGE_ERROR", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("nothing was written"), "{message}");
    let partition = log_dir.join("t-0");
    let (logs, indexes) = segment_files(&partition);
    assert_eq!(
        logs, indexes,
        "every segment has both files, no half-created one"
    );
    let leo = acked.len() as u64;
    assert!(!logs.contains(&leo), "the failed roll left segment {leo}");

    // A topic cannot be created either, and says why; none is half-created.
    let body = json!({"name": "late", "partitions": 1});
    let (status, answer) = client.post("/v1/topics", &body).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (500, Some("KAFKA_STORAGE_ERROR")),
        "{answer}"
    );
    assert_eq!(client.get("/v1/topics").await.1, json!({"topics": ["t"]}));

    // Resources return (the idle connections close): the partition appends again.
    drop(idle);
    let deadline = Instant::now() + RECOVERY_TIMEOUT;
    loop {
        let value = format!("v{}", acked.len());
        let (status, answer) = produce_one(&client, &value).await;
        if status == 200 {
            assert_eq!(answer["base_offset"], acked.len(), "{answer}");
            acked.push((acked.len() as u64, value));
            break;
        }
        assert_eq!(answer["error"], "KAFKA_STORAGE_ERROR", "{answer}");
        assert!(
            Instant::now() < deadline,
            "appends never resumed after the connections closed: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.read_all("t", 0, 0).await, acked);
    client.create_topic("late", 1, json!({})).await;
    drop(client);
    broker.kill();

    // (c) Within the same limit it cannot hold its segments: it says so and opens nothing.
    let before = common::files(&log_dir);
    let (code, stderr) = start_expecting_refusal(&log_dir, FILES_MAX, FILES_MAX);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("segments, which need") && stderr.contains("limit is 200"),
        "{stderr}"
    );
    assert_eq!(common::files(&log_dir), before, "start-up touched the logs");

    // (b) With a hard limit to raise the soft one to, it starts and serves every ack.
    let broker = Broker::start_with_command(&log_dir, &[], |command| {
        limit_open_files(command, FILES_MAX, 16 * FILES_MAX)
    });
    let client = Client::new(&broker.url);
    assert_eq!(client.read_all("t", 0, 0).await, acked);
    let (status, answer) = produce_one(&client, "after-restart").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["base_offset"], acked.len(), "{answer}");
}
