//! The replication state of local replicas as `GET /v1/status` and `/metrics` show it.

use serde::Serialize;

use super::manager::ReplicaManager;
use super::replica::{Replica, Role};

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

impl ReplicaManager {
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
}
