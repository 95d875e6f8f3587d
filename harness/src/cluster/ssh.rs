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

pub mod kafka;
pub mod transport;

pub use kafka::{KafkaScripts, KafkaSpec, Quorum};
pub use transport::{Limits, Remote, SshRemote, Target};

use super::guard::{self, Teardown};
use super::{node_settings, Cluster, Error, NodeInfo, Result, Role, CONTROLLER};
use crate::net::rules::Method;
use crate::net::rules::{commands_script, Cmd, NodeShell, RuleNet};
use crate::net::{Net, CLIENT};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

    fn host(&self, node: &str) -> Result<&SshNode> {
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

/// Quotes a word for POSIX sh.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The scripts that control one host, as plain strings (so tests can read them).
struct Scripts<'a> {
    /// The cluster file.
    spec: &'a SshSpec,
    /// The node's name (`{node}` in paths).
    node: String,
    /// This node's remote directory.
    dir: String,
    /// This node's broker binary.
    binary: String,
    /// This node's lossy filesystem binary.
    lossyfs_binary: String,
    /// This node's settings file (systemd control).
    config_path: String,
    /// Whether privileged commands go through `sudo -n`.
    sudo: bool,
    /// systemd or process; `None` until preflight decided `Control::Auto` (then systemd).
    mode: Option<Mode>,
}

impl<'a> Scripts<'a> {
    fn sudo(&self, script: &str) -> String {
        if self.sudo {
            format!("sudo -n sh -c {}", quote(script))
        } else {
            script.to_string()
        }
    }

    fn new(spec: &'a SshSpec, node: &str) -> Scripts<'a> {
        let host = spec.host(node).ok();
        let dir = host
            .and_then(|h| h.remote_dir.clone())
            .unwrap_or_else(|| spec.remote_dir.clone());
        Scripts {
            spec,
            node: node.to_string(),
            dir: dir.replace("{node}", node),
            binary: spec.binary.replace("{node}", node),
            lossyfs_binary: spec.lossyfs_binary.replace("{node}", node),
            config_path: spec.config_path.replace("{node}", node),
            sudo: host.and_then(|h| h.sudo).unwrap_or(spec.sudo),
            mode: match (spec.kind, spec.control) {
                (Kind::Kafka, _) => Some(Mode::Process),
                (_, Control::Auto) => None,
                (_, Control::Systemd) => Some(Mode::Systemd),
                (_, Control::Process) => Some(Mode::Process),
            },
        }
    }

    /// This node's Kafka commands (`kind = "kafka"`).
    fn kafka(&self) -> KafkaScripts<'a> {
        KafkaScripts::new(
            &self.spec.kafka,
            &self.node,
            &self.dir,
            self.sudo,
            self.spec.stop_timeout_s,
        )
    }

    /// The decided mode: the file's, or what preflight found for `auto`.
    fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Systemd)
    }

    fn data_dir(&self) -> String {
        format!("{}/data", self.dir)
    }

    fn log_file(&self) -> String {
        quote(&format!("{}/broker.log", self.dir))
    }

    fn unit(&self) -> String {
        quote(&self.spec.unit)
    }

    fn pid_file(&self) -> String {
        quote(&format!("{}/broker.pid", self.dir))
    }

    /// Signals the broker (a process group in process control).
    fn signal(&self, sig: &str) -> String {
        match self.mode() {
            Mode::Systemd => self.sudo(&format!("systemctl kill -s {sig} {}", self.unit())),
            Mode::Process => self.sudo(&format!(
                "test -f {p} && kill -{sig} -- -$(cat {p}) 2>/dev/null || true",
                p = self.pid_file()
            )),
        }
    }

    fn is_running(&self) -> String {
        match self.mode() {
            Mode::Systemd => format!("systemctl is-active --quiet {}", self.unit()),
            Mode::Process => self.sudo(&format!(
                "test -f {p} && kill -0 $(cat {p}) 2>/dev/null",
                p = self.pid_file()
            )),
        }
    }

    /// Waits (bounded, in tenths of a second) until the broker is gone.
    fn wait_gone(&self, tenths: u64) -> String {
        format!(
            "i=0; while {running}; do i=$((i+1)); [ $i -gt {tenths} ] && exit 1; sleep 0.1; done; true",
            running = self.is_running()
        )
    }

    fn start(&self, argv: &[String]) -> String {
        match self.mode() {
            Mode::Systemd => self.sudo(&format!(
                "systemctl reset-failed {u} >/dev/null 2>&1; systemctl start {u}",
                u = self.unit()
            )),
            Mode::Process => {
                let dir = quote(&self.dir);
                let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
                self.sudo(&format!(
                    "if test -f {p} && kill -0 $(cat {p}) 2>/dev/null; then exit 0; fi; \
                     mkdir -p {dir} && cd {dir} || exit 1; \
                     echo '=== tidewater: starting ===' >> broker.log; \
                     setsid {cmd} >> broker.log 2>&1 < /dev/null & echo $! > {p}",
                    p = self.pid_file(),
                    cmd = words.join(" ")
                ))
            }
        }
    }

    fn stop(&self) -> String {
        match self.mode() {
            Mode::Systemd => format!(
                "{}; {}",
                self.signal("SIGCONT"),
                self.sudo(&format!("systemctl stop {}", self.unit()))
            ),
            Mode::Process => format!(
                "{}; {}; {} || {{ {}; {}; }}",
                self.signal("CONT"),
                self.signal("TERM"),
                self.wait_gone(self.spec.stop_timeout_s * 10),
                self.signal("KILL"),
                self.wait_gone(50)
            ),
        }
    }

    fn kill(&self) -> String {
        let sig = match self.mode() {
            Mode::Systemd => "SIGKILL",
            Mode::Process => "KILL",
        };
        format!("{}; {}", self.signal(sig), self.wait_gone(50))
    }

    fn pause(&self) -> String {
        self.signal(match self.mode() {
            Mode::Systemd => "SIGSTOP",
            Mode::Process => "STOP",
        })
    }

    fn resume(&self) -> String {
        self.signal(match self.mode() {
            Mode::Systemd => "SIGCONT",
            Mode::Process => "CONT",
        })
    }

    fn wipe(&self) -> String {
        let data = quote(&self.data_dir());
        if self.spec.lossy_fs {
            // A mount point cannot be removed: empty it, and make the removal durable.
            return self.sudo(&format!(
                "find {data} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + && \
                 printf 'sync\\n' > {control}",
                control = self.lossyfs_control()
            ));
        }
        self.sudo(&format!("rm -rf {data} && mkdir -p {data}"))
    }

    /// Wipes the data (and a lossy filesystem's backing directory) and empties the log, so
    /// the logs collected after a run are its own. Run with no lossy filesystem mounted.
    fn wipe_all(&self) -> String {
        let data = quote(&self.data_dir());
        self.sudo(&format!(
            "rm -rf {data} {durable} && mkdir -p {data} && : > {log}",
            durable = quote(&self.durable_dir()),
            log = self.log_file()
        ))
    }

    /// The lossy filesystem's backing directory: what the node made durable.
    fn durable_dir(&self) -> String {
        format!("{}/data.durable", self.dir)
    }

    fn lossyfs_pid_file(&self) -> String {
        quote(&format!("{}/lossyfs.pid", self.dir))
    }

    fn lossyfs_control(&self) -> String {
        quote(&format!(
            "{}/{}",
            self.data_dir(),
            tidewater_lossyfs::CONTROL_FILE_NAME
        ))
    }

    /// Mounts the lossy filesystem over `data` (backed by `data.durable`) as a process of
    /// its own (setsid, like the broker in process control), then waits (bounded, 10 s)
    /// until its control file answers. A mount already served is kept.
    fn mount_lossyfs(&self) -> String {
        let data = quote(&self.data_dir());
        let durable = quote(&self.durable_dir());
        let mut cmd = vec![quote(&self.lossyfs_binary)];
        if Path::new(&self.lossyfs_binary).file_name() == Some("tidewater".as_ref()) {
            cmd.push("lossyfs".into());
        }
        cmd.extend(["mount".into(), durable.clone(), data.clone()]);
        self.sudo(&format!(
            "if test -f {p} && kill -0 $(cat {p}) 2>/dev/null; then exit 0; fi; \
             mkdir -p {data} {durable} && cd {dir} || exit 1; \
             setsid {cmd} >> lossyfs.log 2>&1 < /dev/null & echo $! > {p}; \
             i=0; until test -e {control}; do i=$((i+1)); \
             if [ $i -gt 100 ] || ! kill -0 $(cat {p}) 2>/dev/null; then \
             echo 'lossyfs did not mount:' >&2; tail -n 5 lossyfs.log >&2; exit 1; fi; \
             sleep 0.1; done",
            p = self.lossyfs_pid_file(),
            dir = quote(&self.dir),
            cmd = cmd.join(" "),
            control = self.lossyfs_control()
        ))
    }

    /// Cuts the power under a killed broker: every write it had not fsynced is lost (`torn`
    /// keeps a seeded prefix of each file's last unsynced write, `docs/lossyfs.md`).
    fn lose_unsynced(&self, torn_seed: Option<u64>) -> String {
        let command = match torn_seed {
            Some(seed) => format!("lose-unsynced torn {seed}"),
            None => "lose-unsynced clean".to_string(),
        };
        self.sudo(&format!(
            "printf '%s\\n' {} > {}",
            quote(&command),
            self.lossyfs_control()
        ))
    }

    /// Unmounts the lossy filesystem, if this run's (or an earlier one's) is there: a sync
    /// first, so the data directory stays as evidence, then SIGTERM (lossyfs unmounts and
    /// exits; SIGKILL after 5 s), then a lazy unmount of a mount left without its process.
    /// Only a `fuse.lossyfs` mount at `data` is touched. Run with the broker stopped.
    fn unmount_lossyfs(&self) -> String {
        let data = self.data_dir();
        self.sudo(&format!(
            "if test -f {p}; then pid=$(cat {p}); \
             if kill -0 $pid 2>/dev/null; then printf 'sync\\n' 2>/dev/null > {control}; \
             kill -TERM $pid; i=0; while kill -0 $pid 2>/dev/null; do i=$((i+1)); \
             if [ $i -gt 50 ]; then kill -KILL $pid; break; fi; sleep 0.1; done; fi; \
             rm -f {p}; fi; \
             if grep -qF {mounted} /proc/mounts; then umount -l {quoted}; fi; true",
            p = self.lossyfs_pid_file(),
            control = self.lossyfs_control(),
            mounted = quote(&format!(" {data} fuse.lossyfs ")),
            quoted = quote(&data)
        ))
    }

    fn read_log(&self) -> String {
        self.sudo(&format!("cat {} 2>/dev/null || true", self.log_file()))
    }

    /// The unit's own messages (start, stop, killed by a signal), where systemd manages it.
    fn read_journal(&self) -> Option<String> {
        match self.mode() {
            Mode::Systemd => Some(self.sudo(&format!(
                "journalctl --no-pager -o short-iso -n 5000 -u {} 2>&1 || true",
                self.unit()
            ))),
            Mode::Process => None,
        }
    }

    /// Writes the settings file (stdin) and the role for the systemd unit.
    fn configure(&self, role: Role) -> String {
        let config = quote(&self.config_path);
        let dir = Path::new(&self.config_path)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/etc/tidewater".into());
        let role_env = quote(&format!("{dir}/role.env"));
        self.sudo(&format!(
            "mkdir -p {d} && cat > {config} && echo TIDEWATER_ROLE={role} > {role_env}",
            d = quote(&dir),
            role = role.as_flag()
        ))
    }

    /// Checks run before anything changes: prints `client=ADDR` (the harness host as this host
    /// sees it), `sshport=PORT` (the port this host's sshd got the connection on) and one
    /// `problem: ...` line per missing prerequisite. Exits 0 unless the shell
    /// itself fails, so a problem is told apart from an unreachable host.
    fn preflight(&self, installing: bool) -> String {
        // Free space where the node's data goes (or the nearest existing parent): a night
        // that fills a disk half-way would end in errors that look like broker bugs.
        let free = format!(
            "d={dir}; while [ ! -d \"$d\" ]; do d=$(dirname \"$d\"); done; \
             kb=$(df -Pk \"$d\" | awk 'NR==2 {{print $4}}'); \
             [ \"${{kb:-0}}\" -ge {min_kb} ] || echo \"problem: only ${{kb:-0}} KiB free under $d \
             (at least {min_mib} MiB needed)\"",
            dir = quote(&self.dir),
            min_kb = FREE_DISK_MIN_MIB * 1024,
            min_mib = FREE_DISK_MIN_MIB
        );
        let mut checks = vec![
            "command -v iptables >/dev/null 2>&1 || test -x /usr/sbin/iptables || \
             test -x /sbin/iptables || echo 'problem: iptables is not installed'"
                .to_string(),
            free,
        ];
        if self.spec.lossy_fs {
            checks.push(
                "test -c /dev/fuse || echo 'problem: /dev/fuse is missing (power loss mounts \
                 a FUSE filesystem over the data directory; modprobe fuse)'"
                    .to_string(),
            );
            if self.spec.install_lossyfs.is_none() {
                checks.push(format!(
                    "test -x {b} || echo 'problem: {b} is not an executable (power loss needs \
                     tidewater-lossyfs on every host; set lossyfs_binary in the cluster file)'",
                    b = quote(&self.lossyfs_binary)
                ));
            }
        }
        if self.spec.kind == Kind::Kafka {
            checks.extend(self.kafka().preflight_checks());
            return self.preflight_script(&checks);
        }
        let unit_exists = format!("systemctl cat {} >/dev/null 2>&1", self.unit());
        let mut process_checks =
            vec!["command -v setsid >/dev/null 2>&1 || echo 'problem: setsid is missing'".into()];
        if !installing {
            process_checks.push(format!(
                "test -x {b} || echo 'problem: {b} is not an executable (install it, \
                 or set install_binary in the cluster file)'",
                b = quote(&self.binary)
            ));
        }
        match self.spec.control {
            Control::Systemd => checks.push(format!(
                "{unit_exists} || echo 'problem: no systemd unit {u} \
                 (install it as vagrant/provision.sh does, or use control = \"process\")'",
                u = self.unit()
            )),
            Control::Process => checks.extend(process_checks),
            Control::Auto => checks.push(format!(
                "if {unit_exists}; then echo control=systemd; else echo control=process; {}; fi",
                process_checks.join("; ")
            )),
        }
        self.preflight_script(&checks)
    }

    /// The preflight around `checks` (run privileged): the client address and ssh port, then
    /// whether `sudo -n` works, then the checks.
    fn preflight_script(&self, checks: &[String]) -> String {
        let checks = self.sudo(&checks.join("; "));
        let sudo_check = if self.sudo {
            "sudo -n true 2>/dev/null || { echo \"problem: sudo -n fails for $(id -un) \
             (passwordless sudo is needed, or sudo = false when logging in as root)\"; exit 0; }; "
        } else {
            ""
        };
        format!(
            "echo \"client=${{SSH_CLIENT%% *}}\"; echo \"sshport=${{SSH_CONNECTION##* }}\"; \
             {sudo_check}{checks}; true"
        )
    }

    /// Prints the sha256 of the installed file at `path` (nothing if there is none).
    fn file_digest(&self, path: &str) -> String {
        self.sudo(&format!(
            "sha256sum {} 2>/dev/null | cut -d' ' -f1; true",
            quote(path)
        ))
    }

    /// Replaces the executable at `path` with stdin, atomically (a reader never sees half a
    /// file; hosts that share a file system may upload at the same time, hence the per-shell
    /// temporary name).
    fn install_file(&self, path: &str) -> String {
        let bin = quote(path);
        let dir = Path::new(path)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| ".".into());
        self.sudo(&format!(
            "mkdir -p {d} && cat > {bin}.tw-new.$$ && chmod 0755 {bin}.tw-new.$$ && \
             mv -f {bin}.tw-new.$$ {bin}",
            d = quote(&dir)
        ))
    }
}

/// The commands that control one node's process, whatever the hosts run: the companion
/// broker ([`Scripts`]) or Kafka ([`KafkaScripts`]). Starting and configuring differ in what
/// they need and are chosen by [`Inner`].
trait NodeControl {
    /// SIGCONT, SIGTERM, SIGKILL after a bound; succeeds once the process is gone.
    fn stop(&self) -> String;
    /// SIGKILL; succeeds once the process is gone.
    fn kill(&self) -> String;
    /// SIGSTOP.
    fn pause(&self) -> String;
    /// SIGCONT.
    fn resume(&self) -> String;
    /// Succeeds while the process lives (paused or not).
    fn is_running(&self) -> String;
    /// Deletes the node's data.
    fn wipe(&self) -> String;
    /// Deletes the node's data and empties its logs.
    fn wipe_all(&self) -> String;
    /// The files copied into `nodes/<node>/`, each with the script that prints it.
    fn logs(&self) -> Vec<(String, String)>;
}

impl NodeControl for Scripts<'_> {
    fn stop(&self) -> String {
        Scripts::stop(self)
    }
    fn kill(&self) -> String {
        Scripts::kill(self)
    }
    fn pause(&self) -> String {
        Scripts::pause(self)
    }
    fn resume(&self) -> String {
        Scripts::resume(self)
    }
    fn is_running(&self) -> String {
        Scripts::is_running(self)
    }
    fn wipe(&self) -> String {
        Scripts::wipe(self)
    }
    fn wipe_all(&self) -> String {
        Scripts::wipe_all(self)
    }
    fn logs(&self) -> Vec<(String, String)> {
        let mut logs = vec![("broker.log".to_string(), self.read_log())];
        if let Some(journal) = self.read_journal() {
            logs.push(("journal.log".to_string(), journal));
        }
        logs
    }
}

impl NodeControl for KafkaScripts<'_> {
    fn stop(&self) -> String {
        KafkaScripts::stop(self)
    }
    fn kill(&self) -> String {
        KafkaScripts::kill(self)
    }
    fn pause(&self) -> String {
        KafkaScripts::pause(self)
    }
    fn resume(&self) -> String {
        KafkaScripts::resume(self)
    }
    fn is_running(&self) -> String {
        KafkaScripts::is_running(self)
    }
    fn wipe(&self) -> String {
        KafkaScripts::wipe(self)
    }
    fn wipe_all(&self) -> String {
        KafkaScripts::wipe_all(self)
    }
    fn logs(&self) -> Vec<(String, String)> {
        KafkaScripts::logs(self)
    }
}

/// Renders settings as the flat TOML file the broker reads (`--config`).
fn settings_toml(settings: &[(String, String)]) -> String {
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in settings {
        last.insert(k, v);
    }
    let mut out = String::from("# Written by the Tidewater harness for this run.\n");
    for (k, v) in last {
        let value = toml::Value::String(v.to_string());
        out.push_str(&format!(
            "{} = {value}\n",
            toml::Value::String(k.to_string())
        ));
    }
    out
}

/// The sha256 of a local file, with the system's `sha256sum` (the hosts use the same tool).
fn local_digest(path: &Path) -> Result<String> {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| Error::io("run sha256sum", e))?;
    if !out.status.success() {
        return Err(Error::Command {
            command: format!("sha256sum {}", path.display()),
            status: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.split_whitespace().next().unwrap_or("").to_string())
}

/// Runs `f` for every node at once (hosts are independent; a slow one must not delay the
/// rest), returning each node's result in the order given.
fn on_each<T: Send>(
    nodes: &[String],
    f: impl Fn(&str) -> Result<T> + Sync,
) -> Vec<(String, Result<T>)> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|n| (n.clone(), s.spawn(move || f(n))))
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| {
                let result = h
                    .join()
                    .unwrap_or_else(|_| Err(Error::State(format!("the thread for {n} panicked"))));
                (n, result)
            })
            .collect()
    })
}

/// The first error of `on_each`'s results, naming its node.
fn first_error<T>(results: Vec<(String, Result<T>)>, what: &str) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(results.len());
    for (node, r) in results {
        out.push(r.map_err(|e| Error::State(format!("{what} on {node}: {e}")))?);
    }
    Ok(out)
}

/// Runs rule commands on a host over the [`Remote`].
struct RemoteShell {
    /// Runs the scripts.
    remote: Arc<dyn Remote>,
    /// Node name -> (host key for the remote, whether to use sudo).
    hosts: BTreeMap<String, (String, bool)>,
    /// Node name -> its sshd's port. The harness controls the host through it, often from the
    /// very address a "cut clients" fault drops: without an exemption the harness could not
    /// heal the fault it made.
    ssh_ports: BTreeMap<String, u16>,
}

impl RemoteShell {
    fn host(&self, node: &str) -> Result<&(String, bool)> {
        self.hosts
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))
    }

    /// `cmds` with, right after the creation of Tidewater's chain, a rule that lets the
    /// harness's ssh connections through (`-p tcp --dport SSH_PORT -j RETURN`). Heal deletes
    /// the chain, and the exemption with it.
    fn with_ssh_exemption(&self, node: &str, cmds: &[Cmd]) -> Vec<Cmd> {
        let mut out = Vec::with_capacity(cmds.len() + 1);
        for c in cmds {
            out.push(c.clone());
            let creates_chain = c.argv.len() == 4
                && c.argv[0] == "iptables"
                && c.argv[2] == "-N"
                && c.argv[3] == crate::net::rules::CHAIN;
            if let (true, Some(port)) = (creates_chain, self.ssh_ports.get(node)) {
                let rule = [
                    "iptables",
                    "-w",
                    "-A",
                    crate::net::rules::CHAIN,
                    "-p",
                    "tcp",
                    "--dport",
                    &port.to_string(),
                    "-j",
                    "RETURN",
                ];
                out.push(Cmd {
                    argv: rule.iter().map(|w| w.to_string()).collect(),
                    on_fail: c.on_fail,
                });
            }
        }
        out
    }
}

impl NodeShell for RemoteShell {
    fn exec(&self, node: &str, argv: &[String]) -> Result<()> {
        let (host, sudo) = self.host(node)?;
        let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let script = if *sudo {
            format!("sudo -n {}", words.join(" "))
        } else {
            words.join(" ")
        };
        self.remote.run(host, &script, b"").map(|_| ())
    }

    fn exec_all(&self, node: &str, cmds: &[Cmd]) -> Result<()> {
        if cmds.is_empty() {
            return Ok(());
        }
        let (host, sudo) = self.host(node)?;
        let prefix = if *sudo { "sudo -n " } else { "" };
        let script = commands_script(&self.with_ssh_exemption(node, cmds), prefix, quote);
        self.remote.run(host, &script, b"").map(|_| ())
    }
}

/// What the preflight found on one host.
struct Preflight {
    /// The harness host's address as this host sees it (`$SSH_CLIENT`).
    client_ip: Option<Ipv4Addr>,
    /// The port this host's sshd answered on (`$SSH_CONNECTION`).
    ssh_port: Option<u16>,
    /// What `control = "auto"` found on this host.
    mode: Option<Mode>,
    /// Missing prerequisites.
    problems: Vec<String>,
}

/// What the preflight learnt about the hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The harness host's address as the controller's host sees it (`$SSH_CLIENT`).
    pub client_ip: Option<Ipv4Addr>,
    /// Node -> the port its sshd answered on, which network faults must leave open.
    pub ssh_ports: BTreeMap<String, u16>,
    /// Node -> how its broker is run, where `control = "auto"` had to find out.
    pub modes: BTreeMap<String, Mode>,
}

/// Free disk space each host needs under its node directory, checked by the preflight.
pub const FREE_DISK_MIN_MIB: u64 = 1024;

/// Checks every host at once, before anything changes on any of them; one error lists every
/// unreachable host and every problem.
pub fn preflight(spec: &SshSpec, remote: &dyn Remote, installing: bool) -> Result<HostFacts> {
    let names: Vec<String> = spec.nodes.iter().map(|n| n.name.clone()).collect();
    let results = on_each(&names, |node| {
        let host = spec.host(node)?;
        let out = remote.probe(&host.host, &Scripts::new(spec, node).preflight(installing))?;
        let mut found = Preflight {
            client_ip: None,
            ssh_port: None,
            mode: None,
            problems: vec![],
        };
        for line in out.lines() {
            if let Some(ip) = line.strip_prefix("client=") {
                found.client_ip = ip.trim().parse().ok();
            } else if let Some(port) = line.strip_prefix("sshport=") {
                found.ssh_port = port.trim().parse().ok();
            } else if let Some(mode) = line.strip_prefix("control=") {
                found.mode = match mode.trim() {
                    "systemd" => Some(Mode::Systemd),
                    "process" => Some(Mode::Process),
                    _ => None,
                };
            } else if let Some(p) = line.strip_prefix("problem: ") {
                found.problems.push(p.to_string());
            }
        }
        Ok(found)
    });
    let mut lines = vec![];
    let mut facts = HostFacts::default();
    for (node, result) in results {
        let host = &spec.host(&node)?.host;
        match result {
            Err(e) => lines.push(format!(
                "  {node} ({host}): unreachable over ssh: {}",
                connection_failure(&e)
            )),
            Ok(found) => {
                for p in found.problems {
                    lines.push(format!("  {node} ({host}): {p}"));
                }
                if node == CONTROLLER {
                    facts.client_ip = found.client_ip;
                }
                if let Some(port) = found.ssh_port {
                    facts.ssh_ports.insert(node.clone(), port);
                }
                if let Some(mode) = found.mode {
                    facts.modes.insert(node, mode);
                }
            }
        }
    }
    if !lines.is_empty() {
        return Err(Error::State(format!(
            "ssh cluster preflight failed, nothing was changed on any host:\n{}",
            lines.join("\n")
        )));
    }
    Ok(facts)
}

/// What went wrong with a connection, without the script (ssh's own message says it all).
fn connection_failure(e: &Error) -> String {
    match e {
        Error::Command {
            stderr,
            status: Some(_),
            ..
        } if !stderr.trim().is_empty() => stderr.trim().to_string(),
        Error::Command {
            stderr,
            status: None,
            ..
        } => stderr.trim().to_string(),
        other => other.to_string(),
    }
}

/// The shared state of an ssh cluster (also reachable from the signal guard).
struct Inner {
    /// The cluster file.
    spec: SshSpec,
    /// The run's broker settings (Kafka names), after the per-node ones; with `kind =
    /// "kafka"`, already mapped to Kafka's broker properties.
    settings: Vec<(String, String)>,
    /// Every node, controller first.
    nodes: Vec<NodeInfo>,
    /// Runs commands on the hosts.
    remote: Arc<dyn Remote>,
    /// Nodes we paused and have not resumed (the host cannot tell us cheaply).
    paused: Mutex<BTreeSet<String>>,
    /// iptables rules on the hosts.
    net: RuleNet,
    /// The harness host's address as the hosts see it (cluster file, else `$SSH_CLIENT`).
    client_ip: Option<Ipv4Addr>,
    /// Node -> how its broker is run, for hosts where `control = "auto"` decided.
    modes: BTreeMap<String, Mode>,
    /// Set by the first teardown.
    torn_down: AtomicBool,
}

impl Inner {
    fn host(&self, node: &str) -> Result<&str> {
        self.spec.host(node).map(|n| n.host.as_str())
    }

    fn run(&self, node: &str, script: &str) -> Result<String> {
        self.remote.run(self.host(node)?, script, b"")
    }

    fn scripts(&self, node: &str) -> Scripts<'_> {
        let mut scripts = Scripts::new(&self.spec, node);
        if let Some(mode) = self.modes.get(node) {
            scripts.mode = Some(*mode);
        }
        scripts
    }

    /// How `node`'s broker is run.
    pub fn mode(&self, node: &str) -> Mode {
        self.scripts(node).mode()
    }

    /// The commands that control `node`'s process.
    fn control(&self, node: &str) -> Box<dyn NodeControl + '_> {
        let scripts = self.scripts(node);
        match self.spec.kind {
            Kind::Tidewater => Box::new(scripts),
            Kind::Kafka => Box::new(scripts.kafka()),
        }
    }

    /// The command that starts `node`'s process.
    fn start_script(&self, node: &NodeInfo) -> String {
        let scripts = self.scripts(&node.name);
        match self.spec.kind {
            Kind::Tidewater => scripts.start(&self.argv(node)),
            Kind::Kafka => scripts.kafka().start(),
        }
    }

    /// `node`'s Kafka `server.properties` (`kind = "kafka"`).
    fn kafka_properties(&self, node: &NodeInfo) -> String {
        let data = self.scripts(&node.name).kafka().data_dir();
        kafka::server_properties(&self.spec.kafka, node, &self.nodes, &data, &self.settings)
    }

    fn node_settings(&self, node: &NodeInfo) -> Vec<(String, String)> {
        let data = self.scripts(&node.name).data_dir();
        node_settings(node, &self.nodes[0], &data, &self.settings)
    }

    fn argv(&self, node: &NodeInfo) -> Vec<String> {
        let mut argv = vec![
            self.scripts(&node.name).binary,
            "--role".into(),
            node.role.as_flag().into(),
        ];
        for (k, v) in self.node_settings(node) {
            argv.push("--set".into());
            argv.push(format!("{k}={v}"));
        }
        argv
    }

    fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Stops every broker left running, unmounts a lossy filesystem left mounted, clears the
    /// data and log, writes the settings.
    fn prepare_hosts(&self) -> Result<()> {
        let results = on_each(&self.names(), |node| {
            let info = self.nodes.iter().find(|n| n.name == node).expect("a node");
            let scripts = self.scripts(node);
            let control = self.control(node);
            self.run(node, &control.stop())?;
            self.run(node, &scripts.unmount_lossyfs())?;
            if self.spec.wipe_on_setup {
                self.run(node, &control.wipe_all())?;
            }
            if self.spec.kind == Kind::Kafka {
                let properties = self.kafka_properties(info);
                let configure = scripts.kafka().configure();
                self.remote
                    .run(self.host(node)?, &configure, properties.as_bytes())?;
            } else if scripts.mode() == Mode::Systemd {
                let toml = settings_toml(&self.node_settings(info));
                let configure = scripts.configure(info.role);
                self.remote
                    .run(self.host(node)?, &configure, toml.as_bytes())?;
            }
            Ok(())
        });
        first_error(results, "setup").map(|_| ())
    }

    /// Mounts the lossy filesystem over every node's data directory (`SshSpec::lossy_fs`).
    fn mount_lossy_filesystems(&self) -> Result<()> {
        let results = on_each(&self.names(), |node| {
            self.run(node, &self.scripts(node).mount_lossyfs())
                .map(|_| ())
        });
        first_error(results, "mount the lossy filesystem").map(|_| ())
    }

    fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut first_error = self.net.heal().err();
        // Unmounted after the broker stopped (a busy mount would only detach).
        let stopped = on_each(&self.names(), |node| {
            self.run(node, &self.control(node).stop())?;
            self.run(node, &self.scripts(node).unmount_lossyfs())
                .map(|_| ())
        });
        for (node, result) in stopped {
            if let Err(e) = result {
                first_error.get_or_insert(Error::State(format!("stop {node}: {e}")));
            }
        }
        self.paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.remote.close();
        first_error.map_or(Ok(()), Err)
    }
}

impl Teardown for Inner {
    fn teardown(&self) -> Result<()> {
        Inner::teardown(self)
    }

    fn label(&self) -> String {
        format!("ssh cluster of {} hosts", self.nodes.len())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("tidewater: teardown of the ssh cluster failed: {e}");
        }
    }
}

/// A cluster of hosts reached over ssh. Dropping it heals and stops the brokers.
pub struct SshCluster {
    inner: Arc<Inner>,
}

impl SshCluster {
    /// Runs only the [`preflight`] of every host of `spec` (ssh reachable, sudo, iptables, the
    /// broker binary or unit, free disk), changing nothing anywhere.
    pub fn preflight_only(spec: &SshSpec) -> Result<HostFacts> {
        spec.validate()?;
        let targets = spec
            .nodes
            .iter()
            .map(|n| (n.host.clone(), spec.target(n)))
            .collect();
        let remote = SshRemote::new(targets, spec.limits())?;
        preflight(spec, &remote, spec.install_binary.is_some())
    }

    /// Connects to every host with the system `ssh` and prepares them (see [`Self::with_remote`]).
    pub fn create(spec: SshSpec, settings: Vec<(String, String)>) -> Result<SshCluster> {
        spec.validate()?;
        let targets = spec
            .nodes
            .iter()
            .map(|n| (n.host.clone(), spec.target(n)))
            .collect();
        let remote = Arc::new(SshRemote::new(targets, spec.limits())?);
        SshCluster::with_remote(spec, settings, remote)
    }

    /// Prepares every host through `remote`: the [`preflight`] of every host, then Tidewater's
    /// iptables rules left by an earlier run are removed, a broker left running is stopped, the
    /// data and log are wiped (unless `wipe_on_setup` is off) and, under systemd, this run's
    /// settings are written. Starts nothing.
    pub fn with_remote(
        spec: SshSpec,
        settings: Vec<(String, String)>,
        remote: Arc<dyn Remote>,
    ) -> Result<SshCluster> {
        spec.validate()?;
        if std::env::var(crate::net::rules::METHOD_ENV).as_deref() == Ok("iproute") {
            return Err(Error::Config(
                "the ssh backend drops packets with iptables only (the ip-rule fallback would \
                 reorder the hosts' own routing rules)"
                    .into(),
            ));
        }
        // Settings Kafka cannot take are refused before any host is touched.
        let settings = match spec.kind {
            Kind::Tidewater => settings,
            Kind::Kafka => kafka::broker_properties(&settings).map_err(Error::Config)?,
        };
        let facts = preflight(&spec, remote.as_ref(), spec.install_binary.is_some())?;
        let nodes = spec.node_infos();
        let hosts = spec
            .nodes
            .iter()
            .map(|n| {
                let sudo = n.sudo.unwrap_or(spec.sudo);
                (n.name.clone(), (n.host.clone(), sudo))
            })
            .collect();
        let mut addrs: BTreeMap<String, Ipv4Addr> =
            nodes.iter().map(|n| (n.name.clone(), n.ip)).collect();
        let client_ip = spec.client_ip.or(facts.client_ip);
        if let Some(ip) = client_ip {
            addrs.insert(CLIENT.to_string(), ip);
        }
        let shell = RemoteShell {
            remote: remote.clone(),
            hosts,
            ssh_ports: facts.ssh_ports,
        };
        let net = RuleNet::new(Arc::new(shell), Method::Iptables, addrs)?;
        let inner = Inner {
            spec,
            settings,
            nodes,
            remote,
            paused: Mutex::new(BTreeSet::new()),
            net,
            client_ip,
            modes: facts.modes,
            torn_down: AtomicBool::new(false),
        };
        inner.net.heal()?;
        inner.prepare_hosts()?;
        let inner = Arc::new(inner);
        let weak: std::sync::Weak<dyn Teardown> = Arc::downgrade(&inner) as _;
        guard::register(weak);
        if inner.spec.lossy_fs {
            // Registered first, so a failed mount is unmounted by the teardown too.
            inner.mount_lossy_filesystems()?;
        }
        Ok(SshCluster { inner })
    }

    /// The cluster file this cluster was made from.
    pub fn spec(&self) -> &SshSpec {
        &self.inner.spec
    }

    /// How `node`'s broker is run (what `control = "auto"` decided for its host).
    pub fn mode(&self, node: &str) -> Mode {
        self.inner.mode(node)
    }

    /// The harness host's address as the hosts see it, if known (needed to cut clients off).
    pub fn client_ip(&self) -> Option<Ipv4Addr> {
        self.inner.client_ip
    }

    /// Copies `local` to every host's `binary`, on all hosts at once, skipping hosts whose
    /// binary already has the same sha256. Returns the nodes that received a copy.
    pub fn install_binary(&self, local: &Path) -> Result<Vec<String>> {
        self.install(local, "install the broker binary", |s| s.binary.clone())
    }

    /// Copies `local` (a `tidewater-lossyfs`) to every host's `lossyfs_binary` where its
    /// sha256 differs; returns the nodes it was copied to.
    pub fn install_lossyfs(&self, local: &Path) -> Result<Vec<String>> {
        self.install(local, "install the lossy filesystem", |s| {
            s.lossyfs_binary.clone()
        })
    }

    /// Copies `local` to the path `remote_path` picks for each node, where the digests differ.
    fn install(
        &self,
        local: &Path,
        what: &str,
        remote_path: impl Fn(&Scripts) -> String + Sync,
    ) -> Result<Vec<String>> {
        let digest = local_digest(local)?;
        let results = on_each(&self.inner.names(), |node| {
            let scripts = self.inner.scripts(node);
            let path = remote_path(&scripts);
            let remote_digest = self.inner.run(node, &scripts.file_digest(&path))?;
            if remote_digest.trim() == digest {
                return Ok(None);
            }
            let host = self.inner.host(node)?;
            self.inner
                .remote
                .upload(host, &scripts.install_file(&path), local)?;
            Ok(Some(node.to_string()))
        });
        Ok(first_error(results, what)?.into_iter().flatten().collect())
    }

    /// Starts every node that is not running, controller first.
    pub fn start_all(&self) -> Result<()> {
        for node in self.node_names() {
            self.start(&node)?;
        }
        Ok(())
    }
}

impl Cluster for SshCluster {
    fn nodes(&self) -> &[NodeInfo] {
        &self.inner.nodes
    }

    fn start(&self, node: &str) -> Result<()> {
        let info = self.node(node)?.clone();
        self.inner
            .run(node, &self.inner.start_script(&info))
            .map(|_| ())
    }

    fn stop(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.control(node).stop())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        Ok(())
    }

    fn kill(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.control(node).kill())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        Ok(())
    }

    fn pause(&self, node: &str) -> Result<()> {
        if !self.is_running(node) {
            return Err(Error::State(format!(
                "cannot pause {node}: it is not running"
            )));
        }
        self.inner.run(node, &self.inner.control(node).pause())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_string());
        Ok(())
    }

    fn resume(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.control(node).resume())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        Ok(())
    }

    fn wipe(&self, node: &str) -> Result<()> {
        if self.is_running(node) {
            return Err(Error::State(format!("stop {node} before wiping its data")));
        }
        self.inner
            .run(node, &self.inner.control(node).wipe())
            .map(|_| ())
    }

    fn power_loss(&self, node: &str, torn_seed: Option<u64>) -> Result<()> {
        self.node(node)?;
        if !self.inner.spec.lossy_fs {
            return Err(Error::Unsupported(format!(
                "power-loss of {node}: its data directory is not on a lossy filesystem (run \
                 with --lossy-fs)"
            )));
        }
        // The broker must be gone before its unsynced writes are: a survivor would write on.
        self.kill(node)?;
        self.inner
            .run(node, &self.inner.scripts(node).lose_unsynced(torn_seed))
            .map(|_| ())
    }

    fn is_running(&self, node: &str) -> bool {
        self.inner
            .run(node, &self.inner.control(node).is_running())
            .is_ok()
    }

    fn is_paused(&self, node: &str) -> bool {
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(node)
    }

    fn collect_logs(&self, node: &str, dest: &Path) -> Result<()> {
        let host = self.inner.host(node)?;
        std::fs::create_dir_all(dest)
            .map_err(|e| Error::io(format!("create {}", dest.display()), e))?;
        for (file, script) in self.inner.control(node).logs() {
            self.inner
                .remote
                .download(host, &script, &dest.join(file))?;
        }
        Ok(())
    }

    fn kafka_bootstrap(&self) -> BTreeMap<String, SocketAddr> {
        self.inner.spec.kafka_bootstrap()
    }

    fn net(&self) -> &dyn Net {
        &self.inner.net
    }

    fn teardown(&self) -> Result<()> {
        self.inner.teardown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records scripts; fails those containing any of `failing`; answers those containing a
    /// key of `answers` with its value.
    #[derive(Default)]
    struct FakeRemote {
        log: Mutex<Vec<(String, String, String)>>,
        failing: Vec<&'static str>,
        answers: Vec<(&'static str, &'static str)>,
    }

    impl Remote for FakeRemote {
        fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
            let stdin = String::from_utf8_lossy(stdin).into_owned();
            self.log
                .lock()
                .unwrap()
                .push((host.into(), script.into(), stdin));
            if self.failing.iter().any(|f| script.contains(f)) {
                return Err(Error::Command {
                    command: script.into(),
                    status: Some(1),
                    stderr: String::new(),
                });
            }
            let answer = self.answers.iter().find(|(k, _)| script.contains(k));
            Ok(answer.map_or(String::new(), |(_, v)| v.to_string()))
        }
    }

    const SPEC: &str = r#"
        client_ip = "192.168.56.1"
        ssh_options = ["-F", "ssh-config"]
        [[node]]
        name = "c1"
        host = "c1"
        ip = "192.168.56.10"
        [[node]]
        name = "n2"
        host = "vagrant@192.168.56.12"
        ip = "192.168.56.12"
        [[node]]
        name = "n1"
        host = "n1"
        ip = "192.168.56.11"
    "#;

    fn cluster(remote: Arc<FakeRemote>) -> SshCluster {
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        let settings = vec![("min.insync.replicas".to_string(), "2".to_string())];
        SshCluster::with_remote(spec, settings, remote).unwrap()
    }

    #[test]
    fn setup_stops_wipes_heals_and_writes_each_nodes_settings() {
        let remote = Arc::new(FakeRemote::default());
        let c = cluster(remote.clone());
        let names: Vec<_> = c.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["c1", "n1", "n2"]);
        let log = remote.log.lock().unwrap().clone();
        let config = log
            .iter()
            .find(|(h, s, _)| {
                h == "vagrant@192.168.56.12" && s.contains("cat > /etc/tidewater/broker.toml")
            })
            .expect("n2's settings written");
        assert_eq!(
            config.2,
            "# Written by the Tidewater harness for this run.\n\
             \"broker.id\" = \"2\"\n\
             \"controller.address\" = \"http://192.168.56.10:9092\"\n\
             \"kafka.listeners\" = \"PLAINTEXT://192.168.56.12:9093\"\n\
             \"listeners\" = \"http://192.168.56.12:9092\"\n\
             \"log.dirs\" = \"/var/lib/tidewater/data\"\n\
             \"min.insync.replicas\" = \"2\"\n"
        );
        assert!(config
            .1
            .contains("echo TIDEWATER_ROLE=broker > /etc/tidewater/role.env"));
        let c1_stop = log
            .iter()
            .position(|(h, s, _)| h == "c1" && s.contains("systemctl stop"))
            .unwrap();
        let c1_wipe = log
            .iter()
            .position(|(h, s, _)| h == "c1" && s.contains("rm -rf"))
            .unwrap();
        assert!(c1_stop < c1_wipe, "wipe only after the broker stopped");
        assert!(log
            .iter()
            .any(|(h, s, _)| h == "n1" && s.contains("sudo -n iptables -w -X TIDEWATER")));
        drop(c);
    }

    #[test]
    fn faults_become_systemctl_signals_and_iptables_rules_on_the_right_host() {
        let remote = Arc::new(FakeRemote::default());
        let c = cluster(remote.clone());
        remote.log.lock().unwrap().clear();
        c.kill("n1").unwrap();
        c.pause("n2").unwrap();
        assert!(c.is_paused("n2"));
        c.net()
            .partition(&crate::net::cut_clients(&["n2".to_string()]))
            .unwrap();
        let log = remote.log.lock().unwrap().clone();
        let scripts: Vec<(&str, &str)> = log
            .iter()
            .map(|(h, s, _)| (h.as_str(), s.as_str()))
            .collect();
        assert!(
            scripts[0].0 == "n1"
                && scripts[0]
                    .1
                    .starts_with("sudo -n sh -c 'systemctl kill -s SIGKILL tidewater-broker'")
        );
        assert!(scripts.contains(&(
            "vagrant@192.168.56.12",
            "sudo -n sh -c 'systemctl kill -s SIGSTOP tidewater-broker'"
        )));
        assert!(scripts
            .iter()
            .any(|(h, s)| *h == "vagrant@192.168.56.12"
                && s.lines().any(|l| l
                    == "sudo -n iptables -w -A TIDEWATER -s 192.168.56.1/32 -j DROP || exit 1")));
        let rule_hosts: BTreeSet<&str> = scripts
            .iter()
            .filter(|(_, s)| s.contains("-j DROP"))
            .map(|(h, _)| *h)
            .collect();
        assert_eq!(
            rule_hosts,
            BTreeSet::from(["vagrant@192.168.56.12"]),
            "rules on n2 only"
        );
        remote.log.lock().unwrap().clear();
        c.teardown().unwrap();
        let log = remote.log.lock().unwrap().clone();
        assert!(log.iter().any(|(h, s, _)| h == "vagrant@192.168.56.12"
            && s.contains("SIGCONT")
            && s.contains("systemctl stop")));
    }

    #[test]
    fn power_loss_mounts_lossyfs_kills_then_loses_and_teardown_unmounts() {
        let remote = Arc::new(FakeRemote::default());
        let c = cluster(remote.clone());
        assert!(matches!(
            c.power_loss("n1", None),
            Err(Error::Unsupported(_))
        ));
        assert!(
            !remote
                .log
                .lock()
                .unwrap()
                .iter()
                .any(|(_, s, _)| s.contains("lossyfs mount")
                    || s.contains("tidewater-lossyfs' mount")),
            "nothing mounted without lossy_fs"
        );

        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.lossy_fs = true;
        spec.lossyfs_binary = "/opt/tw/{node}/tidewater".into();
        let remote = Arc::new(FakeRemote::default());
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let log = remote.log.lock().unwrap().clone();
        let on_n1 = |what: &str| {
            log.iter()
                .position(|(h, s, _)| h == "n1" && s.contains(what))
                .unwrap_or_else(|| panic!("no {what:?} on n1: {log:#?}"))
        };
        let mount = on_n1("lossyfs mount");
        assert!(log[mount].1.contains(
            "setsid /opt/tw/n1/tidewater lossyfs mount /var/lib/tidewater/data.durable \
             /var/lib/tidewater/data"
        ));
        assert!(log[mount]
            .1
            .contains("test -e /var/lib/tidewater/data/.lossyfs-control"));
        assert!(
            on_n1("umount -l") < on_n1("rm -rf"),
            "leftovers unmounted before the wipe"
        );
        assert!(on_n1("rm -rf") < mount, "mounted over the wiped data");
        assert!(
            log.iter().any(|(_, s, _)| s.contains("test -c /dev/fuse")),
            "preflight checks FUSE"
        );

        remote.log.lock().unwrap().clear();
        c.power_loss("n1", Some(7)).unwrap();
        let log = remote.log.lock().unwrap().clone();
        assert_eq!(log.len(), 2, "{log:#?}");
        assert!(log[0].1.contains("SIGKILL"), "killed first: {log:#?}");
        assert!(log[1].1.contains("lose-unsynced torn 7"), "{log:#?}");
        assert!(log[1]
            .1
            .contains("> /var/lib/tidewater/data/.lossyfs-control"));

        remote.log.lock().unwrap().clear();
        c.teardown().unwrap();
        let log = remote.log.lock().unwrap().clone();
        let stop = log
            .iter()
            .position(|(h, s, _)| h == "n1" && s.contains("systemctl stop"))
            .unwrap();
        let unmount = log
            .iter()
            .position(|(h, s, _)| h == "n1" && s.contains("kill -TERM $pid"))
            .unwrap();
        assert!(stop < unmount, "unmounted once the broker stopped");
        assert!(log[unmount]
            .1
            .contains(" /var/lib/tidewater/data fuse.lossyfs "));
        assert!(log[unmount].1.contains("umount -l /var/lib/tidewater/data"));
    }

    #[test]
    fn process_control_starts_with_setsid_and_signals_the_group() {
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.control = Control::Process;
        spec.sudo = false;
        spec.remote_dir = "/srv/tw run/{node}".into();
        let scripts = Scripts::new(&spec, "n1");
        let start = scripts.start(&["/bin/b".into(), "--set".into(), "k=v w".into()]);
        assert!(start.contains("cd '/srv/tw run/n1'"), "{start}");
        assert!(
            start.contains("setsid /bin/b --set 'k=v w' >> broker.log"),
            "{start}"
        );
        assert!(
            start.contains("echo $! > '/srv/tw run/n1/broker.pid'"),
            "{start}"
        );
        assert!(scripts
            .kill()
            .starts_with("test -f '/srv/tw run/n1/broker.pid' && kill -KILL -- -$(cat"));
    }

    #[test]
    fn unreachable_hosts_and_bad_node_lists_are_refused() {
        let remote = Arc::new(FakeRemote {
            failing: vec!["true"],
            ..FakeRemote::default()
        });
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        let err = SshCluster::with_remote(spec, vec![], remote)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("preflight failed"), "{err}");
        assert!(err.contains("c1 (c1): unreachable over ssh"), "{err}");
        assert!(err.contains("n1 (n1): unreachable over ssh"), "{err}");
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.nodes[1].name = "n5".into();
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("c1 and n1..nN"));
    }

    #[test]
    fn quoting_survives_spaces_and_quotes() {
        assert_eq!(quote("plain-word_1.2"), "plain-word_1.2");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

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

    #[test]
    fn per_node_paths_and_sudo_come_from_the_node_or_the_node_name() {
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.remote_dir = "/srv/{node}".into();
        spec.binary = "/srv/{node}/bin/broker".into();
        spec.nodes[0].remote_dir = Some("/data/controller".into());
        spec.nodes[0].sudo = Some(false);
        let c1 = Scripts::new(&spec, "c1");
        assert_eq!(c1.data_dir(), "/data/controller/data");
        assert!(!c1.wipe().starts_with("sudo"), "{}", c1.wipe());
        let n1 = Scripts::new(&spec, "n1");
        assert_eq!(n1.data_dir(), "/srv/n1/data");
        assert_eq!(n1.binary, "/srv/n1/bin/broker");
        assert!(n1.wipe().starts_with("sudo -n sh -c"), "{}", n1.wipe());
    }

    #[test]
    fn preflight_reports_every_problem_of_every_host_at_once() {
        let remote = Arc::new(FakeRemote {
            answers: vec![(
                "client=",
                "client=192.168.56.1\nproblem: iptables is not installed\n",
            )],
            ..FakeRemote::default()
        });
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        let err = SshCluster::with_remote(spec, vec![], remote.clone())
            .err()
            .unwrap()
            .to_string();
        for node in ["c1 (c1)", "n1 (n1)", "n2 (vagrant@192.168.56.12)"] {
            assert!(
                err.contains(&format!("{node}: iptables is not installed")),
                "{err}"
            );
        }
        let log = remote.log.lock().unwrap();
        assert_eq!(log.len(), 3, "nothing but the preflight ran: {log:?}");
        assert!(log[0].1.contains("sudo -n true"), "{}", log[0].1);
        assert!(log[0].1.contains("systemctl cat tidewater-broker"));
        assert!(
            log[0].1.contains("df -Pk"),
            "free disk is checked: {}",
            log[0].1
        );
    }

    #[test]
    fn the_client_address_is_learnt_from_ssh_client_when_not_given() {
        let remote = Arc::new(FakeRemote {
            answers: vec![("client=", "client=10.9.0.1\nsshport=2222\n")],
            ..FakeRemote::default()
        });
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.client_ip = None;
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        assert_eq!(c.client_ip(), Some(Ipv4Addr::new(10, 9, 0, 1)));
        remote.log.lock().unwrap().clear();
        c.net()
            .partition(&crate::net::cut_clients(&["n1".to_string()]))
            .unwrap();
        let log = remote.log.lock().unwrap();
        let rules = log
            .iter()
            .find(|(h, s, _)| h == "n1" && s.contains("-j DROP"))
            .map(|(_, s, _)| s.clone())
            .expect("rules on n1");
        let lines: Vec<&str> = rules.lines().collect();
        let exempt = lines
            .iter()
            .position(|l| l.contains("-A TIDEWATER -p tcp --dport 2222 -j RETURN"))
            .expect("the harness's ssh port stays open");
        let drop = lines
            .iter()
            .position(|l| l.contains("-A TIDEWATER -s 10.9.0.1/32 -j DROP"))
            .expect("the client is cut off");
        assert!(exempt < drop, "the exemption comes first:\n{rules}");
    }

    #[test]
    fn a_binary_is_uploaded_only_where_its_digest_differs() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("broker");
        std::fs::write(&local, b"binary v2").unwrap();
        let digest = local_digest(&local).unwrap();
        assert_eq!(digest.len(), 64);
        let same: &'static str = Box::leak(format!("{digest}\n").into_boxed_str());
        // c1 has this binary already, n1 another one, n2 none.
        let remote = Arc::new(HostAnswers {
            inner: FakeRemote::default(),
            preflight_of: BTreeMap::new(),
            digest_of: BTreeMap::from([
                ("c1", same),
                ("n1", "0000\n"),
                ("vagrant@192.168.56.12", ""),
            ]),
        });
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let mut installed = c.install_binary(&local).unwrap();
        installed.sort();
        assert_eq!(installed, ["n1", "n2"]);
        let log = remote.inner.log.lock().unwrap();
        let upload = log
            .iter()
            .find(|(h, s, _)| h == "n1" && s.contains(".tw-new."))
            .expect("an upload to n1");
        assert_eq!(upload.2, "binary v2");
        assert!(upload.1.contains(
            "mv -f /usr/local/bin/tidewater-broker.tw-new.$$ /usr/local/bin/tidewater-broker"
        ));
    }

    #[test]
    fn the_lossy_filesystem_is_installed_at_lossyfs_binary_and_not_asked_of_the_preflight() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("tidewater-lossyfs");
        std::fs::write(&local, b"lossyfs v2").unwrap();
        let remote = Arc::new(FakeRemote::default());
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.lossy_fs = true;
        spec.lossyfs_binary = "/opt/tw/{node}/lossyfs".into();
        spec.install_lossyfs = Some(local.clone());
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let mut installed = c.install_lossyfs(&local).unwrap();
        installed.sort();
        assert_eq!(installed, ["c1", "n1", "n2"]);
        let log = remote.log.lock().unwrap();
        let preflight = &log[0].1;
        assert!(preflight.contains("/dev/fuse"), "{preflight}");
        assert!(
            !preflight.contains("is not an executable (power loss"),
            "what is about to be installed is not checked: {preflight}"
        );
        let upload = log
            .iter()
            .find(|(h, s, _)| h == "n1" && s.contains(".tw-new."))
            .expect("an upload to n1");
        assert_eq!(upload.2, "lossyfs v2");
        assert!(
            upload
                .1
                .contains("mv -f /opt/tw/n1/lossyfs.tw-new.$$ /opt/tw/n1/lossyfs"),
            "{}",
            upload.1
        );
        // Without the install, the preflight asks each host for its own copy.
        let remote = Arc::new(FakeRemote::default());
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.lossy_fs = true;
        SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let log = remote.log.lock().unwrap();
        assert!(
            log[0].1.contains("tidewater-lossyfs is not an executable"),
            "{}",
            log[0].1
        );
    }

    #[test]
    fn auto_control_uses_the_unit_where_the_host_has_it_and_a_process_elsewhere() {
        let remote = Arc::new(HostAnswers {
            inner: FakeRemote::default(),
            digest_of: BTreeMap::new(),
            preflight_of: BTreeMap::from([
                ("c1", "client=10.9.0.1\ncontrol=systemd\n"),
                ("n1", "client=10.9.0.1\ncontrol=process\n"),
                (
                    "vagrant@192.168.56.12",
                    "client=10.9.0.1\ncontrol=systemd\n",
                ),
            ]),
        });
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        assert_eq!(spec.control, Control::Auto, "the default");
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let log = remote.inner.log.lock().unwrap().clone();
        let preflight = &log.iter().find(|(h, _, _)| h == "n1").unwrap().1;
        assert!(
            preflight.contains("if systemctl cat tidewater-broker >/dev/null 2>&1; then"),
            "{preflight}"
        );
        assert_eq!(c.mode("n1"), Mode::Process);
        assert_eq!(c.mode("c1"), Mode::Systemd);
        let configured: BTreeSet<&str> = log
            .iter()
            .filter(|(_, s, _)| s.contains("cat > /etc/tidewater/broker.toml"))
            .map(|(h, _, _)| h.as_str())
            .collect();
        assert_eq!(configured, BTreeSet::from(["c1", "vagrant@192.168.56.12"]));
        remote.inner.log.lock().unwrap().clear();
        c.start("n1").unwrap();
        c.start("c1").unwrap();
        let log = remote.inner.log.lock().unwrap().clone();
        assert!(log[0]
            .1
            .contains("setsid /usr/local/bin/tidewater-broker --role broker"));
        assert!(log[1].1.contains("systemctl start tidewater-broker"));
    }

    #[test]
    fn logs_and_the_units_journal_are_copied_into_the_node_directory() {
        let remote = Arc::new(FakeRemote {
            answers: vec![
                ("broker.log", "line 1\nline 2\n"),
                ("journalctl", "Started tidewater-broker.service\n"),
            ],
            ..FakeRemote::default()
        });
        let spec: SshSpec = toml::from_str(SPEC).unwrap();
        let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("nodes/n1");
        c.collect_logs("n1", &dest).unwrap();
        let log = std::fs::read_to_string(dest.join("broker.log")).unwrap();
        assert_eq!(log, "line 1\nline 2\n");
        let journal = std::fs::read_to_string(dest.join("journal.log")).unwrap();
        assert_eq!(journal, "Started tidewater-broker.service\n");
    }

    fn kafka_spec() -> SshSpec {
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.kind = Kind::Kafka;
        spec
    }

    #[test]
    fn a_kafka_cluster_writes_each_nodes_properties_and_controls_kafka_by_its_pid() {
        let remote = Arc::new(FakeRemote {
            answers: vec![("server.log", "INFO [KafkaServer id=1] started\n")],
            ..FakeRemote::default()
        });
        let settings = vec![
            ("min.insync.replicas".to_string(), "2".to_string()),
            ("flush.messages".to_string(), "1".to_string()),
        ];
        let c = SshCluster::with_remote(kafka_spec(), settings, remote.clone()).unwrap();
        assert_eq!(c.mode("n1"), Mode::Process);
        let log = remote.log.lock().unwrap().clone();
        let written = log
            .iter()
            .find(|(h, s, _)| {
                h == "vagrant@192.168.56.12"
                    && s.contains("cat > /var/lib/tidewater/server.properties")
            })
            .expect("n2's server.properties written");
        for line in [
            "process.roles=broker",
            "node.id=2",
            "controller.quorum.voters=0@192.168.56.10:9093",
            "advertised.listeners=PLAINTEXT://192.168.56.12:9092",
            "log.dirs=/var/lib/tidewater/data",
            "min.insync.replicas=2",
            "log.flush.interval.messages=1",
        ] {
            assert!(
                written.2.lines().any(|l| l == line),
                "{line}:\n{}",
                written.2
            );
        }
        assert!(
            !log.iter()
                .any(|(_, s, _)| s.contains("broker.toml") || s.contains("systemctl")),
            "nothing of the companion broker's unit"
        );
        let wipe = log
            .iter()
            .position(|(h, s, _)| h == "c1" && s.contains("rm -rf /var/lib/tidewater/data"))
            .expect("c1 wiped");
        let stop = log
            .iter()
            .position(|(h, s, _)| h == "c1" && s.contains("kill -TERM"))
            .expect("c1 stopped");
        assert!(stop < wipe, "wipe only after Kafka stopped");
        remote.log.lock().unwrap().clear();
        c.start("n1").unwrap();
        c.kill("n1").unwrap();
        c.pause("n2").unwrap();
        c.resume("n2").unwrap();
        let log = remote.log.lock().unwrap().clone();
        let on = |host: &str| -> Vec<String> {
            log.iter()
                .filter(|(h, _, _)| h == host)
                .map(|(_, s, _)| s.clone())
                .collect()
        };
        let n1 = on("n1");
        assert!(
            n1[0].contains("/opt/kafka/bin/kafka-server-start.sh"),
            "{}",
            n1[0]
        );
        assert!(n1[0].contains("kafka-storage.sh format -t VGlkZXdhdGVyS2Fma2EwMQ"));
        assert!(n1[1].contains("kill -KILL \"$pid\""), "{}", n1[1]);
        let n2 = on("vagrant@192.168.56.12");
        assert!(
            n2.iter().any(|s| s.contains("kill -STOP \"$pid\"")),
            "{n2:?}"
        );
        assert!(n2.last().unwrap().contains("kill -CONT \"$pid\""), "{n2:?}");
        let dir = tempfile::tempdir().unwrap();
        c.collect_logs("n1", dir.path()).unwrap();
        for file in [
            "broker.log",
            "server.properties",
            "server.log",
            "controller.log",
        ] {
            assert!(dir.path().join(file).is_file(), "{file}");
        }
        let server = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
        assert_eq!(server, "INFO [KafkaServer id=1] started\n");
        let bootstrap: Vec<String> = c
            .kafka_bootstrap()
            .iter()
            .map(|(n, a)| format!("{n}={a}"))
            .collect();
        assert_eq!(
            bootstrap,
            ["n1=192.168.56.11:9092", "n2=192.168.56.12:9092"]
        );
        remote.log.lock().unwrap().clear();
        c.teardown().unwrap();
        let log = remote.log.lock().unwrap().clone();
        assert_eq!(
            log.iter()
                .filter(|(_, s, _)| s.contains("kill -TERM") && !s.contains("lossyfs.pid"))
                .count(),
            3,
            "teardown stops Kafka on every host"
        );
    }

    #[test]
    fn a_kafka_cluster_refuses_settings_kafka_lacks_before_touching_any_host() {
        let remote = Arc::new(FakeRemote::default());
        let settings = vec![(
            "tidewater.unsafe.serve.lagging.hw.enable".to_string(),
            "true".to_string(),
        )];
        let err = SshCluster::with_remote(kafka_spec(), settings, remote.clone())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("Kafka has no equivalent"), "{err}");
        assert!(remote.log.lock().unwrap().is_empty(), "no host was touched");
    }

    #[test]
    fn the_preflight_of_a_kafka_host_checks_kafka_and_java_instead_of_the_unit() {
        let remote = Arc::new(FakeRemote {
            answers: vec![(
                "client=",
                "client=192.168.56.1\nproblem: /opt/kafka/bin/kafka-server-start.sh is not an \
                 executable\n",
            )],
            ..FakeRemote::default()
        });
        let err = SshCluster::with_remote(kafka_spec(), vec![], remote.clone())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("n1 (n1): /opt/kafka/bin/kafka-server-start.sh"),
            "{err}"
        );
        let log = remote.log.lock().unwrap();
        let preflight = &log[0].1;
        for check in [
            "test -x /opt/kafka/bin/kafka-server-start.sh",
            "test -x /opt/kafka/bin/kafka-storage.sh",
            "command -v java",
            "command -v setsid",
            "command -v iptables",
        ] {
            assert!(preflight.contains(check), "{check}: {preflight}");
        }
        assert!(!preflight.contains("systemctl"), "{preflight}");
    }

    #[test]
    fn the_kind_and_the_kafka_table_must_agree_with_the_rest_of_the_file() {
        let mut spec = kafka_spec();
        spec.control = Control::Systemd;
        assert!(spec.validate().unwrap_err().to_string().contains("control"));
        let mut spec = kafka_spec();
        spec.install_binary = Some("auto".into());
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("remove install_binary"));
        let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
        spec.kafka.port = 19092;
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("kind = \"kafka\" only"));
        assert!(spec.kafka_bootstrap().is_empty() || spec.kind == Kind::Kafka);
        let spec: SshSpec = toml::from_str(&format!(
            "kind = \"kafka\"\n{SPEC}\n[kafka]\nhome = \"/srv/kafka\"\nquorum = \"combined\"\n\
             [kafka.properties]\n\"num.io.threads\" = 4\n"
        ))
        .unwrap();
        spec.validate().unwrap();
        assert_eq!(spec.kafka.quorum, Quorum::Combined);
        assert_eq!(spec.kafka.properties["num.io.threads"], "4");
    }

    /// Answers `sha256sum` and the preflight per host.
    struct HostAnswers {
        inner: FakeRemote,
        digest_of: BTreeMap<&'static str, &'static str>,
        preflight_of: BTreeMap<&'static str, &'static str>,
    }

    impl Remote for HostAnswers {
        fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
            let out = self.inner.run(host, script, stdin)?;
            if script.contains("sha256sum") {
                return Ok(self.digest_of.get(host).copied().unwrap_or("").to_string());
            }
            if script.contains("client=") {
                return Ok(self
                    .preflight_of
                    .get(host)
                    .copied()
                    .unwrap_or("")
                    .to_string());
            }
            Ok(out)
        }
    }
}
