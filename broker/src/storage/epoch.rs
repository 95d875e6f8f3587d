//! The leader-epoch cache: for each leader epoch, the first offset written in it.
//!
//! Followers use it to truncate by OffsetsForLeaderEpoch (KIP-101, KIP-279) instead of to their
//! high watermark. It is persisted as `leader-epoch-checkpoint` in the partition directory in
//! Kafka's format: `0`, the entry count, then one `epoch start_offset` line per entry.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::LogError;

/// File name of the leader-epoch checkpoint inside a partition directory.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// One leader epoch and the offset of the first record appended in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: u32,
    /// Offset of the first record written by the leader of `epoch`.
    pub start_offset: u64,
}

/// Epoch -> start offset, both strictly increasing from entry to entry.
#[derive(Debug)]
pub struct LeaderEpochCache {
    /// Where the cache is checkpointed after every change.
    path: PathBuf,
    /// Sorted by epoch and by start offset; both strictly increase.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir`, or starts empty when there is none.
    pub fn load(dir: &Path) -> Result<LeaderEpochCache, LogError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let lines = checkpoint::read_entries(&path)?.unwrap_or_default();
        let mut entries = Vec::with_capacity(lines.len());
        for line in &lines {
            let parsed = line.split_once(' ').and_then(|(epoch, offset)| {
                Some(EpochEntry {
                    epoch: epoch.parse().ok()?,
                    start_offset: offset.parse().ok()?,
                })
            });
            let entry = parsed.ok_or_else(|| {
                LogError::Corrupt(format!("{}: bad entry {line:?}", path.display()))
            })?;
            if let Some(last) = entries.last() {
                if !is_after(last, &entry) {
                    return Err(LogError::Corrupt(format!(
                        "{}: entries out of order at {line:?}",
                        path.display()
                    )));
                }
            }
            entries.push(entry);
        }
        Ok(LeaderEpochCache { path, entries })
    }

    /// An empty cache that will be saved in `dir`.
    pub(crate) fn empty(dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache {
            path: dir.join(LEADER_EPOCH_CHECKPOINT),
            entries: Vec::new(),
        }
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<u32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The newest entry, if any.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The epoch of the record at `offset` according to the cache (the entry with the largest
    /// start offset <= `offset`).
    pub fn epoch_for_offset(&self, offset: u64) -> Option<u32> {
        let idx = self.entries.partition_point(|e| e.start_offset <= offset);
        idx.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// KIP-279: the largest known epoch <= `requested` and its end offset, which is the start
    /// offset of the next known epoch, or `log_end_offset` for the latest epoch. `None` when no
    /// known epoch is <= `requested`.
    pub fn end_offset_for(&self, requested: u32, log_end_offset: u64) -> Option<(u32, u64)> {
        let idx = self.entries.partition_point(|e| e.epoch <= requested);
        let floor = self.entries[..idx].last()?;
        let end_offset = self
            .entries
            .get(idx)
            .map_or(log_end_offset, |next| next.start_offset);
        Some((floor.epoch, end_offset))
    }

    /// Records that `epoch` starts at `start_offset`, in memory; returns whether anything
    /// changed. Like Kafka, an entry for the latest epoch is only moved to an earlier offset,
    /// and entries it would overlap (same or later start offset) are dropped. An epoch below
    /// the latest is refused: epochs only grow.
    pub(crate) fn assign(&mut self, epoch: u32, start_offset: u64) -> Result<bool, LogError> {
        if let Some(latest) = self.latest() {
            if epoch < latest.epoch {
                return Err(LogError::InvalidRecord(format!(
                    "leader epoch {epoch} is below the latest epoch {} of this log",
                    latest.epoch
                )));
            }
            if epoch == latest.epoch && start_offset >= latest.start_offset {
                return Ok(false);
            }
        }
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Drops entries starting at or after `end_offset` (the log was truncated to it); returns
    /// whether anything changed.
    pub(crate) fn truncate_from_end(&mut self, end_offset: u64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.entries.len() != before
    }

    /// The log now starts at `start_offset`: entries starting at or before it collapse into one
    /// entry for the epoch in force at `start_offset`, starting there. Returns whether anything
    /// changed.
    pub(crate) fn truncate_from_start(&mut self, start_offset: u64) -> bool {
        let covered = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if covered == 0 || (covered == 1 && self.entries[0].start_offset == start_offset) {
            return false;
        }
        let epoch = self.entries[covered - 1].epoch;
        self.entries.drain(..covered);
        self.entries.insert(
            0,
            EpochEntry {
                epoch,
                start_offset,
            },
        );
        true
    }

    /// Forgets every entry (the log was emptied).
    pub(crate) fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    /// Writes the checkpoint file atomically.
    pub(crate) fn save(&self) -> Result<(), LogError> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        checkpoint::write_entries(&self.path, &lines)?;
        Ok(())
    }
}

fn is_after(previous: &EpochEntry, next: &EpochEntry) -> bool {
    next.epoch > previous.epoch && next.start_offset > previous.start_offset
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(entries: &[(u32, u64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        for &(epoch, start) in entries {
            assert!(cache.assign(epoch, start).unwrap());
        }
        (dir, cache)
    }

    fn pairs(cache: &LeaderEpochCache) -> Vec<(u32, u64)> {
        cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn end_offset_for_known_epochs() {
        let (_dir, cache) = cache_with(&[(1, 0), (3, 10), (4, 25)]);
        assert_eq!(cache.end_offset_for(1, 40), Some((1, 10)));
        assert_eq!(cache.end_offset_for(3, 40), Some((3, 25)));
        assert_eq!(cache.end_offset_for(4, 40), Some((4, 40)));
    }

    #[test]
    fn end_offset_for_unknown_epoch_uses_largest_epoch_below_it() {
        // KIP-279: epoch 2 was never seen here; answer with epoch 1 and where epoch 1 ended.
        let (_dir, cache) = cache_with(&[(1, 0), (3, 10), (4, 25)]);
        assert_eq!(cache.end_offset_for(2, 40), Some((1, 10)));
        // Above every known epoch: the latest epoch, ending at the log end.
        assert_eq!(cache.end_offset_for(9, 40), Some((4, 40)));
    }

    #[test]
    fn end_offset_for_epoch_below_all_known_is_none() {
        let (_dir, cache) = cache_with(&[(3, 10), (4, 25)]);
        assert_eq!(cache.end_offset_for(2, 40), None);
        let (_dir, empty) = cache_with(&[]);
        assert_eq!(empty.end_offset_for(0, 0), None);
    }

    #[test]
    fn assign_ignores_same_epoch_later_offset_and_refuses_older_epoch() {
        let (_dir, mut cache) = cache_with(&[(1, 0), (2, 5)]);
        assert!(!cache.assign(2, 9).unwrap());
        assert!(matches!(
            cache.assign(1, 9),
            Err(LogError::InvalidRecord(_))
        ));
        assert_eq!(pairs(&cache), vec![(1, 0), (2, 5)]);
        // A newer epoch starting before the latest entry replaces the entries it overlaps.
        assert!(cache.assign(3, 5).unwrap());
        assert_eq!(pairs(&cache), vec![(1, 0), (3, 5)]);
    }

    #[test]
    fn truncate_from_end_drops_entries_at_or_after_offset() {
        let (_dir, mut cache) = cache_with(&[(1, 0), (3, 10), (4, 25)]);
        assert!(!cache.truncate_from_end(30));
        assert!(cache.truncate_from_end(25));
        assert_eq!(pairs(&cache), vec![(1, 0), (3, 10)]);
        assert!(cache.truncate_from_end(3));
        assert_eq!(pairs(&cache), vec![(1, 0)]);
    }

    #[test]
    fn truncate_from_start_moves_the_covering_epoch_to_the_new_start() {
        let (_dir, mut cache) = cache_with(&[(1, 0), (3, 10), (4, 25)]);
        assert!(cache.truncate_from_start(12));
        assert_eq!(pairs(&cache), vec![(3, 12), (4, 25)]);
        assert!(!cache.truncate_from_start(12));
        assert!(cache.truncate_from_start(25));
        assert_eq!(pairs(&cache), vec![(4, 25)]);
        assert_eq!(cache.epoch_for_offset(30), Some(4));
        assert_eq!(cache.epoch_for_offset(3), None);
    }

    #[test]
    fn checkpoint_survives_reload() {
        let (dir, cache) = cache_with(&[(1, 0), (3, 10)]);
        cache.save().unwrap();
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n2\n1 0\n3 10\n");
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(pairs(&reloaded), vec![(1, 0), (3, 10)]);
    }
}
