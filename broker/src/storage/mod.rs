//! The broker's storage engine: one segmented, append-only log per partition.
//!
//! # Layout
//!
//! - [`batch`]: the byte layout of a record batch (header, CRC-32C, records), encode/verify/decode.
//! - [`segment`]: one `.log` file of batches plus its sparse `.index`; scanning and truncation.
//! - [`epoch`]: the leader-epoch cache and its `leader-epoch-checkpoint` file (KIP-101/KIP-279).
//! - [`checkpoint`]: small checkpoint files replaced atomically.
//! - [`clean_shutdown`]: the clean-shutdown marker that tells a restart from a crash (KIP-966).
//! - [`log`]: [`Log`], a partition's segments, offsets, recovery, retention and truncation.
//! - [`producer_state`]: idempotent producers' state per partition (Kafka's
//!   `ProducerStateManager`): the last batches' sequences, duplicates, fenced epochs; rebuilt
//!   from the log.
//! - [`open_files`]: the open-file budget: raise `RLIMIT_NOFILE`, count segments, refuse to
//!   start when they cannot all be held open.
//!
//! `docs/storage.md` describes the on-disk format, the recovery rules and the retention rules.

pub mod batch;
pub mod checkpoint;
pub mod clean_shutdown;
pub mod epoch;
mod log;
pub mod open_files;
pub mod producer_state;
pub mod segment;

use serde::{Deserialize, Serialize};

pub use checkpoint::write_atomically;
pub use epoch::{EpochEntry, LeaderEpochCache};
pub use log::{Log, LogAppend};

/// `flush.messages` of a log that never fsyncs on append: Kafka's default, `Long.MAX_VALUE`
/// (also the largest value the setting takes).
pub const FLUSH_MESSAGES_NEVER: u64 = i64::MAX as u64;

/// Per-partition log settings, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `log.segment.bytes`: a new segment is rolled before a batch would make the active one
    /// larger than this. Default 1 GiB.
    pub segment_bytes: u64,
    /// `log.retention.ms`: segments whose newest record is older than this are deleted;
    /// -1 = unlimited. Default 7 days.
    pub retention_ms: i64,
    /// `log.retention.bytes`: oldest segments are deleted while the log stays at least this
    /// large without them; -1 = unlimited (default).
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many appended records; default
    /// [`FLUSH_MESSAGES_NEVER`], i.e. never per append: durability comes from replication.
    pub flush_messages: u64,
    /// `index.interval.bytes`: bytes of batches between two offset index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// `max.message.bytes` (topic) / `message.max.bytes` (broker): largest batch accepted from
    /// a producer, header included. Default 1048588.
    pub max_message_bytes: u64,
    /// Deliberate bug `follower.flush.uncounted` (`crate::bugs`): records a follower appends
    /// do not count toward `flush.messages`. Set only from `Bugs::on`, false otherwise.
    pub follower_appends_uncounted: bool,
    /// Deliberate bug `recovery.cuts.at.checkpoint` (`crate::bugs`): opening the log cuts it
    /// at the recovery-point checkpoint. Set only from `Bugs::on`, false otherwise.
    pub recovery_cuts_at_checkpoint: bool,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush_messages: FLUSH_MESSAGES_NEVER,
            index_interval_bytes: 4096,
            max_message_bytes: 1024 * 1024 + 12,
            follower_appends_uncounted: false,
            recovery_cuts_at_checkpoint: false,
        }
    }
}

/// A record as a producer hands it to the leader (no offset yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Optional key, stored as given.
    pub key: Option<Vec<u8>>,
    /// The payload.
    pub value: Vec<u8>,
    /// Timestamp in milliseconds since the Unix epoch (CreateTime or LogAppendTime).
    pub timestamp_ms: i64,
}

/// What an idempotent producer stamps on a batch (Kafka's record batch header fields
/// `producerId`, `producerEpoch`, `baseSequence`). On a [`Batch`] `sequence` is the first
/// record's; on a [`StoredRecord`] it is that record's own (the batch's base sequence plus the
/// record's position, wrapping from `i32::MAX` to 0 as Kafka's sequences do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProducerStamp {
    /// The producer id InitProducerId handed out (>= 0).
    pub producer_id: i64,
    /// The producer's epoch (>= 0); a higher one fences the lower.
    pub producer_epoch: i16,
    /// Sequence number (>= 0) of the first record of the batch, or of the record.
    pub sequence: i32,
    /// An idempotent producer's data, a transactional producer's data, or a transaction
    /// marker (Kafka's batch attributes `isTransactional` and `isControl`).
    #[serde(default, skip_serializing_if = "StampKind::is_idempotent")]
    pub kind: StampKind,
}

/// What a producer's batch is (Kafka's batch attributes: the transactional bit, the control
/// bit, and a control record's type).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StampKind {
    /// An idempotent producer's records, outside any transaction.
    #[default]
    Idempotent,
    /// Records of a transactional producer's transaction.
    Transactional,
    /// A commit marker: a control batch of one record ending the producer's transaction.
    Commit,
    /// An abort marker.
    Abort,
}

impl StampKind {
    /// Whether this is the default kind (not written in JSON).
    pub fn is_idempotent(&self) -> bool {
        *self == StampKind::Idempotent
    }

    /// Kafka's transactional bit: set on a transaction's records and on its markers.
    pub fn transactional(self) -> bool {
        self != StampKind::Idempotent
    }

    /// Kafka's control bit: a marker.
    pub fn control(self) -> bool {
        matches!(self, StampKind::Commit | StampKind::Abort)
    }
}

impl ProducerStamp {
    /// The stamp of the record `n` places after this one: the sequence advanced by `n`.
    pub fn advanced(self, n: u32) -> ProducerStamp {
        ProducerStamp {
            sequence: producer_state::sequence_add(self.sequence, n),
            ..self
        }
    }
}

/// A record as stored: with its offset and the epoch of the leader that appended it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    /// Position of the record in the partition.
    pub offset: u64,
    /// Epoch of the leader that appended the record (the epoch of its batch).
    pub leader_epoch: u32,
    /// Timestamp in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// Optional key.
    pub key: Option<Vec<u8>>,
    /// The payload.
    pub value: Vec<u8>,
    /// The idempotent producer that wrote the record, with the record's own sequence; `None`
    /// for a producer without idempotence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<ProducerStamp>,
}

impl StoredRecord {
    /// `record` as stored at `offset` in epoch 0 without a producer (coordinators' tests).
    #[cfg(test)]
    pub fn at(offset: u64, record: Record) -> StoredRecord {
        StoredRecord {
            offset,
            leader_epoch: 0,
            timestamp_ms: record.timestamp_ms,
            key: record.key,
            value: record.value,
            producer: None,
        }
    }
}

/// A record batch as stored and as replicated between brokers (offsets and epoch preserved).
/// Record `i` has offset `base_offset + i` and the batch's leader epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Epoch of the leader that appended the batch.
    pub leader_epoch: u32,
    /// The idempotent producer that wrote the batch, with its first record's sequence;
    /// `None` for a producer without idempotence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<ProducerStamp>,
    /// The records, at consecutive offsets from `base_offset`.
    pub records: Vec<StoredRecord>,
}

impl Batch {
    /// Offset one past the last record.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + self.records.len() as u64
    }
}

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The requested offset is below the log start or above the log end (Kafka's
    /// OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// First offset still readable.
        log_start_offset: u64,
        /// Next offset to be written.
        log_end_offset: u64,
    },
    /// A producer batch is larger than `max.message.bytes` (Kafka's MESSAGE_TOO_LARGE).
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Encoded size of the batch in bytes.
        size: u64,
        /// The configured limit.
        max: u64,
    },
    /// The file system failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A new segment could not be started (typically: the process is out of file
    /// descriptors). Nothing of the batch was written and no file of the new segment is left
    /// behind, so the same append succeeds once the files can be opened (Kafka's
    /// KAFKA_STORAGE_ERROR).
    #[error("cannot roll a new segment at offset {base_offset}: {source}; nothing was written")]
    Roll {
        /// Base offset the new segment would have had (the LEO).
        base_offset: u64,
        /// What the file system said.
        source: std::io::Error,
    },
    /// Stored data failed verification; nothing of it is served.
    #[error("corrupt log data: {0}")]
    Corrupt(String),
    /// An offset argument is inconsistent with the log (e.g. a follower batch not at the LEO).
    #[error("invalid offset: {0}")]
    InvalidOffset(String),
    /// The partition was deleted while the operation waited for it (Kafka's
    /// UNKNOWN_TOPIC_OR_PARTITION): nothing was done.
    #[error("the partition was deleted")]
    Deleted,
    /// A batch is malformed (empty, offsets not consecutive, leader epoch going backwards)
    /// (Kafka's INVALID_RECORD / CORRUPT_MESSAGE).
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// An idempotent producer's batch does not follow its state (Kafka's
    /// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH): nothing was written.
    #[error("{0}")]
    Producer(#[from] producer_state::ProducerError),
}
