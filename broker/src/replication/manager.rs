//! The broker side of a cluster (Kafka's `ReplicaManager` + `BrokerLifecycleManager`):
//! registration and heartbeats with the controller, metadata-driven leader / follower
//! transitions, the leader's handling of follower fetches and ISR changes, replicated produce
//! (acks, min.insync.replicas, delayed produce), consumer-fetch checks (KIP-207), and the HW
//! checkpoint.
//!
//! Locking: each [`Replica`] has a role lock (leader/follower state) and the partition's own
//! lock (log + HW). The role lock is always taken first; neither is held across an `.await`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::leader::LeaderState;
use super::protocol::{
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, ReplicaFetchOffsets,
    ReplicaFetchRequest,
};
use super::{fetcher, hw_checkpoint, ReplicationConfig};
use crate::bugs::Bug;
use crate::controller::protocol::{
    AlterPartitionRequest, ClusterMetadata, ControllerError, ControllerErrorCode,
    CreateTopicRequest, HeartbeatRequest, HeartbeatResponse, PartitionMetadata,
    RegisterBrokerRequest, RegisterBrokerResponse, TopicMetadata,
};
use crate::error::{ApiError, ErrorKind};
use crate::partition::{Isolation, Partition, PartitionState};
use crate::server::Broker;
use crate::storage::Record;
use crate::topics::TopicMeta;

/// Longest DeleteRecords waits for the followers' log start offsets (Kafka bounds it by the
/// request's timeout, 30 s by default).
pub const DELETE_RECORDS_WAIT_MAX_MS: u64 = 10_000;
/// Longest a metadata long poll waits at the controller before asking again.
const METADATA_WATCH_WAIT_MS: u64 = 10_000;
/// Pause after a failed call to the controller or a leader (Kafka's `replica.fetch.backoff.ms`
/// is 1000; shorter here so tests and failovers move quickly).
pub const RETRY_BACKOFF_MS: u64 = 200;

/// Errors of the internal (broker-to-broker) routes, with Kafka's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalError {
    /// Kafka's error name.
    pub name: &'static str,
    /// What happened.
    pub message: String,
    /// The leader's offsets, when known (OFFSET_OUT_OF_RANGE carries them).
    pub offsets: Option<ReplicaFetchOffsets>,
}

impl InternalError {
    fn new(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            name,
            message: message.into(),
            offsets: None,
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> u16 {
        match self.name {
            "UNKNOWN_TOPIC_OR_PARTITION" => 404,
            "NOT_LEADER_OR_FOLLOWER" => 421,
            "FENCED_LEADER_EPOCH" | "UNKNOWN_LEADER_EPOCH" => 409,
            "OFFSET_OUT_OF_RANGE" => 416,
            "INVALID_REQUEST" => 400,
            _ => 500,
        }
    }
}

/// What a replica currently is.
#[derive(Debug, Clone)]
pub enum Role {
    /// Leads the partition.
    Leader(Box<LeaderState>),
    /// Follows `leader`.
    Follower {
        /// The leader's broker id.
        leader: u32,
    },
    /// The partition has no leader (or this replica has not been told its role yet).
    Offline,
}

/// A replica's replication state (behind the role lock).
#[derive(Debug, Clone)]
pub struct RoleState {
    /// Leader, follower or offline.
    pub role: Role,
    /// The leader epoch of the role.
    pub leader_epoch: u32,
    /// Assigned replicas, from the metadata.
    pub replicas: Vec<u32>,
    /// The ISR as the metadata last said (the leader's own view is in its `LeaderState`).
    pub isr: Vec<u32>,
}

/// One partition replica hosted by this broker in a cluster.
pub struct Replica {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The log, HW and waiters (shared with the client API).
    pub log: Arc<Partition>,
    /// Role state; locked before `log`.
    role: Mutex<RoleState>,
    /// The follower fetch task, while following.
    fetcher: Mutex<Option<JoinHandle<()>>>,
    /// acks=all produces waiting for the HW; locked after `log`, never held across an await.
    delayed_produces: Mutex<DelayedProduces>,
}

/// acks=all produces waiting for the HW to pass their last offset (Kafka's produce purgatory),
/// completed by [`Replica::publish`]: a publish wakes only the requests it completes. (Waiting on
/// the partition's offsets watch instead woke every request in flight at every append and every
/// fetch, each to find its condition still false.)
#[derive(Debug, Default)]
struct DelayedProduces {
    next_id: u64,
    /// The leader epoch of the last publish; `None` before the first.
    epoch: Option<u32>,
    /// (last offset, id) -> (leader epoch of the append, completion).
    waiting: BTreeMap<(u64, u64), (u32, oneshot::Sender<()>)>,
}

impl Replica {
    /// Locks the role state.
    pub fn role(&self) -> MutexGuard<'_, RoleState> {
        self.role.lock().expect("replica role lock poisoned")
    }

    fn delayed_produces(&self) -> MutexGuard<'_, DelayedProduces> {
        self.delayed_produces
            .lock()
            .expect("delayed produces lock poisoned")
    }

    /// Registers an acks=all produce of a batch ending at `last_offset`, appended in
    /// `leader_epoch`: the receiver completes when a publish shows the HW past it or another
    /// epoch. The caller removes the returned key from `waiting` when it stops waiting.
    fn delay_produce(
        &self,
        last_offset: u64,
        leader_epoch: u32,
    ) -> ((u64, u64), oneshot::Receiver<()>) {
        let (completion, completed) = oneshot::channel();
        let mut delayed = self.delayed_produces();
        let key = (last_offset, delayed.next_id);
        delayed.next_id += 1;
        delayed.waiting.insert(key, (leader_epoch, completion));
        (key, completed)
    }

    /// Publishes the offsets of `log` to the partition's waiters, then completes the delayed
    /// produces whose batch the HW passed, and all those of another leader epoch (they wake to
    /// find the leadership lost). Call with the log lock held after every change, as for
    /// [`Partition::publish`]; every HW and epoch change of a replica goes through here.
    fn publish(&self, log: &PartitionState) {
        self.log.publish(log);
        let mut delayed = self.delayed_produces();
        if delayed.epoch != Some(log.leader_epoch) {
            delayed.epoch = Some(log.leader_epoch);
            let epoch = log.leader_epoch;
            let stale: Vec<_> = delayed
                .waiting
                .iter()
                .filter(|(_, (e, _))| *e != epoch)
                .map(|(key, _)| *key)
                .collect();
            for key in stale {
                if let Some((_, done)) = delayed.waiting.remove(&key) {
                    let _ = done.send(());
                }
            }
        }
        if delayed
            .waiting
            .first_key_value()
            .is_some_and(|((last_offset, _), _)| *last_offset < log.high_watermark)
        {
            let pending = delayed.waiting.split_off(&(log.high_watermark, 0));
            for (_, (_, done)) in std::mem::replace(&mut delayed.waiting, pending) {
                let _ = done.send(());
            }
        }
    }

    fn stop_fetcher(&self) {
        if let Some(task) = self.fetcher.lock().expect("fetcher lock poisoned").take() {
            task.abort();
        }
    }
}

/// A replicated append's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderAppend {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// HW when answering.
    pub high_watermark: u64,
    /// The epoch the batch was appended in.
    pub leader_epoch: u32,
    /// The ISR size the leader counted when it answered: for acks=all, the replicas the
    /// acknowledgement stands on (at least `min.insync.replicas` unless a bug says otherwise).
    pub isr_size: u32,
}

/// One local replica in `GET /v1/status`.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaStatus {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// `leader`, `follower` or `offline`.
    pub role: &'static str,
    /// The leader's id, if known.
    pub leader: Option<u32>,
    /// The leader epoch.
    pub leader_epoch: u32,
    /// Log end offset.
    pub log_end_offset: u64,
    /// High watermark.
    pub high_watermark: u64,
    /// Log start offset.
    pub log_start_offset: u64,
    /// Low watermark (leaders only: min log start over the replicas).
    pub low_watermark: Option<u64>,
    /// Assigned replicas.
    pub replicas: Vec<u32>,
    /// In-sync replicas.
    pub isr: Vec<u32>,
}

/// A record in a diagnostic log read.
#[derive(Debug, Clone, Serialize)]
pub struct LocalRecord {
    /// Its offset.
    pub offset: u64,
    /// The epoch of the leader that appended it.
    pub leader_epoch: u32,
    /// Its value (UTF-8, lossy).
    pub value: String,
}

/// Answer of the diagnostic log read.
#[derive(Debug, Clone, Serialize)]
pub struct LocalLog {
    /// Records from the requested offset.
    pub records: Vec<LocalRecord>,
    /// The replica's log start offset.
    pub log_start_offset: u64,
    /// The replica's HW.
    pub high_watermark: u64,
    /// The replica's LEO.
    pub log_end_offset: u64,
    /// The epoch the replica knows.
    pub leader_epoch: u32,
}

/// The broker's replication machinery. See the module docs.
pub struct ReplicaManager {
    /// Replication settings.
    pub settings: ReplicationConfig,
    /// Client for the controller and the other brokers.
    http: reqwest::Client,
    /// This incarnation's broker epoch (0 until registered).
    broker_epoch: AtomicU64,
    /// The epoch in the clean-shutdown marker found at start-up (`None`: the previous process
    /// did not stop in order), sent with the first registration (KIP-966).
    previous_broker_epoch: Option<u64>,
    /// The latest metadata applied (version 0: none yet).
    metadata: watch::Sender<Arc<ClusterMetadata>>,
    /// Local replicas by (topic, partition).
    replicas: RwLock<BTreeMap<(String, u32), Arc<Replica>>>,
    /// Serialises metadata application (the watch, the heartbeat and topic admin all apply).
    apply_lock: tokio::sync::Mutex<()>,
    /// ISR shrinks of partitions led here (Kafka's IsrShrinksPerSec, as a counter).
    pub isr_shrinks: AtomicU64,
    /// ISR expansions of partitions led here.
    pub isr_expands: AtomicU64,
}

impl ReplicaManager {
    /// A manager for a broker that will register with `settings.controller_url`, telling the
    /// controller `previous_broker_epoch` (from the clean-shutdown marker, see
    /// [`crate::storage::clean_shutdown`]).
    pub fn new(settings: ReplicationConfig, previous_broker_epoch: Option<u64>) -> Arc<Self> {
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
    pub fn start(self: &Arc<Self>, broker: Arc<Broker>) -> JoinHandle<()> {
        let manager = self.clone();
        tokio::spawn(async move {
            manager.register(&broker).await;
            tokio::join!(
                manager.clone().heartbeat_forever(broker.clone()),
                manager.clone().watch_metadata_forever(broker.clone()),
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

    async fn register(self: &Arc<Self>, broker: &Broker) {
        // A running incarnation registering again lost nothing: it names itself. A new process
        // names the epoch of its clean-shutdown marker, if it found one (KIP-966).
        let previous_broker_epoch = match self.broker_epoch.load(Ordering::SeqCst) {
            0 => self.previous_broker_epoch,
            current => Some(current),
        };
        let request = RegisterBrokerRequest {
            broker_id: self.settings.broker_id,
            address: self.settings.advertised_url.clone(),
            kafka_address: self.settings.kafka_address.clone(),
            previous_broker_epoch,
        };
        loop {
            match self
                .controller_call::<_, RegisterBrokerResponse>(
                    "/controller/v1/brokers/register",
                    &request,
                )
                .await
            {
                Ok(Ok(response)) => {
                    tracing::info!(
                        broker_epoch = response.broker_epoch,
                        "registered with the controller"
                    );
                    self.broker_epoch
                        .store(response.broker_epoch, Ordering::SeqCst);
                    self.apply_metadata(broker, response.metadata).await;
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "registration refused"),
                Err(e) => tracing::warn!(error = %e, "controller unreachable for registration"),
            }
            tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }

    /// Heartbeats every `broker.heartbeat.interval.ms`; applies newer metadata from the answer;
    /// registers again when the controller no longer knows this incarnation.
    async fn heartbeat_forever(self: Arc<Self>, broker: Arc<Broker>) {
        let mut interval =
            tokio::time::interval(Duration::from_millis(self.settings.heartbeat_interval_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let request = HeartbeatRequest {
                broker_id: self.settings.broker_id,
                broker_epoch: self.broker_epoch.load(Ordering::SeqCst),
                metadata_version: self.metadata().version,
            };
            match self
                .controller_call::<_, HeartbeatResponse>(
                    "/controller/v1/brokers/heartbeat",
                    &request,
                )
                .await
            {
                Ok(Ok(response)) => {
                    if let Some(metadata) = response.metadata {
                        self.apply_metadata(&broker, metadata).await;
                    }
                }
                Ok(Err(e))
                    if matches!(
                        e.error,
                        ControllerErrorCode::StaleBrokerEpoch
                            | ControllerErrorCode::BrokerNotAvailable
                    ) =>
                {
                    tracing::warn!(error = %e, "controller forgot this incarnation; registering again");
                    self.register(&broker).await;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "heartbeat refused"),
                Err(e) => tracing::debug!(error = %e, "heartbeat failed"),
            }
        }
    }

    /// Long-polls the controller for metadata newer than the applied version, so changes
    /// arrive within milliseconds rather than a heartbeat interval.
    async fn watch_metadata_forever(self: Arc<Self>, broker: Arc<Broker>) {
        loop {
            let next = self.metadata().version + 1;
            let url = format!(
                "{}/controller/v1/metadata?min_version={next}&max_wait_ms={METADATA_WATCH_WAIT_MS}",
                self.settings.controller_url
            );
            let response = self
                .http
                .get(&url)
                .timeout(Duration::from_millis(METADATA_WATCH_WAIT_MS + 5_000))
                .send()
                .await;
            match response {
                Ok(r) if r.status().is_success() => match r.json::<ClusterMetadata>().await {
                    Ok(metadata) => {
                        if metadata.version >= next {
                            self.apply_metadata(&broker, metadata).await;
                        } else if metadata.version < next - 1 {
                            // The controller lost state (new data dir): start over from it.
                            tracing::warn!(
                                version = metadata.version,
                                "controller metadata went back"
                            );
                            tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "bad metadata answer");
                        tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                    }
                },
                _ => tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await,
            }
        }
    }

    /// Sends a JSON request to the controller: `Ok(Ok(answer))`, `Ok(Err(controller error))`,
    /// or `Err` when it could not be reached or answered garbage.
    async fn controller_call<Q: Serialize, A: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<Result<A, ControllerError>, String> {
        let url = format!("{}{}", self.settings.controller_url, path);
        let response = self
            .http
            .post(&url)
            .timeout(Duration::from_secs(5))
            .json(request)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            response
                .json::<A>()
                .await
                .map(Ok)
                .map_err(|e| e.to_string())
        } else {
            response
                .json::<ControllerError>()
                .await
                .map(Err)
                .map_err(|e| e.to_string())
        }
    }

    /// Creates a topic through the controller and applies the resulting metadata here.
    pub async fn create_topic(
        self: &Arc<Self>,
        broker: &Broker,
        request: &CreateTopicRequest,
    ) -> Result<TopicMetadata, ApiError> {
        let topic = match self
            .controller_call::<_, TopicMetadata>("/controller/v1/topics", request)
            .await
        {
            Ok(Ok(topic)) => topic,
            Ok(Err(e)) => return Err(controller_to_api(e)),
            Err(e) => {
                return Err(ApiError::new(
                    ErrorKind::RequestTimedOut,
                    format!("controller unreachable: {e}"),
                ))
            }
        };
        self.refresh_metadata(broker).await;
        Ok(topic)
    }

    /// Deletes a topic through the controller and applies the resulting metadata here.
    pub async fn delete_topic(
        self: &Arc<Self>,
        broker: &Broker,
        name: &str,
    ) -> Result<(), ApiError> {
        let url = format!(
            "{}/controller/v1/topics/{name}",
            self.settings.controller_url
        );
        let response = self
            .http
            .delete(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| {
                ApiError::new(
                    ErrorKind::RequestTimedOut,
                    format!("controller unreachable: {e}"),
                )
            })?;
        if !response.status().is_success() {
            let error = response
                .json::<ControllerError>()
                .await
                .map_err(|e| ApiError::new(ErrorKind::UnknownServerError, e.to_string()))?;
            return Err(controller_to_api(error));
        }
        self.refresh_metadata(broker).await;
        Ok(())
    }

    /// Fetches the controller's metadata now and applies it.
    async fn refresh_metadata(self: &Arc<Self>, broker: &Broker) {
        let url = format!("{}/controller/v1/metadata", self.settings.controller_url);
        let fetched = async {
            self.http
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await?
                .json()
                .await
        };
        match fetched.await {
            Ok(metadata) => self.apply_metadata(broker, metadata).await,
            Err(e) => tracing::warn!(error = %e, "metadata refresh failed"),
        }
    }

    /// Applies a metadata snapshot newer than the current one: creates and deletes local
    /// topics, then makes each local replica leader, follower or offline as it says.
    pub async fn apply_metadata(self: &Arc<Self>, broker: &Broker, metadata: ClusterMetadata) {
        let _serial = self.apply_lock.lock().await;
        if metadata.version <= self.metadata().version {
            return;
        }
        let me = self.settings.broker_id;
        for topic in &metadata.topics {
            if broker.topics.get(&topic.name).is_none() {
                let meta = TopicMeta {
                    partitions: topic.partitions.len() as u32,
                    replication_factor: topic
                        .partitions
                        .first()
                        .map_or(1, |p| p.replicas.len() as u16),
                    configs: topic.configs.clone(),
                };
                if let Err(e) = broker.topics.create(&topic.name, meta).await {
                    tracing::error!(topic = %topic.name, error = %e, "could not create a local topic");
                }
            }
        }
        for topic in broker.topics.list() {
            if metadata.topic(&topic.name).is_none() {
                self.forget_topic(&topic.name);
                if let Err(e) = broker.topics.delete(&topic.name).await {
                    tracing::warn!(topic = %topic.name, error = %e, "could not delete a local topic");
                }
            }
        }
        self.metadata.send_replace(Arc::new(metadata.clone()));
        for topic in &metadata.topics {
            let Some(local) = broker.topics.get(&topic.name) else {
                continue;
            };
            for pm in &topic.partitions {
                let Some(log) = local.partitions.get(pm.partition as usize) else {
                    continue;
                };
                if !pm.replicas.contains(&me) {
                    self.forget_replica(&topic.name, pm.partition);
                    continue;
                }
                let replica = self.replica_for(&topic.name, pm.partition, log);
                self.transition(&replica, pm, self.hw_min_isr(&topic.configs));
            }
        }
    }

    /// The replica entry, created on first sight with its HW from the checkpoint.
    fn replica_for(&self, topic: &str, partition: u32, log: &Arc<Partition>) -> Arc<Replica> {
        if let Some(existing) = self.replica(topic, partition) {
            if Arc::ptr_eq(&existing.log, log) {
                return existing;
            }
            existing.stop_fetcher();
        }
        {
            // Partition::open assumes a single replica (HW = LEO); in a cluster only the
            // checkpoint says what was committed.
            let mut state = log.lock();
            let checkpoint = hw_checkpoint::read(&log.dir).unwrap_or_else(|e| {
                tracing::warn!(dir = %log.dir.display(), error = %e, "unreadable HW checkpoint; using 0");
                0
            });
            let high_watermark =
                checkpoint.clamp(state.log.log_start_offset(), state.log.log_end_offset());
            state.high_watermark = high_watermark;
            log.publish(&state);
        }
        let replica = Arc::new(Replica {
            topic: topic.to_string(),
            partition,
            log: log.clone(),
            role: Mutex::new(RoleState {
                role: Role::Offline,
                leader_epoch: 0,
                replicas: Vec::new(),
                isr: Vec::new(),
            }),
            fetcher: Mutex::new(None),
            delayed_produces: Mutex::new(DelayedProduces::default()),
        });
        self.replicas
            .write()
            .expect("replicas lock")
            .insert((topic.to_string(), partition), replica.clone());
        replica
    }

    fn forget_replica(&self, topic: &str, partition: u32) {
        let removed = self
            .replicas
            .write()
            .expect("replicas lock")
            .remove(&(topic.to_string(), partition));
        if let Some(replica) = removed {
            replica.stop_fetcher();
        }
    }

    fn forget_topic(&self, topic: &str) {
        let keys: Vec<(String, u32)> = self
            .replicas
            .read()
            .expect("replicas lock")
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect();
        for (t, p) in keys {
            self.forget_replica(&t, p);
        }
    }

    /// The ISR size below which a leader of a topic with `configs` keeps its HW still: the
    /// topic's `min.insync.replicas` with eligible leader replicas (KIP-966), else 0.
    fn hw_min_isr(&self, configs: &BTreeMap<String, String>) -> usize {
        if !self.settings.eligible_leader_replicas_enable {
            return 0;
        }
        let min_isr = configs
            .get("min.insync.replicas")
            .and_then(|v| v.trim().parse::<u16>().ok())
            .unwrap_or(self.settings.min_insync_replicas);
        usize::from(min_isr)
    }

    /// Moves a replica to the role the metadata gives it (Kafka's makeLeader / makeFollower).
    fn transition(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        pm: &PartitionMetadata,
        hw_min_isr: usize,
    ) {
        let me = self.settings.broker_id;
        let mut role = replica.role();
        let same_epoch = role.leader_epoch == pm.leader_epoch;
        role.replicas = pm.replicas.clone();
        role.isr = pm.isr.clone();
        match pm.leader {
            Some(leader) if leader == me => {
                if let (Role::Leader(state), true) = (&mut role.role, same_epoch) {
                    // Same leadership; the controller changed the ISR (e.g. fenced a follower).
                    let before = state.isr();
                    if state.apply_partition_state(pm.partition_epoch, &pm.isr) {
                        self.count_isr_change(&before, &state.isr());
                        let mut log = replica.log.lock();
                        log.isr = state.isr();
                        advance_leader_hw(state, &mut log);
                        replica.publish(&log);
                    }
                } else {
                    self.become_leader(replica, &mut role, pm, hw_min_isr);
                }
            }
            Some(leader) => {
                let following = matches!(role.role, Role::Follower { leader: l } if l == leader);
                if !(following && same_epoch) {
                    self.become_follower(replica, &mut role, pm, leader);
                }
            }
            None => {
                if !matches!(role.role, Role::Offline) || !same_epoch {
                    replica.stop_fetcher();
                    role.role = Role::Offline;
                    role.leader_epoch = pm.leader_epoch;
                    let mut log = replica.log.lock();
                    log.leader_epoch = pm.leader_epoch;
                    replica.publish(&log);
                    tracing::warn!(topic = %replica.topic, partition = replica.partition, "partition offline: no leader");
                }
            }
        }
    }

    fn become_leader(
        &self,
        replica: &Arc<Replica>,
        role: &mut RoleState,
        pm: &PartitionMetadata,
        hw_min_isr: usize,
    ) {
        replica.stop_fetcher();
        let mut log = replica.log.lock();
        let log_end_offset = log.log.log_end_offset();
        if let Err(e) = log.log.assign_epoch(pm.leader_epoch, log_end_offset) {
            tracing::error!(topic = %replica.topic, partition = replica.partition, error = %e, "cannot record the leader epoch; staying offline");
            role.role = Role::Offline;
            return;
        }
        let mut state = LeaderState::new(
            self.settings.broker_id,
            pm,
            log_end_offset,
            log.high_watermark,
            now_ms(),
        );
        state.bugs = self.settings.bugs;
        // The deliberate bug that ignores min.insync.replicas ignores it here too, or the
        // still HW would hide it (no acks=all answer at all below min ISR).
        state.hw_min_isr = if self.settings.bugs.on(Bug::IgnoreMinInsync) {
            0
        } else {
            hw_min_isr
        };
        log.leader_epoch = pm.leader_epoch;
        log.replicas = pm.replicas.clone();
        log.isr = pm.isr.clone();
        advance_leader_hw(&mut state, &mut log);
        replica.publish(&log);
        tracing::info!(
            topic = %replica.topic, partition = replica.partition, leader_epoch = pm.leader_epoch,
            epoch_start_offset = log_end_offset, high_watermark = log.high_watermark, "became leader"
        );
        role.role = Role::Leader(Box::new(state));
        role.leader_epoch = pm.leader_epoch;
    }

    fn become_follower(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        role: &mut RoleState,
        pm: &PartitionMetadata,
        leader: u32,
    ) {
        replica.stop_fetcher();
        {
            let mut log = replica.log.lock();
            log.leader_epoch = pm.leader_epoch;
            log.replicas = pm.replicas.clone();
            log.isr = pm.isr.clone();
            replica.publish(&log);
        }
        role.role = Role::Follower { leader };
        role.leader_epoch = pm.leader_epoch;
        tracing::info!(topic = %replica.topic, partition = replica.partition, leader, leader_epoch = pm.leader_epoch, "became follower");
        let task = tokio::spawn(fetcher::run(
            self.clone(),
            replica.clone(),
            leader,
            pm.leader_epoch,
        ));
        *replica.fetcher.lock().expect("fetcher lock poisoned") = Some(task);
    }

    /// Leader side of a follower fetch: checks the epoch, records the follower's progress
    /// (which may expand the ISR and advance the HW), long-polls when the follower is at the
    /// end, and returns the leader's offsets with the encoded batches from the fetch offset.
    pub async fn handle_replica_fetch(
        self: &Arc<Self>,
        request: &ReplicaFetchRequest,
    ) -> Result<(ReplicaFetchOffsets, Vec<u8>), InternalError> {
        let replica = self.local_replica(&request.topic, request.partition)?;
        let at_end = {
            let mut role = replica.role();
            let state = leader_state(&mut role, request.current_leader_epoch)?;
            let mut log = replica.log.lock();
            let log_end_offset = log.log.log_end_offset();
            if request.fetch_offset > log_end_offset
                || request.fetch_offset < log.log.log_start_offset()
            {
                let mut error = InternalError::new(
                    "OFFSET_OUT_OF_RANGE",
                    format!(
                        "fetch offset {} is outside the leader's log",
                        request.fetch_offset
                    ),
                );
                error.offsets = Some(fetch_offsets(&log));
                return Err(error);
            }
            if !state.record_fetch(
                request.replica_id,
                request.fetch_offset,
                request.log_start_offset,
                log_end_offset,
                now_ms(),
            ) {
                return Err(InternalError::new(
                    "NOT_LEADER_OR_FOLLOWER",
                    format!(
                        "broker {} is not a replica of this partition",
                        request.replica_id
                    ),
                ));
            }
            let eligible = self
                .metadata()
                .broker(request.replica_id)
                .is_some_and(|b| !b.fenced);
            if let Some(proposal) = state.expansion_for(request.replica_id, eligible) {
                tracing::info!(topic = %replica.topic, partition = replica.partition, follower = request.replica_id, "follower caught up; expanding the ISR");
                self.propose_isr_change(&replica, state, proposal);
            }
            advance_leader_hw(state, &mut log);
            replica.publish(&log);
            request.fetch_offset == log_end_offset
        };
        if at_end {
            let wait = Duration::from_millis(
                request
                    .max_wait_ms
                    .min(self.settings.replica_fetch_wait_max_ms.max(1)),
            );
            replica
                .log
                .wait_for_records(request.fetch_offset, Isolation::Uncommitted, wait)
                .await;
        }
        let mut role = replica.role();
        leader_state(&mut role, request.current_leader_epoch)?;
        let log = replica.log.lock();
        let offsets = fetch_offsets(&log);
        let mut body = Vec::new();
        if request.fetch_offset < offsets.log_end_offset {
            let max_bytes = usize::try_from(request.max_bytes).unwrap_or(usize::MAX);
            // Whole batches go out as stored, without decoding them (the follower verifies
            // each one's CRC before writing it).
            body = log
                .log
                .read_batch_bytes(request.fetch_offset, max_bytes, offsets.log_end_offset)
                .map_err(|e| InternalError::new("KAFKA_STORAGE_ERROR", e.to_string()))?;
        }
        Ok((offsets, body))
    }

    /// Diagnostic read of a local replica's log, whatever its role: records from `offset` up
    /// to the LEO (about `max_bytes`), with the replica's offsets. Lets tests and operators
    /// compare replicas record by record.
    pub fn read_local_log(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: usize,
    ) -> Result<LocalLog, InternalError> {
        let replica = self.local_replica(topic, partition)?;
        let log = replica.log.lock();
        let log_end_offset = log.log.log_end_offset();
        let records = if offset < log_end_offset {
            log.log
                .read_batches(offset, max_bytes, log_end_offset)
                .map_err(|e| InternalError::new("OFFSET_OUT_OF_RANGE", e.to_string()))?
                .into_iter()
                .flat_map(|b| b.records)
                .map(|r| LocalRecord {
                    offset: r.offset,
                    leader_epoch: r.leader_epoch,
                    value: String::from_utf8_lossy(&r.value).into_owned(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(LocalLog {
            records,
            log_start_offset: log.log.log_start_offset(),
            high_watermark: log.high_watermark,
            log_end_offset,
            leader_epoch: log.leader_epoch,
        })
    }

    /// OffsetsForLeaderEpoch on the leader: the largest epoch at or below the requested one and
    /// its end offset; for an epoch below every known one, Kafka's answer (that epoch, the
    /// first known epoch's start offset).
    pub fn offsets_for_leader_epoch(
        &self,
        request: &OffsetsForLeaderEpochRequest,
    ) -> Result<OffsetsForLeaderEpochResponse, InternalError> {
        let replica = self.local_replica(&request.topic, request.partition)?;
        let mut role = replica.role();
        leader_state(&mut role, request.current_leader_epoch)?;
        let log = replica.log.lock();
        let answer = log
            .log
            .end_offset_for_epoch(request.leader_epoch)
            .or_else(|| {
                log.log
                    .epochs()
                    .entries()
                    .first()
                    .map(|first| (request.leader_epoch, first.start_offset))
            });
        Ok(OffsetsForLeaderEpochResponse {
            leader_epoch: answer.map(|a| a.0),
            end_offset: answer.map(|a| a.1),
        })
    }

    fn local_replica(&self, topic: &str, partition: u32) -> Result<Arc<Replica>, InternalError> {
        self.replica(topic, partition).ok_or_else(|| {
            InternalError::new(
                "NOT_LEADER_OR_FOLLOWER",
                format!("no replica of {topic}/{partition} here"),
            )
        })
    }

    /// Sends an AlterPartition for `proposal` and applies the answer when it comes.
    fn propose_isr_change(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        state: &mut LeaderState,
        proposal: Vec<u32>,
    ) {
        let seq = state.begin_isr_change(proposal.clone());
        let request = AlterPartitionRequest {
            broker_id: self.settings.broker_id,
            broker_epoch: self.broker_epoch.load(Ordering::SeqCst),
            topic: replica.topic.clone(),
            partition: replica.partition,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr: proposal,
        };
        let manager = self.clone();
        let replica = replica.clone();
        tokio::spawn(async move {
            let result = manager
                .controller_call::<_, PartitionMetadata>("/controller/v1/alter-partition", &request)
                .await;
            manager.complete_isr_change(&replica, request.leader_epoch, seq, result);
        });
    }

    fn complete_isr_change(
        &self,
        replica: &Replica,
        leader_epoch: u32,
        seq: u64,
        result: Result<Result<PartitionMetadata, ControllerError>, String>,
    ) {
        let mut role = replica.role();
        let Role::Leader(state) = &mut role.role else {
            return;
        };
        if state.leader_epoch != leader_epoch {
            return;
        }
        let before = state.isr();
        let accepted = match result {
            Ok(Ok(pm)) => Some((pm.partition_epoch, pm.isr)),
            Ok(Err(e)) => {
                tracing::warn!(topic = %replica.topic, partition = replica.partition, error = %e, "ISR change rejected");
                None
            }
            Err(e) => {
                tracing::warn!(topic = %replica.topic, partition = replica.partition, error = %e, "ISR change not delivered");
                None
            }
        };
        let changed =
            state.complete_isr_change(seq, accepted.as_ref().map(|(e, isr)| (*e, isr.as_slice())));
        if changed {
            let after = state.isr();
            tracing::info!(topic = %replica.topic, partition = replica.partition, ?before, ?after, "ISR updated");
            self.count_isr_change(&before, &after);
            role.isr = after.clone();
            let Role::Leader(state) = &mut role.role else {
                return;
            };
            let mut log = replica.log.lock();
            log.isr = after;
            advance_leader_hw(state, &mut log);
            replica.publish(&log);
        }
    }

    fn count_isr_change(&self, before: &[u32], after: &[u32]) {
        if after.len() < before.len() {
            self.isr_shrinks.fetch_add(1, Ordering::Relaxed);
        } else if after.len() > before.len() {
            self.isr_expands.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every half of `replica.lag.time.max.ms`, proposes ISRs without lagging followers.
    async fn check_isr_forever(self: Arc<Self>) {
        let period = Duration::from_millis((self.settings.replica_lag_time_max_ms / 2).max(10));
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            for replica in self.all_replicas() {
                let mut role = replica.role();
                let Role::Leader(state) = &mut role.role else {
                    continue;
                };
                let log_end_offset = replica.log.lock().log.log_end_offset();
                if let Some(proposal) = state.shrink_for(
                    log_end_offset,
                    now_ms(),
                    self.settings.replica_lag_time_max_ms,
                ) {
                    tracing::warn!(
                        topic = %replica.topic, partition = replica.partition, isr = ?state.isr(), ?proposal,
                        "followers lag more than replica.lag.time.max.ms; shrinking the ISR"
                    );
                    if self.settings.bugs.on(Bug::ShrinkIsrWithoutController) {
                        let before = state.isr();
                        state.shrink_without_controller(&proposal);
                        self.count_isr_change(&before, &proposal);
                        let mut log = replica.log.lock();
                        log.isr = proposal;
                        advance_leader_hw(state, &mut log);
                        replica.publish(&log);
                        continue;
                    }
                    self.propose_isr_change(&replica, state, proposal);
                }
            }
        }
    }

    /// Writes the HW checkpoints every `replica.high.watermark.checkpoint.interval.ms`.
    async fn checkpoint_forever(self: Arc<Self>) {
        let mut interval = tokio::time::interval(Duration::from_millis(
            self.settings.hw_checkpoint_interval_ms,
        ));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let manager = self.clone();
            let _ = tokio::task::spawn_blocking(move || manager.checkpoint_high_watermarks()).await;
        }
    }

    /// Writes every replica's HW checkpoint.
    pub fn checkpoint_high_watermarks(&self) {
        for replica in self.all_replicas() {
            let high_watermark = replica.log.offsets().high_watermark;
            if let Err(e) = hw_checkpoint::write(&replica.log.dir, high_watermark) {
                tracing::warn!(dir = %replica.log.dir.display(), error = %e, "HW checkpoint failed");
            }
        }
    }

    /// [`ReplicaManager::produce_with`] without a client leader epoch.
    pub async fn produce(
        &self,
        topic: &str,
        partition: u32,
        records: Vec<Record>,
        acks_all: bool,
        timeout_ms: u64,
        min_insync_replicas: u16,
    ) -> Result<LeaderAppend, ApiError> {
        let options = ProduceOptions {
            acks_all,
            timeout_ms,
            min_insync_replicas,
            leader_epoch: None,
        };
        self.produce_with(topic, partition, records, options).await
    }

    /// Replicated produce on the leader: NOT_ENOUGH_REPLICAS before appending when acks=all
    /// and the ISR is below `min_insync_replicas`; append in the leader epoch; with acks=all a
    /// delayed produce that completes when the HW passes the batch (then
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum), or fails with
    /// REQUEST_TIMED_OUT after `timeout_ms` or when the leadership is lost meanwhile (the
    /// batch may or may not survive: indeterminate, so not NOT_LEADER_OR_FOLLOWER).
    pub async fn produce_with(
        &self,
        topic: &str,
        partition: u32,
        records: Vec<Record>,
        options: ProduceOptions,
    ) -> Result<LeaderAppend, ApiError> {
        let ProduceOptions {
            acks_all,
            timeout_ms,
            min_insync_replicas,
            leader_epoch: client_epoch,
        } = options;
        let replica = self
            .replica(topic, partition)
            .ok_or_else(|| not_leader(topic, partition))?;
        let (base_offset, last_offset, high_watermark, leader_epoch, isr_size) = {
            let mut role = replica.role();
            let leader_epoch = role.leader_epoch;
            let Role::Leader(state) = &mut role.role else {
                return Err(not_leader(topic, partition));
            };
            check_client_leader_epoch(client_epoch, leader_epoch)?;
            let isr_size = state.isr().len();
            if acks_all
                && isr_size < usize::from(min_insync_replicas)
                && !self.settings.bugs.on(Bug::IgnoreMinInsync)
            {
                return Err(ApiError::new(
                    ErrorKind::NotEnoughReplicas,
                    format!("the ISR has {isr_size} replicas, fewer than min.insync.replicas={min_insync_replicas}; nothing was written"),
                ));
            }
            let mut log = replica.log.lock();
            let (base_offset, last_offset) = log.log.append(records, leader_epoch)?;
            advance_leader_hw(state, &mut log);
            replica.publish(&log);
            (
                base_offset,
                last_offset,
                log.high_watermark,
                leader_epoch,
                isr_size,
            )
        };
        let appended = LeaderAppend {
            base_offset,
            last_offset,
            high_watermark,
            leader_epoch,
            isr_size: u32::try_from(isr_size).unwrap_or(u32::MAX),
        };
        if !acks_all || self.settings.bugs.on(Bug::AckBeforeReplication) {
            return Ok(appended);
        }
        // Registered first, checked second: a publish that came before the registration is
        // seen by the check (publishers update the offsets before completing waiters).
        let (key, completed) = replica.delay_produce(last_offset, leader_epoch);
        let offsets = replica.log.offsets();
        let waited = offsets.high_watermark > last_offset
            || offsets.leader_epoch != leader_epoch
            || tokio::time::timeout(Duration::from_millis(timeout_ms), completed)
                .await
                .is_ok_and(|sent| sent.is_ok());
        replica.delayed_produces().waiting.remove(&key);
        let mut role = replica.role();
        let still_leader = role.leader_epoch == leader_epoch;
        let Role::Leader(state) = &mut role.role else {
            return Err(lost_leadership(base_offset, last_offset));
        };
        if !still_leader {
            return Err(lost_leadership(base_offset, last_offset));
        }
        let high_watermark = state.high_watermark();
        if !waited || high_watermark <= last_offset {
            return Err(ApiError::new(
                ErrorKind::RequestTimedOut,
                format!("offsets {base_offset}..={last_offset} were appended but not replicated to the ISR within {timeout_ms} ms"),
            ));
        }
        let isr_size = state.isr().len();
        if isr_size < usize::from(min_insync_replicas)
            && !self.settings.bugs.on(Bug::IgnoreMinInsync)
        {
            return Err(ApiError::new(
                ErrorKind::NotEnoughReplicasAfterAppend,
                format!("offsets {base_offset}..={last_offset} are committed but the ISR shrank to {isr_size}, below min.insync.replicas={min_insync_replicas}"),
            ));
        }
        Ok(LeaderAppend {
            high_watermark,
            isr_size: u32::try_from(isr_size).unwrap_or(u32::MAX),
            ..appended
        })
    }

    /// Checks that a consumer read (fetch, list offsets) may be served here: this replica leads,
    /// and (KIP-207) its HW has reached the start of its epoch, unless
    /// `tidewater.unsafe.serve.lagging.hw.enable` restores the old behaviour.
    pub fn check_consumer_read(&self, topic: &str, partition: u32) -> Result<(), ApiError> {
        self.check_consumer_read_at(topic, partition, None)
    }

    /// [`ReplicaManager::check_consumer_read`] for a client that sent the leader epoch it
    /// believes current (KIP-320).
    pub fn check_consumer_read_at(
        &self,
        topic: &str,
        partition: u32,
        client_epoch: Option<u32>,
    ) -> Result<(), ApiError> {
        let replica = self
            .replica(topic, partition)
            .ok_or_else(|| not_leader(topic, partition))?;
        let role = replica.role();
        let Role::Leader(state) = &role.role else {
            return Err(not_leader(topic, partition));
        };
        check_client_leader_epoch(client_epoch, role.leader_epoch)?;
        if !self.settings.unsafe_serve_lagging_hw_enable
            && state.high_watermark() < state.epoch_start_offset
        {
            return Err(ApiError::new(
                ErrorKind::OffsetNotAvailable,
                format!(
                    "new leader's high watermark {} is below its epoch start offset {}; retry shortly",
                    state.high_watermark(),
                    state.epoch_start_offset
                ),
            ));
        }
        Ok(())
    }

    /// DeleteRecords on the leader (Kafka's DelayedDeleteRecords): moves its log start offset
    /// (never past the HW), then waits until every live follower reports a log start offset at
    /// or above it (followers move theirs on their next fetch), at most
    /// [`DELETE_RECORDS_WAIT_MAX_MS`]. Returns the low watermark; REQUEST_TIMED_OUT when a live
    /// follower did not follow in time (the leader's records are deleted regardless).
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
    ) -> Result<u64, ApiError> {
        let replica = self
            .replica(topic, partition)
            .ok_or_else(|| not_leader(topic, partition))?;
        let mut updates = replica.log.subscribe();
        let leader_epoch = {
            let role = replica.role();
            if !matches!(role.role, Role::Leader(_)) {
                return Err(not_leader(topic, partition));
            }
            replica
                .log
                .delete_records_before(offset)
                .map_err(|e| match e {
                    crate::storage::LogError::InvalidOffset(m) => {
                        ApiError::new(ErrorKind::OffsetOutOfRange, m)
                    }
                    other => ApiError::from(other),
                })?;
            role.leader_epoch
        };
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(DELETE_RECORDS_WAIT_MAX_MS);
        loop {
            let low_watermark = {
                let role = replica.role();
                let Role::Leader(state) = &role.role else {
                    return Err(not_leader(topic, partition));
                };
                if role.leader_epoch != leader_epoch {
                    return Err(not_leader(topic, partition));
                }
                let metadata = self.metadata();
                let alive = |id: u32| metadata.broker(id).is_some_and(|b| !b.fenced);
                state.low_watermark_of(replica.log.offsets().log_start_offset, alive)
            };
            if low_watermark >= offset {
                return Ok(low_watermark);
            }
            // Every follower fetch publishes the partition's offsets: wake on it and look again.
            if tokio::time::timeout_at(deadline, updates.changed())
                .await
                .is_err()
            {
                return Err(ApiError::new(
                    ErrorKind::RequestTimedOut,
                    format!("the leader's log now starts at {offset}, but the low watermark is still {low_watermark}: a live follower has not followed within {DELETE_RECORDS_WAIT_MAX_MS} ms"),
                ));
            }
        }
    }

    /// One local replica's state, for `GET /v1/status`; `None` when not a replica here.
    pub fn replica_status(&self, topic: &str, partition: u32) -> Option<ReplicaStatus> {
        let replica = self.replica(topic, partition)?;
        self.status_of(&replica).into()
    }

    /// Every local replica's state, for `GET /v1/status`.
    pub fn status(&self) -> Vec<ReplicaStatus> {
        self.all_replicas()
            .iter()
            .map(|replica| self.status_of(replica))
            .collect()
    }

    fn status_of(&self, replica: &Replica) -> ReplicaStatus {
        {
            {
                let role = replica.role();
                let offsets = replica.log.offsets();
                let (name, leader, isr, low_watermark) = match &role.role {
                    Role::Leader(s) => (
                        "leader",
                        Some(self.settings.broker_id),
                        s.isr(),
                        Some(s.low_watermark(offsets.log_start_offset)),
                    ),
                    Role::Follower { leader } => {
                        ("follower", Some(*leader), role.isr.clone(), None)
                    }
                    Role::Offline => ("offline", None, role.isr.clone(), None),
                };
                ReplicaStatus {
                    topic: replica.topic.clone(),
                    partition: replica.partition,
                    role: name,
                    leader,
                    leader_epoch: role.leader_epoch,
                    log_end_offset: offsets.log_end_offset,
                    high_watermark: offsets.high_watermark,
                    log_start_offset: offsets.log_start_offset,
                    low_watermark,
                    replicas: role.replicas.clone(),
                    isr,
                }
            }
        }
    }

    /// (partitions led here, of which under-replicated) for the metrics.
    pub fn leader_counts(&self) -> (usize, usize) {
        let mut leaders = 0;
        let mut under_replicated = 0;
        for replica in self.all_replicas() {
            let role = replica.role();
            if let Role::Leader(state) = &role.role {
                leaders += 1;
                if state.out_of_sync_count() > 0 {
                    under_replicated += 1;
                }
            }
        }
        (leaders, under_replicated)
    }

    /// The follower fetch task's access to its replica: runs `f` on the partition state only
    /// while the replica still follows `leader` in `leader_epoch`, then publishes the offsets.
    pub(crate) fn with_follower<T>(
        &self,
        replica: &Replica,
        leader: u32,
        leader_epoch: u32,
        f: impl FnOnce(&mut PartitionState) -> Result<T, crate::storage::LogError>,
    ) -> Result<T, fetcher::FetchError> {
        let role = replica.role();
        let following = matches!(role.role, Role::Follower { leader: l } if l == leader);
        if !following || role.leader_epoch != leader_epoch {
            return Err(fetcher::FetchError::NoLongerFollowing);
        }
        let mut log = replica.log.lock();
        let result = f(&mut log).map_err(fetcher::FetchError::Log);
        replica.publish(&log);
        result
    }
}

/// Options of a replicated produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceOptions {
    /// acks=all: wait until the HW passes the batch.
    pub acks_all: bool,
    /// How long an acks=all produce waits.
    pub timeout_ms: u64,
    /// The topic's `min.insync.replicas`.
    pub min_insync_replicas: u16,
    /// The leader epoch the client believes current, if it sent one.
    pub leader_epoch: Option<u32>,
}

/// KIP-320 for client requests: a leader epoch older than `current` is FENCED_LEADER_EPOCH, a
/// newer one UNKNOWN_LEADER_EPOCH (this broker has not seen that election yet); none is fine.
pub fn check_client_leader_epoch(requested: Option<u32>, current: u32) -> Result<(), ApiError> {
    match requested {
        Some(epoch) if epoch < current => Err(ApiError::new(
            ErrorKind::FencedLeaderEpoch,
            format!("leader epoch {epoch} is older than the current {current}; refresh metadata"),
        )),
        Some(epoch) if epoch > current => Err(ApiError::new(
            ErrorKind::UnknownLeaderEpoch,
            format!("leader epoch {epoch} is newer than this broker's {current}; retry shortly"),
        )),
        _ => Ok(()),
    }
}

/// The leader state if this replica leads in exactly `current_leader_epoch` (KIP-320 fencing).
fn leader_state(
    role: &mut RoleState,
    current_leader_epoch: u32,
) -> Result<&mut LeaderState, InternalError> {
    let Role::Leader(state) = &mut role.role else {
        return Err(InternalError::new(
            "NOT_LEADER_OR_FOLLOWER",
            "this broker does not lead the partition",
        ));
    };
    if current_leader_epoch < state.leader_epoch {
        return Err(InternalError::new(
            "FENCED_LEADER_EPOCH",
            format!(
                "epoch {current_leader_epoch} is older than the leader's {}",
                state.leader_epoch
            ),
        ));
    }
    if current_leader_epoch > state.leader_epoch {
        return Err(InternalError::new(
            "UNKNOWN_LEADER_EPOCH",
            format!(
                "epoch {current_leader_epoch} is newer than the leader's {}",
                state.leader_epoch
            ),
        ));
    }
    Ok(state)
}

/// Moves the partition's HW to the leader's (min LEO over the maximal ISR, forward only).
fn advance_leader_hw(state: &mut LeaderState, log: &mut PartitionState) {
    if let Some(high_watermark) = state.maybe_advance_high_watermark(log.log.log_end_offset()) {
        Partition::advance_high_watermark(log, high_watermark);
    }
    debug_assert_eq!(
        log.high_watermark,
        state.high_watermark(),
        "leader HW and partition HW agree"
    );
}

fn fetch_offsets(log: &PartitionState) -> ReplicaFetchOffsets {
    ReplicaFetchOffsets {
        high_watermark: log.high_watermark,
        log_start_offset: log.log.log_start_offset(),
        log_end_offset: log.log.log_end_offset(),
        leader_epoch: log.leader_epoch,
    }
}

fn not_leader(topic: &str, partition: u32) -> ApiError {
    ApiError::new(
        ErrorKind::NotLeaderOrFollower,
        format!("this broker does not lead {topic}/{partition}; see GET /v1/metadata"),
    )
}

fn lost_leadership(base_offset: u64, last_offset: u64) -> ApiError {
    ApiError::new(
        ErrorKind::RequestTimedOut,
        format!("offsets {base_offset}..={last_offset} were appended, then this broker lost the leadership before they were committed; they may or may not survive"),
    )
}

/// Maps a controller error to the client API's.
fn controller_to_api(error: ControllerError) -> ApiError {
    let kind = match error.error {
        ControllerErrorCode::UnknownTopicOrPartition => ErrorKind::UnknownTopicOrPartition,
        ControllerErrorCode::TopicAlreadyExists => ErrorKind::TopicAlreadyExists,
        ControllerErrorCode::InvalidTopicException => ErrorKind::InvalidTopicException,
        ControllerErrorCode::InvalidReplicationFactor => ErrorKind::InvalidReplicationFactor,
        ControllerErrorCode::InvalidPartitions => ErrorKind::InvalidPartitions,
        ControllerErrorCode::FencedLeaderEpoch => ErrorKind::FencedLeaderEpoch,
        ControllerErrorCode::NotLeaderOrFollower => ErrorKind::NotLeaderOrFollower,
        _ => ErrorKind::InvalidRequest,
    };
    ApiError::new(kind, error.message)
}

/// Wall-clock milliseconds (lag and caught-up times).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LogConfig;

    #[test]
    fn publish_completes_exactly_the_delayed_produces_the_hw_passed_or_whose_epoch_ended() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Partition::open("t", 0, dir.path(), LogConfig::default(), 1).unwrap());
        let replica = Replica {
            topic: "t".into(),
            partition: 0,
            log: log.clone(),
            role: Mutex::new(RoleState {
                role: Role::Offline,
                leader_epoch: 1,
                replicas: Vec::new(),
                isr: Vec::new(),
            }),
            fetcher: Mutex::new(None),
            delayed_produces: Mutex::new(DelayedProduces::default()),
        };
        let mut state = log.lock();
        state.leader_epoch = 1;
        let records = (0..10)
            .map(|i| Record {
                key: None,
                value: vec![i],
                timestamp_ms: 0,
            })
            .collect();
        state.log.append(records, 1).unwrap();
        state.high_watermark = 0;
        replica.publish(&state);
        let (_, mut first) = replica.delay_produce(4, 1);
        let (_, mut second) = replica.delay_produce(4, 1);
        let (third_key, mut third) = replica.delay_produce(9, 1);
        // HW 4 does not pass offset 4: nothing completes.
        state.high_watermark = 4;
        replica.publish(&state);
        assert!(first.try_recv().is_err() && second.try_recv().is_err());
        // HW 5 passes offset 4 (both produces ending there), not offset 9.
        state.high_watermark = 5;
        replica.publish(&state);
        assert_eq!(first.try_recv(), Ok(()));
        assert_eq!(second.try_recv(), Ok(()));
        assert_eq!(third.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        assert_eq!(
            replica
                .delayed_produces()
                .waiting
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![third_key]
        );
        // A new leader epoch completes the rest, whatever the HW.
        state.leader_epoch = 2;
        replica.publish(&state);
        assert_eq!(third.try_recv(), Ok(()));
        assert!(replica.delayed_produces().waiting.is_empty());
    }
}
