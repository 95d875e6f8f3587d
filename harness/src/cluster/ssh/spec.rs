//! The cluster file of the ssh backend: the hosts, how to reach them, how the broker runs on
//! them and what they run ([`SshSpec`], read by [`crate::cluster_file`]).

use super::kafka::KafkaSpec;
use super::transport::{Limits, Target};
use crate::cluster::{Error, NodeInfo, Result, Role, CONTROLLER};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the broker is run on each host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// The systemd unit where the host has it, else a process (decided per host in preflight).
    #[default]
    Auto,
    /// Through the systemd unit installed by provisioning.
    Systemd,
    /// As a process the harness starts with `setsid`, tracked by a pid file.
    Process,
}

/// What the hosts run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The companion broker, `tidewater-broker` (its HTTP API; the default).
    #[default]
    Tidewater,
    /// Apache Kafka in KRaft mode, from a release unpacked on every host (`[kafka]` table;
    /// `docs/real-kafka.md`). Always run as a process the harness starts.
    Kafka,
}

/// How the broker is run on one host, once `Control::Auto` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `systemctl` on the unit.
    Systemd,
    /// `setsid` and a pid file.
    Process,
}

/// One host. The optional fields override the cluster file's top-level values for this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshNode {
    /// `c1` or `nK`.
    pub name: String,
    /// The ssh destination: an address, `user@address`, or a `Host` of the ssh config file.
    pub host: String,
    /// The address the other nodes and the harness reach it at (its broker listens there).
    pub ip: Ipv4Addr,
    /// Login user (`ssh -l`).
    #[serde(default)]
    pub user: Option<String>,
    /// ssh port (`ssh -p`).
    #[serde(default)]
    pub port: Option<u16>,
    /// An ssh config file (`ssh -F`), e.g. the output of `vagrant ssh-config`.
    #[serde(default)]
    pub ssh_config: Option<PathBuf>,
    /// A private key (`ssh -i`).
    #[serde(default)]
    pub identity_file: Option<PathBuf>,
    /// Prefix privileged commands with `sudo -n`.
    #[serde(default)]
    pub sudo: Option<bool>,
    /// This host's remote directory (data, log, pid file).
    #[serde(default)]
    pub remote_dir: Option<String>,
}

impl SshNode {
    /// A host with every override left to the cluster file's top-level values.
    pub fn new(name: impl Into<String>, host: impl Into<String>, ip: Ipv4Addr) -> SshNode {
        SshNode {
            name: name.into(),
            host: host.into(),
            ip,
            user: None,
            port: None,
            ssh_config: None,
            identity_file: None,
            sudo: None,
            remote_dir: None,
        }
    }
}

fn default_http_port() -> u16 {
    9092
}
fn default_true() -> bool {
    true
}
fn default_remote_dir() -> String {
    "/var/lib/tidewater".into()
}
fn default_binary() -> String {
    "/usr/local/bin/tidewater-broker".into()
}
fn default_lossyfs_binary() -> String {
    "/usr/local/bin/tidewater-lossyfs".into()
}
fn default_unit() -> String {
    "tidewater-broker".into()
}
fn default_config_path() -> String {
    "/etc/tidewater/broker.toml".into()
}
fn default_stop_timeout_s() -> u64 {
    10
}
fn default_connect_timeout_s() -> u64 {
    5
}
fn default_command_timeout_s() -> u64 {
    60
}
fn default_ssh_retries() -> u32 {
    2
}

/// Bound on hosts in one cluster file (one thread per host during setup and teardown).
pub const HOSTS_MAX: usize = 64;

/// A cluster file (`tidewater run --cluster cluster.toml`): the hosts and how to reach them.
///
/// Paths (`ssh_config`, `identity_file`, `install_binary`) are taken as written; the
/// [`crate::cluster_file`] loader resolves relative ones against the file's directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSpec {
    /// What the hosts run: the companion broker (default) or Apache Kafka.
    #[serde(default)]
    pub kind: Kind,
    /// How Kafka is installed and laid out on the hosts (`kind = "kafka"` only).
    #[serde(default)]
    pub kafka: KafkaSpec,
    /// Port of every node's HTTP listener.
    #[serde(default = "default_http_port")]
    pub http_port: u16,
    /// The harness host's address as the nodes see it, to cut clients off; found out from
    /// `$SSH_CLIENT` on the controller's host when not set.
    #[serde(default)]
    pub client_ip: Option<Ipv4Addr>,
    /// Login user for every host (`ssh -l`); a node's `user` wins.
    #[serde(default)]
    pub user: Option<String>,
    /// ssh port for every host; a node's `port` wins.
    #[serde(default)]
    pub port: Option<u16>,
    /// ssh config file for every host (`ssh -F`), e.g. `vagrant ssh-config > ssh-config`.
    #[serde(default)]
    pub ssh_config: Option<PathBuf>,
    /// Private key for every host (`ssh -i`).
    #[serde(default)]
    pub identity_file: Option<PathBuf>,
    /// Extra `ssh` arguments for every host, after the ones above.
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// Prefix privileged commands with `sudo -n` (needed unless logging in as root).
    #[serde(default = "default_true")]
    pub sudo: bool,
    /// systemd unit or plain process.
    #[serde(default)]
    pub control: Control,
    /// Where data (`data/`), the log (`broker.log`) and the pid file live on each host;
    /// `{node}` is replaced by the node's name (for hosts that share a file system).
    #[serde(default = "default_remote_dir")]
    pub remote_dir: String,
    /// The broker binary on the hosts (`{node}` as in `remote_dir`). Process control runs it;
    /// under systemd it must be the unit's `ExecStart` binary for `install_binary` to matter.
    #[serde(default = "default_binary")]
    pub binary: String,
    /// A broker binary on this machine to copy to every host's `binary` before the run (only
    /// where the content differs); `"auto"` means the harness's own (`TIDEWATER_BROKER_BIN`, or
    /// the one next to `tidewater`, or built with cargo). Unset: use what the hosts have. A run
    /// that cuts power then copies the `tidewater-lossyfs` beside it too
    /// ([`SshSpec::install_lossyfs`]).
    #[serde(default)]
    pub install_binary: Option<String>,
    /// The systemd unit (systemd control).
    #[serde(default = "default_unit")]
    pub unit: String,
    /// The unit's settings file (systemd control; `{node}` allowed); `role.env` goes next to it.
    #[serde(default = "default_config_path")]
    pub config_path: String,
    /// Bound between SIGTERM and SIGKILL (process control; systemd uses `TimeoutStopSec`).
    #[serde(default = "default_stop_timeout_s")]
    pub stop_timeout_s: u64,
    /// ssh `ConnectTimeout`, in seconds: how soon an unreachable host is reported.
    #[serde(default = "default_connect_timeout_s")]
    pub connect_timeout_s: u64,
    /// Bound on one remote command, in seconds (a binary upload gets more per MiB).
    #[serde(default = "default_command_timeout_s")]
    pub command_timeout_s: u64,
    /// How many times a failed ssh connection is retried during the run (not in preflight).
    #[serde(default = "default_ssh_retries")]
    pub ssh_retries: u32,
    /// Delete every node's data and log when the cluster is set up, so runs are independent.
    #[serde(default = "default_true")]
    pub wipe_on_setup: bool,
    /// The lossy filesystem's binary on the hosts (`{node}` as in `remote_dir`):
    /// `tidewater-lossyfs`, or `tidewater` itself (then its `lossyfs` subcommand is used).
    /// Runs that cut power mount it over every node's `data` (`docs/ssh.md`, "Power loss").
    #[serde(default = "default_lossyfs_binary")]
    pub lossyfs_binary: String,
    /// Mount a lossy filesystem over every node's `data` (backed by `data.durable` beside it)
    /// for the run, so nodes can lose power. Set by the harness for runs that cut power (or
    /// `--lossy-fs`), never read from the file.
    #[serde(skip)]
    pub lossy_fs: bool,
    /// A local `tidewater-lossyfs` to copy to `lossyfs_binary` on every host where it differs
    /// (set by the harness when `install_binary` is set and the run cuts power, so the
    /// filesystem stays as new as the broker; never read from the file).
    #[serde(skip)]
    pub install_lossyfs: Option<PathBuf>,
    /// The hosts: `c1` and `n1..nN`.
    #[serde(rename = "node")]
    pub nodes: Vec<SshNode>,
}

impl Default for SshSpec {
    fn default() -> SshSpec {
        SshSpec {
            kind: Kind::default(),
            kafka: KafkaSpec::default(),
            http_port: default_http_port(),
            client_ip: None,
            user: None,
            port: None,
            ssh_config: None,
            identity_file: None,
            ssh_options: vec![],
            sudo: true,
            control: Control::default(),
            remote_dir: default_remote_dir(),
            binary: default_binary(),
            install_binary: None,
            unit: default_unit(),
            config_path: default_config_path(),
            stop_timeout_s: default_stop_timeout_s(),
            connect_timeout_s: default_connect_timeout_s(),
            command_timeout_s: default_command_timeout_s(),
            ssh_retries: default_ssh_retries(),
            wipe_on_setup: true,
            lossyfs_binary: default_lossyfs_binary(),
            lossy_fs: false,
            install_lossyfs: None,
            nodes: vec![],
        }
    }
}

impl SshSpec {
    /// Reads a cluster file as written (relative paths untouched); see
    /// [`crate::cluster_file::load`] for the loader that resolves them.
    pub fn load(path: &Path) -> Result<SshSpec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let spec: SshSpec =
            toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the node list (`c1` and `n1..nN`, each once, distinct hosts and addresses) and
    /// the bounds.
    pub fn validate(&self) -> Result<()> {
        let names: BTreeSet<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        let brokers = self.nodes.len().saturating_sub(1);
        let expected: BTreeSet<String> = std::iter::once(CONTROLLER.to_string())
            .chain((1..=brokers).map(|i| format!("n{i}")))
            .collect();
        if names.len() != self.nodes.len()
            || names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>() != expected
        {
            return Err(Error::Config(format!(
                "nodes must be c1 and n1..nN, each once; got {names:?}"
            )));
        }
        if brokers == 0 || self.nodes.len() > HOSTS_MAX {
            return Err(Error::Config(format!(
                "a cluster needs c1 and 1 to {} brokers; got {brokers}",
                HOSTS_MAX - 1
            )));
        }
        let hosts: BTreeSet<(&str, Option<u16>)> = self
            .nodes
            .iter()
            .map(|n| (n.host.as_str(), n.port.or(self.port)))
            .collect();
        let ips: BTreeSet<Ipv4Addr> = self.nodes.iter().map(|n| n.ip).collect();
        if hosts.len() != self.nodes.len() || ips.len() != self.nodes.len() {
            return Err(Error::Config(
                "every node needs its own host (or port) and its own ip".into(),
            ));
        }
        if self.connect_timeout_s == 0 || self.command_timeout_s == 0 {
            return Err(Error::Config(
                "connect_timeout_s and command_timeout_s must be at least 1".into(),
            ));
        }
        self.validate_kind()
    }

    /// Checks the fields that depend on what the hosts run.
    fn validate_kind(&self) -> Result<()> {
        match self.kind {
            Kind::Tidewater if self.kafka != KafkaSpec::default() => Err(Error::Config(
                "the [kafka] table applies to kind = \"kafka\" only".into(),
            )),
            Kind::Tidewater => Ok(()),
            Kind::Kafka if self.control == Control::Systemd => Err(Error::Config(
                "kind = \"kafka\" runs Kafka as a process the harness starts: use control = \
                 \"process\" or \"auto\" (the systemd unit runs the companion broker)"
                    .into(),
            )),
            Kind::Kafka if self.install_binary.is_some() => Err(Error::Config(
                "install_binary copies the companion broker; kind = \"kafka\" runs the Kafka \
                 release under kafka.home on each host (remove install_binary)"
                    .into(),
            )),
            Kind::Kafka => self.kafka.validate().map_err(Error::Config),
        }
    }

    /// Where each broker serves Kafka's binary protocol (node name -> address), for a Kafka
    /// client to bootstrap from; empty unless the hosts run Kafka.
    pub fn kafka_bootstrap(&self) -> BTreeMap<String, SocketAddr> {
        match self.kind {
            Kind::Kafka => self.kafka.bootstrap(&self.node_infos()),
            Kind::Tidewater => BTreeMap::new(),
        }
    }

    /// The number of broker hosts (every node but `c1`).
    pub fn brokers(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    /// The nodes as the harness addresses them, controller first.
    pub fn node_infos(&self) -> Vec<NodeInfo> {
        let mut nodes: Vec<NodeInfo> = self
            .nodes
            .iter()
            .map(|n| {
                let broker_id = n.name.strip_prefix('n').and_then(|k| k.parse().ok());
                NodeInfo {
                    name: n.name.clone(),
                    role: if broker_id.is_some() {
                        Role::Broker
                    } else {
                        Role::Controller
                    },
                    broker_id,
                    ip: n.ip,
                    http_port: self.http_port,
                }
            })
            .collect();
        nodes.sort_by_key(|n| n.broker_id.unwrap_or(0));
        nodes
    }

    pub(super) fn host(&self, node: &str) -> Result<&SshNode> {
        self.nodes
            .iter()
            .find(|n| n.name == node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))
    }

    /// How to reach `node`: its destination and the ssh options, node values first.
    pub fn target(&self, node: &SshNode) -> Target {
        let mut options = vec![];
        if let Some(f) = node.ssh_config.as_ref().or(self.ssh_config.as_ref()) {
            options.extend(["-F".to_string(), f.display().to_string()]);
        }
        if let Some(k) = node.identity_file.as_ref().or(self.identity_file.as_ref()) {
            options.extend(["-i".to_string(), k.display().to_string()]);
            options.extend(["-o".to_string(), "IdentitiesOnly=yes".to_string()]);
        }
        if let Some(u) = node.user.as_ref().or(self.user.as_ref()) {
            options.extend(["-l".to_string(), u.clone()]);
        }
        if let Some(p) = node.port.or(self.port) {
            options.extend(["-p".to_string(), p.to_string()]);
        }
        options.extend(self.ssh_options.iter().cloned());
        Target {
            destination: node.host.clone(),
            options,
        }
    }

    /// The transport bounds of this file.
    pub fn limits(&self) -> Limits {
        Limits {
            connect_timeout: Duration::from_secs(self.connect_timeout_s),
            command_timeout: Duration::from_secs(self.command_timeout_s),
            retries: self.ssh_retries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_values_override_the_files_values_in_the_ssh_options() {
        let spec: SshSpec = toml::from_str(
            r#"
            user = "vagrant"
            port = 22
            identity_file = "/keys/id"
            ssh_options = ["-o", "LogLevel=ERROR"]
            [[node]]
            name = "c1"
            host = "10.0.0.10"
            ip = "10.0.0.10"
            [[node]]
            name = "n1"
            host = "n1"
            ip = "10.0.0.11"
            user = "root"
            port = 2201
            ssh_config = "/tmp/ssh-config"
            "#,
        )
        .unwrap();
        spec.validate().unwrap();
        assert_eq!(
            spec.target(&spec.nodes[0]).options.join(" "),
            "-i /keys/id -o IdentitiesOnly=yes -l vagrant -p 22 -o LogLevel=ERROR"
        );
        assert_eq!(
            spec.target(&spec.nodes[1]).options.join(" "),
            "-F /tmp/ssh-config -i /keys/id -o IdentitiesOnly=yes -l root -p 2201 -o LogLevel=ERROR"
        );
    }
}
