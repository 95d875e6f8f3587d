//! The records of the internal `__transaction_state` topic: per transactional id its latest
//! [`TxnMetadata`] (key: the id, value: the metadata in JSON; Kafka's `TransactionLog` writes
//! the same key and value in a binary schema), the latest record of an id winning when a
//! coordinator loads the partition; and the choice of an id's partition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::TxnMetadata;
use crate::storage::{Record, StoredRecord};

/// The internal topic holding transactional ids' state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The key of a `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RecordKey {
    transactional_id: String,
}

/// The `__transaction_state` partition that holds `transactional_id` (Kafka's
/// `TransactionStateManager.partitionFor`: `Utils.abs(transactionalId.hashCode) %
/// transaction.state.log.num.partitions`, the same hash as groups'); its leader is the id's
/// coordinator.
pub fn partition_for(transactional_id: &str, partitions: u32) -> u32 {
    crate::group::offsets::partition_for(transactional_id, partitions)
}

/// The metadata of one transactional id as a record.
pub fn metadata_record(metadata: &TxnMetadata, timestamp_ms: i64) -> Record {
    let key = RecordKey {
        transactional_id: metadata.transactional_id.clone(),
    };
    Record {
        key: Some(serde_json::to_vec(&key).expect("keys serialise")),
        value: serde_json::to_vec(metadata).expect("metadata serialises"),
        timestamp_ms,
    }
}

/// What one partition holds: transactional id -> its latest metadata.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadedTxns {
    /// Transactional id -> metadata.
    pub txns: BTreeMap<String, TxnMetadata>,
}

impl LoadedTxns {
    /// Deliberate bug `txn.reload.forgets.ongoing`: every open transaction is read as none
    /// (Empty, no partitions, no start time). Returns the transactional ids it forgot.
    pub fn forget_ongoing(&mut self) -> Vec<String> {
        let mut forgotten = Vec::new();
        for metadata in self.txns.values_mut() {
            if metadata.state == crate::txn::state::TxnState::Ongoing {
                metadata.state = crate::txn::state::TxnState::Empty;
                metadata.partitions.clear();
                metadata.txn_start_ms = 0;
                forgotten.push(metadata.transactional_id.clone());
            }
        }
        forgotten
    }

    /// Applies one stored record (later records win). False for a record it cannot read,
    /// which is skipped.
    pub fn apply(&mut self, stored: &StoredRecord) -> bool {
        let Some(key) = stored.key.as_deref() else {
            return false;
        };
        let Ok(key) = serde_json::from_slice::<RecordKey>(key) else {
            return false;
        };
        match serde_json::from_slice::<TxnMetadata>(&stored.value) {
            Ok(metadata) if metadata.transactional_id == key.transactional_id => {
                self.txns.insert(key.transactional_id, metadata);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::{first_init, TxnState};

    fn stored(offset: u64, record: Record) -> StoredRecord {
        StoredRecord::at(offset, record)
    }

    #[test]
    fn forgetting_ongoing_transactions_leaves_the_others() {
        let mut open = first_init("open", 1, 1000);
        open.state = TxnState::Ongoing;
        open.partitions.insert(("t0".into(), 1));
        open.txn_start_ms = 5;
        let mut committing = first_init("committing", 2, 1000);
        committing.state = TxnState::PrepareCommit;
        committing.partitions.insert(("t0".into(), 2));
        let mut loaded = LoadedTxns::default();
        assert!(loaded.apply(&stored(0, metadata_record(&open, 5))));
        assert!(loaded.apply(&stored(1, metadata_record(&committing, 5))));
        assert_eq!(loaded.forget_ongoing(), ["open"]);
        let forgotten = &loaded.txns["open"];
        assert_eq!(forgotten.state, TxnState::Empty);
        assert!(forgotten.partitions.is_empty());
        assert_eq!(forgotten.txn_start_ms, 0);
        assert_eq!(loaded.txns["committing"], committing);
    }

    #[test]
    fn the_latest_record_of_an_id_wins_and_foreign_records_are_skipped() {
        let mut a = first_init("a", 1, 1000);
        let b = first_init("b", 2, 1000);
        let mut loaded = LoadedTxns::default();
        assert!(loaded.apply(&stored(0, metadata_record(&a, 5))));
        assert!(loaded.apply(&stored(1, metadata_record(&b, 5))));
        a.state = TxnState::CompleteCommit;
        a.producer_epoch = 3;
        assert!(loaded.apply(&stored(2, metadata_record(&a, 6))));
        let foreign = Record {
            key: Some(b"{\"group\":\"g\"}".to_vec()),
            value: b"{}".to_vec(),
            timestamp_ms: 0,
        };
        assert!(!loaded.apply(&stored(3, foreign)));
        assert_eq!(loaded.txns.len(), 2);
        assert_eq!(loaded.txns["a"], a);
        assert_eq!(loaded.txns["b"], b);
    }

    #[test]
    fn ids_hash_like_kafkas() {
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
    }
}
