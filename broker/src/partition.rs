//! One partition replica hosted by this broker: its [`Log`], its high watermark, its replica set
//! and ISR, and a watch channel that wakes long-polling fetches and delayed produces when the
//! offsets move.
//!
//! Locking: the whole mutable state sits behind one `std::sync::Mutex`, held only for the
//! duration of one log call (append = one write(2), read = a few preads); it is never held across
//! an `.await`. Waiters never poll: they subscribe to [`PartitionOffsets`] updates, which are
//! published under the lock so they are seen in order.
//!
//! Replication (RF = 1 here): the leader is the whole ISR, so the HW moves to the LEO on every
//! append ([`Partition::append`]). A replicated leader instead advances the HW to the minimum LEO
//! over the ISR through [`Partition::advance_high_watermark`], which keeps the HW monotonic.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use crate::storage::producer_state::Verification;
use crate::storage::{Log, LogConfig, LogError, ProducerStamp, Record, StoredRecord};

/// Which records a fetch may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Only records below the high watermark (what Kafka consumers always see).
    Committed,
    /// Every record up to the log end offset, including records not yet replicated.
    Uncommitted,
    /// Only records below the last stable offset: Kafka's `read_committed`, which reads no
    /// record of a transaction still open.
    Stable,
}

/// The offsets of a partition at one moment, as published to waiters and reported by the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PartitionOffsets {
    /// First offset still in the log (moves with retention and delete-records).
    pub log_start_offset: u64,
    /// Offsets below it are committed: replicated to the whole ISR (RF = 1: equal to the LEO).
    pub high_watermark: u64,
    /// Next offset to be written (LEO).
    pub log_end_offset: u64,
    /// The last stable offset: the HW, or the first offset of the earliest transaction still
    /// open, if that is lower.
    pub last_stable_offset: u64,
    /// The leader epoch this replica currently serves.
    pub leader_epoch: u32,
}

impl PartitionOffsets {
    /// The end (exclusive) of what a fetch with `isolation` may return.
    pub fn visible_end(&self, isolation: Isolation) -> u64 {
        match isolation {
            Isolation::Committed => self.high_watermark,
            Isolation::Uncommitted => self.log_end_offset,
            Isolation::Stable => self.last_stable_offset,
        }
    }
}

/// Offsets assigned to an appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// The partition's offsets right after the append.
    pub offsets: PartitionOffsets,
    /// For an idempotent producer's retry of a batch the log holds, the original's largest
    /// record timestamp: nothing was appended, the offsets are the original's.
    pub duplicate: Option<i64>,
}

/// Why a leader append was refused.
#[derive(Debug)]
pub enum AppendError {
    /// acks=all and the ISR is smaller than `min.insync.replicas`: nothing was written.
    NotEnoughReplicas {
        /// Current ISR size.
        isr_size: usize,
        /// The topic's `min.insync.replicas`.
        min_insync_replicas: u16,
    },
    /// The log refused the batch or failed.
    Log(LogError),
}

impl From<LogError> for AppendError {
    fn from(error: LogError) -> AppendError {
        AppendError::Log(error)
    }
}

/// The mutable state of a replica, guarded by the partition's lock.
pub struct PartitionState {
    /// The replica's log on disk.
    pub log: Log,
    /// Committed offset: only grows while this replica leads (asserted).
    pub high_watermark: u64,
    /// Epoch of the current leader; stamped on appended batches.
    pub leader_epoch: u32,
    /// Broker ids holding a replica, leader first (RF = 1: this broker).
    pub replicas: Vec<u32>,
    /// Broker ids in sync with the leader (RF = 1: this broker).
    pub isr: Vec<u32>,
}

impl PartitionState {
    fn offsets(&self) -> PartitionOffsets {
        let unstable = self
            .log
            .producers()
            .first_unstable_offset(self.high_watermark);
        let offsets = PartitionOffsets {
            log_start_offset: self.log.log_start_offset(),
            high_watermark: self.high_watermark,
            log_end_offset: self.log.log_end_offset(),
            last_stable_offset: unstable.map_or(self.high_watermark, |first| {
                first.clamp(self.log.log_start_offset(), self.high_watermark)
            }),
            leader_epoch: self.leader_epoch,
        };
        assert!(
            offsets.log_start_offset <= offsets.high_watermark
                && offsets.high_watermark <= offsets.log_end_offset,
            "partition offsets out of order: {offsets:?}"
        );
        offsets
    }
}

/// A partition replica: log + HW + waiters.
pub struct Partition {
    /// Name of the topic the partition belongs to.
    pub topic: String,
    /// Index of the partition in its topic.
    pub partition: u32,
    /// Directory of the log, `<log.dir>/<topic>-<partition>` (Kafka's layout).
    pub dir: PathBuf,
    /// Log, HW, epoch, ISR: everything that changes together.
    state: Mutex<PartitionState>,
    /// The latest offsets, published after every change so long polls and delayed produces
    /// wake without polling.
    offsets: watch::Sender<PartitionOffsets>,
}

impl Partition {
    /// Opens (recovering after a crash) or creates the log in `dir`. With RF = 1 every record
    /// that survived recovery is committed, so the HW starts at the LEO.
    pub fn open(
        topic: &str,
        partition: u32,
        dir: &Path,
        config: LogConfig,
        broker_id: u32,
    ) -> Result<Partition, LogError> {
        let mut log = Log::open(dir, config)?;
        let leader_epoch = log.latest_epoch().unwrap_or(0);
        if log.latest_epoch().is_none() {
            let start = log.log_end_offset();
            log.assign_epoch(leader_epoch, start)?;
        }
        let state = PartitionState {
            high_watermark: log.log_end_offset(),
            log,
            leader_epoch,
            replicas: vec![broker_id],
            isr: vec![broker_id],
        };
        let (offsets, _) = watch::channel(state.offsets());
        Ok(Partition {
            topic: topic.to_string(),
            partition,
            dir: dir.to_path_buf(),
            state: Mutex::new(state),
            offsets,
        })
    }

    /// Locks the state for a short, synchronous operation. Replication builds its leader and
    /// follower paths on this; call [`Partition::publish`] after changing offsets.
    pub fn lock(&self) -> MutexGuard<'_, PartitionState> {
        self.state
            .lock()
            .expect("partition lock poisoned by a panic")
    }

    /// Publishes the offsets of `state` to waiters; call with the lock held so updates are ordered.
    pub fn publish(&self, state: &PartitionState) {
        self.offsets.send_replace(state.offsets());
    }

    /// A receiver of offset updates (replication's delayed produce also wakes on epoch changes).
    pub fn subscribe(&self) -> watch::Receiver<PartitionOffsets> {
        self.offsets.subscribe()
    }

    /// The latest published offsets (no lock taken).
    pub fn offsets(&self) -> PartitionOffsets {
        *self.offsets.borrow()
    }

    /// Leader append of `records` with the current leader epoch. With `min_insync_replicas`
    /// (acks=all) the append is refused while the ISR is smaller. RF = 1: the HW follows the LEO.
    pub fn append(
        &self,
        records: Vec<Record>,
        min_insync_replicas: Option<u16>,
    ) -> Result<Appended, AppendError> {
        self.append_from_producer(records, min_insync_replicas, None, Verification::Off)
    }

    /// [`Partition::append`] of an idempotent producer's batch (`producer`): a retry of a
    /// batch the log holds is answered with its offsets, a fenced epoch or a sequence out of
    /// order refused, and a transactional batch checked against `verification`
    /// ([`Log::append_verified`]).
    pub fn append_from_producer(
        &self,
        records: Vec<Record>,
        min_insync_replicas: Option<u16>,
        producer: Option<ProducerStamp>,
        verification: Verification,
    ) -> Result<Appended, AppendError> {
        let mut state = self.lock();
        if let Some(min_insync_replicas) = min_insync_replicas {
            if state.isr.len() < usize::from(min_insync_replicas) {
                return Err(AppendError::NotEnoughReplicas {
                    isr_size: state.isr.len(),
                    min_insync_replicas,
                });
            }
        }
        let epoch = state.leader_epoch;
        let appended = state
            .log
            .append_verified(records, epoch, producer, verification)?;
        let (base_offset, last_offset) = (appended.base_offset, appended.last_offset);
        let log_end_offset = state.log.log_end_offset();
        if appended.duplicate.is_some() {
            return Ok(Appended {
                base_offset,
                last_offset,
                offsets: state.offsets(),
                duplicate: appended.duplicate,
            });
        }
        assert_eq!(
            log_end_offset,
            last_offset + 1,
            "LEO must follow the appended batch"
        );
        if state.isr.len() == 1 {
            // This replica is the whole ISR: everything it has is replicated to the ISR.
            Self::advance_high_watermark(&mut state, log_end_offset);
        }
        let offsets = state.offsets();
        self.offsets.send_replace(offsets);
        Ok(Appended {
            base_offset,
            last_offset,
            offsets,
            duplicate: None,
        })
    }

    /// Moves the HW forward to `high_watermark` (never back, never past the LEO).
    pub fn advance_high_watermark(state: &mut PartitionState, high_watermark: u64) {
        let high_watermark = high_watermark.min(state.log.log_end_offset());
        if high_watermark > state.high_watermark {
            state.high_watermark = high_watermark;
            state.log.prune_completed_transactions(high_watermark);
        }
    }

    /// Records from `offset` up to about `max_bytes` (at least one record when any is visible),
    /// below the HW or the LEO depending on `isolation`, with the offsets at the time of the read.
    pub fn read(
        &self,
        offset: u64,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<(Vec<StoredRecord>, PartitionOffsets), LogError> {
        let state = self.lock();
        if state.log.is_deleted() {
            return Err(LogError::Deleted);
        }
        let offsets = state.offsets();
        let end = offsets.visible_end(isolation);
        if offset < offsets.log_start_offset || offset > offsets.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: offsets.log_start_offset,
                log_end_offset: offsets.log_end_offset,
            });
        }
        if offset >= end {
            // Between the HW and the LEO: valid, but nothing is visible yet.
            return Ok((Vec::new(), offsets));
        }
        let records = state.log.read(offset, max_bytes, end)?;
        Ok((records, offsets))
    }

    /// The aborted transactions whose records may lie in `[from, to)`, oldest first.
    pub fn aborted_transactions(
        &self,
        from: u64,
        to: u64,
    ) -> Vec<crate::storage::producer_state::AbortedTxn> {
        self.lock().log.producers().aborted_between(from, to)
    }

    /// Waits until a fetch at `offset` with `isolation` has something to return (or would fail
    /// with OFFSET_OUT_OF_RANGE), or `wait` has passed. Returns at once if that is already so.
    pub async fn wait_for_records(&self, offset: u64, isolation: Isolation, wait: Duration) {
        let mut updates = self.offsets.subscribe();
        let wake = |o: &PartitionOffsets| {
            offset < o.visible_end(isolation)
                || offset < o.log_start_offset
                || offset > o.log_end_offset
        };
        let _ = tokio::time::timeout(wait, updates.wait_for(wake)).await;
    }

    /// Waits until the HW is above `offset` (delayed produce with acks=all). Returns whether it
    /// got there within `wait`.
    pub async fn wait_for_high_watermark(&self, offset: u64, wait: Duration) -> bool {
        let mut updates = self.offsets.subscribe();
        let committed = |o: &PartitionOffsets| o.high_watermark > offset;
        let reached = tokio::time::timeout(wait, updates.wait_for(committed)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// DeleteRecords: moves the log start offset to `offset`, which must not pass the HW.
    /// Returns the new low watermark (log start offset).
    pub fn delete_records_before(&self, offset: u64) -> Result<u64, LogError> {
        let mut state = self.lock();
        if state.log.is_deleted() {
            return Err(LogError::Deleted);
        }
        if offset > state.high_watermark {
            return Err(LogError::InvalidOffset(format!(
                "offset {offset} is above the high watermark {}",
                state.high_watermark
            )));
        }
        let log_start_offset = if offset > state.log.log_start_offset() {
            state.log.delete_records_before(offset)?
        } else {
            state.log.log_start_offset()
        };
        self.publish(&state);
        Ok(log_start_offset)
    }

    /// Deletes segments past `retention.ms`/`retention.bytes` (never past the HW). Returns how
    /// many segments were deleted.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let mut state = self.lock();
        let high_watermark = state.high_watermark;
        let deleted = state.log.apply_retention(now_ms, high_watermark)?;
        if deleted > 0 {
            self.publish(&state);
        }
        Ok(deleted)
    }

    /// Marks the partition deleted (its topic is being deleted): an operation that got hold of
    /// it before the deletion and runs after this answers UNKNOWN_TOPIC_OR_PARTITION instead of
    /// touching the directory being removed. Waits for the operation in progress, if any.
    pub fn mark_deleted(&self) {
        self.lock().log.mark_deleted();
    }

    /// fsyncs the log (at shutdown, so a clean stop never needs recovery).
    pub fn flush(&self) -> Result<(), LogError> {
        self.lock().log.flush()
    }

    /// Size on disk and number of segments, for status and metrics.
    pub fn disk_usage(&self) -> (u64, usize) {
        let state = self.lock();
        (state.log.size_bytes(), state.log.segment_count())
    }

    /// Replica set and ISR, for metadata and status.
    pub fn replicas_and_isr(&self) -> (Vec<u32>, Vec<u32>) {
        let state = self.lock();
        (state.replicas.clone(), state.isr.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: &str) -> Record {
        Record {
            key: None,
            value: value.as_bytes().to_vec(),
            timestamp_ms: 0,
        }
    }

    fn open(dir: &Path) -> Partition {
        Partition::open("t", 0, dir, LogConfig::default(), 7).unwrap()
    }

    #[test]
    fn append_moves_hw_to_leo_with_a_single_replica() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let appended = partition
            .append(vec![record("a"), record("b")], None)
            .unwrap();
        assert_eq!((appended.base_offset, appended.last_offset), (0, 1));
        assert_eq!(appended.offsets.high_watermark, 2);
        assert_eq!(partition.offsets().log_end_offset, 2);
        let (records, _) = partition.read(1, 1 << 20, Isolation::Committed).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(
            (records[0].offset, records[0].value.as_slice()),
            (1, &b"b"[..])
        );
    }

    #[test]
    fn read_past_leo_is_out_of_range_and_at_leo_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        partition.append(vec![record("a")], None).unwrap();
        assert!(partition
            .read(1, 100, Isolation::Committed)
            .unwrap()
            .0
            .is_empty());
        let error = partition.read(2, 100, Isolation::Committed).unwrap_err();
        assert!(
            matches!(error, LogError::OffsetOutOfRange { offset: 2, .. }),
            "{error:?}"
        );
    }

    #[test]
    fn acks_all_append_needs_min_insync_replicas() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let error = partition.append(vec![record("a")], Some(2)).unwrap_err();
        assert!(matches!(
            error,
            AppendError::NotEnoughReplicas {
                isr_size: 1,
                min_insync_replicas: 2
            }
        ));
        assert_eq!(
            partition.offsets().log_end_offset,
            0,
            "nothing may be written"
        );
        partition.append(vec![record("a")], Some(1)).unwrap();
        assert_eq!(partition.offsets().log_end_offset, 1);
    }

    #[test]
    fn delete_records_never_passes_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        partition
            .append(vec![record("a"), record("b")], None)
            .unwrap();
        assert!(partition.delete_records_before(3).is_err());
        assert_eq!(partition.offsets().log_start_offset, 0);
        assert_eq!(partition.delete_records_before(1).unwrap(), 1);
        assert_eq!(partition.offsets().log_start_offset, 1);
    }

    #[test]
    fn a_deleted_partition_refuses_everything_as_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        partition.append(vec![record("a")], None).unwrap();
        partition.mark_deleted();
        std::fs::remove_dir_all(dir.path()).unwrap();
        assert!(matches!(
            partition.delete_records_before(1),
            Err(LogError::Deleted)
        ));
        assert!(matches!(
            partition.delete_records_before(0),
            Err(LogError::Deleted)
        ));
        assert!(matches!(
            partition.read(0, 100, Isolation::Committed),
            Err(LogError::Deleted)
        ));
        assert!(matches!(
            partition.append(vec![record("b")], None),
            Err(AppendError::Log(LogError::Deleted))
        ));
        assert_eq!(partition.apply_retention(i64::MAX).unwrap(), 0);
        partition.flush().unwrap();
    }

    #[tokio::test]
    async fn long_poll_wakes_on_append() {
        let dir = tempfile::tempdir().unwrap();
        let partition = std::sync::Arc::new(open(dir.path()));
        let waiter = {
            let partition = partition.clone();
            tokio::spawn(async move {
                partition
                    .wait_for_records(0, Isolation::Committed, Duration::from_secs(60))
                    .await;
                partition.offsets().high_watermark
            })
        };
        tokio::task::yield_now().await;
        partition.append(vec![record("a")], None).unwrap();
        // The waiter can only return early (well before 60 s) because the append woke it.
        let high_watermark = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("waiter not woken by the append")
            .unwrap();
        assert_eq!(high_watermark, 1);
    }

    #[tokio::test]
    async fn wait_for_high_watermark_reports_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        assert!(
            !partition
                .wait_for_high_watermark(0, Duration::from_millis(10))
                .await
        );
        partition.append(vec![record("a")], None).unwrap();
        assert!(
            partition
                .wait_for_high_watermark(0, Duration::from_millis(10))
                .await
        );
    }
}
