//! Metadata, CreateTopics and DeleteTopics.

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};

use super::errors::{code, of};
use super::{reply, topic_text, wire, ConnectionError, KafkaContext, Reply, Request};
use crate::error::{ApiError, ErrorKind};
use crate::group::offsets::OFFSETS_TOPIC;
use crate::ops::topics::{
    check_create, create_topic, delete_topic, describe_from_metadata, describe_topic, ConfigValue,
    CreateTopic, TopicDescription,
};
use crate::topics::validate_topic_name;

/// The cluster id every broker reports (this broker has no cluster-wide id of its own).
pub const CLUSTER_ID: &str = "tidewater";

/// A broker Kafka clients can reach.
struct KafkaBroker {
    id: u32,
    host: String,
    port: i32,
}

fn split_host_port(address: &str) -> Option<(String, i32)> {
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// The live brokers with a Kafka listener, and every topic as the metadata describes it.
fn cluster_view(context: &KafkaContext) -> (Vec<KafkaBroker>, Vec<TopicDescription>, Vec<u32>) {
    let broker = &context.broker;
    match &broker.cluster {
        Some(cluster) => {
            let metadata = cluster.metadata();
            let live: Vec<u32> = metadata
                .brokers
                .iter()
                .filter(|b| !b.fenced)
                .map(|b| b.id)
                .collect();
            let brokers = metadata
                .brokers
                .iter()
                .filter(|b| !b.fenced)
                .filter_map(|b| {
                    let (host, port) = split_host_port(b.kafka_address.as_deref()?)?;
                    Some(KafkaBroker {
                        id: b.id,
                        host,
                        port,
                    })
                })
                .collect();
            let topics = metadata.topics.iter().map(describe_from_metadata).collect();
            (brokers, topics, live)
        }
        None => {
            let id = broker.config.broker_id;
            let (host, port) =
                split_host_port(&context.advertised).unwrap_or(("127.0.0.1".into(), 9092));
            let topics = broker
                .topics
                .list()
                .iter()
                .map(|t| describe_topic(t, id))
                .collect();
            (vec![KafkaBroker { id, host, port }], topics, vec![id])
        }
    }
}

fn broker_ids(ids: &[u32]) -> Vec<BrokerId> {
    ids.iter().map(|&id| BrokerId(id as i32)).collect()
}

/// The partitions of `topic`, with the fields `version` has: offline replicas from v5,
/// leader epochs from v7.
fn describe_partitions(
    topic: &TopicDescription,
    live: &[u32],
    version: i16,
) -> Vec<MetadataResponsePartition> {
    topic
        .partitions
        .iter()
        .map(|p| {
            let offline: Vec<u32> = p
                .replicas
                .iter()
                .copied()
                .filter(|id| !live.contains(id))
                .collect();
            let error_code = if p.leader < 0 {
                code(ErrorKind::LeaderNotAvailable)
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error_code)
                .with_partition_index(p.partition as i32)
                .with_leader_id(BrokerId(p.leader as i32))
                .with_leader_epoch(if version >= 7 {
                    p.leader_epoch as i32
                } else {
                    -1
                })
                .with_replica_nodes(broker_ids(&p.replicas))
                .with_isr_nodes(broker_ids(&p.isr))
                .with_offline_replicas(if version >= 5 {
                    broker_ids(&offline)
                } else {
                    Vec::new()
                })
        })
        .collect()
}

/// Metadata: the brokers with a Kafka listener, and the topics asked for (all when the list
/// is null, or empty at v0). Topics are never created by a metadata request here.
pub fn metadata(request: &mut Request, context: &KafkaContext) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: MetadataRequest = request.decode()?;
    let (brokers, topics, live) = cluster_view(context);
    let wanted: Option<Vec<String>> = match body.topics {
        None => None,
        Some(list) if list.is_empty() && version == 0 => None,
        Some(list) => Some(
            list.iter()
                .filter_map(|t| t.name.as_ref().map(topic_text))
                .collect(),
        ),
    };
    let describe = |topic: &TopicDescription| {
        MetadataResponseTopic::default()
            .with_error_code(0)
            .with_name(Some(TopicName(wire(topic.name.clone()))))
            .with_is_internal(version >= 1 && topic.name == OFFSETS_TOPIC)
            .with_partitions(describe_partitions(topic, &live, version))
    };
    let answered: Vec<MetadataResponseTopic> = match wanted {
        None => topics.iter().map(describe).collect(),
        Some(names) => names
            .iter()
            .map(|name| match topics.iter().find(|t| &t.name == name) {
                Some(topic) => describe(topic),
                None => {
                    let error = match validate_topic_name(name) {
                        Err(e) => code(e.kind),
                        Ok(()) => code(ErrorKind::UnknownTopicOrPartition),
                    };
                    MetadataResponseTopic::default()
                        .with_error_code(error)
                        .with_name(Some(TopicName(wire(name.clone()))))
                }
            })
            .collect(),
    };
    let own_id = context.broker.config.broker_id as i32;
    Ok(reply(
        MetadataResponse::default()
            .with_brokers(
                brokers
                    .into_iter()
                    .map(|b| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(b.id as i32))
                            .with_host(wire(b.host))
                            .with_port(b.port)
                    })
                    .collect(),
            )
            .with_cluster_id((version >= 2).then(|| wire(CLUSTER_ID)))
            // As a KRaft broker does: any live broker stands for the controller, and forwards
            // the admin requests that need it (from v1).
            .with_controller_id(BrokerId(if version >= 1 { own_id } else { -1 }))
            .with_topics(answered),
    ))
}

fn error_message(error: &ApiError) -> Option<kafka_protocol::protocol::StrBytes> {
    Some(wire(error.message.clone()))
}

/// CreateTopics: each topic through the same path as `POST /v1/topics` (the controller in a
/// cluster). Manual replica assignments are refused with INVALID_REQUEST.
pub async fn create_topics(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: CreateTopicsRequest = request.decode()?;
    let mut results = Vec::with_capacity(body.topics.len());
    for topic in body.topics {
        let name = topic_text(&topic.name);
        let mut configs = std::collections::BTreeMap::new();
        for config in &topic.configs {
            if let Some(value) = &config.value {
                configs.insert(
                    config.name.as_str().to_string(),
                    ConfigValue::Text(value.as_str().to_string()),
                );
            }
        }
        let create = CreateTopic {
            name: name.clone(),
            partitions: Some(i64::from(topic.num_partitions)),
            replication_factor: Some(i64::from(topic.replication_factor)),
            configs,
        };
        let outcome = if !topic.assignments.is_empty() {
            Err(ApiError::invalid_request(
                "manual replica assignments are not supported; give num_partitions and \
                 replication_factor",
            ))
        } else if body.validate_only {
            check_create(&create).map(|()| None)
        } else {
            create_topic(&context.broker, &create).await.map(Some)
        };
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            // The partition count and replication factor are in the answer from v5.
            Ok(description) if version >= 5 => {
                let (partitions, replication_factor) = description
                    .map(|d| (d.partitions.len() as i32, d.replication_factor as i16))
                    .unwrap_or((topic.num_partitions, topic.replication_factor));
                result
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication_factor)
            }
            Ok(_) => result,
            Err(error) => result
                .with_error_code(code(error.kind))
                .with_error_message(error_message(&error)),
        });
    }
    Ok(reply(CreateTopicsResponse::default().with_topics(results)))
}

/// DeleteTopics: by name (v1-v5 `topic_names`, v6 `topics`); topic ids are not known here
/// and answer UNKNOWN_TOPIC_ID... as UNKNOWN_TOPIC_OR_PARTITION.
pub async fn delete_topics(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: DeleteTopicsRequest = request.decode()?;
    let mut names: Vec<Option<TopicName>> = body.topic_names.iter().cloned().map(Some).collect();
    names.extend(body.topics.iter().map(|t| t.name.clone()));
    let mut responses = Vec::with_capacity(names.len());
    for name in names {
        let result = DeletableTopicResult::default().with_name(name.clone());
        let outcome = match &name {
            Some(name) => delete_topic(&context.broker, &topic_text(name)).await,
            None => Err(ApiError::unknown_topic("(by topic id)", None)),
        };
        responses.push(match outcome {
            Ok(()) => result,
            Err(error) => {
                let (code, message) = of(&error);
                // The error message is in the answer from v5.
                result
                    .with_error_code(code)
                    .with_error_message((version >= 5).then(|| wire(message)))
            }
        });
    }
    Ok(reply(
        DeleteTopicsResponse::default().with_responses(responses),
    ))
}
