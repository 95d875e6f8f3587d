//! Clients nobody here wrote against real Apache Kafka (issue 24, item 5), as
//! `broker/tests/kafka_clients.rs` runs them against the companion broker: kcat (librdkafka)
//! and kafka-python (the same script, `broker/tests/kafka_clients/python_client.py`) against a
//! KRaft controller and three brokers of the default Kafka version (the harness's
//! `server.properties` writer and JVM options, on 127.242.2.10-13). Metadata, produce with
//! acks=all, consume from the start, a consumer group that joins, rebalances and commits;
//! and where the companion broker answers NOT_ENOUGH_REPLICAS (`min.insync.replicas` 4 on
//! three replicas), what Kafka does instead: it takes the write; and consume-transform-produce
//! with the consumed offsets committed in transactions. Each expectation computed
//! from what the clients report.
//!
//! Needs Java and Kafka (`TIDEWATER_REQUIRE_KAFKA=1` fails without them), kcat and the
//! `kafka` Python module (`TIDEWATER_REQUIRE_KAFKA_CLIENTS=1` fails without them); skipped
//! with a message otherwise. Not root.

mod kafka_support;
#[path = "../../broker/tests/kafka_clients/outside.rs"]
mod outside;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::{call, kafka_release, KafkaCluster};
use outside::{
    assert_group_split_and_committed, assert_produced_read_and_committed,
    assert_transactional_offsets, clients_present, kcat, python,
};
use serde_json::{json, Value};

/// CreateTopics over Kafka's protocol (RF 3), as the harness creates its topics.
fn create_topic(bootstrap: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(3)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )]);
    let answer: CreateTopicsResponse = call(bootstrap, ApiKey::CreateTopics, 7, &request);
    assert_eq!(answer.topics[0].error_code, 0, "{answer:?}");
}

#[test]
fn kcat_and_kafka_python_against_real_kafka() {
    if !clients_present("kafka_clients_real") {
        return;
    }
    let Some(release) = kafka_release("kafka_clients_real") else {
        return;
    };
    let cluster = KafkaCluster::start(release, [242, 2], 3, &[]);
    let bootstrap = cluster.brokers[0].clone();

    // Metadata: every broker, at the address it advertises.
    let output = kcat(&bootstrap, &["-L", "-J", "-m", "10"], None);
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("kcat's JSON metadata");
    let listed: BTreeSet<String> = metadata["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = cluster.brokers.iter().cloned().collect();
    assert_eq!(listed, expected);

    // kcat: 90 values with acks=all over three partitions, read back from the start.
    create_topic(&bootstrap, "kc", 3, &[]);
    let values: Vec<String> = (0..90).map(|i| format!("kc-{i}")).collect();
    for partition in 0..3 {
        let part: Vec<&str> = values
            .iter()
            .skip(partition)
            .step_by(3)
            .map(String::as_str)
            .collect();
        let p = partition.to_string();
        let produced = kcat(
            &bootstrap,
            &["-P", "-t", "kc", "-p", &p, "-X", "acks=all"],
            Some(&(part.join("\n") + "\n")),
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
    // Kafka (3.9 and 4.x) caps the requirement at the replica count (`Partition.
    // effectiveMinIsr`), so with all three in sync the write is taken where the companion
    // broker refuses it with NOT_ENOUGH_REPLICAS (docs/kafka-protocol.md).
    create_topic(&bootstrap, "kc-strict", 1, &[("min.insync.replicas", "4")]);
    let taken = kcat(
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
    assert!(taken.status.success(), "kcat's acks=all produce is taken");
    let read = kcat(
        &bootstrap,
        &[
            "-C",
            "-t",
            "kc-strict",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %s\\n",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&read.stdout), "0 x\n");

    // kafka-python: admin create, acks=all produce, group read from the start and commit.
    let answer = python(&bootstrap, "produce-consume", "py");
    assert_produced_read_and_committed(&answer, "py");

    // kafka-python: a second member joins and the partitions are split; commits read back.
    let answer = python(&bootstrap, "group", "py-group");
    assert_group_split_and_committed(&answer);

    // kafka-python: the same topic settings are taken as kcat saw (offset 0 of one of the
    // three partitions).
    let answer = python(&bootstrap, "not-enough", "py-strict");
    let acked = answer["acked"]
        .as_array()
        .expect("acknowledged, not refused");
    assert_eq!(acked[1], json!(0), "{answer}");
    assert!(acked[0].as_u64().is_some_and(|p| p < 3), "{answer}");

    // kafka-python: consume-transform-produce, the offsets committed in transactions; the
    // same expectations as the companion broker's (broker/tests/kafka_clients.rs).
    let answer = python(&bootstrap, "txn-offsets", "py-eos");
    assert_transactional_offsets(&answer);
}
