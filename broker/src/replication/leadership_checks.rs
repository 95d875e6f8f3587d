//! Whether a client request may be served by this replica: it leads the partition and the
//! client's leader epoch is the current one (KIP-320); and, for the latest offset only, whether
//! a new leader's HW has reached its epoch start (KIP-207).

use super::manager::ReplicaManager;
use super::replica::Role;
use crate::error::{ApiError, ErrorKind};

impl ReplicaManager {
    /// Checks that a consumer read (fetch, list offsets, offsets for a leader epoch) may be
    /// served here: this replica leads. A new leader serves reads with its own HW even while
    /// that HW is below the start of its epoch, as Kafka's `Partition.fetchRecords` does (the
    /// HW a consumer sees can then go back); only the latest offset waits for it
    /// ([`ReplicaManager::check_hw_current`]).
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
        self.leader_hw_and_epoch_start(topic, partition, client_epoch)
            .map(|_| ())
    }

    /// KIP-207, for a client asking for the latest offset: OFFSET_NOT_AVAILABLE while this
    /// leader's HW is below its epoch start offset (it does not yet know which records are
    /// committed), as Kafka's `Partition.fetchOffsetForTimestamp` answers for
    /// `LATEST_TIMESTAMP`; `tidewater.unsafe.serve.lagging.hw.enable` answers the lagging HW
    /// instead, as Kafka did before 2.2. Also the leader checks of
    /// [`ReplicaManager::check_consumer_read`].
    pub fn check_hw_current(&self, topic: &str, partition: u32) -> Result<(), ApiError> {
        let (high_watermark, epoch_start) =
            self.leader_hw_and_epoch_start(topic, partition, None)?;
        if !self.settings.unsafe_serve_lagging_hw_enable && high_watermark < epoch_start {
            return Err(ApiError::new(
                ErrorKind::OffsetNotAvailable,
                format!(
                    "new leader's high watermark {high_watermark} is below its epoch start \
                     offset {epoch_start}; retry shortly"
                ),
            ));
        }
        Ok(())
    }

    /// (HW, epoch start offset) of the partition this replica leads, after the KIP-320 check.
    fn leader_hw_and_epoch_start(
        &self,
        topic: &str,
        partition: u32,
        client_epoch: Option<u32>,
    ) -> Result<(u64, u64), ApiError> {
        let replica = self
            .replica(topic, partition)
            .ok_or_else(|| not_leader(topic, partition))?;
        let role = replica.role();
        let Role::Leader(state) = &role.role else {
            return Err(not_leader(topic, partition));
        };
        check_client_leader_epoch(client_epoch, role.leader_epoch)?;
        Ok((state.high_watermark(), state.epoch_start_offset))
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
