//! The consumer group APIs on the same [`crate::group::GroupCoordinator`] as
//! `/v1/groups`: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch. Only the `consumer` protocol type is served; members' subscriptions and
//! assignments travel in Kafka's ConsumerProtocol encodings, and the group leader assigns
//! (client-side assignment, as in Kafka's classic protocol).

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tidewater_kafka_model::{consumer_protocol, ErrorCode};

use super::errors::{code, group_code, of_group};
use super::{reply, topic_text, wire, ConnectionError, KafkaContext, Reply, Request};
use crate::error::{ApiError, ErrorKind};
use crate::group::assignor::{Assignment, TopicPartition};
use crate::group::state::{JoinRequest, MAX_POLL_INTERVAL_DEFAULT_MS, SUBSCRIPTION_TOPICS_MAX};
use crate::group::{GroupError, GroupErrorKind};

/// The only protocol type served.
const CONSUMER: &str = "consumer";

fn text(s: &StrBytes) -> String {
    s.as_str().to_string()
}

/// The `HOST:PORT` of broker `id`'s Kafka listener, from the metadata.
fn kafka_endpoint(context: &KafkaContext, id: u32) -> Option<(String, i32)> {
    let address = match &context.broker.cluster {
        Some(cluster) => cluster
            .metadata()
            .brokers
            .iter()
            .find(|b| b.id == id && !b.fenced)?
            .kafka_address
            .clone()?,
        None => context.advertised.clone(),
    };
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// Where `key`'s group is coordinated, as (node, host, port), or the error to answer.
async fn locate(context: &KafkaContext, key: &str) -> Result<(i32, String, i32), (i16, String)> {
    let info = context
        .coordinator
        .find_coordinator(key)
        .await
        .map_err(|e| of_group(&e))?;
    let not_available = || {
        (
            group_code(GroupErrorKind::CoordinatorNotAvailable),
            format!("the coordinator of {key:?} has no leader or no Kafka listener yet"),
        )
    };
    let id = info.broker_id.ok_or_else(not_available)?;
    let (host, port) = kafka_endpoint(context, id).ok_or_else(not_available)?;
    Ok((id as i32, host, port))
}

/// Where `transactional_id` is coordinated, as (node, host, port), or the error to answer.
async fn locate_transaction(
    context: &KafkaContext,
    transactional_id: &str,
) -> Result<(i32, String, i32), (i16, String)> {
    let info = context
        .transactions
        .find_coordinator(transactional_id)
        .await
        .map_err(|refusal| (refusal.code.code(), refusal.message))?;
    let not_available = || {
        (
            group_code(GroupErrorKind::CoordinatorNotAvailable),
            format!(
                "the coordinator of {transactional_id:?} has no leader or no Kafka listener yet"
            ),
        )
    };
    let id = info.broker_id.ok_or_else(not_available)?;
    let (host, port) = kafka_endpoint(context, id).ok_or_else(not_available)?;
    Ok((id as i32, host, port))
}

/// FindCoordinator for groups (key type 0) and transactions (key type 1).
pub async fn find_coordinator(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: FindCoordinatorRequest = request.decode()?;
    let keys: Vec<String> = if version >= 4 {
        body.coordinator_keys.iter().map(text).collect()
    } else {
        vec![text(&body.key)]
    };
    let mut coordinators = Vec::with_capacity(keys.len());
    for key in keys {
        let located = match body.key_type {
            0 => locate(context, &key).await,
            1 => locate_transaction(context, &key).await,
            other => Err((
                code(ErrorKind::InvalidRequest),
                format!("unknown coordinator key type {other}"),
            )),
        };
        let coordinator = Coordinator::default().with_key(wire(key));
        coordinators.push(match located {
            Ok((id, host, port)) => coordinator
                .with_node_id(BrokerId(id))
                .with_host(wire(host))
                .with_port(port),
            Err((code, message)) => coordinator
                .with_node_id(BrokerId(-1))
                .with_host(wire(""))
                .with_port(-1)
                .with_error_code(code)
                .with_error_message(Some(wire(message))),
        });
    }
    let mut response = FindCoordinatorResponse::default();
    if version < 4 {
        let only = coordinators.pop().expect("one key below v4");
        response = response
            .with_error_code(only.error_code)
            .with_error_message(only.error_message)
            .with_node_id(only.node_id)
            .with_host(only.host)
            .with_port(only.port);
    } else {
        response = response.with_coordinators(coordinators);
    }
    Ok(reply(response))
}

fn group_error(error: GroupError) -> (i16, String) {
    of_group(&error)
}

/// JoinGroup: the subscription is read from the first protocol's metadata; the protocol
/// names are the assignors offered. Static membership (`group.instance.id`) is refused with
/// UNSUPPORTED_VERSION.
pub async fn join_group(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let client_id = request
        .header
        .client_id
        .as_ref()
        .map_or("consumer".to_string(), text);
    let body: JoinGroupRequest = request.decode()?;
    let group_id = text(&body.group_id.0);
    let member_id = text(&body.member_id);
    let failed = |code: i16| {
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_member_id(body.member_id.clone())
            // Kafka's error answers carry no protocol (null, not "").
            .with_protocol_name(None)
    };
    if body.group_instance_id.is_some() {
        return Ok(reply(failed(code(ErrorKind::UnsupportedVersion))));
    }
    if text(&body.protocol_type) != CONSUMER || body.protocols.is_empty() {
        return Ok(reply(failed(group_code(
            GroupErrorKind::InconsistentGroupProtocol,
        ))));
    }
    let mut topics = match consumer_protocol::decode_subscription(&body.protocols[0].metadata) {
        Ok(topics) => topics,
        Err(_) => {
            return Ok(reply(failed(group_code(
                GroupErrorKind::InconsistentGroupProtocol,
            ))))
        }
    };
    topics.sort_unstable();
    topics.dedup();
    if topics.len() > SUBSCRIPTION_TOPICS_MAX {
        return Ok(reply(failed(code(ErrorKind::InvalidRequest))));
    }
    let session_timeout_ms = u64::try_from(body.session_timeout_ms).unwrap_or(0);
    let rebalance_timeout_ms = if version >= 1 {
        u64::try_from(body.rebalance_timeout_ms).unwrap_or(MAX_POLL_INTERVAL_DEFAULT_MS)
    } else {
        session_timeout_ms
    };
    let join = JoinRequest {
        member_id: (!member_id.is_empty()).then_some(member_id),
        client_id,
        topics,
        assignors: body.protocols.iter().map(|p| text(&p.name)).collect(),
        session_timeout_ms,
        max_poll_interval_ms: rebalance_timeout_ms,
    };
    if version >= 4 && join.member_id.is_none() {
        // KIP-394: from v4 a new member is given its id and joins again with it, as Kafka's
        // GroupCoordinator answers (`requireKnownMemberId`).
        return Ok(reply(
            match context.coordinator.require_member_id(&group_id, join).await {
                Ok(id) => failed(ErrorCode::MemberIdRequired.code()).with_member_id(wire(id)),
                Err(error) => failed(group_error(error).0),
            },
        ));
    }
    match context.coordinator.join(&group_id, join).await {
        Ok(result) => {
            let members = result
                .members
                .iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(wire(m.member_id.clone()))
                        .with_metadata(consumer_protocol::encode_subscription(&m.topics))
                })
                .collect();
            Ok(reply(
                JoinGroupResponse::default()
                    .with_generation_id(result.generation as i32)
                    // The protocol type is in the answer from v7.
                    .with_protocol_type((version >= 7).then(|| wire(CONSUMER)))
                    .with_protocol_name(Some(wire(result.protocol)))
                    .with_leader(wire(result.leader_id))
                    .with_member_id(wire(result.member_id))
                    .with_members(members),
            ))
        }
        Err(error) => Ok(reply(failed(group_error(error).0))),
    }
}

fn generation(generation_id: i32) -> Result<u64, GroupError> {
    u64::try_from(generation_id).map_err(|_| GroupError::Group {
        kind: GroupErrorKind::IllegalGeneration,
        message: format!("generation {generation_id} is negative"),
    })
}

/// SyncGroup: the leader's assignments (ConsumerProtocolAssignment per member) are stored;
/// every member gets its own back in the same encoding.
pub async fn sync_group(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: SyncGroupRequest = request.decode()?;
    let group_id = text(&body.group_id.0);
    let member_id = text(&body.member_id);
    let outcome = async {
        let generation = generation(body.generation_id)?;
        let assignment = if body.assignments.is_empty() {
            None
        } else {
            let mut assignment = Assignment::new();
            for member in &body.assignments {
                // Kafka's coordinator keeps assignments as opaque bytes; an empty one is a
                // member given nothing, as the consumer reads it.
                if member.assignment.is_empty() {
                    assignment.insert(text(&member.member_id), Vec::new());
                    continue;
                }
                let partitions =
                    consumer_protocol::decode_assignment(&member.assignment).map_err(|e| {
                        GroupError::Api(ApiError::invalid_request(format!(
                            "assignment of {}: {e}",
                            text(&member.member_id)
                        )))
                    })?;
                assignment.insert(text(&member.member_id), partitions);
            }
            Some(assignment)
        };
        context
            .coordinator
            .sync(&group_id, &member_id, generation, assignment)
            .await
    }
    .await;
    Ok(reply(match outcome {
        Ok(result) => SyncGroupResponse::default()
            .with_protocol_type(body.protocol_type.clone())
            .with_protocol_name(body.protocol_name.clone())
            .with_assignment(consumer_protocol::encode_assignment(&result.assignment)),
        Err(error) => SyncGroupResponse::default()
            .with_error_code(group_error(error).0)
            .with_assignment(Bytes::new()),
    }))
}

/// Heartbeat. Kafka's clients heartbeat from a background thread and enforce
/// `max.poll.interval.ms` themselves (leaving the group), so every heartbeat counts as polled.
pub async fn heartbeat(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: HeartbeatRequest = request.decode()?;
    let outcome = match generation(body.generation_id) {
        Ok(generation) => {
            context
                .coordinator
                .heartbeat(
                    &text(&body.group_id.0),
                    &text(&body.member_id),
                    generation,
                    true,
                )
                .await
        }
        Err(e) => Err(e),
    };
    let error_code = outcome.err().map_or(0, |e| group_error(e).0);
    Ok(reply(
        HeartbeatResponse::default().with_error_code(error_code),
    ))
}

/// LeaveGroup: one member (v0-v2) or a batch (v3+, each answered).
pub async fn leave_group(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: LeaveGroupRequest = request.decode()?;
    let group_id = text(&body.group_id.0);
    if version < 3 {
        let outcome = context
            .coordinator
            .leave(&group_id, &text(&body.member_id))
            .await;
        let error_code = outcome.err().map_or(0, |e| group_error(e).0);
        return Ok(reply(
            LeaveGroupResponse::default().with_error_code(error_code),
        ));
    }
    let mut members = Vec::with_capacity(body.members.len());
    for member in &body.members {
        let outcome = context
            .coordinator
            .leave(&group_id, &text(&member.member_id))
            .await;
        members.push(
            MemberResponse::default()
                .with_member_id(member.member_id.clone())
                .with_group_instance_id(member.group_instance_id.clone())
                .with_error_code(outcome.err().map_or(0, |e| group_error(e).0)),
        );
    }
    Ok(reply(LeaveGroupResponse::default().with_members(members)))
}

/// OffsetCommit: all the request's offsets in one commit, answered once in the offsets
/// topic's HW; every partition carries the commit's outcome.
pub async fn offset_commit(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: OffsetCommitRequest = request.decode()?;
    let group_id = text(&body.group_id.0);
    let member_id = text(&body.member_id);
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
    let (offsets, refused) = match commit_entries(entries) {
        Ok(offsets) => (offsets, None),
        Err(message) => (
            Vec::new(),
            Some(GroupError::Api(ApiError::new(
                ErrorKind::OffsetOutOfRange,
                message,
            ))),
        ),
    };
    let outcome = match refused {
        Some(error) => Err(error),
        None => {
            let member = (!member_id.is_empty()).then_some(member_id.as_str());
            context
                .coordinator
                .commit(
                    &group_id,
                    member,
                    i64::from(body.generation_id_or_member_epoch),
                    offsets,
                )
                .await
        }
    };
    let error_code = outcome.err().map_or(0, |e| group_error(e).0);
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error_code)
                        })
                        .collect(),
                )
        })
        .collect();
    Ok(reply(OffsetCommitResponse::default().with_topics(topics)))
}

/// The offsets of an OffsetCommit or TxnOffsetCommit as (partition, offset, metadata), from
/// each entry's topic, partition index, offset and metadata; or why an entry is refused (a
/// negative partition or offset).
pub(super) fn commit_entries<'a>(
    entries: impl Iterator<Item = (String, i32, i64, Option<&'a StrBytes>)>,
) -> Result<Vec<(TopicPartition, u64, String)>, String> {
    entries
        .map(|(topic, partition, offset, metadata)| {
            match (u32::try_from(partition), u64::try_from(offset)) {
                (Ok(index), Ok(offset)) => Ok((
                    TopicPartition::new(topic, index),
                    offset,
                    metadata.map_or(String::new(), text),
                )),
                _ => Err(format!(
                    "offset {offset} of {topic}/{partition} is negative"
                )),
            }
        })
        .collect()
}

/// OffsetFetch (one group, v1-v7): the committed offsets asked for (all when the topic list
/// is null); a partition without one answers offset -1. With `require_stable` (v7, KIP-447:
/// a read_committed consumer asks so), a partition with offsets of a transaction not ended
/// yet answers UNSTABLE_OFFSET_COMMIT and offset -1, and the client retries.
pub async fn offset_fetch(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: OffsetFetchRequest = request.decode()?;
    let group_id = text(&body.group_id.0);
    let (committed, unstable) = match context
        .coordinator
        .fetch_offsets_and_unstable(&group_id)
        .await
    {
        Ok(found) => found,
        Err(error) => {
            return Ok(reply(
                OffsetFetchResponse::default().with_error_code(group_error(error).0),
            ))
        }
    };
    let wanted: Vec<(String, Vec<i32>)> = match &body.topics {
        Some(topics) => topics
            .iter()
            .map(|t| (topic_text(&t.name), t.partition_indexes.clone()))
            .collect(),
        None => {
            let mut all: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for tp in committed.keys() {
                all.entry(tp.topic.clone())
                    .or_default()
                    .push(tp.partition as i32);
            }
            all.into_iter().collect()
        }
    };
    let topics = wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|p| {
                    let tp = u32::try_from(p)
                        .ok()
                        .map(|index| TopicPartition::new(topic.clone(), index));
                    let found = tp.as_ref().and_then(|tp| committed.get(tp));
                    let answer = OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_leader_epoch(-1);
                    if body.require_stable && tp.is_some_and(|tp| unstable.contains(&tp)) {
                        return answer
                            .with_committed_offset(-1)
                            .with_metadata(Some(wire("")))
                            .with_error_code(ErrorCode::UnstableOffsetCommit.code());
                    }
                    match found {
                        Some(c) => answer
                            .with_committed_offset(c.offset as i64)
                            .with_metadata(Some(wire(c.metadata.clone()))),
                        None => answer
                            .with_committed_offset(-1)
                            .with_metadata(Some(wire(""))),
                    }
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(wire(topic)))
                .with_partitions(partitions)
        })
        .collect();
    Ok(reply(OffsetFetchResponse::default().with_topics(topics)))
}
