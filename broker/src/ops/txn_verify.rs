//! KIP-890 part 1 (Kafka 3.6+, `transaction.partition.verification.enable`): before a
//! partition leader appends the first transactional batch of a producer that has no
//! transaction open on the partition, it asks the producer's transaction coordinator whether
//! the partition is in the producer's open transaction. Without the check a late produce of
//! a transaction that has ended (a retry over another connection, a request stuck in a
//! socket) opens a transaction the coordinator never heard of: it hangs the last stable
//! offset until the producer's next marker, and that marker then commits or aborts it with
//! a later transaction (KAFKA-17754's produce side; Kafka's `ReplicaManager
//! .handleProduceAppend`, `AddPartitionsToTxnManager`, `UnifiedLog
//! .maybeStartTransactionVerification`).
//!
//! The leader takes a guard from the partition's producer state first, asks the coordinator
//! (in-process when this broker coordinates the id, else over `POST
//! /internal/v1/txn-verify`, where Kafka sends AddPartitionsToTxn v4 with `verifyOnly`), and
//! appends only with that guard; any transactional batch or marker of the producer appended
//! meanwhile spends it, so a verification that an abort marker overtook lets nothing in.
//!
//! The coordinator's answers reach a client of produce v3-v9 as Kafka maps them for clients
//! before v11: TRANSACTION_ABORTABLE (the partition is not in the open transaction) is
//! INVALID_TXN_STATE, PRODUCER_FENCED is INVALID_PRODUCER_EPOCH, and the answers that say
//! "ask again" (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) are NOT_ENOUGH_REPLICAS, which a producer
//! retries without a metadata refresh.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tidewater_kafka_model::ErrorCode;

use crate::broker::Broker;
use crate::storage::producer_state::Verification;
use crate::storage::ProducerStamp;
use crate::txn::state::{ProducerIdAndEpoch, TxnPartition, TxnRefusal};
use crate::txn::TransactionCoordinator;

/// How long a leader waits for the coordinator's answer before it answers the producer with
/// a retriable error.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// `POST /internal/v1/txn-verify`: is each partition in the producer's open transaction?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyRequest {
    /// The producer's `transactional.id` (from the produce request).
    pub transactional_id: String,
    /// The batch's producer id.
    pub producer_id: i64,
    /// The batch's producer epoch.
    pub producer_epoch: i16,
    /// The partitions to verify.
    pub partitions: Vec<TxnPartition>,
}

/// The coordinator's answer: an error for the whole request (Kafka's name), or one per
/// partition (`None`: in the open transaction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyAnswer {
    /// The error for every partition, when the request as a whole was refused.
    pub error: Option<String>,
    /// Why, when refused.
    pub message: Option<String>,
    /// One outcome per partition when not refused.
    pub partitions: Vec<(TxnPartition, Option<String>)>,
}

impl VerifyAnswer {
    fn of(result: Result<Vec<(TxnPartition, Option<ErrorCode>)>, TxnRefusal>) -> VerifyAnswer {
        match result {
            Ok(partitions) => VerifyAnswer {
                error: None,
                message: None,
                partitions: partitions
                    .into_iter()
                    .map(|(p, e)| (p, e.map(|e| e.name().to_string())))
                    .collect(),
            },
            Err(refusal) => VerifyAnswer {
                error: Some(refusal.code.name().to_string()),
                message: Some(refusal.message),
                partitions: Vec::new(),
            },
        }
    }
}

/// The coordinator's side of `POST /internal/v1/txn-verify`.
pub async fn answer(
    transactions: &Arc<TransactionCoordinator>,
    request: VerifyRequest,
) -> VerifyAnswer {
    let producer = ProducerIdAndEpoch {
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
    };
    let partitions: BTreeSet<TxnPartition> = request.partitions.into_iter().collect();
    VerifyAnswer::of(
        transactions
            .verify_partitions(&request.transactional_id, producer, &partitions)
            .await,
    )
}

/// A produce the verification refused: Kafka's code as a produce v3-v9 client gets it, and
/// the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    /// The error code of the partition's produce answer.
    pub code: ErrorCode,
    /// Why.
    pub message: String,
}

/// The leader's verification of a produce of `stamp`'s batch to `topic`/`index` by
/// `transactional_id` (module docs): `Verification::Off` when nothing is checked (not a
/// transactional data batch, or verification disabled), else the guard to append with.
pub async fn verify_produce(
    broker: &Broker,
    transactions: &Arc<TransactionCoordinator>,
    transactional_id: &str,
    topic: &str,
    index: u32,
    stamp: ProducerStamp,
) -> Result<Verification, Unverified> {
    if !broker.config.transaction_partition_verification_enable
        || !stamp.kind.transactional()
        || stamp.kind.control()
    {
        return Ok(Verification::Off);
    }
    // An unknown partition is refused by the produce itself.
    let Ok(partition) = broker.topics.partition(topic, index) else {
        return Ok(Verification::Off);
    };
    if broker
        .config
        .bugs
        .on(crate::bugs::Bug::TxnStaleEpochAccepted)
    {
        // Deliberate bug `txn.stale.epoch.accepted`: a batch of an epoch older than the
        // producer's here is taken for the current producer's before any check, the
        // coordinator's verification included (`ops::produce::produce_records` restamps it).
        let state = partition.lock();
        let stale = state
            .log
            .producers()
            .entry(stamp.producer_id)
            .is_some_and(|e| stamp.producer_epoch < e.producer_epoch);
        if stale {
            return Ok(Verification::Off);
        }
    }
    let Some(guard) = partition.lock().log.start_verification(stamp.producer_id) else {
        // Its transaction is open here: the coordinator verified it when it opened.
        return Ok(Verification::Guard(None));
    };
    let asked = VerifyRequest {
        transactional_id: transactional_id.to_string(),
        producer_id: stamp.producer_id,
        producer_epoch: stamp.producer_epoch,
        partitions: vec![(topic.to_string(), index)],
    };
    let answer = ask_coordinator(broker, transactions, asked).await;
    let error = match (answer.error, answer.partitions.first()) {
        (Some(error), _) => Some((error, answer.message.unwrap_or_default())),
        (None, Some((_, None))) => None,
        (None, Some((_, Some(error)))) => Some((error.clone(), String::new())),
        (None, None) => Some((
            ErrorCode::UnknownServerError.name().to_string(),
            "the coordinator answered for no partition".to_string(),
        )),
    };
    match error {
        None => Ok(Verification::Guard(Some(guard))),
        Some((name, message)) => Err(for_producer(
            ErrorCode::from_name(&name).unwrap_or(ErrorCode::UnknownServerError),
            &message,
        )),
    }
}

/// The coordinator's answer as a produce v3-v9 client gets it (module docs; Kafka's
/// `ReplicaManager.handleProduceAppend` and `AddPartitionsToTxnManager`).
pub fn for_producer(code: ErrorCode, message: &str) -> Unverified {
    let because = |m: &str| {
        if message.is_empty() {
            m.to_string()
        } else {
            format!("{m}: {message}")
        }
    };
    match code {
        ErrorCode::TransactionAbortable => Unverified {
            code: ErrorCode::InvalidTxnState,
            message: because("Partition was not added to the transaction"),
        },
        ErrorCode::ProducerFenced => Unverified {
            code: ErrorCode::InvalidProducerEpoch,
            message: because("the producer's epoch is fenced at its transaction coordinator"),
        },
        ErrorCode::ConcurrentTransactions
        | ErrorCode::NetworkException
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator => Unverified {
            code: ErrorCode::NotEnoughReplicas,
            message: format!(
                "Unable to verify the partition has been added to the transaction. Underlying \
                 error: {}{}",
                code.name(),
                if message.is_empty() {
                    String::new()
                } else {
                    format!(" ({message})")
                }
            ),
        },
        other => Unverified {
            code: other,
            message: because("transaction verification failed"),
        },
    }
}

/// Asks the transactional id's coordinator: this broker's own, or the one leading the id's
/// `__transaction_state` partition over HTTP. No answer is NETWORK_EXCEPTION.
async fn ask_coordinator(
    broker: &Broker,
    transactions: &Arc<TransactionCoordinator>,
    request: VerifyRequest,
) -> VerifyAnswer {
    let refused = |code: ErrorCode, message: String| VerifyAnswer {
        error: Some(code.name().to_string()),
        message: Some(message),
        partitions: Vec::new(),
    };
    let found = match transactions
        .find_coordinator(&request.transactional_id)
        .await
    {
        Ok(found) => found,
        Err(refusal) => return refused(refusal.code, refusal.message),
    };
    let Some(coordinator) = found.broker_id else {
        return refused(
            ErrorCode::CoordinatorNotAvailable,
            format!(
                "__transaction_state partition {} has no leader",
                found.partition
            ),
        );
    };
    if coordinator == broker.config.broker_id {
        return answer(transactions, request).await;
    }
    let Some(cluster) = &broker.cluster else {
        return answer(transactions, request).await;
    };
    let address = cluster
        .metadata()
        .brokers
        .iter()
        .find(|b| b.id == coordinator)
        .map(|b| b.address.clone());
    let Some(address) = address else {
        return refused(
            ErrorCode::CoordinatorNotAvailable,
            format!("broker {coordinator} is not in the metadata"),
        );
    };
    let url = format!("{}/internal/v1/txn-verify", address.trim_end_matches('/'));
    let sent = cluster
        .http()
        .post(&url)
        .timeout(VERIFY_TIMEOUT)
        .json(&request)
        .send()
        .await;
    let answered = match sent {
        Ok(response) if response.status().is_success() => response
            .json::<VerifyAnswer>()
            .await
            .map_err(|e| e.to_string()),
        Ok(response) => Err(format!("HTTP {}", response.status())),
        Err(e) => Err(e.to_string()),
    };
    answered.unwrap_or_else(|why| {
        refused(
            ErrorCode::NetworkException,
            format!("no answer from the coordinator at {url}: {why}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinators_answers_reach_old_producers_as_kafka_maps_them() {
        let mapped = |code| for_producer(code, "").code;
        assert_eq!(
            mapped(ErrorCode::TransactionAbortable),
            ErrorCode::InvalidTxnState
        );
        assert_eq!(
            mapped(ErrorCode::ProducerFenced),
            ErrorCode::InvalidProducerEpoch
        );
        for retriable in [
            ErrorCode::ConcurrentTransactions,
            ErrorCode::NetworkException,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::NotCoordinator,
        ] {
            let unverified = for_producer(retriable, "");
            assert_eq!(unverified.code, ErrorCode::NotEnoughReplicas);
            assert!(
                unverified.message.contains(retriable.name()),
                "{}",
                unverified.message
            );
        }
        assert_eq!(
            mapped(ErrorCode::InvalidProducerIdMapping),
            ErrorCode::InvalidProducerIdMapping
        );
        assert_eq!(
            for_producer(ErrorCode::TransactionAbortable, "").message,
            "Partition was not added to the transaction"
        );
    }
}
