//! Clients nobody here wrote against a three-broker cluster's Kafka listeners: kcat
//! (librdkafka) and kafka-python (`tests/kafka_clients/python_client.py`). Metadata, produce
//! with acks=all, consume from the start, a consumer group that joins, rebalances and commits,
//! and NOT_ENOUGH_REPLICAS when `min.insync.replicas` cannot be met. Each expectation is
//! computed from what the clients report (offsets acknowledged, values read), not from the
//! broker.
//!
//! Needs `kcat` and the `kafka` Python module. `.ci/run` installs both and sets
//! `TIDEWATER_REQUIRE_KAFKA_CLIENTS=1`, which turns their absence into a failure; elsewhere the
//! test says it skipped.

mod common;
#[path = "kafka_clients/outside.rs"]
mod outside;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{Client, Node};
use outside::{
    assert_group_split_and_committed, assert_produced_read_and_committed,
    assert_transactional_offsets, clients_present, kcat, python,
};
use serde_json::{json, Value};

/// Bound on the cluster forming (a liveness bound, not a timing check).
const CONVERGENCE_MAX: Duration = Duration::from_secs(60);

struct Cluster {
    _controller: Node,
    brokers: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let controller = Node::start(
            &dir.path().join("controller"),
            &[
                "process.roles=controller".into(),
                "broker.session.timeout.ms=4000".into(),
                "default.replication.factor=3".into(),
            ],
        );
        let brokers = (1..=3)
            .map(|id| {
                Node::start(
                    &dir.path().join(format!("broker{id}")),
                    &[
                        format!("broker.id={id}"),
                        format!("controller.address={}", controller.url),
                        "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
                    ],
                )
            })
            .collect();
        Cluster {
            _controller: controller,
            brokers,
            _dir: dir,
        }
    }

    fn bootstrap(&self) -> String {
        self.brokers[0].kafka.clone().expect("kafka listener")
    }

    fn kafka_addresses(&self) -> BTreeSet<String> {
        self.brokers
            .iter()
            .map(|b| b.kafka.clone().unwrap())
            .collect()
    }
}

/// kcat's JSON metadata, once all three brokers are in it.
fn metadata_with_three_brokers(bootstrap: &str) -> Value {
    let started = Instant::now();
    loop {
        let output = kcat(bootstrap, &["-L", "-J", "-m", "10"], None);
        if let Ok(metadata) = serde_json::from_slice::<Value>(&output.stdout) {
            if metadata["brokers"].as_array().is_some_and(|b| b.len() == 3) {
                return metadata;
            }
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "three brokers never listed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_and_kafka_python_against_a_three_broker_cluster() {
    if !clients_present("kafka_clients") {
        return;
    }
    let cluster = Cluster::start();
    let bootstrap = cluster.bootstrap();

    // Metadata: every broker with the Kafka address it printed.
    let metadata = metadata_with_three_brokers(&bootstrap);
    let listed: BTreeSet<String> = metadata["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, cluster.kafka_addresses());

    // kcat: produce 90 values with acks=all over three partitions, read them back from the
    // start; the topic is created over HTTP, as the harness does.
    let http = Client::new(&cluster.brokers[0].url);
    http.create_topic("kc", 3, json!({})).await;
    let values: Vec<String> = (0..90).map(|i| format!("kc-{i}")).collect();
    for partition in 0..3 {
        let part: Vec<&str> = values
            .iter()
            .skip(partition)
            .step_by(3)
            .map(String::as_str)
            .collect();
        let input = part.join("\n") + "\n";
        let p = partition.to_string();
        let produced = kcat(
            &bootstrap,
            &["-P", "-t", "kc", "-p", &p, "-X", "acks=all"],
            Some(&input),
        );
        assert!(produced.status.success(), "kcat produce to partition {p}");
    }
    let consumed = kcat(
        &bootstrap,
        &[
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%p %o %s\\n",
        ],
        None,
    );
    assert!(consumed.status.success());
    let mut read: BTreeMap<usize, Vec<(u64, String)>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&consumed.stdout).lines() {
        let mut fields = line.splitn(3, ' ');
        let partition: usize = fields.next().unwrap().parse().unwrap();
        let offset: u64 = fields.next().unwrap().parse().unwrap();
        read.entry(partition)
            .or_default()
            .push((offset, fields.next().unwrap().to_string()));
    }
    for partition in 0..3 {
        let expected: Vec<(u64, String)> = values
            .iter()
            .skip(partition)
            .step_by(3)
            .enumerate()
            .map(|(offset, v)| (offset as u64, v.clone()))
            .collect();
        assert_eq!(
            read.get(&partition),
            Some(&expected),
            "partition {partition}"
        );
    }

    // kcat: acks=all on a topic whose min.insync.replicas (4) exceeds its replicas (3).
    http.create_topic("kc-strict", 1, json!({"min.insync.replicas": "4"}))
        .await;
    let refused = kcat(
        &bootstrap,
        &[
            "-P",
            "-t",
            "kc-strict",
            "-X",
            "acks=all",
            "-X",
            "message.send.max.retries=0",
        ],
        Some("x\n"),
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Not enough in-sync replicas"),
        "kcat names NOT_ENOUGH_REPLICAS"
    );

    // kafka-python: admin create, acks=all produce, group read from the start and commit.
    let answer = python(&bootstrap, "produce-consume", "py");
    assert_produced_read_and_committed(&answer, "py");

    // kafka-python: a second member joins and the partitions are split; commits read back.
    let answer = python(&bootstrap, "group", "py-group");
    assert_group_split_and_committed(&answer);

    // kafka-python: the same refusal as kcat saw, as the client's own error type.
    let answer = python(&bootstrap, "not-enough", "py-strict");
    assert_eq!(answer, json!({"error": "NotEnoughReplicasError"}));
}

/// The values of `answer[key]`, as a set.
fn values(answer: &Value, key: &str) -> BTreeSet<String> {
    answer[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {answer}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// kafka-python's consume-transform-produce (AddOffsetsToTxn, TxnOffsetCommit with the
/// member's generation): offsets committed in a transaction count only once it commits, and
/// a new member resumes from them (`outside::assert_transactional_offsets`, which
/// `harness/tests/kafka_clients_real.rs` holds Apache Kafka to as well).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_commits_consumed_offsets_in_transactions() {
    if !clients_present("kafka_clients") {
        return;
    }
    let cluster = Cluster::start();
    let bootstrap = cluster.bootstrap();
    metadata_with_three_brokers(&bootstrap);
    let answer = python(&bootstrap, "txn-offsets", "py-eos");
    assert_transactional_offsets(&answer);
}

/// kafka-python's transactional producer and read_committed consumer: a committed
/// transaction is read, an aborted one and an open one are not (the open one holds the last
/// stable offset until a second producer of the same transactional id fences the first and
/// its transaction is aborted); read_uncommitted reads them all. Every expectation is the
/// values the producer had acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_commits_and_aborts_transactions_read_committed() {
    if !clients_present("kafka_clients") {
        return;
    }
    let cluster = Cluster::start();
    let bootstrap = cluster.bootstrap();
    metadata_with_three_brokers(&bootstrap);
    let answer = python(&bootstrap, "transactions", "py-txn");
    let committed = values(&answer, "committed");
    let aborted = values(&answer, "aborted");
    let left_open = values(&answer, "left_open");
    let after = values(&answer, "after");
    assert_eq!(
        committed.len(),
        12,
        "every send of the first transaction acked: {answer}"
    );
    assert_eq!(
        (aborted.len(), left_open.len(), after.len()),
        (9, 6, 6),
        "{answer}"
    );
    // While the third transaction is open, read_committed sees the committed one only
    // (the LSO stands at the open transaction's first offset on each partition), and
    // read_uncommitted sees all three.
    assert_eq!(values(&answer, "open_read_committed"), committed);
    let everything: BTreeSet<String> = committed
        .iter()
        .chain(&aborted)
        .chain(&left_open)
        .cloned()
        .collect();
    assert_eq!(values(&answer, "open_read_uncommitted"), everything);
    assert_eq!(
        answer["open_read_committed"].as_array().unwrap().len(),
        committed.len(),
        "no committed value read twice"
    );
    // The second producer fenced the first: its commit failed, its open transaction was
    // aborted, and the second producer's transaction is read.
    assert_eq!(answer["fenced"], json!("ProducerFencedError"), "{answer}");
    let visible: BTreeSet<String> = committed.union(&after).cloned().collect();
    assert_eq!(values(&answer, "read_committed"), visible);
    let all: BTreeSet<String> = everything.union(&after).cloned().collect();
    assert_eq!(values(&answer, "read_uncommitted"), all);

    // librdkafka (through kcat) reads the same partitions both ways: at read_committed the
    // committed values only, each once (it filters the aborted transactions with the fetch's
    // aborted list and skips the markers); at read_uncommitted every value.
    let consume = |level: &str| -> Vec<String> {
        let isolation = format!("isolation.level={level}");
        let output = kcat(
            &bootstrap,
            &[
                "-C",
                "-t",
                "py-txn",
                "-o",
                "beginning",
                "-e",
                "-q",
                "-X",
                &isolation,
                "-f",
                "%s\n",
            ],
            None,
        );
        assert!(output.status.success(), "kcat {level}");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let committed_read = consume("read_committed");
    assert_eq!(committed_read.len(), visible.len(), "{committed_read:?}");
    assert_eq!(committed_read.into_iter().collect::<BTreeSet<_>>(), visible);
    let uncommitted_read: BTreeSet<String> = consume("read_uncommitted").into_iter().collect();
    assert_eq!(uncommitted_read, all);
}
