//! The harness's Kafka-protocol side against a real broker process's Kafka listener (no root:
//! one standalone broker on loopback): `KafkaAdmin` creates a topic with configs and reads its
//! leaders, the nemesis's `KafkaView` resolves a partition, and the workload's rskafka client
//! (`KafkaQueueClient`) sends, fetches and lists offsets, with one refusal classified as over
//! HTTP.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tidewater::cluster::local::find_broker_binary;
use tidewater::nemesis::ClusterView;
use tidewater::system::KafkaView;
use tidewater_workloads::client::{ErrorCause, Outcome};
use tidewater_workloads::kafka::{KafkaClientConfig, KafkaQueueClient};
use tidewater_workloads::kafka_admin::KafkaAdmin;
use tidewater_workloads::queue::QueueClient;

/// The broker process, killed when dropped.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a standalone broker (id 0) with a Kafka listener; returns it and its Kafka address.
fn start(dir: &std::path::Path) -> (Broker, String) {
    let mut child = Command::new(find_broker_binary().expect("broker binary"))
        .args(["--set", &format!("log.dirs={}", dir.display())])
        .args(["--set", "listeners=http://127.0.0.1:0"])
        .args(["--set", "kafka.listeners=PLAINTEXT://127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("broker starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _http = lines.next().unwrap().unwrap();
    let kafka = lines.next().unwrap().unwrap();
    let address = kafka
        .strip_prefix("kafka listening on ")
        .expect("kafka line")
        .to_string();
    (Broker(child), address)
}

#[tokio::test]
async fn admin_view_and_workload_client_over_kafkas_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, address) = start(dir.path());
    let admin = KafkaAdmin::new(vec![address.clone()], Duration::from_secs(5));

    // A topic with a topic config; creating it again counts as created.
    let configs = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
    admin.create_topic("kt", 3, 1, &configs).await.unwrap();
    admin.create_topic("kt", 3, 1, &configs).await.unwrap();
    let mut parts = admin.metadata().await.unwrap();
    parts.sort_by(|a, b| a.key.cmp(&b.key));
    let keys: Vec<&str> = parts.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["kt/0", "kt/1", "kt/2"]);
    for p in &parts {
        assert_eq!(p.leader.as_deref(), Some("n0"), "{p:?}");
        assert_eq!(p.isr, ["n0"]);
        assert_eq!(p.replicas, ["n0"]);
        assert_eq!(p.leader_epoch, Some(0));
    }
    // An invalid topic config is refused with Kafka's name.
    let bad = BTreeMap::from([("min.insync.replicas".to_string(), "zero".to_string())]);
    let refused = admin.create_topic("kt-bad", 1, 1, &bad).await.unwrap_err();
    assert_eq!(
        refused.cause,
        ErrorCause::Broker {
            name: "INVALID_CONFIG".into(),
            status: 0
        },
        "{refused:?}"
    );

    let view = KafkaView::new(vec![address.clone()]);
    let state = view.partition_state("kt/1").await.expect("a state");
    assert_eq!(state.leader.as_deref(), Some("n0"));
    assert!(view.partition_state("kt/9").await.is_none());

    // The workload's client: acks=all on a single broker is refused before the append
    // (min.insync.replicas=2 > ISR 1), a certain failure as over HTTP.
    let client = KafkaQueueClient::new(KafkaClientConfig {
        bootstrap: vec![address.clone()],
        request_timeout_ms: 5_000,
        metadata_timeout_ms: 2_000,
    });
    match client.send("kt/0", 1, "all").await {
        Outcome::Fail(e) => assert_eq!(
            e.cause,
            ErrorCause::Broker {
                name: "NOT_ENOUGH_REPLICAS".into(),
                status: 0
            },
            "{e:?}"
        ),
        other => panic!("expected NOT_ENOUGH_REPLICAS, got {other:?}"),
    }
    // acks other than all are refused by the client itself.
    assert!(matches!(
        client.send("kt/0", 1, "1").await,
        Outcome::Fail(_)
    ));

    // On a topic that allows it, values sent come back at their offsets.
    admin
        .create_topic("kv", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let mut sent = Vec::new();
    for value in [10, 11, 12] {
        match client.send("kv/0", value, "all").await {
            Outcome::Ok(s) => sent.push((s.offset.unwrap(), value)),
            other => panic!("send: {other:?}"),
        }
    }
    assert_eq!(sent, [(0, 10), (1, 11), (2, 12)]);
    let fetched = match client.fetch("kv/0", 1, 100).await {
        Outcome::Ok(f) => f,
        other => panic!("fetch: {other:?}"),
    };
    assert_eq!(fetched.records, [(1, 11), (2, 12)]);
    assert_eq!(fetched.next_offset, 3);
    assert_eq!(fetched.high_watermark, Some(3));
    assert_eq!(client.log_start("kv/0").await, Some(0));
}
