//! # Tidewater's companion broker
//!
//! A Kafka-style partitioned log behind a small JSON/HTTP API (`docs/api.md`), the system under
//! test of the Tidewater harness. Settings use Kafka's names (`docs/configuration.md`).
//!
//! # Layout
//!
//! - [`bugs`]: deliberate-bug switches (`tidewater.bug.*`, cargo feature `deliberate-bugs`).
//! - [`config`]: the typed [`config::Config`] from a TOML file and `--set` pairs; topic overrides.
//! - [`server`]: shared state ([`server::Broker`]), the entry point [`server::run`], retention.
//! - [`http`]: the HTTP/1.1 front door of broker and controller: connection limit, header and
//!   idle timeouts, JSON answers to malformed requests.
//! - [`api`]: HTTP routes, request/response types, handlers.
//! - [`kafka`]: Kafka's binary protocol (`kafka.listeners`): frames, request bounds, dispatch
//!   and the handlers of the APIs served, over the same internals as the HTTP API.
//! - [`error`]: Kafka's error names, HTTP statuses and the JSON error body.
//! - [`group`]: consumer groups: the coordinator, rebalances, committed offsets.
//! - [`topics`]: the topic catalog, persisted atomically in the first log dir.
//! - [`partition`]: one hosted partition: log + high watermark + waiters (long polls,
//!   delayed produces).
//! - [`metrics`]: counters and the Prometheus text of `/metrics`.
//! - [`controller`]: the controller role: cluster metadata, fencing, elections, AlterPartition.
//! - [`replication`]: leaders, followers, ISR, HW and leader epochs of a broker in a cluster.
//! - [`storage`]: the segmented, CRC-checked log of one partition, its recovery, and the
//!   open-file budget checked at start-up.

pub mod api;
pub mod bugs;
pub mod config;
pub mod controller;
pub mod error;
pub mod group;
pub mod http;
pub mod kafka;
pub mod metrics;
pub mod partition;
pub mod replication;
pub mod server;
pub mod storage;
pub mod topics;

pub use config::Config;
pub use server::run;
