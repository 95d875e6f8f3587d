//! The high-watermark checkpoint of one replica: `replication-offset-checkpoint` in the
//! partition directory (Kafka keeps one such file per log dir for all partitions; one per
//! partition keeps the writes independent). Written every
//! `replica.high.watermark.checkpoint.interval.ms` and at shutdown; read when the replica is
//! opened in a cluster, since only the checkpoint, not the LEO, says what was committed.

use std::path::Path;

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
