//! The controller's state machine: brokers, topics, partition leaders, epochs and ISRs.
//!
//! Pure: every method takes the current time as an argument and does no I/O, so the rules are
//! unit-tested directly. The rules follow KRaft's `ReplicationControlManager` and
//! `PartitionChangeBuilder`:
//!
//! - a broker is fenced when its session expires (`broker.session.timeout.ms` without a
//!   heartbeat) or when it registers again (a new incarnation replaces the old one); fencing
//!   removes it from every ISR and moves its leaderships. Without eligible leader replicas it
//!   stays where it is the last member;
//! - eligible leader replicas (KIP-966, `eligible.leader.replicas.enable`, on by default): while
//!   a partition's ISR is smaller than its `min.insync.replicas`, every replica that leaves the
//!   ISR joins its ELR (the ISR may become empty); once the ISR reaches min ISR the ELR is
//!   cleared. Brokers do not advance the HW below min ISR, so an ELR member holds every
//!   committed record and may lead when the ISR is empty;
//! - unclean shutdown (KIP-966): a broker that registers without the epoch of its previous
//!   incarnation (it did not stop in order, so it may have lost unflushed records) leaves every
//!   ISR and ELR. The leader when the ISR became empty is remembered as the last known leader
//!   and is elected only when the ISR and the ELR are both empty;
//! - elections pick the first replica in assignment order that is live and in the ISR, or in
//!   the ELR when the ISR is empty (an ELR leader starts a new ISR of itself alone); failing
//!   that, the live last known leader; failing that the partition goes offline (leader `None`)
//!   unless unclean election is enabled, which picks the first live replica and makes the ISR
//!   just that replica;
//! - every leader change bumps the leader epoch; every change of the partition bumps the
//!   partition epoch;
//! - ISR changes from leaders come only through [`ControllerState::alter_partition`], which
//!   rejects a stale leader epoch (`FENCED_LEADER_EPOCH`) or partition epoch
//!   (`INVALID_UPDATE_VERSION`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bugs::{Bug, Bugs};

use super::protocol::{
    AlterPartitionRequest, BrokerMetadata, ClusterMetadata, ControllerError, ControllerErrorCode,
    CreateTopicRequest, PartitionMetadata, ProducerIdBlock, TopicMetadata, PRODUCER_ID_BLOCK_SIZE,
};

/// Upper bound on partitions per topic, so one request cannot make the metadata huge.
pub const PARTITIONS_PER_TOPIC_MAX: u32 = 1000;

/// The settings the controller's decisions depend on (Kafka's names in the field docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker without a heartbeat for this long is fenced.
    pub session_timeout_ms: u64,
    /// `num.partitions`: partitions of a topic created without a count.
    pub num_partitions: u32,
    /// `default.replication.factor`: replicas of a topic created without a factor.
    pub default_replication_factor: u32,
    /// `unclean.leader.election.enable`: the cluster default; a topic's override wins.
    pub unclean_leader_election_enable: bool,
    /// `min.insync.replicas`: the cluster default; a topic's override wins. The ELR is kept
    /// while the ISR is smaller than this.
    pub min_insync_replicas: u16,
    /// `eligible.leader.replicas.enable`: KIP-966's eligible leader replicas and unclean
    /// shutdown handling; `false` restores the older rules (the last ISR member stays in the
    /// ISR and leads again whatever it lost).
    pub eligible_leader_replicas_enable: bool,
    /// `tidewater.bug.*`: deliberate bugs (only in a `deliberate-bugs` build).
    pub bugs: crate::bugs::Bugs,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: 9000,
            num_partitions: 1,
            default_replication_factor: 1,
            unclean_leader_election_enable: false,
            min_insync_replicas: 1,
            eligible_leader_replicas_enable: true,
            bugs: crate::bugs::Bugs::default(),
        }
    }
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerState {
    /// `broker.id`.
    pub id: u32,
    /// Address for clients and peers.
    pub address: String,
    /// `HOST:PORT` of its Kafka listener, if on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_address: Option<String>,
    /// Epoch of the current incarnation, from the controller's counter.
    pub broker_epoch: u64,
    /// Fenced brokers lead nothing and join no ISR.
    pub fenced: bool,
    /// Time of the last heartbeat (or registration). Not persisted: after a controller restart
    /// every broker gets a full session timeout to heartbeat again.
    #[serde(skip)]
    pub last_heartbeat_ms: u64,
}

/// The persisted part of the controller state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerSnapshot {
    /// Metadata version, bumped on every change.
    pub metadata_version: u64,
    /// The last broker epoch handed out; epochs never repeat, even across restarts.
    pub last_broker_epoch: u64,
    /// Brokers by id.
    pub brokers: BTreeMap<u32, BrokerState>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicMetadata>,
    /// The first producer id not yet handed out in a block (KIP-730): ids never repeat, even
    /// across restarts. Absent from snapshots written before producer ids were allocated.
    #[serde(default)]
    pub next_producer_id: i64,
}

/// The controller's state machine. See the module docs for the rules.
#[derive(Debug, Clone)]
pub struct ControllerState {
    config: ControllerConfig,
    snapshot: ControllerSnapshot,
}

impl ControllerState {
    /// An empty cluster.
    pub fn new(config: ControllerConfig) -> Self {
        let snapshot = ControllerSnapshot {
            metadata_version: 0,
            last_broker_epoch: 0,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            next_producer_id: 0,
        };
        Self { config, snapshot }
    }

    /// The state recovered from a snapshot; every broker's session restarts at `now_ms`.
    pub fn from_snapshot(
        config: ControllerConfig,
        snapshot: ControllerSnapshot,
        now_ms: u64,
    ) -> Self {
        let mut state = Self { config, snapshot };
        state.restart_sessions(now_ms);
        state
    }

    /// Restarts every broker's session at `now_ms`. After the controller itself was stopped
    /// (a restart, or a pause longer than a session), the missing heartbeats say nothing about
    /// the brokers: they get a full session timeout to heartbeat again.
    pub fn restart_sessions(&mut self, now_ms: u64) {
        for broker in self.snapshot.brokers.values_mut() {
            broker.last_heartbeat_ms = now_ms;
        }
    }

    /// What to persist.
    pub fn snapshot(&self) -> &ControllerSnapshot {
        &self.snapshot
    }

    /// The current metadata version.
    pub fn metadata_version(&self) -> u64 {
        self.snapshot.metadata_version
    }

    /// The metadata as brokers and clients see it.
    pub fn metadata(&self) -> ClusterMetadata {
        ClusterMetadata {
            version: self.snapshot.metadata_version,
            brokers: self
                .snapshot
                .brokers
                .values()
                .map(|b| BrokerMetadata {
                    id: b.id,
                    address: b.address.clone(),
                    kafka_address: b.kafka_address.clone(),
                    broker_epoch: b.broker_epoch,
                    fenced: b.fenced,
                })
                .collect(),
            topics: self.snapshot.topics.values().cloned().collect(),
        }
    }

    /// Registers a broker (first start or restart). A previous incarnation is fenced first, so
    /// its leaderships move and it leaves the ISRs. With eligible leader replicas, a
    /// `previous_broker_epoch` other than the previous incarnation's epoch means an unclean
    /// shutdown: the broker also leaves every ELR (and ISR where it was the last member), as
    /// its log may have lost what it had not flushed. The new incarnation is then unfenced,
    /// which may elect it where a partition is offline. Returns the new broker epoch.
    pub fn register_broker(
        &mut self,
        broker_id: u32,
        address: &str,
        previous_broker_epoch: Option<u64>,
        now_ms: u64,
    ) -> u64 {
        if let Some(previous) = self.snapshot.brokers.get(&broker_id) {
            let clean_shutdown = previous_broker_epoch == Some(previous.broker_epoch);
            self.fence_broker(broker_id);
            if !clean_shutdown && self.config.eligible_leader_replicas_enable {
                self.remove_after_unclean_shutdown(broker_id);
            }
        }
        self.snapshot.last_broker_epoch += 1;
        let broker_epoch = self.snapshot.last_broker_epoch;
        self.snapshot.brokers.insert(
            broker_id,
            BrokerState {
                id: broker_id,
                address: address.to_string(),
                kafka_address: None,
                broker_epoch,
                fenced: false,
                last_heartbeat_ms: now_ms,
            },
        );
        self.elect_offline_partitions();
        self.bump_version();
        broker_epoch
    }

    /// Records where Kafka clients reach `broker_id` (from its registration).
    pub fn set_kafka_address(&mut self, broker_id: u32, kafka_address: Option<String>) {
        if let Some(broker) = self.snapshot.brokers.get_mut(&broker_id) {
            if broker.kafka_address != kafka_address {
                broker.kafka_address = kafka_address;
                self.bump_version();
            }
        }
    }

    /// Records a heartbeat. A fenced broker with a current epoch is unfenced (it came back from
    /// a pause or a network partition) and may be elected where partitions are offline.
    pub fn heartbeat(
        &mut self,
        broker_id: u32,
        broker_epoch: u64,
        now_ms: u64,
    ) -> Result<(), ControllerError> {
        let broker = self.snapshot.brokers.get_mut(&broker_id).ok_or_else(|| {
            ControllerError::new(
                ControllerErrorCode::BrokerNotAvailable,
                format!("broker {broker_id} is not registered"),
            )
        })?;
        if broker.broker_epoch != broker_epoch {
            return Err(ControllerError::new(
                ControllerErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {broker_id} epoch {broker_epoch} is not the current {}",
                    broker.broker_epoch
                ),
            ));
        }
        broker.last_heartbeat_ms = now_ms;
        if broker.fenced {
            broker.fenced = false;
            self.elect_offline_partitions();
            self.bump_version();
        }
        Ok(())
    }

    /// AllocateProducerIds (KIP-730): the next block of producer ids for a registered broker's
    /// current incarnation. The metadata version moves, so the block is persisted before it is
    /// answered and no id is handed out twice.
    pub fn allocate_producer_ids(
        &mut self,
        broker_id: u32,
        broker_epoch: u64,
    ) -> Result<ProducerIdBlock, ControllerError> {
        let broker = self.snapshot.brokers.get(&broker_id).ok_or_else(|| {
            ControllerError::new(
                ControllerErrorCode::BrokerNotAvailable,
                format!("broker {broker_id} is not registered"),
            )
        })?;
        if broker.broker_epoch != broker_epoch {
            return Err(ControllerError::new(
                ControllerErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {broker_id} epoch {broker_epoch} is not the current {}",
                    broker.broker_epoch
                ),
            ));
        }
        let first_producer_id = self.snapshot.next_producer_id;
        let next = first_producer_id
            .checked_add(i64::from(PRODUCER_ID_BLOCK_SIZE))
            .ok_or_else(|| {
                ControllerError::new(
                    ControllerErrorCode::InvalidRequest,
                    "the producer id space is exhausted",
                )
            })?;
        assert!(next > first_producer_id, "producer ids only grow");
        self.snapshot.next_producer_id = next;
        self.bump_version();
        Ok(ProducerIdBlock {
            first_producer_id,
            size: PRODUCER_ID_BLOCK_SIZE,
        })
    }

    /// Fences every unfenced broker whose session expired. Returns the fenced ids.
    pub fn expire_sessions(&mut self, now_ms: u64) -> Vec<u32> {
        let expired: Vec<u32> = self
            .snapshot
            .brokers
            .values()
            .filter(|b| {
                !b.fenced
                    && now_ms.saturating_sub(b.last_heartbeat_ms) > self.config.session_timeout_ms
            })
            .map(|b| b.id)
            .collect();
        for &id in &expired {
            self.fence_broker(id);
        }
        if !expired.is_empty() {
            self.bump_version();
        }
        expired
    }

    /// Creates a topic, assigning replicas round-robin over the live brokers (sorted by id),
    /// partition `p` starting at live broker `p mod n`, so leaders spread evenly.
    pub fn create_topic(
        &mut self,
        request: &CreateTopicRequest,
    ) -> Result<TopicMetadata, ControllerError> {
        validate_topic_name(&request.name)?;
        if self.snapshot.topics.contains_key(&request.name) {
            return Err(ControllerError::new(
                ControllerErrorCode::TopicAlreadyExists,
                format!("topic '{}' already exists", request.name),
            ));
        }
        let partitions = request.partitions.unwrap_or(self.config.num_partitions);
        if partitions == 0 || partitions > PARTITIONS_PER_TOPIC_MAX {
            return Err(ControllerError::new(
                ControllerErrorCode::InvalidPartitions,
                format!(
                    "partitions must be within 1..={PARTITIONS_PER_TOPIC_MAX}, got {partitions}"
                ),
            ));
        }
        let replication_factor = request
            .replication_factor
            .unwrap_or(self.config.default_replication_factor);
        let live: Vec<u32> = self
            .snapshot
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect();
        if replication_factor == 0 || replication_factor as usize > live.len() {
            return Err(ControllerError::new(
                ControllerErrorCode::InvalidReplicationFactor,
                format!("replication factor {replication_factor} needs that many live brokers; {} are live", live.len()),
            ));
        }
        let topic = TopicMetadata {
            name: request.name.clone(),
            configs: request.configs.clone(),
            partitions: (0..partitions)
                .map(|p| {
                    let replicas: Vec<u32> = (0..replication_factor as usize)
                        .map(|i| live[(p as usize + i) % live.len()])
                        .collect();
                    PartitionMetadata {
                        partition: p,
                        leader: Some(replicas[0]),
                        leader_epoch: 0,
                        partition_epoch: 0,
                        isr: replicas.clone(),
                        replicas,
                        elr: Vec::new(),
                        last_known_leader: None,
                    }
                })
                .collect(),
        };
        self.snapshot
            .topics
            .insert(topic.name.clone(), topic.clone());
        self.bump_version();
        Ok(topic)
    }

    /// Deletes a topic; brokers delete their local replicas when the metadata no longer lists it.
    pub fn delete_topic(&mut self, name: &str) -> Result<(), ControllerError> {
        if self.snapshot.topics.remove(name).is_none() {
            return Err(unknown_partition(name, None));
        }
        self.bump_version();
        Ok(())
    }

    /// Applies a leader's ISR change after checking, in KRaft's order: the broker epoch, the
    /// partition, the leader epoch, the sender being the leader, the partition epoch, and the
    /// proposed ISR (contains the leader, only replicas, new members unfenced).
    pub fn alter_partition(
        &mut self,
        request: &AlterPartitionRequest,
    ) -> Result<PartitionMetadata, ControllerError> {
        match self.snapshot.brokers.get(&request.broker_id) {
            Some(b) if b.broker_epoch == request.broker_epoch => {}
            _ => {
                return Err(ControllerError::new(
                    ControllerErrorCode::StaleBrokerEpoch,
                    format!(
                        "broker {} epoch {} is not current",
                        request.broker_id, request.broker_epoch
                    ),
                ))
            }
        }
        let brokers = self.snapshot.brokers.clone();
        let rules = self.rules_for(&request.topic);
        let live = self.live_brokers();
        let partition = self.partition_mut(&request.topic, request.partition)?;
        if request.leader_epoch != partition.leader_epoch {
            return Err(ControllerError::new(
                ControllerErrorCode::FencedLeaderEpoch,
                format!(
                    "leader epoch {} is not the current {}",
                    request.leader_epoch, partition.leader_epoch
                ),
            ));
        }
        if partition.leader != Some(request.broker_id) {
            return Err(ControllerError::new(
                ControllerErrorCode::NotLeaderOrFollower,
                format!("broker {} is not the leader", request.broker_id),
            ));
        }
        if request.partition_epoch != partition.partition_epoch {
            return Err(ControllerError::new(
                ControllerErrorCode::InvalidUpdateVersion,
                format!(
                    "partition epoch {} is not the current {}",
                    request.partition_epoch, partition.partition_epoch
                ),
            ));
        }
        let mut new_isr = request.new_isr.clone();
        new_isr.sort_unstable();
        new_isr.dedup();
        if !new_isr.contains(&request.broker_id)
            || new_isr.iter().any(|r| !partition.replicas.contains(r))
        {
            return Err(ControllerError::new(
                ControllerErrorCode::InvalidRequest,
                format!(
                    "ISR {:?} must contain the leader and only replicas {:?}",
                    request.new_isr, partition.replicas
                ),
            ));
        }
        let ineligible = new_isr
            .iter()
            .find(|r| !partition.isr.contains(r) && !is_live(&brokers, **r));
        if let Some(r) = ineligible {
            return Err(ControllerError::new(
                ControllerErrorCode::IneligibleReplica,
                format!("replica {r} is fenced and cannot join the ISR"),
            ));
        }
        // The sender stays leader (it is live and in the new ISR); the ELR follows the new ISR.
        if change_partition(partition, new_isr, None, &live, &rules) {
            let result = partition.clone();
            self.bump_version();
            return Ok(result);
        }
        Ok(partition.clone())
    }

    /// The election rules of `topic`: its overrides, else the cluster defaults.
    fn rules_for(&self, topic: &str) -> ElectionRules {
        let configs = self.snapshot.topics.get(topic).map(|t| &t.configs);
        rules(&self.config, configs)
    }

    fn partition_mut(
        &mut self,
        topic: &str,
        partition: u32,
    ) -> Result<&mut PartitionMetadata, ControllerError> {
        self.snapshot
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(partition as usize))
            .ok_or_else(|| unknown_partition(topic, Some(partition)))
    }

    /// Marks a broker fenced and removes it from every ISR it is in (to the ELR where the ISR
    /// falls below min ISR), electing a new leader where it led.
    fn fence_broker(&mut self, broker_id: u32) {
        if let Some(broker) = self.snapshot.brokers.get_mut(&broker_id) {
            broker.fenced = true;
        }
        self.remove_from_partitions(broker_id, false);
    }

    /// KIP-966's unclean shutdown handling: removes `broker_id` from every ISR and every ELR.
    fn remove_after_unclean_shutdown(&mut self, broker_id: u32) {
        self.remove_from_partitions(broker_id, true);
    }

    /// Takes `broker_id` out of the ISR of every partition it replicates, and out of the ELR
    /// too when `unclean_shutdown`; elects where the leader is no longer valid.
    fn remove_from_partitions(&mut self, broker_id: u32, unclean_shutdown: bool) {
        let live = self.live_brokers();
        let config = self.config.clone();
        for topic in self.snapshot.topics.values_mut() {
            let rules = rules(&config, Some(&topic.configs));
            for partition in &mut topic.partitions {
                if !partition.replicas.contains(&broker_id) {
                    continue;
                }
                let target_isr: Vec<u32> = partition
                    .isr
                    .iter()
                    .copied()
                    .filter(|&r| r != broker_id)
                    .collect();
                let removed = unclean_shutdown.then_some(broker_id);
                let elr_dropped = !unclean_shutdown
                    && rules.bugs.on(Bug::ElrClearedOnFence)
                    && !partition.elr.is_empty();
                if elr_dropped {
                    // Deliberate bug: the fencing change starts from an empty ELR, so the
                    // replicas that stayed eligible are no longer (KIP-966 keeps them).
                    partition.elr.clear();
                }
                let changed = change_partition(partition, target_isr, removed, &live, &rules);
                if elr_dropped && !changed {
                    partition.partition_epoch += 1;
                }
            }
        }
    }

    /// Elects a leader for every offline partition that now has an eligible live replica.
    fn elect_offline_partitions(&mut self) {
        let live = self.live_brokers();
        let config = self.config.clone();
        for topic in self.snapshot.topics.values_mut() {
            let rules = rules(&config, Some(&topic.configs));
            for partition in topic.partitions.iter_mut().filter(|p| p.leader.is_none()) {
                let isr = partition.isr.clone();
                change_partition(partition, isr, None, &live, &rules);
            }
        }
    }

    /// Retries unclean elections on offline partitions (called periodically: a topic's config
    /// may allow it while no broker event happens).
    pub fn elect_offline(&mut self) -> bool {
        let before = self.snapshot.topics.clone();
        self.elect_offline_partitions();
        let changed = before != self.snapshot.topics;
        if changed {
            self.bump_version();
        }
        changed
    }

    fn live_brokers(&self) -> Vec<u32> {
        self.snapshot
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect()
    }

    fn bump_version(&mut self) {
        self.snapshot.metadata_version += 1;
    }
}

/// Whether broker `id` is registered and unfenced.
fn is_live(brokers: &BTreeMap<u32, BrokerState>, id: u32) -> bool {
    brokers.get(&id).is_some_and(|b| !b.fenced)
}

/// The topic's `unclean.leader.election.enable` override, else the cluster default.
fn unclean_enabled(configs: &BTreeMap<String, String>, default: bool, bugs: Bugs) -> bool {
    if bugs.on(Bug::UncleanElectionParse) {
        // Deliberate bug: any value, `false` included, reads as enabled.
        return true;
    }
    configs
        .get("unclean.leader.election.enable")
        .map(|v| v.trim().eq_ignore_ascii_case("true"))
        .unwrap_or(default)
}

/// What a partition change depends on besides the partition: the topic's settings in effect.
#[derive(Debug, Clone, Copy)]
struct ElectionRules {
    /// `unclean.leader.election.enable` in effect for the topic.
    unclean: bool,
    /// `eligible.leader.replicas.enable` (cluster-wide).
    elr_enabled: bool,
    /// `min.insync.replicas` in effect for the topic.
    min_isr: usize,
    /// Deliberate bugs.
    bugs: Bugs,
}

/// The rules of a topic with `configs` (its overrides), or the cluster defaults.
fn rules(config: &ControllerConfig, configs: Option<&BTreeMap<String, String>>) -> ElectionRules {
    let empty = BTreeMap::new();
    let configs = configs.unwrap_or(&empty);
    let min_isr = configs
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse::<u16>().ok())
        .unwrap_or(config.min_insync_replicas);
    ElectionRules {
        unclean: unclean_enabled(configs, config.unclean_leader_election_enable, config.bugs),
        elr_enabled: config.eligible_leader_replicas_enable,
        min_isr: usize::from(min_isr.max(1)),
        bugs: config.bugs,
    }
}

/// Kafka's `PartitionChangeBuilder` in small: moves `partition` to `target_isr` (minus
/// `unclean_shutdown`, which also leaves the ELR), recomputes the ELR and the last known
/// leader, and elects when the current leader is no longer valid. Bumps the leader epoch on a
/// leader change and the partition epoch on any change; returns whether anything changed.
fn change_partition(
    partition: &mut PartitionMetadata,
    mut target_isr: Vec<u32>,
    unclean_shutdown: Option<u32>,
    live: &[u32],
    rules: &ElectionRules,
) -> bool {
    let before = partition.clone();
    if let Some(removed) = unclean_shutdown {
        target_isr.retain(|&r| r != removed);
    }
    if target_isr.is_empty() && !rules.elr_enabled {
        // Without ELR the last member stays, so the partition remembers who holds every
        // committed record. (A state written with ELR on may have an empty ISR: its ELR, or
        // its last known leader, stands in.)
        target_isr = [
            partition.isr.clone(),
            partition.elr.clone(),
            partition.last_known_leader.into_iter().collect(),
        ]
        .into_iter()
        .find(|members| !members.is_empty())
        .unwrap_or_default();
    }
    let mut elr = target_elr(partition, &target_isr, unclean_shutdown, rules);
    let mut last_known_leader = partition.last_known_leader;
    if rules.elr_enabled && target_isr.is_empty() && !partition.isr.is_empty() {
        // The partition just lost its last in-sync replica: remember who led (or, when it was
        // already leaderless, the member that left last).
        last_known_leader = partition.leader.or(partition.isr.first().copied());
    }
    let is_valid = |r: u32, isr: &[u32], elr: &[u32]| {
        live.contains(&r) && (isr.contains(&r) || (isr.is_empty() && elr.contains(&r)))
    };
    let mut leader = partition.leader;
    if !leader.is_some_and(|l| is_valid(l, &target_isr, &elr)) {
        leader = elect(
            partition,
            &mut target_isr,
            &mut elr,
            last_known_leader,
            live,
            rules,
        );
    }
    if leader.is_some() {
        // A partition with a leader needs no last known leader.
        last_known_leader = None;
    }
    partition.isr = target_isr;
    partition.elr = elr;
    partition.last_known_leader = last_known_leader;
    if leader != before.leader {
        set_leader(partition, leader, rules.bugs);
    }
    let changed = *partition != before;
    if changed {
        partition.partition_epoch += 1;
    }
    changed
}

/// KIP-966's ELR for a partition moving to `target_isr`: empty while the ISR has min ISR
/// members (or ELR is off); otherwise the old ELR and old ISR, minus the new ISR and a replica
/// that shut down uncleanly. In assignment order.
fn target_elr(
    partition: &PartitionMetadata,
    target_isr: &[u32],
    unclean_shutdown: Option<u32>,
    rules: &ElectionRules,
) -> Vec<u32> {
    if !rules.elr_enabled || target_isr.len() >= rules.min_isr {
        return Vec::new();
    }
    partition
        .replicas
        .iter()
        .copied()
        .filter(|r| partition.elr.contains(r) || partition.isr.contains(r))
        .filter(|r| !target_isr.contains(r) && Some(*r) != unclean_shutdown)
        .collect()
}

/// The new leader, in Kafka's order: the first live replica (assignment order, so the
/// preferred one first) in the ISR, or in the ELR when the ISR is empty (it then becomes the
/// ISR alone and leaves the ELR); else the live last known leader when ISR and ELR are both
/// empty; else, with `unclean`, the first live replica. The last two restart the ISR from the
/// chosen replica alone and clear the ELR.
fn elect(
    partition: &PartitionMetadata,
    isr: &mut Vec<u32>,
    elr: &mut Vec<u32>,
    last_known_leader: Option<u32>,
    live: &[u32],
    rules: &ElectionRules,
) -> Option<u32> {
    let clean = partition
        .replicas
        .iter()
        .copied()
        .find(|r| live.contains(r) && (isr.contains(r) || (isr.is_empty() && elr.contains(r))));
    if let Some(chosen) = clean {
        if elr.contains(&chosen) {
            *isr = vec![chosen];
            elr.retain(|&r| r != chosen);
        }
        return Some(chosen);
    }
    let last_known = last_known_leader
        .filter(|r| rules.elr_enabled && isr.is_empty() && elr.is_empty() && live.contains(r));
    let unclean = || {
        partition
            .replicas
            .iter()
            .copied()
            .find(|r| rules.unclean && live.contains(r))
    };
    let chosen = last_known.or_else(unclean)?;
    // The chosen log is the new truth: the ISR restarts from it alone.
    *isr = vec![chosen];
    elr.clear();
    Some(chosen)
}

/// Sets the leader (or none) and bumps the leader epoch, as every leader change does (unless
/// the deliberate bug `no.epoch.bump` is on).
fn set_leader(partition: &mut PartitionMetadata, leader: Option<u32>, bugs: Bugs) {
    partition.leader = leader;
    if !bugs.on(Bug::NoEpochBump) {
        partition.leader_epoch += 1;
    }
}

fn unknown_partition(topic: &str, partition: Option<u32>) -> ControllerError {
    let what = match partition {
        Some(p) => format!("partition {topic}/{p} does not exist"),
        None => format!("topic '{topic}' does not exist"),
    };
    ControllerError::new(ControllerErrorCode::UnknownTopicOrPartition, what)
}

/// Kafka's topic name rule: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let valid_chars = name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if name.is_empty() || name.len() > 249 || name == "." || name == ".." || !valid_chars {
        return Err(ControllerError::new(
            ControllerErrorCode::InvalidTopicException,
            format!("invalid topic name {name:?}: use 1 to 249 characters of [a-zA-Z0-9._-], not '.' or '..'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION_MS: u64 = 1000;

    /// A controller with the rules before KIP-966 (no eligible leader replicas, min ISR 1):
    /// the tests below that use it pin those rules, which `eligible.leader.replicas.enable=false`
    /// keeps.
    fn controller(unclean: bool) -> ControllerState {
        ControllerState::new(ControllerConfig {
            session_timeout_ms: SESSION_MS,
            num_partitions: 1,
            default_replication_factor: 3,
            unclean_leader_election_enable: unclean,
            min_insync_replicas: 1,
            eligible_leader_replicas_enable: false,
            bugs: Bugs::default(),
        })
    }

    /// [`cluster`] (unclean election off) whose controller has `bug` switched on.
    #[cfg(feature = "deliberate-bugs")]
    fn cluster_with_bug(bug: Bug) -> ControllerState {
        let mut c = ControllerState::new(ControllerConfig {
            session_timeout_ms: SESSION_MS,
            num_partitions: 1,
            default_replication_factor: 3,
            unclean_leader_election_enable: false,
            min_insync_replicas: 1,
            eligible_leader_replicas_enable: false,
            bugs: {
                let mut bugs = Bugs::default();
                bugs.set(bug, true);
                bugs
            },
        });
        for id in 1..=3 {
            c.register_broker(id, &format!("http://127.0.0.1:{}", 9000 + id), None, 0);
        }
        c.create_topic(&topic_request("t", 1, 3)).unwrap();
        c
    }

    #[test]
    fn producer_id_blocks_are_disjoint_persisted_and_only_for_current_brokers() {
        let mut c = controller(false);
        let epoch_1 = c.register_broker(1, "http://127.0.0.1:9001", None, 0);
        let epoch_2 = c.register_broker(2, "http://127.0.0.1:9002", None, 0);
        let version = c.metadata_version();
        let first = c.allocate_producer_ids(1, epoch_1).unwrap();
        assert!(
            c.metadata_version() > version,
            "a block is persisted like metadata"
        );
        let second = c.allocate_producer_ids(2, epoch_2).unwrap();
        let third = c.allocate_producer_ids(1, epoch_1).unwrap();
        let firsts: Vec<i64> = [first, second, third]
            .iter()
            .map(|b| b.first_producer_id)
            .collect();
        assert_eq!(firsts, [0, 1000, 2000]);
        assert!([first, second, third].iter().all(|b| b.size == 1000));
        let stale = c.allocate_producer_ids(1, epoch_1 + 7).unwrap_err();
        assert_eq!(stale.error, ControllerErrorCode::StaleBrokerEpoch);
        let unknown = c.allocate_producer_ids(9, 1).unwrap_err();
        assert_eq!(unknown.error, ControllerErrorCode::BrokerNotAvailable);
        // A restarted controller goes on after the last block it persisted.
        let saved = serde_json::to_string(c.snapshot()).unwrap();
        let snapshot: ControllerSnapshot = serde_json::from_str(&saved).unwrap();
        let mut restarted = ControllerState::from_snapshot(c.config.clone(), snapshot, 0);
        let after = restarted.allocate_producer_ids(2, epoch_2).unwrap();
        assert_eq!(after.first_producer_id, 3000);
        // A snapshot written before producer ids were allocated starts them at 0.
        let mut old: serde_json::Value = serde_json::from_str(&saved).unwrap();
        old.as_object_mut().unwrap().remove("next_producer_id");
        let old: ControllerSnapshot = serde_json::from_value(old).unwrap();
        assert_eq!(old.next_producer_id, 0);
    }

    #[cfg(feature = "deliberate-bugs")]
    #[test]
    fn bug_no_epoch_bump_moves_the_leader_in_the_same_epoch() {
        let mut c = cluster_with_bug(Bug::NoEpochBump);
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!((p.leader, p.leader_epoch), (Some(2), 0));
    }

    #[cfg(feature = "deliberate-bugs")]
    #[test]
    fn bug_unclean_election_parse_elects_out_of_sync_with_unclean_off() {
        let mut c = cluster_with_bug(Bug::UncleanElectionParse);
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(p.leader, Some(2), "an out-of-sync replica was elected");
        assert_eq!(p.isr, vec![2]);
    }

    /// Three brokers registered at t=0 and a topic "t" with one partition on [1, 2, 3].
    fn cluster(unclean: bool) -> ControllerState {
        let mut c = controller(unclean);
        for id in 1..=3 {
            c.register_broker(id, &format!("http://127.0.0.1:{}", 9000 + id), None, 0);
        }
        c.create_topic(&topic_request("t", 1, 3)).unwrap();
        c
    }

    fn topic_request(name: &str, partitions: u32, rf: u32) -> CreateTopicRequest {
        CreateTopicRequest {
            name: name.to_string(),
            partitions: Some(partitions),
            replication_factor: Some(rf),
            configs: BTreeMap::new(),
        }
    }

    fn part(c: &ControllerState) -> PartitionMetadata {
        c.snapshot().topics["t"].partitions[0].clone()
    }

    fn epoch_of(c: &ControllerState, id: u32) -> u64 {
        c.snapshot().brokers[&id].broker_epoch
    }

    fn alter(
        c: &mut ControllerState,
        leader: u32,
        isr: Vec<u32>,
    ) -> Result<PartitionMetadata, ControllerError> {
        let p = part(c);
        let request = AlterPartitionRequest {
            broker_id: leader,
            broker_epoch: epoch_of(c, leader),
            topic: "t".into(),
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr,
        };
        c.alter_partition(&request)
    }

    /// Keeps brokers `alive` heartbeating at `now_ms`, then expires the others' sessions.
    fn advance(c: &mut ControllerState, alive: &[u32], now_ms: u64) -> Vec<u32> {
        for &id in alive {
            let epoch = epoch_of(c, id);
            c.heartbeat(id, epoch, now_ms).unwrap();
        }
        c.expire_sessions(now_ms)
    }

    #[test]
    fn topic_assignment_is_round_robin_with_preferred_leader_first() {
        let mut c = cluster(false);
        let topic = c.create_topic(&topic_request("u", 3, 2)).unwrap();
        let replicas: Vec<Vec<u32>> = topic
            .partitions
            .iter()
            .map(|p| p.replicas.clone())
            .collect();
        assert_eq!(replicas, vec![vec![1, 2], vec![2, 3], vec![3, 1]]);
        for p in &topic.partitions {
            assert_eq!(p.leader, Some(p.replicas[0]));
            assert_eq!(p.isr, p.replicas);
            assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
        }
    }

    #[test]
    fn create_topic_rejects_bad_requests() {
        let mut c = cluster(false);
        let err = |r: Result<TopicMetadata, ControllerError>| r.unwrap_err().error;
        assert_eq!(
            err(c.create_topic(&topic_request("t", 1, 1))),
            ControllerErrorCode::TopicAlreadyExists
        );
        assert_eq!(
            err(c.create_topic(&topic_request("x", 1, 4))),
            ControllerErrorCode::InvalidReplicationFactor
        );
        assert_eq!(
            err(c.create_topic(&topic_request("x", 0, 1))),
            ControllerErrorCode::InvalidPartitions
        );
        assert_eq!(
            err(c.create_topic(&topic_request("../x", 1, 1))),
            ControllerErrorCode::InvalidTopicException
        );
        assert_eq!(
            err(c.create_topic(&topic_request("..", 1, 1))),
            ControllerErrorCode::InvalidTopicException
        );
        assert!(!c.snapshot().topics.contains_key("x"));
    }

    #[test]
    fn session_expiry_fences_leader_and_elects_next_isr_member_with_new_epoch() {
        let mut c = cluster(false);
        let version = c.metadata_version();
        assert_eq!(advance(&mut c, &[2, 3], SESSION_MS), Vec::<u32>::new());
        assert_eq!(advance(&mut c, &[2, 3], SESSION_MS + 1), vec![1]);
        let p = part(&c);
        assert_eq!(p.leader, Some(2));
        assert_eq!(p.leader_epoch, 1);
        assert_eq!(p.isr, vec![2, 3]);
        assert_eq!(p.partition_epoch, 1);
        assert!(c.snapshot().brokers[&1].fenced);
        assert!(c.metadata_version() > version);
    }

    #[test]
    fn follower_expiry_shrinks_isr_without_leader_change() {
        let mut c = cluster(false);
        advance(&mut c, &[1, 2], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!((p.leader, p.leader_epoch), (Some(1), 0));
        assert_eq!(p.isr, vec![1, 2]);
    }

    #[test]
    fn last_isr_member_stays_and_partition_goes_offline_without_unclean() {
        let mut c = cluster(false);
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(p.leader, None);
        assert_eq!(p.isr, vec![1]);
        assert_eq!(p.leader_epoch, 1);
        // Still offline after more time: 2 and 3 are live but not in the ISR.
        assert!(!c.elect_offline());
        assert_eq!(part(&c).leader, None);
        // Broker 1 coming back (new incarnation) is elected from the ISR with a new epoch.
        c.register_broker(1, "http://127.0.0.1:9001", None, SESSION_MS + 2);
        let p = part(&c);
        assert_eq!((p.leader, p.leader_epoch), (Some(1), 2));
        assert_eq!(p.isr, vec![1]);
    }

    #[test]
    fn unclean_election_picks_live_out_of_sync_replica_and_resets_isr() {
        let mut c = cluster(true);
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(p.leader, Some(2));
        assert_eq!(p.isr, vec![2]);
        assert_eq!(p.leader_epoch, 1);
    }

    #[test]
    fn topic_override_of_unclean_election_wins_over_cluster_default() {
        let mut c = controller(false);
        for id in 1..=3 {
            c.register_broker(id, "a", None, 0);
        }
        let mut request = topic_request("t", 1, 3);
        request
            .configs
            .insert("unclean.leader.election.enable".into(), "true".into());
        c.create_topic(&request).unwrap();
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        assert_eq!(part(&c).leader, Some(2));
    }

    #[test]
    fn alter_partition_rejects_stale_epochs_and_bad_isrs() {
        let mut c = cluster(false);
        let p = part(&c);
        let good = AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: epoch_of(&c, 1),
            topic: "t".into(),
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: vec![1, 2],
        };
        let code = |c: &mut ControllerState, r: AlterPartitionRequest| {
            c.alter_partition(&r).unwrap_err().error
        };
        let stale_leader_epoch = AlterPartitionRequest {
            leader_epoch: 7,
            ..good.clone()
        };
        assert_eq!(
            code(&mut c, stale_leader_epoch),
            ControllerErrorCode::FencedLeaderEpoch
        );
        let stale_partition_epoch = AlterPartitionRequest {
            partition_epoch: 9,
            ..good.clone()
        };
        assert_eq!(
            code(&mut c, stale_partition_epoch),
            ControllerErrorCode::InvalidUpdateVersion
        );
        let not_leader = AlterPartitionRequest {
            broker_id: 2,
            broker_epoch: epoch_of(&c, 2),
            ..good.clone()
        };
        assert_eq!(
            code(&mut c, not_leader),
            ControllerErrorCode::NotLeaderOrFollower
        );
        let stale_broker = AlterPartitionRequest {
            broker_epoch: 99,
            ..good.clone()
        };
        assert_eq!(
            code(&mut c, stale_broker),
            ControllerErrorCode::StaleBrokerEpoch
        );
        let without_leader = AlterPartitionRequest {
            new_isr: vec![2, 3],
            ..good.clone()
        };
        assert_eq!(
            code(&mut c, without_leader),
            ControllerErrorCode::InvalidRequest
        );
        assert_eq!(part(&c), p, "rejected requests change nothing");

        let applied = c.alter_partition(&good).unwrap();
        assert_eq!(applied.isr, vec![1, 2]);
        assert_eq!(applied.partition_epoch, p.partition_epoch + 1);
        assert_eq!(applied.leader_epoch, p.leader_epoch);
        // The same request again is now stale.
        assert_eq!(
            code(&mut c, good),
            ControllerErrorCode::InvalidUpdateVersion
        );
    }

    #[test]
    fn fenced_replica_cannot_rejoin_isr_until_it_heartbeats() {
        let mut c = cluster(false);
        advance(&mut c, &[1, 2], SESSION_MS + 1);
        assert_eq!(
            alter(&mut c, 1, vec![1, 2, 3]).unwrap_err().error,
            ControllerErrorCode::IneligibleReplica
        );
        advance(&mut c, &[1, 2, 3], SESSION_MS + 2);
        assert!(!c.snapshot().brokers[&3].fenced);
        assert_eq!(alter(&mut c, 1, vec![1, 2, 3]).unwrap().isr, vec![1, 2, 3]);
    }

    #[test]
    fn reregistration_fences_old_incarnation_and_moves_leadership() {
        let mut c = cluster(false);
        let old_epoch = epoch_of(&c, 1);
        let new_epoch = c.register_broker(1, "http://127.0.0.1:9001", None, 10);
        assert!(new_epoch > old_epoch);
        let p = part(&c);
        assert_eq!((p.leader, p.leader_epoch), (Some(2), 1));
        assert_eq!(p.isr, vec![2, 3]);
        assert_eq!(
            c.heartbeat(1, old_epoch, 11).unwrap_err().error,
            ControllerErrorCode::StaleBrokerEpoch
        );
        c.heartbeat(1, new_epoch, 11).unwrap();
    }

    #[test]
    fn snapshot_round_trip_keeps_everything_and_restarts_sessions() {
        let mut c = cluster(false);
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let json = serde_json::to_vec(c.snapshot()).unwrap();
        let snapshot: ControllerSnapshot = serde_json::from_slice(&json).unwrap();
        let mut restored = ControllerState::from_snapshot(c.config.clone(), snapshot, 50_000);
        assert_eq!(restored.metadata(), c.metadata());
        // Sessions restart at recovery time: nobody is fenced right after it.
        assert_eq!(
            restored.expire_sessions(50_000 + SESSION_MS),
            Vec::<u32>::new()
        );
        // Broker epochs keep growing across the restart.
        assert!(restored.register_broker(4, "x", None, 50_001) > c.snapshot().last_broker_epoch);
    }

    #[test]
    fn restarted_sessions_expire_only_a_full_timeout_later() {
        let mut c = cluster(false);
        c.restart_sessions(10 * SESSION_MS);
        assert_eq!(c.expire_sessions(11 * SESSION_MS), Vec::<u32>::new());
        assert_eq!(c.expire_sessions(11 * SESSION_MS + 1), vec![1, 2, 3]);
    }

    /// Three brokers and topic "t" on [1, 2, 3] under KIP-966's rules with `min_isr`.
    fn elr_cluster(min_isr: u16, unclean: bool) -> ControllerState {
        let mut c = ControllerState::new(ControllerConfig {
            session_timeout_ms: SESSION_MS,
            num_partitions: 1,
            default_replication_factor: 3,
            unclean_leader_election_enable: unclean,
            min_insync_replicas: min_isr,
            eligible_leader_replicas_enable: true,
            bugs: Bugs::default(),
        });
        for id in 1..=3 {
            c.register_broker(id, &format!("http://127.0.0.1:{}", 9000 + id), None, 0);
        }
        c.create_topic(&topic_request("t", 1, 3)).unwrap();
        c
    }

    /// Registers `id` again, after a clean shutdown when `clean` (it names its last epoch).
    fn restart(c: &mut ControllerState, id: u32, clean: bool, now_ms: u64) {
        let previous = clean.then(|| epoch_of(c, id));
        c.register_broker(
            id,
            &format!("http://127.0.0.1:{}", 9000 + id),
            previous,
            now_ms,
        );
    }

    #[test]
    fn elr_takes_replicas_that_leave_an_isr_below_min_isr_and_clears_at_min_isr() {
        let mut c = elr_cluster(2, false);
        alter(&mut c, 1, vec![1, 2]).unwrap();
        assert_eq!(part(&c).elr, Vec::<u32>::new(), "ISR still at min ISR");
        // 3 left while the ISR kept min ISR members, so it may miss records committed since:
        // only 2 becomes eligible.
        let p = alter(&mut c, 1, vec![1]).unwrap();
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![1], vec![2]));
        assert_eq!((p.leader, p.leader_epoch), (Some(1), 0));
        // A replica back in the ISR leaves the ELR; at min ISR the ELR is empty again.
        let p = alter(&mut c, 1, vec![1, 3]).unwrap();
        assert_eq!((p.isr, p.elr), (vec![1, 3], vec![]));
    }

    #[test]
    fn elr_member_leads_when_the_isr_empties_and_the_unclean_leader_cannot() {
        // power-loss-leader: the followers are cut off and fenced, the ISR is the leader
        // alone, the leader loses power, the followers come back, the leader boots again.
        let mut c = elr_cluster(2, false);
        // The leader shrinks the ISR (replica.lag.time.max.ms), then the controller fences
        // the followers (broker.session.timeout.ms): they stay in the ELR.
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[1], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![1], vec![2, 3]));
        assert!(c.snapshot().brokers[&2].fenced);
        // Power loss of 1; 2 and 3 heartbeat again before 1's session expires.
        advance(&mut c, &[2, 3], SESSION_MS + 2);
        advance(&mut c, &[2, 3], 2 * SESSION_MS + 2);
        let p = part(&c);
        assert_eq!(
            p.leader,
            Some(2),
            "an ELR member leads: it holds every committed record"
        );
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![2], vec![1, 3]));
        assert_eq!(p.leader_epoch, 1);
        // 1 boots without a clean-shutdown marker: out of the ELR, leads nothing.
        restart(&mut c, 1, false, 2 * SESSION_MS + 3);
        let p = part(&c);
        assert_eq!(
            (p.leader, p.isr.clone(), p.elr.clone()),
            (Some(2), vec![2], vec![3])
        );
        // It may rejoin the ISR once caught up, like any follower.
        assert_eq!(alter(&mut c, 2, vec![1, 2]).unwrap().elr, Vec::<u32>::new());
    }

    /// power-loss-leader with min ISR 2 on a controller with `bugs`: the leader shrinks the
    /// ISR to itself, the followers are fenced, the leader loses power and its session
    /// expires after the followers came back, then it boots without a clean-shutdown marker.
    /// The partition after the fencing of the followers, after the leader's, and after its
    /// reboot.
    fn lone_leader_power_loss(bugs: Bugs) -> [PartitionMetadata; 3] {
        let mut c = elr_cluster(2, false);
        c.config.bugs = bugs;
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[1], SESSION_MS + 1);
        let followers_fenced = part(&c);
        advance(&mut c, &[2, 3], SESSION_MS + 2);
        advance(&mut c, &[2, 3], 2 * SESSION_MS + 2);
        let leader_fenced = part(&c);
        restart(&mut c, 1, false, 2 * SESSION_MS + 3);
        [followers_fenced, leader_fenced, part(&c)]
    }

    #[test]
    fn fencing_keeps_the_elr_unless_the_bug_drops_it() {
        let summary = |p: &PartitionMetadata| (p.leader, p.isr.clone(), p.elr.clone());
        let [fenced, lost, rebooted] = lone_leader_power_loss(Bugs::default());
        assert_eq!(summary(&fenced), (Some(1), vec![1], vec![2, 3]));
        assert_eq!(summary(&lost), (Some(2), vec![2], vec![1, 3]));
        assert_eq!(summary(&rebooted), (Some(2), vec![2], vec![3]));
        let mut bugs = Bugs::default();
        bugs.set(Bug::ElrClearedOnFence, true);
        let [fenced, lost, rebooted] = lone_leader_power_loss(bugs);
        if cfg!(feature = "deliberate-bugs") {
            // Fencing the followers dropped them from the ELR: when the leader goes, nobody
            // but it is eligible, so the partition waits for it and it leads again on what
            // its disk kept (the last known leader).
            assert_eq!(summary(&fenced), (Some(1), vec![1], vec![]));
            assert_eq!(summary(&lost), (None, vec![], vec![1]));
            assert_eq!(lost.last_known_leader, Some(1));
            assert_eq!(summary(&rebooted), (Some(1), vec![1], vec![]));
        } else {
            assert_eq!(summary(&rebooted), (Some(2), vec![2], vec![3]));
        }
    }

    #[test]
    fn offline_partition_waits_for_an_elr_member_and_elects_it_when_it_returns() {
        let mut c = elr_cluster(2, false);
        alter(&mut c, 1, vec![1]).unwrap();
        // Every session expires; leadership passes along the ELR (each is still unfenced
        // when the one before it is fenced) until nobody is left: the ISR is empty, every
        // replica is in the ELR, and 3 led last.
        advance(&mut c, &[], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(p.leader, None);
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![], vec![1, 2, 3]));
        assert_eq!(p.last_known_leader, Some(3));
        // 1 restarts uncleanly: out of the ELR; 2 and 3 are still eligible, so no
        // last-known-leader election while they may come back.
        restart(&mut c, 1, false, SESSION_MS + 2);
        let p = part(&c);
        assert_eq!((p.leader, p.elr.clone()), (None, vec![2, 3]));
        // 3 comes back (a heartbeat of its running incarnation): it leads from the ELR.
        advance(&mut c, &[1, 3], SESSION_MS + 3);
        let p = part(&c);
        assert_eq!(
            (p.leader, p.isr.clone(), p.elr.clone()),
            (Some(3), vec![3], vec![2])
        );
        assert_eq!(p.last_known_leader, None);
    }

    #[test]
    fn last_known_leader_leads_again_when_isr_and_elr_are_empty() {
        // min ISR 1: the lone leader's ISR is at min ISR, so nobody else is eligible.
        let mut c = elr_cluster(1, false);
        alter(&mut c, 1, vec![1]).unwrap();
        assert_eq!(part(&c).elr, Vec::<u32>::new());
        advance(&mut c, &[2, 3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(
            (p.leader, p.isr.clone(), p.elr.clone()),
            (None, vec![], vec![1])
        );
        assert_eq!(p.last_known_leader, Some(1));
        // It restarts uncleanly: out of the ELR, but as the last known leader it leads again
        // (KIP-966 keeps the partition available; what it lost unsynced is lost).
        restart(&mut c, 1, false, SESSION_MS + 2);
        let p = part(&c);
        assert_eq!(
            (p.leader, p.isr.clone(), p.elr.clone()),
            (Some(1), vec![1], vec![])
        );
        assert_eq!((p.last_known_leader, p.leader_epoch), (None, 2));
    }

    #[test]
    fn clean_restart_keeps_elr_membership_and_unclean_restart_loses_it() {
        let mut c = elr_cluster(2, false);
        alter(&mut c, 1, vec![1]).unwrap();
        restart(&mut c, 3, true, 10);
        assert_eq!(part(&c).elr, vec![2, 3], "stopped in order: still eligible");
        restart(&mut c, 3, false, 20);
        assert_eq!(
            part(&c).elr,
            vec![2],
            "no marker: may have lost unflushed records"
        );
        // The leader restarting cleanly keeps its records: it stays eligible when it leaves.
        restart(&mut c, 1, true, 30);
        let p = part(&c);
        assert_eq!(p.leader, Some(2), "2 was in the ELR and the ISR emptied");
        assert_eq!((p.isr, p.elr), (vec![2], vec![1]));
    }

    #[test]
    fn unclean_election_comes_after_elr_and_last_known_leader_and_clears_them() {
        let mut c = elr_cluster(2, true);
        alter(&mut c, 1, vec![1, 2]).unwrap();
        // 1 and 2 die; 3 (outside the ISR, never in the ELR) is the only live replica.
        advance(&mut c, &[3], SESSION_MS + 1);
        let p = part(&c);
        assert_eq!(p.leader, Some(3), "unclean election");
        assert_eq!((p.isr, p.elr, p.last_known_leader), (vec![3], vec![], None));
    }

    #[test]
    fn without_elr_the_last_isr_member_leads_again_after_an_unclean_restart() {
        // The rule before KIP-966, which power-loss-leader shows losing acknowledged writes.
        let mut c = controller(false);
        c.config.min_insync_replicas = 2;
        for id in 1..=3 {
            c.register_broker(id, "http://127.0.0.1:9000", None, 0);
        }
        c.create_topic(&topic_request("t", 1, 3)).unwrap();
        advance(&mut c, &[1], SESSION_MS + 1);
        advance(&mut c, &[2, 3], 2 * SESSION_MS + 2);
        assert_eq!((part(&c).leader, part(&c).isr), (None, vec![1]));
        restart(&mut c, 1, false, 2 * SESSION_MS + 3);
        let p = part(&c);
        assert_eq!((p.leader, p.isr, p.elr), (Some(1), vec![1], vec![]));
    }

    #[test]
    fn switching_elr_off_turns_an_elr_back_into_the_last_isr_members() {
        let mut c = elr_cluster(2, false);
        alter(&mut c, 1, vec![1]).unwrap();
        advance(&mut c, &[], SESSION_MS + 1);
        assert_eq!((part(&c).isr, part(&c).elr), (vec![], vec![1, 2, 3]));
        // The controller restarts with eligible.leader.replicas.enable=false.
        let mut config = c.config.clone();
        config.eligible_leader_replicas_enable = false;
        let mut c = ControllerState::from_snapshot(config, c.snapshot().clone(), SESSION_MS + 2);
        advance(&mut c, &[2], SESSION_MS + 3);
        let p = part(&c);
        assert_eq!((p.leader, p.isr, p.elr), (Some(2), vec![1, 2, 3], vec![]));
    }

    #[test]
    fn snapshot_without_elr_fields_loads_with_empty_elr() {
        let c = cluster(false);
        let mut json = serde_json::to_value(c.snapshot()).unwrap();
        let partition = &mut json["topics"]["t"]["partitions"][0];
        partition.as_object_mut().unwrap().remove("elr");
        partition
            .as_object_mut()
            .unwrap()
            .remove("last_known_leader");
        let snapshot: ControllerSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(snapshot.topics["t"].partitions[0].elr, Vec::<u32>::new());
    }

    #[test]
    fn delete_topic_removes_it_and_unknown_is_an_error() {
        let mut c = cluster(false);
        c.delete_topic("t").unwrap();
        assert!(c.metadata().topic("t").is_none());
        assert_eq!(
            c.delete_topic("t").unwrap_err().error,
            ControllerErrorCode::UnknownTopicOrPartition
        );
    }
}
