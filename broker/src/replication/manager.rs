//! The broker side of a cluster (Kafka's `ReplicaManager`): the [`ReplicaManager`] that owns
//! this broker's replicas, its session with the controller and the background loops it runs.
//! Its `impl` is split by concern over the files of `replication/`:
//!
//! - here: construction, the replica table, [`ReplicaManager::start`] and shutdown;
//! - `controller_session`: registration, heartbeats, the metadata watch, topic admin calls
//!   (Kafka's `BrokerLifecycleManager`);
//! - `roles`: metadata-driven leader / follower / offline transitions;
//! - `fetch_serving`: the leader's answers to follower fetches and OffsetsForLeaderEpoch;
//! - `isr`: ISR shrink and expansion through AlterPartition;
//! - `produce`, `leadership_checks`, `delete_records`: the leader's side of client requests;
//! - `hw_checkpoint`: the periodic HW checkpoint; `status`: the status and metrics view.
//!
//! Locking: each [`Replica`] has a role lock (leader/follower state) and the partition's own
//! lock (log + HW). The role lock is always taken first; neither is held across an `.await`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::replica::Replica;
use super::settings::ReplicationConfig;
use crate::controller::protocol::ClusterMetadata;
use crate::topics::TopicCatalog;

/// Pause after a failed call to the controller or a leader (Kafka's `replica.fetch.backoff.ms`
/// is 1000; shorter here so tests and failovers move quickly).
pub const RETRY_BACKOFF_MS: u64 = 200;

/// The broker's replication machinery. See the module docs.
pub struct ReplicaManager {
    /// Replication settings.
    pub settings: ReplicationConfig,
    /// Client for the controller and the other brokers.
    pub(super) http: reqwest::Client,
    /// This incarnation's broker epoch (0 until registered).
    pub(super) broker_epoch: AtomicU64,
    /// The epoch in the clean-shutdown marker found at start-up (`None`: the previous process
    /// did not stop in order), sent with the first registration (KIP-966).
    pub(super) previous_broker_epoch: Option<u64>,
    /// The latest metadata applied (version 0: none yet).
    pub(super) metadata: watch::Sender<Arc<ClusterMetadata>>,
    /// Local replicas by (topic, partition).
    pub(super) replicas: RwLock<BTreeMap<(String, u32), Arc<Replica>>>,
    /// The broker's topic catalog (the same as [`crate::broker::Broker::topics`]): applying
    /// metadata creates and deletes the local topics it names.
    pub(super) topics: Arc<TopicCatalog>,
    /// Serialises metadata application (the watch, the heartbeat and topic admin all apply).
    pub(super) apply_lock: tokio::sync::Mutex<()>,
    /// ISR shrinks of partitions led here (Kafka's IsrShrinksPerSec, as a counter).
    pub isr_shrinks: AtomicU64,
    /// ISR expansions of partitions led here.
    pub isr_expands: AtomicU64,
}

impl ReplicaManager {
    /// A manager for a broker that will register with `settings.controller_url`, telling the
    /// controller `previous_broker_epoch` (from the clean-shutdown marker, see
    /// [`crate::storage::clean_shutdown`]), and keeping the local replicas of `topics`.
    pub fn new(
        settings: ReplicationConfig,
        previous_broker_epoch: Option<u64>,
        topics: Arc<TopicCatalog>,
    ) -> Arc<Self> {
        let empty = ClusterMetadata {
            version: 0,
            brokers: Vec::new(),
            topics: Vec::new(),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("HTTP client builds");
        Arc::new(Self {
            settings,
            http,
            broker_epoch: AtomicU64::new(0),
            previous_broker_epoch,
            metadata: watch::channel(Arc::new(empty)).0,
            replicas: RwLock::new(BTreeMap::new()),
            topics,
            apply_lock: tokio::sync::Mutex::new(()),
            isr_shrinks: AtomicU64::new(0),
            isr_expands: AtomicU64::new(0),
        })
    }

    /// This incarnation's broker epoch, `None` until registered.
    pub fn broker_epoch(&self) -> Option<u64> {
        Some(self.broker_epoch.load(Ordering::SeqCst)).filter(|&e| e != 0)
    }

    /// The latest metadata this broker applied.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata.borrow().clone()
    }

    /// The HTTP client (shared by the fetchers).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The local replica of `topic`/`partition`, if this broker hosts one.
    pub fn replica(&self, topic: &str, partition: u32) -> Option<Arc<Replica>> {
        self.replicas
            .read()
            .expect("replicas lock")
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    /// Every local replica.
    pub fn all_replicas(&self) -> Vec<Arc<Replica>> {
        self.replicas
            .read()
            .expect("replicas lock")
            .values()
            .cloned()
            .collect()
    }

    /// Starts the cluster side of the broker in a background task: registers with the
    /// controller (retrying until it answers), applies the metadata, then runs the heartbeat,
    /// metadata watch, ISR check and HW checkpoint loops. Aborting the task stops them all.
    pub fn start(self: &Arc<Self>) -> JoinHandle<()> {
        let manager = self.clone();
        tokio::spawn(async move {
            manager.register().await;
            tokio::join!(
                manager.clone().heartbeat_forever(),
                manager.clone().watch_metadata_forever(),
                manager.clone().check_isr_forever(),
                manager.clone().checkpoint_forever(),
            );
        })
    }

    /// Stops every fetcher and writes the HW checkpoints (clean shutdown).
    pub fn shutdown(&self) {
        for replica in self.all_replicas() {
            replica.stop_fetcher();
        }
        self.checkpoint_high_watermarks();
    }
}
