//! The companion broker as the system under test. The harness observes it over its HTTP API
//! whichever client the workload uses (topic setup, `/v1/status` samples, the nemesis's
//! metadata, recovery), so a run over either client sees the cluster the same way:
//! [`CompanionOverHttp`] drives the workload over HTTP too, [`CompanionOverKafka`] over the
//! brokers' Kafka listeners (`--client kafka`).

use super::{
    gather_replicas, kafka_queue_client, System, Topic, PROBE_INTERVAL, REPLICA_RECORDS_MAX,
    SETUP_TIME_LIMIT,
};
use crate::cluster::{NodeInfo, Role};
use crate::nemesis::view::METADATA_TIMEOUT;
use crate::nemesis::{ClusterView, PartitionState};
use crate::recorder::Recorder;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tidewater_workloads::client::{node_name, BrokerClient, ClientConfig, ClientError};
use tidewater_workloads::group::{GroupSettings, HttpGroupClient};
use tidewater_workloads::kafka::KafkaQueueClient;
use tidewater_workloads::kafka_group::KafkaGroupClient;
use tidewater_workloads::replicas::{PartitionReplicas, ReplicaLog, ReplicaRecord};
use tokio::time::Instant;

/// The companion broker, with the workload over its HTTP API.
pub struct CompanionOverHttp {
    /// Every node, controller first: the nemesis's view asks them.
    nodes: Vec<NodeInfo>,
    /// The broker nodes' names, sampled in this order.
    brokers: Vec<String>,
    /// The workload's client: the brokers, asking the controller for metadata first.
    client: Arc<BrokerClient>,
    /// The controller alone: topic creation falls back to it.
    controller: BrokerClient,
    /// The workload client's settings; the group workload's coordinator client uses them too.
    client_config: ClientConfig,
}

impl CompanionOverHttp {
    /// The companion broker on `nodes` (controller and brokers).
    pub fn new(nodes: &[NodeInfo]) -> CompanionOverHttp {
        let mut brokers = BTreeMap::new();
        let mut controller = BTreeMap::new();
        for n in nodes {
            match n.role {
                Role::Broker => brokers.insert(n.name.clone(), n.url()),
                Role::Controller => controller.insert(n.name.clone(), n.url()),
            };
        }
        let client_config = ClientConfig {
            controllers: controller.clone(),
            ..ClientConfig::new(brokers)
        };
        CompanionOverHttp {
            nodes: nodes.to_vec(),
            brokers: broker_names(nodes),
            client: Arc::new(BrokerClient::new(client_config.clone())),
            controller: BrokerClient::new(ClientConfig::new(controller)),
            client_config,
        }
    }

    /// `HOST:PORT` of every broker's Kafka listener: the port after its HTTP port.
    fn kafka_bootstrap(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.role == Role::Broker)
            .map(NodeInfo::kafka_address)
            .collect()
    }
}

fn broker_names(nodes: &[NodeInfo]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| n.role == Role::Broker)
        .map(|n| n.name.clone())
        .collect()
}

impl System for CompanionOverHttp {
    type Queue = BrokerClient;
    type Group = HttpGroupClient;

    fn describe_nodes(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{}={}", n.name, n.url()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    async fn setup_topic(&self, topic: &Topic) -> Result<(), String> {
        setup_topic(&self.client, &self.controller, topic).await
    }

    async fn sample(&self, clock: &Recorder) -> Vec<Value> {
        let answers =
            futures::future::join_all(self.brokers.iter().map(|n| self.client.status(n))).await;
        let time = clock.now_ns();
        let mut lines = Vec::new();
        for (node, answer) in self.brokers.iter().zip(answers) {
            let Ok(status) = answer else { continue };
            lines.extend(status_lines(time, node, &status));
        }
        lines
    }

    fn view(&self) -> Arc<dyn ClusterView> {
        Arc::new(HttpView::new(&self.nodes))
    }

    async fn leaders_answer(&self, keys: &[String]) -> bool {
        if self.client.refresh_leaders().await.is_err() {
            return false;
        }
        let answers =
            futures::future::join_all(keys.iter().map(|k| self.client.list_offset(k, "latest")))
                .await;
        answers.iter().all(Result::is_ok)
    }

    fn queue(&self) -> Arc<BrokerClient> {
        self.client.clone()
    }

    async fn settled_at(&self, key: &str, offset: u64) -> bool {
        // The broker's own status says it (`/v1/status`).
        self.client.settled_at(key, offset).await
    }

    fn group(&self, settings: &GroupSettings) -> HttpGroupClient {
        HttpGroupClient::new(&self.client_config, settings)
    }

    async fn replica_logs(&self, key: &str) -> Result<PartitionReplicas, String> {
        Ok(replica_logs(&self.client, key).await)
    }
}

/// The companion broker, with the workload over its brokers' Kafka listeners (`--client
/// kafka`); everything else as [`CompanionOverHttp`].
pub struct CompanionOverKafka {
    /// The broker over HTTP: the harness's own observations, and whether a log has settled.
    http: CompanionOverHttp,
    /// `HOST:PORT` of every broker's Kafka listener.
    bootstrap: Vec<String>,
    /// The workload's client over Kafka's protocol.
    kafka: Arc<KafkaQueueClient>,
}

impl CompanionOverKafka {
    /// The workload of `http`'s broker moved onto its Kafka listeners.
    pub fn new(http: CompanionOverHttp) -> CompanionOverKafka {
        let bootstrap = http.kafka_bootstrap();
        let kafka = kafka_queue_client(bootstrap.clone(), &http.client_config);
        CompanionOverKafka {
            http,
            bootstrap,
            kafka: Arc::new(kafka),
        }
    }
}

impl System for CompanionOverKafka {
    type Queue = KafkaQueueClient;
    type Group = KafkaGroupClient;

    fn describe_nodes(&self) -> String {
        self.http.describe_nodes()
    }

    async fn setup_topic(&self, topic: &Topic) -> Result<(), String> {
        self.http.setup_topic(topic).await
    }

    async fn sample(&self, clock: &Recorder) -> Vec<Value> {
        self.http.sample(clock).await
    }

    fn view(&self) -> Arc<dyn ClusterView> {
        self.http.view()
    }

    async fn leaders_answer(&self, keys: &[String]) -> bool {
        self.http.leaders_answer(keys).await
    }

    async fn settled_at(&self, key: &str, offset: u64) -> bool {
        self.http.settled_at(key, offset).await
    }

    fn queue(&self) -> Arc<KafkaQueueClient> {
        self.kafka.clone()
    }

    fn group(&self, settings: &GroupSettings) -> KafkaGroupClient {
        KafkaGroupClient::new(self.bootstrap.clone(), &self.http.client_config, settings)
    }

    async fn replica_logs(&self, key: &str) -> Result<PartitionReplicas, String> {
        self.http.replica_logs(key).await
    }
}

/// Bytes asked for per page of a replica's own log.
const REPLICA_LOG_PAGE_BYTES: u64 = 4 << 20;

/// Every replica of `key`, each read from its own node (`GET .../replica-log`), with the
/// leader and ISR of the controller's metadata.
async fn replica_logs(client: &BrokerClient, key: &str) -> PartitionReplicas {
    let meta = client
        .refresh_leaders()
        .await
        .map(|parts| parts.into_iter().find(|p| p.key == key));
    gather_replicas(key, meta, |node| async move {
        read_replica(client, &node, key).await
    })
    .await
}

/// One replica's whole log (up to [`REPLICA_RECORDS_MAX`] records), page by page from its
/// log start offset; the replica's offsets are those of the first page.
async fn read_replica(client: &BrokerClient, node: &str, key: &str) -> Result<ReplicaLog, String> {
    let failed = |e: ClientError| format!("{}: {}", e.cause.name(), e.message);
    let first = client
        .replica_log_page(node, key, None, REPLICA_LOG_PAGE_BYTES)
        .await
        .map_err(failed)?;
    let number = |page: &Value, field: &str| {
        page[field]
            .as_u64()
            .ok_or_else(|| format!("replica-log answer without {field}: {page}"))
    };
    let mut log = ReplicaLog {
        node: node.to_string(),
        role: first["role"].as_str().map(str::to_string),
        log_start_offset: number(&first, "log_start_offset")?,
        high_watermark: number(&first, "high_watermark")?,
        log_end_offset: number(&first, "log_end_offset")?,
        records: Vec::new(),
        truncated: false,
    };
    let mut page = first;
    loop {
        for r in page["records"].as_array().into_iter().flatten() {
            log.records.push(ReplicaRecord {
                offset: number(r, "offset")?,
                leader_epoch: u32::try_from(number(r, "leader_epoch")?)
                    .map_err(|_| format!("leader epoch out of range: {r}"))?,
                key: r["key"].as_str().map(str::to_string),
                value: r["value"].as_str().unwrap_or_default().to_string(),
            });
        }
        let next = number(&page, "next_offset")?;
        // Stop at the end as the first page saw it: a log that grew since is compared as it was.
        if next >= log.log_end_offset {
            return Ok(log);
        }
        if log.records.len() >= REPLICA_RECORDS_MAX {
            log.truncated = true;
            return Ok(log);
        }
        page = client
            .replica_log_page(node, key, Some(next), REPLICA_LOG_PAGE_BYTES)
            .await
            .map_err(failed)?;
        if page["records"].as_array().is_none_or(Vec::is_empty) {
            // Truncated under the read (a follower catching up by epoch): compare what was read.
            log.truncated = true;
            return Ok(log);
        }
    }
}

/// Creates the topic (retrying while brokers register; on the controller when no broker
/// takes it) and waits until every partition has a leader, within [`SETUP_TIME_LIMIT`].
async fn setup_topic(
    client: &BrokerClient,
    controller: &BrokerClient,
    topic: &Topic,
) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_TIME_LIMIT;
    let mut last_error;
    loop {
        let created = match client
            .create_topic(
                &topic.name,
                topic.partitions,
                topic.replication_factor,
                &topic.configs,
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(_) => {
                controller
                    .create_topic(
                        &topic.name,
                        topic.partitions,
                        topic.replication_factor,
                        &topic.configs,
                    )
                    .await
            }
        };
        match created {
            Ok(()) => break,
            Err(e) => last_error = format!("{}: {}", e.cause.name(), e.message),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "could not create topic {}: {last_error}",
                topic.name
            ));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    let keys = &topic.keys;
    loop {
        match client.refresh_leaders().await {
            Ok(parts) => {
                let led: Vec<_> = parts.iter().filter(|p| p.leader.is_some()).collect();
                if keys.iter().all(|k| led.iter().any(|p| &p.key == k)) {
                    return Ok(());
                }
                last_error = format!("{} of {} partitions have a leader", led.len(), keys.len());
            }
            Err(e) => last_error = format!("metadata: {}", e.message),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "topic {} never got leaders: {last_error}",
                topic.name
            ));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Turns one `/v1/status` answer of `node` into sample lines, one per local replica. Accepts
/// the replicas as a list under `replicas` (or `partitions`), each naming its topic and
/// partition (or `key`).
pub fn status_lines(time_ns: u64, node: &str, status: &Value) -> Vec<Value> {
    let replicas = status
        .get("replicas")
        .or_else(|| status.get("partitions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::with_capacity(replicas.len());
    for r in &replicas {
        let key = match (
            r.get("key").and_then(Value::as_str),
            r.get("topic").and_then(Value::as_str),
            r.get("partition").and_then(Value::as_u64),
        ) {
            (Some(k), _, _) => k.to_string(),
            (None, Some(t), Some(p)) => format!("{t}/{p}"),
            _ => continue,
        };
        let isr: Vec<String> = r
            .get("isr")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(node_name).collect())
            .unwrap_or_default();
        let hw = r
            .get("high_watermark")
            .or_else(|| r.get("hw"))
            .and_then(Value::as_u64);
        let leo = r
            .get("log_end_offset")
            .or_else(|| r.get("leo"))
            .and_then(Value::as_u64);
        out.push(json!({
            "time": time_ns,
            "key": key,
            "node": node,
            "role": r.get("role").cloned().unwrap_or(Value::Null),
            "isr": isr,
            "leader": r.get("leader").and_then(node_name),
            "leader_epoch": r.get("leader_epoch").cloned().unwrap_or(Value::Null),
            "high_watermark": hw,
            "log_end_offset": leo,
            "log_start_offset": r.get("log_start_offset").cloned().unwrap_or(Value::Null),
        }));
    }
    out
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
        let body: Value = self.client.get(url).send().await.ok()?.json().await.ok()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_replicas_become_sample_lines() {
        let status = json!({"broker_id": 1, "replicas": [
            {"topic": "t0", "partition": 0, "role": "leader", "leader": 1, "leader_epoch": 3,
             "isr": [1, 2], "high_watermark": 17, "log_end_offset": 18, "log_start_offset": 0},
            {"topic": "t0", "partition": 1, "role": "follower", "leader": 2, "leader_epoch": 1,
             "isr": [2], "high_watermark": 4},
            {"role": "nonsense"},
        ]});
        let lines = status_lines(5, "n1", &status);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            json!({"time": 5, "key": "t0/0", "node": "n1", "role": "leader",
                   "isr": ["n1", "n2"], "leader": "n1", "leader_epoch": 3,
                   "high_watermark": 17, "log_end_offset": 18, "log_start_offset": 0})
        );
        assert_eq!(lines[1]["leader"], "n2");
        assert_eq!(lines[1]["log_end_offset"], Value::Null);
    }
}
