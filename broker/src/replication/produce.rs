//! Replicated produce on the leader: acks, `min.insync.replicas` before and after the append,
//! and the delayed produce of acks=all (completed by [`super::replica::Replica::publish`] when
//! the HW passes the batch).

use std::time::Duration;

use super::leadership_checks::{check_client_leader_epoch, not_leader};
use super::manager::ReplicaManager;
use super::replica::{advance_leader_hw, Role};
use crate::bugs::Bug;
use crate::error::{ApiError, ErrorKind};
use crate::storage::producer_state::Verification;
use crate::storage::{ProducerStamp, Record};

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
    /// For an idempotent producer's retry of a batch the log holds, the original's largest
    /// record timestamp: nothing was appended; the offsets are the original's (which may have
    /// been appended in an earlier leader epoch).
    pub duplicate: Option<i64>,
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
    /// The idempotent producer's stamp of the batch, if it has one.
    pub producer: Option<ProducerStamp>,
    /// KIP-890's check of a transactional batch (the Kafka listener's produce).
    pub verification: Verification,
}

impl ReplicaManager {
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
            producer: None,
            verification: Verification::Off,
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
            producer,
            verification,
        } = options;
        let replica = self
            .replica(topic, partition)
            .ok_or_else(|| not_leader(topic, partition))?;
        let (base_offset, last_offset, high_watermark, leader_epoch, isr_size, duplicate) = {
            let mut role = replica.role();
            let leader_epoch = role.leader_epoch;
            let Role::Leader(state) = &mut role.role else {
                return Err(not_leader(topic, partition));
            };
            check_client_leader_epoch(client_epoch, leader_epoch)?;
            let isr_size = state.isr().len();
            let isr_short = acks_all
                && isr_size < usize::from(min_insync_replicas)
                && !self.settings.bugs.on(Bug::IgnoreMinInsync);
            let refused = || {
                ApiError::new(
                    ErrorKind::NotEnoughReplicas,
                    format!("the ISR has {isr_size} replicas, fewer than min.insync.replicas={min_insync_replicas}; nothing was written"),
                )
            };
            if isr_short && !self.settings.bugs.on(Bug::MinInsyncAfterAppend) {
                return Err(refused());
            }
            let mut log = replica.log.lock();
            // A retry of a batch the log holds (appended here or replicated from an earlier
            // leader) is answered with the original's offsets: with acks=all it still waits
            // for the HW to pass them, as Kafka's delayed produce does.
            let appended =
                log.log
                    .append_verified(records, leader_epoch, producer, verification)?;
            if appended.duplicate.is_none() {
                advance_leader_hw(state, &mut log);
                replica.publish(&log);
            }
            if isr_short {
                // Deliberate bug `min.insync.after.append`: the refusal comes after the append,
                // and still says nothing was written.
                return Err(refused());
            }
            (
                appended.base_offset,
                appended.last_offset,
                log.high_watermark,
                leader_epoch,
                isr_size,
                appended.duplicate,
            )
        };
        let appended = LeaderAppend {
            base_offset,
            last_offset,
            high_watermark,
            leader_epoch,
            isr_size: u32::try_from(isr_size).unwrap_or(u32::MAX),
            duplicate,
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
}

fn lost_leadership(base_offset: u64, last_offset: u64) -> ApiError {
    ApiError::new(
        ErrorKind::RequestTimedOut,
        format!("offsets {base_offset}..={last_offset} were appended, then this broker lost the leadership before they were committed; they may or may not survive"),
    )
}
