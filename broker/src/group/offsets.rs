//! The records of the internal `__consumer_offsets` topic and the choice of a group's partition
//! in it (Kafka's `GroupMetadataManager` format, in JSON): committed offsets and group metadata
//! (the generation and its assignment) as key/value records, the latest value of a key winning
//! when a coordinator loads the partition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assignor::TopicPartition;
use super::state::GroupRecord;
use crate::storage::{Record, StoredRecord};

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

/// What one offsets partition holds, per group: the latest committed offsets and the latest
/// generation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadedGroups {
    /// Group id -> committed offsets.
    pub offsets: BTreeMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
    /// Group id -> latest stored generation.
    pub generations: BTreeMap<String, u64>,
}

impl LoadedGroups {
    /// Applies one stored record (later records win). Returns false for a record it cannot
    /// read, which is skipped: a foreign record must not stop the coordinator from loading.
    pub fn apply(&mut self, stored: &StoredRecord) -> bool {
        let Some(key) = stored.key.as_deref() else {
            return false;
        };
        match serde_json::from_slice::<RecordKey>(key) {
            Ok(RecordKey::Offset {
                group,
                topic,
                partition,
            }) => match serde_json::from_slice::<CommittedOffset>(&stored.value) {
                Ok(value) => {
                    let tp = TopicPartition { topic, partition };
                    self.offsets.entry(group).or_default().insert(tp, value);
                    true
                }
                Err(_) => false,
            },
            Ok(RecordKey::Group { group }) => {
                match serde_json::from_slice::<GroupRecord>(&stored.value) {
                    Ok(value) => {
                        let generation = self.generations.entry(group).or_default();
                        *generation = (*generation).max(value.generation);
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

    #[test]
    fn later_records_win_and_foreign_records_are_skipped() {
        let tp = TopicPartition::new("t0", 1);
        let commit = |offset| CommittedOffset {
            offset,
            metadata: String::new(),
            commit_timestamp_ms: 5,
        };
        let meta = |generation| GroupRecord {
            generation,
            protocol: "range".into(),
            leader_id: "c-1".into(),
            assignment: BTreeMap::new(),
        };
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
}
