//! The transaction APIs a transactional producer sends to its coordinator
//! ([`crate::txn::TransactionCoordinator`]): AddPartitionsToTxn (v0–3, the client's form;
//! v4+ is the brokers' verification of KIP-890, not served), AddOffsetsToTxn (v0–3) and EndTxn
//! (v0–4; v5 belongs to transaction version 2, which this broker does not finalize, so
//! clients stay on version 1); and the one it sends to the group's coordinator,
//! TxnOffsetCommit (v0–3; v4+ belong to KIP-890), on [`crate::group::GroupCoordinator`].
//! Beside them the one a coordinator sends to partition leaders, WriteTxnMarkers (v1, the
//! only version Kafka 4 serves), over [`crate::ops::txn_markers::write_markers`].
//! InitProducerId with a transactional id is in [`super::producers`], FindCoordinator for
//! transactions in [`super::groups`].

use std::collections::BTreeSet;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, ProducerId, TopicName,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use tidewater_kafka_model::ErrorCode;

use super::errors::of_group;
use super::groups::commit_entries;
use super::{partition_index, reply, topic_text, ConnectionError, KafkaContext, Reply, Request};
use crate::group::offsets::OFFSETS_TOPIC;
use crate::ops::txn_markers::{write_markers, MarkerResult, TxnMarker};
use crate::txn::state::{ProducerIdAndEpoch, TxnRefusal};

/// PRODUCER_FENCED as a client of `version` understands it: Kafka answers
/// INVALID_PRODUCER_EPOCH to the versions before KIP-588 (`KafkaApis`: AddPartitionsToTxn and
/// EndTxn below v2, InitProducerId below v4).
pub fn fenced_for(code: ErrorCode, version: i16, first_with_fenced: i16) -> i16 {
    if code == ErrorCode::ProducerFenced && version < first_with_fenced {
        ErrorCode::InvalidProducerEpoch.code()
    } else {
        code.code()
    }
}

fn logged(api: &str, transactional_id: &str, refusal: &TxnRefusal) {
    tracing::debug!(api, transactional_id, error = %refusal.code, message = %refusal.message, "transaction request refused");
}

/// AddPartitionsToTxn: every partition must exist (the unknown ones answer
/// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, and none is added, as
/// Kafka's `handleAddPartitionsToTxnRequest`); then the coordinator adds them all or none.
pub async fn add_partitions_to_txn(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: AddPartitionsToTxnRequest = request.decode()?;
    let transactional_id = body.v3_and_below_transactional_id.0.as_str().to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: body.v3_and_below_producer_id.0,
        producer_epoch: body.v3_and_below_producer_epoch,
    };
    let mut asked: Vec<(String, i32)> = Vec::new();
    let mut unknown = BTreeSet::new();
    let mut partitions = BTreeSet::new();
    for topic in &body.v3_and_below_topics {
        let name = topic_text(&topic.name);
        let count = context.coordinator.partition_count(&name);
        for &p in &topic.partitions {
            asked.push((name.clone(), p));
            match (partition_index(p), count) {
                (Some(index), Some(count)) if index < count => {
                    partitions.insert((name.clone(), index));
                }
                _ => {
                    unknown.insert((name.clone(), p));
                }
            }
        }
    }
    let outcome: Result<(), TxnRefusal> = if unknown.is_empty() {
        context
            .transactions
            .add_partitions(&transactional_id, producer, &partitions)
            .await
    } else {
        Ok(())
    };
    if let Err(refusal) = &outcome {
        logged("AddPartitionsToTxn", &transactional_id, refusal);
    }
    let code_of = |tp: &(String, i32)| -> i16 {
        if !unknown.is_empty() {
            if unknown.contains(tp) {
                ErrorCode::UnknownTopicOrPartition.code()
            } else {
                ErrorCode::OperationNotAttempted.code()
            }
        } else {
            match &outcome {
                Ok(()) => 0,
                Err(refusal) => fenced_for(refusal.code, version, 2),
            }
        }
    };
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for tp in &asked {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.1)
            .with_partition_error_code(code_of(tp));
        match topics.last_mut() {
            Some(last) if topic_text(&last.name) == tp.0 => last.results_by_partition.push(result),
            _ => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(kafka_protocol::messages::TopicName(super::wire(
                        tp.0.clone(),
                    )))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    Ok(reply(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics),
    ))
}

/// AddOffsetsToTxn: adds the group's `__consumer_offsets` partition to the transaction
/// (Kafka's `handleAddOffsetsToTxnRequest`), so the transaction's marker reaches the offsets
/// its TxnOffsetCommit writes there.
pub async fn add_offsets_to_txn(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: AddOffsetsToTxnRequest = request.decode()?;
    let transactional_id = body.transactional_id.0.as_str().to_string();
    let group_id = body.group_id.0.as_str().to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: body.producer_id.0,
        producer_epoch: body.producer_epoch,
    };
    let error_code = match context.coordinator.offsets_partition_of(&group_id).await {
        Err(error) => of_group(&error).0,
        Ok(partition) => {
            let partitions = BTreeSet::from([(OFFSETS_TOPIC.to_string(), partition)]);
            match context
                .transactions
                .add_partitions(&transactional_id, producer, &partitions)
                .await
            {
                Ok(()) => 0,
                Err(refusal) => {
                    logged("AddOffsetsToTxn", &transactional_id, &refusal);
                    fenced_for(refusal.code, version, 2)
                }
            }
        }
    };
    Ok(reply(
        AddOffsetsToTxnResponse::default().with_error_code(error_code),
    ))
}

/// TxnOffsetCommit: the producer's offsets for the group, pending until its transaction ends
/// ([`crate::group::GroupCoordinator::txn_commit`]). A failed append answers as Kafka's
/// `GroupMetadataManager.storeOffsets` maps it, so the client retries what may be retried:
/// not enough replicas or a timeout is COORDINATOR_NOT_AVAILABLE, a lost leadership
/// NOT_COORDINATOR; an older producer epoch stays INVALID_PRODUCER_EPOCH (fenced).
pub async fn txn_offset_commit(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: TxnOffsetCommitRequest = request.decode()?;
    let group_id = body.group_id.0.as_str().to_string();
    let member_id = body.member_id.as_str().to_string();
    let entries = body.topics.iter().flat_map(|topic| {
        topic.partitions.iter().map(|p| {
            let name = topic_text(&topic.name);
            (
                name,
                p.partition_index,
                p.committed_offset,
                p.committed_metadata.as_ref(),
            )
        })
    });
    let (offsets, negative) = match commit_entries(entries) {
        Ok(offsets) => (offsets, None),
        Err(message) => {
            tracing::debug!(%group_id, %message, "transactional offset commit refused");
            (Vec::new(), Some(ErrorCode::InvalidCommitOffsetSize.code()))
        }
    };
    let error_code = match negative {
        Some(code) => code,
        None => {
            let member = (!member_id.is_empty()).then_some(member_id.as_str());
            let outcome = context
                .coordinator
                .txn_commit(
                    &group_id,
                    (body.producer_id.0, body.producer_epoch),
                    member,
                    i64::from(body.generation_id),
                    offsets,
                )
                .await;
            match outcome {
                Ok(()) => 0,
                Err(error) => {
                    let (code, message) = of_group(&error);
                    tracing::debug!(%group_id, code, %message, "transactional offset commit refused");
                    stored_offsets_code(code)
                }
            }
        }
    };
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error_code)
                        })
                        .collect(),
                )
        })
        .collect();
    Ok(reply(
        TxnOffsetCommitResponse::default().with_topics(topics),
    ))
}

/// Kafka's mapping of an offsets append's error (`GroupMetadataManager.storeOffsets`).
fn stored_offsets_code(code: i16) -> i16 {
    let is = |e: ErrorCode| code == e.code();
    if is(ErrorCode::UnknownTopicOrPartition)
        || is(ErrorCode::NotEnoughReplicas)
        || is(ErrorCode::NotEnoughReplicasAfterAppend)
        || is(ErrorCode::RequestTimedOut)
    {
        ErrorCode::CoordinatorNotAvailable.code()
    } else if is(ErrorCode::NotLeaderOrFollower) || is(ErrorCode::KafkaStorageError) {
        ErrorCode::NotCoordinator.code()
    } else if is(ErrorCode::MessageTooLarge) || is(ErrorCode::RecordListTooLarge) {
        ErrorCode::InvalidCommitOffsetSize.code()
    } else {
        code
    }
}

/// EndTxn: answered once the coordinator stored PrepareCommit or PrepareAbort.
pub async fn end_txn(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: EndTxnRequest = request.decode()?;
    let transactional_id = body.transactional_id.0.as_str().to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: body.producer_id.0,
        producer_epoch: body.producer_epoch,
    };
    let outcome = context
        .transactions
        .end_txn(&transactional_id, producer, body.committed)
        .await;
    let error_code = match &outcome {
        Ok(()) => 0,
        Err(refusal) => {
            logged("EndTxn", &transactional_id, refusal);
            fenced_for(refusal.code, version, 2)
        }
    };
    Ok(reply(EndTxnResponse::default().with_error_code(error_code)))
}

/// At most this many partitions in one WriteTxnMarkers request; a larger one is answered
/// INVALID_REQUEST for each of its partitions and writes nothing (the bounds pre-pass has
/// already held every count to the bytes that carry it).
pub const MARKER_PARTITIONS_MAX: usize = 10_000;

/// WriteTxnMarkers: each marker is written on the partitions this broker leads, as Kafka's
/// `handleWriteTxnMarkersRequest` appends them (a control batch per partition, acks=-1,
/// the request timeout), and answered per producer id and partition: UNKNOWN_TOPIC_OR_PARTITION
/// for a partition that does not exist, NOT_LEADER_OR_FOLLOWER where another broker leads,
/// and the append's errors (NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH, ...). Markers that
/// land on an offsets partition settle the transaction's pending offsets the next time the
/// group is read (the group coordinator reads them from the log, docs/kafka-protocol.md).
pub async fn write_txn_markers(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: WriteTxnMarkersRequest = request.decode()?;
    let partitions: usize = body
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .map(|t| t.partition_indexes.len())
        .sum();
    let mut answered: Vec<(i64, Vec<MarkerResult>)> = Vec::new();
    for marker in body.markers {
        let mut results = Vec::new();
        let mut asked = Vec::new();
        for topic in &marker.topics {
            let name = topic_text(&topic.name);
            for &index in &topic.partition_indexes {
                match partition_index(index) {
                    _ if partitions > MARKER_PARTITIONS_MAX => results.push((
                        (name.clone(), index.max(0) as u32),
                        Err(ErrorCode::InvalidRequest),
                    )),
                    Some(index) => asked.push((name.clone(), index)),
                    None => {
                        results.push(((name.clone(), 0), Err(ErrorCode::UnknownTopicOrPartition)))
                    }
                }
            }
        }
        if !asked.is_empty() {
            let one = TxnMarker {
                producer_id: marker.producer_id.0,
                producer_epoch: marker.producer_epoch,
                commit: marker.transaction_result,
                coordinator_epoch: marker.coordinator_epoch,
                partitions: asked,
            };
            results.extend(write_markers(&context.broker, one).await);
        }
        match answered
            .iter_mut()
            .find(|(id, _)| *id == marker.producer_id.0)
        {
            Some((_, earlier)) => earlier.extend(results),
            None => answered.push((marker.producer_id.0, results)),
        }
    }
    let markers = answered
        .into_iter()
        .map(|(producer_id, results)| {
            WritableTxnMarkerResult::default()
                .with_producer_id(ProducerId(producer_id))
                .with_topics(marker_topics(results))
        })
        .collect();
    Ok(reply(
        WriteTxnMarkersResponse::default().with_markers(markers),
    ))
}

/// One producer's partition results grouped by topic, in the order the topics came.
fn marker_topics(results: Vec<MarkerResult>) -> Vec<WritableTxnMarkerTopicResult> {
    let mut topics: Vec<WritableTxnMarkerTopicResult> = Vec::new();
    for ((topic, index), result) in results {
        let partition = WritableTxnMarkerPartitionResult::default()
            .with_partition_index(i32::try_from(index).unwrap_or(i32::MAX))
            .with_error_code(result.err().map_or(0, ErrorCode::code));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(TopicName(super::wire(topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_clients_hear_invalid_producer_epoch_for_a_fencing() {
        let fenced = ErrorCode::ProducerFenced;
        assert_eq!(
            fenced_for(fenced, 1, 2),
            ErrorCode::InvalidProducerEpoch.code()
        );
        assert_eq!(fenced_for(fenced, 2, 2), ErrorCode::ProducerFenced.code());
        assert_eq!(
            fenced_for(ErrorCode::ConcurrentTransactions, 0, 2),
            ErrorCode::ConcurrentTransactions.code()
        );
    }
}
