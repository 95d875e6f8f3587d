//! Idempotent producers' state of one partition, Kafka's `ProducerStateManager`: per producer
//! id its epoch and the metadata of its last [`BATCHES_KEPT`] batches (first and last sequence,
//! first and last offset).
//!
//! The state is a function of the log alone: every batch a log appends (as leader, as follower,
//! or while it is rebuilt at start-up or after a truncation) is [`ProducerStates::record`]ed
//! from its header, so a follower holds the same state as its leader and a new leader after a
//! failover recognises the retry of a batch its predecessor appended. Only the leader
//! [`ProducerStates::check`]s a producer's batch before appending it, with Kafka's rules
//! (`UnifiedLog.analyzeAndValidateProducerState`, `ProducerAppendInfo.checkProducerEpoch` and
//! `checkSequence`):
//!
//! - a batch of the producer's current epoch whose first and last sequence equal one of the
//!   kept batches' is a duplicate: it is not appended again, and the produce is answered with
//!   the offsets the first append got;
//! - an epoch below the producer's is INVALID_PRODUCER_EPOCH (Kafka answers that, not
//!   PRODUCER_FENCED, to produce requests since 2.7);
//! - a higher epoch must start at sequence 0, and the current epoch must continue at the last
//!   sequence + 1 (wrapping from `i32::MAX` to 0); otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - a producer id without state here is taken with any sequence: since KIP-360 the broker
//!   does not answer UNKNOWN_PRODUCER_ID to a produce, the producer's state simply starts.
//!
//! As in Kafka since KIP-360, a producer's state outlives its batches: retention and
//! DeleteRecords do not remove it (Kafka expires producers after `producer.id.expiration.ms`
//! only, which is not served here). Unlike Kafka, which keeps snapshots of this state, a
//! restart rebuilds it from the batches left in the log, so a producer whose every batch lies
//! below the log start is forgotten then.

use std::collections::{HashMap, VecDeque};

use super::{ProducerStamp, StampKind};

/// How many batches of a producer are kept for duplicate detection: Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, matching the producer's largest
/// `max.in.flight.requests.per.connection` with idempotence (5).
pub const BATCHES_KEPT: usize = 5;

/// `sequence` advanced by `n`, wrapping from `i32::MAX` to 0 as Kafka's sequences do
/// (`DefaultRecordBatch.incrementSequence`).
pub fn sequence_add(sequence: i32, n: u32) -> i32 {
    debug_assert!(sequence >= 0, "sequences are never negative: {sequence}");
    let modulus = i64::from(i32::MAX) + 1;
    ((i64::from(sequence) + i64::from(n)) % modulus) as i32
}

/// Whether `next` directly follows `last` (Kafka's `ProducerAppendInfo.inSequence`).
fn in_sequence(last: i32, next: i32) -> bool {
    sequence_add(last, 1) == next
}

/// Where one kept batch of a producer lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the batch's first record.
    pub first_sequence: i32,
    /// Sequence of the batch's last record.
    pub last_sequence: i32,
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// The batch's largest record timestamp: Kafka answers a duplicate with it as the
    /// produce's `log_append_time_ms` (`BatchMetadata.timestamp`).
    pub max_timestamp_ms: i64,
}

/// One producer's state in a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The epoch of the producer's latest batch (or marker) in the log.
    pub producer_epoch: i16,
    /// Its latest data batches of that epoch, oldest first, at most [`BATCHES_KEPT`]; empty
    /// when a marker of a new epoch came last.
    pub batches: VecDeque<BatchMetadata>,
    /// The first offset of its open transaction here, if one is open (Kafka's
    /// `currentTxnFirstOffset`).
    pub txn_first_offset: Option<u64>,
    /// The coordinator epoch of the last marker that ended one of its transactions here, -1
    /// before any (Kafka's `ProducerStateEntry.coordinatorEpoch`): a marker of an older
    /// coordinator epoch comes from a coordinator that lost its `__transaction_state`
    /// partition, and is refused.
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    /// The sequence of the producer's last record in the log, if a data batch of its epoch is.
    pub fn last_sequence(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_sequence)
    }
}

/// An aborted transaction of one partition (Kafka's `AbortedTxn` of the transaction index):
/// its records lie from `first_offset` to the abort marker at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of the transaction's first record here (the marker's, if it had none).
    pub first_offset: u64,
    /// Offset of the abort marker.
    pub last_offset: u64,
}

/// What the leader does with a producer's batch that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerCheck {
    /// Append it.
    Append,
    /// A retry of a batch already in the log: answer its offsets, append nothing.
    Duplicate {
        /// Offset of the original batch's first record.
        base_offset: u64,
        /// Offset of the original batch's last record.
        last_offset: u64,
        /// The original batch's largest record timestamp.
        max_timestamp_ms: i64,
    },
}

/// Why the leader refuses a producer's batch (nothing is written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's epoch is below the producer's current one: a zombie producer, fenced.
    #[error("producer {producer_id} sent epoch {producer_epoch}, but its current epoch here is {current_epoch}; nothing was written")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        producer_epoch: i16,
        /// The epoch of the producer's latest batch in the log.
        current_epoch: i16,
    },
    /// A marker whose coordinator epoch is below that of the last marker of the producer
    /// here: a fenced coordinator's (Kafka's `TransactionCoordinatorFencedException`).
    #[error("producer {producer_id}'s marker comes from coordinator epoch {coordinator_epoch}, but epoch {current} has ended its transactions here; nothing was written")]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The coordinator epoch of the producer's last marker here.
        current: i32,
    },
    /// A batch outside any transaction from a producer whose transaction is open here
    /// (Kafka's `InvalidTxnStateException`, "expected transactional write").
    #[error("producer {producer_id} has a transaction open here since offset {first_offset}, and sent a batch outside it; nothing was written")]
    OutsideTransaction {
        /// The producer.
        producer_id: i64,
        /// Its open transaction's first offset here.
        first_offset: u64,
    },
    /// The first transactional batch of a producer with no transaction open here, without
    /// the guard of a verification with the coordinator that is still current (KIP-890 part
    /// 1; Kafka's `InvalidTxnStateException`, "Record was not part of an ongoing
    /// transaction"): a late produce of an ended transaction, or one whose verification a
    /// marker overtook.
    #[error("producer {producer_id} has no transaction open here and its batch was not verified with the transaction coordinator (or a marker came after the verification); nothing was written")]
    NotVerified {
        /// The producer.
        producer_id: i64,
    },
    /// The batch's first sequence does not follow the producer's last one here.
    #[error("producer {producer_id} epoch {producer_epoch} sent sequence {sequence}, but {expected} was expected (the last sequence here is {last_sequence} of epoch {current_epoch}); nothing was written")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        producer_epoch: i16,
        /// The batch's first sequence.
        sequence: i32,
        /// The sequence that would have been taken (0 for a new epoch).
        expected: i32,
        /// The producer's last sequence here.
        last_sequence: i32,
        /// The producer's epoch here.
        current_epoch: i16,
    },
}

/// Every idempotent producer's state in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStates {
    /// By producer id.
    producers: HashMap<i64, ProducerEntry>,
    /// Aborted transactions, by the offset of their marker (ascending).
    aborted: Vec<AbortedTxn>,
    /// Transactions ended by a marker the HW may not have passed yet, as (first offset,
    /// marker offset), oldest first: until it has, they still hold the last stable offset
    /// (Kafka's `unreplicatedTxns`).
    completed: VecDeque<(u64, u64)>,
    /// The verification guard of each producer whose first transactional batch here is
    /// being verified with the coordinator (Kafka's `VerificationStateEntry`): a batch may
    /// open a transaction only with its producer's current guard, and any transactional
    /// batch or marker of the producer clears it, so a verification that a marker overtook
    /// lets nothing in (Kafka's answer to the ABA race of KIP-890).
    verifications: HashMap<i64, u64>,
    /// The last guard handed out here.
    last_guard: u64,
}

/// How a producer's batch is checked against KIP-890's verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    /// Not checked (`transaction.partition.verification.enable=false`, and every append
    /// that is not a client's produce).
    Off,
    /// Checked: the guard the produce got from [`ProducerStates::start_verification`] and
    /// the coordinator's yes, `None` when it needed none (a transaction was open here).
    Guard(Option<u64>),
}

impl ProducerStates {
    /// No producers.
    pub fn new() -> ProducerStates {
        ProducerStates::default()
    }

    /// The state of `producer_id`, if the log holds a batch of it.
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// How many producers have state here.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer has state here.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The leader's check of a producer's batch of `record_count` records (module docs).
    pub fn check(
        &self,
        stamp: ProducerStamp,
        record_count: u32,
    ) -> Result<ProducerCheck, ProducerError> {
        assert!(record_count > 0, "a batch holds at least one record");
        let Some(entry) = self.producers.get(&stamp.producer_id) else {
            return Ok(ProducerCheck::Append);
        };
        if stamp.kind.control() {
            // A marker from the coordinator: an older epoch is a fenced coordinator's view.
            if stamp.producer_epoch < entry.producer_epoch {
                return Err(ProducerError::InvalidProducerEpoch {
                    producer_id: stamp.producer_id,
                    producer_epoch: stamp.producer_epoch,
                    current_epoch: entry.producer_epoch,
                });
            }
            return Ok(ProducerCheck::Append);
        }
        if let Some(first_offset) = entry.txn_first_offset {
            if !stamp.kind.transactional() && stamp.producer_epoch == entry.producer_epoch {
                return Err(ProducerError::OutsideTransaction {
                    producer_id: stamp.producer_id,
                    first_offset,
                });
            }
        }
        let last_sequence = sequence_add(stamp.sequence, record_count - 1);
        if stamp.producer_epoch == entry.producer_epoch {
            let original = entry
                .batches
                .iter()
                .find(|b| b.first_sequence == stamp.sequence && b.last_sequence == last_sequence);
            if let Some(original) = original {
                return Ok(ProducerCheck::Duplicate {
                    base_offset: original.base_offset,
                    last_offset: original.last_offset,
                    max_timestamp_ms: original.max_timestamp_ms,
                });
            }
        }
        if stamp.producer_epoch < entry.producer_epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: stamp.producer_id,
                producer_epoch: stamp.producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        let expected = match entry.last_sequence() {
            Some(last) if stamp.producer_epoch == entry.producer_epoch => sequence_add(last, 1),
            _ => 0,
        };
        if stamp.sequence == expected {
            debug_assert!(entry
                .last_sequence()
                .is_none_or(|last| stamp.producer_epoch > entry.producer_epoch
                    || in_sequence(last, stamp.sequence)));
            return Ok(ProducerCheck::Append);
        }
        Err(ProducerError::OutOfOrderSequence {
            producer_id: stamp.producer_id,
            producer_epoch: stamp.producer_epoch,
            sequence: stamp.sequence,
            expected,
            last_sequence: entry.last_sequence().unwrap_or(-1),
            current_epoch: entry.producer_epoch,
        })
    }

    /// Starts the verification of `producer_id`'s transactional batch (Kafka's
    /// `maybeStartTransactionVerification`): `None` when its transaction is open here (the
    /// coordinator knew of this partition when the first batch came), else the producer's
    /// guard, made now unless one is pending.
    pub fn start_verification(&mut self, producer_id: i64) -> Option<u64> {
        let open = self
            .producers
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some());
        if open {
            return None;
        }
        let next = self.last_guard + 1;
        let guard = *self.verifications.entry(producer_id).or_insert(next);
        self.last_guard = self.last_guard.max(guard);
        Some(guard)
    }

    /// `rebuilt` with `earlier`'s pending verifications (a rebuild after a truncation keeps
    /// them, as Kafka's reload keeps its verification states).
    pub fn keep_verifications_of(
        mut rebuilt: ProducerStates,
        earlier: &ProducerStates,
    ) -> ProducerStates {
        rebuilt.verifications = earlier.verifications.clone();
        rebuilt.last_guard = earlier.last_guard;
        rebuilt
    }

    /// Whether a data batch with `stamp` may be appended as far as verification goes (Kafka's
    /// `batchMissingRequiredVerification`): only a transactional batch of a producer with no
    /// transaction open here is checked, and it needs the producer's current guard.
    pub fn check_verification(
        &self,
        stamp: ProducerStamp,
        verification: Verification,
    ) -> Result<(), ProducerError> {
        let Verification::Guard(guard) = verification else {
            return Ok(());
        };
        if !stamp.kind.transactional() || stamp.kind.control() {
            return Ok(());
        }
        let open = self
            .producers
            .get(&stamp.producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some());
        let current = self.verifications.get(&stamp.producer_id).copied();
        if open || (guard.is_some() && guard == current) {
            return Ok(());
        }
        Err(ProducerError::NotVerified {
            producer_id: stamp.producer_id,
        })
    }

    /// The coordinator-epoch check of a marker that passed [`ProducerStates::check`] (Kafka's
    /// `ProducerAppendInfo.appendEndTxnMarker`): refused when an earlier marker of the
    /// producer here came from a newer coordinator epoch; an equal epoch is the same
    /// coordinator retrying.
    pub fn check_marker(
        &self,
        producer_id: i64,
        coordinator_epoch: i32,
    ) -> Result<(), ProducerError> {
        match self.producers.get(&producer_id) {
            Some(entry) if entry.coordinator_epoch > coordinator_epoch => {
                Err(ProducerError::CoordinatorFenced {
                    producer_id,
                    coordinator_epoch,
                    current: entry.coordinator_epoch,
                })
            }
            _ => Ok(()),
        }
    }

    /// A marker the log holds (appended, replicated or replayed) came from `coordinator_epoch`:
    /// it becomes the producer's, as every replica of Kafka's takes it from the marker (a
    /// replica does not refuse an older one, it only follows the log).
    pub fn note_marker(&mut self, producer_id: i64, coordinator_epoch: i32) {
        if let Some(entry) = self.producers.get_mut(&producer_id) {
            entry.coordinator_epoch = coordinator_epoch;
        }
    }

    /// Takes in a batch the log holds at `base_offset` (appended, replicated or replayed),
    /// whose largest record timestamp is `max_timestamp_ms`: the producer's state follows the
    /// log whatever the batch says, as Kafka's replay does.
    pub fn record(
        &mut self,
        stamp: ProducerStamp,
        record_count: u32,
        base_offset: u64,
        max_timestamp_ms: i64,
    ) {
        assert!(record_count > 0, "a batch holds at least one record");
        if stamp.kind.transactional() {
            // A transactional batch or a marker: the transaction is open here now, or
            // ended; either way a pending verification is spent (Kafka's `updateProducers`).
            self.verifications.remove(&stamp.producer_id);
        }
        if stamp.kind.control() {
            self.end_transaction(stamp, base_offset);
            return;
        }
        let batch = BatchMetadata {
            first_sequence: stamp.sequence,
            last_sequence: sequence_add(stamp.sequence, record_count - 1),
            base_offset,
            last_offset: base_offset + u64::from(record_count) - 1,
            max_timestamp_ms,
        };
        let entry = self
            .producers
            .entry(stamp.producer_id)
            .or_insert_with(|| new_entry(stamp.producer_epoch));
        if let Some(latest) = entry.batches.back() {
            assert!(
                base_offset > latest.last_offset,
                "producer {} batch at {base_offset} is not after its last offset {}",
                stamp.producer_id,
                latest.last_offset
            );
        }
        if entry.producer_epoch != stamp.producer_epoch {
            entry.producer_epoch = stamp.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(batch);
        if entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
        if stamp.kind.transactional() {
            entry.txn_first_offset.get_or_insert(base_offset);
        }
    }

    /// A marker at `offset` ends the producer's open transaction here (Kafka's
    /// `ProducerAppendInfo.appendEndTxnMarker`): a marker of a higher epoch becomes the
    /// producer's epoch (its batches of the old epoch are dropped), and an abort is kept in
    /// the index of aborted transactions. A marker without a transaction open here ends
    /// nothing: Kafka emits no completed transaction for it, so it neither holds the last
    /// stable offset nor enters the index (found by the differential test: Kafka 4.1.1
    /// answered a read_committed fetch over such an abort marker with no aborted
    /// transaction, and the companion broker with one from the marker to itself).
    fn end_transaction(&mut self, stamp: ProducerStamp, offset: u64) {
        let entry = self
            .producers
            .entry(stamp.producer_id)
            .or_insert_with(|| new_entry(stamp.producer_epoch));
        if stamp.producer_epoch > entry.producer_epoch {
            entry.producer_epoch = stamp.producer_epoch;
            entry.batches.clear();
        }
        let Some(first_offset) = entry.txn_first_offset.take() else {
            return;
        };
        self.completed.push_back((first_offset, offset));
        if stamp.kind == StampKind::Abort {
            debug_assert!(self.aborted.last().is_none_or(|a| a.last_offset < offset));
            self.aborted.push(AbortedTxn {
                producer_id: stamp.producer_id,
                first_offset,
                last_offset: offset,
            });
        }
    }

    /// Deliberate bug `idempotence.dedupe.forgotten`: forgets every producer without an open
    /// transaction here, so its next batch is checked as an unknown producer's (any
    /// sequence appends). Producers inside a transaction are kept (their open transaction
    /// holds the last stable offset).
    pub fn forget_idle(&mut self) {
        self.producers
            .retain(|_, entry| entry.txn_first_offset.is_some());
    }

    /// The first offset of the earliest transaction still open, or ended by a marker at or
    /// above `high_watermark` (not known replicated): the last stable offset is at most this
    /// (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self, high_watermark: u64) -> Option<u64> {
        let open = self.producers.values().filter_map(|e| e.txn_first_offset);
        let unreplicated = self
            .completed
            .iter()
            .filter(|(_, marker)| *marker >= high_watermark)
            .map(|(first, _)| *first);
        open.chain(unreplicated).min()
    }

    /// Forgets the ended transactions whose marker lies below `high_watermark`.
    pub fn prune_completed(&mut self, high_watermark: u64) {
        self.completed
            .retain(|(_, marker)| *marker >= high_watermark);
    }

    /// The aborted transactions whose records may lie in `[from, to)` (Kafka's
    /// `collectAbortedTransactions`: the marker at or after `from`, the first record before
    /// `to`), oldest first.
    pub fn aborted_between(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// Forgets the aborted transactions wholly below `log_start_offset` (their records and
    /// marker are gone; Kafka drops their index with the segments).
    pub fn drop_aborted_below(&mut self, log_start_offset: u64) {
        self.aborted.retain(|a| a.last_offset >= log_start_offset);
    }
}

fn new_entry(producer_epoch: i16) -> ProducerEntry {
    ProducerEntry {
        producer_epoch,
        batches: VecDeque::with_capacity(BATCHES_KEPT + 1),
        txn_first_offset: None,
        coordinator_epoch: -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(producer_id: i64, producer_epoch: i16, sequence: i32) -> ProducerStamp {
        ProducerStamp {
            producer_id,
            producer_epoch,
            sequence,
            kind: crate::storage::StampKind::Idempotent,
        }
    }

    fn of_kind(stamp: ProducerStamp, kind: StampKind) -> ProducerStamp {
        ProducerStamp { kind, ..stamp }
    }

    #[test]
    fn transactions_hold_the_stable_offset_until_their_markers_are_replicated() {
        let mut states = ProducerStates::new();
        let txn = |p, e, s| of_kind(stamp(p, e, s), StampKind::Transactional);
        // Producer 1's transaction at offsets 0..=1, producer 2's at 2, then 1's again at 3.
        states.record(txn(1, 0, 0), 2, 0, 5);
        states.record(txn(2, 0, 0), 1, 2, 5);
        states.record(txn(1, 0, 2), 1, 3, 5);
        assert_eq!(states.entry(1).unwrap().txn_first_offset, Some(0));
        assert_eq!(states.first_unstable_offset(4), Some(0));
        // A plain batch of producer 1 while its transaction is open is INVALID_TXN_STATE.
        assert!(matches!(
            states.check(stamp(1, 0, 3), 1),
            Err(ProducerError::OutsideTransaction {
                first_offset: 0,
                ..
            })
        ));
        // Producer 1 commits (marker at 4): until the HW passes 4 its transaction still holds
        // the stable offset; then producer 2's open one does.
        states.record(of_kind(stamp(1, 0, 0), StampKind::Commit), 1, 4, 5);
        assert_eq!(states.entry(1).unwrap().txn_first_offset, None);
        assert_eq!(states.first_unstable_offset(4), Some(0));
        states.prune_completed(5);
        assert_eq!(states.first_unstable_offset(5), Some(2));
        // Producer 2 is fenced: the abort marker comes with epoch 1 (the coordinator's bump),
        // which becomes its epoch; the abort is indexed from its first offset to the marker.
        assert_eq!(
            states.check(of_kind(stamp(2, 1, 0), StampKind::Abort), 1),
            Ok(ProducerCheck::Append)
        );
        states.record(of_kind(stamp(2, 1, 0), StampKind::Abort), 1, 5, 5);
        assert_eq!(states.entry(2).unwrap().producer_epoch, 1);
        assert_eq!(states.first_unstable_offset(6), None);
        let aborted = AbortedTxn {
            producer_id: 2,
            first_offset: 2,
            last_offset: 5,
        };
        assert_eq!(states.aborted_between(0, 6), [aborted]);
        assert_eq!(states.aborted_between(6, 9), [], "ended before the fetch");
        assert_eq!(
            states.aborted_between(0, 2),
            [],
            "begins after what is returned"
        );
        // A marker of an older epoch is refused; the zombie's data of epoch 0 is fenced.
        assert!(matches!(
            states.check(of_kind(stamp(2, 0, 0), StampKind::Commit), 1),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        assert!(matches!(
            states.check(txn(2, 0, 1), 1),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        // The new epoch starts at sequence 0, in a new transaction.
        assert_eq!(states.check(txn(2, 1, 0), 1), Ok(ProducerCheck::Append));
        // An abort marker of a newer epoch with no transaction of producer 2 open here (at
        // 6) ends nothing: no aborted transaction, nothing unstable; the epoch moves on.
        states.record(of_kind(stamp(2, 2, 0), StampKind::Abort), 1, 6, 7);
        assert_eq!(states.entry(2).unwrap().producer_epoch, 2);
        assert_eq!(
            states.aborted_between(6, 9),
            [],
            "no transaction, no index entry"
        );
        assert_eq!(states.first_unstable_offset(6), None);
        states.drop_aborted_below(6);
        assert_eq!(states.aborted_between(0, 9), []);
    }

    #[test]
    fn forgetting_idle_producers_turns_a_retry_into_a_second_append() {
        let mut states = ProducerStates::new();
        let txn = |p, e, s| of_kind(stamp(p, e, s), StampKind::Transactional);
        states.record(stamp(1, 0, 0), 2, 0, 5);
        states.record(txn(2, 0, 0), 1, 2, 5);
        let retry = stamp(1, 0, 0);
        assert!(matches!(
            states.check(retry, 2),
            Ok(ProducerCheck::Duplicate { base_offset: 0, .. })
        ));
        states.forget_idle();
        // Producer 1's retry is now an unknown producer's batch: appended again.
        assert_eq!(states.check(retry, 2), Ok(ProducerCheck::Append));
        assert!(states.entry(1).is_none());
        // Producer 2, inside a transaction, is kept, and its transaction holds the LSO.
        assert_eq!(states.entry(2).unwrap().txn_first_offset, Some(2));
        assert_eq!(states.first_unstable_offset(9), Some(2));
    }

    /// A state holding producer 7, epoch 0, batches of 2 records at sequences 0, 2 and 4
    /// (offsets 10..=11, 12..=13, 14..=15).
    fn three_batches() -> ProducerStates {
        let mut states = ProducerStates::new();
        for i in 0..3 {
            states.record(stamp(7, 0, i * 2), 2, 10 + i as u64 * 2, 77);
        }
        states
    }

    #[test]
    fn a_new_producer_is_taken_with_any_sequence() {
        let states = three_batches();
        assert_eq!(states.check(stamp(8, 0, 0), 1), Ok(ProducerCheck::Append));
        assert_eq!(states.check(stamp(8, 3, 41), 1), Ok(ProducerCheck::Append));
    }

    #[test]
    fn the_next_sequence_is_appended() {
        let states = three_batches();
        assert_eq!(states.check(stamp(7, 0, 6), 3), Ok(ProducerCheck::Append));
    }

    #[test]
    fn a_retried_batch_gets_its_original_offsets() {
        let states = three_batches();
        assert_eq!(
            states.check(stamp(7, 0, 2), 2),
            Ok(ProducerCheck::Duplicate {
                base_offset: 12,
                last_offset: 13,
                max_timestamp_ms: 77
            })
        );
        assert_eq!(
            states.check(stamp(7, 0, 4), 2),
            Ok(ProducerCheck::Duplicate {
                base_offset: 14,
                last_offset: 15,
                max_timestamp_ms: 77
            })
        );
    }

    #[test]
    fn a_batch_overlapping_a_kept_one_is_out_of_order() {
        let states = three_batches();
        // Same first sequence, different length: not the same batch.
        let error = states.check(stamp(7, 0, 4), 1).unwrap_err();
        assert_eq!(
            error,
            ProducerError::OutOfOrderSequence {
                producer_id: 7,
                producer_epoch: 0,
                sequence: 4,
                expected: 6,
                last_sequence: 5,
                current_epoch: 0
            }
        );
    }

    #[test]
    fn a_gap_is_out_of_order() {
        let states = three_batches();
        let error = states.check(stamp(7, 0, 7), 1).unwrap_err();
        assert!(
            matches!(
                error,
                ProducerError::OutOfOrderSequence {
                    sequence: 7,
                    expected: 6,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn an_older_epoch_is_fenced() {
        let mut states = three_batches();
        states.record(stamp(7, 2, 0), 1, 16, 77);
        // Even the exact retry of an epoch-0 batch is refused once epoch 2 wrote.
        for sequence in [0, 2, 6] {
            assert_eq!(
                states.check(stamp(7, 1, sequence), 2),
                Err(ProducerError::InvalidProducerEpoch {
                    producer_id: 7,
                    producer_epoch: 1,
                    current_epoch: 2
                })
            );
        }
    }

    #[test]
    fn a_new_epoch_starts_at_sequence_zero() {
        let states = three_batches();
        assert_eq!(states.check(stamp(7, 1, 0), 1), Ok(ProducerCheck::Append));
        let error = states.check(stamp(7, 1, 6), 1).unwrap_err();
        assert!(
            matches!(
                error,
                ProducerError::OutOfOrderSequence {
                    expected: 0,
                    current_epoch: 0,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_new_epoch_forgets_the_old_batches() {
        let mut states = three_batches();
        states.record(stamp(7, 1, 0), 2, 16, 77);
        let entry = states.entry(7).unwrap();
        assert_eq!(entry.producer_epoch, 1);
        assert_eq!(entry.batches.len(), 1);
        // Epoch 1's sequence 2 is next, not a duplicate of epoch 0's batch at sequence 2.
        assert_eq!(states.check(stamp(7, 1, 2), 2), Ok(ProducerCheck::Append));
    }

    #[test]
    fn only_the_last_five_batches_are_kept() {
        let mut states = ProducerStates::new();
        for i in 0..7 {
            states.record(stamp(1, 0, i), 1, 100 + i as u64, 77);
        }
        let entry = states.entry(1).unwrap();
        assert_eq!(entry.batches.len(), BATCHES_KEPT);
        assert_eq!(entry.batches.front().unwrap().first_sequence, 2);
        assert_eq!(
            states.check(stamp(1, 0, 2), 1),
            Ok(ProducerCheck::Duplicate {
                base_offset: 102,
                last_offset: 102,
                max_timestamp_ms: 77
            })
        );
        // Sequence 1 is older than the kept batches: neither a known duplicate nor next.
        assert!(matches!(
            states.check(stamp(1, 0, 1), 1),
            Err(ProducerError::OutOfOrderSequence { expected: 7, .. })
        ));
    }

    #[test]
    fn sequences_wrap_from_max_to_zero() {
        assert_eq!(sequence_add(i32::MAX, 1), 0);
        assert_eq!(sequence_add(i32::MAX - 1, 3), 1);
        let mut states = ProducerStates::new();
        states.record(stamp(3, 0, i32::MAX - 1), 2, 0, 77);
        assert_eq!(states.entry(3).unwrap().last_sequence(), Some(i32::MAX));
        assert_eq!(states.check(stamp(3, 0, 0), 1), Ok(ProducerCheck::Append));
        assert_eq!(
            states.check(stamp(3, 0, i32::MAX - 1), 2),
            Ok(ProducerCheck::Duplicate {
                base_offset: 0,
                last_offset: 1,
                max_timestamp_ms: 77
            })
        );
    }
}
