//! The transaction coordinator service (Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`, transaction version 1): routes each transactional id to its
//! `__transaction_state` partition, loads a partition's ids when this broker (newly) leads it,
//! stores every transition there (acks=all, `min.insync.replicas` 2 as Kafka's
//! `transaction.state.log.min.isr`) before making it current, writes the commit or abort
//! markers to the transaction's partitions once EndTxn is stored, and aborts transactions
//! open longer than their timeout.
//!
//! A transaction whose markers are not all written stays PrepareCommit or PrepareAbort and
//! its producer's requests answer CONCURRENT_TRANSACTIONS; the markers are retried until
//! every partition has one, by this coordinator or, after a failover, by the next one when it
//! loads the partition (its background task loads every partition it leads).
//!
//! Locking: `partitions` -> a partition's `txns` -> an id's `metadata`, `std` mutexes held for
//! one short call, never across an `.await`. An id's `writes` (async) lock orders its stored
//! transitions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidewater_kafka_model::ErrorCode;

use super::log::{metadata_record, partition_for, LoadedTxns, TRANSACTION_STATE_TOPIC};
use super::state::{
    self, EndStep, InitStep, ProducerIdAndEpoch, TxnMetadata, TxnPartition, TxnRefusal,
};
use crate::broker::Broker;
use crate::internal_topic::{CoordinatorUnavailable, InternalTopic};
use crate::ops::txn_markers::{self, TxnMarker};

/// Coordinator settings (Kafka's names in the docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnCoordinatorConfig {
    /// `transaction.state.log.num.partitions` (Kafka: 50), used when the topic is created.
    pub partitions: u32,
    /// `transaction.state.log.replication.factor` (Kafka: 3), capped by the brokers.
    pub replication_factor: u32,
    /// `transaction.state.log.min.isr` (Kafka: 2).
    pub min_isr: u32,
    /// How long a stored transition waits for the ISR (Kafka: `request.timeout.ms` of the
    /// append, 30 s; shorter here so a client's retry comes sooner).
    pub append_timeout_ms: u64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (Kafka: 10000): how often
    /// open transactions are checked against their timeout, and led partitions loaded.
    pub cleanup_interval_ms: u64,
    /// Pause between two rounds of markers that did not all land.
    pub marker_retry_ms: u64,
}

impl Default for TxnCoordinatorConfig {
    fn default() -> Self {
        TxnCoordinatorConfig {
            partitions: 8,
            replication_factor: 3,
            min_isr: 2,
            append_timeout_ms: 5_000,
            cleanup_interval_ms: 1_000,
            marker_retry_ms: 200,
        }
    }
}

/// One transactional id held by this coordinator.
struct TxnEntry {
    /// Its `__transaction_state` partition.
    partition: u32,
    /// The current (stored) metadata.
    metadata: Mutex<TxnMetadata>,
    /// Orders the id's stored transitions.
    writes: tokio::sync::Mutex<()>,
}

/// The ids of one partition, loaded in one leader epoch.
struct LoadedPartition {
    /// Its index.
    partition: u32,
    /// The leader epoch it was loaded in: the coordinator epoch of its markers.
    leader_epoch: u32,
    /// Serialises the first InitProducerId of new ids.
    creating: tokio::sync::Mutex<()>,
    /// Transactional id -> entry.
    txns: Mutex<BTreeMap<String, Arc<TxnEntry>>>,
}

/// Where a transactional id is coordinated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnCoordinatorInfo {
    /// Its `__transaction_state` partition.
    pub partition: u32,
    /// The partition leader's broker id (`None` while it has no leader).
    pub broker_id: Option<u32>,
}

/// The coordinator of every transactional id whose partition this broker leads.
pub struct TransactionCoordinator {
    broker: Arc<Broker>,
    config: TxnCoordinatorConfig,
    partitions: Mutex<BTreeMap<u32, Arc<LoadedPartition>>>,
    /// Serialises creating the topic and loading partitions.
    load: tokio::sync::Mutex<()>,
}

/// Longest transactional id accepted (as group ids).
pub const TRANSACTIONAL_ID_MAX_BYTES: usize = 255;

fn refuse(code: ErrorCode, message: impl Into<String>) -> TxnRefusal {
    TxnRefusal {
        code,
        message: message.into(),
    }
}

impl TransactionCoordinator {
    /// A coordinator for `broker`.
    pub fn new(broker: Arc<Broker>, config: TxnCoordinatorConfig) -> Arc<TransactionCoordinator> {
        Arc::new(TransactionCoordinator {
            broker,
            config,
            partitions: Mutex::new(BTreeMap::new()),
            load: tokio::sync::Mutex::new(()),
        })
    }

    fn topic(&self) -> InternalTopic {
        InternalTopic {
            name: TRANSACTION_STATE_TOPIC,
            partitions: self.config.partitions,
            replication_factor: self.config.replication_factor,
            min_insync_replicas: Some(self.config.min_isr),
            append_timeout_ms: self.config.append_timeout_ms,
        }
    }

    /// Where `transactional_id` is coordinated (FindCoordinator, key type 1). Creates the
    /// topic on first use.
    pub async fn find_coordinator(
        &self,
        transactional_id: &str,
    ) -> Result<TxnCoordinatorInfo, TxnRefusal> {
        validate_transactional_id(transactional_id)?;
        let count = self.partition_count().await?;
        let partition = partition_for(transactional_id, count);
        let broker_id = match &self.broker.cluster {
            None => Some(self.broker.config.broker_id),
            Some(cluster) => cluster
                .metadata()
                .topic(TRANSACTION_STATE_TOPIC)
                .and_then(|t| t.partitions.get(partition as usize))
                .and_then(|p| p.leader),
        };
        Ok(TxnCoordinatorInfo {
            partition,
            broker_id,
        })
    }

    /// InitProducerId with a transactional id: the id's producer id and a bumped epoch (a new
    /// producer id at epoch 0 the first time), fencing any earlier producer of the id; an
    /// open transaction of it is aborted first (CONCURRENT_TRANSACTIONS, retry).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, TxnRefusal> {
        validate_transactional_id(transactional_id)?;
        state::check_timeout(timeout_ms)?;
        let (loaded, entry) = self.entry(transactional_id).await?;
        let entry = match entry {
            Some(entry) => entry,
            None => match self
                .first_init(&loaded, transactional_id, timeout_ms)
                .await?
            {
                Ok(first) => return Ok(first),
                Err(entry) => entry,
            },
        };
        let _writes = entry.writes.lock().await;
        let current = entry.metadata.lock().expect("txn lock").clone();
        let fresh_id = self.spare_producer_id(&current).await;
        match state::init(&current, timeout_ms, expected, || fresh_id)? {
            InitStep::Store(next) => {
                if next != current {
                    self.store(&entry, next.clone()).await?;
                }
                Ok(pair(&next))
            }
            InitStep::AbortFirst(aborting) => {
                self.store(&entry, aborting).await?;
                self.complete_in_background(entry.clone(), loaded.leader_epoch);
                Err(refuse(
                    ErrorCode::ConcurrentTransactions,
                    format!(
                        "{transactional_id} had an open transaction: it is being aborted; retry"
                    ),
                ))
            }
        }
    }

    /// AddPartitionsToTxn: the partitions join the producer's open transaction (opening one).
    pub async fn add_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TxnPartition>,
    ) -> Result<(), TxnRefusal> {
        let entry = self.existing(transactional_id).await?;
        let _writes = entry.writes.lock().await;
        let current = entry.metadata.lock().expect("txn lock").clone();
        if let Some(next) =
            state::add_partitions(&current, producer, partitions, crate::clock::now_ms())?
        {
            self.store(&entry, next).await?;
        }
        Ok(())
    }

    /// A partition leader's verification of a transactional produce (KIP-890 part 1,
    /// [`state::verify_partitions`]): whether the producer's open transaction holds each
    /// partition. An id this coordinator does not hold is INVALID_PRODUCER_ID_MAPPING; a
    /// coordinator that does not lead the id's partition answers as for any request.
    pub async fn verify_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TxnPartition>,
    ) -> Result<Vec<(TxnPartition, Option<ErrorCode>)>, TxnRefusal> {
        let entry = self.existing(transactional_id).await?;
        let current = entry.metadata.lock().expect("txn lock").clone();
        state::verify_partitions(&current, producer, partitions)
    }

    /// EndTxn: answered once PrepareCommit (or PrepareAbort) is stored; the markers follow.
    pub async fn end_txn(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
    ) -> Result<(), TxnRefusal> {
        let (loaded, entry) = self.entry(transactional_id).await?;
        let entry = entry.ok_or_else(|| unknown_id(transactional_id))?;
        let _writes = entry.writes.lock().await;
        let current = entry.metadata.lock().expect("txn lock").clone();
        match state::end(&current, producer, commit)? {
            EndStep::AlreadyDone => Ok(()),
            EndStep::Prepare(prepared) => {
                self.store(&entry, prepared).await?;
                self.complete_in_background(entry.clone(), loaded.leader_epoch);
                Ok(())
            }
        }
    }

    /// The background task: every `cleanup_interval_ms` loads the partitions this broker
    /// leads (so a failover's PrepareCommit and PrepareAbort are completed without a client
    /// asking) and aborts the transactions past their timeout. Runs until shutdown.
    pub async fn run(self: Arc<Self>) {
        let interval = Duration::from_millis(self.config.cleanup_interval_ms);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.broker.shutdown_started() => return,
            }
            let Some(count) = self.topic().partition_count(&self.broker) else {
                continue;
            };
            for partition in 0..count {
                let Ok(loaded) = self.loaded_partition(partition).await else {
                    continue;
                };
                self.abort_timed_out(&loaded).await;
            }
        }
    }

    async fn abort_timed_out(self: &Arc<Self>, loaded: &Arc<LoadedPartition>) {
        let entries: Vec<Arc<TxnEntry>> = loaded
            .txns
            .lock()
            .expect("txns lock")
            .values()
            .cloned()
            .collect();
        for entry in entries {
            let now_ms = crate::clock::now_ms();
            let due = {
                let current = entry.metadata.lock().expect("txn lock");
                state::time_out(&current, now_ms, || None).is_some()
            };
            if !due {
                continue;
            }
            let _writes = entry.writes.lock().await;
            let current = entry.metadata.lock().expect("txn lock").clone();
            let fresh_id = self.spare_producer_id(&current).await;
            let Some(aborting) = state::time_out(&current, now_ms, || fresh_id) else {
                continue;
            };
            tracing::info!(
                transactional_id = %current.transactional_id,
                producer_id = current.producer_id,
                timeout_ms = current.timeout_ms,
                "aborting a transaction past its timeout"
            );
            if self.store(&entry, aborting).await.is_ok() {
                self.complete_in_background(entry.clone(), loaded.leader_epoch);
            }
        }
    }

    /// Writes the markers of `entry`'s Prepare* state until every partition has one, then
    /// stores Complete*; gives up when this broker no longer leads the partition in
    /// `leader_epoch` (the next coordinator completes it on load) or shuts down.
    fn complete_in_background(self: &Arc<Self>, entry: Arc<TxnEntry>, leader_epoch: u32) {
        let coordinator = self.clone();
        tokio::spawn(async move { coordinator.complete(entry, leader_epoch).await });
    }

    async fn complete(&self, entry: Arc<TxnEntry>, leader_epoch: u32) {
        let retry = Duration::from_millis(self.config.marker_retry_ms);
        let start = entry.metadata.lock().expect("txn lock").clone();
        let mut pending: BTreeSet<TxnPartition> = start.partitions.clone();
        if start.state == state::TxnState::PrepareAbort
            && self
                .broker
                .config
                .bugs
                .on(crate::bugs::Bug::TxnAbortMarkerSkipped)
        {
            // Deliberate bug: the first partition's abort marker is counted, not written.
            pending.pop_first();
        }
        loop {
            let current = entry.metadata.lock().expect("txn lock").clone();
            if current != start || !current.state.preparing() {
                return;
            }
            if self.topic().leader_epoch(&self.broker, entry.partition) != Ok(leader_epoch) {
                tracing::info!(
                    transactional_id = %current.transactional_id,
                    "no longer the coordinator: the next one completes the transaction"
                );
                return;
            }
            if !pending.is_empty() {
                let marker = TxnMarker {
                    producer_id: current.producer_id,
                    producer_epoch: current.producer_epoch,
                    commit: current.state == state::TxnState::PrepareCommit,
                    coordinator_epoch: leader_epoch as i32,
                    partitions: pending.iter().cloned().collect(),
                };
                let written = self.write_markers(marker).await;
                pending.retain(|tp| !written.contains(tp));
            }
            if pending.is_empty() {
                let _writes = entry.writes.lock().await;
                let current = entry.metadata.lock().expect("txn lock").clone();
                if current != start {
                    return;
                }
                let done = state::complete(&current).expect("a preparing state completes");
                match self.store(&entry, done).await {
                    Ok(()) => return,
                    Err(refusal) => tracing::warn!(
                        transactional_id = %current.transactional_id,
                        error = %refusal.message,
                        "storing a completed transaction failed; retrying"
                    ),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = self.broker.shutdown_started() => return,
            }
        }
    }

    /// Sends `marker` to the leaders of its partitions (this broker's own directly, others
    /// over the inter-broker route); answers the partitions that have their marker (or no
    /// longer exist, as Kafka drops the markers of a deleted partition).
    async fn write_markers(&self, marker: TxnMarker) -> BTreeSet<TxnPartition> {
        let mut by_leader: BTreeMap<Option<u32>, Vec<TxnPartition>> = BTreeMap::new();
        for tp in &marker.partitions {
            by_leader
                .entry(self.leader_of(tp))
                .or_default()
                .push(tp.clone());
        }
        let mut done = BTreeSet::new();
        for (leader, partitions) in by_leader {
            let Some(leader) = leader else { continue };
            let one = TxnMarker {
                partitions,
                ..marker.clone()
            };
            let results = if leader == self.broker.config.broker_id {
                txn_markers::write_markers(&self.broker, one).await
            } else {
                let Some((url, http)) = self.peer(leader) else {
                    continue;
                };
                match txn_markers::send_markers(&http, &url, &one).await {
                    Ok(results) => results,
                    Err(why) => {
                        tracing::debug!(leader, %why, "markers not delivered; retrying");
                        continue;
                    }
                }
            };
            for (tp, result) in results {
                match result {
                    Ok(()) | Err(ErrorCode::UnknownTopicOrPartition) => {
                        done.insert(tp);
                    }
                    Err(e) => {
                        tracing::debug!(topic = %tp.0, partition = tp.1, error = %e, "marker not written; retrying")
                    }
                }
            }
        }
        done
    }

    fn leader_of(&self, (topic, partition): &TxnPartition) -> Option<u32> {
        match &self.broker.cluster {
            None => Some(self.broker.config.broker_id),
            Some(cluster) => match cluster.metadata().topic(topic) {
                // Deleted: the local write answers UNKNOWN_TOPIC_OR_PARTITION, which counts.
                None => Some(self.broker.config.broker_id),
                Some(t) => t.partitions.get(*partition as usize).and_then(|p| p.leader),
            },
        }
    }

    fn peer(&self, id: u32) -> Option<(String, reqwest::Client)> {
        let cluster = self.broker.cluster.as_ref()?;
        let url = cluster
            .metadata()
            .brokers
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.address.clone())?;
        Some((url, cluster.http().clone()))
    }

    /// Stores `next` as `entry`'s metadata: in the log first, then current. The caller holds
    /// the entry's `writes`.
    async fn store(&self, entry: &TxnEntry, next: TxnMetadata) -> Result<(), TxnRefusal> {
        let record = metadata_record(&next, crate::clock::timestamp_ms());
        self.topic()
            .append(&self.broker, entry.partition, vec![record])
            .await
            .map_err(of_unavailable)?;
        *entry.metadata.lock().expect("txn lock") = next;
        Ok(())
    }

    /// The first InitProducerId of an id: a new producer id at epoch 0, stored, then held.
    /// `Err(entry)` when a concurrent request created the id first: continue with it.
    async fn first_init(
        &self,
        loaded: &LoadedPartition,
        transactional_id: &str,
        timeout_ms: i32,
    ) -> Result<Result<ProducerIdAndEpoch, Arc<TxnEntry>>, TxnRefusal> {
        let _creating = loaded.creating.lock().await;
        if let Some(entry) = loaded.txns.lock().expect("txns lock").get(transactional_id) {
            return Ok(Err(entry.clone()));
        }
        let (producer_id, _) = crate::ops::producer_ids::new_producer(&self.broker)
            .await
            .map_err(|why| refuse(ErrorCode::CoordinatorLoadInProgress, why))?;
        let fresh = state::first_init(transactional_id, producer_id, timeout_ms);
        let entry = new_entry(loaded.partition, fresh.clone());
        self.store(&entry, fresh.clone()).await?;
        loaded
            .txns
            .lock()
            .expect("txns lock")
            .insert(transactional_id.to_string(), entry);
        Ok(Ok(pair(&fresh)))
    }

    /// A new producer id when `current`'s epoch is about to overflow (Kafka then gives the id
    /// a new producer id at epoch 0); `None` otherwise, or when no block has one.
    async fn spare_producer_id(&self, current: &TxnMetadata) -> Option<i64> {
        if current.producer_epoch < i16::MAX - 1 {
            return None;
        }
        crate::ops::producer_ids::new_producer(&self.broker)
            .await
            .ok()
            .map(|(id, _)| id)
    }

    /// The id's loaded partition and its entry there, if it has one.
    async fn entry(
        self: &Arc<Self>,
        transactional_id: &str,
    ) -> Result<(Arc<LoadedPartition>, Option<Arc<TxnEntry>>), TxnRefusal> {
        validate_transactional_id(transactional_id)?;
        let count = self.partition_count().await?;
        let partition = partition_for(transactional_id, count);
        let loaded = self.loaded_partition(partition).await?;
        let entry = loaded
            .txns
            .lock()
            .expect("txns lock")
            .get(transactional_id)
            .cloned();
        Ok((loaded, entry))
    }

    async fn existing(
        self: &Arc<Self>,
        transactional_id: &str,
    ) -> Result<Arc<TxnEntry>, TxnRefusal> {
        self.entry(transactional_id)
            .await?
            .1
            .ok_or_else(|| unknown_id(transactional_id))
    }

    async fn partition_count(&self) -> Result<u32, TxnRefusal> {
        self.topic()
            .count_or_create(&self.broker, &self.load)
            .await
            .map_err(of_unavailable)
    }

    /// The partition's ids, (re)loaded from the log when this broker leads it in an epoch it
    /// has not loaded yet; the transactions found preparing are completed in the background.
    async fn loaded_partition(
        self: &Arc<Self>,
        partition: u32,
    ) -> Result<Arc<LoadedPartition>, TxnRefusal> {
        let topic = self.topic();
        let current =
            |coordinator: &Arc<Self>| -> Result<Option<Arc<LoadedPartition>>, TxnRefusal> {
                let leader_epoch = topic
                    .leader_epoch(&coordinator.broker, partition)
                    .map_err(of_unavailable)?;
                Ok(coordinator
                    .partitions
                    .lock()
                    .expect("partitions lock")
                    .get(&partition)
                    .filter(|found| found.leader_epoch == leader_epoch)
                    .cloned())
            };
        if let Some(found) = current(self)? {
            return Ok(found);
        }
        let _load = self.load.lock().await;
        if let Some(found) = current(self)? {
            return Ok(found);
        }
        let leader_epoch = topic
            .leader_epoch(&self.broker, partition)
            .map_err(of_unavailable)?;
        let mut txns = LoadedTxns::default();
        crate::ops::run_maybe_blocking(true, || {
            topic.read_all(&self.broker, partition, |record| {
                if !txns.apply(record) {
                    tracing::warn!(
                        partition,
                        offset = record.offset,
                        "unreadable record in the transaction state topic skipped"
                    );
                }
            })
        })
        .map_err(of_unavailable)?;
        if self
            .broker
            .config
            .bugs
            .on(crate::bugs::Bug::TxnReloadForgetsOngoing)
        {
            let forgotten = txns.forget_ongoing();
            if !forgotten.is_empty() {
                // What a run's analysis needs to tell a miss from a bug never reached.
                tracing::warn!(
                    partition,
                    ?forgotten,
                    "deliberate bug txn.reload.forgets.ongoing: open transactions loaded as Empty"
                );
            }
        }
        let entries: BTreeMap<String, Arc<TxnEntry>> = txns
            .txns
            .into_iter()
            .map(|(id, metadata)| (id, new_entry(partition, metadata)))
            .collect();
        let preparing: Vec<Arc<TxnEntry>> = entries
            .values()
            .filter(|e| e.metadata.lock().expect("txn lock").state.preparing())
            .cloned()
            .collect();
        tracing::info!(
            partition,
            leader_epoch,
            transactional_ids = entries.len(),
            preparing = preparing.len(),
            "loaded the transactional ids of a transaction state partition"
        );
        let loaded = Arc::new(LoadedPartition {
            partition,
            leader_epoch,
            creating: tokio::sync::Mutex::new(()),
            txns: Mutex::new(entries),
        });
        self.partitions
            .lock()
            .expect("partitions lock")
            .insert(partition, loaded.clone());
        for entry in preparing {
            self.complete_in_background(entry, leader_epoch);
        }
        Ok(loaded)
    }
}

fn pair(metadata: &TxnMetadata) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: metadata.producer_id,
        producer_epoch: metadata.producer_epoch,
    }
}

fn new_entry(partition: u32, metadata: TxnMetadata) -> Arc<TxnEntry> {
    Arc::new(TxnEntry {
        partition,
        metadata: Mutex::new(metadata),
        writes: tokio::sync::Mutex::new(()),
    })
}

fn unknown_id(transactional_id: &str) -> TxnRefusal {
    // Kafka answers a transaction request for an id it does not hold so
    // (`TransactionCoordinator.handleAddPartitionsToTransaction`).
    refuse(
        ErrorCode::InvalidProducerIdMapping,
        format!("{transactional_id} has no producer id here: InitProducerId first"),
    )
}

/// Transactional ids: 1 to 255 bytes (Kafka takes any non-empty string; the bound keeps
/// records small).
pub fn validate_transactional_id(transactional_id: &str) -> Result<(), TxnRefusal> {
    if transactional_id.is_empty() || transactional_id.len() > TRANSACTIONAL_ID_MAX_BYTES {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            format!("transactional ids are 1 to {TRANSACTIONAL_ID_MAX_BYTES} bytes long"),
        ));
    }
    Ok(())
}

/// A coordinator's reason not to serve, with the codes Kafka's `TransactionStateManager`
/// answers an append's failure with (`appendTransactionToLog`).
fn of_unavailable(why: CoordinatorUnavailable) -> TxnRefusal {
    use crate::error::ErrorKind;
    match why {
        CoordinatorUnavailable::NotCoordinator(message) => {
            refuse(ErrorCode::NotCoordinator, message)
        }
        CoordinatorUnavailable::LoadInProgress(message) => {
            refuse(ErrorCode::CoordinatorLoadInProgress, message)
        }
        CoordinatorUnavailable::NotAvailable(message) => {
            refuse(ErrorCode::CoordinatorNotAvailable, message)
        }
        CoordinatorUnavailable::Api(error) => match error.kind {
            ErrorKind::NotEnoughReplicas
            | ErrorKind::NotEnoughReplicasAfterAppend
            | ErrorKind::RequestTimedOut
            | ErrorKind::UnknownTopicOrPartition => {
                refuse(ErrorCode::CoordinatorNotAvailable, error.message)
            }
            ErrorKind::NotLeaderOrFollower | ErrorKind::KafkaStorageError => {
                refuse(ErrorCode::NotCoordinator, error.message)
            }
            _ => refuse(ErrorCode::UnknownServerError, error.message),
        },
    }
}
