//! An internal topic a coordinator keeps its state in (`__consumer_offsets` for the group
//! coordinator, `__transaction_state` for the transaction coordinator): created on first use,
//! one coordinator per partition (the partition's leader), loaded from the log when this broker
//! leads a partition in a new leader epoch, written through the partition's ordinary append
//! path with acks=all in a cluster (a local append on a standalone broker).

use std::collections::BTreeMap;

use crate::broker::Broker;
use crate::controller::protocol::CreateTopicRequest;
use crate::error::{ApiError, ErrorKind};
use crate::replication::produce::ProduceOptions;
use crate::storage::producer_state::Verification;
use crate::storage::{ProducerStamp, Record, StoredRecord};
use crate::topics::TopicMeta;

/// Why a coordinator cannot serve a partition of its topic now (Kafka's coordinator errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorUnavailable {
    /// Another broker leads the partition, or none does here: NOT_COORDINATOR.
    NotCoordinator(String),
    /// This broker leads it but its HW may not yet hold every record (KIP-207):
    /// COORDINATOR_LOAD_IN_PROGRESS.
    LoadInProgress(String),
    /// The topic cannot be created or has no partitions yet: COORDINATOR_NOT_AVAILABLE.
    NotAvailable(String),
    /// Reading or writing the log failed (kind and message of the broker's error).
    Api(ApiError),
}

/// One internal topic: its name and how it is created.
#[derive(Debug, Clone)]
pub struct InternalTopic {
    /// The topic's name.
    pub name: &'static str,
    /// Partitions when created.
    pub partitions: u32,
    /// Replication factor when created, capped by the brokers registered.
    pub replication_factor: u32,
    /// `min.insync.replicas` of the topic when created, capped by its replication factor;
    /// `None`: the broker's default.
    pub min_insync_replicas: Option<u32>,
    /// How long an append waits for the ISR.
    pub append_timeout_ms: u64,
}

impl InternalTopic {
    /// The topic's partition count in the cluster's metadata (a single broker's own catalog),
    /// or `None` when it does not exist yet.
    pub fn partition_count(&self, broker: &Broker) -> Option<u32> {
        match &broker.cluster {
            Some(cluster) => cluster
                .metadata()
                .topic(self.name)
                .map(|t| t.partitions.len() as u32),
            None => broker
                .topics
                .get(self.name)
                .map(|t| t.partitions.len() as u32),
        }
    }

    /// The partition count, creating the topic first if needed (two creations race only to
    /// TOPIC_ALREADY_EXISTS, which is fine).
    pub async fn ensure_created(&self, broker: &Broker) -> Result<u32, CoordinatorUnavailable> {
        if let Some(count) = self.partition_count(broker) {
            return Ok(count);
        }
        // Kafka compacts these topics; this broker has no compaction, so nothing may expire
        // instead: a coordinator's state must outlive any retention.
        let mut configs: BTreeMap<String, String> =
            [("retention.ms", "-1"), ("retention.bytes", "-1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let created = match &broker.cluster {
            None => {
                let meta = TopicMeta {
                    partitions: self.partitions,
                    replication_factor: 1,
                    configs,
                };
                broker.topics.create(self.name, meta).await.map(|_| ())
            }
            Some(cluster) => {
                let brokers = cluster.metadata().brokers.len().max(1) as u32;
                let replication_factor = self.replication_factor.min(brokers);
                if let Some(min_isr) = self.min_insync_replicas {
                    configs.insert(
                        "min.insync.replicas".into(),
                        min_isr.min(replication_factor).to_string(),
                    );
                }
                let request = CreateTopicRequest {
                    name: self.name.to_string(),
                    partitions: Some(self.partitions),
                    replication_factor: Some(replication_factor),
                    configs,
                };
                cluster.create_topic(&request).await.map(|_| ())
            }
        };
        match created {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::TopicAlreadyExists => {}
            Err(e) => {
                return Err(CoordinatorUnavailable::NotAvailable(format!(
                    "creating {}: {e}",
                    self.name
                )))
            }
        }
        self.partition_count(broker).ok_or_else(|| {
            CoordinatorUnavailable::NotAvailable(format!("{} is being created; retry", self.name))
        })
    }

    /// The partition count, creating the topic first under `lock` (the coordinator's lock
    /// that also serialises loading) when it does not exist yet.
    pub async fn count_or_create(
        &self,
        broker: &Broker,
        lock: &tokio::sync::Mutex<()>,
    ) -> Result<u32, CoordinatorUnavailable> {
        if let Some(count) = self.partition_count(broker) {
            return Ok(count);
        }
        let _created = lock.lock().await;
        self.ensure_created(broker).await
    }

    /// The leader epoch this broker leads `partition` in, once its HW is current (KIP-207).
    pub fn leader_epoch(
        &self,
        broker: &Broker,
        partition: u32,
    ) -> Result<u32, CoordinatorUnavailable> {
        let Some(cluster) = &broker.cluster else {
            let log = broker
                .topics
                .partition(self.name, partition)
                .map_err(CoordinatorUnavailable::Api)?;
            return Ok(log.offsets().leader_epoch);
        };
        let not_coordinator = || {
            CoordinatorUnavailable::NotCoordinator(format!(
                "this broker does not lead {}/{partition}",
                self.name
            ))
        };
        let replica = cluster
            .replica(self.name, partition)
            .ok_or_else(not_coordinator)?;
        let leader_epoch = {
            let role = replica.role();
            if !matches!(role.role, crate::replication::replica::Role::Leader(_)) {
                return Err(not_coordinator());
            }
            role.leader_epoch
        };
        cluster
            .check_hw_current(self.name, partition)
            .map_err(|e| match e.kind {
                ErrorKind::OffsetNotAvailable => CoordinatorUnavailable::LoadInProgress(e.message),
                _ => not_coordinator(),
            })?;
        Ok(leader_epoch)
    }

    /// Every record of `partition` from its log start to its HW, oldest first, handed to
    /// `apply` one page at a time.
    pub fn read_all(
        &self,
        broker: &Broker,
        partition: u32,
        mut apply: impl FnMut(&StoredRecord),
    ) -> Result<(), CoordinatorUnavailable> {
        let log = broker
            .topics
            .partition(self.name, partition)
            .map_err(CoordinatorUnavailable::Api)?;
        let mut offset = log.offsets().log_start_offset;
        loop {
            let (records, _) = log
                .read(offset, 1 << 20, crate::partition::Isolation::Committed)
                .map_err(|e| CoordinatorUnavailable::Api(ApiError::from(e)))?;
            let Some(last) = records.last() else {
                return Ok(());
            };
            offset = last.offset + 1;
            records.iter().for_each(&mut apply);
        }
    }

    /// Appends `records` to `partition`: acks=all with the topic's `min.insync.replicas` in a
    /// cluster, a local append otherwise. NOT_LEADER_OR_FOLLOWER and an unknown partition
    /// become NOT_COORDINATOR; other produce errors keep their names, so a client can tell
    /// "nothing written" (NOT_ENOUGH_REPLICAS) from "unknown" (REQUEST_TIMED_OUT,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub async fn append(
        &self,
        broker: &Broker,
        partition: u32,
        records: Vec<Record>,
    ) -> Result<(), CoordinatorUnavailable> {
        self.append_stamped(broker, partition, records, None)
            .await
            .map(|_| ())
    }

    /// [`InternalTopic::append`] as a producer's batch (a transactional offset commit's
    /// records carry the producer's stamp, so the partition's producer state fences an older
    /// epoch and the transaction's marker ends them); answers the batch's base offset.
    pub async fn append_stamped(
        &self,
        broker: &Broker,
        partition: u32,
        records: Vec<Record>,
        producer: Option<ProducerStamp>,
    ) -> Result<u64, CoordinatorUnavailable> {
        let result = match &broker.cluster {
            Some(cluster) => {
                let min_insync_replicas = broker
                    .topics
                    .get(self.name)
                    .map_or(broker.config.min_insync_replicas, |t| {
                        t.config.min_insync_replicas(&broker.config)
                    });
                let options = ProduceOptions {
                    acks_all: true,
                    timeout_ms: self.append_timeout_ms,
                    min_insync_replicas,
                    leader_epoch: None,
                    producer,
                    verification: Verification::Off,
                };
                cluster
                    .produce_with(self.name, partition, records, options)
                    .await
                    .map(|appended| appended.base_offset)
            }
            None => broker
                .topics
                .partition(self.name, partition)
                .and_then(|log| {
                    crate::ops::run_maybe_blocking(true, || {
                        log.append_from_producer(records, None, producer, Verification::Off)
                    })
                    .map(|appended| appended.base_offset)
                    .map_err(ApiError::from)
                }),
        };
        result.map_err(|e| match e.kind {
            ErrorKind::NotLeaderOrFollower | ErrorKind::UnknownTopicOrPartition => {
                CoordinatorUnavailable::NotCoordinator(e.message)
            }
            _ => CoordinatorUnavailable::Api(e),
        })
    }
}
