//! Tidewater, the chaos harness: runs a Kafka-style cluster, drives a workload, injects
//! faults, records a history, checks it and stores everything about the run.
//!
//! # Layout
//! - `broker_config`: the broker's configuration schema, asked (`tidewater-broker
//!   --check-config`) so a run's `--set` is refused before anything starts.
//! - `cli`: the `tidewater` command line (clap) and what each subcommand does.
//! - `runner`: the phases of a run (setup, main, heal, recovery, final reads, teardown, check).
//! - `recorder`: the history writer, appending `history.jsonl` as ops happen.
//! - `store`: run directories `store/<name>/<timestamp>/` and the `store/latest` link.
//! - `detect`: `tidewater detect`, the detection table of the broker's deliberate bugs.
//! - `matrix`: `tidewater matrix`, every combination of settings run and compared.
//! - `serve`: `tidewater serve`, the store browsed read-only over HTTP.
//! - `progress`: the live progress display (a bar on a terminal, log lines otherwise).
//! - `cluster`: the `Cluster` trait (start, stop, kill, pause, resume, wipe, logs) and its
//!   backends: `local` (network namespaces and a bridge on this machine), `ssh` (remote hosts)
//!   and `noop`; the signal guard that tears every live cluster down.
//! - `cluster_file`: cluster files (`tidewater run --cluster FILE`) for the `ssh` backend
//!   (remote hosts such as the Vagrant VMs of `vagrant/`).
//! - `net`: partitions as grudges (pure builders) and the iptables / `ip rule` rules applying them.
//! - `kafka`: Apache Kafka as the system under test: `tidewater kafka fetch` (a release
//!   from Maven Central into a per-version cache), its JVMs' command lines, and the
//!   `server.properties` and `--set` mapping shared by the local and ssh backends.
//! - `clean`: `tidewater clean`, removing what interrupted local runs left behind.
//! - `nemesis`: fault injection: targets, fault plans (`harness/plans/`), the seeded random
//!   schedule, and the executor that records each fault as a history op.

pub mod broker_config;
pub mod clean;
pub mod cli;
pub mod cluster;
pub mod cluster_file;
pub mod detect;
pub mod kafka;
pub mod matrix;
pub mod nemesis;
pub mod net;
pub mod progress;
pub mod recorder;
pub mod runner;
pub mod serve;
pub mod store;
