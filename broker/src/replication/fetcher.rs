//! The follower's fetch task for one partition (Kafka's `ReplicaFetcherThread`, one task per
//! followed partition here): first truncation by OffsetsForLeaderEpoch (or, with the unsafe
//! pre-KIP-101 switch, to the HW), then long-poll fetches from the leader carrying the current
//! leader epoch, appending what comes back and setting HW = min(leader HW, own LEO).
//!
//! The task is aborted when the replica changes role; every change it makes to the log goes
//! through [`ReplicaManager::with_follower`], which re-checks under the role lock that the
//! replica still follows the same leader in the same epoch, so an aborted task cannot write.

use std::sync::Arc;
use std::time::Duration;

use super::manager::{ReplicaManager, RETRY_BACKOFF_MS};
use super::protocol::{
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, ReplicaFetchOffsets,
    ReplicaFetchRequest, HEADER_HIGH_WATERMARK, HEADER_LEADER_EPOCH, HEADER_LOG_END_OFFSET,
    HEADER_LOG_START_OFFSET,
};
use super::replica::Replica;
use super::truncation::truncation_round;
use crate::bugs::Bug;
use crate::partition::Partition;
use crate::storage::{batch, LogError};

/// Bound on OffsetsForLeaderEpoch rounds (each round lowers the follower's latest epoch, so a
/// log with more epochs than this just continues in the next attempt).
const TRUNCATION_ROUNDS_MAX: usize = 64;

/// Why a fetch step did not complete.
#[derive(Debug)]
pub enum FetchError {
    /// The replica's role changed; the task ends.
    NoLongerFollowing,
    /// The leader is not reachable or answered garbage.
    Network(String),
    /// The leader answered with an error (name, message).
    Leader(String, String),
    /// The local log refused an operation.
    Log(LogError),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::NoLongerFollowing => write!(f, "no longer following"),
            FetchError::Network(e) => write!(f, "leader unreachable: {e}"),
            FetchError::Leader(name, message) => write!(f, "leader answered {name}: {message}"),
            FetchError::Log(e) => write!(f, "local log: {e}"),
        }
    }
}

/// Runs until aborted or until the replica stops following `leader` in `leader_epoch`.
pub async fn run(
    manager: Arc<ReplicaManager>,
    replica: Arc<Replica>,
    leader: u32,
    leader_epoch: u32,
) {
    let follower = Follower {
        manager,
        replica,
        leader,
        leader_epoch,
    };
    loop {
        match follower.truncate().await {
            Ok(()) => break,
            Err(FetchError::NoLongerFollowing) => return,
            Err(e) => {
                tracing::debug!(topic = %follower.replica.topic, partition = follower.replica.partition, error = %e, "truncation failed; retrying");
                backoff().await;
            }
        }
    }
    loop {
        match follower.fetch_once().await {
            Ok(()) => {}
            Err(FetchError::NoLongerFollowing) => return,
            Err(e) => {
                tracing::debug!(topic = %follower.replica.topic, partition = follower.replica.partition, error = %e, "fetch failed; retrying");
                backoff().await;
            }
        }
    }
}

async fn backoff() {
    tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
}

struct Follower {
    manager: Arc<ReplicaManager>,
    replica: Arc<Replica>,
    leader: u32,
    leader_epoch: u32,
}

impl Follower {
    fn leader_url(&self) -> Result<String, FetchError> {
        let metadata = self.manager.metadata();
        metadata
            .broker(self.leader)
            .map(|b| b.address.clone())
            .ok_or_else(|| {
                FetchError::Network(format!("leader {} has no known address", self.leader))
            })
    }

    fn with_log<T>(
        &self,
        f: impl FnOnce(&mut crate::partition::PartitionState) -> Result<T, LogError>,
    ) -> Result<T, FetchError> {
        self.manager
            .with_follower(&self.replica, self.leader, self.leader_epoch, f)
    }

    /// Truncates the log before fetching: by leader epoch (KIP-101/KIP-279), or to the HW with
    /// `tidewater.unsafe.truncate.to.hw.enable`.
    async fn truncate(&self) -> Result<(), FetchError> {
        if self.manager.settings.bugs.on(Bug::KeepDivergentSuffix) {
            // Deliberate bug: keep whatever this log holds past the common prefix.
            return Ok(());
        }
        if self.manager.settings.unsafe_truncate_to_hw_enable {
            return self.with_log(|state| {
                let high_watermark = state.high_watermark;
                tracing::info!(topic = %self.replica.topic, partition = self.replica.partition, high_watermark, "truncating to the HW (unsafe, pre-KIP-101)");
                state.log.truncate_to(high_watermark)
            });
        }
        for _ in 0..TRUNCATION_ROUNDS_MAX {
            let latest_epoch = self.with_log(|state| Ok(state.log.latest_epoch()))?;
            let Some(latest_epoch) = latest_epoch else {
                return Ok(());
            };
            let answer = self.offsets_for_leader_epoch(latest_epoch).await?;
            let leader_answer = answer.leader_epoch.zip(answer.end_offset);
            let completed = self.with_log(|state| {
                let log_end_offset = state.log.log_end_offset();
                let truncation = truncation_round(
                    leader_answer,
                    |epoch| state.log.end_offset_for_epoch(epoch),
                    log_end_offset,
                    state.high_watermark,
                );
                if truncation.offset < log_end_offset {
                    tracing::info!(
                        topic = %self.replica.topic, partition = self.replica.partition, latest_epoch,
                        ?leader_answer, from = log_end_offset, to = truncation.offset, "truncating by leader epoch"
                    );
                    state.log.truncate_to(truncation.offset)?;
                    state.high_watermark = state.high_watermark.min(truncation.offset);
                }
                Ok(truncation.completed)
            })?;
            if completed {
                return Ok(());
            }
        }
        Ok(())
    }

    async fn offsets_for_leader_epoch(
        &self,
        epoch: u32,
    ) -> Result<OffsetsForLeaderEpochResponse, FetchError> {
        let request = OffsetsForLeaderEpochRequest {
            replica_id: self.manager.settings.broker_id,
            topic: self.replica.topic.clone(),
            partition: self.replica.partition,
            current_leader_epoch: self.leader_epoch,
            leader_epoch: epoch,
        };
        let url = format!(
            "{}/internal/v1/offsets-for-leader-epoch",
            self.leader_url()?
        );
        let response = self
            .manager
            .http()
            .post(&url)
            .timeout(Duration::from_secs(5))
            .json(&request)
            .send()
            .await
            .map_err(|e| FetchError::Network(e.to_string()))?;
        if !response.status().is_success() {
            return Err(leader_error(response).await);
        }
        response
            .json()
            .await
            .map_err(|e| FetchError::Network(e.to_string()))
    }

    /// One fetch round trip: request from the LEO, append, move HW and log start offset.
    async fn fetch_once(&self) -> Result<(), FetchError> {
        let (fetch_offset, log_start_offset) =
            self.with_log(|state| Ok((state.log.log_end_offset(), state.log.log_start_offset())))?;
        let settings = &self.manager.settings;
        let request = ReplicaFetchRequest {
            replica_id: settings.broker_id,
            topic: self.replica.topic.clone(),
            partition: self.replica.partition,
            current_leader_epoch: self.leader_epoch,
            fetch_offset,
            log_start_offset,
            max_bytes: settings.replica_fetch_max_bytes,
            max_wait_ms: settings.replica_fetch_wait_max_ms,
        };
        let url = format!("{}/internal/v1/replica-fetch", self.leader_url()?);
        let response = self
            .manager
            .http()
            .post(&url)
            .timeout(Duration::from_millis(
                settings.replica_fetch_wait_max_ms + 10_000,
            ))
            .json(&request)
            .send()
            .await
            .map_err(|e| FetchError::Network(e.to_string()))?;
        let offsets = offsets_from_headers(response.headers());
        if !response.status().is_success() {
            let error = leader_error(response).await;
            if let (FetchError::Leader(name, _), Some(leader)) = (&error, offsets) {
                if name == "OFFSET_OUT_OF_RANGE" && fetch_offset > leader.log_end_offset {
                    // Only after an unclean election (or the unsafe HW truncation) can a
                    // follower be ahead of its leader: Kafka truncates it to the leader's end.
                    return self.with_log(|state| {
                        tracing::warn!(
                            topic = %self.replica.topic, partition = self.replica.partition,
                            from = fetch_offset, to = leader.log_end_offset,
                            "follower is ahead of its leader; truncating to the leader's log end"
                        );
                        state.log.truncate_to(leader.log_end_offset)?;
                        state.high_watermark = state.high_watermark.min(leader.log_end_offset);
                        Ok(())
                    });
                }
            }
            return Err(error);
        }
        let leader =
            offsets.ok_or_else(|| FetchError::Network("fetch answer without offsets".into()))?;
        let body = response
            .bytes()
            .await
            .map_err(|e| FetchError::Network(e.to_string()))?;
        // Only the first header is read here; `append_batch_bytes` verifies every batch (CRC,
        // record layout, offsets, epochs) before writing any, then writes them verbatim.
        let first =
            if body.is_empty() {
                None
            } else {
                Some(batch::BatchHeader::parse(&body).map_err(|e| {
                    FetchError::Network(format!("bad batch from the leader: {e:?}"))
                })?)
            };
        self.with_log(|state| {
            if let Some(first) = first {
                if first.base_offset != state.log.log_end_offset() {
                    // The log changed since the request (cannot happen while this task is
                    // the only writer); drop the answer and fetch again.
                    return Ok(());
                }
                state.log.append_batch_bytes(&body)?;
            }
            let log_end_offset = state.log.log_end_offset();
            Partition::advance_high_watermark(state, leader.high_watermark.min(log_end_offset));
            if leader.log_start_offset > state.log.log_start_offset()
                && leader.log_start_offset <= state.high_watermark
            {
                state.log.delete_records_before(leader.log_start_offset)?;
            }
            Ok(())
        })
    }
}

/// The leader's offsets from the answer's headers, when all are present.
fn offsets_from_headers(headers: &reqwest::header::HeaderMap) -> Option<ReplicaFetchOffsets> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.parse::<u64>().ok();
    Some(ReplicaFetchOffsets {
        high_watermark: number(HEADER_HIGH_WATERMARK)?,
        log_start_offset: number(HEADER_LOG_START_OFFSET)?,
        log_end_offset: number(HEADER_LOG_END_OFFSET)?,
        leader_epoch: u32::try_from(number(HEADER_LEADER_EPOCH)?).ok()?,
    })
}

async fn leader_error(response: reqwest::Response) -> FetchError {
    let status = response.status();
    match response.json::<serde_json::Value>().await {
        Ok(body) => FetchError::Leader(
            body["error"]
                .as_str()
                .unwrap_or("UNKNOWN_SERVER_ERROR")
                .to_string(),
            body["message"].as_str().unwrap_or_default().to_string(),
        ),
        Err(_) => FetchError::Network(format!("HTTP {status} without an error body")),
    }
}
