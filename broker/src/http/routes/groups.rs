//! Consumer-group routes under `/v1/groups` (`docs/api.md`, "Consumer groups"): join, sync,
//! heartbeat, leave, offset commit and fetch, describe, list and find-coordinator, on the
//! [`GroupCoordinator`] of this broker.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::extract::{ApiJson, ApiPath};
use crate::group::assignor::{Assignment, TopicPartition, RANGE};
use crate::group::coordinator::{CoordinatorInfo, SyncResult};
use crate::group::state::{
    GroupDescription, GroupState, JoinRequest, JoinResult, MAX_POLL_INTERVAL_DEFAULT_MS,
    SUBSCRIPTION_TOPICS_MAX,
};
use crate::group::{GroupCoordinator, GroupError};

/// Default `session_timeout_ms` (Kafka's `session.timeout.ms`: 45000).
pub const SESSION_TIMEOUT_DEFAULT_MS: u64 = 45_000;
/// Default `heartbeat_interval_ms` (Kafka's `heartbeat.interval.ms`: 3000).
pub const HEARTBEAT_INTERVAL_DEFAULT_MS: u64 = 3_000;

/// The group routes with their coordinator as state, ready to merge into the client routes.
/// The Kafka listener shares the same coordinator.
pub fn routes<S: Clone + Send + Sync + 'static>(coordinator: Arc<GroupCoordinator>) -> Router<S> {
    Router::new()
        .route("/v1/groups", get(list))
        .route("/v1/groups/{group}", get(describe))
        .route("/v1/groups/{group}/coordinator", get(find_coordinator))
        .route("/v1/groups/{group}/join", post(join))
        .route("/v1/groups/{group}/sync", post(sync))
        .route("/v1/groups/{group}/heartbeat", post(heartbeat))
        .route("/v1/groups/{group}/leave", post(leave))
        .route(
            "/v1/groups/{group}/offsets",
            post(commit).get(fetch_offsets),
        )
        .with_state(coordinator)
}

type Coordinator = State<Arc<GroupCoordinator>>;

/// Body of a join.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// Absent (or empty) on the first join; the id the coordinator gave afterwards.
    pub member_id: Option<String>,
    /// Prefix of the member id; default `consumer`.
    pub client_id: Option<String>,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Supported assignors, preferred first; default `["range"]`.
    pub assignors: Option<Vec<String>>,
    /// `session.timeout.ms`; default 45000.
    pub session_timeout_ms: Option<u64>,
    /// `max.poll.interval.ms`, also the rebalance timeout; default 300000.
    pub max_poll_interval_ms: Option<u64>,
    /// `heartbeat.interval.ms`, echoed back; must be below the session timeout; default
    /// 3000 or a third of the session timeout, whichever is smaller.
    pub heartbeat_interval_ms: Option<u64>,
}

/// Answer of a join.
#[derive(Debug, Serialize)]
pub struct JoinResponse {
    /// The completed round.
    #[serde(flatten)]
    pub result: JoinResult,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: u64,
}

/// `POST /v1/groups/{group}/join`: waits until the rebalance round completes.
pub async fn join(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<JoinBody>,
) -> Result<Json<JoinResponse>, GroupError> {
    let session_timeout_ms = body
        .session_timeout_ms
        .unwrap_or(SESSION_TIMEOUT_DEFAULT_MS);
    // Kafka's consumer refuses a heartbeat interval at or above the session timeout.
    if let Some(interval) = body.heartbeat_interval_ms {
        if interval == 0 || interval >= session_timeout_ms {
            return Err(crate::error::ApiError::invalid_request(format!(
                "heartbeat_interval_ms={interval} must be in [1, session_timeout_ms={session_timeout_ms})"
            ))
            .into());
        }
    }
    let heartbeat_interval_ms = body
        .heartbeat_interval_ms
        .unwrap_or((session_timeout_ms / 3).clamp(1, HEARTBEAT_INTERVAL_DEFAULT_MS));
    if body.topics.len() > SUBSCRIPTION_TOPICS_MAX {
        return Err(crate::error::ApiError::invalid_request(format!(
            "at most {SUBSCRIPTION_TOPICS_MAX} topics per subscription"
        ))
        .into());
    }
    for topic in &body.topics {
        crate::topics::validate_topic_name(topic)?;
    }
    let mut topics = body.topics;
    topics.sort_unstable();
    topics.dedup();
    let request = JoinRequest {
        member_id: body.member_id,
        client_id: body.client_id.unwrap_or_else(|| "consumer".into()),
        topics,
        assignors: body.assignors.unwrap_or_else(|| vec![RANGE.into()]),
        session_timeout_ms,
        max_poll_interval_ms: body
            .max_poll_interval_ms
            .unwrap_or(MAX_POLL_INTERVAL_DEFAULT_MS),
    };
    let result = coordinator.join(&group, request).await?;
    Ok(Json(JoinResponse {
        result,
        heartbeat_interval_ms,
    }))
}

/// Body of a sync.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncBody {
    /// The member.
    pub member_id: String,
    /// The generation of its join.
    pub generation: u64,
    /// The leader's assignment (member id -> partitions); others leave it out.
    pub assignment: Option<Assignment>,
}

/// `POST /v1/groups/{group}/sync`: waits until the leader's assignment is stored.
pub async fn sync(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<SyncBody>,
) -> Result<Json<SyncResult>, GroupError> {
    let result = coordinator
        .sync(&group, &body.member_id, body.generation, body.assignment)
        .await?;
    Ok(Json(result))
}

/// Body of a heartbeat.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The member.
    pub member_id: String,
    /// Its generation.
    pub generation: u64,
    /// True when the application polled since the previous heartbeat (`max.poll.interval.ms`
    /// counts from the last poll); default false.
    #[serde(default)]
    pub polled: bool,
}

/// `POST /v1/groups/{group}/heartbeat`.
pub async fn heartbeat(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<HeartbeatBody>,
) -> Result<Json<serde_json::Value>, GroupError> {
    coordinator
        .heartbeat(&group, &body.member_id, body.generation, body.polled)
        .await?;
    Ok(Json(serde_json::json!({})))
}

/// Body of a leave.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaveBody {
    /// The member.
    pub member_id: String,
}

/// `POST /v1/groups/{group}/leave`.
pub async fn leave(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<LeaveBody>,
) -> Result<Json<serde_json::Value>, GroupError> {
    coordinator.leave(&group, &body.member_id).await?;
    Ok(Json(serde_json::json!({})))
}

/// One offset of a commit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitEntry {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The next offset to consume.
    pub offset: i64,
    /// Free text; default empty.
    #[serde(default)]
    pub metadata: String,
}

/// Body of an offset commit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    /// The member; absent for a client outside the group (then the group must be Empty).
    pub member_id: Option<String>,
    /// The member's generation; -1 (default) outside the group.
    pub generation: Option<i64>,
    /// The offsets.
    pub offsets: Vec<CommitEntry>,
}

/// `POST /v1/groups/{group}/offsets`: answers once the commit is in the offsets topic's HW.
pub async fn commit(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<CommitBody>,
) -> Result<Json<serde_json::Value>, GroupError> {
    let mut offsets = Vec::with_capacity(body.offsets.len());
    for entry in body.offsets {
        let offset = u64::try_from(entry.offset).map_err(|_| {
            crate::error::ApiError::new(
                crate::error::ErrorKind::OffsetOutOfRange,
                format!(
                    "offset {} of {}/{} is negative",
                    entry.offset, entry.topic, entry.partition
                ),
            )
        })?;
        check_partition_exists(&coordinator, &entry.topic, entry.partition)?;
        let tp = TopicPartition::new(entry.topic, entry.partition);
        offsets.push((tp, offset, entry.metadata));
    }
    let generation = body.generation.unwrap_or(-1);
    coordinator
        .commit(&group, body.member_id.as_deref(), generation, offsets)
        .await?;
    Ok(Json(serde_json::json!({})))
}

/// Kafka answers a commit for a partition that does not exist with UNKNOWN_TOPIC_OR_PARTITION;
/// here the whole commit is refused before anything is written, as every bad input of the API.
fn check_partition_exists(
    coordinator: &GroupCoordinator,
    topic: &str,
    partition: u32,
) -> Result<(), crate::error::ApiError> {
    crate::topics::validate_topic_name(topic)?;
    match coordinator.partition_count(topic) {
        Some(count) if partition < count => Ok(()),
        Some(_) => Err(crate::error::ApiError::unknown_topic(
            topic,
            Some(partition),
        )),
        None => Err(crate::error::ApiError::unknown_topic(topic, None)),
    }
}

/// A committed offset in a fetch answer.
#[derive(Debug, Serialize)]
pub struct FetchedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The next offset to consume.
    pub offset: u64,
    /// The committer's text.
    pub metadata: String,
    /// When it was committed (Unix ms).
    pub commit_timestamp_ms: i64,
}

/// Answer of an offset fetch.
#[derive(Debug, Serialize)]
pub struct FetchOffsetsResponse {
    /// The group.
    pub group_id: String,
    /// Every committed offset, by topic and partition.
    pub offsets: Vec<FetchedOffset>,
}

/// `GET /v1/groups/{group}/offsets`.
pub async fn fetch_offsets(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<FetchOffsetsResponse>, GroupError> {
    let offsets = coordinator.fetch_offsets(&group).await?;
    let offsets = offsets
        .into_iter()
        .map(|(tp, committed)| FetchedOffset {
            topic: tp.topic,
            partition: tp.partition,
            offset: committed.offset,
            metadata: committed.metadata,
            commit_timestamp_ms: committed.commit_timestamp_ms,
        })
        .collect();
    Ok(Json(FetchOffsetsResponse {
        group_id: group,
        offsets,
    }))
}

/// `GET /v1/groups/{group}`.
pub async fn describe(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupDescription>, GroupError> {
    Ok(Json(coordinator.describe(&group).await?))
}

/// `GET /v1/groups/{group}/coordinator`.
pub async fn find_coordinator(
    State(coordinator): Coordinator,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<CoordinatorInfo>, GroupError> {
    Ok(Json(coordinator.find_coordinator(&group).await?))
}

/// A listed group.
#[derive(Debug, Serialize)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
}

/// `GET /v1/groups`: the groups this broker coordinates.
pub async fn list(
    State(coordinator): Coordinator,
) -> Result<Json<BTreeMap<&'static str, Vec<ListedGroup>>>, GroupError> {
    let groups = coordinator
        .list()
        .await?
        .into_iter()
        .map(|(group_id, state)| ListedGroup { group_id, state })
        .collect();
    Ok(Json(BTreeMap::from([("groups", groups)])))
}
