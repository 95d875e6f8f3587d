//! Idempotent producers on the Kafka listener (KIP-98, KIP-360, KIP-730): InitProducerId, a
//! retried batch answered with its original offsets and appended once, OUT_OF_ORDER_SEQUENCE_NUMBER
//! and INVALID_PRODUCER_EPOCH, the producer state rebuilt from the log after a restart and
//! taken over by a new leader after a failover, producer ids unique across the cluster's
//! brokers, and clients nobody here wrote (kcat with `enable.idempotence=true`, kafka-python
//! with `enable_idempotence=True`) whose values read back exactly once.
//!
//! Loopback addresses 127.243.2.x, so these never meet another test's ports.

#[path = "kafka_wire/client.rs"]
mod client;
mod common;
#[path = "kafka_clients/outside.rs"]
mod outside;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::{batch, call, connect};
use common::{Client, Node};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    add_partitions_to_txn_request, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey,
    BrokerId, EndTxnRequest, EndTxnResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, ProduceRequest,
    ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder, TimestampType};
use outside::{assert_produced_read_and_committed, clients_present, kcat, python};
use serde_json::{json, Value};

/// Kafka's error codes these tests expect.
const INVALID_REQUEST: i16 = 42;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

/// Bound on a cluster forming or electing a new leader (liveness, not a timing check).
const CONVERGENCE_MAX: Duration = Duration::from_secs(60);

/// InitProducerId without a transactional id: `(error, producer id, epoch)`.
fn init_producer_id(stream: &mut TcpStream, version: i16) -> (i16, i64, i16) {
    let answer: InitProducerIdResponse = call(
        stream,
        ApiKey::InitProducerId,
        version,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    (
        answer.error_code,
        answer.producer_id.0,
        answer.producer_epoch,
    )
}

/// A batch of `values` from producer `producer_id`, epoch `producer_epoch`, whose first record
/// has sequence `sequence`.
fn idempotent_batch(
    producer_id: i64,
    producer_epoch: i16,
    sequence: i32,
    values: &[&str],
) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: sequence + i as i32,
            timestamp: -1,
            key: None,
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    batch(&records)
}

/// Produces `records` with acks=all to partition 0 of `topic`: `(error, base offset)`.
fn produce(stream: &mut TcpStream, topic: &str, records: Bytes) -> (i16, i64) {
    let (error, base_offset, _) = produce_answer(stream, topic, records);
    (error, base_offset)
}

/// [`produce`], with the answer's `log_append_time_ms`.
fn produce_answer(stream: &mut TcpStream, topic: &str, records: Bytes) -> (i16, i64, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let answer: ProduceResponse = call(stream, ApiKey::Produce, 9, &request);
    let p = &answer.responses[0].partition_responses[0];
    (p.error_code, p.base_offset, p.log_append_time_ms)
}

/// One record as a consumer fetches it: offset, value, producer id, epoch, sequence,
/// timestamp.
type Fetched = (i64, String, i64, i16, i32, i64);

/// Every record of `topic`'s `partition` below the HW, and the HW (Fetch v12 from offset 0).
fn fetch_all(stream: &mut TcpStream, topic: &str, partition: i32) -> (Vec<Fetched>, i64) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 24)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(1 << 24)])]);
    let answer: FetchResponse = call(stream, ApiKey::Fetch, 12, &request);
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch of {topic}/{partition}");
    let mut bytes = p.records.clone().unwrap_or_default();
    let mut records = Vec::new();
    while !bytes.is_empty() {
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        records.extend(set.records.into_iter().map(|r| {
            let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            (
                r.offset,
                value,
                r.producer_id,
                r.producer_epoch,
                r.sequence,
                r.timestamp,
            )
        }));
    }
    (records, p.high_watermark)
}

fn values_at(records: &[Fetched]) -> Vec<(i64, &str)> {
    records.iter().map(|r| (r.0, r.1.as_str())).collect()
}

/// A broker (or controller) on 127.243.2.`host`, with its Kafka listener there too.
fn start_node(dir: &std::path::Path, host: u8, settings: &[String]) -> Node {
    let mut all = vec![format!("listeners=http://127.243.2.{host}:0")];
    if !settings.iter().any(|s| s == "process.roles=controller") {
        all.push(format!("kafka.listeners=PLAINTEXT://127.243.2.{host}:0"));
    }
    all.extend_from_slice(settings);
    Node::start(dir, &all)
}

#[tokio::test]
async fn a_retried_batch_is_appended_once_and_producer_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("b");
    let mut node = start_node(&log_dir, 1, &[]);
    Client::new(&node.url).create_topic("w", 1, json!({})).await;
    let mut s = connect(node.kafka.as_deref().unwrap());

    // InitProducerId: ids from the broker's first block, epoch 0, at the first version and
    // at a flexible one.
    assert_eq!(init_producer_id(&mut s, 0), (0, 0, 0));
    assert_eq!(init_producer_id(&mut s, 4), (0, 1, 0));
    let half: InitProducerIdResponse = call(
        &mut s,
        ApiKey::InitProducerId,
        3,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_producer_id(ProducerId(5))
            .with_producer_epoch(-1),
    );
    assert_eq!(half.error_code, INVALID_REQUEST, "an id without an epoch");
    // A transactional id goes to the transaction coordinator (this standalone broker): a
    // timeout of 0 is refused as Kafka refuses it, a valid one gets the next id of the block
    // at epoch 0, and the id's next InitProducerId bumps the epoch (fencing the first).
    let transactional = |s: &mut TcpStream, timeout_ms: i32| -> InitProducerIdResponse {
        call(
            s,
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    };
    let refused = transactional(&mut s, 0);
    assert_eq!(refused.error_code, INVALID_TRANSACTION_TIMEOUT);
    assert_eq!(refused.producer_id.0, -1);
    let first = transactional(&mut s, 60_000);
    assert_eq!(
        (first.error_code, first.producer_id.0, first.producer_epoch),
        (0, 2, 0)
    );
    let again = transactional(&mut s, 60_000);
    assert_eq!(
        (again.error_code, again.producer_id.0, again.producer_epoch),
        (0, 2, 1)
    );

    // Producer 1: a batch, its retry (the same offsets, nothing appended), a gap, the next.
    // As Kafka, the retry's answer carries the original batch's max timestamp as its
    // log_append_time_ms (-1 for a batch appended).
    let first = idempotent_batch(1, 0, 0, &["a0", "a1", "a2"]);
    assert_eq!(produce_answer(&mut s, "w", first.clone()), (0, 0, -1));
    let (error, base_offset, log_append_time_ms) = produce_answer(&mut s, "w", first);
    assert_eq!((error, base_offset), (0, 0), "the retry's offset");
    assert_eq!(
        produce(&mut s, "w", idempotent_batch(1, 0, 5, &["gap"])).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    let second = idempotent_batch(1, 0, 3, &["b3", "b4"]);
    assert_eq!(produce(&mut s, "w", second.clone()), (0, 3));
    let (records, high_watermark) = fetch_all(&mut s, "w", 0);
    assert_eq!(high_watermark, 5);
    let first_timestamps: Vec<i64> = records[..3].iter().map(|r| r.5).collect();
    assert_eq!(
        Some(log_append_time_ms),
        first_timestamps.iter().max().copied()
    );
    let stamps: Vec<(i64, &str, i64, i16, i32)> = records
        .iter()
        .map(|r| (r.0, r.1.as_str(), r.2, r.3, r.4))
        .collect();
    let expected: Vec<(i64, &str, i64, i16, i32)> = ["a0", "a1", "a2", "b3", "b4"]
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as i64, v, 1, 0, i as i32))
        .collect();
    assert_eq!(
        stamps, expected,
        "Fetch serves each record's producer fields"
    );

    // After a kill -9 the state comes back from the log: the retry is still a duplicate, and
    // the next InitProducerId comes from a new block (ids are never handed out twice).
    node.kill9();
    drop(node);
    let node = start_node(&log_dir, 1, &[]);
    let mut s = connect(node.kafka.as_deref().unwrap());
    assert_eq!(
        produce(&mut s, "w", second),
        (0, 3),
        "the retry after a restart"
    );
    assert_eq!(fetch_all(&mut s, "w", 0).1, 5, "nothing appended for it");
    assert_eq!(init_producer_id(&mut s, 4), (0, 1000, 0));

    // A new epoch starts at sequence 0 and fences the old one, even its next sequence.
    assert_eq!(
        produce(&mut s, "w", idempotent_batch(1, 1, 3, &["bad"])).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a new epoch must start at 0"
    );
    let bumped = idempotent_batch(1, 1, 0, &["c0"]);
    assert_eq!(produce(&mut s, "w", bumped.clone()), (0, 5));
    assert_eq!(
        produce(&mut s, "w", idempotent_batch(1, 0, 5, &["zombie"])).0,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(produce(&mut s, "w", bumped), (0, 5));
    let (records, high_watermark) = fetch_all(&mut s, "w", 0);
    assert_eq!(high_watermark, 6);
    assert_eq!(
        values_at(&records),
        [
            (0, "a0"),
            (1, "a1"),
            (2, "a2"),
            (3, "b3"),
            (4, "b4"),
            (5, "c0")
        ]
    );
    assert_eq!((records[5].3, records[5].4), (1, 0), "epoch 1, sequence 0");
}

/// A controller (127.243.2.10) and three brokers (127.243.2.11-13).
struct Cluster {
    controller: Node,
    brokers: Vec<Option<Node>>,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let controller = start_node(
            &dir.path().join("controller"),
            10,
            &[
                "process.roles=controller".into(),
                "broker.session.timeout.ms=4000".into(),
                "default.replication.factor=3".into(),
            ],
        );
        let brokers = (1..=3u8)
            .map(|id| {
                Some(start_node(
                    &dir.path().join(format!("broker{id}")),
                    10 + id,
                    &[
                        format!("broker.id={id}"),
                        format!("controller.address={}", controller.url),
                    ],
                ))
            })
            .collect();
        Cluster {
            controller,
            brokers,
            dir,
        }
    }

    /// The running brokers' Kafka addresses, comma-separated (a client's bootstrap list).
    fn bootstrap(&self) -> String {
        let running: Vec<String> = self
            .brokers
            .iter()
            .flatten()
            .map(|b| b.kafka.clone().unwrap())
            .collect();
        running.join(",")
    }

    /// SIGKILLs broker `id`.
    fn kill(&mut self, id: u64) {
        self.brokers[id as usize - 1]
            .take()
            .expect("broker runs")
            .kill9();
    }

    /// Starts broker `id` again on its log dir, and waits until the controller has it
    /// unfenced (topics of three replicas can be created again).
    async fn restart(&mut self, id: u64) {
        assert!(
            self.brokers[id as usize - 1].is_none(),
            "broker {id} is down"
        );
        let node = start_node(
            &self.dir.path().join(format!("broker{id}")),
            10 + id as u8,
            &[
                format!("broker.id={id}"),
                format!("controller.address={}", self.controller.url),
            ],
        );
        self.brokers[id as usize - 1] = Some(node);
        let controller = Client::new(&self.controller.url);
        let started = Instant::now();
        loop {
            let (_, metadata) = controller.get("/v1/metadata").await;
            let live = metadata["brokers"]
                .as_array()
                .is_some_and(|b| b.iter().any(|b| b["id"] == id && b["fenced"] == false));
            if live {
                return;
            }
            assert!(
                started.elapsed() < CONVERGENCE_MAX,
                "broker {id} never came back: {metadata}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn broker(&self, id: u64) -> &Node {
        self.brokers[id as usize - 1].as_ref().expect("broker runs")
    }

    fn kafka(&self, id: u64) -> String {
        self.broker(id).kafka.clone().unwrap()
    }

    /// Waits for partition 0 of `topic` to have a leader other than `not` with `isr_size`
    /// replicas in sync; returns the leader's id.
    async fn leader(&self, topic: &str, not: Option<u64>, isr_size: usize) -> u64 {
        let controller = Client::new(&self.controller.url);
        let started = Instant::now();
        loop {
            let (_, metadata) = controller.get("/v1/metadata").await;
            let partition = metadata["topics"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["name"] == topic))
                .map(|t| t["partitions"][0].clone())
                .unwrap_or(Value::Null);
            let leader = partition["leader"].as_u64();
            let isr = partition["isr"].as_array().map_or(0, Vec::len);
            if let Some(leader) = leader.filter(|l| Some(*l) != not && isr >= isr_size) {
                // The leader itself must know it leads before it takes produces.
                let (_, status) = Client::new(&self.broker(leader).url)
                    .get("/v1/status")
                    .await;
                let leads = status["replicas"].as_array().is_some_and(|r| {
                    r.iter()
                        .any(|r| r["topic"] == topic && r["role"] == "leader")
                });
                if leads {
                    return leader;
                }
            }
            assert!(
                started.elapsed() < CONVERGENCE_MAX,
                "no leader for {topic}: {partition}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// kcat with an idempotent producer: `values` to partition 0 of `topic`, one line each, fed
/// `pause` apart; `during` runs once after the first third is fed.
fn kcat_idempotent(
    bootstrap: &str,
    topic: &str,
    values: &[String],
    pause: Duration,
    during: impl FnOnce(),
) -> std::process::Output {
    let mut child = Command::new("kcat")
        .args(["-b", bootstrap, "-P", "-t", topic, "-p", "0"])
        .args(["-X", "enable.idempotence=true", "-X", "linger.ms=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat runs");
    let mut input = child.stdin.take().unwrap();
    let mut during = Some(during);
    for (i, value) in values.iter().enumerate() {
        writeln!(input, "{value}").unwrap();
        input.flush().unwrap();
        if i == values.len() / 3 {
            if let Some(during) = during.take() {
                during();
            }
        }
        std::thread::sleep(pause);
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    eprintln!(
        "kcat idempotent produce to {topic}: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every value of partition 0 of `topic` as kcat consumes it from the start: value -> offsets.
fn kcat_read(bootstrap: &str, topic: &str) -> BTreeMap<String, Vec<u64>> {
    let consumed = kcat(
        bootstrap,
        &[
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %s\\n",
        ],
        None,
    );
    assert!(consumed.status.success(), "kcat consume of {topic}");
    let mut read: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&consumed.stdout).lines() {
        let (offset, value) = line.split_once(' ').unwrap();
        read.entry(value.to_string())
            .or_default()
            .push(offset.parse().unwrap());
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producers_across_brokers_failover_and_outside_clients() {
    let mut cluster = Cluster::start();

    // Every broker hands out ids from its own controller-allocated block. Until a broker has
    // registered, the controller gives it none: COORDINATOR_LOAD_IN_PROGRESS, which clients
    // retry.
    let ids: BTreeSet<i64> = (1..=3)
        .map(|id| {
            let mut s = connect(&cluster.kafka(id));
            let started = Instant::now();
            loop {
                let (error, producer_id, epoch) = init_producer_id(&mut s, 4);
                if error != COORDINATOR_LOAD_IN_PROGRESS {
                    assert_eq!((error, epoch), (0, 0), "broker {id}");
                    break producer_id;
                }
                assert!(
                    started.elapsed() < CONVERGENCE_MAX,
                    "broker {id} has no ids"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .collect();
    assert_eq!(ids, BTreeSet::from([0, 1000, 2000]));

    let clients = clients_present("kafka_idempotence");
    if clients {
        outside_idempotent_producers(&cluster).await;
    }

    // A batch the leader appended and replicated, retried at the next leader after the first
    // was killed, gets its original offset there and is not appended again.
    Client::new(&cluster.broker(1).url)
        .create_topic("fo", 1, json!({}))
        .await;
    let leader = cluster.leader("fo", None, 3).await;
    let producer_id = *ids.first().unwrap();
    let retried = idempotent_batch(producer_id, 0, 0, &["f0", "f1"]);
    let mut s = connect(&cluster.kafka(leader));
    assert_eq!(produce(&mut s, "fo", retried.clone()), (0, 0));
    cluster.kill(leader);
    let next = cluster.leader("fo", Some(leader), 2).await;
    let mut s = connect(&cluster.kafka(next));
    assert_eq!(
        produce(&mut s, "fo", retried),
        (0, 0),
        "the new leader dedupes"
    );
    assert_eq!(
        produce(&mut s, "fo", idempotent_batch(producer_id, 0, 2, &["f2"])),
        (0, 2)
    );
    let (records, high_watermark) = fetch_all(&mut s, "fo", 0);
    assert_eq!(high_watermark, 3);
    assert_eq!(values_at(&records), [(0, "f0"), (1, "f1"), (2, "f2")]);
    cluster.restart(leader).await;

    if clients {
        kcat_through_a_leader_kill(&mut cluster).await;
    }
}

/// kcat (librdkafka) with `enable.idempotence=true` and kafka-python 3 with
/// `enable_idempotence=True`: every value acknowledged and read back once, and the batches in
/// the log carry the client's producer id and its sequences.
async fn outside_idempotent_producers(cluster: &Cluster) {
    let bootstrap = cluster.bootstrap();
    Client::new(&cluster.broker(1).url)
        .create_topic("ki", 1, json!({}))
        .await;
    let leader = cluster.leader("ki", None, 3).await;
    let values: Vec<String> = (0..200).map(|i| format!("ki-{i}")).collect();
    let produced = kcat_idempotent(&bootstrap, "ki", &values, Duration::ZERO, || {});
    assert!(produced.status.success(), "kcat idempotent produce");
    let expected: BTreeMap<String, Vec<u64>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.clone(), vec![i as u64]))
        .collect();
    assert_eq!(
        kcat_read(&bootstrap, "ki"),
        expected,
        "each value once, at its place"
    );
    let (records, _) = fetch_all(&mut connect(&cluster.kafka(leader)), "ki", 0);
    let producer_id = records[0].2;
    assert!(producer_id >= 0, "kcat's batches carry a producer id");
    let stamps: Vec<(i64, i16, i32)> = records.iter().map(|r| (r.2, r.3, r.4)).collect();
    let from_zero: Vec<(i64, i16, i32)> = (0..200).map(|i| (producer_id, 0, i)).collect();
    assert_eq!(stamps, from_zero, "one producer, epoch 0, sequences 0..200");

    let answer = python(&bootstrap, "produce-consume-idempotent", "py-idem");
    assert_produced_read_and_committed(&answer, "py-idem");
    let mut stamped = BTreeSet::new();
    let mut count = 0;
    for partition in 0..3 {
        let (records, _) = fetch_all_at_leader(cluster, "py-idem", partition).await;
        stamped.extend(records.iter().map(|r| r.2));
        count += records.len();
    }
    assert_eq!(count, 60, "60 records in the log");
    assert_eq!(stamped.len(), 1, "one producer id: {stamped:?}");
    assert!(stamped.iter().all(|id| *id >= 0 && *id != producer_id));
}

/// kcat producing 300 values with idempotence while the partition's leader is killed after
/// the first hundred: kcat succeeds, and every value is in the log exactly once.
async fn kcat_through_a_leader_kill(cluster: &mut Cluster) {
    Client::new(&cluster.broker(1).url)
        .create_topic("kf", 1, json!({}))
        .await;
    let leader = cluster.leader("kf", None, 3).await;
    let bootstrap = cluster.bootstrap();
    let values: Vec<String> = (0..300).map(|i| format!("kf-{i}")).collect();
    let doomed = &mut cluster.brokers[leader as usize - 1];
    let produced = kcat_idempotent(&bootstrap, "kf", &values, Duration::from_millis(10), || {
        doomed.take().expect("the leader runs").kill9();
    });
    assert!(
        produced.status.success(),
        "kcat idempotent produce through the kill"
    );
    let next = cluster.leader("kf", Some(leader), 2).await;
    let read = kcat_read(&cluster.kafka(next), "kf");
    let duplicated: Vec<(&String, &Vec<u64>)> = read
        .iter()
        .filter(|(_, offsets)| offsets.len() > 1)
        .collect();
    assert!(
        duplicated.is_empty(),
        "values written twice: {duplicated:?}"
    );
    let missing: Vec<&String> = values.iter().filter(|v| !read.contains_key(*v)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged values missing: {missing:?}"
    );
    assert_eq!(read.len(), values.len(), "nothing else in the log");
}

/// [`fetch_all`] at the leader of `topic`'s `partition`, found from the controller.
async fn fetch_all_at_leader(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
) -> (Vec<Fetched>, i64) {
    let (_, metadata) = Client::new(&cluster.controller.url)
        .get("/v1/metadata")
        .await;
    let leader = metadata["topics"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == topic))
        .and_then(|t| t["partitions"][partition as usize]["leader"].as_u64())
        .expect("a leader");
    fetch_all(&mut connect(&cluster.kafka(leader)), topic, partition)
}

/// Kafka's error codes of the transaction tests.
const CONCURRENT_TRANSACTIONS: i16 = 51;

/// A transactional producer's batch of `values` (the batch's transactional bit set).
fn transactional_batch(
    producer_id: i64,
    producer_epoch: i16,
    sequence: i32,
    values: &[&str],
) -> Bytes {
    let mut bytes = idempotent_batch(producer_id, producer_epoch, sequence, values).to_vec();
    // The v2 batch header's attributes (bytes 21..23): bit 4 is the transactional bit; the
    // CRC-32C (bytes 17..21) covers the attributes onward.
    bytes[22] |= 0x10;
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(bytes)
}

/// Asks `at` until the transaction request `attempt` answers something other than the
/// coordinator's "not yet" (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS); returns that answer's error code.
fn until_settled(what: &str, mut attempt: impl FnMut() -> i16) -> i16 {
    let started = Instant::now();
    loop {
        let code = attempt();
        if ![
            COORDINATOR_LOAD_IN_PROGRESS,
            15,
            16,
            CONCURRENT_TRANSACTIONS,
        ]
        .contains(&code)
        {
            return code;
        }
        assert!(started.elapsed() < CONVERGENCE_MAX, "{what}: still {code}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The transaction coordinator of `transactional_id`, other than `not`, from broker `any`.
fn txn_coordinator(cluster: &Cluster, any: u64, transactional_id: &str, not: Option<u64>) -> u64 {
    let started = Instant::now();
    loop {
        let answer: FindCoordinatorResponse = call(
            &mut connect(&cluster.kafka(any)),
            ApiKey::FindCoordinator,
            3,
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(transactional_id.into()))
                .with_key_type(1),
        );
        let id = answer.node_id.0;
        if answer.error_code == 0 && id > 0 && Some(id as u64) != not {
            return id as u64;
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "no coordinator: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A READ_COMMITTED fetch of partition 0 of `topic` from offset 0: the values returned, the
/// last stable offset, and the aborted transactions as (producer id, first offset).
fn fetch_committed(stream: &mut TcpStream, topic: &str) -> (Vec<String>, i64, Vec<(i64, i64)>) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 24)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(1 << 24)])]);
    let answer: FetchResponse = call(stream, ApiKey::Fetch, 12, &request);
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch of {topic}");
    let mut bytes = p.records.clone().unwrap_or_default();
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    // What a read_committed consumer keeps: no control batch, no record of an aborted
    // transaction (from its first offset on, until that producer's abort marker).
    let mut values = Vec::new();
    while !bytes.is_empty() {
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        for r in set.records {
            let in_aborted = aborted
                .iter()
                .any(|(pid, first)| *pid == r.producer_id && r.offset >= *first);
            if !(r.control || r.transactional && in_aborted) {
                values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
            }
        }
    }
    (values, p.last_stable_offset, aborted)
}

/// One transactional id's requests, as a transactional producer sends them (transaction
/// version 1), on partition 0 of `topic`.
struct Txn {
    id: String,
    topic: &'static str,
    producer_id: i64,
    epoch: i16,
}

impl Txn {
    fn id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.id.clone()))
    }

    /// InitProducerId of `id` at `at`.
    fn init(id: &str, at: &str) -> InitProducerIdResponse {
        call(
            &mut connect(at),
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.into()))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    }

    /// AddPartitionsToTxn of the partition at `at` with `epoch`: its error code.
    fn add(&self, at: &str, epoch: i16) -> i16 {
        let answer: AddPartitionsToTxnResponse = call(
            &mut connect(at),
            ApiKey::AddPartitionsToTxn,
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(self.id())
                .with_v3_and_below_producer_id(ProducerId(self.producer_id))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str(self.topic)))
                        .with_partitions(vec![0]),
                ]),
        );
        answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    }

    /// EndTxn at `at`: its error code.
    fn end(&self, at: &str, commit: bool) -> i16 {
        let answer: EndTxnResponse = call(
            &mut connect(at),
            ApiKey::EndTxn,
            3,
            &EndTxnRequest::default()
                .with_transactional_id(self.id())
                .with_producer_id(ProducerId(self.producer_id))
                .with_producer_epoch(self.epoch)
                .with_committed(commit),
        );
        answer.error_code
    }

    /// A transactional produce of `batch` at `at`: error code, base offset, error message.
    fn produce(&self, at: &str, batch: Bytes) -> (i16, i64, String) {
        let request = ProduceRequest::default()
            .with_transactional_id(Some(self.id()))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str(self.topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        let answer: ProduceResponse = call(&mut connect(at), ApiKey::Produce, 9, &request);
        let p = &answer.responses[0].partition_responses[0];
        let message = p
            .error_message
            .as_ref()
            .map(|m| m.as_str().to_string())
            .unwrap_or_default();
        (p.error_code, p.base_offset, message)
    }
}

/// Starts a cluster and waits until the controller has its three brokers unfenced.
async fn three_live_brokers() -> Cluster {
    let cluster = Cluster::start();
    let controller = Client::new(&cluster.controller.url);
    let started = Instant::now();
    loop {
        let (_, metadata) = controller.get("/v1/metadata").await;
        let live = metadata["brokers"]
            .as_array()
            .map_or(0, |b| b.iter().filter(|b| b["fenced"] == false).count());
        if live == 3 {
            return cluster;
        }
        assert!(started.elapsed() < CONVERGENCE_MAX, "brokers: {metadata}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A transactional producer's state lives in `__transaction_state`, replicated: a committed
/// transaction becomes readable at READ_COMMITTED once its markers are in; an open one holds
/// the last stable offset; after its coordinator is killed, the next coordinator knows the
/// producer id and its open transaction, aborts it when the transactional id initialises again
/// (CONCURRENT_TRANSACTIONS first, then the epoch bumped twice), and the aborted records are
/// listed for READ_COMMITTED consumers, which then read the committed ones only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_survive_a_coordinator_failover() {
    const TXN: &str = "tx-failover";
    let mut cluster = three_live_brokers().await;
    Client::new(&cluster.broker(1).url)
        .create_topic("tx", 1, json!({}))
        .await;
    let coordinator = txn_coordinator(&cluster, 1, TXN, None);
    let init = |at: &str| Txn::init(TXN, at);
    let mut first = None;
    until_settled("init", || {
        let answer = init(&cluster.kafka(coordinator));
        let code = answer.error_code;
        first = Some(answer);
        code
    });
    let first = first.unwrap();
    let (producer_id, epoch) = (first.producer_id.0, first.producer_epoch);
    assert_eq!((first.error_code, epoch), (0, 0));
    let txn = Txn {
        id: TXN.into(),
        topic: "tx",
        producer_id,
        epoch,
    };
    let add = |at: &str, epoch: i16| txn.add(at, epoch);
    let end = |at: &str, commit: bool| txn.end(at, commit);
    let produce_txn = |at: &str, batch: Bytes| {
        let (code, base_offset, _) = txn.produce(at, batch);
        (code, base_offset)
    };

    // The first transaction: open, it holds the LSO at its first offset; committed, it is read.
    let leader = cluster.leader("tx", None, 3).await;
    assert_eq!(add(&cluster.kafka(coordinator), epoch), 0);
    let batch = transactional_batch(producer_id, epoch, 0, &["c0", "c1"]);
    assert_eq!(produce_txn(&cluster.kafka(leader), batch), (0, 0));
    let (read, lso, _) = fetch_committed(&mut connect(&cluster.kafka(leader)), "tx");
    assert_eq!(
        (read.len(), lso),
        (0, 0),
        "the open transaction holds the LSO"
    );
    assert_eq!(end(&cluster.kafka(coordinator), true), 0);
    let started = Instant::now();
    loop {
        let (read, lso, aborted) = fetch_committed(&mut connect(&cluster.kafka(leader)), "tx");
        if lso == 3 {
            assert_eq!(read, ["c0", "c1"]);
            assert!(aborted.is_empty());
            break;
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "the commit marker never landed: {lso}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The second transaction is open when its coordinator dies.
    until_settled("add", || add(&cluster.kafka(coordinator), epoch));
    let batch = transactional_batch(producer_id, epoch, 2, &["a0", "a1"]);
    let (error, aborted_first) = produce_txn(&cluster.kafka(leader), batch);
    assert_eq!((error, aborted_first), (0, 3));
    cluster.kill(coordinator);
    let alive = (1..=3).find(|id| *id != coordinator).unwrap();
    let next = txn_coordinator(&cluster, alive, TXN, Some(coordinator));
    // The next coordinator loaded the producer and its open transaction from the replicated
    // log: initialising the id again aborts it with the epoch bumped (CONCURRENT_TRANSACTIONS
    // first), then answers the same producer id at epoch 2.
    let mut again = None;
    let code = until_settled("init at the next coordinator", || {
        let answer = init(&cluster.kafka(next));
        let code = answer.error_code;
        again = Some(answer);
        code
    });
    let again = again.unwrap();
    assert_eq!(
        (code, again.producer_id.0, again.producer_epoch),
        (0, producer_id, 2)
    );
    let leader = cluster.leader("tx", Some(coordinator), 2).await;
    let started = Instant::now();
    loop {
        let (read, lso, aborted) = fetch_committed(&mut connect(&cluster.kafka(leader)), "tx");
        if lso >= 6 {
            assert_eq!(read, ["c0", "c1"], "the aborted records are not read");
            assert_eq!(aborted, [(producer_id, aborted_first)]);
            break;
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "the abort never landed: {lso}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // READ_UNCOMMITTED sees the aborted records (and the markers are control batches).
    let (records, _) = fetch_all(&mut connect(&cluster.kafka(leader)), "tx", 0);
    let values: Vec<&str> = records.iter().map(|r| r.1.as_str()).collect();
    assert!(
        values.contains(&"a0") && values.contains(&"a1"),
        "{values:?}"
    );
}

/// KIP-890 part 1 (`transaction.partition.verification.enable`, on by default as in Kafka
/// 3.6+): the leader of a partition asks the producer's transaction coordinator, here another
/// broker reached over `/internal/v1/txn-verify`, before it lets a transactional batch open a
/// transaction. A batch for a partition never added is INVALID_TXN_STATE and not written;
/// once added it is taken; after the transaction is aborted, a late batch of it (the same
/// producer and epoch, as a retry over another connection would arrive) is INVALID_TXN_STATE
/// and read by nobody, where a broker without the check takes it into a transaction the
/// coordinator never heard of (docs/real-kafka.md: the companion's aborted read of
/// 2026-12-07).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_transactional_produce_is_refused_after_the_leader_asks_the_coordinator() {
    const INVALID_TXN_STATE: i16 = 48;
    let cluster = three_live_brokers().await;
    Client::new(&cluster.broker(1).url)
        .create_topic("late", 1, json!({}))
        .await;
    let leader = cluster.leader("late", None, 3).await;
    // A transactional id coordinated by another broker than the leader, so the leader's
    // question crosses the network.
    let txn = (0..50)
        .map(|i| format!("tx-late-{i}"))
        .find(|id| txn_coordinator(&cluster, 1, id, None) != leader)
        .expect("some id is coordinated elsewhere");
    let coordinator = txn_coordinator(&cluster, 1, &txn, None);
    let mut first = None;
    until_settled("init", || {
        let answer = Txn::init(&txn, &cluster.kafka(coordinator));
        let code = answer.error_code;
        first = Some(answer);
        code
    });
    let first = first.unwrap();
    let txn = Txn {
        id: txn,
        topic: "late",
        producer_id: first.producer_id.0,
        epoch: first.producer_epoch,
    };
    let add = || txn.add(&cluster.kafka(coordinator), txn.epoch);
    let produce_txn = |sequence: i32, value: &str| {
        let batch = transactional_batch(txn.producer_id, txn.epoch, sequence, &[value]);
        txn.produce(&cluster.kafka(leader), batch)
    };
    let values = || -> Vec<String> {
        let (records, _) = fetch_all(&mut connect(&cluster.kafka(leader)), "late", 0);
        records.into_iter().map(|r| r.1).collect()
    };

    // Never added: the coordinator holds no such partition in the producer's transaction.
    let (code, _, message) = produce_txn(0, "never-added");
    assert_eq!(code, INVALID_TXN_STATE, "{message}");
    assert!(
        message.contains("Partition was not added to the transaction"),
        "{message}"
    );
    assert!(values().is_empty(), "nothing written: {:?}", values());

    // Added, then produced: taken, and the next batch of the open transaction too.
    until_settled("add", add);
    assert_eq!(produce_txn(0, "a0").0, 0);
    assert_eq!(produce_txn(1, "a1").0, 0);
    assert_eq!(txn.end(&cluster.kafka(coordinator), false), 0);
    let started = Instant::now();
    loop {
        let (_, lso, aborted) = fetch_committed(&mut connect(&cluster.kafka(leader)), "late");
        if lso == 3 {
            assert_eq!(aborted, [(txn.producer_id, 0)]);
            break;
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "the abort marker never landed: {lso}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The late batch of the aborted transaction: refused, not written, read by nobody.
    let (code, _, message) = produce_txn(2, "late");
    assert_eq!(code, INVALID_TXN_STATE, "{message}");
    // (READ_UNCOMMITTED: the aborted records and the abort marker's control record.)
    let all = values();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[..2], ["a0", "a1"]);
    assert!(
        !all.iter().any(|v| v == "late"),
        "the late batch is not in the log: {all:?}"
    );
    let (read, lso, _) = fetch_committed(&mut connect(&cluster.kafka(leader)), "late");
    assert!(read.is_empty(), "{read:?}");
    assert_eq!(lso, 3, "no transaction holds the last stable offset");
}
