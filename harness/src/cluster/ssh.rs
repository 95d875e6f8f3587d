//! The ssh backend: nodes are hosts (Vagrant VMs, or any machines) reached with the system
//! `ssh`, for nightly runs on real networks. See `docs/cluster.md#the-ssh-backend`.
//!
//! Two ways to control the broker on a host:
//! - `systemd` (default, what `vagrant/provision.sh` installs): the harness writes the run's
//!   settings to `/etc/tidewater/broker.toml` and the role to `/etc/tidewater/role.env`, then
//!   drives the `tidewater-broker` unit (`systemctl start/stop`, `systemctl kill -s SIG...`).
//! - `process`: the harness starts the binary itself with `setsid` in `remote_dir`, keeps its
//!   pid in `remote_dir/broker.pid` and signals its process group.
//!
//! Network faults use iptables on each host, in Tidewater's own chain (see [`crate::net::rules`]);
//! the `ip rule` fallback is refused here because it would reorder the host's own rules.

use super::guard::{self, Teardown};
use super::{node_settings, Cluster, Error, NodeInfo, Result, Role, CONTROLLER};
use crate::net::rules::Method;
use crate::net::rules::{commands_script, Cmd, NodeShell, RuleNet};
use crate::net::{Net, CLIENT};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How the broker is run on each host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// Through the systemd unit installed by provisioning.
    #[default]
    Systemd,
    /// As a process the harness starts with `setsid`, tracked by a pid file.
    Process,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshNode {
    /// `c1` or `nK`.
    pub name: String,
    /// The ssh destination: `user@address`, or a `Host` of the ssh config.
    pub host: String,
    /// The address the other nodes and the harness reach it at.
    pub ip: Ipv4Addr,
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
fn default_unit() -> String {
    "tidewater-broker".into()
}
fn default_config_path() -> String {
    "/etc/tidewater/broker.toml".into()
}
fn default_stop_timeout_s() -> u64 {
    10
}

/// A cluster file (`--cluster-file cluster.toml`): the hosts and how to reach them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSpec {
    /// Port of every node's HTTP listener.
    #[serde(default = "default_http_port")]
    pub http_port: u16,
    /// The harness host's address as the nodes see it; needed to cut clients off.
    #[serde(default)]
    pub client_ip: Option<Ipv4Addr>,
    /// Extra `ssh` arguments, e.g. `["-F", "vagrant/ssh-config"]`.
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// Prefix remote commands with `sudo -n` (needed unless logging in as root).
    #[serde(default = "default_true")]
    pub sudo: bool,
    /// systemd unit or plain process.
    #[serde(default)]
    pub control: Control,
    /// Where data (`data/`), the log (`broker.log`) and the pid file live on each host;
    /// `{node}` is replaced by the node's name (for hosts that share a file system).
    #[serde(default = "default_remote_dir")]
    pub remote_dir: String,
    /// The broker binary on the hosts (process control).
    #[serde(default = "default_binary")]
    pub binary: String,
    /// The systemd unit (systemd control).
    #[serde(default = "default_unit")]
    pub unit: String,
    /// The unit's settings file (systemd control); `role.env` goes next to it.
    #[serde(default = "default_config_path")]
    pub config_path: String,
    /// Bound between SIGTERM and SIGKILL (process control; systemd uses `TimeoutStopSec`).
    #[serde(default = "default_stop_timeout_s")]
    pub stop_timeout_s: u64,
    /// Delete every node's data when the cluster is set up, so runs are independent.
    #[serde(default = "default_true")]
    pub wipe_on_setup: bool,
    /// The hosts: `c1` and `n1..nN`.
    #[serde(rename = "node")]
    pub nodes: Vec<SshNode>,
}

impl SshSpec {
    /// Reads a cluster file.
    pub fn load(path: &Path) -> Result<SshSpec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let spec: SshSpec =
            toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<()> {
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
        Ok(())
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
}

/// Runs shell scripts on hosts.
pub trait Remote: Send + Sync {
    /// Runs `script` (POSIX sh) on `host` with `stdin`; its stdout on exit status 0.
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String>;
}

/// [`Remote`] over the system `ssh`, in batch mode (never prompts), with a connection timeout
/// and a shared master connection per host so repeated commands are fast.
pub struct SshRemote {
    /// Extra arguments (`-F FILE`, `-i KEY`, ...).
    options: Vec<String>,
}

impl SshRemote {
    /// A remote with extra `ssh` arguments.
    pub fn new(options: Vec<String>) -> SshRemote {
        SshRemote { options }
    }
}

impl Remote for SshRemote {
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
        let fixed = [
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ControlMaster=auto",
            "-o",
            "ControlPath=/tmp/tidewater-ssh-%C",
            "-o",
            "ControlPersist=60",
        ];
        let mut child = Command::new("ssh")
            .args(fixed)
            .args(&self.options)
            .arg(host)
            .arg("--")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io("run ssh", e))?;
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(stdin)
                .map_err(|e| Error::io(format!("write to ssh {host}"), e))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| Error::io(format!("wait for ssh {host}"), e))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::Command {
                command: format!("ssh {host} {script}"),
                status: out.status.code(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
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
    /// `remote_dir` for this node.
    dir: String,
}

impl<'a> Scripts<'a> {
    fn sudo(&self, script: &str) -> String {
        if self.spec.sudo {
            format!("sudo -n sh -c {}", quote(script))
        } else {
            script.to_string()
        }
    }

    fn new(spec: &'a SshSpec, node: &str) -> Scripts<'a> {
        Scripts {
            spec,
            dir: spec.remote_dir.replace("{node}", node),
        }
    }

    fn data_dir(&self) -> String {
        format!("{}/data", self.dir)
    }

    fn unit(&self) -> String {
        quote(&self.spec.unit)
    }

    fn pid_file(&self) -> String {
        quote(&format!("{}/broker.pid", self.dir))
    }

    /// Signals the broker (a process group in process control).
    fn signal(&self, sig: &str) -> String {
        match self.spec.control {
            Control::Systemd => self.sudo(&format!("systemctl kill -s {sig} {}", self.unit())),
            Control::Process => self.sudo(&format!(
                "test -f {p} && kill -{sig} -- -$(cat {p}) 2>/dev/null || true",
                p = self.pid_file()
            )),
        }
    }

    fn is_running(&self) -> String {
        match self.spec.control {
            Control::Systemd => format!("systemctl is-active --quiet {}", self.unit()),
            Control::Process => self.sudo(&format!(
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
        match self.spec.control {
            Control::Systemd => self.sudo(&format!(
                "systemctl reset-failed {u} >/dev/null 2>&1; systemctl start {u}",
                u = self.unit()
            )),
            Control::Process => {
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
        match self.spec.control {
            Control::Systemd => format!(
                "{}; {}",
                self.signal("SIGCONT"),
                self.sudo(&format!("systemctl stop {}", self.unit()))
            ),
            Control::Process => format!(
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
        let sig = match self.spec.control {
            Control::Systemd => "SIGKILL",
            Control::Process => "KILL",
        };
        format!("{}; {}", self.signal(sig), self.wait_gone(50))
    }

    fn pause(&self) -> String {
        self.signal(match self.spec.control {
            Control::Systemd => "SIGSTOP",
            Control::Process => "STOP",
        })
    }

    fn resume(&self) -> String {
        self.signal(match self.spec.control {
            Control::Systemd => "SIGCONT",
            Control::Process => "CONT",
        })
    }

    fn wipe(&self) -> String {
        let data = quote(&self.data_dir());
        self.sudo(&format!("rm -rf {data} && mkdir -p {data}"))
    }

    fn read_log(&self) -> String {
        self.sudo(&format!(
            "cat {} 2>/dev/null || true",
            quote(&format!("{}/broker.log", self.dir))
        ))
    }

    /// Writes the settings file (stdin) and the role for the systemd unit.
    fn configure(&self, role: Role) -> String {
        let config = quote(&self.spec.config_path);
        let dir = Path::new(&self.spec.config_path)
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

/// Runs rule commands on a host over the [`Remote`].
struct RemoteShell {
    /// Runs the scripts.
    remote: Arc<dyn Remote>,
    /// Node name -> ssh destination.
    hosts: BTreeMap<String, String>,
    /// Whether to use sudo.
    sudo: bool,
}

impl NodeShell for RemoteShell {
    fn exec(&self, node: &str, argv: &[String]) -> Result<()> {
        let host = self
            .hosts
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))?;
        let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let script = if self.sudo {
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
        let host = self
            .hosts
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))?;
        let prefix = if self.sudo { "sudo -n " } else { "" };
        let script = commands_script(cmds, prefix, quote);
        self.remote.run(host, &script, b"").map(|_| ())
    }
}

/// The shared state of an ssh cluster (also reachable from the signal guard).
struct Inner {
    /// The cluster file.
    spec: SshSpec,
    /// The run's broker settings (Kafka names), after the per-node ones.
    settings: Vec<(String, String)>,
    /// Every node, controller first.
    nodes: Vec<NodeInfo>,
    /// Runs commands on the hosts.
    remote: Arc<dyn Remote>,
    /// Nodes we paused and have not resumed (the host cannot tell us cheaply).
    paused: Mutex<BTreeSet<String>>,
    /// iptables rules on the hosts.
    net: RuleNet,
    /// Set by the first teardown.
    torn_down: AtomicBool,
}

impl Inner {
    fn host(&self, node: &str) -> Result<&str> {
        self.spec
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.host.as_str())
            .ok_or_else(|| Error::UnknownNode(node.to_string()))
    }

    fn run(&self, node: &str, script: &str) -> Result<String> {
        self.remote.run(self.host(node)?, script, b"")
    }

    fn scripts(&self, node: &str) -> Scripts<'_> {
        Scripts::new(&self.spec, node)
    }

    fn node_settings(&self, node: &NodeInfo) -> Vec<(String, String)> {
        let data = self.scripts(&node.name).data_dir();
        node_settings(node, &self.nodes[0], &data, &self.settings)
    }

    fn argv(&self, node: &NodeInfo) -> Vec<String> {
        let mut argv = vec![
            self.spec.binary.clone(),
            "--role".into(),
            node.role.as_flag().into(),
        ];
        for (k, v) in self.node_settings(node) {
            argv.push("--set".into());
            argv.push(format!("{k}={v}"));
        }
        argv
    }

    fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut first_error = self.net.heal().err();
        for node in &self.nodes {
            let stopped = self.run(&node.name, &self.scripts(&node.name).stop());
            if let Err(e) = stopped {
                first_error.get_or_insert(e);
            }
        }
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
    /// Connects to every host with the system `ssh` and prepares them (see [`Self::with_remote`]).
    pub fn create(spec: SshSpec, settings: Vec<(String, String)>) -> Result<SshCluster> {
        let remote = Arc::new(SshRemote::new(spec.ssh_options.clone()));
        SshCluster::with_remote(spec, settings, remote)
    }

    /// Prepares every host through `remote`: checks it answers, stops a broker left running,
    /// removes Tidewater's iptables rules left by an earlier run, wipes the data (unless
    /// `wipe_on_setup` is off) and, under systemd, writes this run's settings. Starts nothing.
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
        let nodes = spec.node_infos();
        let hosts: BTreeMap<String, String> = spec
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.host.clone()))
            .collect();
        let mut addrs: BTreeMap<String, Ipv4Addr> =
            nodes.iter().map(|n| (n.name.clone(), n.ip)).collect();
        if let Some(ip) = spec.client_ip {
            addrs.insert(CLIENT.to_string(), ip);
        }
        let shell = RemoteShell {
            remote: remote.clone(),
            hosts,
            sudo: spec.sudo,
        };
        let net = RuleNet::new(Arc::new(shell), Method::Iptables, addrs)?;
        let inner = Inner {
            spec,
            settings,
            nodes,
            remote,
            paused: Mutex::new(BTreeSet::new()),
            net,
            torn_down: AtomicBool::new(false),
        };
        for node in &inner.nodes {
            inner
                .run(&node.name, "true")
                .map_err(|e| Error::Config(format!("cannot reach {} over ssh: {e}", node.name)))?;
        }
        inner.net.heal()?;
        for node in &inner.nodes {
            let scripts = inner.scripts(&node.name);
            inner.run(&node.name, &scripts.stop())?;
            if inner.spec.wipe_on_setup {
                inner.run(&node.name, &scripts.wipe())?;
            }
            if inner.spec.control == Control::Systemd {
                let toml = settings_toml(&inner.node_settings(node));
                let host = inner.host(&node.name)?;
                inner
                    .remote
                    .run(host, &scripts.configure(node.role), toml.as_bytes())?;
            }
        }
        let inner = Arc::new(inner);
        let weak: std::sync::Weak<dyn Teardown> = Arc::downgrade(&inner) as _;
        guard::register(weak);
        Ok(SshCluster { inner })
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
        let argv = self.inner.argv(&info);
        self.inner
            .run(node, &self.inner.scripts(node).start(&argv))
            .map(|_| ())
    }

    fn stop(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.scripts(node).stop())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        Ok(())
    }

    fn kill(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.scripts(node).kill())?;
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
        self.inner.run(node, &self.inner.scripts(node).pause())?;
        self.inner
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_string());
        Ok(())
    }

    fn resume(&self, node: &str) -> Result<()> {
        self.inner.run(node, &self.inner.scripts(node).resume())?;
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
            .run(node, &self.inner.scripts(node).wipe())
            .map(|_| ())
    }

    fn is_running(&self, node: &str) -> bool {
        self.inner
            .run(node, &self.inner.scripts(node).is_running())
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
        let log = self.inner.run(node, &self.inner.scripts(node).read_log())?;
        std::fs::create_dir_all(dest)
            .map_err(|e| Error::io(format!("create {}", dest.display()), e))?;
        let path = dest.join("broker.log");
        std::fs::write(&path, log).map_err(|e| Error::io(format!("write {}", path.display()), e))
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

    /// Records scripts; fails those containing any of `failing`.
    #[derive(Default)]
    struct FakeRemote {
        log: Mutex<Vec<(String, String, String)>>,
        failing: Vec<&'static str>,
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
            Ok(String::new())
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
        assert!(err.contains("cannot reach c1 over ssh"), "{err}");
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
}
