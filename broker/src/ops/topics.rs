//! Topics: create (through the controller in a cluster, in the local catalog alone), describe,
//! list and delete, and the description of a topic both front doors answer with.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::topics::{validate_topic_name, Topic, TopicMeta};

/// A topic creation, whichever front door decoded it.
#[derive(Debug, Clone)]
pub struct CreateTopic {
    /// Topic name (Kafka's rule).
    pub name: String,
    /// Partition count; absent or -1 = `num.partitions`.
    pub partitions: Option<i64>,
    /// Replicas per partition; absent or -1 = `default.replication.factor`.
    pub replication_factor: Option<i64>,
    /// Topic-level overrides (`retention.ms`, ...).
    pub configs: BTreeMap<String, ConfigValue>,
}

/// One topic config value as the client sent it. Kafka's configs are strings; a front door
/// may accept other scalars as their text (the HTTP API takes JSON numbers and booleans).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    /// The value as text.
    Text(String),
    /// A value with no text form (a JSON array, object or null): refused as INVALID_CONFIG
    /// where the checks of a creation reach the configs, so a request wrong in several ways
    /// is refused for the same first reason whatever the front door.
    NotText,
}

/// One partition in a topic description or in metadata.
#[derive(Debug, Serialize)]
pub struct PartitionDescription {
    /// Partition index.
    pub partition: u32,
    /// Broker id of the leader.
    pub leader: i64,
    /// The leader's epoch.
    pub leader_epoch: u32,
    /// Broker ids holding a replica.
    pub replicas: Vec<u32>,
    /// Broker ids in sync.
    pub isr: Vec<u32>,
}

/// Answer of create and describe.
#[derive(Debug, Serialize)]
pub struct TopicDescription {
    /// Topic name.
    pub name: String,
    /// Replicas per partition.
    pub replication_factor: u16,
    /// The topic's overrides as given at creation.
    pub configs: BTreeMap<String, String>,
    /// One entry per partition.
    pub partitions: Vec<PartitionDescription>,
}

/// Describes `topic` as hosted by the broker `broker_id`.
pub fn describe_topic(topic: &Topic, broker_id: u32) -> TopicDescription {
    let partitions = topic
        .partitions
        .iter()
        .map(|partition| {
            let (replicas, isr) = partition.replicas_and_isr();
            PartitionDescription {
                partition: partition.partition,
                leader: i64::from(broker_id),
                leader_epoch: partition.offsets().leader_epoch,
                replicas,
                isr,
            }
        })
        .collect();
    TopicDescription {
        name: topic.name.clone(),
        replication_factor: topic.meta.replication_factor,
        configs: topic.meta.configs.clone(),
        partitions,
    }
}

/// Describes a topic from the cluster metadata (leader -1 while the partition is offline).
pub fn describe_from_metadata(
    topic: &crate::controller::protocol::TopicMetadata,
) -> TopicDescription {
    TopicDescription {
        name: topic.name.clone(),
        replication_factor: topic
            .partitions
            .first()
            .map_or(0, |p| p.replicas.len() as u16),
        configs: topic.configs.clone(),
        partitions: topic
            .partitions
            .iter()
            .map(|p| PartitionDescription {
                partition: p.partition,
                leader: p.leader.map_or(-1, i64::from),
                leader_epoch: p.leader_epoch,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
            })
            .collect(),
    }
}

/// A config value as a string.
fn config_value(name: &str, value: &ConfigValue) -> Result<String, ApiError> {
    match value {
        ConfigValue::Text(text) => Ok(text.clone()),
        ConfigValue::NotText => Err(ApiError::new(
            ErrorKind::InvalidConfig,
            format!("config {name:?} must be a string, number or boolean"),
        )),
    }
}

/// Resolves the request against the broker's defaults and this cluster's size (one broker).
fn topic_meta(broker: &Broker, request: &CreateTopic) -> Result<TopicMeta, ApiError> {
    let partitions = match request.partitions {
        None | Some(-1) => broker.config.num_partitions,
        Some(n) if n >= 1 && n <= i64::from(u32::MAX) => n as u32,
        Some(n) => {
            return Err(ApiError::new(
                ErrorKind::InvalidPartitions,
                format!("partitions must be at least 1, got {n}"),
            ))
        }
    };
    let brokers_alive = 1;
    let replication_factor = match request.replication_factor {
        None | Some(-1) => i64::from(broker.config.default_replication_factor),
        Some(n) => n,
    };
    if replication_factor < 1 || replication_factor > brokers_alive {
        return Err(ApiError::new(
            ErrorKind::InvalidReplicationFactor,
            format!(
                "replication factor {replication_factor} is impossible with {brokers_alive} \
                 live broker(s)"
            ),
        ));
    }
    let configs = configs_as_strings(request)?;
    Ok(TopicMeta {
        partitions,
        replication_factor: replication_factor as u16,
        configs,
    })
}

fn configs_as_strings(request: &CreateTopic) -> Result<BTreeMap<String, String>, ApiError> {
    request
        .configs
        .iter()
        .map(|(name, value)| Ok((name.clone(), config_value(name, value)?)))
        .collect()
}

/// A count from a create request: absent or -1 = the controller's default.
fn positive_or_default(
    value: Option<i64>,
    what: &str,
    kind: ErrorKind,
) -> Result<Option<u32>, ApiError> {
    match value {
        None | Some(-1) => Ok(None),
        Some(n) if n >= 1 && n <= i64::from(u32::MAX) => Ok(Some(n as u32)),
        Some(n) => Err(ApiError::new(
            kind,
            format!("{what} must be at least 1, got {n}"),
        )),
    }
}

/// Creates a topic: through the controller in a cluster, in the local catalog alone.
pub async fn create_topic(
    broker: &Broker,
    request: &CreateTopic,
) -> Result<TopicDescription, ApiError> {
    validate_topic_name(&request.name)?;
    if let Some(cluster) = &broker.cluster {
        // The controller assigns replicas over the live brokers; the broker count check of
        // `topic_meta` is for a single node.
        crate::config::TopicConfig::from_map(&configs_as_strings(request)?)
            .map_err(|e| ApiError::new(ErrorKind::InvalidConfig, e.to_string()))?;
        let create = crate::controller::protocol::CreateTopicRequest {
            name: request.name.clone(),
            partitions: positive_or_default(
                request.partitions,
                "partitions",
                ErrorKind::InvalidPartitions,
            )?,
            replication_factor: positive_or_default(
                request.replication_factor,
                "replication_factor",
                ErrorKind::InvalidReplicationFactor,
            )?,
            configs: configs_as_strings(request)?,
        };
        let topic = cluster.create_topic(&create).await?;
        tracing::info!(topic = %topic.name, partitions = topic.partitions.len(), "topic created by the controller");
        return Ok(describe_from_metadata(&topic));
    }
    let meta = topic_meta(broker, request)?;
    let topic = broker.topics.create(&request.name, meta).await?;
    tracing::info!(topic = %topic.name, partitions = topic.partitions.len(), "topic created");
    Ok(describe_topic(&topic, broker.config.broker_id))
}

/// The checks of a creation without creating (Kafka's `validate_only`): the name and the
/// topic configs.
pub fn check_create(create: &CreateTopic) -> Result<(), ApiError> {
    validate_topic_name(&create.name)?;
    let configs = create
        .configs
        .iter()
        .map(|(name, value)| {
            let text = match value {
                ConfigValue::Text(text) => text.clone(),
                ConfigValue::NotText => String::new(),
            };
            (name.clone(), text)
        })
        .collect();
    crate::config::TopicConfig::from_map(&configs)
        .map_err(|e| ApiError::new(ErrorKind::InvalidConfig, e.to_string()))?;
    Ok(())
}

/// Answer of a topic list.
#[derive(Debug, Serialize)]
pub struct TopicList {
    /// Topic names, sorted.
    pub topics: Vec<String>,
}

/// Every topic of the local catalog.
pub fn list_topics(broker: &Broker) -> TopicList {
    let topics = broker
        .topics
        .list()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    TopicList { topics }
}

/// Describes the topic `name`: from the cluster metadata in a cluster, the local catalog alone.
pub fn describe(broker: &Broker, name: &str) -> Result<TopicDescription, ApiError> {
    validate_topic_name(name)?;
    if let Some(cluster) = &broker.cluster {
        let metadata = cluster.metadata();
        let topic = metadata
            .topic(name)
            .ok_or_else(|| ApiError::unknown_topic(name, None))?;
        return Ok(describe_from_metadata(topic));
    }
    let topic = broker
        .topics
        .get(name)
        .ok_or_else(|| ApiError::unknown_topic(name, None))?;
    Ok(describe_topic(&topic, broker.config.broker_id))
}

/// Deletes a topic: through the controller in a cluster, from the local catalog alone.
pub async fn delete_topic(broker: &Broker, name: &str) -> Result<(), ApiError> {
    validate_topic_name(name)?;
    match &broker.cluster {
        Some(cluster) => cluster.delete_topic(name).await?,
        None => broker.topics.delete(name).await?,
    }
    tracing::info!(topic = %name, "topic deleted");
    Ok(())
}
