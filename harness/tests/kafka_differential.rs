//! The companion broker's Kafka listener against Apache Kafka, request for request (issue 24,
//! item 6): the same requests go to a companion cluster and to a Kafka cluster (each a
//! controller and three brokers, started here; Kafka is the default version, fetched or
//! cached, with the harness's JVM options), and every field of every answer is compared.
//!
//! Each answer is flattened to `path -> value` ([`kafka_support::flatten`]); values that
//! cannot agree (addresses, generated member ids, which broker leads, error texts) are
//! normalised first ([`normalise`]). Every remaining field must be equal, except those in
//! [`KNOWN_DIFFERENCES`], each with its reason (docs/kafka-protocol.md, "Compared with
//! Apache Kafka"): that table must equal the differences observed, so a new difference and
//! a difference that went away both fail the test.
//!
//! Needs Java and Kafka (skipped with a message otherwise; a failure under
//! `TIDEWATER_REQUIRE_KAFKA=1`), not root: the Kafka nodes listen on 127.242.1.10-13.

mod kafka_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_support::{call, flatten, kafka_release, metadata, CompanionCluster, KafkaCluster};

/// `(field, companion's value, Kafka's value, why)`: every field where the two differ
/// (Kafka 4.1.1). The reasons are docs/kafka-protocol.md's, "Compared with Apache Kafka".
const KNOWN_DIFFERENCES: &[(&str, &str, &str, &str)] = &[
    // ApiVersions: the companion stops each API before features it does not have.
    ("api_versions.ApiVersions", "0..=3", "0..=4", MAX_VERSIONS),
    ("api_versions.Fetch", "4..=12", "4..=18", MAX_VERSIONS),
    (
        "api_versions.FindCoordinator",
        "0..=4",
        "0..=6",
        MAX_VERSIONS,
    ),
    ("api_versions.JoinGroup", "0..=7", "0..=9", MAX_VERSIONS),
    (
        "api_versions.AddPartitionsToTxn",
        "0..=3",
        "0..=5",
        "v4+ are the brokers' verification of KIP-890, which the companion does not do",
    ),
    (
        "api_versions.AddOffsetsToTxn",
        "0..=3",
        "0..=4",
        "v4 belongs to transaction version 2 (KIP-890), which the companion does not finalize",
    ),
    (
        "api_versions.TxnOffsetCommit",
        "0..=3",
        "0..=5",
        "v4+ belong to transaction version 2 (KIP-890), which the companion does not finalize",
    ),
    (
        "api_versions.EndTxn",
        "0..=4",
        "0..=5",
        "v5 is transaction version 2 (KIP-890), which the companion does not finalize",
    ),
    ("api_versions.LeaveGroup", "0..=4", "0..=5", MAX_VERSIONS),
    ("api_versions.ListOffsets", "1..=7", "1..=10", MAX_VERSIONS),
    ("api_versions.Metadata", "0..=12", "0..=13", MAX_VERSIONS),
    ("api_versions.OffsetCommit", "2..=8", "2..=9", MAX_VERSIONS),
    ("api_versions.OffsetFetch", "1..=7", "1..=9", MAX_VERSIONS),
    (
        "api_versions.Produce",
        "3..=9",
        "0..=13",
        "Kafka 4 advertises Produce v0-v2 (for librdkafka) but refuses them; the companion \
         advertises what it takes; and stops before v10+ (KIP-1005 fields, topic ids)",
    ),
    // CreateTopics v5+: Kafka lists every config of a created topic.
    (
        "create_topics.topics[diff-isr].configs.len",
        "0",
        "33",
        CONFIGS,
    ),
    (
        "create_topics.topics[diff-strict].configs.len",
        "0",
        "33",
        CONFIGS,
    ),
    ("create_topics.topics[diff].configs.len", "0", "33", CONFIGS),
    // Topic ids are not kept.
    (
        "create_topics.topics[diff-isr].topic_id",
        "<zero>",
        "<id>",
        TOPIC_IDS,
    ),
    (
        "create_topics.topics[diff-strict].topic_id",
        "<zero>",
        "<id>",
        TOPIC_IDS,
    ),
    (
        "create_topics.topics[diff].topic_id",
        "<zero>",
        "<id>",
        TOPIC_IDS,
    ),
    (
        "metadata.topics[diff-strict].topic_id",
        "<zero>",
        "<id>",
        TOPIC_IDS,
    ),
    (
        "metadata.topics[diff].topic_id",
        "<zero>",
        "<id>",
        TOPIC_IDS,
    ),
    (
        "fetch_at_follower.responses[diff].partitions[0].error_code",
        "6",
        "0",
        "KIP-392: Kafka serves a consumer's Fetch v11+ from a follower (below the follower's \
         high watermark); the companion serves consumers from leaders only",
    ),
    // Kafka 3.9 and 4.x require min(min.insync.replicas, replicas) in sync.
    (
        "produce_not_enough_replicas.responses[diff-strict].partition_responses[0].base_offset",
        "-1",
        "0",
        EFFECTIVE_MIN_ISR,
    ),
    (
        "produce_not_enough_replicas.responses[diff-strict].partition_responses[0].error_code",
        "19",
        "0",
        EFFECTIVE_MIN_ISR,
    ),
];

const MAX_VERSIONS: &str = "the companion's upper bounds stop before features it does not have \
     (topic ids, KIP-848 groups, tiered storage offsets, batched OffsetFetch)";
const CONFIGS: &str = "CreateTopics v5+ answers the created topic's configs; the companion \
     answers none (null configs are allowed; clients then describe the topic)";
const TOPIC_IDS: &str = "the companion keeps no topic ids (zero)";
const EFFECTIVE_MIN_ISR: &str = "Kafka 3.9 and 4.x hold a partition to min(min.insync.replicas, \
     replication factor) (Partition.effectiveMinIsr): min.insync.replicas 4 on three in-sync \
     replicas takes acks=all writes, the companion refuses them with NOT_ENOUGH_REPLICAS";

/// The topic most probes use: three partitions on three brokers.
const TOPIC: &str = "diff";
/// A topic whose `min.insync.replicas` (4) its three replicas cannot meet.
const STRICT: &str = "diff-strict";
/// A topic that needs all three replicas in sync (`min.insync.replicas` 3).
const ISR: &str = "diff-isr";
/// The topic of the WriteTxnMarkers probes: one partition on three brokers.
const MARKERS: &str = "diff-markers";
/// A topic neither system has.
const UNKNOWN: &str = "diff-unknown";
/// The group the group probes form.
const GROUP: &str = "g-diff";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group(s: &str) -> GroupId {
    GroupId(text(s))
}

/// One system under comparison: where its brokers are, what it answered so far.
struct System {
    /// `companion` or `kafka`, for messages.
    label: &'static str,
    /// Each broker's Kafka address; broker id K at index K-1.
    brokers: Vec<String>,
    /// Every answer so far, flattened and normalised, under its probe's name.
    fields: BTreeMap<String, String>,
}

impl System {
    fn broker(&self, id: i32) -> &str {
        &self.brokers[usize::try_from(id - 1).expect("a broker id")]
    }

    /// Records `answer` under `probe`.
    fn record<T: std::fmt::Debug>(&mut self, probe: &str, answer: &T) {
        let flat = flatten(&format!("{answer:?}"));
        let mut members = BTreeMap::new();
        for (path, value) in flat {
            if let Some(value) = normalise(&path, &value, &mut members) {
                self.fields.insert(format!("{probe}.{path}"), value);
            }
        }
    }

    /// Records only the error codes of `answer` under `probe`.
    fn record_errors<T: std::fmt::Debug>(&mut self, probe: &str, answer: &T) {
        for (path, value) in flatten(&format!("{answer:?}")) {
            if path.ends_with("error_code") {
                self.fields.insert(format!("{probe}.{path}"), value);
            }
        }
    }

    /// Records an observation of the test's own (a derived figure).
    fn note(&mut self, probe: &str, value: impl ToString) {
        self.fields.insert(probe.to_string(), value.to_string());
    }

    /// The leader and epoch of `topic`/`partition` from Metadata, once it has one.
    fn leader(&self, topic: &str, partition: i32) -> (i32, i32) {
        let started = Instant::now();
        loop {
            for b in &self.brokers {
                let Some(m) = metadata(b, Some(vec![topic])) else {
                    continue;
                };
                let p = m
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .find(|p| p.partition_index == partition);
                if let Some(p) = p.filter(|p| p.error_code == 0 && p.leader_id.0 >= 0) {
                    return (p.leader_id.0, p.leader_epoch);
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{}: {topic}/{partition} has no leader",
                self.label
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the leader Metadata names for each of `partitions` partitions of `topic`
    /// answers as leader (Kafka's Metadata can name a leader before that broker has taken
    /// the leadership).
    fn wait_until_led(&self, topic: &str, partitions: i32) {
        let started = Instant::now();
        for partition in 0..partitions {
            loop {
                let (leader, epoch) = self.leader(topic, partition);
                let answer: ListOffsetsResponse = call(
                    self.broker(leader),
                    ApiKey::ListOffsets,
                    7,
                    &list_offsets(topic, partition, -1, epoch),
                );
                if answer.topics[0].partitions[0].error_code == 0 {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{}: {topic}/{partition} never led: {answer:?}",
                    self.label
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// A broker that is a replica of `topic`/`partition` but not its leader.
    fn follower(&self, topic: &str, partition: i32) -> i32 {
        let m = metadata(&self.brokers[0], Some(vec![topic])).unwrap();
        let p = partition_of(&m, partition);
        p.replica_nodes
            .iter()
            .map(|b| b.0)
            .find(|b| *b != p.leader_id.0)
            .expect("a follower")
    }
}

/// What may be compared of a field: `None` drops it, else its value with what cannot agree
/// between two clusters replaced (`members` numbers the generated member ids in order of
/// appearance).
fn normalise(path: &str, value: &str, members: &mut BTreeMap<String, String>) -> Option<String> {
    let last = path.rsplit('.').next().unwrap_or(path);
    let last = last.split('[').next().unwrap_or(last);
    Some(match last {
        // Where the brokers listen.
        "host" | "port" => "<address>".into(),
        // Texts are not compared: the error code says what happened (the companion
        // explains its refusals where Kafka mostly leaves the text null).
        "error_message" => return None,
        "cluster_id" => if value == "None" { "None" } else { "<id>" }.into(),
        "topic_id" => if value.starts_with("00000000-0000-0000-0000-000000000000") {
            "<zero>"
        } else {
            "<id>"
        }
        .into(),
        // Which broker leads, replicates or coordinates depends on placement: the test
        // sends each request to the right broker and compares the counts.
        "leader_id" | "controller_id" | "node_id" if path.contains("brokers[") => value.into(),
        "leader_id" | "controller_id" | "node_id" => {
            if value.parse::<i32>().is_ok_and(|v| v >= 1) {
                "<broker>".into()
            } else {
                value.into()
            }
        }
        _ if path.contains("replica_nodes[")
            || path.contains("isr_nodes[")
            || path.contains("offline_replicas[") =>
        {
            return None
        }
        "member_id" | "leader" if !value.is_empty() => {
            let n = members.len() + 1;
            members
                .entry(value.to_string())
                .or_insert_with(|| format!("<member{n}>"))
                .clone()
        }
        // Record batches are compared decoded, by the probes that read them.
        "records" => return None,
        // Each cluster hands out its own producer ids.
        "producer_id" if value.parse::<i64>().is_ok_and(|v| v >= 0) => "<id>".into(),
        // CreateTopics v5+ lists the created topic's every config: their number is
        // compared, not Kafka's catalogue of defaults.
        _ if path.contains(".configs[") => return None,
        _ => value.into(),
    })
}

/// Partition `index` of the only topic of a Metadata answer (Kafka lists partitions in no
/// particular order).
fn partition_of(
    m: &MetadataResponse,
    index: i32,
) -> &kafka_protocol::messages::metadata_response::MetadataResponsePartition {
    m.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == index)
        .expect("the partition")
}

fn record_of(value: &str, offset: i64, timestamp: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        // Offset minus sequence constant keeps the encoder's records in one batch, whose
        // base sequence is then -1 (no idempotence).
        sequence: offset as i32 - 1,
        timestamp,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    }
}

fn batch(values: &[&str], timestamp_first: i64) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record_of(v, i as i64, timestamp_first + i as i64))
        .collect();
    encode(&records)
}

/// Three records whose offset deltas are all 0: a batch whose offset range (one offset)
/// does not span its record count.
fn batch_inconsistent(timestamp: i64) -> Bytes {
    let records: Vec<Record> = ["x", "y", "z"]
        .iter()
        .map(|v| record_of(v, 0, timestamp))
        .collect();
    encode(&records)
}

/// `records` as one uncompressed v2 batch.
fn encode(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn produce(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn fetch(topic: &str, partition: i32, offset: i64, epoch: i32) -> FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(epoch)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])])
}

fn list_offsets(topic: &str, partition: i32, timestamp: i64, epoch: i32) -> ListOffsetsRequest {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(epoch)
                .with_timestamp(timestamp)])])
}

fn epoch_end(topic: &str, partition: i32, epoch: i32, current: i32) -> OffsetForLeaderEpochRequest {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])])
}

fn join(member: &str, protocols: &[&str], group_id: &str) -> JoinGroupRequest {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    // A ConsumerProtocolSubscription v0 of TOPIC: version, one topic, no user data.
    let mut subscription = BytesMut::new();
    bytes::BufMut::put_i16(&mut subscription, 0);
    bytes::BufMut::put_i32(&mut subscription, 1);
    bytes::BufMut::put_i16(&mut subscription, TOPIC.len() as i16);
    bytes::BufMut::put_slice(&mut subscription, TOPIC.as_bytes());
    bytes::BufMut::put_i32(&mut subscription, -1);
    let subscription = subscription.freeze();
    JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|p| {
                    JoinGroupRequestProtocol::default()
                        .with_name(text(p))
                        .with_metadata(subscription.clone())
                })
                .collect(),
        )
}

fn commit(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    OffsetCommitRequest::default()
        .with_group_id(group(GROUP))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)])])
}

fn offset_fetch(group_id: &str, partitions: bool) -> OffsetFetchRequest {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    OffsetFetchRequest::default()
        .with_group_id(group(group_id))
        .with_topics(partitions.then(|| {
            vec![OffsetFetchRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(vec![0, 1])]
        }))
}

/// The record offsets, values and timestamps of a fetch answer's only partition.
fn fetched(answer: &FetchResponse) -> Vec<String> {
    let Some(mut records) = answer.responses[0].partitions[0].records.clone() else {
        return vec![];
    };
    let mut out = vec![];
    while !records.is_empty() {
        let set = RecordBatchDecoder::decode(&mut records).unwrap();
        for r in set.records {
            let value =
                String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            out.push(format!(
                "{}:{value}@{} epoch {}",
                r.offset, r.timestamp, r.partition_leader_epoch
            ));
        }
    }
    out
}

/// Every probe against one system, in the same order for both.
fn probe(system: &mut System, timestamp_base: i64) {
    let any = system.brokers[0].clone();

    // ApiVersions: the ranges of the APIs the companion serves.
    let versions: ApiVersionsResponse = call(
        &any,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(text("tidewater"))
            .with_client_software_version(text("1")),
    );
    for key in SERVED {
        let api = versions.api_keys.iter().find(|a| a.api_key == *key as i16);
        let range = api.map_or("absent".to_string(), |a| {
            format!("{}..={}", a.min_version, a.max_version)
        });
        system.note(&format!("api_versions.{key:?}"), range);
    }
    system.note("api_versions.error_code", versions.error_code);

    // CreateTopics: the topics the other probes use, and one that exists already.
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let creatable = |topic: &str, partitions: i32, configs: &[(&str, &str)]| {
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(3)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(text(k))
                            .with_value(Some(text(v)))
                    })
                    .collect(),
            )
    };
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            creatable(TOPIC, 3, &[]),
            creatable(STRICT, 1, &[("min.insync.replicas", "4")]),
            creatable(ISR, 1, &[("min.insync.replicas", "3")]),
        ]);
    let created: CreateTopicsResponse = call(&any, ApiKey::CreateTopics, 7, &create);
    system.record("create_topics", &created);
    let again = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![creatable(TOPIC, 3, &[])]);
    let created: CreateTopicsResponse = call(&any, ApiKey::CreateTopics, 7, &again);
    system.record("create_topics_existing", &created);

    let (leader, epoch) = system.leader(TOPIC, 0);
    system.leader(TOPIC, 1);
    system.leader(TOPIC, 2);
    let (strict_leader, _) = system.leader(STRICT, 0);
    system.wait_until_led(TOPIC, 3);
    system.wait_until_led(STRICT, 1);
    system.wait_until_led(ISR, 1);
    let at_leader = system.broker(leader).to_string();
    let follower = system.follower(TOPIC, 0);
    let at_follower = system.broker(follower).to_string();

    // Metadata: the two topics and one that does not exist (never created by Metadata).
    let meta = metadata(&any, Some(vec![TOPIC, STRICT, UNKNOWN])).unwrap();
    system.record("metadata", &meta);

    // Produce: NOT_ENOUGH_REPLICAS, an unknown topic and partition, a non-leader, the leader.
    let strict: ProduceResponse = call(
        system.broker(strict_leader),
        ApiKey::Produce,
        9,
        &produce(STRICT, 0, -1, batch(&["s"], timestamp_base)),
    );
    system.record("produce_not_enough_replicas", &strict);
    let unknown: ProduceResponse = call(
        &any,
        ApiKey::Produce,
        9,
        &produce(UNKNOWN, 0, -1, batch(&["u"], timestamp_base)),
    );
    system.record("produce_unknown_topic", &unknown);
    let partition: ProduceResponse = call(
        &any,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 7, -1, batch(&["u"], timestamp_base)),
    );
    system.record("produce_unknown_partition", &partition);
    let inconsistent: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 0, -1, batch_inconsistent(timestamp_base)),
    );
    system.record("produce_inconsistent_offsets", &inconsistent);
    let not_leader: ProduceResponse = call(
        &at_follower,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 0, -1, batch(&["f"], timestamp_base)),
    );
    system.record("produce_not_leader", &not_leader);
    // acks=1 first: the acks=all answer then also says the high watermark passed both.
    let ok: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 0, 1, batch(&["a", "b"], timestamp_base)),
    );
    system.record("produce_acks_1", &ok);
    let ok: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 0, -1, batch(&["c", "d", "e"], timestamp_base + 2)),
    );
    system.record("produce_acks_all", &ok);

    // Fetch: from the start, out of range, epochs ahead of and at the leader's, a follower.
    let from_start: FetchResponse = call(&at_leader, ApiKey::Fetch, 12, &fetch(TOPIC, 0, 0, epoch));
    system.record("fetch_from_start", &from_start);
    system.note("fetch_from_start.decoded", fetched(&from_start).join(", "));
    let out_of_range: FetchResponse =
        call(&at_leader, ApiKey::Fetch, 12, &fetch(TOPIC, 0, 100, epoch));
    system.record("fetch_out_of_range", &out_of_range);
    let ahead: FetchResponse = call(
        &at_leader,
        ApiKey::Fetch,
        12,
        &fetch(TOPIC, 0, 0, epoch + 1),
    );
    system.record("fetch_epoch_ahead", &ahead);
    let from_follower: FetchResponse =
        call(&at_follower, ApiKey::Fetch, 12, &fetch(TOPIC, 0, 0, epoch));
    // A follower's high watermark trails the leader's by a fetch: only the error compares.
    system.record_errors("fetch_at_follower", &from_follower);
    let unknown: FetchResponse = call(&any, ApiKey::Fetch, 12, &fetch(UNKNOWN, 0, 0, -1));
    system.record("fetch_unknown_topic", &unknown);

    // ListOffsets: earliest, latest, max timestamp, by timestamp (one record's, before
    // every record, after every record), an epoch ahead.
    for (probe, timestamp, at_epoch) in [
        ("list_offsets_earliest", -2, epoch),
        ("list_offsets_latest", -1, epoch),
        ("list_offsets_max_timestamp", -3, epoch),
        ("list_offsets_at_third_record", timestamp_base + 2, epoch),
        ("list_offsets_before_all", timestamp_base - 1_000, epoch),
        ("list_offsets_after_all", timestamp_base + 1_000, epoch),
        ("list_offsets_epoch_ahead", -1, epoch + 1),
    ] {
        let answer: ListOffsetsResponse = call(
            &at_leader,
            ApiKey::ListOffsets,
            7,
            &list_offsets(TOPIC, 0, timestamp, at_epoch),
        );
        system.record(probe, &answer);
    }
    let unknown: ListOffsetsResponse = call(
        &any,
        ApiKey::ListOffsets,
        7,
        &list_offsets(UNKNOWN, 0, -1, -1),
    );
    system.record("list_offsets_unknown_topic", &unknown);

    // OffsetForLeaderEpoch: the current epoch, an epoch not reached yet, a current epoch
    // ahead of the leader's, a follower, an unknown topic.
    for (probe, at, e, current) in [
        ("epoch_end_current", &at_leader, epoch, epoch),
        ("epoch_end_unchecked", &at_leader, epoch, -1),
        ("epoch_end_future_epoch", &at_leader, epoch + 5, -1),
        ("epoch_end_current_ahead", &at_leader, epoch, epoch + 1),
        ("epoch_end_at_follower", &at_follower, epoch, epoch),
        ("epoch_end_unknown_topic", &any, 0, -1),
    ] {
        let topic = if probe.ends_with("unknown_topic") {
            UNKNOWN
        } else {
            TOPIC
        };
        let answer: OffsetForLeaderEpochResponse = call(
            at,
            ApiKey::OffsetForLeaderEpoch,
            4,
            &epoch_end(topic, 0, e, current),
        );
        system.record(probe, &answer);
    }

    probe_idempotence(system, &any, timestamp_base);
    probe_groups(system, &any);
    probe_transactions(system, &any);
    probe_markers(system, &any, timestamp_base);
}

/// A transactional id's coordinator and its refusals: FindCoordinator for transactions,
/// InitProducerId with a timeout of 0 and then twice (the epoch bumped), EndTxn without a
/// transaction, AddPartitionsToTxn of another producer id, of the fenced epoch and of an
/// unknown topic, then an abort, its retry and a commit after it. Error codes and epochs are
/// compared (the producer ids come from each cluster's own blocks).
/// The transaction coordinator of `transactional_id` (FindCoordinator key type 1, asked
/// until one answers), its answer recorded under `probe`.
fn txn_coordinator(system: &mut System, any: &str, transactional_id: &str, probe: &str) -> String {
    let find = FindCoordinatorRequest::default()
        .with_key(text(transactional_id))
        .with_key_type(1);
    let started = Instant::now();
    loop {
        let answer: FindCoordinatorResponse = call(any, ApiKey::FindCoordinator, 3, &find);
        if answer.error_code == 0 {
            system.record_errors(probe, &answer);
            return system.broker(answer.node_id.0).to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{}: no transaction coordinator: {answer:?}",
            system.label
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `f`'s error code once it is not one a coordinator answers while it loads: until the
/// coordinator has loaded the id's partition (and has producer ids), Kafka answers
/// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE.
fn retried(f: &dyn Fn() -> i16) -> i16 {
    let started = Instant::now();
    loop {
        let code = f();
        if ![14, 15, 16, 51].contains(&code) || started.elapsed() > Duration::from_secs(60) {
            return code;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn probe_transactions(system: &mut System, any: &str) {
    const TXN_ID: &str = "diff-txn";
    let coordinator = txn_coordinator(system, any, TXN_ID, "txn_find_coordinator");
    let init = |timeout_ms: i32| -> InitProducerIdResponse {
        call(
            &coordinator,
            ApiKey::InitProducerId,
            3,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text(TXN_ID))))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    };
    system.record_errors("txn_init_zero_timeout", &init(0));
    let first = std::cell::RefCell::new(None);
    let code = retried(&|| {
        let answer = init(60_000);
        let code = answer.error_code;
        *first.borrow_mut() = Some(answer);
        code
    });
    let first = first.into_inner().expect("an answer");
    system.note("txn_init.error_code", code);
    system.note("txn_init.producer_epoch", first.producer_epoch);
    let again = init(60_000);
    system.note("txn_init_again.error_code", again.error_code);
    system.note("txn_init_again.producer_epoch", again.producer_epoch);
    system.note(
        "txn_init_again.same_producer_id",
        again.producer_id == first.producer_id,
    );
    // Both systems get here with the id's producer at epoch 1 (checked, not only compared).
    assert_eq!(
        (
            code,
            first.producer_epoch,
            again.error_code,
            again.producer_epoch
        ),
        (0, 0, 0, 1),
        "{}: {first:?} {again:?}",
        system.label
    );
    let (producer_id, epoch) = (again.producer_id, again.producer_epoch);
    let end = |commit: bool| -> EndTxnResponse {
        call(
            &coordinator,
            ApiKey::EndTxn,
            3,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(text(TXN_ID)))
                .with_producer_id(producer_id)
                .with_producer_epoch(epoch)
                .with_committed(commit),
        )
    };
    system.record_errors("txn_end_without_transaction", &end(true));
    let add = |producer: i64, producer_epoch: i16, topics: &[(&str, i32)]| {
        let topics = topics
            .iter()
            .map(|(t, p)| {
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(name(t))
                    .with_partitions(vec![*p])
            })
            .collect();
        let answer: AddPartitionsToTxnResponse = call(
            &coordinator,
            ApiKey::AddPartitionsToTxn,
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(text(TXN_ID)))
                .with_v3_and_below_producer_id(ProducerId(producer))
                .with_v3_and_below_producer_epoch(producer_epoch)
                .with_v3_and_below_topics(topics),
        );
        answer
    };
    let other = producer_id.0 + 1_000_000;
    system.record_errors("txn_add_other_producer", &add(other, epoch, &[(TOPIC, 0)]));
    system.record_errors(
        "txn_add_fenced_epoch",
        &add(producer_id.0, epoch - 1, &[(TOPIC, 0)]),
    );
    system.record_errors(
        "txn_add_unknown_topic",
        &add(producer_id.0, epoch, &[(TOPIC, 0), ("diff-nope", 0)]),
    );
    system.record_errors("txn_add", &add(producer_id.0, epoch, &[(TOPIC, 0)]));
    system.record_errors("txn_abort", &end(false));
    system.note(
        "txn_abort_retried.error_code",
        retried(&|| end(false).error_code),
    );
    system.record_errors("txn_commit_after_abort", &end(true));
    // A late transactional batch of the aborted transaction (KIP-890 part 1: the leader asks
    // the coordinator, which holds no partition for it now): refused, nothing written.
    let (leader, _) = system.leader(TOPIC, 0);
    let at_leader = system.broker(leader).to_string();
    let late = Record {
        transactional: true,
        producer_id: producer_id.0,
        producer_epoch: epoch,
        sequence: 0,
        ..record_of("late", 0, 0)
    };
    let produced: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 0, -1, encode(&[late]))
            .with_transactional_id(Some(TransactionalId(text(TXN_ID)))),
    );
    system.record_errors("txn_produce_after_abort", &produced);
    assert_eq!(
        produced.responses[0].partition_responses[0].error_code, 48,
        "{}: {produced:?}",
        system.label
    );
}

/// WriteTxnMarkers, as a transaction coordinator sends it to partition leaders, on a topic
/// of its own (`MARKERS`, one partition): a transaction opened by the client's calls
/// (InitProducerId, AddPartitionsToTxn, one transactional batch), then markers sent by hand
/// to a broker that does not host an unknown topic, to a follower, the commit to the
/// leader, an abort of an older coordinator epoch, an abort of the next producer epoch and
/// then one of the producer epoch before it; then what a read_committed fetch sees. The coordinator itself is never asked to end the transaction (its own markers
/// would race the probe's), and the transaction's timeout outlasts the test.
fn probe_markers(system: &mut System, any: &str, timestamp_base: i64) {
    const TXN_ID: &str = "diff-markers";
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(MARKERS))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let created: CreateTopicsResponse = call(any, ApiKey::CreateTopics, 7, &create);
    assert_eq!(
        created.topics[0].error_code, 0,
        "{}: {created:?}",
        system.label
    );
    let (leader, epoch) = system.leader(MARKERS, 0);
    system.wait_until_led(MARKERS, 1);
    let at_leader = system.broker(leader).to_string();
    let at_follower = system.broker(system.follower(MARKERS, 0)).to_string();

    let coordinator = txn_coordinator(system, any, TXN_ID, "markers_find_coordinator");
    let init = || -> InitProducerIdResponse {
        call(
            &coordinator,
            ApiKey::InitProducerId,
            3,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text(TXN_ID))))
                .with_transaction_timeout_ms(600_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    };
    let granted = std::cell::RefCell::new(None);
    let code = retried(&|| {
        let answer = init();
        let code = answer.error_code;
        *granted.borrow_mut() = Some(answer);
        code
    });
    let granted = granted.into_inner().expect("an answer");
    assert_eq!(code, 0, "{}: {granted:?}", system.label);
    let (producer_id, producer_epoch) = (granted.producer_id, granted.producer_epoch);
    // First a transactional batch for the partition before it is added: the leader's
    // verification with the coordinator refuses it (KIP-890 part 1), nothing written.
    let not_added = Record {
        transactional: true,
        producer_id: producer_id.0,
        producer_epoch,
        sequence: 0,
        ..record_of("early", 0, timestamp_base)
    };
    let refused: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(MARKERS, 0, -1, encode(&[not_added]))
            .with_transactional_id(Some(TransactionalId(text(TXN_ID)))),
    );
    system.record_errors("markers_produce_not_added", &refused);
    // Both refuse it with INVALID_TXN_STATE (checked, not only compared).
    assert_eq!(
        refused.responses[0].partition_responses[0].error_code, 48,
        "{}: {refused:?}",
        system.label
    );
    let added: AddPartitionsToTxnResponse = call(
        &coordinator,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(TXN_ID)))
            .with_v3_and_below_producer_id(producer_id)
            .with_v3_and_below_producer_epoch(producer_epoch)
            .with_v3_and_below_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(name(MARKERS))
                    .with_partitions(vec![0]),
            ]),
    );
    system.record_errors("markers_add_partitions", &added);
    let records: Vec<Record> = ["m0", "m1"]
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            producer_id: producer_id.0,
            producer_epoch,
            sequence: i as i32,
            ..record_of(v, i as i64, timestamp_base + i as i64)
        })
        .collect();
    let produced: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(MARKERS, 0, -1, encode(&records))
            .with_transactional_id(Some(TransactionalId(text(TXN_ID)))),
    );
    system.record_errors("markers_transactional_produce", &produced);
    // Both take the batch (checked, not only compared): the markers below end it.
    let partition = &produced.responses[0].partition_responses[0];
    assert_eq!(
        (partition.error_code, partition.base_offset),
        (0, 0),
        "{}: {produced:?}",
        system.label
    );

    let marker_of = |producer_epoch: i16, commit: bool, coordinator_epoch: i32, topic: &str| {
        use kafka_protocol::messages::write_txn_markers_request::{
            WritableTxnMarker, WritableTxnMarkerTopic,
        };
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(producer_id)
            .with_producer_epoch(producer_epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0])])])
    };
    let marker = |commit: bool, coordinator_epoch: i32, topic: &str| {
        marker_of(producer_epoch, commit, coordinator_epoch, topic)
    };
    for (probe, at, request) in [
        (
            "markers_unknown_topic",
            &at_leader,
            marker(true, 100, UNKNOWN),
        ),
        (
            "markers_at_follower",
            &at_follower,
            marker(true, 100, MARKERS),
        ),
        ("markers_commit", &at_leader, marker(true, 100, MARKERS)),
        (
            "markers_older_coordinator_epoch",
            &at_leader,
            marker(false, 50, MARKERS),
        ),
        // A marker of a newer producer epoch (a coordinator that bumped it, with no
        // transaction open here), then one of the epoch before it: the partition has seen
        // the newer epoch, so the older one is a zombie's.
        (
            "markers_newer_producer_epoch",
            &at_leader,
            marker_of(producer_epoch + 1, false, 100, MARKERS),
        ),
        (
            "markers_older_producer_epoch",
            &at_leader,
            marker(false, 100, MARKERS),
        ),
    ] {
        let answer: WriteTxnMarkersResponse = call(at, ApiKey::WriteTxnMarkers, 1, &request);
        system.record(probe, &answer);
    }
    let read: FetchResponse = call(
        &at_leader,
        ApiKey::Fetch,
        12,
        &fetch(MARKERS, 0, 0, epoch).with_isolation_level(1),
    );
    system.record("markers_read_committed", &read);
    let mut seen = vec![];
    if let Some(mut records) = read.responses[0].partitions[0].records.clone() {
        while !records.is_empty() {
            for r in RecordBatchDecoder::decode(&mut records).unwrap().records {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                let kind = if r.control { "control" } else { "data" };
                seen.push(format!(
                    "{}:{kind}:{}",
                    r.offset,
                    if r.control { "" } else { &value }
                ));
            }
        }
    }
    system.note("markers_read_committed.decoded", seen.join(", "));
}

/// InitProducerId and an idempotent producer's batches on `TOPIC`/1: the batch, its retry,
/// a gap, the next batch, a new epoch, the fenced old epoch, a batch with a producer id but
/// no sequence, and what a fetch returns of them.
fn probe_idempotence(system: &mut System, any: &str, timestamp_base: i64) {
    let label = system.label;
    let init = |request: &InitProducerIdRequest| -> InitProducerIdResponse {
        // A broker answers COORDINATOR_LOAD_IN_PROGRESS until it has a block of ids.
        let started = Instant::now();
        loop {
            let answer: InitProducerIdResponse = call(any, ApiKey::InitProducerId, 5, request);
            if answer.error_code != 14 {
                return answer;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{label}: no producer ids"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let plain = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let granted = init(&plain);
    let producer_id = granted.producer_id.0;
    system.record("init_producer_id", &granted);
    let half = init(&plain.clone().with_producer_id(ProducerId(producer_id)));
    system.record("init_producer_id_without_epoch", &half);
    let empty = init(
        &plain
            .clone()
            .with_transactional_id(Some(TransactionalId(text("")))),
    );
    system.record("init_producer_id_empty_transactional_id", &empty);

    let (leader, epoch) = system.leader(TOPIC, 1);
    let at_leader = system.broker(leader).to_string();
    let batch_of = |producer_epoch: i16, sequence: i32, values: &[&str]| {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                producer_id,
                producer_epoch,
                sequence: sequence + i as i32,
                ..record_of(v, i as i64, timestamp_base + i as i64)
            })
            .collect();
        encode(&records)
    };
    for (probe, records) in [
        ("idempotent.produce", batch_of(0, 0, &["i0", "i1"])),
        ("idempotent.produce_retry", batch_of(0, 0, &["i0", "i1"])),
        ("idempotent.produce_gap", batch_of(0, 5, &["gap"])),
        ("idempotent.produce_next", batch_of(0, 2, &["i2"])),
        (
            "idempotent.produce_new_epoch_not_at_0",
            batch_of(1, 3, &["x"]),
        ),
        ("idempotent.produce_new_epoch", batch_of(1, 0, &["j0"])),
        ("idempotent.produce_fenced_epoch", batch_of(0, 3, &["z"])),
        // A producer id with base sequence -1.
        (
            "idempotent.produce_without_sequence",
            batch_of(0, -1, &["n"]),
        ),
    ] {
        let answer: ProduceResponse = call(
            &at_leader,
            ApiKey::Produce,
            9,
            &produce(TOPIC, 1, -1, records),
        );
        system.record(probe, &answer);
    }
    let read: FetchResponse = call(&at_leader, ApiKey::Fetch, 12, &fetch(TOPIC, 1, 0, epoch));
    system.record("idempotent.fetch", &read);
    let Some(mut records) = read.responses[0].partitions[0].records.clone() else {
        return;
    };
    let mut stamps = vec![];
    while !records.is_empty() {
        for r in RecordBatchDecoder::decode(&mut records).unwrap().records {
            let who = if r.producer_id == producer_id {
                "p"
            } else {
                "?"
            };
            let value =
                String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            stamps.push(format!(
                "{}:{value} {who} epoch {} seq {}",
                r.offset, r.producer_epoch, r.sequence
            ));
        }
    }
    system.note("idempotent.fetch.decoded", stamps.join(", "));

    // KIP-360: once DeleteRecords moved the log start past every batch of the producer, its
    // state is gone and a batch at any sequence is taken.
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    let delete = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(1)
                .with_offset(-1)])]);
    let deleted: DeleteRecordsResponse = call(&at_leader, ApiKey::DeleteRecords, 2, &delete);
    system.record("idempotent.delete_records", &deleted);
    let answer: ProduceResponse = call(
        &at_leader,
        ApiKey::Produce,
        9,
        &produce(TOPIC, 1, -1, batch_of(1, 7, &["k7"])),
    );
    system.record("idempotent.produce_after_delete_records", &answer);
}

/// The group APIs: coordinator lookup, joins that are refused, one member's generation,
/// and the calls of a wrong generation or an unknown member.
fn probe_groups(system: &mut System, any: &str) {
    let coordinator = coordinator_of(system, any, GROUP, true);
    let at = coordinator.as_str();
    let at_unknown = coordinator_of(system, any, "g-diff-unknown", false);
    let at_none = coordinator_of(system, any, "g-diff-none", false);
    let at_never = coordinator_of(system, any, "g-diff-never", false);
    let joined = |system: &mut System, probe: &str, at: &str, request: &JoinGroupRequest| {
        let answer: JoinGroupResponse = call(at, ApiKey::JoinGroup, 7, request);
        system.record(probe, &answer);
        answer
    };

    let unknown = join("nobody", &["range"], "g-diff-unknown");
    joined(system, "join_unknown_member", &at_unknown, &unknown);
    joined(
        system,
        "join_no_protocols",
        &at_none,
        &join("", &[], "g-diff-none"),
    );
    let first = joined(system, "join_new_member", at, &join("", &["range"], GROUP));
    let member = first.member_id.to_string();
    let joined_once = joined(
        system,
        "join_with_member_id",
        at,
        &join(&member, &["range"], GROUP),
    );
    let generation = joined_once.generation_id;
    let member = joined_once.member_id.to_string();
    joined(
        system,
        "join_inconsistent_protocol",
        at,
        &join("", &["roundrobin-only"], GROUP),
    );

    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    // The refused syncs carry an empty assignment (opaque bytes to Kafka's coordinator, so
    // the generation and member are what it judges), the right one a real one.
    let sync = |generation: i32, member: &str, assignment: Bytes| {
        SyncGroupRequest::default()
            .with_group_id(group(GROUP))
            .with_generation_id(generation)
            .with_member_id(text(member))
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text("range")))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(member))
                .with_assignment(assignment)])
    };
    for (probe, request) in [
        (
            "sync_wrong_generation",
            sync(generation + 1, &member, Bytes::new()),
        ),
        (
            "sync_unknown_member",
            sync(generation, "nobody", Bytes::new()),
        ),
        (
            "sync",
            sync(generation, &member, assignment_of_first_partition()),
        ),
    ] {
        let answer: SyncGroupResponse = call(at, ApiKey::SyncGroup, 5, &request);
        system.record(probe, &answer);
    }
    let heartbeat = |generation: i32, member: &str| {
        HeartbeatRequest::default()
            .with_group_id(group(GROUP))
            .with_generation_id(generation)
            .with_member_id(text(member))
    };
    for (probe, request) in [
        (
            "heartbeat_wrong_generation",
            heartbeat(generation + 1, &member),
        ),
        ("heartbeat_unknown_member", heartbeat(generation, "nobody")),
        ("heartbeat", heartbeat(generation, &member)),
    ] {
        let answer: HeartbeatResponse = call(at, ApiKey::Heartbeat, 4, &request);
        system.record(probe, &answer);
    }
    for (probe, request) in [
        (
            "commit_wrong_generation",
            commit(&member, generation + 1, 4),
        ),
        ("commit_unknown_member", commit("nobody", generation, 4)),
        ("commit", commit(&member, generation, 5)),
    ] {
        let answer: OffsetCommitResponse = call(at, ApiKey::OffsetCommit, 8, &request);
        system.record(probe, &answer);
    }
    for (probe, to, request) in [
        (
            "offset_fetch_unknown_group_all",
            &at_never,
            offset_fetch("g-diff-never", false),
        ),
        (
            "offset_fetch_unknown_group",
            &at_never,
            offset_fetch("g-diff-never", true),
        ),
        ("offset_fetch", &coordinator, offset_fetch(GROUP, true)),
    ] {
        let answer: OffsetFetchResponse = call(to, ApiKey::OffsetFetch, 7, &request);
        system.record(probe, &answer);
    }
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    let leave = |member: &str| {
        LeaveGroupRequest::default()
            .with_group_id(group(GROUP))
            .with_members(vec![MemberIdentity::default().with_member_id(text(member))])
    };
    for (probe, request) in [
        ("leave_unknown_member", leave("nobody")),
        ("leave", leave(&member)),
    ] {
        let answer: LeaveGroupResponse = call(at, ApiKey::LeaveGroup, 4, &request);
        system.record(probe, &answer);
    }
}

/// The coordinator of `group_id`. The offsets topic is created at the first lookup, so this
/// asks until the coordinator is known; the attempts are not compared, the answer is
/// recorded when `record`.
fn coordinator_of(system: &mut System, any: &str, group_id: &str, record: bool) -> String {
    let find = FindCoordinatorRequest::default()
        .with_key(text(group_id))
        .with_key_type(0);
    let started = Instant::now();
    loop {
        let answer: FindCoordinatorResponse = call(any, ApiKey::FindCoordinator, 3, &find);
        if answer.error_code == 0 {
            if record {
                system.record("find_coordinator", &answer);
            }
            let at = system.broker(answer.node_id.0).to_string();
            wait_for_coordinator(system, &at, group_id);
            return at;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{}: no coordinator: {answer:?}",
            system.label
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until the coordinator at `at` has loaded the offsets partition of `group_id`
/// (Kafka answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until then).
fn wait_for_coordinator(system: &System, at: &str, group_id: &str) {
    let started = Instant::now();
    loop {
        let answer: OffsetFetchResponse =
            call(at, ApiKey::OffsetFetch, 7, &offset_fetch(group_id, false));
        if ![14, 15, 16].contains(&answer.error_code) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{}: the coordinator of {group_id} never loaded: {answer:?}",
            system.label
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A ConsumerProtocolAssignment v0 of `TOPIC`/0, without user data.
fn assignment_of_first_partition() -> Bytes {
    use bytes::BufMut;
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(1);
    out.put_i16(TOPIC.len() as i16);
    out.put_slice(TOPIC.as_bytes());
    out.put_i32(1);
    out.put_i32(0);
    out.put_i32(-1);
    out.freeze()
}

/// After a broker was killed: a produce to a partition whose ISR fell below its
/// `min.insync.replicas` (3) is refused before the append on both systems.
fn probe_isr_below_min(system: &mut System, timestamp_base: i64) {
    let started = Instant::now();
    let (leader, isr) = loop {
        let (leader, _) = system.leader(ISR, 0);
        let isr = metadata(system.broker(leader), Some(vec![ISR]))
            .map(|m| partition_of(&m, 0).isr_nodes.len())
            .unwrap_or(3);
        if isr < 3 {
            break (leader, isr);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}: the ISR of {ISR}/0 never shrank",
            system.label
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    system.note("isr_below_min.isr_size", isr);
    // Kafka's leader can answer Metadata from its cache (the shrunk ISR replayed from the
    // metadata log) a moment before its partition state takes the AlterPartition answer that
    // the min.insync.replicas check reads; a produce in that moment is appended and times out
    // (CI saw REQUEST_TIMED_OUT once). Give the leader that moment.
    std::thread::sleep(Duration::from_secs(2));
    // Kafka's brokers answer metadata from their caches: ask again while the broker asked
    // says it does not lead.
    let mut leader = leader;
    let refused: ProduceResponse = loop {
        let answer: ProduceResponse = call(
            system.broker(leader),
            ApiKey::Produce,
            9,
            &produce(ISR, 0, -1, batch(&["n"], timestamp_base)),
        );
        if answer.responses[0].partition_responses[0].error_code != 6 {
            break answer;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}: no leader of {ISR}/0 takes the produce",
            system.label
        );
        std::thread::sleep(Duration::from_millis(300));
        leader = system.leader(ISR, 0).0;
    };
    system.record("isr_below_min.produce_acks_all", &refused);
    let taken: ProduceResponse = call(
        system.broker(leader),
        ApiKey::Produce,
        9,
        &produce(ISR, 0, 1, batch(&["n"], timestamp_base)),
    );
    system.record("isr_below_min.produce_acks_1", &taken);
}

/// After the leader of `TOPIC`/2 changed (its epoch grew): requests carrying the old epoch.
fn probe_stale_epoch(system: &mut System, old_epoch: i32) {
    let (leader, epoch) = system.leader(TOPIC, 2);
    system.note("stale.epoch_grew", epoch > old_epoch);
    let at = system.broker(leader).to_string();
    let stale: FetchResponse = call(&at, ApiKey::Fetch, 12, &fetch(TOPIC, 2, 0, old_epoch));
    system.record("stale.fetch", &stale);
    let stale: ListOffsetsResponse = call(
        &at,
        ApiKey::ListOffsets,
        7,
        &list_offsets(TOPIC, 2, -1, old_epoch),
    );
    system.record("stale.list_offsets", &stale);
    let stale: OffsetForLeaderEpochResponse = call(
        &at,
        ApiKey::OffsetForLeaderEpoch,
        4,
        &epoch_end(TOPIC, 2, old_epoch, old_epoch),
    );
    system.record("stale.epoch_end_current_stale", &stale);
    let end: OffsetForLeaderEpochResponse = call(
        &at,
        ApiKey::OffsetForLeaderEpoch,
        4,
        &epoch_end(TOPIC, 2, old_epoch, epoch),
    );
    system.record("stale.epoch_end_of_old_epoch", &end);
    let fresh: FetchResponse = call(&at, ApiKey::Fetch, 12, &fetch(TOPIC, 2, 0, epoch));
    system.record("stale.fetch_current", &fresh);
    system.note("stale.fetch_current.decoded", fetched(&fresh).len());
}

/// The APIs the companion broker serves (its ApiVersions list).
const SERVED: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
];

/// Moves the leadership of `TOPIC`/2 on Kafka without stopping a broker: reorder its
/// replicas so that a follower is preferred, then a preferred election.
fn move_kafka_leader(system: &System) {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let m = metadata(&system.brokers[0], Some(vec![TOPIC])).unwrap();
    let p = &m.topics[0].partitions[2];
    let mut replicas: Vec<BrokerId> = p.replica_nodes.clone();
    let follower = replicas.iter().position(|b| *b != p.leader_id).unwrap();
    replicas.swap(0, follower);
    let reassign = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(2)
                .with_replicas(Some(replicas))])]);
    let answer: AlterPartitionReassignmentsResponse = call(
        &system.brokers[0],
        ApiKey::AlterPartitionReassignments,
        0,
        &reassign,
    );
    assert_eq!(answer.error_code, 0, "{answer:?}");
    let elect = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![2])]));
    let started = Instant::now();
    loop {
        let answer: ElectLeadersResponse =
            call(&system.brokers[0], ApiKey::ElectLeaders, 2, &elect);
        let code = answer.replica_election_results[0].partition_result[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the preferred election of {TOPIC}/2 failed: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn the_kafka_listener_answers_as_kafka_does() {
    let Some(release) = kafka_release("kafka_differential") else {
        return;
    };
    let kafka_cluster = KafkaCluster::start(
        release,
        [242, 1],
        3,
        &[
            ("broker.session.timeout.ms", "4000"),
            ("replica.lag.time.max.ms", "2500"),
        ],
    );
    let mut companion_cluster = CompanionCluster::start(3, &["broker.session.timeout.ms=4000"]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let timestamp_base = now_ms - 60_000;

    let mut kafka = System {
        label: "kafka",
        brokers: kafka_cluster.brokers.clone(),
        fields: BTreeMap::new(),
    };
    let mut companion = System {
        label: "companion",
        brokers: companion_cluster.brokers.clone(),
        fields: BTreeMap::new(),
    };
    probe(&mut kafka, timestamp_base);
    probe(&mut companion, timestamp_base);

    // A leader change of TOPIC/2, then requests with the epoch before it: on Kafka by a
    // preferred election, on the companion (which serves no reassignment) by killing the
    // leader; nothing else is probed afterwards.
    for system in [&mut kafka, &mut companion] {
        let (leader, _) = system.leader(TOPIC, 2);
        let one: ProduceResponse = call(
            system.broker(leader),
            ApiKey::Produce,
            9,
            &produce(TOPIC, 2, -1, batch(&["before"], timestamp_base)),
        );
        assert_eq!(one.responses[0].partition_responses[0].error_code, 0);
    }
    let (_, kafka_epoch) = kafka.leader(TOPIC, 2);
    move_kafka_leader(&kafka);
    let (companion_leader, companion_epoch) = companion.leader(TOPIC, 2);
    companion_cluster.kill_broker(companion_leader as usize);
    let started = Instant::now();
    while companion.leader(TOPIC, 2) == (companion_leader, companion_epoch) {
        assert!(started.elapsed() < Duration::from_secs(60), "no new leader");
        std::thread::sleep(Duration::from_millis(200));
    }
    probe_stale_epoch(&mut kafka, kafka_epoch);
    // Kafka: a broker that does not lead TOPIC/2 now goes down, as the companion's did.
    let (kafka_leader, _) = kafka.leader(TOPIC, 2);
    let victim = if kafka_leader == 1 { 2 } else { 1 };
    let mut kafka_cluster = kafka_cluster;
    kafka_cluster.kill(&format!("n{victim}"));
    probe_isr_below_min(&mut kafka, timestamp_base);
    probe_stale_epoch(&mut companion, companion_epoch);
    probe_isr_below_min(&mut companion, timestamp_base);

    let paths: BTreeSet<&String> = kafka.fields.keys().chain(companion.fields.keys()).collect();
    let absent = "<absent>".to_string();
    let mut observed: Vec<(String, String, String)> = vec![];
    for path in paths {
        let c = companion.fields.get(path).unwrap_or(&absent);
        let k = kafka.fields.get(path).unwrap_or(&absent);
        if c != k {
            observed.push((path.clone(), c.clone(), k.clone()));
        }
    }
    let agreed =
        kafka.fields.len().min(companion.fields.len()) - observed.len().min(kafka.fields.len());
    eprintln!("{agreed} fields agree; {} differ", observed.len());
    let known: Vec<(String, String, String)> = KNOWN_DIFFERENCES
        .iter()
        .map(|(p, c, k, _)| (p.to_string(), c.to_string(), k.to_string()))
        .collect();
    let new: Vec<String> = observed
        .iter()
        .filter(|d| !known.contains(d))
        .map(|(p, c, k)| format!("    (\"{p}\", \"{c}\", \"{k}\", \"\"),"))
        .collect();
    let gone: Vec<&(String, String, String)> =
        known.iter().filter(|d| !observed.contains(d)).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "differences not in KNOWN_DIFFERENCES:\n{}\nknown differences no longer seen: {gone:?}\n\
         kafka's logs: {}",
        new.join("\n"),
        kafka_cluster.node_dir("n1").display()
    );
}
