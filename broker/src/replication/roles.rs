//! Metadata-driven role changes (Kafka's `makeLeader` / `makeFollower`): applying a metadata
//! snapshot creates and deletes local topics, creates replica entries with their checkpointed
//! HW, and moves each local replica to leader, follower (starting its fetch task) or offline.
//! The follower fetch task changes its log only through [`ReplicaManager::with_follower`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::fetcher;
use super::hw_checkpoint;
use super::leader::LeaderState;
use super::manager::ReplicaManager;
use super::replica::{advance_leader_hw, DelayedProduces, Replica, Role, RoleState};
use crate::bugs::Bug;
use crate::controller::protocol::{ClusterMetadata, PartitionMetadata};
use crate::partition::{Partition, PartitionState};
use crate::topics::TopicMeta;

impl ReplicaManager {
    /// Applies a metadata snapshot newer than the current one: creates and deletes local
    /// topics, then makes each local replica leader, follower or offline as it says.
    pub async fn apply_metadata(self: &Arc<Self>, metadata: ClusterMetadata) {
        let _serial = self.apply_lock.lock().await;
        if metadata.version <= self.metadata().version {
            return;
        }
        let me = self.settings.broker_id;
        for topic in &metadata.topics {
            if self.topics.get(&topic.name).is_none() {
                let meta = TopicMeta {
                    partitions: topic.partitions.len() as u32,
                    replication_factor: topic
                        .partitions
                        .first()
                        .map_or(1, |p| p.replicas.len() as u16),
                    configs: topic.configs.clone(),
                };
                if let Err(e) = self.topics.create(&topic.name, meta).await {
                    tracing::error!(topic = %topic.name, error = %e, "could not create a local topic");
                }
            }
        }
        for topic in self.topics.list() {
            if metadata.topic(&topic.name).is_none() {
                self.forget_topic(&topic.name);
                if let Err(e) = self.topics.delete(&topic.name).await {
                    tracing::warn!(topic = %topic.name, error = %e, "could not delete a local topic");
                }
            }
        }
        self.metadata.send_replace(Arc::new(metadata.clone()));
        for topic in &metadata.topics {
            let Some(local) = self.topics.get(&topic.name) else {
                continue;
            };
            for pm in &topic.partitions {
                let Some(log) = local.partitions.get(pm.partition as usize) else {
                    continue;
                };
                if !pm.replicas.contains(&me) {
                    self.forget_replica(&topic.name, pm.partition);
                    continue;
                }
                let replica = self.replica_for(&topic.name, pm.partition, log);
                self.transition(&replica, pm, self.hw_min_isr(&topic.configs));
            }
        }
    }

    /// The replica entry, created on first sight with its HW from the checkpoint.
    fn replica_for(&self, topic: &str, partition: u32, log: &Arc<Partition>) -> Arc<Replica> {
        if let Some(existing) = self.replica(topic, partition) {
            if Arc::ptr_eq(&existing.log, log) {
                return existing;
            }
            existing.stop_fetcher();
        }
        {
            // Partition::open assumes a single replica (HW = LEO); in a cluster only the
            // checkpoint says what was committed.
            let mut state = log.lock();
            let checkpoint = hw_checkpoint::read(&log.dir).unwrap_or_else(|e| {
                tracing::warn!(dir = %log.dir.display(), error = %e, "unreadable HW checkpoint; using 0");
                0
            });
            let high_watermark =
                checkpoint.clamp(state.log.log_start_offset(), state.log.log_end_offset());
            state.high_watermark = high_watermark;
            log.publish(&state);
        }
        let replica = Arc::new(Replica {
            topic: topic.to_string(),
            partition,
            log: log.clone(),
            role: Mutex::new(RoleState {
                role: Role::Offline,
                leader_epoch: 0,
                replicas: Vec::new(),
                isr: Vec::new(),
            }),
            fetcher: Mutex::new(None),
            delayed_produces: Mutex::new(DelayedProduces::default()),
        });
        self.replicas
            .write()
            .expect("replicas lock")
            .insert((topic.to_string(), partition), replica.clone());
        replica
    }

    fn forget_replica(&self, topic: &str, partition: u32) {
        let removed = self
            .replicas
            .write()
            .expect("replicas lock")
            .remove(&(topic.to_string(), partition));
        if let Some(replica) = removed {
            replica.stop_fetcher();
        }
    }

    fn forget_topic(&self, topic: &str) {
        let keys: Vec<(String, u32)> = self
            .replicas
            .read()
            .expect("replicas lock")
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect();
        for (t, p) in keys {
            self.forget_replica(&t, p);
        }
    }

    /// The ISR size below which a leader of a topic with `configs` keeps its HW still: the
    /// topic's `min.insync.replicas` with eligible leader replicas (KIP-966), else 0.
    fn hw_min_isr(&self, configs: &BTreeMap<String, String>) -> usize {
        if !self.settings.eligible_leader_replicas_enable {
            return 0;
        }
        let min_isr = configs
            .get("min.insync.replicas")
            .and_then(|v| v.trim().parse::<u16>().ok())
            .unwrap_or(self.settings.min_insync_replicas);
        usize::from(min_isr)
    }

    /// Moves a replica to the role the metadata gives it (Kafka's makeLeader / makeFollower).
    fn transition(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        pm: &PartitionMetadata,
        hw_min_isr: usize,
    ) {
        let me = self.settings.broker_id;
        let mut role = replica.role();
        let same_epoch = role.leader_epoch == pm.leader_epoch;
        role.replicas = pm.replicas.clone();
        role.isr = pm.isr.clone();
        match pm.leader {
            Some(leader) if leader == me => {
                if let (Role::Leader(state), true) = (&mut role.role, same_epoch) {
                    // Same leadership; the controller changed the ISR (e.g. fenced a follower).
                    let before = state.isr();
                    if state.apply_partition_state(pm.partition_epoch, &pm.isr) {
                        self.count_isr_change(&before, &state.isr());
                        let mut log = replica.log.lock();
                        log.isr = state.isr();
                        advance_leader_hw(state, &mut log);
                        replica.publish(&log);
                    }
                } else {
                    self.become_leader(replica, &mut role, pm, hw_min_isr);
                }
            }
            Some(leader) => {
                let following = matches!(role.role, Role::Follower { leader: l } if l == leader);
                if !(following && same_epoch) {
                    self.become_follower(replica, &mut role, pm, leader);
                }
            }
            None => {
                if !matches!(role.role, Role::Offline) || !same_epoch {
                    replica.stop_fetcher();
                    role.role = Role::Offline;
                    role.leader_epoch = pm.leader_epoch;
                    let mut log = replica.log.lock();
                    log.leader_epoch = pm.leader_epoch;
                    replica.publish(&log);
                    tracing::warn!(topic = %replica.topic, partition = replica.partition, "partition offline: no leader");
                }
            }
        }
    }

    fn become_leader(
        &self,
        replica: &Arc<Replica>,
        role: &mut RoleState,
        pm: &PartitionMetadata,
        hw_min_isr: usize,
    ) {
        replica.stop_fetcher();
        let mut log = replica.log.lock();
        if self.settings.bugs.on(Bug::IdempotenceDedupeForgotten) {
            log.log.forget_idle_producers();
        }
        let log_end_offset = log.log.log_end_offset();
        if let Err(e) = log.log.assign_epoch(pm.leader_epoch, log_end_offset) {
            tracing::error!(topic = %replica.topic, partition = replica.partition, error = %e, "cannot record the leader epoch; staying offline");
            role.role = Role::Offline;
            return;
        }
        let mut state = LeaderState::new(
            self.settings.broker_id,
            pm,
            log_end_offset,
            log.high_watermark,
            crate::clock::now_ms(),
        );
        state.bugs = self.settings.bugs;
        // The deliberate bug that ignores min.insync.replicas ignores it here too, or the
        // still HW would hide it (no acks=all answer at all below min ISR).
        state.hw_min_isr = if self.settings.bugs.on(Bug::IgnoreMinInsync) {
            0
        } else {
            hw_min_isr
        };
        log.leader_epoch = pm.leader_epoch;
        log.replicas = pm.replicas.clone();
        log.isr = pm.isr.clone();
        advance_leader_hw(&mut state, &mut log);
        replica.publish(&log);
        tracing::info!(
            topic = %replica.topic, partition = replica.partition, leader_epoch = pm.leader_epoch,
            epoch_start_offset = log_end_offset, high_watermark = log.high_watermark, "became leader"
        );
        role.role = Role::Leader(Box::new(state));
        role.leader_epoch = pm.leader_epoch;
    }

    fn become_follower(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        role: &mut RoleState,
        pm: &PartitionMetadata,
        leader: u32,
    ) {
        replica.stop_fetcher();
        {
            let mut log = replica.log.lock();
            log.leader_epoch = pm.leader_epoch;
            log.replicas = pm.replicas.clone();
            log.isr = pm.isr.clone();
            replica.publish(&log);
        }
        role.role = Role::Follower { leader };
        role.leader_epoch = pm.leader_epoch;
        tracing::info!(topic = %replica.topic, partition = replica.partition, leader, leader_epoch = pm.leader_epoch, "became follower");
        let task = tokio::spawn(fetcher::run(
            self.clone(),
            replica.clone(),
            leader,
            pm.leader_epoch,
        ));
        *replica.fetcher.lock().expect("fetcher lock poisoned") = Some(task);
    }

    /// The follower fetch task's access to its replica: runs `f` on the partition state only
    /// while the replica still follows `leader` in `leader_epoch`, then publishes the offsets.
    pub(crate) fn with_follower<T>(
        &self,
        replica: &Replica,
        leader: u32,
        leader_epoch: u32,
        f: impl FnOnce(&mut PartitionState) -> Result<T, crate::storage::LogError>,
    ) -> Result<T, fetcher::FetchError> {
        let role = replica.role();
        let following = matches!(role.role, Role::Follower { leader: l } if l == leader);
        if !following || role.leader_epoch != leader_epoch {
            return Err(fetcher::FetchError::NoLongerFollowing);
        }
        let mut log = replica.log.lock();
        let result = f(&mut log).map_err(fetcher::FetchError::Log);
        replica.publish(&log);
        result
    }
}
