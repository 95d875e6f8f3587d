//! Apache Kafka as the system under test: a local cluster with `--system kafka`, or hosts of a
//! `kind = "kafka"` cluster file. It speaks nothing but Kafka's protocol, so the harness's own
//! calls go through it too: CreateTopics and Metadata for setup, Metadata for the nemesis,
//! ListOffsets for recovery, and for the samples (Kafka has no `/v1/status`) Metadata with each
//! leader's own offsets (ListOffsets and a one-byte fetch to the leader).

use super::{
    gather_replicas, kafka_queue_client, System, Topic, PROBE_INTERVAL, REPLICA_RECORDS_MAX,
    SETUP_TIME_LIMIT,
};
use crate::nemesis::view::METADATA_TIMEOUT;
use crate::nemesis::{ClusterView, PartitionState};
use crate::recorder::Recorder;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::client::{ClientConfig, ClientError, PartitionMeta};
use tidewater_workloads::group::GroupSettings;
use tidewater_workloads::kafka::KafkaQueueClient;
use tidewater_workloads::kafka_admin::KafkaAdmin;
use tidewater_workloads::kafka_group::KafkaGroupClient;
use tidewater_workloads::replicas::{PartitionReplicas, ReplicaLog};
use tokio::time::Instant;

/// Apache Kafka's brokers, reached over their Kafka listeners.
pub struct ApacheKafka {
    /// Broker node name -> its Kafka listener, as the cluster gives them.
    brokers: BTreeMap<String, SocketAddr>,
    /// The same listeners as `HOST:PORT`, in node order: every client bootstraps from them.
    bootstrap: Vec<String>,
    /// The harness's own calls: topic creation and the samples' Metadata.
    admin: KafkaAdmin,
    /// The client settings (bounds, retries); they name no nodes here.
    client_config: ClientConfig,
    /// The workload's client; recovery asks it too.
    queue: Arc<KafkaQueueClient>,
}

impl ApacheKafka {
    /// Kafka on the brokers at `brokers` (node name -> Kafka listener).
    pub fn new(brokers: &BTreeMap<String, SocketAddr>) -> ApacheKafka {
        let bootstrap: Vec<String> = brokers.values().map(|a| a.to_string()).collect();
        let client_config = ClientConfig::new(BTreeMap::new());
        ApacheKafka {
            brokers: brokers.clone(),
            admin: KafkaAdmin::new(
                bootstrap.clone(),
                Duration::from_millis(client_config.request_timeout_ms),
            ),
            queue: Arc::new(kafka_queue_client(bootstrap.clone(), &client_config)),
            bootstrap,
            client_config,
        }
    }
}

impl System for ApacheKafka {
    type Queue = KafkaQueueClient;
    type Group = KafkaGroupClient;

    fn describe_nodes(&self) -> String {
        // The brokers' Kafka listeners (the controller has none for clients).
        self.brokers
            .iter()
            .map(|(name, address)| format!("{name}=kafka://{address}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    async fn setup_topic(&self, topic: &Topic) -> Result<(), String> {
        setup_topic(&self.admin, topic).await
    }

    async fn sample(&self, clock: &Recorder) -> Vec<Value> {
        // The merged Metadata of every broker; an unanswered round is skipped. Then each
        // leader's own offsets, as the companion broker's status reports them: a leader that
        // does not answer leaves its partition's offsets null for this round.
        let Ok(parts) = self.admin.metadata().await else {
            return Vec::new();
        };
        let time_ns = clock.now_ns();
        let asked = parts.iter().filter_map(|p| {
            let leader = p.leader.clone()?;
            Some(async move {
                let address = self.brokers.get(&leader).copied();
                let log = read_replica(&self.admin, address, &leader, "leader", &p.key, false);
                (p.key.clone(), log.await.ok())
            })
        });
        let offsets: BTreeMap<String, ReplicaLog> = futures::future::join_all(asked)
            .await
            .into_iter()
            .filter_map(|(key, log)| Some((key, log?)))
            .collect();
        metadata_lines(time_ns, &parts, &offsets)
    }

    fn view(&self) -> Arc<dyn ClusterView> {
        Arc::new(KafkaView::new(self.bootstrap.clone()))
    }

    async fn leaders_answer(&self, keys: &[String]) -> bool {
        let answers = futures::future::join_all(keys.iter().map(|k| self.queue.earliest(k))).await;
        answers.iter().all(Result::is_ok)
    }

    fn queue(&self) -> Arc<KafkaQueueClient> {
        self.queue.clone()
    }

    fn group(&self, settings: &GroupSettings) -> KafkaGroupClient {
        KafkaGroupClient::new(self.bootstrap.clone(), &self.client_config, settings)
    }

    async fn settled_at(&self, key: &str, offset: u64) -> bool {
        // Each replica's bounds and HW from the broker holding it, judged as the replica
        // logs are (`PartitionReplicas::judge`), without reading their records.
        let replicas = self.replicas(key, false).await;
        replicas.settled && replicas.high_watermark() == offset
    }

    async fn replica_logs(&self, key: &str) -> Result<PartitionReplicas, String> {
        Ok(self.replicas(key, true).await)
    }
}

impl ApacheKafka {
    /// Every replica of `key` as the broker holding it serves it, with their records when
    /// `records`, judged against the leader and ISR of the freshest Metadata.
    async fn replicas(&self, key: &str, records: bool) -> PartitionReplicas {
        let meta = self.admin.partition_meta(key).await;
        let leader = meta.as_ref().ok().and_then(|m| m.as_ref()?.leader.clone());
        let leader = leader.as_deref();
        gather_replicas(key, meta, |node| async move {
            let role = if leader == Some(node.as_str()) {
                "leader"
            } else {
                "follower"
            };
            let address = self.brokers.get(&node).copied();
            read_replica(&self.admin, address, &node, role, key, records).await
        })
        .await
    }
}

/// Bytes asked for per fetch of a replica's log.
const REPLICA_FETCH_BYTES: i32 = 4 << 20;

/// One replica's log as the broker holding it serves it: its log start and end offsets
/// (ListOffsets with Kafka's debugging replica id, answered for the broker's own replica),
/// its high watermark and, when `records`, its records, by consumer fetches sent to that
/// broker, which a follower serves from its own log (KIP-392), up to its own high watermark.
/// What lies above a replica's HW cannot be read this way, so it is not compared
/// (docs/checkers.md).
async fn read_replica(
    admin: &KafkaAdmin,
    address: Option<SocketAddr>,
    node: &str,
    role: &str,
    key: &str,
    records: bool,
) -> Result<ReplicaLog, String> {
    let failed = |e: ClientError| format!("{}: {}", e.cause.name(), e.message);
    let address = address
        .ok_or_else(|| format!("{node} is not a broker of this cluster"))?
        .to_string();
    let (log_start_offset, log_end_offset) =
        admin.replica_bounds(&address, key).await.map_err(failed)?;
    let mut log = ReplicaLog {
        node: node.to_string(),
        role: Some(role.to_string()),
        log_start_offset,
        high_watermark: 0,
        log_end_offset,
        records: Vec::new(),
        truncated: false,
    };
    let mut next = log_start_offset;
    let mut first = true;
    // Without records, one small fetch for the HW (Kafka returns at least one batch).
    let bytes = if records { REPLICA_FETCH_BYTES } else { 1 };
    loop {
        let page = admin
            .replica_fetch(&address, key, next, bytes)
            .await
            .map_err(failed)?;
        if first {
            // The replica's HW as the first fetch saw it: a log that grew since is compared
            // as it was.
            log.high_watermark = page.high_watermark;
            first = false;
        }
        if page.records.is_empty() || !records {
            return Ok(log);
        }
        next = page.next_offset;
        log.records.extend(
            page.records
                .into_iter()
                .filter(|r| r.offset < log.high_watermark),
        );
        if next >= log.high_watermark {
            return Ok(log);
        }
        if log.records.len() >= REPLICA_RECORDS_MAX {
            log.truncated = true;
            return Ok(log);
        }
    }
}

/// CreateTopics with the topic's configs, then Metadata until every partition has a leader,
/// within [`SETUP_TIME_LIMIT`].
async fn setup_topic(admin: &KafkaAdmin, topic: &Topic) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_TIME_LIMIT;
    let keys = &topic.keys;
    let mut created = false;
    let mut last_error = String::new();
    while Instant::now() < deadline {
        if !created {
            match admin
                .create_topic(
                    &topic.name,
                    topic.partitions,
                    topic.replication_factor,
                    &topic.configs,
                )
                .await
            {
                Ok(()) => created = true,
                Err(e) => last_error = format!("{}: {}", e.cause.name(), e.message),
            }
        }
        if created {
            match admin.metadata().await {
                Ok(parts) => {
                    let led = keys
                        .iter()
                        .filter(|k| parts.iter().any(|p| &p.key == *k && p.leader.is_some()))
                        .count();
                    if led == keys.len() {
                        return Ok(());
                    }
                    last_error = format!("{led} of {} partitions have a leader", keys.len());
                }
                Err(e) => last_error = format!("metadata: {}", e.message),
            }
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    Err(format!("topic {}: {last_error}", topic.name))
}

/// The sample lines of one Metadata answer: per partition with a leader, a line in the
/// leader's name, as if from that leader (`role` `leader`, its ISR and epoch), with the
/// leader's own log start offset, high watermark and log end offset where `offsets` has them
/// (null otherwise: Metadata carries none).
pub fn metadata_lines(
    time_ns: u64,
    parts: &[PartitionMeta],
    offsets: &BTreeMap<String, ReplicaLog>,
) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| {
            let leader = p.leader.as_ref()?;
            // Offsets only from the broker Metadata names as leader (a read that raced a
            // leader change answered for another replica).
            let log = offsets.get(&p.key).filter(|log| &log.node == leader);
            Some(json!({
                "time": time_ns,
                "key": p.key,
                "node": leader,
                "role": "leader",
                "isr": p.isr,
                "leader": leader,
                "leader_epoch": p.leader_epoch,
                "high_watermark": log.map(|l| l.high_watermark),
                "log_end_offset": log.map(|l| l.log_end_offset),
                "log_start_offset": log.map(|l| l.log_start_offset),
            }))
        })
        .collect()
}

/// Metadata over Kafka's protocol, for clusters that speak nothing else (Apache Kafka). Kafka's
/// brokers answer from their metadata caches, and one cut off from the controller keeps
/// reporting what it knew before the cut, so every broker is asked and the freshest answer
/// per partition is taken (`KafkaAdmin::metadata`).
pub struct KafkaView {
    /// Metadata requests, each within [`METADATA_TIMEOUT`].
    admin: KafkaAdmin,
}

impl KafkaView {
    /// A view over the brokers' Kafka listeners, `HOST:PORT` each.
    pub fn new(bootstrap: Vec<String>) -> KafkaView {
        KafkaView {
            admin: KafkaAdmin::new(bootstrap, METADATA_TIMEOUT),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each partition with a leader is a line in the leader's name; the offsets are the
    /// leader's own where it answered, null where it did not.
    #[test]
    fn kafka_metadata_becomes_leader_lines_with_the_leaders_offsets() {
        let parts = vec![
            PartitionMeta {
                key: "t0/0".into(),
                leader: Some("n2".into()),
                leader_epoch: Some(4),
                isr: vec!["n2".into(), "n3".into()],
                replicas: vec!["n1".into(), "n2".into(), "n3".into()],
            },
            PartitionMeta {
                key: "t0/1".into(),
                leader: None,
                leader_epoch: None,
                isr: vec![],
                replicas: vec!["n1".into()],
            },
        ];
        let unanswered = metadata_lines(9, &parts, &BTreeMap::new());
        assert_eq!(
            unanswered,
            [
                json!({"time": 9, "key": "t0/0", "node": "n2", "role": "leader",
                    "isr": ["n2", "n3"], "leader": "n2", "leader_epoch": 4,
                    "high_watermark": null, "log_end_offset": null, "log_start_offset": null})
            ]
        );
        let log = |node: &str| ReplicaLog {
            node: node.into(),
            role: Some("leader".into()),
            log_start_offset: 3,
            high_watermark: 17,
            log_end_offset: 19,
            records: vec![],
            truncated: false,
        };
        let answered = metadata_lines(9, &parts, &BTreeMap::from([("t0/0".into(), log("n2"))]));
        assert_eq!(
            (
                &answered[0]["log_start_offset"],
                &answered[0]["high_watermark"],
                &answered[0]["log_end_offset"]
            ),
            (&json!(3), &json!(17), &json!(19))
        );
        // A read answered by a broker that is no longer the leader is not the leader's.
        let moved = metadata_lines(9, &parts, &BTreeMap::from([("t0/0".into(), log("n3"))]));
        assert_eq!(moved, unanswered);
    }
}
