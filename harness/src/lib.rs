//! Tidewater, the chaos harness: runs a Kafka-style cluster, drives a workload, injects
//! faults, records a history, checks it and stores everything about the run.
//!
//! # Layout
//! - `broker_config`: the broker's configuration schema, asked (`tidewater-broker
//!   --check-config`) so a run's `--set` is refused before anything starts.
//! - `cli`: the `tidewater` command line (clap's `Cli` and `Command`), the dispatch to each
//!   subcommand, and the short ones (`check`, `report`, `kafka fetch`).
//! - `launch`: `tidewater run`: its flags, where a run executes (`RunTarget`), and one run
//!   from its config to the printed verdict (`execute_run`, which `matrix` and `detect` use).
//! - `runner`: the phases of a run (setup, main, heal, recovery, final reads, teardown, check),
//!   the same for every system under test.
//! - `system`: the system under test as those phases see it, chosen once per run: the
//!   `System` trait (topic setup, status samples, the nemesis's view of leaders and ISRs,
//!   recovery probes, the workload's clients) and one implementation per system: the
//!   companion broker over HTTP or over its Kafka listeners, and Apache Kafka.
//! - `recorder`: the history writer, appending `history.jsonl` as ops happen.
//! - `store`: run directories `store/<name>/<timestamp>/` and the `store/latest` link.
//! - `detect`: `tidewater detect`, the detection table of the broker's deliberate bugs: its
//!   flags, its plan of cells and the command that runs them.
//! - `shrink`: `tidewater shrink`, a failing run's fault schedule made smaller (delta
//!   debugging over its steps, shorter delays, fewer nodes, a shorter run) while k of n
//!   reruns still show its anomaly; the shrunk plan and the report beside the run.
//! - `matrix`: `tidewater matrix`, every combination of settings run and compared: its flags,
//!   the matrix file and its cells, the night summary and the command.
//! - `serve`: `tidewater serve`, the store browsed read-only over HTTP (and its command).
//! - `progress`: the live progress display (a bar on a terminal, log lines otherwise).
//! - `cluster`: the `Cluster` trait (start, stop, kill, pause, resume, wipe, logs) and its
//!   backends: `local` (network namespaces and a bridge on this machine), `ssh` (remote hosts:
//!   `ssh/` holds the cluster file's spec, the scripts, the preflight and the cluster apart)
//!   and `noop`; the signal guard that tears every live cluster down.
//! - `cluster_file`: cluster files (`tidewater run --cluster FILE`) for the `ssh` backend
//!   (remote hosts such as the Vagrant VMs of `vagrant/`).
//! - `control`: what `cluster` and `net` share without importing each other: the controller's
//!   node name and the error of a node or network operation.
//! - `net`: partitions as grudges (pure builders) and the iptables / `ip rule` rules applying them.
//! - `kafka`: Apache Kafka as the system under test: `tidewater kafka fetch` (a release
//!   from Maven Central into a per-version cache), its JVMs' command lines, and the
//!   `server.properties` and `--set` mapping shared by the local and ssh backends.
//! - `clean`: `tidewater clean`, removing what interrupted local runs (or a cluster file's
//!   hosts) left behind.
//! - `nemesis`: fault injection: targets, fault plans (`harness/plans/`; steps as an `Action`
//!   enum whose variants carry their own arguments), the seeded random schedule (weighted
//!   `FaultKind`s expanded into plan steps), and the executor that records each fault as a
//!   history op in the workloads' vocabulary (`tidewater_workloads::nemesis::NemesisOp`).

pub mod broker_config;
pub mod clean;
pub mod cli;
pub mod cluster;
pub mod cluster_file;
pub mod control;
pub mod detect;
pub mod kafka;
pub mod launch;
pub mod matrix;
pub mod nemesis;
pub mod net;
pub mod progress;
pub mod recorder;
pub mod runner;
pub mod serve;
pub mod shrink;
pub mod store;
pub mod system;
