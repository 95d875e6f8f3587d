//! What the nemesis needs to know about the cluster's metadata: who leads a partition and who
//! is in its ISR, to resolve targets such as `leader:t0/0` and to wait for ISR changes.

use crate::cluster::{NodeInfo, Role};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Bound on one metadata request, so a paused or cut-off node does not stall the nemesis.
const METADATA_TIMEOUT: Duration = Duration::from_millis(1_500);

/// Leader, ISR and replicas of one partition, by node name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionState {
    /// The leader, if there is one.
    pub leader: Option<String>,
    /// In-sync replicas.
    pub isr: Vec<String>,
    /// Every replica.
    pub replicas: Vec<String>,
}

/// Reads partition metadata. `None` when no node could tell.
pub trait ClusterView: Send + Sync {
    /// The state of partition `key` (`topic/partition`).
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>>;
}

/// Metadata over the broker's HTTP API: `GET /v1/metadata`, asking the controller first (it
/// holds the truth; an isolated broker may still believe it leads), then the brokers.
pub struct HttpView {
    /// The HTTP client, with a short timeout.
    client: reqwest::Client,
    /// Nodes to ask, controller first.
    nodes: Vec<NodeInfo>,
}

impl HttpView {
    /// A view of the cluster made of `nodes`.
    pub fn new(nodes: &[NodeInfo]) -> HttpView {
        let mut nodes = nodes.to_vec();
        nodes.sort_by_key(|n| n.role != Role::Controller);
        HttpView {
            client: reqwest::Client::builder()
                .timeout(METADATA_TIMEOUT)
                .build()
                .expect("a plain HTTP client builds"),
            nodes,
        }
    }

    async fn ask(&self, node: &NodeInfo, key: &str) -> Option<PartitionState> {
        let url = format!("{}/v1/metadata", node.url());
        let body: serde_json::Value = self.client.get(url).send().await.ok()?.json().await.ok()?;
        tidewater_workloads::client::parse_metadata(&body)
            .into_iter()
            .find(|p| p.key == key)
            .map(|p| PartitionState {
                leader: p.leader,
                isr: p.isr,
                replicas: p.replicas,
            })
    }
}

impl ClusterView for HttpView {
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>> {
        Box::pin(async move {
            for node in &self.nodes {
                if let Some(state) = self.ask(node, key).await {
                    return Some(state);
                }
            }
            None
        })
    }
}

/// Metadata over Kafka's protocol, for clusters that speak nothing else (Apache Kafka): the
/// brokers' metadata, asked in turn. Kafka's brokers answer from their metadata caches, so an
/// isolated broker may report a leadership the quorum has already moved.
pub struct KafkaView {
    admin: tidewater_workloads::kafka_admin::KafkaAdmin,
}

impl KafkaView {
    /// A view over the brokers' Kafka listeners, `HOST:PORT` each.
    pub fn new(bootstrap: Vec<String>) -> KafkaView {
        KafkaView {
            admin: tidewater_workloads::kafka_admin::KafkaAdmin::new(bootstrap, METADATA_TIMEOUT),
        }
    }
}

impl ClusterView for KafkaView {
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>> {
        Box::pin(async move {
            let p = self.admin.partition(key).await?;
            Some(PartitionState {
                leader: p.leader,
                isr: p.isr,
                replicas: p.replicas,
            })
        })
    }
}

/// The view the nemesis uses on `cluster`: Kafka's metadata on a cluster of Apache Kafka,
/// the companion broker's HTTP metadata otherwise.
pub fn view_of(cluster: &dyn crate::cluster::Cluster) -> std::sync::Arc<dyn ClusterView> {
    let kafka = cluster.kafka_bootstrap();
    if kafka.is_empty() {
        std::sync::Arc::new(HttpView::new(cluster.nodes()))
    } else {
        std::sync::Arc::new(KafkaView::new(
            kafka.values().map(|a| a.to_string()).collect(),
        ))
    }
}

/// A view whose answers the test sets: for tests of the nemesis without a broker.
#[derive(Default)]
pub struct StaticView {
    /// Partition states by key.
    states: Mutex<BTreeMap<String, PartitionState>>,
}

impl StaticView {
    /// Sets what the view answers for `key`.
    pub fn set(&self, key: &str, state: PartitionState) {
        self.states.lock().unwrap().insert(key.to_string(), state);
    }
}

impl ClusterView for StaticView {
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>> {
        let state = self.states.lock().unwrap().get(key).cloned();
        Box::pin(async move { state })
    }
}
