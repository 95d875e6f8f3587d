//! The ssh backend: nodes are hosts (Vagrant VMs, or any machines) reached with the system
//! `ssh`, for nightly runs on real networks. The cluster file format and the whole workflow
//! are described in `docs/ssh.md`; [`crate::cluster_file`] reads the file.
//!
//! Two ways to control the broker on a host:
//! - `systemd` (default, what `vagrant/provision.sh` installs): the harness writes the run's
//!   settings to `/etc/tidewater/broker.toml` and the role to `/etc/tidewater/role.env`, then
//!   drives the `tidewater-broker` unit (`systemctl start/stop`, `systemctl kill -s SIG...`).
//! - `process`: the harness starts the binary itself with `setsid` in the node's remote
//!   directory, keeps its pid in `broker.pid` there and signals its process group.
//!
//! Every command goes through [`transport::SshRemote`]: one master connection per host, batch
//! mode, a connection timeout, a bound on each command and bounded retries of connection
//! failures. Before anything changes on any host, a preflight checks every host at once
//! (reachable, `sudo -n` works, iptables present, unit or binary present) and reports every
//! problem in one error.
//!
//! Network faults use iptables on each host, in Tidewater's own chain (see [`crate::net::rules`]);
//! the `ip rule` fallback is refused here because it would reorder the host's own rules.
//!
//! With `kind = "kafka"` the hosts run Apache Kafka (KRaft) instead of the companion broker,
//! as processes the harness starts; [`kafka`] writes their properties and commands.
//!
//! # Layout
//! - `spec`: the cluster file: hosts, how to reach them, how the broker runs, what they run.
//! - [`transport`]: [`SshRemote`], the system `ssh` with a master connection per host and
//!   bounds on every command.
//! - `scripts`: the shell scripts that control the companion broker on a host, and the
//!   commands every node's process answers to.
//! - [`kafka`]: Apache Kafka's properties and commands on the hosts (`kind = "kafka"`).
//! - `preflight`: every host checked at once before anything changes.
//! - `remote_shell`: Tidewater's iptables rules applied over ssh, the harness's ssh exempted.
//! - `parallel`: one command on every host at once.
//! - `shell`: quoting words for the hosts' `sh`.
//! - `cluster`: [`SshCluster`], the [`crate::cluster::Cluster`] over the hosts.

mod cluster;
pub mod kafka;
mod parallel;
mod preflight;
mod remote_shell;
mod scripts;
mod shell;
mod spec;
#[cfg(test)]
mod tests;
pub mod transport;

pub use cluster::SshCluster;
pub use kafka::{KafkaScripts, KafkaSpec, Launch, Quorum};
pub use preflight::{preflight, HostFacts, FREE_DISK_MIN_MIB};
pub use shell::quote;
pub use spec::{Control, Kind, Mode, SshNode, SshSpec, HOSTS_MAX};
pub use transport::{Limits, Remote, SshRemote, Target};
