//! The cluster as one broker sees it: metadata (brokers, controller, topics), the status of
//! each local replica, and the metrics text.

use serde::Serialize;

use super::topics::{describe_from_metadata, describe_topic, TopicDescription};
use crate::broker::Broker;

/// A broker in metadata.
#[derive(Debug, Serialize)]
pub struct BrokerDescription {
    /// `broker.id`.
    pub id: u32,
    /// The URL it advertises.
    pub url: String,
}

/// The cluster metadata as this broker answers it.
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

/// The metadata: the controller's last snapshot in a cluster, this broker and its catalog alone.
pub fn metadata(broker: &Broker) -> Metadata {
    if let Some(cluster) = &broker.cluster {
        let metadata = cluster.metadata();
        return Metadata {
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
            topics: metadata.topics.iter().map(describe_from_metadata).collect(),
        };
    }
    let id = broker.config.broker_id;
    let topics = broker
        .topics
        .list()
        .iter()
        .map(|t| describe_topic(t, id))
        .collect();
    Metadata {
        brokers: vec![BrokerDescription {
            id,
            url: broker.advertised_url.clone(),
        }],
        controller_id: None,
        controller_url: None,
        topics,
    }
}

/// One local replica in the status.
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

/// The status of this broker.
#[derive(Debug, Serialize)]
pub struct Status {
    /// `broker.id`.
    pub broker_id: u32,
    /// `broker` (a controller answers its own status).
    pub role: &'static str,
    /// Every replica hosted here.
    pub replicas: Vec<ReplicaStatus>,
}

/// Every local replica with its role, offsets, ISR and disk usage.
pub fn status(broker: &Broker) -> Status {
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
    Status {
        broker_id: broker.config.broker_id,
        role: "broker",
        replicas,
    }
}

/// The Prometheus text (format 0.0.4) of every metric, with the replication side's ISR
/// counters and leader counts in a cluster.
pub fn metrics_text(broker: &Broker) -> String {
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
    broker.metrics.render_with(&broker.topics, leader_counts)
}
