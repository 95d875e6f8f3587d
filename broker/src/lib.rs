//! # Tidewater's companion broker
//!
//! A Kafka-style partitioned log behind a small JSON/HTTP API (`docs/api.md`), the system under
//! test of the Tidewater harness. Settings use Kafka's names (`docs/configuration.md`).
//!
//! # Layout
//!
//! From the entry point down: [`server`] starts a [`broker::Broker`] and its two front doors,
//! [`http`] and [`kafka`]; each front door decodes a request, calls one operation of [`ops`]
//! (or of a coordinator, [`group`] or [`txn`]), and encodes the answer; the operations work on [`topics`],
//! [`partition`] and [`replication`], which stand on [`storage`]. Nothing below a front door
//! imports one.
//!
//! - [`server`]: the entry points [`server::run`] (broker) and [`server::run_controller`],
//!   the retention task, shutdown.
//! - [`broker`]: the shared state of a broker process ([`broker::Broker`]).
//! - [`clock`]: the one wall clock (`now_ms`).
//! - [`bugs`]: deliberate-bug switches (`tidewater.bug.*`, cargo feature `deliberate-bugs`).
//! - [`config`]: the typed [`config::Config`] from a TOML file and `--set` pairs; topic overrides.
//! - [`http`]: the HTTP/1.1 front door of broker and controller: connection limit, header and
//!   idle timeouts, JSON answers to malformed requests, HTTP statuses of the errors, and the
//!   broker's routes ([`http::routes`]: the client API, `/metrics`, the inter-broker routes).
//! - [`kafka`]: Kafka's binary protocol (`kafka.listeners`): frames, request bounds, dispatch
//!   and the handlers of the APIs served, over the same operations as the HTTP routes.
//! - [`ops`]: the broker's operations, transport-neutral: produce, fetch, offsets, topics,
//!   cluster metadata and status.
//! - [`error`]: Kafka's error names and the typed error every operation refuses with.
//! - [`group`]: consumer groups: the coordinator, rebalances, committed offsets.
//! - [`txn`]: the transaction coordinator: transactional ids, `__transaction_state`, markers.
//! - [`internal_topic`]: the internal topic a coordinator keeps its state in (creation,
//!   leadership and loading, acks=all appends), shared by [`group`] and [`txn`].
//! - [`topics`]: the topic catalog, persisted atomically in the first log dir.
//! - [`partition`]: one hosted partition: log + high watermark + waiters (long polls,
//!   delayed produces).
//! - [`metrics`]: counters and the Prometheus text of `/metrics`.
//! - [`controller`]: the controller role: cluster metadata, fencing, elections, AlterPartition.
//! - [`replication`]: leaders, followers, ISR, HW and leader epochs of a broker in a cluster.
//! - [`storage`]: the segmented, CRC-checked log of one partition, its recovery, and the
//!   open-file budget checked at start-up.

pub mod broker;
pub mod bugs;
pub mod clock;
pub mod config;
pub mod controller;
pub mod error;
pub mod group;
pub mod http;
pub mod internal_topic;
pub mod kafka;
pub mod metrics;
pub mod ops;
pub mod partition;
pub mod replication;
pub mod server;
pub mod storage;
pub mod topics;
pub mod txn;

pub use config::Config;
pub use server::run;
