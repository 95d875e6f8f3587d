//! Whether a client request may be served by this replica: it leads the partition, the
//! client's leader epoch is the current one (KIP-320), and a consumer read waits until a new
//! leader's HW has reached its epoch start (KIP-207).

use super::manager::ReplicaManager;
use super::replica::Role;
use crate::error::{ApiError, ErrorKind};

impl ReplicaManager {
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

pub(super) fn not_leader(topic: &str, partition: u32) -> ApiError {
    ApiError::new(
        ErrorKind::NotLeaderOrFollower,
        format!("this broker does not lead {topic}/{partition}; see GET /v1/metadata"),
    )
}
