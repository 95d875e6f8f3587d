//! The high-watermark checkpoint of one replica: `replication-offset-checkpoint` in the
//! partition directory (Kafka keeps one such file per log dir for all partitions; one per
//! partition keeps the writes independent). Written every
//! `replica.high.watermark.checkpoint.interval.ms` and at shutdown; read when the replica is
//! opened in a cluster, since only the checkpoint, not the LEO, says what was committed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::manager::ReplicaManager;
use crate::storage::{checkpoint, LogError};

/// File name of the HW checkpoint inside a partition directory.
pub const HW_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";

/// Writes `high_watermark` atomically.
pub fn write(partition_dir: &Path, high_watermark: u64) -> std::io::Result<()> {
    checkpoint::write_offset(&partition_dir.join(HW_CHECKPOINT_FILE), high_watermark)
}

/// The checkpointed HW, or 0 when the replica never checkpointed one (the safe answer: nothing
/// is known to be committed).
pub fn read(partition_dir: &Path) -> Result<u64, LogError> {
    Ok(checkpoint::read_offset(&partition_dir.join(HW_CHECKPOINT_FILE))?.unwrap_or(0))
}

impl ReplicaManager {
    /// Writes the HW checkpoints every `replica.high.watermark.checkpoint.interval.ms`.
    pub(super) async fn checkpoint_forever(self: Arc<Self>) {
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
            if let Err(e) = write(&replica.log.dir, high_watermark) {
                tracing::warn!(dir = %replica.log.dir.display(), error = %e, "HW checkpoint failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_checkpoint_reads_as_zero_and_writes_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), 0);
        write(dir.path(), 42).unwrap();
        assert_eq!(read(dir.path()).unwrap(), 42);
        write(dir.path(), 43).unwrap();
        assert_eq!(read(dir.path()).unwrap(), 43);
    }
}
