//! Tidewater's workloads: the history model, the broker client, generators and checkers.
//!
//! # Layout
//! - `history`: [`history::Op`], one line of `history.jsonl`, and its micro-ops.
//! - `results`: [`results::CheckResults`], the content of `results.json`.
//! - `client`: [`client::BrokerClient`], the broker's HTTP client with fail/info error mapping.
//! - `kafka`: [`kafka::KafkaQueueClient`], the queue workload over Kafka's protocol (rskafka).
//! - `kafka_admin`: [`kafka_admin::KafkaAdmin`], metadata and topic creation over Kafka's protocol.
//! - `kafka_group`: [`kafka_group::KafkaGroupClient`], the group workload's coordinator calls over Kafka's protocol.
//! - `queue`: the queue workload: generator, consumer state and op execution.
//! - `group`: the consumer-group workload: members, coordinator client, consumer faults.
//! - `checker`: [`checker::check`], from a history and the run's settings to `results.json`.
//! - `edn`: import and export of Jepsen's Kafka-workload histories (EDN).

pub mod checker;
pub mod client;
pub mod edn;
pub mod group;
pub mod history;
pub mod kafka;
pub mod kafka_admin;
pub mod kafka_group;
pub mod queue;
pub mod results;
