//! The controller's state machine: brokers, topics, partition leaders, epochs and ISRs.
//!
//! Pure: every method takes the current time as an argument and does no I/O, so the rules are
//! unit-tested directly. The rules follow KRaft's `ReplicationControlManager` and
//! `PartitionChangeBuilder`:
//!
//! - a broker is fenced when its session expires (`broker.session.timeout.ms` without a
//!   heartbeat) or when it registers again (a new incarnation replaces the old one); fencing
//!   removes it from every ISR except where it is the last member, and moves its leaderships;
//! - elections pick the first replica in assignment order that is live and in the ISR (so the
//!   preferred replica first); with no such replica the partition goes offline (leader `None`)
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
    CreateTopicRequest, PartitionMetadata, TopicMetadata,
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
    /// its leaderships move and it leaves the ISRs; the new incarnation is then unfenced, which
    /// may elect it where a partition is offline. Returns the new broker epoch.
    pub fn register_broker(&mut self, broker_id: u32, address: &str, now_ms: u64) -> u64 {
        if self.snapshot.brokers.contains_key(&broker_id) {
            self.fence_broker(broker_id);
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
        if new_isr != partition.isr {
            partition.isr = new_isr;
            partition.partition_epoch += 1;
            let result = partition.clone();
            self.bump_version();
            return Ok(result);
        }
        Ok(partition.clone())
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

    /// Marks a broker fenced and removes it from every partition it serves.
    fn fence_broker(&mut self, broker_id: u32) {
        if let Some(broker) = self.snapshot.brokers.get_mut(&broker_id) {
            broker.fenced = true;
        }
        let live = self.live_brokers();
        let default_unclean = self.config.unclean_leader_election_enable;
        let bugs = self.config.bugs;
        for topic in self.snapshot.topics.values_mut() {
            let unclean = unclean_enabled(&topic.configs, default_unclean, bugs);
            for partition in &mut topic.partitions {
                if !partition.replicas.contains(&broker_id) {
                    continue;
                }
                let mut changed = false;
                // Leave the ISR unless this broker is its last member: KRaft keeps the last
                // member so the partition remembers who holds every committed record.
                if partition.isr.len() > 1 && partition.isr.contains(&broker_id) {
                    partition.isr.retain(|&r| r != broker_id);
                    changed = true;
                }
                if partition.leader == Some(broker_id) {
                    let leader = elect(partition, &live, unclean);
                    set_leader(partition, leader, bugs);
                    changed = true;
                }
                if changed {
                    partition.partition_epoch += 1;
                }
            }
        }
    }

    /// Elects a leader for every offline partition that now has an eligible live replica.
    fn elect_offline_partitions(&mut self) {
        let live = self.live_brokers();
        let default_unclean = self.config.unclean_leader_election_enable;
        let bugs = self.config.bugs;
        for topic in self.snapshot.topics.values_mut() {
            let unclean = unclean_enabled(&topic.configs, default_unclean, bugs);
            for partition in topic.partitions.iter_mut().filter(|p| p.leader.is_none()) {
                if let Some(leader) = elect(partition, &live, unclean) {
                    set_leader(partition, Some(leader), bugs);
                    partition.partition_epoch += 1;
                }
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

/// The new leader: the first live ISR member in assignment order (the preferred replica first);
/// failing that, with `unclean`, the first live replica.
fn elect(partition: &mut PartitionMetadata, live: &[u32], unclean: bool) -> Option<u32> {
    let clean = partition
        .replicas
        .iter()
        .copied()
        .find(|r| live.contains(r) && partition.isr.contains(r));
    if clean.is_some() {
        return clean;
    }
    if !unclean {
        return None;
    }
    let chosen = partition
        .replicas
        .iter()
        .copied()
        .find(|r| live.contains(r))?;
    // An unclean leader's log is the new truth: the ISR restarts from it alone.
    partition.isr = vec![chosen];
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

    fn controller(unclean: bool) -> ControllerState {
        ControllerState::new(ControllerConfig {
            session_timeout_ms: SESSION_MS,
            num_partitions: 1,
            default_replication_factor: 3,
            unclean_leader_election_enable: unclean,
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
            bugs: {
                let mut bugs = Bugs::default();
                bugs.set(bug, true);
                bugs
            },
        });
        for id in 1..=3 {
            c.register_broker(id, &format!("http://127.0.0.1:{}", 9000 + id), 0);
        }
        c.create_topic(&topic_request("t", 1, 3)).unwrap();
        c
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
            c.register_broker(id, &format!("http://127.0.0.1:{}", 9000 + id), 0);
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
        c.register_broker(1, "http://127.0.0.1:9001", SESSION_MS + 2);
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
            c.register_broker(id, "a", 0);
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
        let new_epoch = c.register_broker(1, "http://127.0.0.1:9001", 10);
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
        assert!(restored.register_broker(4, "x", 50_001) > c.snapshot().last_broker_epoch);
    }

    #[test]
    fn restarted_sessions_expire_only_a_full_timeout_later() {
        let mut c = cluster(false);
        c.restart_sessions(10 * SESSION_MS);
        assert_eq!(c.expire_sessions(11 * SESSION_MS), Vec::<u32>::new());
        assert_eq!(c.expire_sessions(11 * SESSION_MS + 1), vec![1, 2, 3]);
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
