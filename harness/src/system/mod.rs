//! The system under test, as the runner's phases see it: one [`System`] per kind of system,
//! chosen once per run by [`run_with`] and handed to every phase, which never asks which one
//! it has (Jepsen's `db` and `client` protocols, chosen once per test).
//!
//! A system knows how the harness sets its topic up, samples its replicas' status, lets the
//! nemesis look its leaders and ISRs up, checks that it recovered, which clients the
//! workload and the final reads use, and how to read each replica's own log at the end. Node control (start, kill, pause, partition) is the
//! [`Cluster`]'s, whatever runs on the nodes.
//!
//! # Layout
//! - this file: the [`System`] trait, the run's [`Topic`], and [`run_with`], the one place
//!   that chooses a system.
//! - `companion`: the companion broker, observed over its HTTP API, with the workload over
//!   HTTP ([`CompanionOverHttp`]) or over its Kafka listeners ([`CompanionOverKafka`]).
//! - `apache_kafka`: Apache Kafka ([`ApacheKafka`]; local `--system kafka` or a
//!   `kind = "kafka"` cluster file), observed and driven over Kafka's protocol alone.
//! - `over_java`: either system with the workload over Kafka's own Java client
//!   ([`OverJava`], `--client java`): the queue workload, idempotent or not, and the
//!   transactional workload.

pub mod apache_kafka;
pub mod companion;
pub mod over_java;

pub use apache_kafka::{ApacheKafka, KafkaView};
pub use companion::{CompanionOverHttp, CompanionOverKafka, HttpView};
pub use over_java::OverJava;

use crate::cluster::Cluster;
use crate::nemesis::ClusterView;
use crate::recorder::Recorder;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::client::{ClientConfig, ClientError, PartitionMeta};
use tidewater_workloads::group::{GroupClient, GroupSettings};
use tidewater_workloads::java::JavaQueueClient;
use tidewater_workloads::kafka::{KafkaClientConfig, KafkaQueueClient};
use tidewater_workloads::queue::QueueClient;
use tidewater_workloads::replicas::{PartitionReplicas, ReplicaLog, UnreadReplica};
use tidewater_workloads::txn::TxnClient;

/// Bound on setup: brokers registering, topic creation, first leaders.
pub const SETUP_TIME_LIMIT: Duration = Duration::from_secs(60);
/// Pause between two setup or recovery probes.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Bound on the records read from one replica's own log at the end of a run; a longer log
/// is compared up to there (`truncated` in `replicas.jsonl`).
pub const REPLICA_RECORDS_MAX: usize = 2_000_000;

/// Every replica of `key` that `meta` (the system's metadata, or why it had none) names, each
/// read by `read` from the node holding it, all at once; then judged against that metadata
/// ([`PartitionReplicas::judge`]). A replica that could not be read is listed as unread.
pub(crate) async fn gather_replicas<F, Fut>(
    key: &str,
    meta: Result<Option<PartitionMeta>, ClientError>,
    read: F,
) -> PartitionReplicas
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<ReplicaLog, String>>,
{
    let mut partition = PartitionReplicas {
        key: key.to_string(),
        ..Default::default()
    };
    let meta = match meta {
        Ok(Some(meta)) => meta,
        Ok(None) => return partition,
        Err(e) => {
            partition.unread.push(UnreadReplica {
                node: e.node.unwrap_or_default(),
                error: format!("metadata: {}: {}", e.cause.name(), e.message),
            });
            return partition;
        }
    };
    let reads = meta.replicas.iter().map(|node| read(node.clone()));
    for (node, read) in meta
        .replicas
        .iter()
        .zip(futures::future::join_all(reads).await)
    {
        match read {
            Ok(log) => partition.replicas.push(log),
            Err(error) => partition.unread.push(UnreadReplica {
                node: node.clone(),
                error,
            }),
        }
    }
    partition.judge(meta.leader, meta.isr, &meta.replicas);
    partition
}

/// The run's topic, as setup creates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// Its name (`t0`).
    pub name: String,
    /// How many partitions it has.
    pub partitions: u32,
    /// How many replicas each partition has.
    pub replication_factor: u32,
    /// Topic-level settings from the run's `--set`, Kafka's names.
    pub configs: BTreeMap<String, String>,
    /// Its partitions as keys, `t0/0 ..`: setup waits until each has a leader.
    pub keys: Vec<String>,
}

/// One system under test: what each phase of a run does that depends on the system.
pub trait System: Send + Sync + 'static {
    /// The workload's produce and fetch client; the final reads use it too.
    type Queue: QueueClient;
    /// The group workload's coordinator client.
    type Group: GroupClient;

    /// The nodes as the harness reaches them, for the run's `cluster up:` line.
    fn describe_nodes(&self) -> String;

    /// Creates `topic` (retrying while brokers register) and waits until every partition has
    /// a leader, within [`SETUP_TIME_LIMIT`]; the error says what was last seen.
    fn setup_topic(&self, topic: &Topic) -> impl Future<Output = Result<(), String>> + Send;

    /// One round of `samples.jsonl` lines (the runner's sampler writes them): what the system
    /// says of its replicas now, stamped with `clock`'s time once the answers are in. Nodes
    /// that do not answer are left out (that is what the faults do).
    fn sample(&self, clock: &Recorder) -> impl Future<Output = Vec<Value>> + Send;

    /// What the nemesis asks about leaders and ISRs to resolve targets such as `leader:t0/0`.
    fn view(&self) -> Arc<dyn ClusterView>;

    /// One recovery probe: whether every key of `keys` has a leader that answers now.
    fn leaders_answer(&self, keys: &[String]) -> impl Future<Output = bool> + Send;

    /// The workload's (and the final reads') client.
    fn queue(&self) -> Arc<Self::Queue>;

    /// True when `key`'s log has settled at `offset`: every replica answers, is in the ISR and
    /// ends at `offset`, which is the leader's high watermark and known to every replica, so
    /// nothing at or above it exists and nothing else can be elected. The final reads stop
    /// there short of an acknowledged offset (that record is lost, not unread).
    fn settled_at(&self, key: &str, offset: u64) -> impl Future<Output = bool> + Send;

    /// A coordinator client for the group workload with `settings`.
    fn group(&self, settings: &GroupSettings) -> Self::Group;

    /// Every replica's own log of `key`, leader and followers alike, each read from the node
    /// that holds it (at most [`REPLICA_RECORDS_MAX`] records each), with the leader and ISR
    /// the system names and whether it had settled (see [`PartitionReplicas::settled`]).
    /// Replicas that do not answer are listed as unread. `Err` says why this system's replicas
    /// cannot be read at all; the run then compares nothing (`replica-divergence`).
    fn replica_logs(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<PartitionReplicas, String>> + Send;

    /// The transactional workload's client, for systems whose client speaks transactions
    /// (none by default; the run's config refuses `--workload txn` elsewhere).
    fn transactions(&self) -> Option<Arc<dyn TxnClient>> {
        None
    }
}

/// What a run does with its system under test, written once for every system: the runner's
/// phases. [`run_with`] hands it the system the run calls for.
pub trait Phases: Send {
    /// What the phases conclude.
    type Output;

    /// Runs the phases against `system`.
    fn run<S: System>(self, system: Arc<S>) -> impl Future<Output = Self::Output> + Send;
}

/// Chooses the run's system under test, the only place that asks which one it is, and runs
/// `phases` against it: Apache Kafka when the cluster's brokers are Kafka's (they serve
/// Kafka's protocol and nothing else; with the workload over `java`, the Java client's
/// driver, when the run has one), otherwise the companion broker, with the workload over
/// `workload_client` (`http`; `kafka` for the brokers' Kafka listeners through rskafka;
/// `java` for the Java client's driver over them).
pub async fn run_with<P: Phases>(
    cluster: &dyn Cluster,
    workload_client: &str,
    java: Option<Arc<JavaQueueClient>>,
    phases: P,
) -> P::Output {
    let kafka = cluster.kafka_bootstrap();
    if !kafka.is_empty() {
        let system = ApacheKafka::new(&kafka);
        return match java {
            Some(java) => phases.run(Arc::new(OverJava::new(system, java))).await,
            None => phases.run(Arc::new(system)).await,
        };
    }
    let broker = CompanionOverHttp::new(cluster.nodes());
    match (workload_client, java) {
        ("java", Some(java)) => {
            let over_kafka = CompanionOverKafka::new(broker);
            phases.run(Arc::new(OverJava::new(over_kafka, java))).await
        }
        ("kafka", _) => phases.run(Arc::new(CompanionOverKafka::new(broker))).await,
        _ => phases.run(Arc::new(broker)).await,
    }
}

/// The workload's client over the Kafka listeners at `bootstrap` (`HOST:PORT` each), with the
/// HTTP client's bounds.
fn kafka_queue_client(bootstrap: Vec<String>, config: &ClientConfig) -> KafkaQueueClient {
    let settings = KafkaClientConfig {
        bootstrap,
        request_timeout_ms: config.request_timeout_ms,
        metadata_timeout_ms: config.metadata_timeout_ms,
    };
    KafkaQueueClient::new(settings)
}
