//! `GET /v1/metadata`, `GET /v1/status`, `GET /metrics`, `GET /v1/ping`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;

use super::topics::{describe_topic, TopicDescription};
use crate::server::Broker;

/// A broker in metadata.
#[derive(Debug, Serialize)]
pub struct BrokerDescription {
    /// `broker.id`.
    pub id: u32,
    /// The URL it advertises.
    pub url: String,
}

/// Answer of `GET /v1/metadata`.
#[derive(Debug, Serialize)]
pub struct Metadata {
    /// Live brokers (a single node: this one).
    pub brokers: Vec<BrokerDescription>,
    /// Id of the controller; null without one.
    pub controller_id: Option<u32>,
    /// URL of the controller; null without one.
    pub controller_url: Option<String>,
    /// Every topic with its partitions' leader, epoch, replicas and ISR.
    pub topics: Vec<TopicDescription>,
}

/// `GET /v1/metadata`.
pub async fn metadata(State(broker): State<Arc<Broker>>) -> Json<Metadata> {
    if let Some(cluster) = &broker.cluster {
        let metadata = cluster.metadata();
        return Json(Metadata {
            brokers: metadata
                .brokers
                .iter()
                .filter(|b| !b.fenced)
                .map(|b| BrokerDescription {
                    id: b.id,
                    url: b.address.clone(),
                })
                .collect(),
            controller_id: None,
            controller_url: Some(cluster.settings.controller_url.clone()),
            topics: metadata
                .topics
                .iter()
                .map(super::topics::describe_from_metadata)
                .collect(),
        });
    }
    let id = broker.config.broker_id;
    let topics = broker
        .topics
        .list()
        .iter()
        .map(|t| describe_topic(t, id))
        .collect();
    Json(Metadata {
        brokers: vec![BrokerDescription {
            id,
            url: broker.advertised_url.clone(),
        }],
        controller_id: None,
        controller_url: None,
        topics,
    })
}

/// One local replica in `GET /v1/status`.
#[derive(Debug, Serialize)]
pub struct ReplicaStatus {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// `leader` or `follower`.
    pub role: &'static str,
    /// Next offset to be written.
    pub log_end_offset: u64,
    /// Committed offset.
    pub high_watermark: u64,
    /// Min log start offset over the replicas (leaders in a cluster; the log start when alone).
    pub low_watermark: Option<u64>,
    /// Broker id of the leader, if known.
    pub leader: Option<u32>,
    /// First offset in the log.
    pub log_start_offset: u64,
    /// Current leader epoch.
    pub leader_epoch: u32,
    /// Broker ids holding a replica.
    pub replicas: Vec<u32>,
    /// Broker ids in sync.
    pub isr: Vec<u32>,
    /// Bytes of log on disk.
    pub size_bytes: u64,
    /// Segment files.
    pub segment_count: usize,
}

/// Answer of `GET /v1/status`.
#[derive(Debug, Serialize)]
pub struct Status {
    /// `broker.id`.
    pub broker_id: u32,
    /// `broker` (a controller answers its own status).
    pub role: &'static str,
    /// Every replica hosted here.
    pub replicas: Vec<ReplicaStatus>,
}

/// `GET /v1/status`.
pub async fn status(State(broker): State<Arc<Broker>>) -> Json<Status> {
    let mut replicas = Vec::new();
    for topic in broker.topics.list() {
        for partition in &topic.partitions {
            let offsets = partition.offsets();
            let (mut replica_ids, mut isr) = partition.replicas_and_isr();
            let (mut role, mut leader, mut low_watermark, mut leader_epoch) = (
                "leader",
                Some(broker.config.broker_id),
                Some(offsets.log_start_offset),
                offsets.leader_epoch,
            );
            if let Some(cluster) = &broker.cluster {
                // In a cluster, only assigned replicas are reported, with their replication state.
                let Some(state) = cluster.replica_status(&topic.name, partition.partition) else {
                    continue;
                };
                (role, leader, low_watermark, leader_epoch) = (
                    state.role,
                    state.leader,
                    state.low_watermark,
                    state.leader_epoch,
                );
                (replica_ids, isr) = (state.replicas, state.isr);
            }
            let (size_bytes, segment_count) = partition.disk_usage();
            replicas.push(ReplicaStatus {
                topic: topic.name.clone(),
                partition: partition.partition,
                role,
                low_watermark,
                leader,
                log_end_offset: offsets.log_end_offset,
                high_watermark: offsets.high_watermark,
                log_start_offset: offsets.log_start_offset,
                leader_epoch,
                replicas: replica_ids,
                isr,
                size_bytes,
                segment_count,
            });
        }
    }
    Json(Status {
        broker_id: broker.config.broker_id,
        role: "broker",
        replicas,
    })
}

/// `GET /metrics`: Prometheus text format 0.0.4.
pub async fn metrics(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let leader_counts = broker.cluster.as_ref().map(|cluster| {
        let counters = [
            (&broker.metrics.isr_shrinks, &cluster.isr_shrinks),
            (&broker.metrics.isr_expands, &cluster.isr_expands),
        ];
        for (shown, counted) in counters {
            shown.store(
                counted.load(std::sync::atomic::Ordering::Relaxed),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        cluster.leader_counts()
    });
    let body = broker.metrics.render_with(&broker.topics, leader_counts);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

/// `GET /v1/ping`: the cheapest route, the baseline of the throughput benchmark.
pub async fn ping() -> &'static str {
    "pong"
}
