//! The leader's side of the broker-to-broker requests (`/internal/v1/...`, served by
//! [`crate::http::routes::replication`]): follower fetches (recording the follower's progress,
//! which may expand the ISR and advance the HW, with a long poll at the end of the log) and
//! OffsetsForLeaderEpoch. Errors carry Kafka's names
//! ([`InternalError`]); the HTTP status each answers with is the route's business.

use std::sync::Arc;
use std::time::Duration;

use super::leader::LeaderState;
use super::manager::ReplicaManager;
use super::protocol::{
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, ReplicaFetchOffsets,
    ReplicaFetchRequest,
};
use super::replica::{advance_leader_hw, Replica, Role, RoleState};
use crate::partition::{Isolation, PartitionState};

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
}

impl ReplicaManager {
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
                crate::clock::now_ms(),
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

fn fetch_offsets(log: &PartitionState) -> ReplicaFetchOffsets {
    ReplicaFetchOffsets {
        high_watermark: log.high_watermark,
        log_start_offset: log.log.log_start_offset(),
        log_end_offset: log.log.log_end_offset(),
        leader_epoch: log.leader_epoch,
    }
}
