//! One transactional id's state and its transitions, Kafka's `TransactionMetadata` and the
//! checks of `TransactionCoordinator` (transaction version 1: the client adds partitions with
//! AddPartitionsToTxn, markers keep the producer's epoch). Pure: every function takes the
//! current metadata and `now_ms` and answers the metadata to store next (the coordinator makes
//! it current once it is in `__transaction_state`) or the error to answer.
//!
//! ```text
//!   Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//!     ▲                        │  ──EndTxn(abort) / timeout / fencing──▶ PrepareAbort ──▶ CompleteAbort
//!     └──── InitProducerId (epoch + 1) ◀── Complete* ────────────────────────────────────┘
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tidewater_kafka_model::ErrorCode;

/// `transaction.max.timeout.ms` (Kafka: 900000, 15 minutes): the longest timeout a producer
/// may ask for.
pub const TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

/// A transaction's state (Kafka's `TransactionState`, without the states of transaction
/// version 2 and of expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// Partitions added, neither committed nor aborted yet.
    Ongoing,
    /// EndTxn(commit) accepted: commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId: abort markers are being written.
    PrepareAbort,
    /// Every commit marker written.
    CompleteCommit,
    /// Every abort marker written.
    CompleteAbort,
}

impl TxnState {
    /// Whether markers are being written (requests other than retries wait:
    /// CONCURRENT_TRANSACTIONS).
    pub fn preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Kafka's name, as DescribeTransactions gives it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }
}

/// A partition of a transaction.
pub type TxnPartition = (String, u32);

/// What the coordinator stores per transactional id (the value of its `__transaction_state`
/// record, in JSON here; Kafka's `TransactionLogValue` is binary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    /// The client's `transactional.id`.
    pub transactional_id: String,
    /// The producer id it holds.
    pub producer_id: i64,
    /// Its current epoch: a request with an older one is fenced.
    pub producer_epoch: i16,
    /// The epoch before the last InitProducerId, so a retried InitProducerId (KIP-360) is
    /// recognised; -1 when none.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    /// Where the transaction stands.
    pub state: TxnState,
    /// The partitions of the open (or completing) transaction.
    pub partitions: BTreeSet<TxnPartition>,
    /// When the open transaction began (coordinator clock, ms); 0 when none is open.
    pub txn_start_ms: u64,
}

/// A refusal: the error code answered and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRefusal {
    /// Kafka's error.
    pub code: ErrorCode,
    /// For logs and the error message.
    pub message: String,
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> TxnRefusal {
    TxnRefusal {
        code,
        message: message.into(),
    }
}

/// The producer a request names (InitProducerId with KIP-360's fields, or a transaction
/// request's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
}

/// What InitProducerId does with a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Store this metadata and answer its producer id and epoch.
    Store(TxnMetadata),
    /// Store this metadata (PrepareAbort with the epoch bumped, fencing the producer), write
    /// the abort markers, and answer CONCURRENT_TRANSACTIONS: the client retries and gets
    /// the epoch bumped once more (`TransactionCoordinator.handleInitProducerId`, Ongoing).
    AbortFirst(TxnMetadata),
}

/// Checks `timeout_ms` against `transaction.max.timeout.ms`.
pub fn check_timeout(timeout_ms: i32) -> Result<(), TxnRefusal> {
    if timeout_ms <= 0 || timeout_ms > TRANSACTION_MAX_TIMEOUT_MS {
        return Err(refuse(
            ErrorCode::InvalidTransactionTimeout,
            format!(
                "transaction.timeout.ms={timeout_ms} is not in 1..={TRANSACTION_MAX_TIMEOUT_MS} \
                 (transaction.max.timeout.ms)"
            ),
        ));
    }
    Ok(())
}

/// A new transactional id's metadata: `producer_id` at epoch 0, Empty.
pub fn first_init(transactional_id: &str, producer_id: i64, timeout_ms: i32) -> TxnMetadata {
    TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch: 0,
        last_producer_epoch: -1,
        timeout_ms,
        state: TxnState::Empty,
        partitions: BTreeSet::new(),
        txn_start_ms: 0,
    }
}

/// InitProducerId for a transactional id the coordinator holds. `expected`: the producer id
/// and epoch the client sent (KIP-360), if any. `fresh_id` gives a new producer id when the
/// epoch would overflow.
pub fn init(
    current: &TxnMetadata,
    timeout_ms: i32,
    expected: Option<ProducerIdAndEpoch>,
    fresh_id: impl FnOnce() -> Option<i64>,
) -> Result<InitStep, TxnRefusal> {
    if current.state.preparing() {
        return Err(refuse(
            ErrorCode::ConcurrentTransactions,
            format!(
                "the transaction of {} is {}: retry",
                current.transactional_id,
                current.state.name()
            ),
        ));
    }
    if let Some(expected) = expected {
        let current_pair = (current.producer_id, current.producer_epoch);
        let retried = (current.producer_id, current.last_producer_epoch);
        let asked = (expected.producer_id, expected.producer_epoch);
        if asked != current_pair && asked != retried {
            return Err(refuse(
                ErrorCode::ProducerFenced,
                format!(
                    "producer {} epoch {} is not {}'s current producer {} epoch {}",
                    expected.producer_id,
                    expected.producer_epoch,
                    current.transactional_id,
                    current.producer_id,
                    current.producer_epoch
                ),
            ));
        }
        if asked == retried && current.state == TxnState::Empty {
            // The retry of an InitProducerId that was stored: answer it again.
            return Ok(InitStep::Store(current.clone()));
        }
    }
    if current.state == TxnState::Ongoing {
        // Fence the producer of the open transaction and abort it first.
        let mut aborting = bumped(current, fresh_id)?;
        aborting.state = TxnState::PrepareAbort;
        aborting.partitions = current.partitions.clone();
        aborting.txn_start_ms = current.txn_start_ms;
        return Ok(InitStep::AbortFirst(aborting));
    }
    let mut next = bumped(current, fresh_id)?;
    next.timeout_ms = timeout_ms;
    next.state = TxnState::Empty;
    next.partitions.clear();
    next.txn_start_ms = 0;
    Ok(InitStep::Store(next))
}

/// `current` with its epoch bumped (a new producer id at epoch 0 when it would overflow).
fn bumped(
    current: &TxnMetadata,
    fresh_id: impl FnOnce() -> Option<i64>,
) -> Result<TxnMetadata, TxnRefusal> {
    let mut next = current.clone();
    if current.producer_epoch >= i16::MAX - 1 {
        next.producer_id = fresh_id().ok_or_else(|| {
            refuse(
                ErrorCode::CoordinatorLoadInProgress,
                "no producer id block to replace an exhausted epoch: retry",
            )
        })?;
        next.producer_epoch = 0;
        next.last_producer_epoch = -1;
    } else {
        next.last_producer_epoch = current.producer_epoch;
        next.producer_epoch = current.producer_epoch + 1;
    }
    Ok(next)
}

/// The producer check every transaction request starts with.
fn check_producer(current: &TxnMetadata, asked: ProducerIdAndEpoch) -> Result<(), TxnRefusal> {
    if asked.producer_id != current.producer_id {
        return Err(refuse(
            ErrorCode::InvalidProducerIdMapping,
            format!(
                "{} is held by producer {}, not {}",
                current.transactional_id, current.producer_id, asked.producer_id
            ),
        ));
    }
    if asked.producer_epoch != current.producer_epoch {
        return Err(refuse(
            ErrorCode::ProducerFenced,
            format!(
                "producer {} epoch {} is fenced: {}'s epoch is {}",
                asked.producer_id,
                asked.producer_epoch,
                current.transactional_id,
                current.producer_epoch
            ),
        ));
    }
    Ok(())
}

/// CONCURRENT_TRANSACTIONS while the previous transaction's markers are being written.
fn check_not_preparing(current: &TxnMetadata) -> Result<(), TxnRefusal> {
    if current.state.preparing() {
        return Err(refuse(
            ErrorCode::ConcurrentTransactions,
            format!(
                "the previous transaction of {} is {}: retry",
                current.transactional_id,
                current.state.name()
            ),
        ));
    }
    Ok(())
}

/// AddPartitionsToTxn: `None` when every partition is already in the open transaction
/// (nothing to store), else the metadata to store.
pub fn add_partitions(
    current: &TxnMetadata,
    asked: ProducerIdAndEpoch,
    partitions: &BTreeSet<TxnPartition>,
    now_ms: u64,
) -> Result<Option<TxnMetadata>, TxnRefusal> {
    check_producer(current, asked)?;
    check_not_preparing(current)?;
    if current.state == TxnState::Ongoing && partitions.is_subset(&current.partitions) {
        return Ok(None);
    }
    let mut next = current.clone();
    if current.state != TxnState::Ongoing {
        next.partitions.clear();
        next.txn_start_ms = now_ms;
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    Ok(Some(next))
}

/// A partition leader's check that a transactional produce belongs to the producer's open
/// transaction (KIP-890 part 1; Kafka's `handleVerifyPartitionsInTransaction`, the
/// coordinator's side of AddPartitionsToTxn with `verifyOnly`): a producer id other than the
/// one held is INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, a transaction
/// being completed CONCURRENT_TRANSACTIONS (for every partition); otherwise each partition is
/// NONE (`None`) when the open transaction holds it, TRANSACTION_ABORTABLE when it does not
/// (no transaction open, or the partition never added). Stores nothing.
pub fn verify_partitions(
    current: &TxnMetadata,
    asked: ProducerIdAndEpoch,
    partitions: &BTreeSet<TxnPartition>,
) -> Result<Vec<(TxnPartition, Option<ErrorCode>)>, TxnRefusal> {
    check_producer(current, asked)?;
    check_not_preparing(current)?;
    Ok(partitions
        .iter()
        .map(|p| {
            let held = current.state == TxnState::Ongoing && current.partitions.contains(p);
            (
                p.clone(),
                (!held).then_some(ErrorCode::TransactionAbortable),
            )
        })
        .collect())
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    /// Store this metadata (PrepareCommit or PrepareAbort), answer, then write the markers.
    Prepare(TxnMetadata),
    /// A retry of an EndTxn already completed: answer success, store nothing.
    AlreadyDone,
}

/// EndTxn (`commit` or abort).
pub fn end(
    current: &TxnMetadata,
    asked: ProducerIdAndEpoch,
    commit: bool,
) -> Result<EndStep, TxnRefusal> {
    check_producer(current, asked)?;
    let wanted = if commit { "commit" } else { "abort" };
    let invalid = |state: TxnState| {
        refuse(
            ErrorCode::InvalidTxnState,
            format!(
                "cannot {wanted} the transaction of {}: it is {}",
                current.transactional_id,
                state.name()
            ),
        )
    };
    match (current.state, commit) {
        (TxnState::Ongoing, _) => {
            let mut next = current.clone();
            next.state = if commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            };
            Ok(EndStep::Prepare(next))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
            Ok(EndStep::AlreadyDone)
        }
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(refuse(
            ErrorCode::ConcurrentTransactions,
            format!(
                "the {wanted} of {}'s transaction is being completed: retry",
                current.transactional_id
            ),
        )),
        (state, _) => Err(invalid(state)),
    }
}

/// The metadata once every marker of a Prepare* state is written; `None` in any other state.
pub fn complete(current: &TxnMetadata) -> Option<TxnMetadata> {
    let state = match current.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return None,
    };
    let mut next = current.clone();
    next.state = state;
    next.partitions.clear();
    next.txn_start_ms = 0;
    Some(next)
}

/// The abort of an open transaction past its timeout, with the epoch bumped so the producer
/// is fenced (Kafka's `abortTimedOutTransactions`, `prepareFenceProducerEpoch`); `None` when
/// it is not open or not yet due.
pub fn time_out(
    current: &TxnMetadata,
    now_ms: u64,
    fresh_id: impl FnOnce() -> Option<i64>,
) -> Option<TxnMetadata> {
    let due = current.txn_start_ms + u64::try_from(current.timeout_ms).unwrap_or(0);
    if current.state != TxnState::Ongoing || now_ms < due {
        return None;
    }
    let mut aborting = bumped(current, fresh_id).ok()?;
    aborting.state = TxnState::PrepareAbort;
    Some(aborting)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pe(producer_id: i64, producer_epoch: i16) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch {
            producer_id,
            producer_epoch,
        }
    }

    fn parts(names: &[(&str, u32)]) -> BTreeSet<TxnPartition> {
        names.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    fn ongoing() -> TxnMetadata {
        let empty = first_init("t", 7, 60_000);
        add_partitions(&empty, pe(7, 0), &parts(&[("a", 0), ("b", 1)]), 100)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_transaction_runs_from_empty_to_complete_commit() {
        let open = ongoing();
        assert_eq!(open.state, TxnState::Ongoing);
        assert_eq!(open.txn_start_ms, 100);
        assert_eq!(open.partitions, parts(&[("a", 0), ("b", 1)]));
        // Adding what is already in stores nothing; adding more extends.
        assert_eq!(
            add_partitions(&open, pe(7, 0), &parts(&[("a", 0)]), 200),
            Ok(None)
        );
        let more = add_partitions(&open, pe(7, 0), &parts(&[("c", 2)]), 200)
            .unwrap()
            .unwrap();
        assert_eq!(more.partitions.len(), 3);
        assert_eq!(more.txn_start_ms, 100, "the start stays the first add's");
        let EndStep::Prepare(prepared) = end(&more, pe(7, 0), true).unwrap() else {
            panic!("an ongoing transaction prepares");
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        let done = complete(&prepared).unwrap();
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
        assert_eq!(end(&done, pe(7, 0), true), Ok(EndStep::AlreadyDone));
        assert_eq!(
            end(&done, pe(7, 0), false).unwrap_err().code,
            ErrorCode::InvalidTxnState
        );
        // The next transaction starts afresh with the same epoch (transaction version 1).
        let next = add_partitions(&done, pe(7, 0), &parts(&[("z", 0)]), 900)
            .unwrap()
            .unwrap();
        assert_eq!(next.partitions, parts(&[("z", 0)]));
        assert_eq!(next.txn_start_ms, 900);
        assert_eq!(next.producer_epoch, 0);
    }

    #[test]
    fn verification_holds_only_the_partitions_of_the_open_transaction() {
        let open = ongoing();
        let asked = parts(&[("a", 0), ("c", 0)]);
        assert_eq!(
            verify_partitions(&open, pe(7, 0), &asked).unwrap(),
            vec![
                (("a".to_string(), 0), None),
                (("c".to_string(), 0), Some(ErrorCode::TransactionAbortable))
            ]
        );
        // Another producer id, or another epoch, refuses every partition.
        let refused = |m: &TxnMetadata, p| verify_partitions(m, p, &asked).unwrap_err().code;
        assert_eq!(
            refused(&open, pe(8, 0)),
            ErrorCode::InvalidProducerIdMapping
        );
        assert_eq!(refused(&open, pe(7, 1)), ErrorCode::ProducerFenced);
        // While the markers are written: retry.
        let EndStep::Prepare(aborting) = end(&open, pe(7, 0), false).unwrap() else {
            panic!("an ongoing transaction prepares");
        };
        assert_eq!(
            refused(&aborting, pe(7, 0)),
            ErrorCode::ConcurrentTransactions
        );
        // Once the abort is complete no partition is held: a late produce of the aborted
        // transaction is TRANSACTION_ABORTABLE, though "a" was in it.
        let aborted = complete(&aborting).unwrap();
        assert!(verify_partitions(&aborted, pe(7, 0), &parts(&[("a", 0)]))
            .unwrap()
            .iter()
            .all(|(_, e)| *e == Some(ErrorCode::TransactionAbortable)));
        let empty = first_init("t", 7, 60_000);
        assert_eq!(
            verify_partitions(&empty, pe(7, 0), &parts(&[("a", 0)])).unwrap()[0].1,
            Some(ErrorCode::TransactionAbortable)
        );
    }

    #[test]
    fn requests_while_markers_are_written_are_concurrent_transactions() {
        let EndStep::Prepare(prepared) = end(&ongoing(), pe(7, 0), false).unwrap() else {
            panic!()
        };
        for refusal in [
            add_partitions(&prepared, pe(7, 0), &parts(&[("a", 0)]), 1).unwrap_err(),
            end(&prepared, pe(7, 0), false).unwrap_err(),
            init(&prepared, 1000, None, || None).unwrap_err(),
        ] {
            assert_eq!(refusal.code, ErrorCode::ConcurrentTransactions);
        }
        assert_eq!(
            end(&prepared, pe(7, 0), true).unwrap_err().code,
            ErrorCode::InvalidTxnState,
            "committing an aborting transaction"
        );
    }

    #[test]
    fn an_old_epoch_is_fenced_and_another_id_is_not_the_mapping() {
        let open = ongoing();
        assert_eq!(
            add_partitions(&open, pe(7, 1), &parts(&[("a", 0)]), 1)
                .unwrap_err()
                .code,
            ErrorCode::ProducerFenced
        );
        assert_eq!(
            end(&open, pe(8, 0), true).unwrap_err().code,
            ErrorCode::InvalidProducerIdMapping
        );
        let empty = first_init("t", 7, 1000);
        assert_eq!(
            end(&empty, pe(7, 0), true).unwrap_err().code,
            ErrorCode::InvalidTxnState
        );
    }

    #[test]
    fn init_on_an_open_transaction_fences_it_and_aborts_first() {
        let open = ongoing();
        let InitStep::AbortFirst(aborting) = init(&open, 1000, None, || None).unwrap() else {
            panic!("an open transaction is aborted first");
        };
        assert_eq!(aborting.state, TxnState::PrepareAbort);
        assert_eq!(aborting.producer_epoch, 1, "the zombie's epoch 0 is fenced");
        assert_eq!(aborting.partitions, open.partitions);
        assert_eq!(
            end(&aborting, pe(7, 0), true).unwrap_err().code,
            ErrorCode::ProducerFenced
        );
        let aborted = complete(&aborting).unwrap();
        let InitStep::Store(ready) = init(&aborted, 1000, None, || None).unwrap() else {
            panic!()
        };
        assert_eq!((ready.producer_epoch, ready.last_producer_epoch), (2, 1));
        assert_eq!(ready.state, TxnState::Empty);
        // KIP-360: the retry of that InitProducerId (naming the epoch it replaced) is
        // answered the same; an unrelated epoch is fenced.
        assert_eq!(
            init(&ready, 1000, Some(pe(7, 1)), || None),
            Ok(InitStep::Store(ready.clone()))
        );
        assert_eq!(
            init(&ready, 1000, Some(pe(7, 0)), || None)
                .unwrap_err()
                .code,
            ErrorCode::ProducerFenced
        );
    }

    #[test]
    fn an_exhausted_epoch_gets_a_fresh_producer_id() {
        let mut old = first_init("t", 7, 1000);
        old.producer_epoch = i16::MAX - 1;
        let InitStep::Store(next) = init(&old, 1000, None, || Some(99)).unwrap() else {
            panic!()
        };
        assert_eq!((next.producer_id, next.producer_epoch), (99, 0));
    }

    #[test]
    fn a_transaction_times_out_into_an_abort_with_the_epoch_bumped() {
        let open = ongoing();
        assert_eq!(time_out(&open, 100 + 59_999, || None), None);
        let aborting = time_out(&open, 100 + 60_000, || None).unwrap();
        assert_eq!(aborting.state, TxnState::PrepareAbort);
        assert_eq!(aborting.producer_epoch, 1);
        assert_eq!(time_out(&first_init("t", 7, 10), u64::MAX, || None), None);
    }

    #[test]
    fn timeouts_outside_the_maximum_are_refused() {
        assert!(check_timeout(60_000).is_ok());
        for bad in [0, -1, TRANSACTION_MAX_TIMEOUT_MS + 1] {
            assert_eq!(
                check_timeout(bad).unwrap_err().code,
                ErrorCode::InvalidTransactionTimeout
            );
        }
    }
}
