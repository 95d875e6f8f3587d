//! The group workload's coordinator calls over Kafka's protocol (`--client kafka
//! --workload group`): FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit and OffsetFetch of Kafka's classic consumer protocol, one request per call on
//! its own connection, encoded with the `kafka-protocol` crate. rskafka, which drives the
//! group's produces and fetches, has no consumer groups.
//!
//! The member that leads assigns, as in Kafka's client-side assignment: its JoinGroup answer
//! carries every member's subscription (ConsumerProtocolSubscription), and the partition
//! counts it needs come from Metadata. Failures classify as the HTTP group client's do
//! ([`crate::group`]): membership calls certainly change nothing the history records; a
//! commit is `info` unless the coordinator refused it before storing.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tidewater_kafka_model::{consumer_protocol, TopicPartition};

use crate::client::{first_answer, split_key, ClientError, ErrorCause, Outcome};
use crate::group::coordinator::{retry_when_moved, Coordinators};
use crate::group::{certain, commit_outcome, GroupClient, GroupSettings, Joined};
use crate::history::Key;
use crate::kafka::screaming_snake;
use crate::kafka_admin::{call, KafkaAdmin};

/// Versions used: the newest of each that Kafka 4 and the companion broker both serve,
/// without KIP-848's fields.
const FIND_COORDINATOR_VERSION: i16 = 3;
const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const LEAVE_GROUP_VERSION: i16 = 3;
const OFFSET_COMMIT_VERSION: i16 = 7;
const OFFSET_FETCH_VERSION: i16 = 6;

/// Kafka's MEMBER_ID_REQUIRED (KIP-394), answered to a new member's first JoinGroup.
const MEMBER_ID_REQUIRED: i16 = tidewater_kafka_model::ErrorCode::MemberIdRequired.code();

/// The coordinator calls of a group member over Kafka's protocol.
pub struct KafkaGroupClient {
    /// `HOST:PORT` of the brokers' Kafka listeners.
    bootstrap: Vec<String>,
    /// Metadata, for the leader's partition counts.
    admin: KafkaAdmin,
    /// Group -> (node, `HOST:PORT`) of its coordinator, as last found.
    coordinators: Coordinators<(String, String)>,
    /// Retries after the coordinator moved or was unreachable.
    retries: u32,
    /// Pause between them.
    retry_backoff: Duration,
    /// Bound on heartbeats, leaves, commits and offset fetches.
    request_timeout: Duration,
    /// Bound on joins and syncs, which wait for the rebalance round.
    long_poll_timeout: Duration,
}

fn wire(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// The broker's error for a non-zero code, named as Kafka names it.
fn refused(code: i16, node: &str, what: &str) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    let name = kafka_protocol::ResponseError::try_from_code(code).map_or_else(
        || format!("ERROR_{code}"),
        |e| screaming_snake(&format!("{e:?}")),
    );
    Err(ClientError {
        cause: ErrorCause::Broker { name, status: 0 },
        node: Some(node.to_string()),
        message: format!("{what} answered error code {code}"),
    })
}

impl KafkaGroupClient {
    /// A client for the brokers at `bootstrap`, with the HTTP group client's bounds: joins and
    /// syncs get `max_poll_interval_ms` + 6 s, the other calls `request_timeout_ms`.
    pub fn new(
        bootstrap: Vec<String>,
        config: &crate::client::ClientConfig,
        settings: &GroupSettings,
    ) -> KafkaGroupClient {
        let request_timeout = Duration::from_millis(config.request_timeout_ms);
        KafkaGroupClient {
            admin: KafkaAdmin::new(
                bootstrap.clone(),
                Duration::from_millis(config.metadata_timeout_ms),
            ),
            bootstrap,
            coordinators: Coordinators::new(),
            retries: config.retries.min(crate::client::RETRIES_MAX),
            retry_backoff: Duration::from_millis(config.retry_backoff_ms),
            request_timeout,
            long_poll_timeout: Duration::from_millis(
                config
                    .request_timeout_ms
                    .max(settings.max_poll_interval_ms + 6_000),
            ),
        }
    }

    /// The coordinator of `group`: FindCoordinator to each broker in turn.
    async fn coordinator(&self, group: &str) -> Result<(String, String), ClientError> {
        if let Some(found) = self.coordinators.get(group) {
            return Ok(found);
        }
        let request = FindCoordinatorRequest::default()
            .with_key(wire(group))
            .with_key_type(0);
        let request = &request;
        let found = first_answer(
            &self.bootstrap,
            "no Kafka brokers configured",
            |address| async move {
                let answer: FindCoordinatorResponse = call(
                    address,
                    ApiKey::FindCoordinator,
                    FIND_COORDINATOR_VERSION,
                    request,
                    self.request_timeout,
                )
                .await?;
                refused(answer.error_code, address, "FindCoordinator")?;
                if answer.node_id.0 < 0 {
                    return Err(ClientError {
                        cause: ErrorCause::NoLeader,
                        node: None,
                        message: format!("no coordinator for {group} yet"),
                    });
                }
                Ok((
                    format!("n{}", answer.node_id.0),
                    format!("{}:{}", answer.host.as_str(), answer.port),
                ))
            },
        )
        .await?;
        self.coordinators.remember(group, found.clone());
        Ok(found)
    }

    /// Sends `request` to `group`'s coordinator, looking it up again (at most `retries`
    /// times) when it moved or could not be reached; `check` turns the answer's error code
    /// into an error. Returns the answer and the coordinator's node.
    async fn to_coordinator<Req, Resp>(
        &self,
        group: &str,
        key: ApiKey,
        version: i16,
        request: &Req,
        check: impl Fn(&Resp) -> i16,
    ) -> Result<(Resp, String), ClientError>
    where
        Req: Encodable,
        Resp: Decodable + HeaderVersion,
    {
        let long_poll = matches!(key, ApiKey::JoinGroup | ApiKey::SyncGroup);
        let timeout = if long_poll {
            self.long_poll_timeout
        } else {
            self.request_timeout
        };
        let check = &check;
        retry_when_moved(
            &self.coordinators,
            group,
            self.retries,
            self.retry_backoff,
            || async move {
                let (node, address) = self.coordinator(group).await?;
                let answer: Resp = call(&address, key, version, request, timeout)
                    .await
                    .map_err(|e| ClientError {
                        node: Some(node.clone()),
                        ..e
                    })?;
                refused(check(&answer), &node, &format!("{key:?}"))?;
                Ok((answer, node))
            },
        )
        .await
    }

    /// Partition counts of `topics`, from Metadata.
    async fn partition_counts(&self, topics: &[String]) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for p in self.admin.metadata().await.unwrap_or_default() {
            if let Some((topic, _)) = split_key(&p.key) {
                if topics.iter().any(|t| t == topic) {
                    *counts.entry(topic.to_string()).or_insert(0) += 1;
                }
            }
        }
        counts
    }
}

fn generation_of(generation: u64) -> i32 {
    i32::try_from(generation).unwrap_or(i32::MAX)
}

impl GroupClient for KafkaGroupClient {
    async fn join(
        &self,
        group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> Outcome<Joined> {
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_session_timeout_ms(settings.session_timeout_ms as i32)
            .with_rebalance_timeout_ms(settings.max_poll_interval_ms as i32)
            .with_member_id(wire(member_id.unwrap_or("")))
            .with_protocol_type(wire("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(wire(&settings.assignor))
                .with_metadata(consumer_protocol::encode_subscription(topics))]);
        // KIP-394: a new member's first JoinGroup (v4 and later) is answered
        // MEMBER_ID_REQUIRED with the id to join with; Kafka's consumer joins again with it at
        // once, inside the same poll, and so does this one, inside the same rebalance op.
        let mut attempts = 0;
        let (answer, node) = loop {
            attempts += 1;
            let result = self
                .to_coordinator(
                    group,
                    ApiKey::JoinGroup,
                    JOIN_GROUP_VERSION,
                    &request,
                    |a: &JoinGroupResponse| match a.error_code {
                        MEMBER_ID_REQUIRED if attempts == 1 => 0,
                        code => code,
                    },
                )
                .await;
            match result {
                Ok((answer, _)) if answer.error_code == MEMBER_ID_REQUIRED => {
                    request = request.with_member_id(answer.member_id);
                }
                Ok(found) => break found,
                Err(e) => return Outcome::Fail(e),
            }
        };
        let leader = answer.leader == answer.member_id;
        let members: BTreeMap<String, Vec<String>> = answer
            .members
            .iter()
            .map(|m| {
                let topics =
                    consumer_protocol::decode_subscription(&m.metadata).unwrap_or_default();
                (m.member_id.as_str().to_string(), topics)
            })
            .collect();
        let partition_counts = if leader {
            let mut all: Vec<String> = members.values().flatten().cloned().collect();
            all.sort();
            all.dedup();
            self.partition_counts(&all).await
        } else {
            BTreeMap::new()
        };
        Outcome::Ok(Joined {
            generation: u64::try_from(answer.generation_id).unwrap_or(0),
            member_id: answer.member_id.as_str().to_string(),
            leader,
            members,
            partition_counts,
            node,
        })
    }

    async fn sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> Outcome<Vec<Key>> {
        let assignments = assignment
            .map(|a| {
                a.iter()
                    .map(|(member, keys)| {
                        let partitions: Vec<TopicPartition> = keys
                            .iter()
                            .filter_map(|k| split_key(k))
                            .map(|(topic, partition)| TopicPartition::new(topic, partition))
                            .collect();
                        SyncGroupRequestAssignment::default()
                            .with_member_id(wire(member))
                            .with_assignment(consumer_protocol::encode_assignment(&partitions))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_generation_id(generation_of(generation))
            .with_member_id(wire(member_id))
            .with_assignments(assignments);
        let result = self
            .to_coordinator(
                group,
                ApiKey::SyncGroup,
                SYNC_GROUP_VERSION,
                &request,
                |a: &SyncGroupResponse| a.error_code,
            )
            .await
            .map(|(answer, _)| {
                consumer_protocol::decode_assignment(&answer.assignment)
                    .map(|partitions| partitions.iter().map(|tp| tp.to_string()).collect())
                    .unwrap_or_default()
            });
        certain(result)
    }

    async fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        _polled: bool,
    ) -> Outcome<()> {
        // Kafka's coordinator has no notion of polls: its clients enforce
        // `max.poll.interval.ms` themselves, as the workload's member does.
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_generation_id(generation_of(generation))
            .with_member_id(wire(member_id));
        let result = self
            .to_coordinator(
                group,
                ApiKey::Heartbeat,
                HEARTBEAT_VERSION,
                &request,
                |a: &HeartbeatResponse| a.error_code,
            )
            .await;
        certain(result.map(|_| ()))
    }

    async fn leave(&self, group: &str, member_id: &str) -> Outcome<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(wire(member_id))
            ]);
        let result = self
            .to_coordinator(
                group,
                ApiKey::LeaveGroup,
                LEAVE_GROUP_VERSION,
                &request,
                |a: &LeaveGroupResponse| {
                    if a.error_code != 0 {
                        a.error_code
                    } else {
                        a.members.first().map_or(0, |m| m.error_code)
                    }
                },
            )
            .await;
        certain(result.map(|_| ()))
    }

    async fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> Outcome<String> {
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (key, offset) in offsets {
            if let Some((topic, partition)) = split_key(key) {
                by_topic.entry(topic).or_default().push(
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(partition as i32)
                        .with_committed_offset(*offset as i64),
                );
            }
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_generation_id_or_member_epoch(generation_of(generation))
            .with_member_id(wire(member_id))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(wire(topic)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let result = self
            .to_coordinator(
                group,
                ApiKey::OffsetCommit,
                OFFSET_COMMIT_VERSION,
                &request,
                |a: &OffsetCommitResponse| {
                    a.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .map(|p| p.error_code)
                        .find(|&c| c != 0)
                        .unwrap_or(0)
                },
            )
            .await
            .map(|(_, node)| node);
        commit_outcome(result)
    }

    async fn fetch_offsets(&self, group: &str) -> Outcome<BTreeMap<Key, u64>> {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(wire(group)))
            .with_topics(None);
        let result = self
            .to_coordinator(
                group,
                ApiKey::OffsetFetch,
                OFFSET_FETCH_VERSION,
                &request,
                |a: &OffsetFetchResponse| a.error_code,
            )
            .await
            .map(|(answer, _)| {
                answer
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().filter_map(move |p| {
                            let offset = u64::try_from(p.committed_offset).ok()?;
                            Some((
                                format!("{}/{}", t.name.0.as_str(), p.partition_index),
                                offset,
                            ))
                        })
                    })
                    .collect()
            });
        certain(result)
    }
}
