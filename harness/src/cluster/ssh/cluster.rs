//! [`SshCluster`]: the hosts of a cluster file prepared, controlled and torn down through a
//! [`Remote`], with the run's settings written for each node.

use super::kafka;
use super::parallel::{first_error, on_each};
use super::preflight::{preflight, HostFacts};
use super::remote_shell::RemoteShell;
use super::scripts::{NodeControl, Scripts};
use super::spec::{Kind, Mode, SshSpec};
use super::transport::{Remote, SshRemote};
use crate::cluster::guard::{self, Teardown};
use crate::cluster::Role;
use crate::cluster::{node_settings, Cluster, Error, NodeInfo, Result};
use crate::kafka::LOG_TAIL_LINES;
use crate::net::rules::{Method, RuleNet};
use crate::net::{Net, CLIENT};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound on one connection attempt while waiting for Kafka to listen.
const LISTEN_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Lines of a Kafka node's `broker.log` read to quote the last [`LOG_TAIL_LINES`] of them
/// that are not stack frames.
const LOG_TAIL_SCAN_LINES: usize = 200;

/// Pause between those attempts (each also asks the host, over ssh, whether the JVM lives).
const LISTEN_PROBE_INTERVAL: Duration = Duration::from_millis(500);

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
pub(super) fn local_digest(path: &Path) -> Result<String> {
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

/// The shared state of an ssh cluster (also reachable from the signal guard).
struct Inner {
    /// The cluster file.
    spec: SshSpec,
    /// The run's broker settings (Kafka names), after the per-node ones; with `kind =
    /// "kafka"`, already mapped to Kafka's broker properties.
    settings: Vec<(String, String)>,
    /// With `kind = "kafka"`, the run's settings Kafka takes at format, as `--feature`
    /// values (`eligible.leader.replicas.version=0`).
    kafka_features: Vec<String>,
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
            Kind::Kafka => scripts
                .kafka()
                .with_format_features(&self.kafka_features)
                .start(),
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
        let mut first_error = self.net.heal_and_close().err();
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
        let (settings, kafka_features) = match spec.kind {
            Kind::Tidewater => (settings, Vec::new()),
            Kind::Kafka => (
                kafka::broker_properties(&settings).map_err(Error::Config)?,
                kafka::format_features(&settings).map_err(Error::Config)?,
            ),
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
            kafka_features,
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

    /// Starts every node that is not running, controller first. A Kafka node that does not
    /// start (its format failed) is named, with the end of its `broker.log`.
    pub fn start_all(&self) -> Result<()> {
        for node in self.node_names() {
            match self.start(&node) {
                Err(e) if self.inner.spec.kind == Kind::Kafka => {
                    return Err(Error::State(format!(
                        "Kafka on node {node} ({}) did not start: {e}; last lines of its \
                         broker.log:\n{}",
                        self.inner.host(&node)?,
                        self.kafka_log_tail(&node)
                    )))
                }
                result => result?,
            }
        }
        Ok(())
    }

    /// The last [`LOG_TAIL_LINES`] lines of a Kafka node's `broker.log`, indented, without
    /// stack frames.
    fn kafka_log_tail(&self, node: &str) -> String {
        let script = self
            .inner
            .scripts(node)
            .kafka()
            .log_tail(LOG_TAIL_SCAN_LINES);
        self.inner
            .run(node, &script)
            .map(|text| crate::kafka::fetch::last_lines(&text, LOG_TAIL_LINES))
            .unwrap_or_else(|e| format!("  (cannot read it: {e})"))
    }

    /// Waits, at most `limit`, until every node's Kafka accepts connections on its listener
    /// (`kind = "kafka"`, whose start returns once the JVM is launched): a broker's client
    /// listener, the controller's KRaft listener. A node whose JVM exits, or that does not
    /// listen in time, fails the setup with its name and the end of its `broker.log`, instead
    /// of a timeout further on.
    pub fn wait_kafka_listening(&self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        let kafka = &self.inner.spec.kafka;
        for node in &self.inner.nodes {
            let port = match node.role {
                Role::Broker => kafka.port,
                Role::Controller => kafka.controller_port,
            };
            let addr = SocketAddr::from((node.ip, port));
            while TcpStream::connect_timeout(&addr, LISTEN_PROBE_TIMEOUT).is_err() {
                let alive = self.is_running(&node.name);
                if alive && Instant::now() < deadline {
                    std::thread::sleep(LISTEN_PROBE_INTERVAL);
                    continue;
                }
                let why = if alive {
                    format!("does not accept connections on {addr} within {limit:?}")
                } else {
                    format!("exited before listening on {addr}")
                };
                let tail = self.kafka_log_tail(&node.name);
                return Err(Error::State(format!(
                    "Kafka on node {} ({}) {why}; last lines of its broker.log:\n{tail}",
                    node.name,
                    self.inner.host(&node.name)?
                )));
            }
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
