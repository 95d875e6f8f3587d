//! Wire types of the broker-to-broker routes under `/internal/v1/...`.
//!
//! - `POST /internal/v1/replica-fetch` (Kafka's Fetch with a replica id): JSON request; the
//!   answer's body is the fetched record batches in the storage encoding (with their CRCs, so
//!   the follower verifies them), and the leader's offsets travel in response headers. Errors
//!   use the API's JSON error body.
//! - `POST /internal/v1/offsets-for-leader-epoch` (Kafka's OffsetsForLeaderEpoch): JSON both
//!   ways.

use serde::{Deserialize, Serialize};

/// Response header: the leader's high watermark.
pub const HEADER_HIGH_WATERMARK: &str = "x-tidewater-high-watermark";
/// Response header: the leader's log start offset (followers move theirs up to it).
pub const HEADER_LOG_START_OFFSET: &str = "x-tidewater-log-start-offset";
/// Response header: the leader's log end offset.
pub const HEADER_LOG_END_OFFSET: &str = "x-tidewater-log-end-offset";
/// Response header: the leader epoch the leader answered in.
pub const HEADER_LEADER_EPOCH: &str = "x-tidewater-leader-epoch";

/// A follower's fetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaFetchRequest {
    /// The fetching follower's broker id.
    pub replica_id: u32,
    /// Topic of the partition.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The leader epoch the follower follows; a mismatch is fenced (KIP-320).
    pub current_leader_epoch: u32,
    /// The follower's LEO: the leader records it as the follower's progress.
    pub fetch_offset: u64,
    /// The follower's log start offset (for the low watermark).
    pub log_start_offset: u64,
    /// `replica.fetch.max.bytes`: answer size limit (at least one batch is returned).
    pub max_bytes: u64,
    /// `replica.fetch.wait.max.ms`: long-poll wait when there is nothing new.
    pub max_wait_ms: u64,
}

/// The leader's offsets sent with every fetch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaFetchOffsets {
    /// The leader's HW; the follower sets its own to min(this, its LEO).
    pub high_watermark: u64,
    /// The leader's log start offset.
    pub log_start_offset: u64,
    /// The leader's LEO.
    pub log_end_offset: u64,
    /// The leader's epoch.
    pub leader_epoch: u32,
}

/// OffsetsForLeaderEpoch request for one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpochRequest {
    /// The asking follower (informational).
    pub replica_id: u32,
    /// Topic of the partition.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The leader epoch the follower follows (fenced when it is not the leader's).
    pub current_leader_epoch: u32,
    /// The epoch whose end offset is asked for (the follower's latest).
    pub leader_epoch: u32,
}

/// OffsetsForLeaderEpoch answer: the largest epoch at or below the requested one that the
/// leader knows and where it ends; both `None` when the leader knows no such epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpochResponse {
    /// Kafka's `leader_epoch` field of the answer.
    pub leader_epoch: Option<u32>,
    /// Kafka's `end_offset` field.
    pub end_offset: Option<u64>,
}
