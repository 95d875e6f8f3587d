//! [`Log`]: one partition's log in its own directory.
//!
//! A partition directory holds:
//! - `<base offset, 20 digits>.log` and `.index` per segment (see [`super::segment`]);
//! - `log-start-offset-checkpoint`: the first readable offset (moved by retention and
//!   DeleteRecords);
//! - `recovery-point-offset-checkpoint`: every segment wholly below it was fsynced, so recovery
//!   does not need to verify it;
//! - `leader-epoch-checkpoint`: the leader-epoch cache (see [`super::epoch`]).
//!
//! The idempotent producers' state ([`super::producer_state`]) is not a file: it is rebuilt
//! from the batches' producer fields when the log opens and after a truncation, and follows
//! every append.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::batch::{self, BatchEncoder, BatchHeader};
use super::checkpoint::{self, sync_dir};
use super::epoch::LeaderEpochCache;
use super::producer_state::{ProducerCheck, ProducerStates, Verification};
use super::segment::{self, Segment};
use super::{Batch, LogConfig, LogError, ProducerStamp, Record, StoredRecord};

/// File name of the log start offset checkpoint inside a partition directory.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// File name of the recovery point checkpoint inside a partition directory.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Largest batch the log stores, whatever the config says: positions in the index are 32-bit.
const BATCH_BYTES_MAX: usize = i32::MAX as usize;

/// One partition's log: segments, offsets, leader-epoch cache. Not internally synchronised:
/// the broker wraps it in a lock per partition.
#[derive(Debug)]
pub struct Log {
    /// The partition directory; every file of this log lives directly in it.
    dir: PathBuf,
    /// Current settings; changes apply to later appends and retention runs.
    config: LogConfig,
    /// Segments by base offset. Never empty; the last one is the active segment.
    segments: BTreeMap<u64, Segment>,
    /// First readable offset; reads below it get OffsetOutOfRange.
    log_start_offset: u64,
    /// LEO: the offset the next appended record gets.
    log_end_offset: u64,
    /// Segments wholly below this offset were fsynced and are not verified on open.
    recovery_point: u64,
    /// Records appended since the last fsync, compared with `flush.messages`.
    unflushed_messages: u64,
    /// Epoch -> start offset, persisted in `leader-epoch-checkpoint`.
    epochs: LeaderEpochCache,
    /// Reused encoding buffer so an append does not allocate.
    scratch: Vec<u8>,
    /// Set when the partition's topic is deleted, before its directory goes: every later
    /// operation fails with [`LogError::Deleted`] instead of meeting a missing directory.
    deleted: bool,
    /// The idempotent producers with a batch in the log: what a leader dedupes and fences by.
    /// Rebuilt from the batches in the log when it opens and after a truncation, never
    /// persisted; kept when the log start moves, as Kafka keeps it (KIP-360).
    producers: ProducerStates,
}

/// What a leader append did with the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAppend {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// When the batch was a producer's retry of a batch the log holds: the original's largest
    /// record timestamp (Kafka answers it as `log_append_time_ms`). Nothing was written and
    /// the offsets are the original's.
    pub duplicate: Option<i64>,
}

/// Who writes a batch: the leader (from a producer, offsets assigned here) or a follower
/// (fetched from the leader, offsets kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Appender {
    Leader,
    Follower,
}

impl Log {
    /// Opens the log in `dir`, creating the directory and an empty log if needed. After an
    /// unclean stop it verifies every batch from the segment holding the recovery point on,
    /// cuts the log at the first torn or corrupt batch (deleting later segments), rebuilds the
    /// indexes of verified segments and brings the checkpoints in line with what is left.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log, LogError> {
        fs::create_dir_all(dir)?;
        let bases = scan_dir(dir)?;
        let (mut epochs, epochs_trusted) = load_epochs(dir);
        let loaded_epochs = epochs.entries().to_vec();
        let checkpointed_start =
            checkpoint::read_offset(&dir.join(LOG_START_OFFSET_CHECKPOINT))?.unwrap_or(0);
        // Without a trustworthy epoch checkpoint every segment is verified, which re-learns the
        // epochs from the batches; a damaged recovery point likewise means verifying all.
        let checkpointed_recovery =
            match checkpoint::read_offset(&dir.join(RECOVERY_POINT_CHECKPOINT)) {
                Ok(offset) if epochs_trusted => offset.unwrap_or(0),
                Ok(_) => 0,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), "ignoring recovery point checkpoint: {e}");
                    0
                }
            };

        let (segments, log_end_offset) = if bases.is_empty() {
            let segment = Segment::create(dir, checkpointed_start, config.index_interval_bytes)?;
            sync_dir(dir)?;
            (
                BTreeMap::from([(checkpointed_start, segment)]),
                checkpointed_start,
            )
        } else {
            recover_segments(dir, &bases, checkpointed_recovery, &config, &mut epochs)?
        };

        let first_base = *segments.keys().next().expect("a log has a segment");
        let log_start_offset = checkpointed_start.max(first_base).min(log_end_offset);
        let recovery_point = checkpointed_recovery.min(log_end_offset);
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            recovery_point,
            unflushed_messages: 0,
            epochs,
            scratch: Vec::new(),
            deleted: false,
            producers: ProducerStates::new(),
        };
        log.producers = log.rebuild_producers();
        if log_start_offset != checkpointed_start {
            log.save_log_start_offset()?;
        }
        if recovery_point != checkpointed_recovery {
            log.save_recovery_point()?;
        }
        log.epochs.truncate_from_end(log_end_offset);
        log.epochs.truncate_from_start(log_start_offset);
        if log.epochs.entries() != loaded_epochs.as_slice() || !epochs_trusted {
            log.epochs.save()?;
        }
        if log.config.recovery_cuts_at_checkpoint && recovery_point < log.log_end_offset {
            // Deliberate bug: the records past the checkpoint were verified above and are
            // valid (with flush.messages=1, fsynced), yet they are thrown away.
            log.truncate_to_inner(recovery_point.max(log.log_start_offset))?;
        }
        Ok(log)
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Current settings.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the settings (e.g. after a topic config change); applies from the next call.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Leader append: gives the records consecutive offsets from the LEO, stamps them with
    /// `leader_epoch` and writes them as one batch. Returns the first and last offset.
    pub fn append(
        &mut self,
        records: Vec<Record>,
        leader_epoch: u32,
    ) -> Result<(u64, u64), LogError> {
        let appended = self.append_from_producer(records, leader_epoch, None)?;
        Ok((appended.base_offset, appended.last_offset))
    }

    /// Leader append of a producer's batch: with an idempotent producer's `producer` stamp the
    /// batch is first checked against the producer's state ([`ProducerStates::check`]): a
    /// retry of a batch the log holds is answered with the original's offsets and not written
    /// again; a fenced epoch or a sequence out of order is refused with
    /// [`LogError::Producer`], nothing written.
    pub fn append_from_producer(
        &mut self,
        records: Vec<Record>,
        leader_epoch: u32,
        producer: Option<ProducerStamp>,
    ) -> Result<LogAppend, LogError> {
        self.append_verified(records, leader_epoch, producer, Verification::Off)
    }

    /// [`Log::append_from_producer`] of a client's produce under KIP-890's verification: a
    /// transactional batch that would open a transaction here needs the producer's current
    /// guard ([`ProducerStates::check_verification`]). A retry of a batch the log holds is
    /// still answered as a duplicate first, as Kafka's order of checks has it.
    pub fn append_verified(
        &mut self,
        records: Vec<Record>,
        leader_epoch: u32,
        producer: Option<ProducerStamp>,
        verification: Verification,
    ) -> Result<LogAppend, LogError> {
        self.ensure_live()?;
        if records.is_empty() {
            return Err(LogError::InvalidRecord(
                "a batch needs at least one record".into(),
            ));
        }
        if let Some(stamp) = producer {
            let count = u32::try_from(records.len()).unwrap_or(u32::MAX);
            let checked = self.producers.check(stamp, count);
            if !matches!(checked, Ok(ProducerCheck::Duplicate { .. })) {
                self.producers.check_verification(stamp, verification)?;
            }
            if let ProducerCheck::Duplicate {
                base_offset,
                last_offset,
                max_timestamp_ms,
            } = checked?
            {
                assert!(
                    last_offset < self.log_end_offset,
                    "a duplicate's original lies in the log"
                );
                return Ok(LogAppend {
                    base_offset,
                    last_offset,
                    duplicate: Some(max_timestamp_ms),
                });
            }
            if stamp.kind.control() {
                let epoch =
                    batch::control_coordinator_epoch(&records[0].value).ok_or_else(|| {
                        LogError::InvalidRecord(
                            "a marker's value holds its coordinator epoch".into(),
                        )
                    })?;
                self.producers.check_marker(stamp.producer_id, epoch)?;
            }
        }
        let size: usize = batch::header_len(producer)
            + records
                .iter()
                .map(|r| batch::record_size(r.key.as_deref(), &r.value))
                .sum::<usize>();
        let max = self.config.max_message_bytes.min(BATCH_BYTES_MAX as u64);
        if size as u64 > max {
            return Err(LogError::RecordTooLarge {
                size: size as u64,
                max,
            });
        }
        let base_offset = self.log_end_offset;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let mut encoder =
            BatchEncoder::with_producer(&mut scratch, base_offset, leader_epoch, producer);
        for record in &records {
            encoder.push(record.timestamp_ms, record.key.as_deref(), &record.value);
        }
        encoder.finish();
        let result = self.append_encoded(&scratch, Appender::Leader);
        self.scratch = scratch;
        result?;
        Ok(LogAppend {
            base_offset,
            last_offset: self.log_end_offset - 1,
            duplicate: None,
        })
    }

    /// Starts the verification of `producer_id`'s transactional batch here
    /// ([`ProducerStates::start_verification`]): the guard to append it with once the
    /// coordinator says the partition is in the producer's transaction, `None` when none is
    /// needed.
    pub fn start_verification(&mut self, producer_id: i64) -> Option<u64> {
        self.producers.start_verification(producer_id)
    }

    /// The producers' state as the log holds it now.
    pub fn producers(&self) -> &ProducerStates {
        &self.producers
    }

    /// Deliberate bug `idempotence.dedupe.forgotten`: the state of producers without an open
    /// transaction is dropped ([`ProducerStates::forget_idle`]).
    pub fn forget_idle_producers(&mut self) {
        self.producers.forget_idle();
    }

    /// Forgets the ended transactions whose markers the HW has passed (they no longer hold
    /// the last stable offset).
    pub fn prune_completed_transactions(&mut self, high_watermark: u64) {
        self.producers.prune_completed(high_watermark);
    }

    /// The producers' state of the batches from the log start to the LEO, read from the
    /// segments (every batch is CRC-checked on the way). Damaged data ends the rebuild with
    /// the batches before it, as it ends a read: the damage is served as an error to whoever
    /// reads it, and a producer whose batches lie past it starts again at any sequence.
    fn rebuild_producers(&self) -> ProducerStates {
        let mut producers = ProducerStates::new();
        let (start, end) = (self.log_start_offset, self.log_end_offset);
        if start >= end {
            return producers;
        }
        let chunk_hint = 1 << 20;
        for segment in self.segments_for(start, end) {
            let scanned = segment.scan_bytes_from(start, end, chunk_hint, |header, bytes| {
                let stamp = batch::producer_of(bytes, header)
                    .map_err(|e| LogError::Corrupt(format!("verified batch: {e:?}")))?;
                if let Some(stamp) = stamp {
                    producers.record(
                        stamp,
                        header.record_count,
                        header.base_offset,
                        header.max_timestamp_ms,
                    );
                    if let Some(epoch) = batch::marker_coordinator_epoch(bytes, header) {
                        producers.note_marker(stamp.producer_id, epoch);
                    }
                }
                Ok(true)
            });
            if let Err(error) = scanned {
                tracing::warn!(dir = %self.dir.display(),
                    "producer state rebuilt only up to damaged data: {error}");
                break;
            }
        }
        producers
    }

    /// Follower append: batches fetched from the leader, keeping their offsets and epochs. The
    /// first batch must start at the LEO and the batches must follow on from each other; all
    /// batches are checked before any is written.
    pub fn append_batches(&mut self, batches: &[Batch]) -> Result<(), LogError> {
        self.ensure_live()?;
        let mut expected = self.log_end_offset;
        let mut epoch_floor = self.epochs.latest_epoch().unwrap_or(0);
        for batch in batches {
            validate_replicated_batch(batch, expected, epoch_floor)?;
            expected = batch.next_offset();
            epoch_floor = batch.leader_epoch;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut result = Ok(());
        for batch in batches {
            scratch.clear();
            batch::encode(&mut scratch, batch);
            result = self.append_encoded(&scratch, Appender::Follower);
            if result.is_err() {
                break;
            }
        }
        self.scratch = scratch;
        result
    }

    /// Follower append of batches as the leader sent them (`bytes`: whole encoded batches, back
    /// to back), written verbatim without decoding. Same rules as [`Log::append_batches`]: every
    /// batch is verified (CRC-32C, record layout) and must follow on from the LEO without going
    /// back in leader epoch, all before anything is written. Returns the number of batches.
    pub fn append_batch_bytes(&mut self, bytes: &[u8]) -> Result<usize, LogError> {
        self.ensure_live()?;
        let mut expected = self.log_end_offset;
        let mut epoch_floor = self.epochs.latest_epoch().unwrap_or(0);
        let mut lengths = Vec::new();
        let mut position = 0;
        while position < bytes.len() {
            let header = batch::verify(&bytes[position..]).map_err(|e| {
                LogError::InvalidRecord(format!(
                    "replicated batch at byte {position} (after offset {expected}): {e:?}"
                ))
            })?;
            if header.base_offset != expected {
                return Err(LogError::InvalidOffset(format!(
                    "batch starts at {}, expected {expected}",
                    header.base_offset
                )));
            }
            if header.total_len > BATCH_BYTES_MAX {
                return Err(LogError::RecordTooLarge {
                    size: header.total_len as u64,
                    max: BATCH_BYTES_MAX as u64,
                });
            }
            if header.leader_epoch < epoch_floor {
                return Err(LogError::InvalidRecord(format!(
                    "batch at offset {} has leader epoch {}, below {epoch_floor}",
                    header.base_offset, header.leader_epoch
                )));
            }
            expected = header.next_offset();
            epoch_floor = header.leader_epoch;
            lengths.push(header.total_len);
            position += header.total_len;
        }
        let mut position = 0;
        for &length in &lengths {
            self.append_encoded(&bytes[position..position + length], Appender::Follower)?;
            position += length;
        }
        Ok(lengths.len())
    }

    /// Writes one encoded batch whose base offset is the LEO: rolls if needed, records a new
    /// leader epoch, writes, and fsyncs when `flush.messages` records are unflushed.
    fn append_encoded(&mut self, bytes: &[u8], appender: Appender) -> Result<(), LogError> {
        let result = self.write_encoded(bytes, appender);
        self.logged("append", result)
    }

    fn write_encoded(&mut self, bytes: &[u8], appender: Appender) -> Result<(), LogError> {
        let header = BatchHeader::parse(bytes).expect("freshly encoded batch");
        assert_eq!(
            header.base_offset, self.log_end_offset,
            "appends start at the LEO"
        );
        if let Some(latest) = self.epochs.latest_epoch() {
            if header.leader_epoch < latest {
                return Err(LogError::InvalidRecord(format!(
                    "leader epoch {} is below the latest epoch {latest} of this log",
                    header.leader_epoch
                )));
            }
        }
        let producer = batch::producer_of(bytes, &header)
            .map_err(|e| LogError::InvalidRecord(format!("producer fields: {e:?}")))?;
        self.maybe_roll(header.total_len as u64, header.next_offset())?;
        if self
            .epochs
            .assign(header.leader_epoch, header.base_offset)?
        {
            self.epochs.save()?;
        }
        let interval = self.config.index_interval_bytes;
        self.active_mut().append(&header, bytes, interval)?;
        self.log_end_offset = header.next_offset();
        if let Some(stamp) = producer {
            self.producers.record(
                stamp,
                header.record_count,
                header.base_offset,
                header.max_timestamp_ms,
            );
            if let Some(epoch) = batch::marker_coordinator_epoch(bytes, &header) {
                self.producers.note_marker(stamp.producer_id, epoch);
            }
        }
        // Deliberate bug `follower.flush.uncounted`: a follower's appends are not counted
        // toward `flush.messages`, so a follower fsyncs only when it rolls or flushes.
        if !(appender == Appender::Follower && self.config.follower_appends_uncounted) {
            self.unflushed_messages += u64::from(header.record_count);
        }
        if self.unflushed_messages >= self.config.flush_messages {
            // The recovery point is only checkpointed by flush(): fsyncing a checkpoint per
            // append would double the cost, and a stale one only widens recovery.
            self.active().sync()?;
            self.recovery_point = self.log_end_offset;
            self.unflushed_messages = 0;
        }
        Ok(())
    }

    /// Rolls a new segment when the batch would overflow the active one (by size, or by the
    /// 32-bit relative offsets of the index). The finished segment is sealed and fsynced, and
    /// the recovery point moves to the new segment.
    ///
    /// A roll that fails (out of file descriptors, say) changes nothing: the new segment's
    /// files are removed again and the old segment stays active, so the append is refused
    /// with [`LogError::Roll`] and the next one retries the roll.
    fn maybe_roll(&mut self, batch_len: u64, next_offset: u64) -> Result<(), LogError> {
        let active = self.active();
        let limit = self.config.segment_bytes.min(u64::from(u32::MAX));
        let full = active.size_bytes() > 0 && active.size_bytes() + batch_len > limit;
        let offsets_overflow = next_offset - 1 - active.base_offset > u64::from(u32::MAX);
        if !full && !offsets_overflow {
            return Ok(());
        }
        let base_offset = self.log_end_offset;
        let segment = self
            .start_segment(base_offset)
            .map_err(|source| LogError::Roll {
                base_offset,
                source,
            })?;
        self.segments.insert(base_offset, segment);
        self.recovery_point = base_offset;
        // The roll is done: failing the append now would leave the producer unsure whether
        // it was written. A stale recovery point on disk only widens the next recovery.
        if let Err(e) = self.save_recovery_point() {
            tracing::warn!(dir = %self.dir.display(), "saving the recovery point after a roll: {e}");
        }
        Ok(())
    }

    /// The new segment of a roll at `base_offset`, its files created and made durable and the
    /// active segment sealed; on failure, nothing of the new segment is left on disk.
    fn start_segment(&mut self, base_offset: u64) -> std::io::Result<Segment> {
        let interval = self.config.index_interval_bytes;
        let segment = Segment::create(&self.dir, base_offset, interval).map_err(into_io)?;
        // Sealing last: a seal that fails leaves the active segment appendable (see seal).
        let ready =
            sync_dir(&self.dir).and_then(|()| self.active_mut().seal(base_offset).map_err(into_io));
        match ready {
            Ok(()) => Ok(segment),
            Err(error) => {
                if let Err(e) = segment.delete() {
                    tracing::warn!(dir = %self.dir.display(), "removing the unfinished segment {base_offset}: {e}");
                }
                Err(error)
            }
        }
    }

    /// Records with offsets in [`offset`, `max_offset`), about `max_bytes` of them (at least one
    /// record if there is any). `offset` below the log start or above the LEO is
    /// OffsetOutOfRange; `offset` equal to the LEO gives nothing.
    pub fn read(
        &self,
        offset: u64,
        max_bytes: usize,
        max_offset: u64,
    ) -> Result<Vec<StoredRecord>, LogError> {
        self.ensure_live()?;
        let batches = self.collect(offset, max_bytes, max_offset, false);
        let batches = self.logged("read", batches)?;
        Ok(batches.into_iter().flat_map(|b| b.records).collect())
    }

    /// Like [`Log::read`], as whole batches (for replication): the first batch is cut to start
    /// at `offset` and the last to end before `max_offset`, offsets and epochs preserved.
    pub fn read_batches(
        &self,
        offset: u64,
        max_bytes: usize,
        max_offset: u64,
    ) -> Result<Vec<Batch>, LogError> {
        self.ensure_live()?;
        let batches = self.collect(offset, max_bytes, max_offset, true);
        self.logged("read", batches)
    }

    /// Like [`Log::read_batches`], as the batches' encoded bytes back to back (what a follower
    /// fetch sends): batches wholly inside the range are copied from the segment as stored
    /// (CRC-checked, not decoded); only a first batch starting before `offset` or a last one
    /// reaching past `max_offset` is decoded, cut and re-encoded. Same batches and bytes as
    /// encoding the result of [`Log::read_batches`].
    pub fn read_batch_bytes(
        &self,
        offset: u64,
        max_bytes: usize,
        max_offset: u64,
    ) -> Result<Vec<u8>, LogError> {
        self.ensure_live()?;
        let result = self.collect_bytes(offset, max_bytes, max_offset);
        self.logged("read", result)
    }

    fn collect_bytes(
        &self,
        offset: u64,
        max_bytes: usize,
        max_offset: u64,
    ) -> Result<Vec<u8>, LogError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        let end_offset = max_offset.min(self.log_end_offset);
        let mut out = Vec::new();
        if offset >= end_offset {
            return Ok(out);
        }
        let mut full = false;
        let mut order = BatchOrder::starting_at(offset);
        let chunk_hint = max_bytes.saturating_add(self.config.index_interval_bytes as usize);
        for segment in self.segments_for(offset, end_offset) {
            let scanned =
                segment.scan_bytes_from(offset, end_offset, chunk_hint, |header, bytes| {
                    order.check(header.base_offset, header.next_offset())?;
                    let start = out.len();
                    if header.base_offset >= offset && header.next_offset() <= end_offset {
                        out.extend_from_slice(bytes);
                    } else {
                        let (mut cut, _) = batch::decode(bytes)
                            .map_err(|e| LogError::Corrupt(format!("verified batch: {e:?}")))?;
                        trim_batch(&mut cut, offset, end_offset);
                        batch::encode(&mut out, &cut);
                    }
                    if start > 0 && out.len() > max_bytes {
                        out.truncate(start);
                        full = true;
                        return Ok(false);
                    }
                    full |= out.len() >= max_bytes;
                    Ok(!full)
                });
            if let Err(error) = scanned {
                return self.prefix_before_damage(&order, out, error);
            }
            if full {
                break;
            }
        }
        order.check_found()?;
        Ok(out)
    }

    fn collect(
        &self,
        offset: u64,
        max_bytes: usize,
        max_offset: u64,
        whole_batches: bool,
    ) -> Result<Vec<Batch>, LogError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        let end_offset = max_offset.min(self.log_end_offset);
        let mut out: Vec<Batch> = Vec::new();
        if offset >= end_offset {
            return Ok(out);
        }
        let mut bytes = 0usize;
        let mut full = false;
        let mut order = BatchOrder::starting_at(offset);
        // Enough to cover the distance from an index entry plus what the caller wants.
        let chunk_hint = max_bytes.saturating_add(self.config.index_interval_bytes as usize);
        for segment in self.segments_for(offset, end_offset) {
            let scanned = segment.scan_from(offset, end_offset, chunk_hint, |mut batch| {
                order.check(batch.base_offset, batch.next_offset())?;
                trim_batch(&mut batch, offset, end_offset);
                if whole_batches {
                    let size = batch_size(&batch);
                    if !out.is_empty() && bytes + size > max_bytes {
                        full = true;
                        return Ok(false);
                    }
                    bytes += size;
                    out.push(batch);
                } else {
                    let mut fitting = 0;
                    for record in &batch.records {
                        let size = batch::record_size(record.key.as_deref(), &record.value);
                        if (!out.is_empty() || fitting > 0) && bytes + size > max_bytes {
                            full = true;
                            break;
                        }
                        bytes += size;
                        fitting += 1;
                    }
                    batch.records.truncate(fitting);
                    if fitting > 0 {
                        out.push(batch);
                    }
                }
                full |= bytes >= max_bytes;
                Ok(!full)
            });
            if let Err(error) = scanned {
                return self.prefix_before_damage(&order, out, error);
            }
            if full {
                break;
            }
        }
        order.check_found()?;
        Ok(out)
    }

    /// A read that met damaged data (or an I/O error) after it had collected good batches
    /// answers those, so a consumer gets every record up to the damage and the error only when
    /// it asks for the damaged offset itself. A read that collected nothing fails.
    fn prefix_before_damage<T>(
        &self,
        order: &BatchOrder,
        collected: T,
        error: LogError,
    ) -> Result<T, LogError> {
        if !order.started {
            return Err(error);
        }
        tracing::warn!(dir = %self.dir.display(), next_offset = order.next,
            "read stopped at a failure, answering the records before it: {error}");
        Ok(collected)
    }

    /// The segments a read of [`offset`, `end_offset`) goes through, in order: from the one
    /// holding `offset` to the last one starting below `end_offset`.
    fn segments_for(&self, offset: u64, end_offset: u64) -> impl Iterator<Item = &Segment> {
        let first_base = *self
            .segments
            .range(..=offset)
            .next_back()
            .expect("segment covers log start")
            .0;
        self.segments
            .range(first_base..end_offset)
            .map(|(_, segment)| segment)
    }

    /// Logs a storage failure (I/O error, damaged data) where it happens, with the partition
    /// directory, so a full disk or a damaged segment shows in the broker's log and not only
    /// in the answer to one client.
    fn logged<T>(&self, operation: &str, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(error @ (LogError::Io(_) | LogError::Corrupt(_) | LogError::Roll { .. })) =
            &result
        {
            tracing::warn!(dir = %self.dir.display(), "log {operation} failed: {error}");
        }
        result
    }

    /// Marks the log as belonging to a deleted partition (called under the partition lock,
    /// before the directory is removed): later operations fail with [`LogError::Deleted`],
    /// background ones (retention, flush) do nothing.
    pub fn mark_deleted(&mut self) {
        self.deleted = true;
    }

    /// Whether [`Log::mark_deleted`] was called.
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    fn ensure_live(&self) -> Result<(), LogError> {
        if self.deleted {
            return Err(LogError::Deleted);
        }
        Ok(())
    }

    /// LEO: the offset the next record will get.
    pub fn log_end_offset(&self) -> u64 {
        self.log_end_offset
    }

    /// The first readable offset.
    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }

    /// Removes every record at or above `offset` (follower truncation) and the epoch cache
    /// entries starting there. A batch straddling `offset` keeps its records below it. An
    /// `offset` below the log start empties the log, which then starts at `offset`.
    pub fn truncate_to(&mut self, offset: u64) -> Result<(), LogError> {
        self.ensure_live()?;
        let result = self.truncate_to_inner(offset);
        self.logged("truncation", result)
    }

    fn truncate_to_inner(&mut self, offset: u64) -> Result<(), LogError> {
        if offset >= self.log_end_offset {
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        if self.recovery_point > offset {
            // Lowered first, so that data rewritten below the old point is verified after a crash.
            self.recovery_point = offset;
            self.save_recovery_point()?;
        }
        let later: Vec<u64> = self
            .segments
            .range(offset + 1..)
            .map(|(&base, _)| base)
            .collect();
        for base in later.into_iter().rev() {
            self.segments
                .remove(&base)
                .expect("listed segment")
                .delete()?;
        }
        let straddling = self.active_mut().truncate_to(offset)?;
        self.log_end_offset = match &straddling {
            Some(batch) => batch.base_offset,
            None => offset,
        };
        if let Some(batch) = straddling {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            batch::encode(&mut scratch, &batch);
            let header = BatchHeader::parse(&scratch).expect("freshly encoded batch");
            let interval = self.config.index_interval_bytes;
            let result = self.active_mut().append(&header, &scratch, interval);
            self.scratch = scratch;
            result?;
            self.log_end_offset = header.next_offset();
        }
        assert_eq!(
            self.log_end_offset, offset,
            "truncation ends exactly at the target"
        );
        if self.epochs.truncate_from_end(offset) {
            self.epochs.save()?;
        }
        // Kafka reloads the producers' state after a truncation; here it is rebuilt from what
        // is left, so a follower forgets the batches it lost with the truncated suffix.
        let rebuilt = self.rebuild_producers();
        self.producers = ProducerStates::keep_verifications_of(rebuilt, &self.producers);
        Ok(())
    }

    fn truncate_fully_and_start_at(&mut self, offset: u64) -> Result<(), LogError> {
        self.recovery_point = offset;
        self.save_recovery_point()?;
        self.log_start_offset = offset;
        self.save_log_start_offset()?;
        let bases: Vec<u64> = self.segments.keys().copied().collect();
        for base in bases.into_iter().rev() {
            self.segments
                .remove(&base)
                .expect("listed segment")
                .delete()?;
        }
        let interval = self.config.index_interval_bytes;
        self.segments
            .insert(offset, Segment::create(&self.dir, offset, interval)?);
        sync_dir(&self.dir)?;
        self.log_end_offset = offset;
        if self.epochs.clear() {
            self.epochs.save()?;
        }
        self.producers = ProducerStates::new();
        Ok(())
    }

    /// Moves the log start offset forward to `offset` (DeleteRecords; the caller checks it is
    /// <= HW), persists it, trims the epoch cache and deletes segments wholly below it.
    /// Returns the new log start offset (unchanged if `offset` is not above it).
    pub fn delete_records_before(&mut self, offset: u64) -> Result<u64, LogError> {
        self.ensure_live()?;
        if offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        if offset > self.log_start_offset {
            let result = self.advance_log_start_offset(offset).and_then(|()| {
                let start = self.log_start_offset;
                self.delete_oldest_segments_while(start, |_, next_base| next_base <= start)
            });
            self.logged("delete-records", result)?;
        }
        Ok(self.log_start_offset)
    }

    /// Deletes whole segments, oldest first: those wholly below the log start offset, those
    /// whose newest record is older than `retention.ms`, and while the log stays at least
    /// `retention.bytes` large without them. Never the active segment, never a segment holding
    /// an offset >= `hw`. Returns how many segments were deleted.
    pub fn apply_retention(&mut self, now_ms: i64, hw: u64) -> Result<usize, LogError> {
        if self.deleted {
            return Ok(0);
        }
        let start = self.log_start_offset;
        let mut deleted =
            self.delete_oldest_segments_while(hw, |_, next_base| next_base <= start)?;
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            deleted += self.delete_oldest_segments_while(hw, |segment, _| {
                segment
                    .max_timestamp_ms()
                    .is_some_and(|ts| now_ms.saturating_sub(ts) > retention_ms)
            })?;
        }
        if let Ok(retention_bytes) = u64::try_from(self.config.retention_bytes) {
            let mut excess = self.size_bytes().saturating_sub(retention_bytes);
            deleted += self.delete_oldest_segments_while(hw, |segment, _| {
                let fits = excess >= segment.size_bytes();
                if fits {
                    excess -= segment.size_bytes();
                }
                fits
            })?;
        }
        Ok(deleted)
    }

    /// Deletes the longest prefix of non-active segments that lie wholly below `hw` and satisfy
    /// `deletable(segment, next segment's base offset)`.
    fn delete_oldest_segments_while(
        &mut self,
        hw: u64,
        mut deletable: impl FnMut(&Segment, u64) -> bool,
    ) -> Result<usize, LogError> {
        let mut doomed = Vec::new();
        let mut next_bases = self.segments.keys().skip(1);
        for (&base, segment) in &self.segments {
            let Some(&next_base) = next_bases.next() else {
                break;
            };
            if next_base > hw || !deletable(segment, next_base) {
                break;
            }
            doomed.push((base, next_base));
        }
        let Some(&(_, new_first_base)) = doomed.last() else {
            return Ok(0);
        };
        // The checkpoint moves before files go: after a crash in between, the leftover segments
        // are below the log start and get deleted by the next retention run.
        if new_first_base > self.log_start_offset {
            self.advance_log_start_offset(new_first_base)?;
        }
        for &(base, _) in &doomed {
            self.segments
                .remove(&base)
                .expect("listed segment")
                .delete()?;
        }
        Ok(doomed.len())
    }

    fn advance_log_start_offset(&mut self, offset: u64) -> Result<(), LogError> {
        assert!(offset > self.log_start_offset && offset <= self.log_end_offset);
        self.log_start_offset = offset;
        self.save_log_start_offset()?;
        self.producers.drop_aborted_below(offset);
        if self.epochs.truncate_from_start(offset) {
            self.epochs.save()?;
        }
        Ok(())
    }

    /// Fsyncs the active segment and the directory, then checkpoints the recovery point at the
    /// LEO so the next open does not verify what is now durable.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if self.deleted {
            return Ok(());
        }
        self.active().sync()?;
        sync_dir(&self.dir)?;
        self.unflushed_messages = 0;
        self.recovery_point = self.log_end_offset;
        self.save_recovery_point()
    }

    /// Bytes of batches in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size_bytes).sum()
    }

    /// Number of segments (at least 1).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The leader-epoch cache.
    pub fn epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// Records that `epoch` starts at `start_offset` (a new leader calls this with its LEO) and
    /// persists the cache. `start_offset` above the LEO or an epoch below the latest is refused.
    pub fn assign_epoch(&mut self, epoch: u32, start_offset: u64) -> Result<(), LogError> {
        self.ensure_live()?;
        if start_offset > self.log_end_offset {
            return Err(LogError::InvalidOffset(format!(
                "epoch {epoch} cannot start at {start_offset}, beyond the log end {}",
                self.log_end_offset
            )));
        }
        if self.epochs.assign(epoch, start_offset)? {
            let saved = self.epochs.save();
            self.logged("leader-epoch checkpoint", saved)?;
        }
        Ok(())
    }

    /// OffsetsForLeaderEpoch (KIP-101/KIP-279): the largest known epoch <= `epoch` and its end
    /// offset (start of the next known epoch, or the LEO). `None` if no known epoch is <= `epoch`.
    pub fn end_offset_for_epoch(&self, epoch: u32) -> Option<(u32, u64)> {
        self.epochs.end_offset_for(epoch, self.log_end_offset)
    }

    /// The newest leader epoch in the cache.
    pub fn latest_epoch(&self) -> Option<u32> {
        self.epochs.latest_epoch()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log has a segment")
    }

    fn out_of_range(&self, offset: u64) -> LogError {
        LogError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }
    }

    fn save_log_start_offset(&self) -> Result<(), LogError> {
        checkpoint::write_offset(
            &self.dir.join(LOG_START_OFFSET_CHECKPOINT),
            self.log_start_offset,
        )?;
        Ok(())
    }

    fn save_recovery_point(&self) -> Result<(), LogError> {
        checkpoint::write_offset(
            &self.dir.join(RECOVERY_POINT_CHECKPOINT),
            self.recovery_point,
        )?;
        Ok(())
    }
}

/// Loads the leader-epoch checkpoint; the flag says whether it existed and was readable. A
/// missing or damaged one starts empty (recovery then re-learns the epochs from the batches).
fn load_epochs(dir: &Path) -> (LeaderEpochCache, bool) {
    let exists = dir.join(super::epoch::LEADER_EPOCH_CHECKPOINT).exists();
    match LeaderEpochCache::load(dir) {
        Ok(cache) => (cache, exists),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "ignoring leader-epoch checkpoint: {e}");
            (LeaderEpochCache::empty(dir), false)
        }
    }
}

/// Lists segment base offsets in `dir` (sorted), removing leftovers of interrupted operations:
/// temporary checkpoint files and index files without a log file.
/// The I/O error inside a storage error (a roll only meets I/O errors).
fn into_io(error: LogError) -> std::io::Error {
    match error {
        LogError::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

fn scan_dir(dir: &Path) -> Result<Vec<u64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".tmp") {
            fs::remove_file(dir.join(name))?;
        } else if let Some(base) = parse_segment_name(name, ".log") {
            logs.push(base);
        } else if let Some(base) = parse_segment_name(name, ".index") {
            indexes.push(base);
        }
    }
    logs.sort_unstable();
    for base in indexes {
        if logs.binary_search(&base).is_err() {
            fs::remove_file(dir.join(segment::index_file_name(base)))?;
        }
    }
    Ok(logs)
}

fn parse_segment_name(name: &str, extension: &str) -> Option<u64> {
    let digits = name.strip_suffix(extension)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Opens the segments: those wholly below the recovery point as trusted, the rest verified in
/// order (the one holding the recovery point from its last index entry at or below it). Stops at the first segment that had to be cut or that does not end where the next one
/// begins, and deletes every segment after it. Rebuilds the epoch cache entries of the verified
/// range from the batches. Returns the segments and the LEO.
fn recover_segments(
    dir: &Path,
    bases: &[u64],
    recovery_point: u64,
    config: &LogConfig,
    epochs: &mut LeaderEpochCache,
) -> Result<(BTreeMap<u64, Segment>, u64), LogError> {
    let first_verified = bases
        .partition_point(|&base| base <= recovery_point)
        .saturating_sub(1);
    let mut segments = BTreeMap::new();
    for &base in &bases[..first_verified] {
        segments.insert(
            base,
            Segment::open_trusted(dir, base, config.index_interval_bytes)?,
        );
    }
    let mut log_end_offset = bases[first_verified];
    let mut kept = bases.len();
    for (i, &base) in bases.iter().enumerate().skip(first_verified) {
        let interval = config.index_interval_bytes;
        let (segment, verified) = Segment::open_verified(dir, base, interval, recovery_point)?;
        segments.insert(base, segment);
        // Epochs starting in the verified range are re-learnt from its batches.
        epochs.truncate_from_end(verified.verified_from);
        for &(epoch, start_offset) in &verified.epoch_starts {
            if let Err(e) = epochs.assign(epoch, start_offset) {
                tracing::warn!(dir = %dir.display(), "ignoring batch epoch during recovery: {e}");
            }
        }
        log_end_offset = verified.next_offset;
        if let Some((position, why)) = &verified.truncated {
            tracing::warn!(dir = %dir.display(), segment = base, position, "cut log at bad batch: {why}");
            kept = i + 1;
            break;
        }
        if let Some(&next_base) = bases.get(i + 1) {
            if next_base != verified.next_offset {
                tracing::warn!(dir = %dir.display(), segment = base, next_base,
                    end = verified.next_offset, "segment does not end where the next begins");
                kept = i + 1;
                break;
            }
        }
    }
    for &base in bases[kept..].iter().rev() {
        fs::remove_file(dir.join(segment::log_file_name(base)))?;
        let _ = fs::remove_file(dir.join(segment::index_file_name(base)));
    }
    Ok((segments, log_end_offset))
}

/// Checks a batch fetched from the leader before anything is written.
fn validate_replicated_batch(
    batch: &Batch,
    expected_base: u64,
    epoch_floor: u32,
) -> Result<(), LogError> {
    if batch.base_offset != expected_base {
        return Err(LogError::InvalidOffset(format!(
            "batch starts at {}, expected {expected_base}",
            batch.base_offset
        )));
    }
    if batch.records.is_empty() {
        return Err(LogError::InvalidRecord(format!(
            "empty batch at offset {}",
            batch.base_offset
        )));
    }
    let size = batch_size(batch);
    if size > BATCH_BYTES_MAX {
        return Err(LogError::RecordTooLarge {
            size: size as u64,
            max: BATCH_BYTES_MAX as u64,
        });
    }
    if batch.leader_epoch < epoch_floor {
        return Err(LogError::InvalidRecord(format!(
            "batch at offset {} has leader epoch {}, below {epoch_floor}",
            batch.base_offset, batch.leader_epoch
        )));
    }
    for (i, record) in batch.records.iter().enumerate() {
        if record.offset != batch.base_offset + i as u64
            || record.leader_epoch != batch.leader_epoch
        {
            return Err(LogError::InvalidRecord(format!(
                "record {i} of the batch at {} has offset {} and epoch {}",
                batch.base_offset, record.offset, record.leader_epoch
            )));
        }
    }
    Ok(())
}

/// What a read checks about the batches it returns, whatever the index and the headers it
/// skipped said: the first one holds the requested offset and each later one starts where the
/// one before ended (also across segments). A damaged length, count, base offset or index entry
/// would otherwise make a read return later records as if they were the ones asked for.
struct BatchOrder {
    /// The offset the next batch must hold (the first) or start at (every later one).
    next: u64,
    /// Whether a batch was seen yet.
    started: bool,
}

impl BatchOrder {
    fn starting_at(offset: u64) -> BatchOrder {
        BatchOrder {
            next: offset,
            started: false,
        }
    }

    /// Checks the batch of offsets [`base_offset`, `next_offset`) and moves past it.
    fn check(&mut self, base_offset: u64, next_offset: u64) -> Result<(), LogError> {
        let in_order = if self.started {
            base_offset == self.next
        } else {
            base_offset <= self.next && self.next < next_offset
        };
        if !in_order {
            return Err(LogError::Corrupt(format!(
                "expected a batch {} offset {}, found one at offsets {base_offset}..{next_offset}",
                if self.started {
                    "starting at"
                } else {
                    "holding"
                },
                self.next
            )));
        }
        self.started = true;
        self.next = next_offset;
        Ok(())
    }

    /// At the end of a read of a non-empty range: fails if no batch held the first offset.
    fn check_found(&self) -> Result<(), LogError> {
        if self.started {
            return Ok(());
        }
        Err(LogError::Corrupt(format!(
            "no batch holds offset {}",
            self.next
        )))
    }
}

/// Drops the records of `batch` outside [`from`, `to`).
fn trim_batch(batch: &mut Batch, from: u64, to: u64) {
    let keep_end = to
        .saturating_sub(batch.base_offset)
        .min(batch.records.len() as u64) as usize;
    batch.records.truncate(keep_end);
    let skip = from
        .saturating_sub(batch.base_offset)
        .min(batch.records.len() as u64) as usize;
    batch.records.drain(..skip);
    batch.base_offset = batch.base_offset.max(from);
    // A batch cut at its front starts at a later record, and so at that record's sequence.
    if let Some(first) = batch.records.first() {
        batch.producer = first.producer;
    }
}

/// Encoded size of a batch, for `max_bytes` accounting.
fn batch_size(batch: &Batch) -> usize {
    batch::header_len(batch.producer)
        + batch
            .records
            .iter()
            .map(|r| batch::record_size(r.key.as_deref(), &r.value))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::HEADER_LEN;
    use crate::storage::producer_state::ProducerError;
    use crate::storage::EpochEntry;
    use std::os::unix::fs::FileExt;

    fn record(value: &str, timestamp_ms: i64) -> Record {
        Record {
            key: Some(b"k".to_vec()),
            value: value.as_bytes().to_vec(),
            timestamp_ms,
        }
    }

    fn values(records: &[StoredRecord]) -> Vec<(u64, String)> {
        records
            .iter()
            .map(|r| (r.offset, String::from_utf8(r.value.clone()).unwrap()))
            .collect()
    }

    fn small_config() -> LogConfig {
        LogConfig {
            segment_bytes: 300,
            index_interval_bytes: 100,
            ..LogConfig::default()
        }
    }

    /// Appends `count` one-record batches "v<offset>" with timestamp 1000 + offset.
    fn fill(log: &mut Log, count: u64, epoch: u32) {
        for _ in 0..count {
            let offset = log.log_end_offset();
            let (base, last) = log
                .append(
                    vec![record(&format!("v{offset}"), 1000 + offset as i64)],
                    epoch,
                )
                .unwrap();
            assert_eq!((base, last), (offset, offset));
        }
    }

    fn read_all(log: &Log) -> Vec<(u64, String)> {
        values(
            &log.read(log.log_start_offset(), usize::MAX, u64::MAX)
                .unwrap(),
        )
    }

    fn expected(range: std::ops::Range<u64>) -> Vec<(u64, String)> {
        range.map(|o| (o, format!("v{o}"))).collect()
    }

    fn segment_path(dir: &Path, base: u64) -> PathBuf {
        dir.join(segment::log_file_name(base))
    }

    fn stamp(producer_id: i64, producer_epoch: i16, sequence: i32) -> ProducerStamp {
        ProducerStamp {
            producer_id,
            producer_epoch,
            sequence,
            kind: crate::storage::StampKind::Idempotent,
        }
    }

    /// Appends a batch of `count` records "p<sequence>" of producer 5, epoch 0, at `sequence`.
    fn produce(log: &mut Log, sequence: i32, count: i32) -> Result<LogAppend, LogError> {
        let records = (sequence..sequence + count)
            .map(|s| record(&format!("p{s}"), 1000))
            .collect();
        log.append_from_producer(records, 0, Some(stamp(5, 0, sequence)))
    }

    /// A transaction marker of producer 7 from `coordinator_epoch` (Kafka's control record).
    fn marker(commit: bool, coordinator_epoch: i32) -> (Vec<Record>, Option<ProducerStamp>) {
        let mut value = vec![0, 0];
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        let record = Record {
            key: Some(vec![0, 0, 0, u8::from(commit)]),
            value,
            timestamp_ms: 1000,
        };
        let kind = if commit {
            crate::storage::StampKind::Commit
        } else {
            crate::storage::StampKind::Abort
        };
        let stamp = ProducerStamp {
            kind,
            ..stamp(7, 0, 0)
        };
        (vec![record], Some(stamp))
    }

    /// Kafka's fencing of a coordinator that lost its `__transaction_state` partition: once a
    /// marker of coordinator epoch 5 ended the producer's transaction here, a marker of epoch
    /// 4 is TRANSACTION_COORDINATOR_FENCED and writes nothing, also after a restart rebuilt
    /// the producer's state from the log; epoch 5 again (the coordinator retrying) is taken.
    #[test]
    fn a_marker_of_an_older_coordinator_epoch_is_refused_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let transactional = |sequence| ProducerStamp {
            kind: crate::storage::StampKind::Transactional,
            ..stamp(7, 0, sequence)
        };
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append_from_producer(vec![record("t0", 1000)], 0, Some(transactional(0)))
            .unwrap();
        let (records, commit) = marker(true, 5);
        log.append_from_producer(records, 0, commit).unwrap();
        log.append_from_producer(vec![record("t1", 1000)], 0, Some(transactional(1)))
            .unwrap();
        let fenced = |log: &mut Log| {
            let (records, abort) = marker(false, 4);
            log.append_from_producer(records, 0, abort).unwrap_err()
        };
        let error = fenced(&mut log);
        assert!(
            matches!(
                error,
                LogError::Producer(ProducerError::CoordinatorFenced {
                    coordinator_epoch: 4,
                    current: 5,
                    ..
                })
            ),
            "{error:?}"
        );
        assert_eq!(
            log.log_end_offset(),
            3,
            "nothing written for the fenced marker"
        );
        drop(log);

        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert!(matches!(
            fenced(&mut log),
            LogError::Producer(ProducerError::CoordinatorFenced { current: 5, .. })
        ));
        let (records, abort) = marker(false, 5);
        let taken = log.append_from_producer(records, 0, abort).unwrap();
        assert_eq!(taken.base_offset, 3);
    }

    /// KIP-890 part 1 on one log: a transactional batch that would open a transaction needs
    /// the producer's current guard; once the transaction is open none is needed; a marker
    /// spends a pending guard (the race Kafka's unique guard closes: a verification that an
    /// abort overtook lets the late batch in no more); a retry of a batch the log holds is
    /// still a duplicate; with verification off the late batch opens a transaction, as
    /// before Kafka 3.6.
    #[test]
    fn a_transactional_batch_opens_a_transaction_only_with_a_current_verification_guard() {
        use crate::storage::producer_state::Verification;
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        let transactional = |sequence| ProducerStamp {
            kind: crate::storage::StampKind::Transactional,
            ..stamp(7, 0, sequence)
        };
        let unverified = |log: &mut Log, sequence: i32, guard| {
            log.append_verified(
                vec![record("late", 1000)],
                0,
                Some(transactional(sequence)),
                Verification::Guard(guard),
            )
            .unwrap_err()
        };
        let not_verified = |e: &LogError| {
            matches!(
                e,
                LogError::Producer(ProducerError::NotVerified { producer_id: 7 })
            )
        };
        // No guard at all, or a guard that is not the producer's: refused, nothing written.
        assert!(not_verified(&unverified(&mut log, 0, None)));
        let guard = log.start_verification(7).expect("no transaction is open");
        assert!(not_verified(&unverified(&mut log, 0, Some(guard + 1))));
        assert_eq!(log.log_end_offset(), 0);
        // Asking again while pending gives the same guard; with it the batch opens the
        // transaction, and the guard is spent.
        assert_eq!(log.start_verification(7), Some(guard));
        let first = log
            .append_verified(
                vec![record("t0", 1000)],
                0,
                Some(transactional(0)),
                Verification::Guard(Some(guard)),
            )
            .unwrap();
        assert_eq!(first.base_offset, 0);
        // Open here: no guard needed for the next batch, and none handed out.
        assert_eq!(log.start_verification(7), None);
        log.append_verified(
            vec![record("t1", 1000)],
            0,
            Some(transactional(1)),
            Verification::Guard(None),
        )
        .unwrap();
        // A retry of the first batch is a duplicate whatever its guard.
        let retry = log
            .append_verified(
                vec![record("t0", 1000)],
                0,
                Some(transactional(0)),
                Verification::Guard(None),
            )
            .unwrap();
        assert_eq!(retry.duplicate.map(|_| retry.base_offset), Some(0));
        // A late batch starts verifying, then the abort marker lands before it: its guard is
        // spent, and it is refused though the coordinator had said yes.
        let stale = log.start_verification(7);
        assert_eq!(stale, None, "the transaction is still open");
        let (records, abort) = marker(false, 0);
        log.append_from_producer(records, 0, abort).unwrap();
        let pending = log.start_verification(7).expect("the abort closed it");
        let late = record("late", 1000);
        let (records, commit) = marker(true, 0);
        log.append_from_producer(records, 0, commit).unwrap();
        let refused = log
            .append_verified(
                vec![late],
                0,
                Some(transactional(2)),
                Verification::Guard(Some(pending)),
            )
            .unwrap_err();
        assert!(not_verified(&refused), "{refused:?}");
        let end = log.log_end_offset();
        // Without verification (the setting off, or Kafka before 3.6) it opens a transaction.
        log.append_verified(
            vec![record("late", 1000)],
            0,
            Some(transactional(2)),
            Verification::Off,
        )
        .unwrap();
        assert_eq!(log.log_end_offset(), end + 1);
    }

    #[test]
    fn a_retried_producer_batch_is_answered_with_its_offsets_and_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 2, 0);
        let first = produce(&mut log, 0, 3).unwrap();
        assert_eq!(
            (first.base_offset, first.last_offset, first.duplicate),
            (2, 4, None)
        );
        produce(&mut log, 3, 1).unwrap();
        let retry = produce(&mut log, 0, 3).unwrap();
        assert_eq!(
            (retry.base_offset, retry.last_offset, retry.duplicate),
            (2, 4, Some(1000))
        );
        assert_eq!(log.log_end_offset(), 6, "nothing appended for the retry");
        let error = produce(&mut log, 5, 1).unwrap_err();
        assert!(
            matches!(
                error,
                LogError::Producer(ProducerError::OutOfOrderSequence { expected: 4, .. })
            ),
            "{error:?}"
        );
        assert_eq!(log.log_end_offset(), 6, "nothing appended for the gap");
        let stored = log.read(2, usize::MAX, u64::MAX).unwrap();
        let sequences: Vec<Option<i32>> = stored
            .iter()
            .map(|r| r.producer.map(|p| p.sequence))
            .collect();
        assert_eq!(sequences, [Some(0), Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn producer_state_is_rebuilt_from_the_log_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = Log::open(dir.path(), small_config()).unwrap();
            for sequence in 0..8 {
                fill(&mut log, 1, 0);
                produce(&mut log, sequence, 1).unwrap();
            }
            assert!(log.segment_count() > 1, "the state spans segments");
        }
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        let entry = log.producers().entry(5).unwrap();
        assert_eq!(entry.last_sequence(), Some(7));
        assert_eq!(entry.batches.len(), 5);
        let retry = produce(&mut log, 6, 1).unwrap();
        assert_eq!(retry.duplicate, Some(1000));
        assert_eq!(retry.base_offset, 13);
        assert_eq!(produce(&mut log, 8, 1).unwrap().duplicate, None);
    }

    #[test]
    fn a_follower_takes_the_producer_state_from_replicated_batches() {
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let mut leader = Log::open(leader_dir.path(), LogConfig::default()).unwrap();
        let mut follower = Log::open(follower_dir.path(), LogConfig::default()).unwrap();
        produce(&mut leader, 0, 2).unwrap();
        fill(&mut leader, 1, 0);
        produce(&mut leader, 2, 2).unwrap();
        let bytes = leader.read_batch_bytes(0, usize::MAX, u64::MAX).unwrap();
        assert_eq!(follower.append_batch_bytes(&bytes).unwrap(), 3);
        assert_eq!(follower.producers(), leader.producers());
        // As the new leader, the follower answers the old leader's batch as a duplicate.
        let retry = produce(&mut follower, 2, 2).unwrap();
        assert_eq!((retry.base_offset, retry.duplicate), (3, Some(1000)));
    }

    #[test]
    fn truncation_forgets_the_truncated_producer_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        produce(&mut log, 0, 2).unwrap();
        produce(&mut log, 2, 2).unwrap();
        log.truncate_to(3).unwrap();
        // The kept record of the cut batch (sequence 2) is the producer's last.
        assert_eq!(log.producers().entry(5).unwrap().last_sequence(), Some(2));
        assert_eq!(produce(&mut log, 3, 1).unwrap().duplicate, None);
        log.truncate_to(0).unwrap();
        assert!(log.producers().is_empty());
    }

    #[test]
    fn producer_state_outlives_delete_records_until_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        produce(&mut log, 0, 2).unwrap();
        fill(&mut log, 1, 0);
        log.delete_records_before(3).unwrap();
        // As Kafka since KIP-360: the state stays when the batches go.
        assert!(matches!(
            produce(&mut log, 5, 1),
            Err(LogError::Producer(ProducerError::OutOfOrderSequence {
                expected: 2,
                ..
            }))
        ));
        drop(log);
        // Without a snapshot, the reopened log knows only the batches it still holds.
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert!(log.producers().is_empty());
        // With no state left, the producer is taken at any sequence (KIP-360).
        assert_eq!(produce(&mut log, 17, 1).unwrap().duplicate, None);
    }

    #[test]
    fn append_assigns_offsets_and_read_respects_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(
            log.append(vec![record("a", 1), record("b", 2)], 0).unwrap(),
            (0, 1)
        );
        assert_eq!(log.append(vec![record("c", 3)], 0).unwrap(), (2, 2));
        assert_eq!(log.log_end_offset(), 3);

        let all = log.read(0, usize::MAX, u64::MAX).unwrap();
        assert_eq!(
            values(&all),
            vec![(0, "a".into()), (1, "b".into()), (2, "c".into())]
        );
        assert_eq!(all[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(all[2].timestamp_ms, 3);
        // Mid-batch start, max_offset bound, and max_bytes small enough for one record only.
        assert_eq!(
            values(&log.read(1, usize::MAX, u64::MAX).unwrap()),
            vec![(1, "b".into()), (2, "c".into())]
        );
        assert_eq!(
            values(&log.read(0, usize::MAX, 1).unwrap()),
            vec![(0, "a".into())]
        );
        assert_eq!(
            values(&log.read(0, 1, u64::MAX).unwrap()),
            vec![(0, "a".into())]
        );
        assert!(log.read(3, usize::MAX, u64::MAX).unwrap().is_empty());
        assert!(matches!(
            log.read(4, usize::MAX, u64::MAX),
            Err(LogError::OffsetOutOfRange {
                offset: 4,
                log_start_offset: 0,
                log_end_offset: 3
            })
        ));
    }

    #[test]
    fn read_batches_cuts_first_and_last_batch_to_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append((0..4).map(|i| record(&format!("v{i}"), i)).collect(), 2)
            .unwrap();
        log.append((4..8).map(|i| record(&format!("v{i}"), i)).collect(), 2)
            .unwrap();
        let batches = log.read_batches(2, usize::MAX, 6).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!((batches[0].base_offset, batches[0].next_offset()), (2, 4));
        assert_eq!((batches[1].base_offset, batches[1].next_offset()), (4, 6));
        assert!(batches.iter().all(|b| b.leader_epoch == 2));
        // A small max_bytes still returns the first whole batch, and only that one.
        assert_eq!(log.read_batches(0, 1, u64::MAX).unwrap().len(), 1);
    }

    #[test]
    fn oversized_and_empty_batches_are_refused_without_effect() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            max_message_bytes: 100,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config).unwrap();
        let big = Record {
            key: None,
            value: vec![7; 100],
            timestamp_ms: 0,
        };
        assert!(matches!(
            log.append(vec![big], 0),
            Err(LogError::RecordTooLarge {
                size: 149,
                max: 100
            })
        ));
        assert!(matches!(
            log.append(vec![], 0),
            Err(LogError::InvalidRecord(_))
        ));
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.size_bytes(), 0);
    }

    #[test]
    fn segments_roll_at_segment_bytes_and_reopen_intact() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 30, 0);
        assert!(log.segment_count() > 3, "{} segments", log.segment_count());
        assert!(log.segments.values().all(|s| s.size_bytes() <= 300));
        assert!(segment_path(dir.path(), 0).exists());
        let bases: Vec<u64> = log.segments.keys().copied().collect();
        let second = bases[1];
        assert!(dir.path().join(format!("{second:020}.log")).exists());
        assert!(dir.path().join(format!("{second:020}.index")).exists());
        assert_eq!(read_all(&log), expected(0..30));
        drop(log);

        let mut log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(log.segments.keys().copied().collect::<Vec<_>>(), bases);
        assert_eq!(read_all(&log), expected(0..30));
        fill(&mut log, 1, 0);
        assert_eq!(read_all(&log), expected(0..31));
    }

    #[test]
    fn a_roll_that_cannot_open_its_index_leaves_no_file_and_appends_resume() {
        // Issue 22: the `.log` of a failed roll stayed behind, and every later roll of the
        // partition failed with "File exists" for good.
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1, // every batch rolls
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config.clone()).unwrap();
        fill(&mut log, 3, 0);
        let before = log.segments.keys().copied().collect::<Vec<_>>();
        // A directory where the next `.index` goes makes opening it fail, as EMFILE would.
        let blocker = dir.path().join(segment::index_file_name(3));
        fs::create_dir(&blocker).unwrap();
        for _ in 0..2 {
            let refused = log.append(vec![record("x", 1)], 0).unwrap_err();
            assert!(
                matches!(refused, LogError::Roll { base_offset: 3, .. }),
                "{refused:?}"
            );
            assert!(refused.to_string().contains("nothing was written"));
            assert!(
                !segment_path(dir.path(), 3).exists(),
                "half-created segment left"
            );
            assert_eq!(log.log_end_offset(), 3);
            assert_eq!(log.segments.keys().copied().collect::<Vec<_>>(), before);
        }
        // Resources return: the same append rolls and succeeds.
        fs::remove_dir(&blocker).unwrap();
        fill(&mut log, 2, 0);
        assert_eq!(read_all(&log), expected(0..5));
        drop(log);
        let log = Log::open(dir.path(), config).unwrap();
        assert_eq!(read_all(&log), expected(0..5));
        assert_eq!(log.segment_count(), 5);
    }

    #[test]
    fn a_segment_sealed_by_a_failed_roll_takes_appends_and_reopens_with_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 2, 0);
        // What a roll does before it fails at the last step: the active segment is sealed.
        let leo = log.log_end_offset();
        log.active_mut().seal(leo).unwrap();
        log.active_mut().seal(leo).unwrap();
        let sealed_entries = log.active().index_len();
        assert_eq!(sealed_entries, 1, "sealing twice adds one entry");
        fill(&mut log, 1, 0);
        assert_eq!(read_all(&log), expected(0..3));
        drop(log);
        let log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(read_all(&log), expected(0..3));
    }

    #[test]
    fn sparse_index_finds_every_offset() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            index_interval_bytes: 120,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config.clone()).unwrap();
        fill(&mut log, 50, 0);
        let entries = log.active().index_len();
        assert!(
            (10..50).contains(&entries),
            "{entries} index entries for 50 batches of ~50 bytes"
        );
        for offset in 0..50 {
            let got = log.read(offset, 1, u64::MAX).unwrap();
            assert_eq!(values(&got), expected(offset..offset + 1));
        }
        // The rebuilt index (recovery of the active segment) answers the same.
        drop(log);
        let log = Log::open(dir.path(), config).unwrap();
        assert_eq!(log.active().index_len(), entries);
        for offset in [0, 17, 49] {
            assert_eq!(
                values(&log.read(offset, 1, u64::MAX).unwrap()),
                expected(offset..offset + 1)
            );
        }
    }

    #[test]
    fn recovery_cuts_a_torn_tail_and_continues_at_the_right_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 10, 0);
        let size = log.size_bytes();
        drop(log); // no flush: like kill -9
        let file = fs::OpenOptions::new()
            .write(true)
            .open(segment_path(dir.path(), 0))
            .unwrap();
        file.set_len(size - 5).unwrap();

        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(log.log_end_offset(), 9);
        assert_eq!(read_all(&log), expected(0..9));
        assert!(matches!(
            log.read(10, 1, u64::MAX),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert_eq!(log.append(vec![record("new", 5)], 0).unwrap(), (9, 9));
        assert_eq!(
            values(&log.read(9, usize::MAX, u64::MAX).unwrap()),
            vec![(9, "new".into())]
        );
    }

    #[test]
    fn recovery_keeps_the_verified_tail_unless_the_bug_cuts_at_the_checkpoint() {
        let flushed = LogConfig {
            flush_messages: 1,
            ..LogConfig::default()
        };
        // Four records checkpointed by a flush, six more fsynced one by one (flush.messages=1
        // moves the recovery point in memory only), then a stop without a clean close.
        let recover = |config: LogConfig| {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log::open(dir.path(), flushed.clone()).unwrap();
            fill(&mut log, 4, 0);
            log.flush().unwrap();
            fill(&mut log, 6, 0);
            assert_eq!(log.recovery_point, 10, "every append was fsynced");
            drop(log);
            let log = Log::open(dir.path(), config).unwrap();
            (log.log_end_offset(), read_all(&log))
        };
        assert_eq!(recover(flushed.clone()), (10, expected(0..10)));
        let cut = LogConfig {
            recovery_cuts_at_checkpoint: true,
            ..flushed
        };
        assert_eq!(recover(cut), (4, expected(0..4)));
    }

    #[test]
    fn recovery_cuts_at_a_flipped_byte_and_serves_nothing_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 10, 0);
        let batch_len = log.size_bytes() / 10;
        drop(log);
        // Damage one value byte of the batch at offset 4.
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(segment_path(dir.path(), 0))
            .unwrap();
        let at = 4 * batch_len + batch_len - 1;
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, at).unwrap();
        file.write_all_at(&[byte[0] ^ 0x20], at).unwrap();

        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(log.log_end_offset(), 4);
        assert_eq!(read_all(&log), expected(0..4));
        assert_eq!(log.size_bytes(), 4 * batch_len);
        assert_eq!(log.append(vec![record("v4", 0)], 0).unwrap(), (4, 4));
        assert_eq!(read_all(&log), expected(0..5));
    }

    #[test]
    fn recovery_trusts_flushed_batches_and_verifies_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(
            dir.path(),
            LogConfig {
                index_interval_bytes: 100,
                ..LogConfig::default()
            },
        )
        .unwrap();
        fill(&mut log, 20, 0);
        let batch_len = log.size_bytes() / 20;
        log.flush().unwrap(); // recovery point 20
        fill(&mut log, 10, 0);
        drop(log);
        let file = fs::OpenOptions::new()
            .write(true)
            .open(segment_path(dir.path(), 0))
            .unwrap();
        // Damage batch 2 (flushed: not verified on open) and batch 25 (after the recovery point).
        file.write_all_at(&[0xee], 2 * batch_len + batch_len - 1)
            .unwrap();
        file.write_all_at(&[0xee], 25 * batch_len + batch_len - 1)
            .unwrap();

        let log = Log::open(
            dir.path(),
            LogConfig {
                index_interval_bytes: 100,
                ..LogConfig::default()
            },
        )
        .unwrap();
        assert_eq!(
            log.log_end_offset(),
            25,
            "cut at the first bad batch after the recovery point"
        );
        assert_eq!(
            values(&log.read(3, usize::MAX, u64::MAX).unwrap()),
            expected(3..25)
        );
        // The damaged flushed batch is still never served: reads check every CRC.
        assert!(matches!(
            log.read(2, usize::MAX, u64::MAX),
            Err(LogError::Corrupt(_))
        ));
    }

    #[test]
    fn recovery_drops_segments_after_a_corrupt_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 30, 0);
        let bases: Vec<u64> = log.segments.keys().copied().collect();
        drop(log);
        // Without a recovery point every segment is verified.
        fs::remove_file(dir.path().join(RECOVERY_POINT_CHECKPOINT)).unwrap();
        let file = fs::OpenOptions::new()
            .write(true)
            .open(segment_path(dir.path(), bases[1]))
            .unwrap();
        file.write_all_at(&[0xff], 20).unwrap(); // inside the first batch's header of segment 2

        let log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(log.log_end_offset(), bases[1]);
        assert_eq!(read_all(&log), expected(0..bases[1]));
        assert_eq!(log.segment_count(), 2);
        assert!(!segment_path(dir.path(), bases[2]).exists());
        assert!(!dir.path().join(segment::index_file_name(bases[2])).exists());
    }

    #[test]
    fn retention_by_time_deletes_old_segments_but_not_active_or_above_hw() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            retention_ms: 1_000,
            ..small_config()
        };
        let mut log = Log::open(dir.path(), config).unwrap();
        fill(&mut log, 30, 0); // timestamps 1000..1030
        let bases: Vec<u64> = log.segments.keys().copied().collect();
        let count = bases.len();
        // Nothing is older than 1000 ms at now = 2000.
        assert_eq!(log.apply_retention(2_000, 30).unwrap(), 0);
        // The HW stops retention at the segment holding it.
        assert_eq!(log.apply_retention(100_000, bases[2]).unwrap(), 2);
        assert_eq!(log.log_start_offset(), bases[2]);
        assert!(matches!(
            log.read(0, 1, u64::MAX),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        // Everything old, HW at the end: all but the active segment go.
        assert_eq!(log.apply_retention(100_000, 30).unwrap(), count - 3);
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start_offset(), bases[count - 1]);
        assert_eq!(read_all(&log), expected(bases[count - 1]..30));
        assert!(!segment_path(dir.path(), 0).exists());
        drop(log);
        let log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(log.log_start_offset(), bases[count - 1]);
    }

    #[test]
    fn reopen_keeps_segment_timestamps_and_rebuilds_a_damaged_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 30, 0);
        let timestamps: Vec<Option<i64>> = log
            .segments
            .values()
            .map(Segment::max_timestamp_ms)
            .collect();
        let index_lens: Vec<usize> = log.segments.values().map(Segment::index_len).collect();
        assert_eq!(timestamps.last(), Some(&Some(1029)));
        drop(log);
        // Segments 0 and 1 are below the recovery point, so only their index files are read:
        // damage one and delete the other.
        fs::write(dir.path().join(segment::index_file_name(0)), b"garbage").unwrap();
        let bases: Vec<u64> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| parse_segment_name(e.unwrap().file_name().to_str().unwrap(), ".log"))
            .collect::<std::collections::BTreeSet<u64>>()
            .into_iter()
            .collect();
        fs::remove_file(dir.path().join(segment::index_file_name(bases[1]))).unwrap();

        let log = Log::open(dir.path(), small_config()).unwrap();
        let reopened: Vec<Option<i64>> = log
            .segments
            .values()
            .map(Segment::max_timestamp_ms)
            .collect();
        assert_eq!(reopened, timestamps);
        let reopened_lens: Vec<usize> = log.segments.values().map(Segment::index_len).collect();
        assert_eq!(
            reopened_lens, index_lens,
            "rebuilt indexes equal the sealed ones"
        );
        for base in &bases[..2] {
            let len = fs::metadata(dir.path().join(segment::index_file_name(*base)))
                .unwrap()
                .len();
            assert_eq!(len, 16 * log.segments[base].index_len() as u64);
        }
        assert_eq!(read_all(&log), expected(0..30));
    }

    #[test]
    fn an_index_entry_off_its_batch_is_rebuilt_by_the_read_that_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 30, 0);
        drop(log);
        // The first segment's first entry claims an offset one below its batch's: the index
        // stays well-formed, so it is loaded, and a read at that offset would start one batch
        // late.
        let path = dir.path().join(segment::index_file_name(0));
        let pristine = fs::read(&path).unwrap();
        assert!(pristine.len() >= 32, "the segment has two index entries");
        let relative = u32::from_be_bytes(pristine[0..4].try_into().unwrap());
        let mut damaged = pristine.clone();
        damaged[0..4].copy_from_slice(&(relative - 1).to_be_bytes());
        fs::write(&path, &damaged).unwrap();

        let log = Log::open(dir.path(), small_config()).unwrap();
        let at = u64::from(relative - 1);
        let read = log.read(at, 1, u64::MAX).unwrap();
        assert_eq!(values(&read), expected(at..at + 1));
        assert_eq!(
            fs::read(&path).unwrap(),
            pristine,
            "the index file is rewritten"
        );
        assert_eq!(read_all(&log), expected(0..30));
    }

    #[test]
    fn retention_by_size_keeps_at_least_retention_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 30, 0);
        let sizes: Vec<u64> = log.segments.values().map(Segment::size_bytes).collect();
        let total: u64 = sizes.iter().sum();
        // Keep at least total - sizes[0] - sizes[1] bytes: exactly two segments may go.
        let retention_bytes = total - sizes[0] - sizes[1];
        log.set_config(LogConfig {
            retention_bytes: retention_bytes as i64,
            ..small_config()
        });
        assert_eq!(log.apply_retention(0, 30).unwrap(), 2);
        assert_eq!(log.size_bytes(), retention_bytes);
        assert_eq!(log.apply_retention(0, 30).unwrap(), 0);
    }

    #[test]
    fn delete_records_moves_log_start_and_persists_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 5, 1);
        fill(&mut log, 25, 2);
        let segments_before = log.segment_count();
        assert_eq!(log.delete_records_before(12).unwrap(), 12);
        assert_eq!(
            log.delete_records_before(3).unwrap(),
            12,
            "never moves back"
        );
        assert!(matches!(
            log.read(11, 1, u64::MAX),
            Err(LogError::OffsetOutOfRange {
                log_start_offset: 12,
                ..
            })
        ));
        assert_eq!(
            values(&log.read(12, 1, u64::MAX).unwrap()),
            expected(12..13)
        );
        assert!(
            log.segment_count() < segments_before,
            "segments wholly below 12 are deleted"
        );
        assert_eq!(
            log.epochs().entries(),
            &[EpochEntry {
                epoch: 2,
                start_offset: 12
            }]
        );
        assert!(matches!(
            log.delete_records_before(31),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        drop(log);
        let log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(log.log_start_offset(), 12);
        assert_eq!(read_all(&log), expected(12..30));
    }

    #[test]
    fn truncate_to_cuts_mid_batch_across_segments_and_trims_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 10, 1);
        log.append((10..14).map(|i| record(&format!("v{i}"), 0)).collect(), 3)
            .unwrap();
        fill(&mut log, 16, 3);
        assert!(log.segment_count() > 2);
        log.truncate_to(12).unwrap();
        assert_eq!(log.log_end_offset(), 12);
        assert_eq!(read_all(&log), expected(0..12));
        assert_eq!(log.end_offset_for_epoch(3), Some((3, 12)));
        log.truncate_to(10).unwrap();
        assert_eq!(log.latest_epoch(), Some(1));
        assert_eq!(log.end_offset_for_epoch(3), Some((1, 10)));
        assert_eq!(log.append(vec![record("x", 0)], 4).unwrap(), (10, 10));
        drop(log);
        let log = Log::open(dir.path(), small_config()).unwrap();
        assert_eq!(log.log_end_offset(), 11);
        let mut want = expected(0..10);
        want.push((10, "x".into()));
        assert_eq!(read_all(&log), want);
        assert_eq!(log.end_offset_for_epoch(3), Some((1, 10)));
        assert_eq!(log.end_offset_for_epoch(4), Some((4, 11)));
    }

    #[test]
    fn truncate_below_log_start_empties_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 20, 1);
        log.delete_records_before(15).unwrap();
        log.truncate_to(7).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 7));
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.latest_epoch(), None);
        assert_eq!(log.append(vec![record("v7", 0)], 2).unwrap(), (7, 7));
        assert_eq!(read_all(&log), expected(7..8));
    }

    #[test]
    fn epoch_cache_follows_appends_and_kip_279() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 3, 1);
        fill(&mut log, 4, 3);
        log.assign_epoch(5, 7).unwrap(); // became leader at LEO 7, nothing written yet
        assert_eq!(log.latest_epoch(), Some(5));
        assert_eq!(log.end_offset_for_epoch(1), Some((1, 3)));
        assert_eq!(
            log.end_offset_for_epoch(2),
            Some((1, 3)),
            "unknown epoch: largest below"
        );
        assert_eq!(log.end_offset_for_epoch(4), Some((3, 7)));
        assert_eq!(log.end_offset_for_epoch(5), Some((5, 7)));
        assert_eq!(log.end_offset_for_epoch(0), None);
        assert!(matches!(
            log.append(vec![record("old", 0)], 4),
            Err(LogError::InvalidRecord(_))
        ));
        assert!(matches!(
            log.assign_epoch(6, 99),
            Err(LogError::InvalidOffset(_))
        ));
        fill(&mut log, 1, 5);
        drop(log);
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        let entries: Vec<(u32, u64)> = log
            .epochs()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(entries, vec![(1, 0), (3, 3), (5, 7)]);
    }

    #[test]
    fn epoch_checkpoint_lost_is_rebuilt_from_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 2, 1);
        fill(&mut log, 2, 4);
        drop(log);
        fs::remove_file(
            dir.path()
                .join(crate::storage::epoch::LEADER_EPOCH_CHECKPOINT),
        )
        .unwrap();
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(log.end_offset_for_epoch(3), Some((1, 2)));
        assert_eq!(log.end_offset_for_epoch(4), Some((4, 4)));
    }

    #[test]
    fn damaged_epoch_checkpoint_is_rebuilt_from_all_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 10, 1);
        fill(&mut log, 20, 2);
        assert!(log.segment_count() > 2 && log.recovery_point > 10);
        drop(log);
        let path = dir
            .path()
            .join(crate::storage::epoch::LEADER_EPOCH_CHECKPOINT);
        fs::write(&path, "0\n2\n1 0\n").unwrap();
        let log = Log::open(dir.path(), small_config()).unwrap();
        let entries: Vec<(u32, u64)> = log
            .epochs()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(entries, vec![(1, 0), (2, 10)]);
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\n1 0\n2 10\n");
        assert_eq!(read_all(&log), expected(0..30));
    }

    #[test]
    fn flush_messages_counts_a_followers_appends_unless_the_bug_says_otherwise() {
        let leader_dir = tempfile::tempdir().unwrap();
        let mut leader = Log::open(leader_dir.path(), small_config()).unwrap();
        fill(&mut leader, 4, 1);
        let flushed = LogConfig {
            flush_messages: 1,
            ..small_config()
        };
        // (recovery point after the fetched batches, after the verbatim bytes)
        let follow = |config: LogConfig| {
            let dir = tempfile::tempdir().unwrap();
            let mut follower = Log::open(dir.path(), config).unwrap();
            let batches = leader.read_batches(0, usize::MAX, 2).unwrap();
            follower.append_batches(&batches).unwrap();
            let after_batches = follower.recovery_point;
            let bytes = leader.read_batch_bytes(2, usize::MAX, u64::MAX).unwrap();
            follower.append_batch_bytes(&bytes).unwrap();
            (after_batches, follower.recovery_point)
        };
        assert_eq!(follow(flushed.clone()), (2, 4));
        let uncounted = LogConfig {
            follower_appends_uncounted: true,
            ..flushed
        };
        assert_eq!(follow(uncounted), (0, 0));
    }

    #[test]
    fn follower_appends_leader_batches_verbatim() {
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let mut leader = Log::open(leader_dir.path(), small_config()).unwrap();
        let mut follower = Log::open(follower_dir.path(), small_config()).unwrap();
        fill(&mut leader, 8, 1);
        leader
            .append((8..11).map(|i| record(&format!("v{i}"), 0)).collect(), 2)
            .unwrap();
        fill(&mut leader, 9, 2);
        while follower.log_end_offset() < leader.log_end_offset() {
            let batches = leader
                .read_batches(follower.log_end_offset(), 200, u64::MAX)
                .unwrap();
            follower.append_batches(&batches).unwrap();
        }
        assert_eq!(read_all(&follower), read_all(&leader));
        assert_eq!(follower.epochs().entries(), leader.epochs().entries());
        let stale = leader.read_batches(5, 1, u64::MAX).unwrap();
        assert!(matches!(
            follower.append_batches(&stale),
            Err(LogError::InvalidOffset(_))
        ));
        assert_eq!(follower.log_end_offset(), 20);
    }

    /// The encoding of `read_batches`, the reference for `read_batch_bytes`.
    fn encoded(batches: &[Batch]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in batches {
            batch::encode(&mut out, b);
        }
        out
    }

    #[test]
    fn read_batch_bytes_matches_encoded_read_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_config()).unwrap();
        fill(&mut log, 4, 1);
        log.append((4..9).map(|i| record(&format!("v{i}"), 0)).collect(), 2)
            .unwrap();
        fill(&mut log, 7, 3);
        assert!(log.segment_count() > 2, "the reads cross segments");
        let end = log.log_end_offset();
        // Batch-aligned starts, a start inside the five-record batch, a max_offset inside it,
        // max_bytes below one batch, and ranges that reach over segment boundaries.
        for offset in 0..end {
            for max_offset in [6, 9, 12, end, u64::MAX] {
                for max_bytes in [1, 60, 150, 400, usize::MAX] {
                    let raw = log.read_batch_bytes(offset, max_bytes, max_offset).unwrap();
                    let reference = log.read_batches(offset, max_bytes, max_offset).unwrap();
                    assert_eq!(
                        raw,
                        encoded(&reference),
                        "offset {offset} max_offset {max_offset} max_bytes {max_bytes}"
                    );
                }
            }
        }
        assert!(log
            .read_batch_bytes(end, usize::MAX, u64::MAX)
            .unwrap()
            .is_empty());
        assert!(matches!(
            log.read_batch_bytes(end + 1, usize::MAX, u64::MAX),
            Err(LogError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn read_batch_bytes_refuses_a_corrupt_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
        fill(&mut log, 3, 0);
        // Flip a byte of the second batch's value: its CRC no longer matches.
        let file = fs::OpenOptions::new()
            .write(true)
            .open(segment_path(dir.path(), 0))
            .unwrap();
        let second_batch = (HEADER_LEN + batch::record_size(Some(b"k"), b"v0")) as u64;
        file.write_all_at(b"X", second_batch + HEADER_LEN as u64 + 14)
            .unwrap();
        assert!(matches!(
            log.read_batch_bytes(1, usize::MAX, u64::MAX),
            Err(LogError::Corrupt(_))
        ));
        assert_eq!(
            log.read_batch_bytes(0, 1, u64::MAX).unwrap().len(),
            second_batch as usize
        );
    }

    #[test]
    fn follower_appends_raw_leader_batches_verbatim() {
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let mut leader = Log::open(leader_dir.path(), small_config()).unwrap();
        let mut follower = Log::open(follower_dir.path(), small_config()).unwrap();
        fill(&mut leader, 8, 1);
        leader
            .append((8..11).map(|i| record(&format!("v{i}"), 0)).collect(), 2)
            .unwrap();
        fill(&mut leader, 9, 2);
        while follower.log_end_offset() < leader.log_end_offset() {
            let bytes = leader
                .read_batch_bytes(follower.log_end_offset(), 200, u64::MAX)
                .unwrap();
            assert!(follower.append_batch_bytes(&bytes).unwrap() >= 1);
        }
        assert_eq!(read_all(&follower), read_all(&leader));
        assert_eq!(follower.epochs().entries(), leader.epochs().entries());
        for base in leader.segments.keys() {
            if follower.segments.contains_key(base) {
                let stored = |log: &Log| fs::read(segment_path(log.dir(), *base)).unwrap();
                assert_eq!(stored(&follower), stored(&leader), "segment {base}");
            }
        }
        // A batch below the LEO is refused without effect.
        let stale = leader.read_batch_bytes(5, 1, u64::MAX).unwrap();
        assert!(matches!(
            follower.append_batch_bytes(&stale),
            Err(LogError::InvalidOffset(_))
        ));
        assert_eq!(follower.log_end_offset(), 20);
    }

    #[test]
    fn raw_follower_append_checks_every_batch_before_writing() {
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let mut leader = Log::open(leader_dir.path(), LogConfig::default()).unwrap();
        let mut follower = Log::open(follower_dir.path(), LogConfig::default()).unwrap();
        fill(&mut leader, 3, 4);
        leader.append(vec![record("late", 5)], 5).unwrap();
        let good = leader.read_batch_bytes(0, usize::MAX, u64::MAX).unwrap();
        // A flipped byte in the last batch: nothing is written, not even the good batches.
        let mut damaged = good.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 0x20;
        assert!(matches!(
            follower.append_batch_bytes(&damaged),
            Err(LogError::InvalidRecord(_))
        ));
        // A torn answer (last batch incomplete) is refused the same way.
        assert!(matches!(
            follower.append_batch_bytes(&good[..good.len() - 3]),
            Err(LogError::InvalidRecord(_))
        ));
        assert_eq!(follower.log_end_offset(), 0);
        assert_eq!(follower.size_bytes(), 0);
        // Leader epochs must not go backwards: epoch 5 first, then the epoch-4 batches.
        let epoch_five_dir = tempfile::tempdir().unwrap();
        let mut epoch_five = Log::open(epoch_five_dir.path(), LogConfig::default()).unwrap();
        epoch_five.assign_epoch(5, 0).unwrap();
        assert!(matches!(
            epoch_five.append_batch_bytes(&good),
            Err(LogError::InvalidRecord(_))
        ));
        assert_eq!(epoch_five.log_end_offset(), 0);
        assert_eq!(follower.append_batch_bytes(&good).unwrap(), 4);
        assert_eq!(follower.log_end_offset(), 4);
        assert_eq!(read_all(&follower), read_all(&leader));
    }

    #[test]
    fn flush_messages_fsyncs_every_n_records() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            flush_messages: 2,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config).unwrap();
        fill(&mut log, 1, 0);
        assert_eq!((log.unflushed_messages, log.recovery_point), (1, 0));
        fill(&mut log, 1, 0);
        assert_eq!((log.unflushed_messages, log.recovery_point), (0, 2));
        log.flush().unwrap();
        assert_eq!(
            checkpoint::read_offset(&dir.path().join(RECOVERY_POINT_CHECKPOINT)).unwrap(),
            Some(2)
        );
    }

    mod model {
        //! The log against a plain in-memory model, over random operation sequences.
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Append {
                records: usize,
                value_len: usize,
                new_epoch: bool,
            },
            Truncate {
                back: u64,
            },
            DeleteRecords {
                forward: u64,
            },
            Retention {
                retention_bytes: i64,
            },
            Reopen {
                flush: bool,
            },
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (1usize..5, 0usize..80, proptest::bool::weighted(0.2))
                    .prop_map(|(records, value_len, new_epoch)| Op::Append { records, value_len, new_epoch }),
                1 => (0u64..12).prop_map(|back| Op::Truncate { back }),
                1 => (0u64..8).prop_map(|forward| Op::DeleteRecords { forward }),
                1 => (0i64..600).prop_map(|retention_bytes| Op::Retention { retention_bytes }),
                1 => any::<bool>().prop_map(|flush| Op::Reopen { flush }),
            ]
        }

        fn config() -> LogConfig {
            LogConfig {
                segment_bytes: 256,
                index_interval_bytes: 64,
                ..LogConfig::default()
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]
            #[test]
            fn log_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
                let dir = tempfile::tempdir().unwrap();
                let mut log = Log::open(dir.path(), config()).unwrap();
                // Model: (offset, value, epoch) of every record, and the log start offset.
                let mut records: Vec<(u64, Vec<u8>, u32)> = Vec::new();
                let mut log_start = 0u64;
                let mut epoch = 0u32;
                for op in ops {
                    let leo = records.last().map_or(log_start, |r| r.0 + 1);
                    match op {
                        Op::Append { records: n, value_len, new_epoch } => {
                            epoch += u32::from(new_epoch);
                            let batch: Vec<Record> = (0..n as u64)
                                .map(|i| Record { key: None, value: vec![(leo + i) as u8; value_len], timestamp_ms: 0 })
                                .collect();
                            prop_assert_eq!(log.append(batch, epoch).unwrap(), (leo, leo + n as u64 - 1));
                            records.extend((0..n as u64).map(|i| (leo + i, vec![(leo + i) as u8; value_len], epoch)));
                        }
                        Op::Truncate { back } => {
                            let target = leo.saturating_sub(back).max(log_start);
                            log.truncate_to(target).unwrap();
                            records.retain(|r| r.0 < target);
                        }
                        Op::DeleteRecords { forward } => {
                            let target = (log_start + forward).min(leo);
                            prop_assert_eq!(log.delete_records_before(target).unwrap(), target.max(log_start));
                            log_start = target.max(log_start);
                        }
                        Op::Retention { retention_bytes } => {
                            log.set_config(LogConfig { retention_bytes, ..config() });
                            let size_before = log.size_bytes();
                            let bases: Vec<u64> = log.segments.keys().copied().collect();
                            let below_start: u64 = bases
                                .windows(2)
                                .filter(|w| w[1] <= log_start)
                                .map(|w| log.segments[&w[0]].size_bytes())
                                .sum();
                            log.apply_retention(0, leo).unwrap();
                            log.set_config(config());
                            prop_assert!(log.log_start_offset() >= log_start);
                            // Size retention never goes below retention.bytes; segments below
                            // the log start go regardless.
                            let floor = (retention_bytes as u64).min(size_before - below_start);
                            prop_assert!(log.size_bytes() >= floor);
                            log_start = log.log_start_offset();
                        }
                        Op::Reopen { flush } => {
                            if flush {
                                log.flush().unwrap();
                            }
                            drop(log);
                            log = Log::open(dir.path(), config()).unwrap();
                        }
                    }
                    let leo = records.last().map_or(log_start, |r| r.0 + 1);
                    let leo = leo.max(log_start);
                    prop_assert_eq!(log.log_end_offset(), leo);
                    prop_assert_eq!(log.log_start_offset(), log_start);
                    let got: Vec<(u64, Vec<u8>, u32)> = log
                        .read(log_start, usize::MAX, u64::MAX)
                        .unwrap()
                        .into_iter()
                        .map(|r| (r.offset, r.value, r.leader_epoch))
                        .collect();
                    let want: Vec<(u64, Vec<u8>, u32)> = records.iter().filter(|r| r.0 >= log_start).cloned().collect();
                    prop_assert_eq!(got, want);
                    if let Some(latest) = log.latest_epoch() {
                        prop_assert_eq!(log.end_offset_for_epoch(latest), Some((latest, leo)));
                    }
                }
            }
        }
    }
}
