//! Tidewater's workloads: the history model, the broker client, generators and checkers.
//!
//! # Layout
//! - `history`: [`history::Op`], one line of `history.jsonl`, and its micro-ops.
//! - `nemesis`: the fault vocabulary of a history: [`nemesis::Fault`] (the `X` of `start-X`)
//!   and [`nemesis::NemesisOp`] (`start-partition` with its grudge, ...), written by the
//!   harness and read back by the checker and the reports.
//! - `results`: [`results::CheckResults`], the content of `results.json`.
//! - `replicas`: [`replicas::PartitionReplicas`], a line of `replicas.jsonl`: every replica's
//!   own log of a partition, read after the final reads.
//! - `client`: [`client::BrokerClient`], the broker's HTTP client with fail/info error mapping,
//!   and the "first node that answers" loop every client uses.
//! - `kafka`: [`kafka::KafkaQueueClient`], the queue workload over Kafka's protocol (rskafka).
//! - `kafka_admin`: [`kafka_admin::KafkaAdmin`], metadata and topic creation over Kafka's protocol.
//! - `kafka_group`: [`kafka_group::KafkaGroupClient`], the group workload's coordinator calls over Kafka's protocol.
//! - `queue`: the queue workload: generator, consumer state and op execution.
//! - `txn`: the transactional workload (Jepsen's `txn` ops): generator, the
//!   [`txn::TxnClient`] trait, op execution and the worker loop.
//! - `java`: the queue and transactional workloads over Apache Kafka's Java client, through
//!   a driver process ([`java::JavaDriver`]).
//! - `group`: the consumer-group workload, one file per part (see its `# Layout`): settings,
//!   assignors, the coordinator client trait and its HTTP implementation, the coordinator
//!   retry shared with `kafka_group`, members, intents, execution, the worker loop.
//! - `checker`: [`checker::check`], from a history and the run's settings to `results.json`.
//! - `edn`: import and export of Jepsen's Kafka-workload histories (EDN).
//!
//! Kafka's shared model (partitions, assignors, the ConsumerProtocol bytes, error names and
//! codes) is the crate `tidewater-kafka-model`, which the broker uses too.

pub mod checker;
pub mod client;
pub mod edn;
pub mod group;
pub mod history;
pub mod java;
pub mod kafka;
pub mod kafka_admin;
pub mod kafka_group;
pub mod nemesis;
pub mod queue;
pub mod replicas;
pub mod results;
pub mod txn;
