//! Wire types of the controller's HTTP routes (`/controller/v1/...`), shared by the controller
//! and the brokers so both sides agree on every field.
//!
//! The shapes follow KRaft's RPCs: BrokerRegistration, BrokerHeartbeat, AlterPartition,
//! CreateTopics, DeleteTopics; the metadata is a snapshot of the controller's state rather than
//! a record log, tagged with a version that grows on every change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Kafka's error names as the controller returns them, serialised as `"FENCED_LEADER_EPOCH"` etc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ControllerErrorCode {
    /// The topic or partition does not exist.
    UnknownTopicOrPartition,
    /// A topic of that name already exists.
    TopicAlreadyExists,
    /// The topic name breaks Kafka's rule (`[a-zA-Z0-9._-]`, 1..249 chars, not `.` or `..`).
    InvalidTopicException,
    /// Fewer live brokers than the requested replication factor, or a factor below 1.
    InvalidReplicationFactor,
    /// A partition count below 1 or above the controller's limit.
    InvalidPartitions,
    /// The request's leader epoch is not the partition's current one.
    FencedLeaderEpoch,
    /// The request's partition epoch is not the partition's current one (stale AlterPartition).
    InvalidUpdateVersion,
    /// The broker epoch is not the broker's current registration (it must register again).
    StaleBrokerEpoch,
    /// The sender of an AlterPartition is not the partition's leader.
    NotLeaderOrFollower,
    /// A proposed ISR member is not a live (unfenced) replica of the partition (KIP-841).
    IneligibleReplica,
    /// The request is malformed (e.g. an ISR without the leader).
    InvalidRequest,
    /// The broker id is unknown to the controller.
    BrokerNotAvailable,
}

impl ControllerErrorCode {
    /// The HTTP status the controller answers this error with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::UnknownTopicOrPartition | Self::BrokerNotAvailable => 404,
            Self::TopicAlreadyExists | Self::FencedLeaderEpoch | Self::InvalidUpdateVersion => 409,
            Self::StaleBrokerEpoch => 409,
            Self::NotLeaderOrFollower => 421,
            Self::InvalidTopicException
            | Self::InvalidReplicationFactor
            | Self::InvalidPartitions
            | Self::IneligibleReplica
            | Self::InvalidRequest => 400,
        }
    }

    /// The Kafka name, e.g. `FENCED_LEADER_EPOCH`.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            Self::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            Self::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            Self::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            Self::InvalidPartitions => "INVALID_PARTITIONS",
            Self::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            Self::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            Self::StaleBrokerEpoch => "STALE_BROKER_EPOCH",
            Self::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            Self::IneligibleReplica => "INELIGIBLE_REPLICA",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
        }
    }
}

/// The JSON error body of every failed controller request: `{"error": "NAME", "message": ".."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerError {
    /// Kafka's name of the error.
    pub error: ControllerErrorCode,
    /// A sentence for humans.
    pub message: String,
}

impl ControllerError {
    /// Builds an error with a message.
    pub fn new(error: ControllerErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ControllerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error.name(), self.message)
    }
}

impl std::error::Error for ControllerError {}

/// `POST /controller/v1/brokers/register`: a broker (re)starts and announces itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRequest {
    /// The broker's `broker.id`.
    pub broker_id: u32,
    /// Where other brokers and clients reach it, e.g. `http://127.0.0.1:9092`.
    pub address: String,
    /// Where Kafka clients reach it (`HOST:PORT` of `kafka.advertised.listeners`), when its
    /// Kafka listener is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_address: Option<String>,
    /// Kafka's `PreviousBrokerEpoch` (KIP-966): the broker epoch this broker wrote in its
    /// clean-shutdown marker when it last stopped in order, or the epoch of the incarnation it
    /// registers again from while it keeps running. `None` (absent) when it stopped without the
    /// marker (kill, crash, power loss): the controller then treats it as an unclean shutdown
    /// and takes it out of every ISR and ELR.
    #[serde(default)]
    pub previous_broker_epoch: Option<u64>,
}

/// The answer to a registration: the new incarnation's epoch and the current metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerResponse {
    /// The broker epoch of this incarnation; every later call carries it.
    pub broker_epoch: u64,
    /// The cluster metadata after the registration.
    pub metadata: ClusterMetadata,
}

/// `POST /controller/v1/brokers/heartbeat`, sent every `broker.heartbeat.interval.ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// The broker's id.
    pub broker_id: u32,
    /// The epoch returned by the registration.
    pub broker_epoch: u64,
    /// The metadata version the broker has applied; the answer carries the metadata only when
    /// the controller's is newer.
    pub metadata_version: u64,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    /// The controller's current metadata version.
    pub metadata_version: u64,
    /// The whole metadata, present when `metadata_version` is newer than the broker's.
    pub metadata: Option<ClusterMetadata>,
}

/// `POST /controller/v1/alter-partition`: a leader asks to change a partition's ISR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    /// The leader sending the request.
    pub broker_id: u32,
    /// The leader's broker epoch (a restarted broker's old requests are stale).
    pub broker_epoch: u64,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The leader epoch the leader believes current.
    pub leader_epoch: u32,
    /// The partition epoch the leader's ISR view is based on.
    pub partition_epoch: u32,
    /// The proposed ISR (must contain the leader).
    pub new_isr: Vec<u32>,
}

/// `POST /controller/v1/topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTopicRequest {
    /// The topic name.
    pub name: String,
    /// Partition count; the controller's `num.partitions` when absent.
    #[serde(default)]
    pub partitions: Option<u32>,
    /// Replication factor; the controller's `default.replication.factor` when absent.
    #[serde(default)]
    pub replication_factor: Option<u32>,
    /// Topic-level overrides with Kafka's names (`min.insync.replicas`, ...).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// A broker as the metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerMetadata {
    /// `broker.id`.
    pub id: u32,
    /// The address clients and peers use.
    pub address: String,
    /// `HOST:PORT` of its Kafka listener, if it has one on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_address: Option<String>,
    /// The current registration's epoch.
    pub broker_epoch: u64,
    /// True while the broker's session has expired (it leads nothing and is in no ISR).
    pub fenced: bool,
}

/// One partition's replication state, as the controller decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMetadata {
    /// The partition index.
    pub partition: u32,
    /// The leader, or `None` while the partition is offline.
    pub leader: Option<u32>,
    /// Bumped on every leader change (including to "no leader").
    pub leader_epoch: u32,
    /// Bumped on every change of this partition's state (leader, ISR, replicas).
    pub partition_epoch: u32,
    /// Assigned replicas; the first is the preferred leader.
    pub replicas: Vec<u32>,
    /// In-sync replicas. With `eligible.leader.replicas.enable=false` never empty: when the
    /// last member dies it stays and `leader` is `None`. With eligible leader replicas (KIP-966,
    /// the default) it may be empty: the last member moves to `elr`.
    pub isr: Vec<u32>,
    /// Eligible leader replicas (KIP-966): replicas that left the ISR while it was smaller than
    /// `min.insync.replicas`, so they hold every committed record (the HW does not advance
    /// below min ISR) and may lead when the ISR is empty. Always empty while the ISR has at
    /// least `min.insync.replicas` members; a replica leaves it when it rejoins the ISR or
    /// registers after an unclean shutdown.
    #[serde(default)]
    pub elr: Vec<u32>,
    /// Kafka's `LastKnownElr` as the last known leader: the leader when the ISR became empty.
    /// When the ISR and the ELR are both empty it may lead again (KIP-966's last known leader
    /// election), with the ISR reset to itself alone.
    #[serde(default)]
    pub last_known_leader: Option<u32>,
}

/// A topic and its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    /// The topic name.
    pub name: String,
    /// Topic-level overrides with Kafka's names.
    pub configs: BTreeMap<String, String>,
    /// The partitions, indexed by partition number.
    pub partitions: Vec<PartitionMetadata>,
}

/// The whole cluster metadata, as brokers receive it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMetadata {
    /// Grows by one on every change; brokers apply a snapshot only if it is newer.
    pub version: u64,
    /// Registered brokers, by id.
    pub brokers: Vec<BrokerMetadata>,
    /// Topics, by name.
    pub topics: Vec<TopicMetadata>,
}

impl ClusterMetadata {
    /// The topic of that name, if it exists.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.iter().find(|t| t.name == name)
    }

    /// The broker of that id, if registered.
    pub fn broker(&self, id: u32) -> Option<&BrokerMetadata> {
        self.brokers.iter().find(|b| b.id == id)
    }
}

/// Producer ids handed to a broker per AllocateProducerIds, as Kafka's controller hands them
/// (`ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`, KIP-730).
pub const PRODUCER_ID_BLOCK_SIZE: u32 = 1000;

/// AllocateProducerIds (KIP-730): a broker asks for a block of producer ids to hand to
/// idempotent producers (InitProducerId).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocateProducerIdsRequest {
    /// The asking broker.
    pub broker_id: u32,
    /// Its current registration (a stale incarnation gets STALE_BROKER_EPOCH).
    pub broker_epoch: u64,
}

/// A block of producer ids no other broker is given, ever (persisted before the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    /// The first id of the block.
    pub first_producer_id: i64,
    /// How many ids follow from it.
    pub size: u32,
}
