//! The local backend: each node is a network namespace on this machine with a veth into one
//! bridge; the harness reaches the nodes from the root namespace through the bridge.
//!
//! For a run id `ab12` and subnet `10.77.0.0/24`:
//!
//! | thing | name | address |
//! |---|---|---|
//! | bridge (harness side) | `twab12br` | 10.77.0.1 |
//! | controller `c1` | namespace `tw-ab12-c1`, veth `twab12c1` | 10.77.0.10 |
//! | broker `nK` | namespace `tw-ab12-nK`, veth `twab12nK` | 10.77.0.(10+K) |
//!
//! Processes run inside their namespace with data in `RUN_DIR/nodes/<node>/data` and output in
//! `RUN_DIR/nodes/<node>/broker.log`. With [`LocalSpec::lossy_fs`], each `data` directory is a
//! lossyfs mount (the `tidewater-lossyfs` crate) over `RUN_DIR/nodes/<node>/data.durable`,
//! which holds exactly what the node made durable; [`Cluster::power_loss`] kills the node and
//! discards the rest. Everything created is first recorded in a run record
//! (see [`state`]) so `tidewater clean` can remove it after a killed harness. Dropping the
//! cluster tears it down; see [`guard`] for signals.
//!
//! With [`NodeProgram::Kafka`] (`tidewater run --system kafka`) the nodes run Apache Kafka's
//! JVMs instead of the companion broker, in the same namespaces at the same addresses: `c1`
//! a KRaft controller, `nK` brokers (see [`kafka`]).

pub use crate::cluster::guard;

pub mod kafka;
pub mod process;
pub mod state;
pub mod sys;

use super::{node_list, Cluster, Error, NodeInfo, Result};
use crate::net::rules::{Method, NodeShell, RuleNet};
use crate::net::{Net, CLIENT};
use process::NodeProcess;
use state::RunState;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidewater_lossyfs::{LossyFs, Mode, MountHandle};

/// Name of the directory beside a node's `data` that backs its lossy filesystem.
pub const DURABLE_DIR_NAME: &str = "data.durable";

/// The environment variable naming the broker binary to run.
pub const BROKER_BIN_ENV: &str = "TIDEWATER_BROKER_BIN";

/// The default subnet (a /24); chosen to be unlikely to collide with real networks.
pub const DEFAULT_SUBNET: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 0);

/// The default port of every node's HTTP listener (each node has its own address).
pub const DEFAULT_HTTP_PORT: u16 = 9092;

/// Most brokers a /24 with addresses from .11 can hold, with room to spare.
pub const BROKERS_MAX: usize = 99;

/// Longest run id: interface names must fit in 15 bytes (`tw` + id + `n99p`).
pub const RUN_ID_LEN_MAX: usize = 6;

/// Gives the argv of a node's process from the node and its data directory.
pub type ArgvFn = dyn Fn(&NodeInfo, &Path) -> Vec<String> + Send + Sync;

/// What each node runs.
#[derive(Clone)]
pub enum NodeProgram {
    /// `tidewater-broker`, with `--role`, the per-node settings and `settings` (Kafka names).
    Broker {
        /// Path of the `tidewater-broker` binary.
        binary: PathBuf,
        /// Extra `--set key=value` for every node, after the per-node ones (so they win).
        settings: Vec<(String, String)>,
    },
    /// Apache Kafka in KRaft mode: `c1` a controller, `nK` brokers (node.id K).
    Kafka(kafka::KafkaProgram),
    /// Any program: the function gives the argv for a node and its data directory. Used by
    /// tests that need a long-running process but not a broker.
    Custom(Arc<ArgvFn>),
}

impl std::fmt::Debug for NodeProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeProgram::Broker { binary, settings } => f
                .debug_struct("Broker")
                .field("binary", binary)
                .field("settings", settings)
                .finish(),
            NodeProgram::Kafka(k) => f
                .debug_struct("Kafka")
                .field("version", &k.jvm.release.version)
                .finish(),
            NodeProgram::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Settings of a local cluster.
#[derive(Debug, Clone)]
pub struct LocalSpec {
    /// 1 to 6 lowercase letters or digits; part of every name created.
    pub run_id: String,
    /// Where `nodes/<node>/` (data, logs) go.
    pub run_dir: PathBuf,
    /// Number of brokers (1..=99), besides the controller.
    pub brokers: usize,
    /// Network address of the /24 the nodes live on (must not be in use on this host).
    pub subnet: Ipv4Addr,
    /// Port of every node's HTTP listener.
    pub http_port: u16,
    /// What each node runs.
    pub program: NodeProgram,
    /// Bound between SIGTERM and SIGKILL when stopping a node.
    pub stop_timeout_ms: u64,
    /// How to drop packets; `None` detects (see [`Method::detect`]).
    pub net_method: Option<Method>,
    /// Where run records go (default [`state::DEFAULT_STATE_DIR`]).
    pub state_dir: PathBuf,
    /// Mount a lossy filesystem over every node's data directory, so nodes can lose power.
    pub lossy_fs: bool,
}

impl LocalSpec {
    /// A spec with defaults: 3 brokers, [`DEFAULT_SUBNET`], [`DEFAULT_HTTP_PORT`], a 5 s stop
    /// bound, detected network method, records in [`state::DEFAULT_STATE_DIR`].
    pub fn new(
        run_id: impl Into<String>,
        run_dir: impl Into<PathBuf>,
        program: NodeProgram,
    ) -> LocalSpec {
        LocalSpec {
            run_id: run_id.into(),
            run_dir: run_dir.into(),
            brokers: 3,
            subnet: DEFAULT_SUBNET,
            http_port: DEFAULT_HTTP_PORT,
            program,
            stop_timeout_ms: 5_000,
            net_method: None,
            state_dir: PathBuf::from(state::DEFAULT_STATE_DIR),
            lossy_fs: false,
        }
    }

    /// Parses a subnet written `A.B.C.0/24` (only /24 is supported).
    pub fn parse_subnet(s: &str) -> Result<Ipv4Addr> {
        let bad = || Error::Config(format!("subnet {s:?}: expected A.B.C.0/24"));
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        if prefix != "24" || addr.octets()[3] != 0 {
            return Err(bad());
        }
        if !is_private_subnet(addr) {
            return Err(Error::Config(format!(
                "subnet {s:?} is not a private range: the local cluster's addresses must never \
                 route off this machine; use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 \
                 (RFC 1918), or 100.64.0.0/10 (RFC 6598)"
            )));
        }
        Ok(addr)
    }

    fn validate(&self) -> Result<()> {
        let id_ok = !self.run_id.is_empty()
            && self.run_id.len() <= RUN_ID_LEN_MAX
            && self
                .run_id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !id_ok {
            return Err(Error::Config(format!(
                "run id {:?}: 1 to {RUN_ID_LEN_MAX} lowercase letters or digits",
                self.run_id
            )));
        }
        if self.brokers == 0 || self.brokers > BROKERS_MAX {
            return Err(Error::Config(format!(
                "brokers = {}: 1 to {BROKERS_MAX}",
                self.brokers
            )));
        }
        if self.subnet.octets()[3] != 0 {
            return Err(Error::Config(format!(
                "subnet {}: must end in .0 (a /24)",
                self.subnet
            )));
        }
        Ok(())
    }

    /// The address of the i-th host on the subnet.
    fn host(&self, i: u8) -> Ipv4Addr {
        let [a, b, c, _] = self.subnet.octets();
        Ipv4Addr::new(a, b, c, i)
    }

    /// The harness's address on the bridge.
    pub fn bridge_ip(&self) -> Ipv4Addr {
        self.host(1)
    }

    /// The bridge's name.
    pub fn bridge_name(&self) -> String {
        format!("tw{}br", self.run_id)
    }

    /// The network namespace of a node.
    pub fn netns_name(&self, node: &str) -> String {
        format!("tw-{}-{node}", self.run_id)
    }

    /// The host-side veth of a node.
    pub fn veth_name(&self, node: &str) -> String {
        format!("tw{}{node}", self.run_id)
    }

    /// Every node, controller first, with its address.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        node_list(self.brokers, self.http_port, |i| self.host(10 + i as u8))
    }
}

/// True for a /24 inside the private ranges a local cluster may use: RFC 1918's 10.0.0.0/8,
/// 172.16.0.0/12 and 192.168.0.0/16, and RFC 6598's shared space 100.64.0.0/10. Anything else
/// (0.0.0.0/8, public addresses, multicast, 255.255.255.0/24, ...) could send the harness's
/// traffic off the machine or collide with the host's own routes.
pub fn is_private_subnet(addr: Ipv4Addr) -> bool {
    let [a, b, _, _] = addr.octets();
    addr.is_private() || (a == 100 && (64..128).contains(&b))
}

/// Finds the broker binary:
///
/// 1. `$TIDEWATER_BROKER_BIN`, if set;
/// 2. when running under cargo (`cargo run`, `cargo test`: `$CARGO` is set), builds it with
///    `cargo build -p tidewater-broker` in this workspace, same profile as the running
///    executable, so a stale binary is never used (a no-op when it is up to date);
/// 3. `tidewater-broker` next to the running executable (or one directory up, for test
///    binaries in `target/*/deps`), as installed side by side;
/// 4. otherwise builds it as in 2.
pub fn find_broker_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(BROKER_BIN_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::Config(format!(
                "{BROKER_BIN_ENV}={} is not a file",
                path.display()
            )))
        };
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("find the running executable", e))?;
    let release = exe.to_string_lossy().contains("/release/");
    if std::env::var_os("CARGO").is_some() && workspace_dir().join("Cargo.toml").is_file() {
        return build_broker_binary(release);
    }
    let mut dir = exe.parent();
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let candidate = d.join("tidewater-broker");
        if candidate.is_file() {
            return Ok(candidate);
        }
        dir = d.parent();
    }
    build_broker_binary(release)
}

/// The workspace this harness was built from.
fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds `tidewater-broker` with cargo in this workspace and returns the executable's path.
pub fn build_broker_binary(release: bool) -> Result<PathBuf> {
    build_broker_binary_with(release, &[])
}

/// Builds `tidewater-broker` with the cargo `features` (e.g. `deliberate-bugs`) and returns
/// the executable's path. Cargo builds every feature set to the same path: copy the binary
/// before another build replaces it.
pub fn build_broker_binary_with(release: bool, features: &[&str]) -> Result<PathBuf> {
    let workspace = workspace_dir();
    let features = features.join(",");
    let mut args = vec![
        "build",
        "-p",
        "tidewater-broker",
        "--bin",
        "tidewater-broker",
        "--message-format=json-render-diagnostics",
    ];
    if release {
        args.push("--release");
    }
    if !features.is_empty() {
        args.extend(["--features", features.as_str()]);
    }
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(&args)
        .current_dir(&workspace)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::io("run cargo to build tidewater-broker", e))?;
    if !out.status.success() {
        return Err(Error::Command {
            command: format!("cargo {}", args.join(" ")),
            status: out.status.code(),
            stderr: "see the compiler output above".into(),
        });
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == "tidewater-broker")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| Error::Config("cargo built tidewater-broker but named no executable".into()))
}

/// Runs commands inside the nodes' namespaces (`ip netns exec`).
struct NetnsShell {
    /// Node name -> namespace name.
    namespaces: BTreeMap<String, String>,
}

impl NodeShell for NetnsShell {
    fn exec(&self, node: &str, argv: &[String]) -> Result<()> {
        let ns = self
            .namespaces
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))?;
        let mut full = vec!["ip", "netns", "exec", ns.as_str()];
        full.extend(argv.iter().map(String::as_str));
        sys::run(&full).map(|_| ())
    }
}

/// The shared state of a local cluster (also reachable from the signal guard).
pub(crate) struct Inner {
    /// The settings it was built from.
    spec: LocalSpec,
    /// Every node, controller first.
    nodes: Vec<NodeInfo>,
    /// Each node's process, if started; one lock per node so a slow stop of one node does not
    /// block control of the others.
    procs: BTreeMap<String, Mutex<Option<NodeProcess>>>,
    /// Each node's lossy filesystem over its data directory, when the spec asks for them;
    /// `None` once unmounted. Held while a node's power is cut, so a wipe cannot interleave.
    mounts: BTreeMap<String, Mutex<Option<MountHandle>>>,
    /// What was created, mirrored in the run record.
    state: Mutex<RunState>,
    /// Network faults; `None` only while being built.
    net: Option<RuleNet>,
    /// Set by the first teardown, so teardown runs once.
    torn_down: AtomicBool,
}

impl Inner {
    /// The node's directory, absolute: its processes run with it as their working directory,
    /// so a relative store (the default `store`) would name the wrong files there (Kafka's
    /// StorageTool did not find `store/.../server.properties`).
    fn node_dir(&self, node: &str) -> PathBuf {
        let dir = self.spec.run_dir.join("nodes").join(node);
        std::path::absolute(&dir).unwrap_or(dir)
    }

    fn proc_slot(&self, node: &str) -> Result<std::sync::MutexGuard<'_, Option<NodeProcess>>> {
        let slot = self
            .procs
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))?;
        Ok(slot.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn record(&self, change: impl FnOnce(&mut RunState)) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut state);
        state.save(&self.spec.state_dir)
    }

    fn argv(&self, node: &NodeInfo) -> Vec<String> {
        let data = self.node_dir(&node.name).join("data");
        match &self.spec.program {
            NodeProgram::Custom(f) => f(node, &data),
            NodeProgram::Kafka(k) => k.server_argv(&self.node_dir(&node.name)),
            NodeProgram::Broker { binary, settings } => {
                let mut argv = vec![
                    binary.display().to_string(),
                    "--role".into(),
                    node.role.as_flag().into(),
                ];
                let data = data.display().to_string();
                for (k, v) in super::node_settings(node, &self.nodes[0], &data, settings) {
                    argv.push("--set".into());
                    argv.push(format!("{k}={v}"));
                }
                argv
            }
        }
    }

    fn create_network(&self) -> Result<()> {
        let spec = &self.spec;
        let bridge = spec.bridge_name();
        self.record(|s| s.bridge = Some(bridge.clone()))?;
        let bridge_cidr = format!("{}/24", spec.bridge_ip());
        sys::run(&["ip", "link", "add", &bridge, "type", "bridge"])?;
        sys::run(&["ip", "addr", "add", &bridge_cidr, "dev", &bridge])?;
        sys::run(&["ip", "link", "set", &bridge, "up"])?;
        for node in &self.nodes {
            let ns = spec.netns_name(&node.name);
            let veth = spec.veth_name(&node.name);
            let peer = format!("{veth}p");
            self.record(|s| {
                s.namespaces.push(ns.clone());
                s.veths.push(veth.clone());
            })?;
            let cidr = format!("{}/24", node.ip);
            sys::run(&["ip", "netns", "add", &ns])?;
            sys::run(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", &peer,
            ])?;
            sys::run(&["ip", "link", "set", &peer, "netns", &ns])?;
            sys::run(&["ip", "link", "set", &veth, "master", &bridge])?;
            sys::run(&["ip", "link", "set", &veth, "up"])?;
            sys::run(&["ip", "-n", &ns, "link", "set", &peer, "name", "eth0"])?;
            sys::run(&["ip", "-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
            sys::run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            sys::run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            let dir = self.node_dir(&node.name).join("data");
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        }
        Ok(())
    }

    /// Mounts a lossy filesystem over every node's data directory (recorded first, so
    /// `tidewater clean` can detach it if the harness dies).
    fn mount_lossy_filesystems(&mut self) -> Result<()> {
        for node in self.nodes.clone() {
            let dir = self.node_dir(&node.name);
            let (data, durable) = (dir.join("data"), dir.join(DURABLE_DIR_NAME));
            std::fs::create_dir_all(&durable)
                .map_err(|e| Error::io(format!("create {}", durable.display()), e))?;
            let mountpoint = data
                .canonicalize()
                .map_err(|e| Error::io(format!("resolve {}", data.display()), e))?;
            self.record(|s| s.mounts.push(mountpoint.clone()))?;
            let handle = LossyFs::mount(&durable, &mountpoint)
                .map_err(|e| Error::io(format!("mount lossyfs at {}", data.display()), e))?;
            self.mounts
                .insert(node.name.clone(), Mutex::new(Some(handle)));
        }
        Ok(())
    }

    fn mount_slot(&self, node: &str) -> Option<std::sync::MutexGuard<'_, Option<MountHandle>>> {
        self.mounts
            .get(node)
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Makes what the stopped nodes wrote durable (the data directories are the run's
    /// evidence), then unmounts every lossy filesystem.
    fn unmount_lossy_filesystems(&self) -> Option<Error> {
        let mut first_error = None;
        for (node, slot) in &self.mounts {
            let Some(handle) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                continue;
            };
            let synced = handle.sync_all();
            if let Err(e) = synced.and_then(|()| handle.unmount()) {
                first_error.get_or_insert(Error::io(format!("unmount the lossyfs of {node}"), e));
            }
        }
        first_error
    }

    /// Before a Kafka node starts: writes its `server.properties` and, when its log directory
    /// is new (first start, or after a wipe), formats it with `StorageTool` inside the node's
    /// namespace (so `tidewater clean` finds it there too), output in `broker.log`.
    fn prepare_kafka(&self, node: &NodeInfo) -> Result<()> {
        let NodeProgram::Kafka(program) = &self.spec.program else {
            return Ok(());
        };
        let dir = self.node_dir(&node.name);
        program.write_properties(node, &self.nodes, &dir)?;
        if !kafka::KafkaProgram::needs_format(&dir) {
            return Ok(());
        }
        let log = dir.join("broker.log");
        let netns = Path::new(sys::NETNS_DIR).join(self.spec.netns_name(&node.name));
        let format = NodeProcess::spawn(&netns, &program.format_argv(&dir), &log, &dir)?;
        let limit = Duration::from_millis(kafka::FORMAT_TIME_LIMIT_MS);
        match format.wait_exit(limit)? {
            // Kafka's format does not fsync `bootstrap.checkpoint` (nor the directory it is
            // renamed in): a power cut soon after leaves a node that cannot start. A host
            // formatted at provisioning has it written back long before any fault, so the
            // format is made durable here (docs/real-kafka.md).
            Some(true) => {
                let mount = self.mount_slot(&node.name);
                match mount.as_ref().and_then(|m| m.as_ref()) {
                    Some(handle) => handle.sync_all().map_err(|e| {
                        Error::io(format!("sync the lossy filesystem of {}", node.name), e)
                    }),
                    None => Ok(()),
                }
            }
            outcome => Err(Error::State(format!(
                "{}: Kafka's StorageTool format {} (last lines of {}):\n{}",
                node.name,
                if outcome.is_none() {
                    format!("did not finish within {limit:?}")
                } else {
                    "failed".to_string()
                },
                log.display(),
                kafka::log_tail(&log, kafka::LOG_TAIL_LINES)
            ))),
        }
    }

    /// Heal, resume and stop every process, delete what was created. Runs once.
    fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut first_error = None;
        if let Some(net) = &self.net {
            if let Err(e) = net.heal_and_close() {
                first_error.get_or_insert(e);
            }
        }
        // Stop all nodes at once, so teardown takes one stop bound, not one per node.
        let timeout = Duration::from_millis(self.spec.stop_timeout_ms);
        let procs: Vec<NodeProcess> = self
            .procs
            .keys()
            .filter_map(|node| self.proc_slot(node).ok().and_then(|mut s| s.take()))
            .collect();
        let stopped: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = procs
                .into_iter()
                .map(|p| scope.spawn(move || p.stop(timeout)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::State("a node stop panicked".into())))
                })
                .collect()
        });
        if let Some(e) = stopped.into_iter().find_map(|r| r.err()) {
            first_error.get_or_insert(e);
        }
        if let Some(e) = self.unmount_lossy_filesystems() {
            first_error.get_or_insert(e);
        }
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Err(e) = state::remove_resources(&state, &self.spec.state_dir) {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl guard::Teardown for Inner {
    fn teardown(&self) -> Result<()> {
        Inner::teardown(self)
    }

    fn label(&self) -> String {
        format!("local cluster {}", self.spec.run_id)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!(
                "tidewater: teardown of local cluster {} failed: {e}; run `tidewater clean`",
                self.spec.run_id
            );
        }
    }
}

/// A cluster of network namespaces on this machine. Dropping it tears it down.
pub struct LocalCluster {
    inner: Arc<Inner>,
}

impl LocalCluster {
    /// Creates the bridge, namespaces and veths (nothing is started yet). Needs root.
    ///
    /// On any failure, what was already created is removed before the error is returned.
    pub fn create(spec: LocalSpec) -> Result<LocalCluster> {
        if !sys::is_root() {
            return Err(Error::NotRoot);
        }
        spec.validate()?;
        check_free(&spec)?;
        let method = match spec.net_method {
            Some(m) => m,
            None => Method::detect()?,
        };
        let nodes = spec.nodes();
        let procs = nodes
            .iter()
            .map(|n| (n.name.clone(), Mutex::new(None)))
            .collect();
        let state = RunState {
            run_id: spec.run_id.clone(),
            harness_pid: std::process::id(),
            harness_start_ticks: sys::process_start_ticks(std::process::id()).unwrap_or(0),
            run_dir: spec.run_dir.clone(),
            ..RunState::default()
        };
        let lossy_fs = spec.lossy_fs;
        let mut inner = Inner {
            spec,
            nodes,
            procs,
            mounts: BTreeMap::new(),
            state: Mutex::new(state),
            net: None,
            torn_down: AtomicBool::new(false),
        };
        // On error, dropping `inner` removes what was created.
        inner.create_network()?;
        if lossy_fs {
            inner.mount_lossy_filesystems()?;
        }
        let shell = NetnsShell {
            namespaces: inner
                .nodes
                .iter()
                .map(|n| (n.name.clone(), inner.spec.netns_name(&n.name)))
                .collect(),
        };
        let mut addrs: BTreeMap<String, Ipv4Addr> =
            inner.nodes.iter().map(|n| (n.name.clone(), n.ip)).collect();
        addrs.insert(CLIENT.to_string(), inner.spec.bridge_ip());
        inner.net = Some(RuleNet::new(Arc::new(shell), method, addrs)?);
        let inner = Arc::new(inner);
        let weak: std::sync::Weak<dyn guard::Teardown> = Arc::downgrade(&inner) as _;
        guard::register(weak);
        Ok(LocalCluster { inner })
    }

    /// The settings it was built from.
    pub fn spec(&self) -> &LocalSpec {
        &self.inner.spec
    }

    /// The network method in use.
    pub fn net_method(&self) -> Method {
        self.rule_net().method()
    }

    /// The network namespace of a node (to run diagnostics inside it).
    pub fn netns(&self, node: &str) -> Result<String> {
        self.node(node).map(|n| self.inner.spec.netns_name(&n.name))
    }

    /// The pid of a node's process, if it runs.
    pub fn pid(&self, node: &str) -> Result<Option<i32>> {
        let mut slot = self.inner.proc_slot(node)?;
        let alive = slot.as_mut().is_some_and(|p| p.is_alive());
        Ok(slot.as_ref().filter(|_| alive).map(|p| p.pid()))
    }

    /// Starts every node that is not running, controller first. Kafka's nodes are formatted
    /// all at once first: each format is a JVM start of its own.
    pub fn start_all(&self) -> Result<()> {
        let prepared: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .inner
                .nodes
                .iter()
                .map(|n| scope.spawn(move || self.inner.prepare_kafka(n)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::State("a node format panicked".into())))
                })
                .collect()
        });
        prepared.into_iter().collect::<Result<Vec<()>>>()?;
        for node in self.node_names() {
            self.start(&node)?;
        }
        Ok(())
    }

    /// Waits, at most `limit`, until every node accepts connections where the system under
    /// test serves (Kafka's listeners; the companion broker's HTTP port), so a node that
    /// cannot start fails the setup with its name and the end of its log instead of a
    /// timeout further on.
    pub fn wait_listening(&self, limit: Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + limit;
        for node in self.nodes() {
            let addr = match &self.inner.spec.program {
                NodeProgram::Kafka(k) => k.listener(node),
                _ => node.http_addr(),
            };
            self.wait_node_listening(&node.name, addr, deadline, limit)?;
        }
        Ok(())
    }

    fn wait_node_listening(
        &self,
        node: &str,
        addr: std::net::SocketAddr,
        deadline: std::time::Instant,
        limit: Duration,
    ) -> Result<()> {
        let connect_timeout = Duration::from_millis(500);
        loop {
            if std::net::TcpStream::connect_timeout(&addr, connect_timeout).is_ok() {
                return Ok(());
            }
            let alive = self.is_running(node);
            if !alive || std::time::Instant::now() >= deadline {
                let log = self.inner.node_dir(node).join("broker.log");
                let why = if alive {
                    format!("does not accept connections on {addr} within {limit:?}")
                } else {
                    format!("exited before listening on {addr}")
                };
                return Err(Error::State(format!(
                    "node {node} {why}; last lines of {}:\n{}",
                    log.display(),
                    kafka::log_tail(&log, kafka::LOG_TAIL_LINES)
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn rule_net(&self) -> &RuleNet {
        self.inner
            .net
            .as_ref()
            .expect("the network is built before the cluster is returned")
    }
}

/// Refuses names already taken (e.g. by a live or leftover run with the same id) and subnets
/// already in use on this host (an address in it, or a route overlapping it), before
/// creating anything.
fn check_free(spec: &LocalSpec) -> Result<()> {
    let bridge = spec.bridge_name();
    let record = RunState::path(&spec.state_dir, &spec.run_id);
    if sys::link_exists(&bridge) || record.exists() {
        return Err(Error::Config(format!(
            "run id {} is in use (bridge {bridge} or record {} exists); pick another id, or run \
             `tidewater clean` if it is a leftover",
            spec.run_id,
            record.display()
        )));
    }
    let [a, b, c, _] = spec.subnet.octets();
    if let Some(ip) = sys::host_ipv4_addrs()?
        .into_iter()
        .find(|ip| ip.octets()[..3] == [a, b, c])
    {
        return Err(Error::Config(format!(
            "subnet {}/24 is in use on this host ({ip} is configured); choose another subnet",
            spec.subnet
        )));
    }
    let ours = (spec.subnet, 24);
    if let Some(route) = sys::host_ipv4_routes()?
        .into_iter()
        .find(|r| sys::prefixes_overlap(*r, ours))
    {
        return Err(Error::Config(format!(
            "subnet {}/24 overlaps the route to {}/{} on this host; choose another subnet",
            spec.subnet, route.0, route.1
        )));
    }
    Ok(())
}

impl Cluster for LocalCluster {
    fn nodes(&self) -> &[NodeInfo] {
        &self.inner.nodes
    }

    fn start(&self, node: &str) -> Result<()> {
        let info = self.node(node)?.clone();
        let mut slot = self.inner.proc_slot(node)?;
        if slot.as_mut().is_some_and(|p| p.is_alive()) {
            return Ok(());
        }
        let dir = self.inner.node_dir(node);
        let data = dir.join("data");
        std::fs::create_dir_all(&data)
            .map_err(|e| Error::io(format!("create {}", data.display()), e))?;
        self.inner.prepare_kafka(&info)?;
        let netns = Path::new(sys::NETNS_DIR).join(self.inner.spec.netns_name(node));
        let argv = self.inner.argv(&info);
        *slot = Some(NodeProcess::spawn(
            &netns,
            &argv,
            &dir.join("broker.log"),
            &dir,
        )?);
        Ok(())
    }

    fn stop(&self, node: &str) -> Result<()> {
        let taken = self.inner.proc_slot(node)?.take();
        match taken {
            Some(p) => p.stop(Duration::from_millis(self.inner.spec.stop_timeout_ms)),
            None => Ok(()),
        }
    }

    fn kill(&self, node: &str) -> Result<()> {
        let taken = self.inner.proc_slot(node)?.take();
        taken.map_or(Ok(()), NodeProcess::kill)
    }

    fn pause(&self, node: &str) -> Result<()> {
        let mut slot = self.inner.proc_slot(node)?;
        match slot.as_mut() {
            Some(p) => {
                if !p.is_alive() {
                    return Err(Error::State(format!(
                        "cannot pause {node}: it is not running"
                    )));
                }
                p.pause()
            }
            None => Err(Error::State(format!(
                "cannot pause {node}: it is not running"
            ))),
        }
    }

    fn resume(&self, node: &str) -> Result<()> {
        if let Some(p) = self.inner.proc_slot(node)?.as_mut() {
            p.resume();
        }
        Ok(())
    }

    fn power_loss(&self, node: &str, torn_seed: Option<u64>) -> Result<()> {
        self.node(node)?;
        // The process slot is held throughout (then the mount, the same order as `wipe`), so
        // no start slips in between the kill and the loss.
        let mut slot = self.inner.proc_slot(node)?;
        let mount = self.inner.mount_slot(node);
        let Some(handle) = mount.as_ref().and_then(|m| m.as_ref()) else {
            return Err(Error::Unsupported(format!(
                "power-loss of {node}: its data directory is not on a lossy filesystem (run \
                 with --lossy-fs)"
            )));
        };
        // The process must be gone before its unsynced state is: a survivor would write on.
        if let Some(process) = slot.take() {
            process.kill()?;
        }
        let mode = torn_seed.map_or(Mode::Clean, |seed| Mode::Torn { seed });
        handle
            .lose_unsynced(mode)
            .map(|_| ())
            .map_err(|e| Error::io(format!("lose the unsynced data of {node}"), e))
    }

    fn wipe(&self, node: &str) -> Result<()> {
        let mut slot = self.inner.proc_slot(node)?;
        if slot.as_mut().is_some_and(|p| p.is_alive()) {
            return Err(Error::State(format!("stop {node} before wiping its data")));
        }
        let data = self.inner.node_dir(node).join("data");
        if let Some(mount) = self.inner.mount_slot(node) {
            if let Some(handle) = mount.as_ref() {
                // A mount point cannot be removed: empty it, and make the removal durable.
                return wipe_contents(&data).and_then(|()| {
                    handle
                        .sync_all()
                        .map_err(|e| Error::io(format!("sync {}", data.display()), e))
                });
            }
        }
        match std::fs::remove_dir_all(&data) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("remove {}", data.display()), e)),
        }
        std::fs::create_dir_all(&data)
            .map_err(|e| Error::io(format!("create {}", data.display()), e))
    }

    fn is_running(&self, node: &str) -> bool {
        self.inner
            .proc_slot(node)
            .is_ok_and(|mut s| s.as_mut().is_some_and(|p| p.is_alive()))
    }

    fn is_paused(&self, node: &str) -> bool {
        self.inner
            .proc_slot(node)
            .is_ok_and(|mut s| s.as_mut().is_some_and(|p| p.is_alive() && p.is_paused()))
    }

    fn collect_logs(&self, node: &str, dest: &Path) -> Result<()> {
        self.node(node)?;
        let log = self.inner.node_dir(node).join("broker.log");
        std::fs::create_dir_all(dest)
            .map_err(|e| Error::io(format!("create {}", dest.display()), e))?;
        let target = dest.join("broker.log");
        // Logs already live under the run directory; copying onto itself would truncate it.
        let same = std::fs::canonicalize(&log).ok() == std::fs::canonicalize(&target).ok();
        if log.exists() && !same {
            std::fs::copy(&log, &target)
                .map_err(|e| Error::io(format!("copy {}", log.display()), e))?;
        }
        Ok(())
    }

    fn net(&self) -> &dyn Net {
        self.rule_net()
    }

    fn kafka_bootstrap(&self) -> BTreeMap<String, std::net::SocketAddr> {
        match &self.inner.spec.program {
            NodeProgram::Kafka(k) => k.bootstrap(&self.inner.nodes),
            _ => BTreeMap::new(),
        }
    }

    fn teardown(&self) -> Result<()> {
        self.inner.teardown()
    }
}

/// Removes everything inside `dir`, keeping `dir`.
fn wipe_contents(dir: &Path) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    for entry in entries {
        let path = entry
            .map_err(|e| Error::io(format!("list {}", dir.display()), e))?
            .path();
        let removed = if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| Error::io(format!("remove {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_subnets_are_accepted() {
        for ok in [
            "10.77.0.0/24",
            "172.16.5.0/24",
            "172.31.255.0/24",
            "192.168.1.0/24",
            "100.64.3.0/24",
        ] {
            assert!(LocalSpec::parse_subnet(ok).is_ok(), "{ok}");
        }
        for refused in [
            "0.0.0.0/24",
            "255.255.255.0/24",
            "8.8.8.0/24",
            "172.32.0.0/24",
            "100.128.0.0/24",
            "127.0.0.0/24",
            "224.0.0.0/24",
        ] {
            let e = LocalSpec::parse_subnet(refused).unwrap_err().to_string();
            assert!(e.contains("not a private range"), "{refused}: {e}");
        }
    }

    #[test]
    fn names_fit_in_linux_interface_names() {
        let mut spec = LocalSpec::new(
            "abcdef",
            "/tmp/x",
            NodeProgram::Custom(Arc::new(|_, _| vec![])),
        );
        spec.brokers = BROKERS_MAX;
        for node in spec.nodes() {
            let peer = format!("{}p", spec.veth_name(&node.name));
            assert!(peer.len() <= 15, "{peer}");
        }
        assert!(spec.bridge_name().len() <= 15);
        assert_eq!(spec.netns_name("n2"), "tw-abcdef-n2");
    }

    #[test]
    fn addresses_follow_the_documented_plan() {
        let mut spec = LocalSpec::new("t1", "/tmp/x", NodeProgram::Custom(Arc::new(|_, _| vec![])));
        spec.subnet = LocalSpec::parse_subnet("10.123.4.0/24").unwrap();
        let nodes = spec.nodes();
        assert_eq!(spec.bridge_ip(), Ipv4Addr::new(10, 123, 4, 1));
        assert_eq!(nodes[0].ip, Ipv4Addr::new(10, 123, 4, 10));
        assert_eq!(nodes[3].ip, Ipv4Addr::new(10, 123, 4, 13));
        assert!(LocalSpec::parse_subnet("10.1.2.0/16").is_err());
        assert!(LocalSpec::parse_subnet("10.1.2.5/24").is_err());
    }

    #[test]
    fn bad_run_ids_and_sizes_are_refused() {
        let program = NodeProgram::Custom(Arc::new(|_, _| vec![]));
        for id in ["", "UPPER", "toolong7", "a-b"] {
            assert!(
                LocalSpec::new(id, "/tmp/x", program.clone())
                    .validate()
                    .is_err(),
                "{id}"
            );
        }
        let mut spec = LocalSpec::new("ok1", "/tmp/x", program);
        spec.brokers = 0;
        assert!(spec.validate().is_err());
    }

    #[test]
    fn broker_argv_names_role_identity_listener_data_and_controller() {
        let spec = LocalSpec::new(
            "t2",
            "/runs/r",
            NodeProgram::Broker {
                binary: "/bin/tidewater-broker".into(),
                settings: vec![("min.insync.replicas".into(), "2".into())],
            },
        );
        let nodes = spec.nodes();
        let inner = Inner {
            procs: BTreeMap::new(),
            mounts: BTreeMap::new(),
            state: Mutex::new(RunState::default()),
            net: None,
            torn_down: AtomicBool::new(true),
            nodes: nodes.clone(),
            spec,
        };
        assert_eq!(
            inner.argv(&nodes[1]).join(" "),
            "/bin/tidewater-broker --role broker --set broker.id=1 \
             --set listeners=http://10.77.0.11:9092 --set log.dirs=/runs/r/nodes/n1/data \
             --set controller.address=http://10.77.0.10:9092 \
             --set kafka.listeners=PLAINTEXT://10.77.0.11:9093 --set min.insync.replicas=2"
        );
        assert_eq!(
            inner.argv(&nodes[0]).join(" "),
            "/bin/tidewater-broker --role controller --set listeners=http://10.77.0.10:9092 \
             --set log.dirs=/runs/r/nodes/c1/data --set min.insync.replicas=2"
        );
    }
}
