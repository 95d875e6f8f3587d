//! The broker's session with the controller (Kafka's `BrokerLifecycleManager`): registration
//! with the previous broker epoch (KIP-966), heartbeats, the metadata long poll, and the topic
//! admin calls that go through the controller. Every metadata answer is applied by
//! [`ReplicaManager::apply_metadata`] (`roles`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::manager::{ReplicaManager, RETRY_BACKOFF_MS};
use crate::controller::protocol::{
    AllocateProducerIdsRequest, ClusterMetadata, ControllerError, ControllerErrorCode,
    CreateTopicRequest, HeartbeatRequest, HeartbeatResponse, ProducerIdBlock,
    RegisterBrokerRequest, RegisterBrokerResponse, TopicMetadata,
};
use crate::error::{ApiError, ErrorKind};

/// Longest a metadata long poll waits at the controller before asking again.
const METADATA_WATCH_WAIT_MS: u64 = 10_000;

impl ReplicaManager {
    pub(super) async fn register(self: &Arc<Self>) {
        // A running incarnation registering again lost nothing: it names itself. A new process
        // names the epoch of its clean-shutdown marker, if it found one (KIP-966).
        let previous_broker_epoch = match self.broker_epoch.load(Ordering::SeqCst) {
            0 => self.previous_broker_epoch,
            current => Some(current),
        };
        let request = RegisterBrokerRequest {
            broker_id: self.settings.broker_id,
            address: self.settings.advertised_url.clone(),
            kafka_address: self.settings.kafka_address.clone(),
            previous_broker_epoch,
        };
        loop {
            match self
                .controller_call::<_, RegisterBrokerResponse>(
                    "/controller/v1/brokers/register",
                    &request,
                )
                .await
            {
                Ok(Ok(response)) => {
                    tracing::info!(
                        broker_epoch = response.broker_epoch,
                        "registered with the controller"
                    );
                    self.broker_epoch
                        .store(response.broker_epoch, Ordering::SeqCst);
                    self.apply_metadata(response.metadata).await;
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "registration refused"),
                Err(e) => tracing::warn!(error = %e, "controller unreachable for registration"),
            }
            tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }

    /// Heartbeats every `broker.heartbeat.interval.ms`; applies newer metadata from the answer;
    /// registers again when the controller no longer knows this incarnation.
    pub(super) async fn heartbeat_forever(self: Arc<Self>) {
        let mut interval =
            tokio::time::interval(Duration::from_millis(self.settings.heartbeat_interval_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let request = HeartbeatRequest {
                broker_id: self.settings.broker_id,
                broker_epoch: self.broker_epoch.load(Ordering::SeqCst),
                metadata_version: self.metadata().version,
            };
            match self
                .controller_call::<_, HeartbeatResponse>(
                    "/controller/v1/brokers/heartbeat",
                    &request,
                )
                .await
            {
                Ok(Ok(response)) => {
                    if let Some(metadata) = response.metadata {
                        self.apply_metadata(metadata).await;
                    }
                }
                Ok(Err(e))
                    if matches!(
                        e.error,
                        ControllerErrorCode::StaleBrokerEpoch
                            | ControllerErrorCode::BrokerNotAvailable
                    ) =>
                {
                    tracing::warn!(error = %e, "controller forgot this incarnation; registering again");
                    self.register().await;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "heartbeat refused"),
                Err(e) => tracing::debug!(error = %e, "heartbeat failed"),
            }
        }
    }

    /// Long-polls the controller for metadata newer than the applied version, so changes
    /// arrive within milliseconds rather than a heartbeat interval.
    pub(super) async fn watch_metadata_forever(self: Arc<Self>) {
        loop {
            let next = self.metadata().version + 1;
            let url = format!(
                "{}/controller/v1/metadata?min_version={next}&max_wait_ms={METADATA_WATCH_WAIT_MS}",
                self.settings.controller_url
            );
            let response = self
                .http
                .get(&url)
                .timeout(Duration::from_millis(METADATA_WATCH_WAIT_MS + 5_000))
                .send()
                .await;
            match response {
                Ok(r) if r.status().is_success() => match r.json::<ClusterMetadata>().await {
                    Ok(metadata) => {
                        if metadata.version >= next {
                            self.apply_metadata(metadata).await;
                        } else if metadata.version < next - 1 {
                            // The controller lost state (new data dir): start over from it.
                            tracing::warn!(
                                version = metadata.version,
                                "controller metadata went back"
                            );
                            tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "bad metadata answer");
                        tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                    }
                },
                _ => tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await,
            }
        }
    }

    /// Sends a JSON request to the controller: `Ok(Ok(answer))`, `Ok(Err(controller error))`,
    /// or `Err` when it could not be reached or answered garbage.
    pub(super) async fn controller_call<Q: Serialize, A: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<Result<A, ControllerError>, String> {
        let url = format!("{}{}", self.settings.controller_url, path);
        let response = self
            .http
            .post(&url)
            .timeout(Duration::from_secs(5))
            .json(request)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            response
                .json::<A>()
                .await
                .map(Ok)
                .map_err(|e| e.to_string())
        } else {
            response
                .json::<ControllerError>()
                .await
                .map(Err)
                .map_err(|e| e.to_string())
        }
    }

    /// AllocateProducerIds (KIP-730): a new block of producer ids for this incarnation, or why
    /// the controller did not give one.
    pub async fn allocate_producer_ids(&self) -> Result<ProducerIdBlock, String> {
        let request = AllocateProducerIdsRequest {
            broker_id: self.settings.broker_id,
            broker_epoch: self.broker_epoch.load(Ordering::SeqCst),
        };
        match self
            .controller_call::<_, ProducerIdBlock>("/controller/v1/allocate-producer-ids", &request)
            .await
        {
            Ok(Ok(block)) => Ok(block),
            Ok(Err(e)) => Err(format!("the controller refused a producer id block: {e}")),
            Err(e) => Err(format!(
                "the controller is unreachable for producer ids: {e}"
            )),
        }
    }

    /// Creates a topic through the controller and applies the resulting metadata here.
    pub async fn create_topic(
        self: &Arc<Self>,
        request: &CreateTopicRequest,
    ) -> Result<TopicMetadata, ApiError> {
        let topic = match self
            .controller_call::<_, TopicMetadata>("/controller/v1/topics", request)
            .await
        {
            Ok(Ok(topic)) => topic,
            Ok(Err(e)) => return Err(controller_to_api(e)),
            Err(e) => {
                return Err(ApiError::new(
                    ErrorKind::RequestTimedOut,
                    format!("controller unreachable: {e}"),
                ))
            }
        };
        self.refresh_metadata().await;
        Ok(topic)
    }

    /// Deletes a topic through the controller and applies the resulting metadata here.
    pub async fn delete_topic(self: &Arc<Self>, name: &str) -> Result<(), ApiError> {
        let url = format!(
            "{}/controller/v1/topics/{name}",
            self.settings.controller_url
        );
        let response = self
            .http
            .delete(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| {
                ApiError::new(
                    ErrorKind::RequestTimedOut,
                    format!("controller unreachable: {e}"),
                )
            })?;
        if !response.status().is_success() {
            let error = response
                .json::<ControllerError>()
                .await
                .map_err(|e| ApiError::new(ErrorKind::UnknownServerError, e.to_string()))?;
            return Err(controller_to_api(error));
        }
        self.refresh_metadata().await;
        Ok(())
    }

    /// Fetches the controller's metadata now and applies it.
    async fn refresh_metadata(self: &Arc<Self>) {
        let url = format!("{}/controller/v1/metadata", self.settings.controller_url);
        let fetched = async {
            self.http
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await?
                .json()
                .await
        };
        match fetched.await {
            Ok(metadata) => self.apply_metadata(metadata).await,
            Err(e) => tracing::warn!(error = %e, "metadata refresh failed"),
        }
    }
}

/// Maps a controller error to the client API's.
fn controller_to_api(error: ControllerError) -> ApiError {
    let kind = match error.error {
        ControllerErrorCode::UnknownTopicOrPartition => ErrorKind::UnknownTopicOrPartition,
        ControllerErrorCode::TopicAlreadyExists => ErrorKind::TopicAlreadyExists,
        ControllerErrorCode::InvalidTopicException => ErrorKind::InvalidTopicException,
        ControllerErrorCode::InvalidReplicationFactor => ErrorKind::InvalidReplicationFactor,
        ControllerErrorCode::InvalidPartitions => ErrorKind::InvalidPartitions,
        ControllerErrorCode::FencedLeaderEpoch => ErrorKind::FencedLeaderEpoch,
        ControllerErrorCode::NotLeaderOrFollower => ErrorKind::NotLeaderOrFollower,
        _ => ErrorKind::InvalidRequest,
    };
    ApiError::new(kind, error.message)
}
