//! DeleteRecords on the leader (Kafka's DelayedDeleteRecords): move the log start offset, then
//! wait for the live followers to follow, bounded by [`DELETE_RECORDS_WAIT_MAX_MS`].

use std::time::Duration;

use super::leadership_checks::not_leader;
use super::manager::ReplicaManager;
use super::replica::Role;
use crate::error::{ApiError, ErrorKind};

/// Longest DeleteRecords waits for the followers' log start offsets (Kafka bounds it by the
/// request's timeout, 30 s by default).
pub const DELETE_RECORDS_WAIT_MAX_MS: u64 = 10_000;

impl ReplicaManager {
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
}
