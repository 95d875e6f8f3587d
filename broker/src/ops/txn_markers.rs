//! Transaction markers (Kafka's WriteTxnMarkers, KIP-98): the coordinator's commit or abort of
//! one producer's transaction, written as a control batch of one record on the leader of each
//! of the transaction's partitions, through the ordinary leader append with acks=all (Kafka
//! appends markers with `requiredAcks = -1`, so `min.insync.replicas` applies). The marker
//! ends the producer's open transaction in the partition's producer state
//! ([`crate::storage::producer_state`]): the last stable offset moves past it once the HW
//! does, and an abort enters the partition's index of aborted transactions.
//!
//! The transaction coordinator ([`crate::txn`]) calls [`write_markers`] for the partitions
//! this broker leads and [`send_markers`] for the others' leaders
//! (`POST /internal/v1/txn-markers`); the Kafka listener serves WriteTxnMarkers over the same
//! [`write_markers`].

use serde::{Deserialize, Serialize};
use tidewater_kafka_model::ErrorCode;

use crate::broker::Broker;
use crate::ops::produce::{produce_records, Acks, ProduceInput};
use crate::storage::{ProducerStamp, Record, StampKind};

/// How long a marker waits for the ISR (Kafka: the coordinator's `request.timeout.ms`).
pub const MARKER_TIMEOUT_MS: u64 = 5_000;

/// One producer's marker for some partitions (an entry of Kafka's WriteTxnMarkersRequest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMarker {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// Its epoch (the coordinator's: equal to the producer's, or bumped by a fencing abort).
    pub producer_epoch: i16,
    /// Commit, or abort.
    pub commit: bool,
    /// The coordinator's epoch (its `__transaction_state` partition's leader epoch).
    pub coordinator_epoch: i32,
    /// The partitions, as (topic, index).
    pub partitions: Vec<(String, u32)>,
}

/// One partition's outcome: `Ok` once its marker is in the ISR, or Kafka's error.
pub type MarkerResult = ((String, u32), Result<(), ErrorCode>);

/// Kafka's control record of a marker: key version 0 and type (0 abort, 1 commit), value
/// version 0 and the coordinator epoch (`EndTransactionMarker`).
pub fn control_record(commit: bool, coordinator_epoch: i32, timestamp_ms: i64) -> Record {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    Record {
        key: Some(key),
        value,
        timestamp_ms,
    }
}

/// Writes `marker` on each of its partitions this broker leads, concurrently; answers one
/// result per partition (NOT_LEADER_OR_FOLLOWER where it does not lead, and the produce's
/// errors: NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH, ...).
pub async fn write_markers(broker: &Broker, marker: TxnMarker) -> Vec<MarkerResult> {
    let stamp = ProducerStamp {
        producer_id: marker.producer_id,
        producer_epoch: marker.producer_epoch,
        // Kafka writes control batches with base sequence -1; this log keeps sequences of
        // data batches only, and stores 0.
        sequence: 0,
        kind: if marker.commit {
            StampKind::Commit
        } else {
            StampKind::Abort
        },
    };
    if marker.producer_id < 0 || marker.producer_epoch < 0 {
        return marker
            .partitions
            .into_iter()
            .map(|tp| (tp, Err(ErrorCode::InvalidRequest)))
            .collect();
    }
    let writes = marker.partitions.into_iter().map(|(topic, index)| async move {
        let record = control_record(marker.commit, marker.coordinator_epoch, crate::clock::timestamp_ms());
        let input = ProduceInput {
            acks: Acks::All,
            timeout_ms: MARKER_TIMEOUT_MS,
            leader_epoch: None,
            records: vec![record],
            batch_bytes: 0,
            producer: Some(stamp),
            // Markers come from the coordinator, which needs no verification.
            verification: crate::storage::producer_state::Verification::Off,
        };
        let result = produce_records(broker, &topic, index, input)
            .await
            .map(|_| ())
            .map_err(|e| e.kind.kafka());
        if let Err(error) = result {
            tracing::debug!(%topic, index, %error, producer_id = stamp.producer_id, "marker not written");
        }
        ((topic, index), result)
    });
    futures::future::join_all(writes).await
}

/// Sends `marker` to the broker at `base_url` (its HTTP listener) over
/// `POST /internal/v1/txn-markers`; the answer is one result per partition, or why none came.
pub async fn send_markers(
    http: &reqwest::Client,
    base_url: &str,
    marker: &TxnMarker,
) -> Result<Vec<MarkerResult>, String> {
    let url = format!("{}/internal/v1/txn-markers", base_url.trim_end_matches('/'));
    let response = http
        .post(&url)
        .json(marker)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let answer: MarkersAnswer = response.json().await.map_err(|e| format!("{url}: {e}"))?;
    answer
        .partitions
        .into_iter()
        .map(|p| {
            let result = match p.error {
                None => Ok(()),
                Some(name) => {
                    Err(ErrorCode::from_name(&name).unwrap_or(ErrorCode::UnknownServerError))
                }
            };
            Ok(((p.topic, p.partition), result))
        })
        .collect()
}

/// The answer of `POST /internal/v1/txn-markers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkersAnswer {
    /// One entry per partition of the request.
    pub partitions: Vec<MarkerOutcome>,
}

/// One partition's outcome, with the error's Kafka name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerOutcome {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// Kafka's name of the error, `None` when the marker is written.
    pub error: Option<String>,
}

impl MarkersAnswer {
    /// The answer of `results`.
    pub fn of(results: Vec<MarkerResult>) -> MarkersAnswer {
        MarkersAnswer {
            partitions: results
                .into_iter()
                .map(|((topic, partition), result)| MarkerOutcome {
                    topic,
                    partition,
                    error: result.err().map(|e| e.name().to_string()),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_records_are_kafkas_end_transaction_markers() {
        let commit = control_record(true, 7, 5);
        assert_eq!(commit.key.as_deref(), Some(&[0, 0, 0, 1][..]));
        assert_eq!(commit.value, [0, 0, 0, 0, 0, 7]);
        let abort = control_record(false, 258, 5);
        assert_eq!(abort.key.as_deref(), Some(&[0, 0, 0, 0][..]));
        assert_eq!(abort.value, [0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn answers_carry_kafkas_names_and_read_back() {
        let answer = MarkersAnswer::of(vec![
            (("t".into(), 0), Ok(())),
            (("t".into(), 1), Err(ErrorCode::NotEnoughReplicas)),
        ]);
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json["partitions"][1]["error"], "NOT_ENOUGH_REPLICAS");
        assert_eq!(json["partitions"][0]["error"], serde_json::Value::Null);
    }
}
