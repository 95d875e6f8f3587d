//! The records of the internal `__consumer_offsets` topic and the choice of a group's partition
//! in it (Kafka's `GroupMetadataManager` format, in JSON): committed offsets and group metadata
//! (the generation and its assignment) as key/value records, the latest value of a key winning
//! when a coordinator loads the partition.
//!
//! A transactional producer's offsets (TxnOffsetCommit, KIP-98) are the same records written
//! in the producer's transaction: they stay pending, invisible to OffsetFetch, until the
//! transaction's marker lands on the partition; a commit marker makes them committed unless a
//! later record of the same partition was committed meanwhile (Kafka's
//! `GroupMetadata.completePendingTxnOffsetCommit`), an abort marker drops them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assignor::TopicPartition;
use super::state::GroupRecord;
use crate::bugs::{Bug, Bugs};
use crate::storage::{Record, StampKind, StoredRecord};

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Java's `String.hashCode` (over UTF-16 code units), which Kafka hashes group ids with.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The offsets-topic partition that holds `group_id` (Kafka's `partitionFor`:
/// `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`); its leader is the group's
/// coordinator.
pub fn partition_for(group_id: &str, partitions: u32) -> u32 {
    assert!(partitions > 0, "the offsets topic has partitions");
    let hash = java_string_hash(group_id);
    let abs = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    abs % partitions
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    /// The next offset to consume (Kafka's convention).
    pub offset: u64,
    /// Free text from the committer.
    #[serde(default)]
    pub metadata: String,
    /// When the coordinator accepted the commit (Unix ms).
    pub commit_timestamp_ms: i64,
    /// Where its record lies in the offsets partition: of two commits of one partition, the
    /// later record wins. Not part of the record's value.
    #[serde(skip)]
    pub record_offset: u64,
}

/// The offsets of one group a transactional producer committed in its open transaction,
/// by producer id.
pub type PendingOffsets = BTreeMap<i64, BTreeMap<TopicPartition, CommittedOffset>>;

/// A transaction's committed offset of `tp` takes effect unless `committed` holds a later
/// record of the same partition (a plain commit after the transaction's record wins).
pub fn commit_if_later(
    committed: &mut BTreeMap<TopicPartition, CommittedOffset>,
    tp: TopicPartition,
    offset: CommittedOffset,
) {
    let later = committed
        .get(&tp)
        .is_some_and(|current| current.record_offset > offset.record_offset);
    if !later {
        committed.insert(tp, offset);
    }
}

/// The key of an offsets-topic record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RecordKey {
    /// A committed offset of `group` for `topic`/`partition`.
    Offset {
        group: String,
        topic: String,
        partition: u32,
    },
    /// The metadata of `group`.
    Group { group: String },
}

/// An offset commit as a record.
pub fn offset_record(group: &str, tp: &TopicPartition, value: &CommittedOffset) -> Record {
    let key = RecordKey::Offset {
        group: group.to_string(),
        topic: tp.topic.clone(),
        partition: tp.partition,
    };
    record(&key, serde_json::to_vec(value), value.commit_timestamp_ms)
}

/// Group metadata as a record.
pub fn group_record(group: &str, value: &GroupRecord, now_ms: i64) -> Record {
    let key = RecordKey::Group {
        group: group.to_string(),
    };
    record(&key, serde_json::to_vec(value), now_ms)
}

fn record(key: &RecordKey, value: serde_json::Result<Vec<u8>>, timestamp_ms: i64) -> Record {
    Record {
        key: Some(serde_json::to_vec(key).expect("keys serialise")),
        value: value.expect("values serialise"),
        timestamp_ms,
    }
}

/// What one offsets partition holds, per group: the latest committed offsets, the pending
/// offsets of open transactions, and the latest generation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadedGroups {
    /// Group id -> committed offsets.
    pub offsets: BTreeMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
    /// Group id -> offsets of transactions without their marker yet.
    pub pending: BTreeMap<String, PendingOffsets>,
    /// Group id -> latest stored generation.
    pub generations: BTreeMap<String, u64>,
    /// Deliberate bugs of the load (`group.reload.keeps.first`).
    pub bugs: Bugs,
}

impl LoadedGroups {
    /// Applies one stored record (later records win; a transaction's records wait for its
    /// marker). Returns false for a record it cannot read, which is skipped: a foreign record
    /// must not stop the coordinator from loading.
    pub fn apply(&mut self, stored: &StoredRecord) -> bool {
        if let Some(stamp) = stored.producer.filter(|s| s.kind.control()) {
            // The marker ends the producer's open transaction: every record of it before here.
            for (group, pending) in &mut self.pending {
                let Some(ended) = pending.remove(&stamp.producer_id) else {
                    continue;
                };
                if stamp.kind == StampKind::Commit {
                    let committed = self.offsets.entry(group.clone()).or_default();
                    for (tp, offset) in ended {
                        commit_if_later(committed, tp, offset);
                    }
                }
            }
            self.pending.retain(|_, pending| !pending.is_empty());
            return true;
        }
        let Some(key) = stored.key.as_deref() else {
            return false;
        };
        match serde_json::from_slice::<RecordKey>(key) {
            Ok(RecordKey::Offset {
                group,
                topic,
                partition,
            }) => match serde_json::from_slice::<CommittedOffset>(&stored.value) {
                Ok(mut value) => {
                    value.record_offset = stored.offset;
                    let tp = TopicPartition { topic, partition };
                    match stored
                        .producer
                        .filter(|s| s.kind == StampKind::Transactional)
                    {
                        Some(stamp) => {
                            self.pending
                                .entry(group)
                                .or_default()
                                .entry(stamp.producer_id)
                                .or_default()
                                .insert(tp, value);
                        }
                        None => {
                            let committed = self.offsets.entry(group).or_default();
                            if self.bugs.on(Bug::GroupReloadKeepsFirst) {
                                // Deliberate bug: the first commit of a key wins the load.
                                committed.entry(tp).or_insert(value);
                            } else {
                                committed.insert(tp, value);
                            }
                        }
                    }
                    true
                }
                Err(_) => false,
            },
            Ok(RecordKey::Group { group }) => {
                match serde_json::from_slice::<GroupRecord>(&stored.value) {
                    Ok(value) => {
                        if self.bugs.on(Bug::GroupReloadKeepsFirst) {
                            // Deliberate bug: the first metadata record of a group wins the
                            // load, so the generation goes back to the first one stored.
                            self.generations.entry(group).or_insert(value.generation);
                        } else {
                            let generation = self.generations.entry(group).or_default();
                            *generation = (*generation).max(value.generation);
                        }
                        true
                    }
                    Err(_) => false,
                }
            }
            Err(_) => false,
        }
    }

    /// Every group id seen.
    pub fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .offsets
            .keys()
            .chain(self.pending.keys())
            .chain(self.generations.keys())
            .cloned()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        // Values of "...".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
    }

    fn stored(offset: u64, record: Record) -> StoredRecord {
        StoredRecord::at(offset, record)
    }

    /// A plain commit of `offset`.
    fn commit(offset: u64) -> CommittedOffset {
        CommittedOffset {
            offset,
            metadata: String::new(),
            commit_timestamp_ms: 5,
            record_offset: 0,
        }
    }

    /// The group's metadata of `generation`, led by `c-1`.
    fn meta(generation: u64) -> GroupRecord {
        GroupRecord {
            generation,
            protocol: "range".into(),
            leader_id: "c-1".into(),
            assignment: BTreeMap::new(),
        }
    }

    #[test]
    fn later_records_win_and_foreign_records_are_skipped() {
        let tp = TopicPartition::new("t0", 1);
        let mut loaded = LoadedGroups::default();
        assert!(loaded.apply(&stored(0, offset_record("g", &tp, &commit(7)))));
        assert!(loaded.apply(&stored(1, group_record("g", &meta(3), 5))));
        assert!(loaded.apply(&stored(2, offset_record("g", &tp, &commit(9)))));
        assert!(loaded.apply(&stored(3, group_record("h", &meta(1), 5))));
        let foreign = Record {
            key: Some(b"not json".to_vec()),
            value: b"x".to_vec(),
            timestamp_ms: 0,
        };
        assert!(!loaded.apply(&stored(4, foreign)));
        assert_eq!(loaded.offsets["g"][&tp].offset, 9);
        assert_eq!(loaded.generations["g"], 3);
        assert_eq!(loaded.group_ids(), ["g", "h"]);
    }

    #[test]
    fn a_load_keeps_the_last_record_of_a_key_unless_the_bug_keeps_the_first() {
        let tp = TopicPartition::new("t0", 0);
        // Commits of 3, 40 and 97 between the group records of generations 2, 5 and 9.
        let load = |bugs: Bugs| {
            let mut loaded = LoadedGroups {
                bugs,
                ..LoadedGroups::default()
            };
            for (at, offset, generation) in [(0, 3, 2), (2, 40, 5), (4, 97, 9)] {
                assert!(loaded.apply(&stored(at, group_record("g", &meta(generation), 5))));
                assert!(loaded.apply(&stored(at + 1, offset_record("g", &tp, &commit(offset)))));
            }
            let committed = &loaded.offsets["g"][&tp];
            (
                committed.offset,
                committed.record_offset,
                loaded.generations["g"],
            )
        };
        assert_eq!(load(Bugs::default()), (97, 5, 9));
        let mut bugs = Bugs::default();
        bugs.set(Bug::GroupReloadKeepsFirst, true);
        let expected = if cfg!(feature = "deliberate-bugs") {
            (3, 1, 2)
        } else {
            (97, 5, 9)
        };
        assert_eq!(
            load(bugs),
            expected,
            "the commit and generation the load keeps"
        );
    }

    fn stamped(offset: u64, record: Record, producer_id: i64, kind: StampKind) -> StoredRecord {
        StoredRecord {
            producer: Some(crate::storage::ProducerStamp {
                producer_id,
                producer_epoch: 0,
                sequence: 0,
                kind,
            }),
            ..StoredRecord::at(offset, record)
        }
    }

    fn marker(offset: u64, producer_id: i64, kind: StampKind) -> StoredRecord {
        let record = crate::ops::txn_markers::control_record(kind == StampKind::Commit, 0, 5);
        stamped(offset, record, producer_id, kind)
    }

    #[test]
    fn transactional_offsets_wait_for_their_marker_and_a_later_commit_wins() {
        let tp = TopicPartition::new("t0", 0);
        let commit = |offset| CommittedOffset {
            offset,
            metadata: String::new(),
            commit_timestamp_ms: 5,
            record_offset: 0,
        };
        let txn = StampKind::Transactional;
        let mut loaded = LoadedGroups::default();
        let committed = |loaded: &LoadedGroups| loaded.offsets["g"][&tp].offset;
        assert!(loaded.apply(&stored(0, offset_record("g", &tp, &commit(7)))));
        // Producer 3's transaction is aborted: its offset never counts.
        assert!(loaded.apply(&stamped(1, offset_record("g", &tp, &commit(9)), 3, txn)));
        assert_eq!(
            (committed(&loaded), loaded.pending["g"][&3][&tp].offset),
            (7, 9)
        );
        assert!(loaded.apply(&marker(2, 3, StampKind::Abort)));
        assert_eq!(committed(&loaded), 7);
        assert!(loaded.pending.is_empty());
        // Its next transaction commits, but a plain commit after its record wins.
        assert!(loaded.apply(&stamped(3, offset_record("g", &tp, &commit(11)), 3, txn)));
        assert!(loaded.apply(&stored(4, offset_record("g", &tp, &commit(8)))));
        assert!(loaded.apply(&marker(5, 3, StampKind::Commit)));
        assert_eq!(committed(&loaded), 8);
        // A committed transaction's offset after the last plain commit counts.
        assert!(loaded.apply(&stamped(6, offset_record("g", &tp, &commit(12)), 3, txn)));
        assert!(loaded.apply(&marker(7, 3, StampKind::Commit)));
        assert_eq!(committed(&loaded), 12);
        // Producer 4's marker does not end producer 5's transaction, which stays pending.
        assert!(loaded.apply(&stamped(8, offset_record("g", &tp, &commit(14)), 5, txn)));
        assert!(loaded.apply(&marker(9, 4, StampKind::Commit)));
        assert_eq!(committed(&loaded), 12);
        assert_eq!(loaded.pending["g"][&5][&tp].offset, 14);
        assert_eq!(loaded.group_ids(), ["g"]);
    }
}
