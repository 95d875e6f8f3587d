//! The group coordinator service: routes each group to its `__consumer_offsets` partition,
//! loads a partition's groups when this broker (newly) leads it, stores commits and group
//! metadata through the partition's ordinary append path (acks=all in a cluster), and lets
//! join and sync requests wait for their rebalance round without blocking a thread.
//!
//! Locking: `partitions` -> a partition's `groups` -> a group's `data`, all `std` mutexes held
//! for one short state-machine call, never across an `.await`. A group's `writes` (async) lock
//! orders its stored records: a commit validated in generation g is in the log (and the cache)
//! before the leader's assignment of generation g+1 is stored, so a new owner never fetches an
//! offset older than one its predecessor had committed successfully.
//!
//! Transactional offset commits (TxnOffsetCommit) are appended as the producer's transactional
//! records and kept pending per producer until their transaction ends. Kafka completes them
//! when WriteTxnMarkers reaches the coordinator; here a group's pending offsets are settled
//! from the offsets partition itself whenever the group is read: a pending record below the
//! partition's last stable offset belongs to a transaction whose marker is replicated, and the
//! partition's index of aborted transactions says whether it was aborted. What a client sees
//! is a function of the log, so a failover, a reload and a marker retried by another
//! coordinator all give the same answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::assignor::{Assignment, TopicPartition};
use super::error::{GroupError, GroupErrorKind};
use super::offsets::{self, CommittedOffset, LoadedGroups, PendingOffsets, OFFSETS_TOPIC};
use super::state::{
    Group, GroupDescription, GroupLimits, GroupState, JoinRequest, JoinResult, MemberIdScope,
    SyncStep,
};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::internal_topic::{CoordinatorUnavailable, InternalTopic};
use crate::storage::{ProducerStamp, StampKind};

/// Coordinator settings (Kafka's names in the docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// `offsets.topic.num.partitions` (Kafka: 50), used when the topic is created.
    pub offsets_topic_partitions: u32,
    /// `offsets.topic.replication.factor` (Kafka: 3), capped by the brokers registered.
    pub offsets_topic_replication_factor: u32,
    /// `offsets.commit.timeout.ms`: how long a commit waits for the ISR (Kafka: 5000).
    pub offsets_commit_timeout_ms: u64,
    /// `offset.metadata.max.bytes` (Kafka: 4096).
    pub offset_metadata_max_bytes: usize,
    /// Most partitions one commit may carry.
    pub commit_partitions_max: usize,
    /// Member bounds.
    pub limits: GroupLimits,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            offsets_topic_partitions: 8,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout_ms: 5_000,
            offset_metadata_max_bytes: 4_096,
            commit_partitions_max: 10_000,
            limits: GroupLimits::default(),
        }
    }
}

/// Bound on how long a join or sync request waits beyond the member's rebalance timeout.
const WAIT_SLACK_MS: u64 = 5_000;
/// Longest group id accepted.
pub const GROUP_ID_MAX_BYTES: usize = 255;

/// A group and its committed offsets.
struct GroupData {
    group: Group,
    offsets: BTreeMap<TopicPartition, CommittedOffset>,
    /// Offsets of transactions not known ended yet, by producer id.
    pending: PendingOffsets,
}

impl GroupData {
    /// Ends the pending offsets whose transaction ended in `log` ([module docs](self)), one
    /// record at a time.
    fn settle(&mut self, log: &crate::partition::Partition) {
        if self.pending.is_empty() {
            return;
        }
        let stable = log.offsets().last_stable_offset;
        for (&producer_id, pending) in &mut self.pending {
            let ended: Vec<TopicPartition> = pending
                .iter()
                .filter(|(_, o)| o.record_offset < stable)
                .map(|(tp, _)| tp.clone())
                .collect();
            for tp in ended {
                let offset = pending.remove(&tp).expect("listed above");
                let at = offset.record_offset;
                let aborted = log
                    .aborted_transactions(at, at + 1)
                    .iter()
                    .any(|a| a.producer_id == producer_id && a.first_offset <= at);
                if !aborted {
                    offsets::commit_if_later(&mut self.offsets, tp, offset);
                }
            }
        }
        self.pending.retain(|_, pending| !pending.is_empty());
    }
}

/// One group held by this coordinator.
struct GroupEntry {
    /// The offsets partition it lives in.
    partition: u32,
    /// Membership state and the offsets cache.
    data: Mutex<GroupData>,
    /// Orders the group's stored records (commits, assignments).
    writes: tokio::sync::Mutex<()>,
    /// Bumped when the group's membership changes, waking waiting joins and syncs.
    changes: watch::Sender<u64>,
}

/// The groups of one offsets partition, loaded in one leader epoch.
struct LoadedPartition {
    /// The leader epoch the partition was loaded in; another epoch means reload.
    leader_epoch: u32,
    /// Where the member ids of this load's groups come from (unlike any other load's).
    member_ids: MemberIdScope,
    /// Group id -> group.
    groups: Mutex<BTreeMap<String, Arc<GroupEntry>>>,
}

/// Where a group is coordinated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CoordinatorInfo {
    /// The group id.
    pub group_id: String,
    /// Its `__consumer_offsets` partition.
    pub partition: u32,
    /// The partition leader's broker id (`None` while it has no leader).
    pub broker_id: Option<u32>,
    /// The coordinator's URL (`None` while the partition has no leader).
    pub url: Option<String>,
}

/// The coordinator of every group whose offsets partition this broker leads.
pub struct GroupCoordinator {
    broker: Arc<Broker>,
    config: CoordinatorConfig,
    /// Start of the coordinator's clock (`now_ms` of the state machines); monotonic.
    started: Instant,
    /// Unix ms at start: part of member ids, so ids of an earlier process never match.
    incarnation: u64,
    /// Loaded partitions by index.
    partitions: Mutex<BTreeMap<u32, Arc<LoadedPartition>>>,
    /// Serialises creating the offsets topic and loading partitions.
    load: tokio::sync::Mutex<()>,
    /// Serialises transactional offset appends (see [`GroupCoordinator::next_stamp`]).
    txn_appends: tokio::sync::Mutex<()>,
}

/// A sync answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncResult {
    /// The generation the assignment belongs to.
    pub generation: u64,
    /// This member's partitions.
    pub assignment: Vec<TopicPartition>,
}

impl GroupCoordinator {
    /// A coordinator for `broker`.
    pub fn new(broker: Arc<Broker>, config: CoordinatorConfig) -> Arc<GroupCoordinator> {
        Arc::new(GroupCoordinator {
            broker,
            config,
            started: Instant::now(),
            incarnation: crate::clock::now_ms(),
            partitions: Mutex::new(BTreeMap::new()),
            load: tokio::sync::Mutex::new(()),
            txn_appends: tokio::sync::Mutex::new(()),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Where `group_id` is coordinated (Kafka's FindCoordinator). Creates the offsets topic
    /// on first use.
    pub async fn find_coordinator(&self, group_id: &str) -> Result<CoordinatorInfo, GroupError> {
        validate_group_id(group_id)?;
        let count = self.offsets_partition_count().await?;
        let partition = offsets::partition_for(group_id, count);
        let (broker_id, url) = match &self.broker.cluster {
            None => (
                Some(self.broker.config.broker_id),
                Some(self.broker.advertised_url.clone()),
            ),
            Some(cluster) => {
                let metadata = cluster.metadata();
                let leader = metadata
                    .topic(OFFSETS_TOPIC)
                    .and_then(|t| t.partitions.get(partition as usize))
                    .and_then(|p| p.leader);
                let url = leader.and_then(|id| {
                    metadata
                        .brokers
                        .iter()
                        .find(|b| b.id == id)
                        .map(|b| b.address.clone())
                });
                (leader, url)
            }
        };
        Ok(CoordinatorInfo {
            group_id: group_id.to_string(),
            partition,
            broker_id,
            url,
        })
    }

    /// Join: waits (bounded) until the member's rebalance round completes.
    pub async fn join(
        &self,
        group_id: &str,
        request: JoinRequest,
    ) -> Result<JoinResult, GroupError> {
        let wait_ms = request.max_poll_interval_ms.saturating_add(WAIT_SLACK_MS);
        let entry = self.entry(group_id, true).await?;
        let member_id = self.with_group(&entry, |group, now_ms| {
            group.observe_topics(&request.topics, |topic| self.partition_count(topic));
            group.join(now_ms, request)
        })?;
        self.wait_for(&entry, wait_ms, |group, now_ms| {
            group.take_join_result(now_ms, &member_id)
        })
        .await
    }

    /// KIP-394: a new member's first join (Kafka's JoinGroup v4 and later) is given an id to
    /// join again with instead of being admitted; see [`Group::require_member_id`].
    pub async fn require_member_id(
        &self,
        group_id: &str,
        request: JoinRequest,
    ) -> Result<String, GroupError> {
        let entry = self.entry(group_id, true).await?;
        self.with_group(&entry, |group, now_ms| {
            group.require_member_id(now_ms, &request)
        })
    }

    /// Sync: the leader's assignment is stored, then every member gets its part.
    pub async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<Assignment>,
    ) -> Result<SyncResult, GroupError> {
        let entry = self.entry(group_id, false).await?;
        let step = self.with_group(&entry, |group, now_ms| {
            group.sync(now_ms, member_id, generation, assignment)
        })?;
        match step {
            SyncStep::Done(assignment) => {
                return Ok(SyncResult {
                    generation,
                    assignment,
                })
            }
            SyncStep::Wait => {}
            SyncStep::Persist(record) => {
                let _writes = entry.writes.lock().await;
                let now_unix_ms = crate::clock::timestamp_ms();
                let stored = offsets::group_record(group_id, &record, now_unix_ms);
                let appended = self.append(entry.partition, vec![stored]).await;
                if let Err(error) = &appended {
                    tracing::warn!(group = group_id, %error, "storing a group assignment failed");
                }
                self.with_group(&entry, |group, now_ms| {
                    group.complete_sync(now_ms, &record, appended.is_ok());
                    Ok(())
                })?;
                appended?;
            }
        }
        let wait_ms = self.wait_bound_ms(&entry, member_id);
        let assignment = self
            .wait_for(&entry, wait_ms, |group, now_ms| {
                match group.sync(now_ms, member_id, generation, None)? {
                    SyncStep::Done(assignment) => Ok(Some(assignment)),
                    _ => Ok(None),
                }
            })
            .await?;
        Ok(SyncResult {
            generation,
            assignment,
        })
    }

    /// Heartbeat (`polled`: the application polled since the last one).
    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> Result<(), GroupError> {
        let entry = self.entry(group_id, false).await?;
        self.with_group(&entry, |group, now_ms| {
            group.heartbeat(now_ms, member_id, generation, polled)
        })
    }

    /// Leave.
    pub async fn leave(&self, group_id: &str, member_id: &str) -> Result<(), GroupError> {
        let entry = self.entry(group_id, false).await?;
        self.with_group(&entry, |group, now_ms| group.leave(now_ms, member_id))
    }

    /// Commits `offsets` for the member (or, with no member and generation -1, for a client
    /// outside an Empty group). Answers once the records are in the offsets topic's HW.
    pub async fn commit(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        generation: i64,
        offsets: Vec<(TopicPartition, u64, String)>,
    ) -> Result<(), GroupError> {
        self.validate_commit(&offsets)?;
        // Only a commit from outside the group may create it (Kafka's simple consumer).
        let entry = self.entry(group_id, member_id.is_none()).await?;
        let _writes = entry.writes.lock().await;
        self.with_group(&entry, |group, now_ms| {
            group.check_commit(now_ms, member_id, generation)
        })?;
        let values = self
            .store_offsets(group_id, entry.partition, offsets, None)
            .await?;
        let mut data = entry.data.lock().expect("group lock");
        data.offsets.extend(values);
        Ok(())
    }

    /// A transactional producer's offsets (TxnOffsetCommit): checked as
    /// [`Group::check_txn_commit`] says, appended as the producer's transactional records
    /// (an older epoch than the partition knows is INVALID_PRODUCER_EPOCH) and pending until
    /// the transaction ends. Creates the group if it is new (Kafka does).
    pub async fn txn_commit(
        &self,
        group_id: &str,
        producer: (i64, i16),
        member_id: Option<&str>,
        generation: i64,
        offsets: Vec<(TopicPartition, u64, String)>,
    ) -> Result<(), GroupError> {
        self.validate_commit(&offsets)?;
        let (producer_id, producer_epoch) = producer;
        if producer_id < 0 || producer_epoch < 0 {
            return Err(ApiError::invalid_request(format!(
                "producer id {producer_id} and epoch {producer_epoch} must not be negative"
            ))
            .into());
        }
        let entry = self.entry(group_id, true).await?;
        let _writes = entry.writes.lock().await;
        self.with_group(&entry, |group, now_ms| {
            group.check_txn_commit(now_ms, member_id, generation)
        })?;
        // One producer's sequence on the partition goes up by one batch at a time.
        let _sequences = self.txn_appends.lock().await;
        let stamp = self.next_stamp(entry.partition, producer_id, producer_epoch)?;
        let values = self
            .store_offsets(group_id, entry.partition, offsets, Some(stamp))
            .await?;
        let log = self.offsets_log(entry.partition)?;
        let mut data = entry.data.lock().expect("group lock");
        // The producer's earlier transaction has ended by now (its markers were written
        // before the coordinator took this one's AddOffsetsToTxn): settle it before a record
        // of this one replaces its record of the same partition.
        data.settle(&log);
        data.pending.entry(producer_id).or_default().extend(values);
        Ok(())
    }

    /// The offsets partition of `group_id` (AddOffsetsToTxn adds it to a transaction), the
    /// offsets topic created first if needed.
    pub async fn offsets_partition_of(&self, group_id: &str) -> Result<u32, GroupError> {
        validate_group_id(group_id)?;
        let count = self.offsets_partition_count().await?;
        Ok(offsets::partition_for(group_id, count))
    }

    /// The stamp of a producer's next batch on an offsets partition: Kafka appends a
    /// coordinator's transactional batch without a sequence (`RecordBatch.NO_SEQUENCE`, not
    /// checked); this log keeps sequences for every producer batch, so the coordinator
    /// continues the producer's own (its only batches there are these).
    fn next_stamp(
        &self,
        partition: u32,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<ProducerStamp, GroupError> {
        let log = self.offsets_log(partition)?;
        let state = log.lock();
        let sequence = match state.log.producers().entry(producer_id) {
            Some(entry) if entry.producer_epoch == producer_epoch => {
                entry.last_sequence().map_or(0, |last| {
                    crate::storage::producer_state::sequence_add(last, 1)
                })
            }
            _ => 0,
        };
        Ok(ProducerStamp {
            producer_id,
            producer_epoch,
            sequence,
            kind: StampKind::Transactional,
        })
    }

    /// Appends `offsets` of `group_id` as one batch (a producer's when `producer` is given);
    /// answers them with their records' offsets.
    async fn store_offsets(
        &self,
        group_id: &str,
        partition: u32,
        offsets: Vec<(TopicPartition, u64, String)>,
        producer: Option<ProducerStamp>,
    ) -> Result<Vec<(TopicPartition, CommittedOffset)>, GroupError> {
        let commit_timestamp_ms = crate::clock::timestamp_ms();
        let mut values: Vec<(TopicPartition, CommittedOffset)> = offsets
            .into_iter()
            .map(|(tp, offset, metadata)| {
                let value = CommittedOffset {
                    offset,
                    metadata,
                    commit_timestamp_ms,
                    record_offset: 0,
                };
                (tp, value)
            })
            .collect();
        let records = values
            .iter()
            .map(|(tp, value)| offsets::offset_record(group_id, tp, value))
            .collect();
        let base_offset = self
            .topic()
            .append_stamped(&self.broker, partition, records, producer)
            .await
            .map_err(of_unavailable)?;
        for (i, (_, value)) in values.iter_mut().enumerate() {
            value.record_offset = base_offset + i as u64;
        }
        Ok(values)
    }

    /// The local log of an offsets partition.
    fn offsets_log(&self, partition: u32) -> Result<Arc<crate::partition::Partition>, GroupError> {
        self.broker
            .topics
            .partition(OFFSETS_TOPIC, partition)
            .map_err(GroupError::Api)
    }

    /// The group's committed offsets and the partitions with offsets of a transaction not
    /// ended yet (OffsetFetch's `require_stable` answers UNSTABLE_OFFSET_COMMIT for those).
    pub async fn fetch_offsets_and_unstable(
        &self,
        group_id: &str,
    ) -> Result<
        (
            BTreeMap<TopicPartition, CommittedOffset>,
            BTreeSet<TopicPartition>,
        ),
        GroupError,
    > {
        let entry = match self.entry(group_id, false).await {
            Ok(entry) => entry,
            Err(e) if e.kind() == Some(GroupErrorKind::UnknownMemberId) => {
                return Ok((BTreeMap::new(), BTreeSet::new()))
            }
            Err(e) => return Err(e),
        };
        let log = self.offsets_log(entry.partition)?;
        let mut data = entry.data.lock().expect("group lock");
        data.settle(&log);
        let unstable = data
            .pending
            .values()
            .flat_map(|o| o.keys().cloned())
            .collect();
        Ok((data.offsets.clone(), unstable))
    }

    /// The group's committed offsets (Kafka's OffsetFetch; no membership needed).
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>, GroupError> {
        self.fetch_offsets_and_unstable(group_id)
            .await
            .map(|(committed, _)| committed)
    }

    /// Describe-group; a group never seen is described as Dead with no members (Kafka).
    pub async fn describe(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        match self.entry(group_id, false).await {
            Ok(entry) => {
                let now_ms = self.now_ms();
                Ok(entry
                    .data
                    .lock()
                    .expect("group lock")
                    .group
                    .describe(now_ms))
            }
            Err(e) if e.kind() == Some(GroupErrorKind::UnknownMemberId) => {
                // No member joins it, so the id scope is never used.
                let scope = self.member_id_scope(0);
                let mut dead = Group::new(group_id, 0, scope, self.config.limits);
                dead.unload();
                Ok(dead.describe(self.now_ms()))
            }
            Err(e) => Err(e),
        }
    }

    /// Every group of the offsets partitions this broker leads, with its state.
    pub async fn list(&self) -> Result<Vec<(String, GroupState)>, GroupError> {
        let count = self.offsets_partition_count().await?;
        let mut listed = Vec::new();
        for partition in 0..count {
            let Ok(loaded) = self.loaded_partition(partition).await else {
                continue; // led elsewhere, or not ready: that broker lists it
            };
            let entries: Vec<(String, Arc<GroupEntry>)> = loaded
                .groups
                .lock()
                .expect("groups lock")
                .iter()
                .map(|(id, e)| (id.clone(), e.clone()))
                .collect();
            for (id, entry) in entries {
                let now_ms = self.now_ms();
                let mut data = entry.data.lock().expect("group lock");
                data.group.tick(now_ms);
                listed.push((id, data.group.state()));
            }
        }
        Ok(listed)
    }

    /// Runs `f` on the group with the current partition counts observed first, and wakes
    /// waiters when the membership changed.
    fn with_group<R>(
        &self,
        entry: &GroupEntry,
        f: impl FnOnce(&mut Group, u64) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        let now_ms = self.now_ms();
        let mut data = entry.data.lock().expect("group lock");
        let before = data.group.changes();
        data.group
            .observe_partition_counts(now_ms, |topic| self.partition_count(topic));
        let result = f(&mut data.group, now_ms);
        if data.group.changes() != before {
            entry.changes.send_modify(|v| *v += 1);
        }
        result
    }

    /// Polls `check` whenever the group changes or a deadline passes, until it yields a value,
    /// fails, or `wait_ms` has passed (then REBALANCE_IN_PROGRESS: rejoin).
    async fn wait_for<R>(
        &self,
        entry: &GroupEntry,
        wait_ms: u64,
        mut check: impl FnMut(&mut Group, u64) -> Result<Option<R>, GroupError>,
    ) -> Result<R, GroupError> {
        let give_up_ms = self.now_ms().saturating_add(wait_ms);
        loop {
            let mut changes = entry.changes.subscribe();
            let mut deadline_ms = give_up_ms;
            let found = self.with_group(entry, |group, now_ms| {
                let found = check(group, now_ms)?;
                if let Some(next) = group.next_deadline_ms() {
                    deadline_ms = deadline_ms.min(next.max(now_ms + 1));
                }
                Ok(found)
            })?;
            if let Some(found) = found {
                return Ok(found);
            }
            let now_ms = self.now_ms();
            if now_ms >= give_up_ms {
                return Err(GroupError::new(
                    GroupErrorKind::RebalanceInProgress,
                    format!("the rebalance did not complete within {wait_ms} ms; rejoin"),
                ));
            }
            let sleep = Duration::from_millis(deadline_ms.saturating_sub(now_ms).max(1));
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = changes.changed() => {}
                _ = self.broker.shutdown_started() => {
                    return Err(GroupError::new(GroupErrorKind::CoordinatorNotAvailable, "the broker is shutting down"));
                }
            }
        }
    }

    fn wait_bound_ms(&self, entry: &GroupEntry, member_id: &str) -> u64 {
        let data = entry.data.lock().expect("group lock");
        data.group
            .member_max_poll_interval_ms(member_id)
            .unwrap_or(0)
            .saturating_add(WAIT_SLACK_MS)
    }

    /// Partitions of `topic` in the cluster's metadata (a single broker's own catalog), or
    /// `None` when no such topic exists.
    pub fn partition_count(&self, topic: &str) -> Option<u32> {
        match &self.broker.cluster {
            Some(cluster) => cluster
                .metadata()
                .topic(topic)
                .map(|t| t.partitions.len() as u32),
            None => self
                .broker
                .topics
                .get(topic)
                .map(|t| t.partitions.len() as u32),
        }
    }

    fn validate_commit(&self, offsets: &[(TopicPartition, u64, String)]) -> Result<(), GroupError> {
        if offsets.is_empty() || offsets.len() > self.config.commit_partitions_max {
            return Err(ApiError::invalid_request(format!(
                "a commit carries 1 to {} partitions, got {}",
                self.config.commit_partitions_max,
                offsets.len()
            ))
            .into());
        }
        for (tp, _, metadata) in offsets {
            crate::topics::validate_topic_name(&tp.topic)?;
            if metadata.len() > self.config.offset_metadata_max_bytes {
                return Err(GroupError::new(
                    GroupErrorKind::OffsetMetadataTooLarge,
                    format!(
                        "metadata of {tp} is {} bytes, more than offset.metadata.max.bytes={}",
                        metadata.len(),
                        self.config.offset_metadata_max_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The group's entry in its loaded partition. `create`: make an Empty group if none;
    /// otherwise a missing group is UNKNOWN_MEMBER_ID (every member-bound request fails so).
    async fn entry(&self, group_id: &str, create: bool) -> Result<Arc<GroupEntry>, GroupError> {
        validate_group_id(group_id)?;
        let count = self.offsets_partition_count().await?;
        let partition = offsets::partition_for(group_id, count);
        let loaded = self.loaded_partition(partition).await?;
        let mut groups = loaded.groups.lock().expect("groups lock");
        if let Some(entry) = groups.get(group_id) {
            return Ok(entry.clone());
        }
        if !create {
            return Err(GroupError::new(
                GroupErrorKind::UnknownMemberId,
                format!("group {group_id} has no members"),
            ));
        }
        let group = Group::new(group_id, 0, loaded.member_ids, self.config.limits);
        let entry = new_entry(partition, group, BTreeMap::new(), BTreeMap::new());
        groups.insert(group_id.to_string(), entry.clone());
        Ok(entry)
    }

    /// The partition's groups, (re)loaded from the log when this broker leads it in an epoch
    /// it has not loaded yet. NOT_COORDINATOR when another broker leads it.
    async fn loaded_partition(&self, partition: u32) -> Result<Arc<LoadedPartition>, GroupError> {
        let leader_epoch = self.leader_epoch(partition)?;
        if let Some(found) = self
            .partitions
            .lock()
            .expect("partitions lock")
            .get(&partition)
        {
            if found.leader_epoch == leader_epoch {
                return Ok(found.clone());
            }
        }
        let _load = self.load.lock().await;
        // Another request may have loaded it while this one waited.
        let leader_epoch = self.leader_epoch(partition)?;
        if let Some(found) = self
            .partitions
            .lock()
            .expect("partitions lock")
            .get(&partition)
        {
            if found.leader_epoch == leader_epoch {
                return Ok(found.clone());
            }
        }
        // A large partition takes a while to read: let the runtime move other tasks away.
        let loaded_groups =
            crate::ops::run_maybe_blocking(true, || self.read_partition(partition))?;
        let member_ids = self.member_id_scope(leader_epoch);
        let groups = loaded_groups
            .group_ids()
            .into_iter()
            .map(|id| {
                let generation = loaded_groups.generations.get(&id).copied().unwrap_or(0);
                let offsets = loaded_groups.offsets.get(&id).cloned().unwrap_or_default();
                let pending = loaded_groups.pending.get(&id).cloned().unwrap_or_default();
                let group = Group::new(&id, generation, member_ids, self.config.limits);
                (id, new_entry(partition, group, offsets, pending))
            })
            .collect::<BTreeMap<_, _>>();
        tracing::info!(
            partition,
            leader_epoch,
            groups = groups.len(),
            "loaded the groups of an offsets partition"
        );
        let loaded = Arc::new(LoadedPartition {
            leader_epoch,
            member_ids,
            groups: Mutex::new(groups),
        });
        let replaced = self
            .partitions
            .lock()
            .expect("partitions lock")
            .insert(partition, loaded.clone());
        if let Some(old) = replaced {
            for entry in old.groups.lock().expect("groups lock").values() {
                entry.data.lock().expect("group lock").group.unload();
                entry.changes.send_modify(|v| *v += 1);
            }
        }
        Ok(loaded)
    }

    /// The member id scope of a load in `leader_epoch` by this coordinator process.
    fn member_id_scope(&self, leader_epoch: u32) -> MemberIdScope {
        MemberIdScope {
            broker_id: self.broker.config.broker_id,
            incarnation: self.incarnation,
            leader_epoch,
        }
    }

    /// The offsets topic as an internal topic of this coordinator's settings.
    fn topic(&self) -> InternalTopic {
        InternalTopic {
            name: OFFSETS_TOPIC,
            partitions: self.config.offsets_topic_partitions,
            replication_factor: self.config.offsets_topic_replication_factor,
            min_insync_replicas: None,
            append_timeout_ms: self.config.offsets_commit_timeout_ms,
        }
    }

    /// The leader epoch this broker leads `partition` of the offsets topic in.
    fn leader_epoch(&self, partition: u32) -> Result<u32, GroupError> {
        self.topic()
            .leader_epoch(&self.broker, partition)
            .map_err(of_unavailable)
    }

    /// Reads the partition from its log start to its HW.
    fn read_partition(&self, partition: u32) -> Result<LoadedGroups, GroupError> {
        let mut loaded = LoadedGroups {
            bugs: self.broker.config.bugs,
            ..LoadedGroups::default()
        };
        self.topic()
            .read_all(&self.broker, partition, |record| {
                if !loaded.apply(record) {
                    tracing::warn!(
                        partition,
                        offset = record.offset,
                        "unreadable record in the offsets topic skipped"
                    );
                }
            })
            .map_err(of_unavailable)?;
        Ok(loaded)
    }

    /// The offsets topic's partition count, creating the topic first if needed.
    async fn offsets_partition_count(&self) -> Result<u32, GroupError> {
        self.topic()
            .count_or_create(&self.broker, &self.load)
            .await
            .map_err(of_unavailable)
    }

    /// Appends to the offsets partition (acks=all in a cluster).
    async fn append(
        &self,
        partition: u32,
        records: Vec<crate::storage::Record>,
    ) -> Result<(), GroupError> {
        self.topic()
            .append(&self.broker, partition, records)
            .await
            .map_err(of_unavailable)
    }
}

/// A coordinator's reason not to serve, as a group error.
fn of_unavailable(why: CoordinatorUnavailable) -> GroupError {
    match why {
        CoordinatorUnavailable::NotCoordinator(message) => GroupError::new(
            GroupErrorKind::NotCoordinator,
            format!("{message}; see GET /v1/groups/{{group}}/coordinator"),
        ),
        CoordinatorUnavailable::LoadInProgress(message) => {
            GroupError::new(GroupErrorKind::CoordinatorLoadInProgress, message)
        }
        CoordinatorUnavailable::NotAvailable(message) => {
            GroupError::new(GroupErrorKind::CoordinatorNotAvailable, message)
        }
        CoordinatorUnavailable::Api(error) => GroupError::Api(error),
    }
}

fn new_entry(
    partition: u32,
    group: Group,
    offsets: BTreeMap<TopicPartition, CommittedOffset>,
    pending: PendingOffsets,
) -> Arc<GroupEntry> {
    Arc::new(GroupEntry {
        partition,
        data: Mutex::new(GroupData {
            group,
            offsets,
            pending,
        }),
        writes: tokio::sync::Mutex::new(()),
        changes: watch::channel(0).0,
    })
}

/// Group ids: 1 to 255 bytes.
pub fn validate_group_id(group_id: &str) -> Result<(), GroupError> {
    if group_id.is_empty() || group_id.len() > GROUP_ID_MAX_BYTES {
        return Err(GroupError::new(
            GroupErrorKind::InvalidGroupId,
            format!("group ids are 1 to {GROUP_ID_MAX_BYTES} bytes long"),
        ));
    }
    Ok(())
}
