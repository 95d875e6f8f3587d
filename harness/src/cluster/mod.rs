//! Cluster and node control: the `Cluster` trait the runner and the nemesis drive.
//!
//! A cluster has one controller node, `c1`, and N broker nodes, `n1..nN`. Every node has its
//! own IPv4 address and serves the broker's HTTP API on it. The trait is synchronous: each call
//! is a few small blocking system calls or short commands (bounded waits), so async callers run
//! them with `tokio::task::spawn_blocking`.
//!
//! Backends: [`local`] (network namespaces on this machine, needs root), [`ssh`] (hosts such
//! as Vagrant VMs, reached with the system `ssh`) and [`noop`] (records calls, for tests of
//! code that drives a cluster).

pub mod guard;
pub mod local;
pub mod noop;
pub mod ssh;

pub use crate::control::{Error, Result, CONTROLLER};
use crate::net::Net;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;

/// What a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The metadata controller (`tidewater-broker --role controller`).
    Controller,
    /// A broker holding partition replicas.
    Broker,
}

impl Role {
    /// The value of the broker binary's `--role` flag.
    pub fn as_flag(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Broker => "broker",
        }
    }
}

/// One node of a cluster, as the harness addresses it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeInfo {
    /// `c1` for the controller, `n1..nN` for brokers.
    pub name: String,
    /// Controller or broker.
    pub role: Role,
    /// The broker's `broker.id` (N for `nN`); `None` for the controller.
    pub broker_id: Option<u32>,
    /// The node's address, reachable from the harness.
    pub ip: Ipv4Addr,
    /// The port of the node's HTTP listener.
    pub http_port: u16,
}

impl NodeInfo {
    /// The socket address of the node's HTTP API.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(self.ip, self.http_port))
    }

    /// The base URL of the node's HTTP API, e.g. `http://10.77.0.11:9092`.
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.ip, self.http_port)
    }

    /// The port of a broker's Kafka listener (`kafka.listeners`): the one after its HTTP port.
    pub fn kafka_port(&self) -> u16 {
        self.http_port.wrapping_add(1)
    }

    /// `HOST:PORT` of a broker's Kafka listener, e.g. `10.77.0.11:9093`.
    pub fn kafka_address(&self) -> String {
        format!("{}:{}", self.ip, self.kafka_port())
    }
}

/// Builds the node list of a cluster with `brokers` brokers: `c1`, then `n1..nN`.
///
/// `ip_of(i)` gives the address of the i-th node (0 = controller).
pub fn node_list(
    brokers: usize,
    http_port: u16,
    ip_of: impl Fn(usize) -> Ipv4Addr,
) -> Vec<NodeInfo> {
    let mut nodes = vec![NodeInfo {
        name: CONTROLLER.to_string(),
        role: Role::Controller,
        broker_id: None,
        ip: ip_of(0),
        http_port,
    }];
    for i in 1..=brokers {
        nodes.push(NodeInfo {
            name: format!("n{i}"),
            role: Role::Broker,
            broker_id: Some(i as u32),
            ip: ip_of(i),
            http_port,
        });
    }
    nodes
}

/// The settings a node's broker process gets, in order: its identity (`broker.id`), where it
/// listens, where its data goes, where the controller is (brokers only), then the run's
/// `settings`, which therefore win.
pub fn node_settings(
    node: &NodeInfo,
    controller: &NodeInfo,
    data_dir: &str,
    settings: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out = vec![];
    if let Some(id) = node.broker_id {
        out.push(("broker.id".to_string(), id.to_string()));
    }
    out.push(("listeners".to_string(), node.url()));
    out.push(("log.dirs".to_string(), data_dir.to_string()));
    if node.role == Role::Broker {
        out.push(("controller.address".to_string(), controller.url()));
        // Kafka's protocol beside the HTTP API, for `--client kafka` and outside clients.
        out.push((
            "kafka.listeners".to_string(),
            format!("PLAINTEXT://{}", node.kafka_address()),
        ));
    }
    out.extend(settings.iter().cloned());
    out
}

/// Control over a running cluster's nodes and network.
///
/// Node arguments are node names (`c1`, `n1`, ...). Every method is safe to call on a node in
/// any state: `stop`/`kill` of a stopped node and `resume` of a running one do nothing.
pub trait Cluster: Send + Sync {
    /// Every node, controller first.
    fn nodes(&self) -> &[NodeInfo];

    /// Starts the node's process (keeping its data). Does nothing if it runs.
    fn start(&self, node: &str) -> Result<()>;

    /// Stops the node gracefully: SIGCONT (if paused), SIGTERM, then SIGKILL after a bound.
    fn stop(&self, node: &str) -> Result<()>;

    /// Kills the node's process with SIGKILL (no chance to flush anything).
    fn kill(&self, node: &str) -> Result<()>;

    /// Freezes the node's process with SIGSTOP.
    fn pause(&self, node: &str) -> Result<()>;

    /// Thaws a paused node with SIGCONT.
    fn resume(&self, node: &str) -> Result<()>;

    /// Cuts the node's power: SIGKILL its process, then discard every write it had not made
    /// durable (fsync), as a power loss would; with `torn_seed`, each file keeps a seeded
    /// prefix of its last unsynced write (`docs/lossyfs.md`). [`Cluster::start`] later boots
    /// it on what is left. Only backends that keep node data on a lossy filesystem can do
    /// this; the others refuse with [`Error::Unsupported`].
    fn power_loss(&self, node: &str, torn_seed: Option<u64>) -> Result<()> {
        let _ = torn_seed;
        self.node(node)?;
        Err(Error::Unsupported(
            "power-loss: this cluster keeps no node data on a lossy filesystem".into(),
        ))
    }

    /// Stops, then starts the node, keeping its data.
    fn restart(&self, node: &str) -> Result<()> {
        self.stop(node)?;
        self.start(node)
    }

    /// Deletes the node's data; the node must be stopped.
    fn wipe(&self, node: &str) -> Result<()>;

    /// Whether the node's process is alive (paused counts as alive).
    fn is_running(&self, node: &str) -> bool;

    /// Whether the node's process is paused.
    fn is_paused(&self, node: &str) -> bool;

    /// Copies the node's logs into `dest` (a directory, created if needed).
    fn collect_logs(&self, node: &str, dest: &Path) -> Result<()>;

    /// The network fault injector of this cluster.
    fn net(&self) -> &dyn Net;

    /// Where each broker node serves Kafka's binary protocol (node name -> address), for a
    /// Kafka-protocol client to bootstrap from (it maps a Kafka leader id K to node `nK`);
    /// empty when the brokers speak only the companion broker's HTTP API.
    fn kafka_bootstrap(&self) -> BTreeMap<String, SocketAddr> {
        BTreeMap::new()
    }

    /// Heals the network, resumes and stops every process and removes everything the cluster
    /// created. Idempotent; also done when the cluster is dropped.
    fn teardown(&self) -> Result<()>;

    /// The names of every node, controller first.
    fn node_names(&self) -> Vec<String> {
        self.nodes().iter().map(|n| n.name.clone()).collect()
    }

    /// The names of the broker nodes.
    fn broker_names(&self) -> Vec<String> {
        self.nodes()
            .iter()
            .filter(|n| n.role == Role::Broker)
            .map(|n| n.name.clone())
            .collect()
    }

    /// Looks a node up by name.
    fn node(&self, name: &str) -> Result<&NodeInfo> {
        self.nodes()
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| Error::UnknownNode(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_list_puts_the_controller_first_and_numbers_brokers_from_one() {
        let nodes = node_list(3, 9092, |i| Ipv4Addr::new(10, 0, 0, 10 + i as u8));
        let names: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["c1", "n1", "n2", "n3"]);
        assert_eq!(nodes[0].role, Role::Controller);
        assert_eq!(nodes[0].broker_id, None);
        assert_eq!(nodes[2].broker_id, Some(2));
        assert_eq!(nodes[3].url(), "http://10.0.0.13:9092");
    }
}
