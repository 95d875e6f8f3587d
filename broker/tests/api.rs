//! Every route of `docs/api.md` against the real binary, and every kind of bad input: each bad
//! request must answer the documented error and leave the logs, the topic list and the files
//! exactly as they were.

mod common;

use common::{files, Broker, Client};
use serde_json::{json, Value};

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test]
async fn every_route_answers_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &["broker.id=4"]);
    let client = Client::new(&broker.url);

    let (status, ping) = client.get("/v1/ping").await;
    assert_eq!((status, ping), (200, json!("pong")));

    let (status, created) = client
        .post(
            "/v1/topics",
            &json!({"name": "t0", "partitions": 2, "configs": {"retention.ms": 86400000}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "t0");
    assert_eq!(created["configs"]["retention.ms"], "86400000");
    assert_eq!(created["partitions"].as_array().unwrap().len(), 2);
    assert_eq!(
        created["partitions"][1],
        json!({"partition": 1, "leader": 4, "leader_epoch": 0, "replicas": [4], "isr": [4]})
    );

    assert_eq!(
        client.get("/v1/topics").await,
        (200, json!({"topics": ["t0"]}))
    );
    let (status, described) = client.get("/v1/topics/t0").await;
    assert_eq!(
        (status, &described["partitions"]),
        (200, &created["partitions"])
    );

    // acks=1 and acks=all return offsets and the HW; acks=0 answers without offsets.
    let one = client.produce("t0", 1, &values("a", 2), "1").await;
    assert_eq!(one["base_offset"], 0);
    assert_eq!(one["offsets"], json!([0, 1]));
    assert_eq!(one["high_watermark"], 2);
    assert_eq!(one["leader_epoch"], 0);
    let all = client.produce("t0", 1, &values("b", 3), "all").await;
    assert_eq!(
        (
            all["base_offset"].clone(),
            all["offsets"].clone(),
            all["high_watermark"].clone()
        ),
        (json!(2), json!([2, 3, 4]), json!(5))
    );
    let zero = client.produce("t0", 1, &values("c", 1), "0").await;
    assert_eq!(
        (zero["base_offset"].clone(), zero["offsets"].clone()),
        (Value::Null, Value::Null)
    );

    // Fetch: committed by default, records with offset, key and value.
    let (status, fetched) = client
        .get("/v1/topics/t0/partitions/1/records?offset=1")
        .await;
    assert_eq!(status, 200, "{fetched}");
    let got: Vec<(u64, &str)> = fetched["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["offset"].as_u64().unwrap(), r["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![(1, "a1"), (2, "b0"), (3, "b1"), (4, "b2"), (5, "c0")]
    );
    assert_eq!(fetched["records"][0]["key"], Value::Null);
    assert_eq!(
        (
            fetched["high_watermark"].clone(),
            fetched["log_end_offset"].clone(),
            fetched["log_start_offset"].clone()
        ),
        (json!(6), json!(6), json!(0))
    );
    // max_bytes=1 still returns one record; uncommitted isolation sees the same on one node.
    let (_, small) = client
        .get("/v1/topics/t0/partitions/1/records?offset=0&max_bytes=1&isolation=uncommitted")
        .await;
    assert_eq!(small["records"].as_array().unwrap().len(), 1);
    assert_eq!(small["records"][0]["value"], "a0");
    // Keys round-trip.
    let (status, keyed) = client
        .post(
            "/v1/topics/t0/partitions/0/records",
            &json!({"acks": "1", "records": [{"key": "k1", "value": "v1"}]}),
        )
        .await;
    assert_eq!((status, keyed["offsets"].clone()), (200, json!([0])));
    let (_, fetched) = client
        .get("/v1/topics/t0/partitions/0/records?offset=0")
        .await;
    assert_eq!(
        (
            fetched["records"][0]["key"].clone(),
            fetched["records"][0]["value"].clone()
        ),
        (json!("k1"), json!("v1"))
    );

    assert_eq!(
        client
            .get("/v1/topics/t0/partitions/1/offsets?spec=earliest")
            .await,
        (200, json!({"offset": 0}))
    );
    assert_eq!(
        client
            .get("/v1/topics/t0/partitions/1/offsets?spec=latest")
            .await,
        (200, json!({"offset": 6}))
    );

    // Delete records moves the low watermark; the deleted range is then out of range.
    let (status, deleted) = client
        .post(
            "/v1/topics/t0/partitions/1/delete-records",
            &json!({"offset": 2}),
        )
        .await;
    assert_eq!((status, deleted), (200, json!({"low_watermark": 2})));
    assert_eq!(
        client
            .get("/v1/topics/t0/partitions/1/offsets?spec=earliest")
            .await
            .1,
        json!({"offset": 2})
    );
    let (status, gone) = client
        .get("/v1/topics/t0/partitions/1/records?offset=1")
        .await;
    assert_eq!(
        (status, gone["error"].clone()),
        (416, json!("OFFSET_OUT_OF_RANGE"))
    );
    assert_eq!(
        client.read_all("t0", 1, 2).await.first(),
        Some(&(2, "b0".to_string()))
    );

    let (status, metadata) = client.get("/v1/metadata").await;
    assert_eq!(status, 200);
    assert_eq!(metadata["brokers"], json!([{"id": 4, "url": broker.url}]));
    assert_eq!(metadata["topics"][0]["partitions"][0]["leader"], 4);

    let status = client.offsets("t0", 1).await;
    assert_eq!(
        (
            status["role"].clone(),
            status["log_end_offset"].clone(),
            status["high_watermark"].clone(),
            status["log_start_offset"].clone(),
            status["isr"].clone()
        ),
        (json!("leader"), json!(6), json!(6), json!(2), json!([4]))
    );

    let (status, metrics) = client.get("/metrics").await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap();
    for line in [
        "tidewater_partition_count 2",
        "tidewater_leader_count 2",
        "tidewater_under_replicated_partitions 0",
        "tidewater_isr_shrinks_total 0",
        "tidewater_isr_expands_total 0",
        "tidewater_messages_in_total 7",
        "tidewater_log_end_offset{topic=\"t0\",partition=\"1\"} 6",
        "tidewater_requests_total{method=\"GET\",route=\"/v1/topics/{topic}/partitions/{partition}/records\",error=\"OFFSET_OUT_OF_RANGE\"} 1",
        "tidewater_requests_total{method=\"POST\",route=\"/v1/topics\",error=\"NONE\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "missing {line:?} in\n{metrics}");
    }
    // 7 records of 2 bytes ("a0", ...) plus key "k1" and value "v1".
    assert!(
        metrics.lines().any(|l| l == "tidewater_bytes_in_total 16"),
        "{metrics}"
    );

    let (status, answer) = client.call("DELETE", "/v1/topics/t0", None).await;
    assert_eq!((status, answer), (200, json!({"deleted": "t0"})));
    assert_eq!(client.get("/v1/topics").await, (200, json!({"topics": []})));
    assert!(!broker.log_dir.join("t0-0").exists());
    let (status, answer) = client.get("/v1/topics/t0").await;
    assert_eq!(
        (status, answer["error"].clone()),
        (404, json!("UNKNOWN_TOPIC_OR_PARTITION"))
    );
}

#[tokio::test]
async fn long_poll_returns_records_appended_while_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    client.create_topic("t", 1, json!({})).await;

    // Nothing to wait for: a short poll at the LEO answers empty.
    let (status, empty) = client
        .get("/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=50")
        .await;
    assert_eq!((status, empty["records"].clone()), (200, json!([])));

    let poller = {
        let client = Client::new(&broker.url);
        tokio::spawn(async move {
            client
                .get("/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=30000")
                .await
        })
    };
    // The poll is registered or not yet: either way the record must come back, either from the
    // first read or after the wake-up.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    client.produce("t", 0, &["late".to_string()], "1").await;
    let (status, answer) = poller.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["records"][0]["value"], "late", "{answer}");
}

/// One bad request: method, path, body, expected status and error name.
struct Bad {
    method: &'static str,
    path: String,
    body: Option<String>,
    status: u16,
    error: &'static str,
}

fn bad(
    method: &'static str,
    path: &str,
    body: Option<&str>,
    status: u16,
    error: &'static str,
) -> Bad {
    Bad {
        method,
        path: path.to_string(),
        body: body.map(str::to_string),
        status,
        error,
    }
}

#[tokio::test]
async fn bad_requests_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A small message.max.bytes so the oversized cases stay small.
    let broker = Broker::start(&dir.path().join("logs"), &["message.max.bytes=2000"]);
    let client = Client::new(&broker.url);
    client.create_topic("t", 2, json!({})).await;
    client
        .create_topic("strict", 1, json!({"min.insync.replicas": "2"}))
        .await;
    client.produce("t", 0, &values("v", 3), "1").await;

    let before_files = files(&broker.log_dir);
    let records = "/v1/topics/t/partitions/0/records";
    let big_value = "x".repeat(3000);
    let over_batch = format!(
        r#"{{"records": [{{"key": null, "value": "{}"}}]}}"#,
        "y".repeat(1990)
    );
    let over_body = format!(
        r#"{{"records": [{{"key": null, "value": "{}"}}]}}"#,
        "z".repeat(80_000)
    );
    let big = format!(r#"{{"records": [{{"value": "{big_value}"}}]}}"#);
    let cases = vec![
        bad(
            "POST",
            records,
            Some("{\"records\": [{\"value\": "),
            400,
            "INVALID_REQUEST",
        ),
        bad("POST", records, Some("{}"), 400, "INVALID_REQUEST"),
        bad(
            "POST",
            records,
            Some("{\"records\": []}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            records,
            Some("{\"records\": [{\"value\": 5}]}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            records,
            Some("{\"records\": [{\"value\": \"a\"}], \"partition\": 1}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            records,
            Some("{\"acks\": \"2\", \"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_REQUIRED_ACKS",
        ),
        bad(
            "POST",
            records,
            Some("{\"acks\": \"most\", \"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_REQUIRED_ACKS",
        ),
        bad(
            "POST",
            records,
            Some("{\"timeout_ms\": 99999999, \"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_REQUEST",
        ),
        bad("POST", records, Some(&big), 413, "MESSAGE_TOO_LARGE"),
        bad("POST", records, Some(&over_batch), 413, "MESSAGE_TOO_LARGE"),
        bad("POST", records, Some(&over_body), 413, "MESSAGE_TOO_LARGE"),
        bad(
            "POST",
            "/v1/topics/nope/partitions/0/records",
            Some("{\"records\": [{\"value\": \"a\"}]}"),
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/7/records",
            Some("{\"records\": [{\"value\": \"a\"}]}"),
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/x/records",
            Some("{\"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/-1/records",
            Some("{\"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            "/v1/topics/..%2Fx/partitions/0/records",
            Some("{\"records\": [{\"value\": \"a\"}]}"),
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad(
            "POST",
            "/v1/topics/strict/partitions/0/records",
            Some("{\"acks\": \"all\", \"records\": [{\"value\": \"a\"}]}"),
            503,
            "NOT_ENOUGH_REPLICAS",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records?offset=-1",
            None,
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records?offset=4",
            None,
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records?offset=abc",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=30001",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/records?offset=0&isolation=dirty",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/9/records?offset=0",
            None,
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/offsets?spec=middle",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "GET",
            "/v1/topics/t/partitions/0/offsets",
            None,
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/0/delete-records",
            Some("{\"offset\": 4}"),
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/0/delete-records",
            Some("{\"offset\": -5}"),
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        bad(
            "POST",
            "/v1/topics/t/partitions/0/delete-records",
            Some("{\"offset\": \"1\"}"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"../x\"}"),
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"..\"}"),
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"\"}"),
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some(&format!("{{\"name\": \"{}\"}}", "n".repeat(250))),
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"t\"}"),
            409,
            "TOPIC_ALREADY_EXISTS",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"u\", \"partitions\": 0}"),
            400,
            "INVALID_PARTITIONS",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"u\", \"partitions\": 100000}"),
            400,
            "INVALID_PARTITIONS",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"u\", \"replication_factor\": 3}"),
            400,
            "INVALID_REPLICATION_FACTOR",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"u\", \"configs\": {\"retention.msec\": \"1\"}}"),
            400,
            "INVALID_CONFIG",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("{\"name\": \"u\", \"configs\": {\"segment.bytes\": \"big\"}}"),
            400,
            "INVALID_CONFIG",
        ),
        bad(
            "POST",
            "/v1/topics",
            Some("not json"),
            400,
            "INVALID_REQUEST",
        ),
        bad(
            "DELETE",
            "/v1/topics/nope",
            None,
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        bad(
            "DELETE",
            "/v1/topics/a%20b",
            None,
            400,
            "INVALID_TOPIC_EXCEPTION",
        ),
        bad("GET", "/v1/nothing", None, 404, "UNSUPPORTED_VERSION"),
        bad("GET", "/v2/topics", None, 404, "UNSUPPORTED_VERSION"),
        bad("PUT", "/v1/topics", None, 405, "UNSUPPORTED_VERSION"),
    ];
    for case in &cases {
        let (status, answer) = client
            .call(case.method, &case.path, case.body.as_deref())
            .await;
        let what = format!("{} {} -> {status} {answer}", case.method, case.path);
        assert_eq!(status, case.status, "{what}");
        assert_eq!(answer["error"], case.error, "{what}");
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }

    assert_eq!(
        client.get("/v1/topics").await.1,
        json!({"topics": ["strict", "t"]})
    );
    assert_eq!(client.offsets("t", 0).await["log_end_offset"], 3);
    assert_eq!(client.offsets("t", 1).await["log_end_offset"], 0);
    assert_eq!(client.offsets("strict", 0).await["log_end_offset"], 0);
    assert_eq!(
        files(&broker.log_dir),
        before_files,
        "bad requests changed files"
    );
    assert_eq!(client.read_all("t", 0, 0).await.len(), 3);
    // acks=1 is allowed below min.insync.replicas, as in Kafka.
    client.produce("strict", 0, &["ok".to_string()], "1").await;
}

#[tokio::test]
async fn restart_keeps_topics_configs_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let mut broker = Broker::start(&log_dir, &[]);
    let client = Client::new(&broker.url);
    client
        .create_topic("kept", 3, json!({"internal.segment.bytes": "1024"}))
        .await;
    client.create_topic("dropped", 1, json!({})).await;
    for batch in 0..20 {
        client
            .produce("kept", 2, &values(&format!("b{batch}-"), 5), "all")
            .await;
    }
    let (status, _) = client.call("DELETE", "/v1/topics/dropped", None).await;
    assert_eq!(status, 200);
    assert!(broker.terminate().success(), "clean shutdown on SIGTERM");

    let broker = Broker::start(&log_dir, &[]);
    let client = Client::new(&broker.url);
    assert_eq!(
        client.get("/v1/topics").await.1,
        json!({"topics": ["kept"]})
    );
    let (_, described) = client.get("/v1/topics/kept").await;
    assert_eq!(
        described["configs"],
        json!({"internal.segment.bytes": "1024"})
    );
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
    let read = client.read_all("kept", 2, 0).await;
    assert_eq!(read.len(), 100);
    assert!(read
        .iter()
        .enumerate()
        .all(|(i, (offset, _))| *offset == i as u64));
    assert_eq!(read[57].1, "b11-2");
    assert!(
        client.offsets("kept", 2).await["segment_count"]
            .as_u64()
            .unwrap()
            > 1
    );
    let next = client.produce("kept", 2, &["after".to_string()], "1").await;
    assert_eq!(next["base_offset"], 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_racing_topic_deletion_is_unknown_topic_not_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    let mut answers = std::collections::BTreeMap::new();
    for round in 0..40 {
        client.create_topic("raced", 1, json!({})).await;
        client.produce("raced", 0, &values("v", 4), "1").await;
        let body = json!({"offset": 2 + round % 2});
        let delete_records = client.post("/v1/topics/raced/partitions/0/delete-records", &body);
        let delete_topic = client.call("DELETE", "/v1/topics/raced", None);
        let ((status, answer), (deleted, _)) = tokio::join!(delete_records, delete_topic);
        assert_eq!(deleted, 200, "round {round}: the topic deletion");
        match status {
            200 => assert!(answer["low_watermark"].is_u64(), "{answer}"),
            404 => assert_eq!(answer["error"], "UNKNOWN_TOPIC_OR_PARTITION", "{answer}"),
            _ => panic!("round {round}: delete-records answered {status} {answer}"),
        }
        *answers.entry(status).or_insert(0) += 1;
    }
    println!("delete-records answers by status over the races: {answers:?}");
}

#[tokio::test]
async fn a_failing_log_write_is_answered_as_a_storage_error_and_logged() {
    // A full disk needs root to stage; a file size limit fails writes the same way (EFBIG
    // where a full disk gives ENOSPC). Segments roll at 1 GiB, so the limit hits one segment.
    const FILE_SIZE_MAX: u64 = 256 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let broker = Broker::start_with_command(&log_dir, &[], |command| {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal(2) and setrlimit(2) are async-signal-safe; nothing else runs here.
        unsafe {
            command.pre_exec(|| {
                // At the limit the kernel sends SIGXFSZ, which would kill the broker; ignored
                // (which survives exec), the write fails with EFBIG instead.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let limit = libc::rlimit {
                    rlim_cur: FILE_SIZE_MAX,
                    rlim_max: FILE_SIZE_MAX,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let client = Client::new(&broker.url);
    client.create_topic("full", 1, json!({})).await;
    let value = "x".repeat(10 * 1024);
    let mut acknowledged = 0u64;
    let mut refused = None;
    for _ in 0..2 * FILE_SIZE_MAX / value.len() as u64 {
        let body = json!({"acks": "1", "records": [{"value": value}]});
        let (status, answer) = client
            .post("/v1/topics/full/partitions/0/records", &body)
            .await;
        if status != 200 {
            refused = Some((status, answer));
            break;
        }
        acknowledged += 1;
    }
    let (status, answer) = refused.expect("a write beyond the file size limit fails");
    assert_eq!(
        (status, answer["error"].clone()),
        (500, json!("KAFKA_STORAGE_ERROR")),
        "{answer}"
    );
    let log = std::fs::read_to_string(log_dir.with_extension("stderr.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("log append failed") && l.contains("full-0")),
        "the broker logs the failed append with its partition:\n{log}"
    );
    // The failed write left nothing behind: every acknowledged record reads back, in order.
    let read = client.read_all("full", 0, 0).await;
    assert_eq!(read.len() as u64, acknowledged);
    assert!(read.iter().enumerate().all(|(i, (o, _))| *o == i as u64));
}

#[tokio::test]
async fn timestamps_beyond_the_difference_max_are_invalid_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        &dir.path().join("logs"),
        &["log.message.timestamp.difference.max.ms=86400000"],
    );
    let client = Client::new(&broker.url);
    client
        .create_topic(
            "hour",
            1,
            json!({"message.timestamp.difference.max.ms": "3600000"}),
        )
        .await;
    client.create_topic("day", 1, json!({})).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let produce = |topic: &'static str, timestamp_ms: i64| {
        let client = &client;
        async move {
            let body = json!({"acks": "1", "records": [
                {"value": "no timestamp"},
                {"value": "stamped", "timestamp_ms": timestamp_ms},
            ]});
            let path = format!("/v1/topics/{topic}/partitions/0/records");
            client.post(&path, &body).await
        }
    };
    // Within the topic's hour: appended, the timestamp kept.
    let (status, answer) = produce("hour", now_ms - 60_000).await;
    assert_eq!(status, 200, "{answer}");
    // Far future, the epoch, two hours off: refused whole.
    for timestamp_ms in [i64::MAX, 0, now_ms + 7_200_000, now_ms - 7_200_000] {
        let (status, answer) = produce("hour", timestamp_ms).await;
        assert_eq!(
            (status, answer["error"].clone()),
            (400, json!("INVALID_TIMESTAMP")),
            "{timestamp_ms}: {answer}"
        );
    }
    // The broker's day applies to a topic without its own setting.
    let (status, _) = produce("day", now_ms - 7_200_000).await;
    assert_eq!(status, 200);
    let (status, answer) = produce("day", now_ms + 2 * 86_400_000).await;
    assert_eq!(
        (status, answer["error"].clone()),
        (400, json!("INVALID_TIMESTAMP"))
    );
    // Only the two accepted batches were written.
    let hour = client.read_all("hour", 0, 0).await;
    assert_eq!(hour.len(), 2, "{hour:?}");
    assert_eq!(client.read_all("day", 0, 0).await.len(), 2);
    let (_, fetched) = client
        .get("/v1/topics/hour/partitions/0/records?offset=1")
        .await;
    assert_eq!(fetched["records"][0]["timestamp_ms"], now_ms - 60_000);
}

#[tokio::test]
async fn topic_names_up_to_249_characters_create_delete_and_recreate() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    for length in [232, 233, 240, 249] {
        let name = format!("{length}-{}", "x".repeat(length - 4));
        assert_eq!(name.len(), length);
        for round in 0..2 {
            client.create_topic(&name, 2, json!({})).await;
            let sent = client
                .produce(&name, 1, &[format!("r{round}")], "all")
                .await;
            assert_eq!(sent["base_offset"], 0, "a re-created topic starts empty");
            let path = format!("/v1/topics/{name}");
            let (status, answer) = client.call("DELETE", &path, None).await;
            assert_eq!(status, 200, "delete {length}-character topic: {answer}");
            let left: Vec<String> = std::fs::read_dir(&broker.log_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("{length}-")))
                .collect();
            assert!(left.is_empty(), "{length} round {round}: {left:?} left");
        }
    }
    let (status, answer) = client
        .post(
            "/v1/topics",
            &json!({"name": "x".repeat(250), "partitions": 1}),
        )
        .await;
    assert_eq!(
        (status, answer["error"].clone()),
        (400, json!("INVALID_TOPIC_EXCEPTION"))
    );
}

#[tokio::test]
async fn retention_deletes_old_segments_but_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        &dir.path().join("logs"),
        &["log.retention.check.interval.ms=50"],
    );
    let client = Client::new(&broker.url);
    client
        .create_topic(
            "r",
            1,
            json!({"internal.segment.bytes": "1024", "retention.bytes": "2048"}),
        )
        .await;
    for batch in 0..40 {
        client
            .produce("r", 0, &values(&format!("{batch:02}-"), 4), "1")
            .await;
    }
    // Liveness bound, not a timing assertion: retention runs every 50 ms.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        let status = client.offsets("r", 0).await;
        if status["log_start_offset"].as_u64().unwrap() > 0 {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retention never ran: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(status["log_end_offset"], 160);
    let start = status["log_start_offset"].as_u64().unwrap();
    let read = client.read_all("r", 0, start).await;
    assert_eq!(read.last().unwrap().0, 159, "the newest records are kept");
    assert_eq!(read.len() as u64, 160 - start);
}

#[tokio::test]
async fn auto_create_topics_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        &dir.path().join("logs"),
        &["auto.create.topics.enable=true", "num.partitions=3"],
    );
    let client = Client::new(&broker.url);
    let answer = client.produce("fresh", 2, &["x".to_string()], "all").await;
    assert_eq!(answer["offsets"], json!([0]));
    let (_, described) = client.get("/v1/topics/fresh").await;
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);

    // A default replication factor one broker cannot satisfy: refused, nothing created.
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        "auto.create.topics.enable=true",
        "default.replication.factor=3",
    ];
    let broker = Broker::start(&dir.path().join("logs"), &settings);
    let client = Client::new(&broker.url);
    let body = json!({"records": [{"value": "x"}]});
    let (status, answer) = client
        .post("/v1/topics/wide/partitions/0/records", &body)
        .await;
    assert_eq!(
        (status, answer["error"].clone()),
        (400, json!("INVALID_REPLICATION_FACTOR"))
    );
    assert_eq!(client.get("/v1/topics").await.1, json!({"topics": []}));
}

#[tokio::test]
async fn fsync_per_append_topic_serves_concurrent_produces() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &[]);
    let client = Client::new(&broker.url);
    client
        .create_topic("synced", 1, json!({"flush.messages": "1"}))
        .await;
    let mut tasks = Vec::new();
    for producer in 0..8 {
        let client = Client::new(&broker.url);
        tasks.push(tokio::spawn(async move {
            for batch in 0..5 {
                client
                    .produce("synced", 0, &[format!("p{producer}-{batch}")], "all")
                    .await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let read = client.read_all("synced", 0, 0).await;
    assert_eq!(read.len(), 40);
    let mut values: Vec<&str> = read.iter().map(|(_, v)| v.as_str()).collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), 40, "every produce appended exactly once");
}

/// `GET .../replica-log`: the replica's own records with keys and batch epochs, in bounded
/// pages that chain by `next_offset`, and a clear error for every bad request.
#[tokio::test]
async fn replica_log_pages_through_the_replicas_own_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &["broker.id=7"]);
    let client = Client::new(&broker.url);
    client.create_topic("t0", 2, json!({})).await;
    let keyed = json!({"acks": "1", "records": [{"key": "k0", "value": "v0"}, {"key": null, "value": "v1"}]});
    let (status, answer) = client
        .post("/v1/topics/t0/partitions/1/records", &keyed)
        .await;
    assert_eq!(status, 200, "{answer}");
    client.produce("t0", 1, &values("w", 3), "all").await;

    let (status, whole) = client.get("/v1/topics/t0/partitions/1/replica-log").await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(
        (
            &whole["broker_id"],
            &whole["role"],
            &whole["log_start_offset"],
            &whole["high_watermark"],
            &whole["log_end_offset"],
            &whole["next_offset"]
        ),
        (
            &json!(7),
            &json!("leader"),
            &json!(0),
            &json!(5),
            &json!(5),
            &json!(5)
        )
    );
    assert_eq!(
        whole["records"][0],
        json!({"offset": 0, "leader_epoch": 0, "key": "k0", "value": "v0"})
    );
    let read: Vec<(u64, Value, String)> = whole["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["key"].clone(),
                r["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(u64, Value, String)> =
        [("k0", "v0"), ("", "v1"), ("", "w0"), ("", "w1"), ("", "w2")]
            .iter()
            .enumerate()
            .map(|(i, (k, v))| {
                (
                    i as u64,
                    if k.is_empty() { Value::Null } else { json!(k) },
                    v.to_string(),
                )
            })
            .collect();
    assert_eq!(read, expected);

    // Pages of 1 byte: one batch per page (a page holds at least one), chained by next_offset.
    let mut offsets = Vec::new();
    let mut next = 0;
    while next < 5 {
        let path = format!("/v1/topics/t0/partitions/1/replica-log?offset={next}&max_bytes=1");
        let (status, page) = client.get(&path).await;
        assert_eq!(status, 200, "{page}");
        let records = page["records"].as_array().unwrap();
        assert!(!records.is_empty(), "{page}");
        offsets.extend(records.iter().map(|r| r["offset"].as_u64().unwrap()));
        next = page["next_offset"].as_u64().unwrap();
    }
    assert_eq!(offsets, [0, 1, 2, 3, 4], "no record twice, none left out");
    let (status, end) = client
        .get("/v1/topics/t0/partitions/1/replica-log?offset=5")
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (end["records"].clone(), end["next_offset"].clone()),
        (json!([]), json!(5))
    );
    let (status, empty) = client.get("/v1/topics/t0/partitions/0/replica-log").await;
    assert_eq!(
        (status, &empty["log_end_offset"], &empty["records"]),
        (200, &json!(0), &json!([]))
    );

    for (path, status, error) in [
        (
            "/v1/topics/nope/partitions/0/replica-log",
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            "/v1/topics/t0/partitions/2/replica-log",
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?offset=6",
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?offset=-1",
            416,
            "OFFSET_OUT_OF_RANGE",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?max_bytes=0",
            400,
            "INVALID_REQUEST",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?max_bytes=16777217",
            400,
            "INVALID_REQUEST",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?offset=x",
            400,
            "INVALID_REQUEST",
        ),
        (
            "/v1/topics/t0/partitions/1/replica-log?isolation=committed",
            400,
            "INVALID_REQUEST",
        ),
    ] {
        let (got, answer) = client.get(path).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(error)),
            "{path}: {answer}"
        );
    }
}
