//! One consumer group's membership state machine (Kafka's `GroupMetadata` plus the membership
//! half of `GroupCoordinator`), as a pure value: every method takes `now_ms`, so timeouts are
//! tested by moving a number, never by sleeping. Storage and waiting live in
//! [`super::coordinator`].
//!
//! States and transitions (Kafka's):
//!
//! ```text
//! Empty ──join──> PreparingRebalance ──all known members joined, or rebalance timeout──>
//!   CompletingRebalance ──leader's assignment stored──> Stable
//! Stable / CompletingRebalance ──join (new member, leader, changed metadata), leave,
//!   session or poll timeout, partition count change──> PreparingRebalance
//! PreparingRebalance ──last member gone──> Empty;  any ──offsets partition led elsewhere──> Dead
//! ```
//!
//! Liveness of a member: a heartbeat (or join, sync, commit) within `session_timeout_ms`, and a
//! *poll* within `max_poll_interval_ms`. Kafka's consumer enforces the poll interval itself and
//! leaves the group; over HTTP the coordinator enforces it: heartbeats carry `polled: true` when
//! the application polled since the previous heartbeat, and joins and commits count as polls. A
//! member waiting for its join or sync answer is alive (it is inside `poll`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::assignor::{Assignment, TopicPartition};
use super::error::{GroupError, GroupErrorKind};

/// Bounds the coordinator puts on members (Kafka's `group.min.session.timeout.ms`,
/// `group.max.session.timeout.ms`, `group.max.size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Smallest accepted `session_timeout_ms`.
    pub session_timeout_min_ms: u64,
    /// Largest accepted `session_timeout_ms`.
    pub session_timeout_max_ms: u64,
    /// Largest accepted `rebalance_timeout_ms` (= `max.poll.interval.ms`).
    pub rebalance_timeout_max_ms: u64,
    /// Most members one group may have.
    pub members_max: usize,
}

impl Default for GroupLimits {
    fn default() -> Self {
        // Kafka's minimum is 6000 ms; lower here so tests and chaos runs move quickly.
        GroupLimits {
            session_timeout_min_ms: 100,
            session_timeout_max_ms: 1_800_000,
            rebalance_timeout_max_ms: 3_600_000,
            members_max: 1_000,
        }
    }
}

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GroupState {
    /// No members (offsets may exist).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted or moved to another coordinator; refuses everything.
    Dead,
}

/// Default `max_poll_interval_ms` of a join (Kafka's `max.poll.interval.ms`: 300000), the
/// rebalance timeout when a front door's request does not give one.
pub const MAX_POLL_INTERVAL_DEFAULT_MS: u64 = 300_000;
/// Most topics one member may subscribe to (every front door refuses a longer subscription).
pub const SUBSCRIPTION_TOPICS_MAX: usize = 1_000;

/// A join request, already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// The member's id, `None` on its first join.
    pub member_id: Option<String>,
    /// The client's name, the prefix of a new member id.
    pub client_id: String,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Supported assignors, most preferred first.
    pub assignors: Vec<String>,
    /// `session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// `max.poll.interval.ms`, also the rebalance timeout (as in Kafka's consumer).
    pub max_poll_interval_ms: u64,
}

/// A member as the leader sees it in its join answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JoinedMember {
    /// Member id.
    pub member_id: String,
    /// Its subscription.
    pub topics: Vec<String>,
}

/// The answer of a completed join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JoinResult {
    /// The new generation.
    pub generation: u64,
    /// This member's id.
    pub member_id: String,
    /// The leader's id.
    pub leader_id: String,
    /// The chosen assignor.
    pub protocol: String,
    /// Every member and its subscription, for the leader only (empty for the others).
    pub members: Vec<JoinedMember>,
    /// Partition counts of the subscribed topics, for the leader's assignor.
    pub partition_counts: BTreeMap<String, u32>,
}

/// What a sync call leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStep {
    /// The assignment of this member in the current generation.
    Done(Vec<TopicPartition>),
    /// Wait for the leader's assignment to be stored.
    Wait,
    /// The leader's assignment: store this record, then call [`Group::complete_sync`].
    Persist(GroupRecord),
}

/// The durable part of a group (Kafka's group metadata record), written to the offsets topic
/// when the leader's assignment is accepted, so generations keep growing across coordinators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GroupRecord {
    /// The generation.
    pub generation: u64,
    /// The assignor used.
    pub protocol: String,
    /// The leader.
    pub leader_id: String,
    /// Member id -> partitions.
    pub assignment: Assignment,
}

/// A member of a group.
#[derive(Debug, Clone)]
struct Member {
    client_id: String,
    topics: Vec<String>,
    assignors: Vec<String>,
    session_timeout_ms: u64,
    max_poll_interval_ms: u64,
    /// Session liveness: last heartbeat, join, sync or commit.
    last_heartbeat_ms: u64,
    /// Poll liveness: last join, commit or heartbeat with `polled`.
    last_poll_ms: u64,
    /// Joined in the running round and waiting for its answer.
    awaiting_join: bool,
    /// Order of joining within the round; the first becomes the leader if there is none.
    join_seq: u64,
    /// The completed join's answer, until the waiting request takes it.
    join_result: Option<JoinResult>,
    /// Called sync in the current generation (members that never do are removed when the
    /// sync deadline passes).
    sync_requested: bool,
    /// The assignment of the current generation, once Stable.
    assignment: Option<Vec<TopicPartition>>,
}

/// Where a group's member ids come from: one load of its offsets partition by one coordinator
/// process. Ids handed out by two loads never match: not when two brokers started in the same
/// millisecond, not when one broker leads the partition again in a later leader epoch. A member
/// of an earlier load that rejoins with its id therefore gets UNKNOWN_MEMBER_ID and joins anew,
/// instead of being taken for the new member that was given the same id (and being handed
/// that member's partitions in the same generation). Kafka appends a random UUID to the client
/// id for the same purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberIdScope {
    /// The coordinator's `broker.id`.
    pub broker_id: u32,
    /// The coordinator process's start (unix ms): a restarted broker's loads differ from the
    /// loads of its earlier processes.
    pub incarnation: u64,
    /// The leader epoch the offsets partition was loaded in: one process loads a partition at
    /// most once per epoch.
    pub leader_epoch: u32,
}

impl MemberIdScope {
    /// The id of the `seq`-th member to join `client_id`'s group in this load.
    pub fn member_id(&self, client_id: &str, seq: u64) -> String {
        format!(
            "{client_id}-{}-{}-{}-{seq}",
            self.broker_id, self.incarnation, self.leader_epoch
        )
    }
}

/// Why a rebalance happened, with its time, for describe and for the harness's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebalanceNote {
    /// When it started.
    pub started_ms: u64,
    /// Why.
    pub reason: String,
}

/// One consumer group.
#[derive(Debug, Clone)]
pub struct Group {
    group_id: String,
    state: GroupState,
    /// Generation of the last completed join; only grows.
    generation: u64,
    protocol: Option<String>,
    leader_id: Option<String>,
    members: BTreeMap<String, Member>,
    /// KIP-394: ids handed to new members in a MEMBER_ID_REQUIRED answer (a first JoinGroup of
    /// v4 or later), each with the time it expires if its member does not join with it (its
    /// session timeout, as Kafka's pending-member heartbeat). Only a join that names one of
    /// these ids (or a member's) is admitted; counted against `group.max.size`, so a client
    /// that keeps asking cannot grow it without bound.
    pending_members: BTreeMap<String, u64>,
    /// Makes this group's member ids unlike those of any other load of it (another broker's,
    /// or this broker's in another leader epoch), so an old member's id is never taken for a
    /// new member's.
    member_ids: MemberIdScope,
    next_member_seq: u64,
    next_join_seq: u64,
    /// PreparingRebalance ends here at the latest (the largest rebalance timeout).
    rebalance_deadline_ms: u64,
    /// CompletingRebalance ends here at the latest.
    sync_deadline_ms: u64,
    /// A leader's assignment is being stored.
    sync_pending: bool,
    /// Partition counts of the subscribed topics, as last observed.
    partition_counts: BTreeMap<String, u32>,
    /// The counts the current generation's assignment was computed with.
    assigned_partition_counts: BTreeMap<String, u32>,
    /// Rebalances started since the group was loaded.
    rebalances: u64,
    last_rebalance: Option<RebalanceNote>,
    limits: GroupLimits,
    /// Bumped on every membership or state change, so waiters know when to look again.
    changes: u64,
}

/// A member in [`GroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// Client id.
    pub client_id: String,
    /// Subscription.
    pub topics: Vec<String>,
    /// Assignment of the current generation (empty until Stable).
    pub assignment: Vec<TopicPartition>,
    /// `session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// `max.poll.interval.ms`.
    pub max_poll_interval_ms: u64,
    /// Last heartbeat (coordinator clock).
    pub last_heartbeat_ms: u64,
    /// Last poll (coordinator clock).
    pub last_poll_ms: u64,
}

/// Describe-group answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// State.
    pub state: GroupState,
    /// Current generation.
    pub generation: u64,
    /// Chosen assignor.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader_id: Option<String>,
    /// Members.
    pub members: Vec<MemberDescription>,
    /// Rebalances since the coordinator loaded the group.
    pub rebalances: u64,
    /// The latest rebalance.
    pub last_rebalance: Option<RebalanceNote>,
}

fn error(kind: GroupErrorKind, message: impl Into<String>) -> GroupError {
    GroupError::new(kind, message)
}

impl Group {
    /// A new, Empty group starting after `generation` (0 for a group never seen; the stored
    /// generation for a loaded one), with member ids from `member_ids` (this load's).
    pub fn new(
        group_id: &str,
        generation: u64,
        member_ids: MemberIdScope,
        limits: GroupLimits,
    ) -> Group {
        Group {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            generation,
            protocol: None,
            leader_id: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            member_ids,
            next_member_seq: 0,
            next_join_seq: 0,
            rebalance_deadline_ms: 0,
            sync_deadline_ms: 0,
            sync_pending: false,
            partition_counts: BTreeMap::new(),
            assigned_partition_counts: BTreeMap::new(),
            rebalances: 0,
            last_rebalance: None,
            limits,
            changes: 0,
        }
    }

    /// The state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A counter that grows whenever the membership or the state changes.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The member's `max.poll.interval.ms`, if it is a member.
    pub fn member_max_poll_interval_ms(&self, member_id: &str) -> Option<u64> {
        self.members.get(member_id).map(|m| m.max_poll_interval_ms)
    }

    /// Whether `member_id` is a member.
    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .members
            .values()
            .flat_map(|m| m.topics.iter().cloned())
            .collect();
        topics.sort_unstable();
        topics.dedup();
        topics
    }

    /// Records the partition counts of the subscribed topics (`lookup` answers the catalog).
    /// A count that differs from the one the current assignment was made with starts a
    /// rebalance, as Kafka's leader does when its metadata changes.
    pub fn observe_partition_counts(&mut self, now_ms: u64, lookup: impl Fn(&str) -> Option<u32>) {
        self.partition_counts = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| lookup(&t).map(|n| (t, n)))
            .collect();
        let settled = matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance
        );
        if settled && self.partition_counts != self.assigned_partition_counts {
            let reason = format!(
                "partition counts changed from {:?} to {:?}",
                self.assigned_partition_counts, self.partition_counts
            );
            self.prepare_rebalance(now_ms, reason);
        }
    }

    /// Adds the partition counts of `topics` (a joining member's subscription) without starting
    /// a rebalance, so the join round that member completes can hand them to the leader.
    pub fn observe_topics(&mut self, topics: &[String], lookup: impl Fn(&str) -> Option<u32>) {
        for topic in topics {
            if let Some(count) = lookup(topic) {
                self.partition_counts.insert(topic.clone(), count);
            }
        }
    }

    /// Expires members whose session or poll interval ran out and ends rebalance rounds whose
    /// deadline passed. Every other method calls it first; the coordinator also calls it while
    /// requests wait.
    pub fn tick(&mut self, now_ms: u64) {
        if self.state == GroupState::Dead {
            return;
        }
        self.pending_members
            .retain(|_, expires_ms| now_ms <= *expires_ms);
        let waiting_sync = self.state == GroupState::CompletingRebalance;
        let expired: Vec<(String, &'static str)> = self
            .members
            .iter()
            .filter(|(_, m)| !(m.awaiting_join || waiting_sync && m.sync_requested))
            .filter_map(|(id, m)| {
                if now_ms > m.last_heartbeat_ms + m.session_timeout_ms {
                    Some((id.clone(), "session.timeout.ms expired"))
                } else if now_ms > m.last_poll_ms + m.max_poll_interval_ms {
                    Some((id.clone(), "max.poll.interval.ms expired"))
                } else {
                    None
                }
            })
            .collect();
        for (member_id, why) in expired {
            self.remove_member(now_ms, &member_id, &format!("member {member_id}: {why}"));
        }
        if self.state == GroupState::PreparingRebalance && now_ms >= self.rebalance_deadline_ms {
            let late: Vec<String> = self
                .members
                .iter()
                .filter(|(_, m)| !m.awaiting_join)
                .map(|(id, _)| id.clone())
                .collect();
            for member_id in late {
                self.remove_member_quietly(&member_id);
            }
            self.complete_join(now_ms);
        }
        if self.state == GroupState::CompletingRebalance
            && !self.sync_pending
            && now_ms >= self.sync_deadline_ms
        {
            let late: Vec<String> = self
                .members
                .iter()
                .filter(|(_, m)| !m.sync_requested)
                .map(|(id, _)| id.clone())
                .collect();
            for member_id in &late {
                self.remove_member_quietly(member_id);
            }
            let reason = format!("members {late:?} did not sync within the rebalance timeout");
            self.prepare_rebalance(now_ms, reason);
        }
        self.maybe_complete_join(now_ms);
    }

    /// A join: adds or updates the member and starts a rebalance when needed. Returns the
    /// member id; the answer is taken with [`Group::take_join_result`] once the round completes
    /// (at once when every member has joined).
    pub fn join(&mut self, now_ms: u64, request: JoinRequest) -> Result<String, GroupError> {
        self.tick(now_ms);
        self.validate_join(&request)?;
        let known = request.member_id.clone().filter(|id| !id.is_empty());
        let (member_id, changed) = match known {
            Some(id) if self.pending_members.remove(&id).is_some() => {
                // KIP-394: the member rejoins with the id its first join was given.
                self.members.insert(id.clone(), new_member(now_ms, request));
                (id, true)
            }
            Some(id) => {
                let Some(member) = self.members.get_mut(&id) else {
                    return Err(error(
                        GroupErrorKind::UnknownMemberId,
                        format!("{id} is not a member of {}", self.group_id),
                    ));
                };
                let changed =
                    member.topics != request.topics || member.assignors != request.assignors;
                member.topics = request.topics;
                member.assignors = request.assignors;
                member.session_timeout_ms = request.session_timeout_ms;
                member.max_poll_interval_ms = request.max_poll_interval_ms;
                (id, changed)
            }
            None => {
                let id = self.new_member_id(&request.client_id)?;
                self.members.insert(id.clone(), new_member(now_ms, request));
                (id, true)
            }
        };
        let is_leader = self.leader_id.as_deref() == Some(member_id.as_str());
        let rejoin_same_generation = match self.state {
            GroupState::Stable => !changed && !is_leader,
            GroupState::CompletingRebalance => !changed,
            _ => false,
        };
        if rejoin_same_generation {
            // Kafka answers at once with the current generation; no rebalance.
            let result = self.join_result_for(&member_id);
            let member = self.members.get_mut(&member_id).expect("member present");
            member.last_heartbeat_ms = now_ms;
            member.last_poll_ms = now_ms;
            member.join_result = Some(result);
            return Ok(member_id);
        }
        if self.state != GroupState::PreparingRebalance {
            let reason = if changed {
                format!("member {member_id} joined or changed its subscription")
            } else {
                format!("leader {member_id} rejoined")
            };
            self.prepare_rebalance(now_ms, reason);
        }
        self.next_join_seq += 1;
        let member = self.members.get_mut(&member_id).expect("member present");
        member.awaiting_join = true;
        member.join_seq = self.next_join_seq;
        member.join_result = None;
        member.last_heartbeat_ms = now_ms;
        member.last_poll_ms = now_ms;
        self.maybe_complete_join(now_ms);
        Ok(member_id)
    }

    /// KIP-394: the first join of a new member (JoinGroup v4 or later without a member id) is
    /// not admitted; it is given an id to join with, kept pending for its session timeout, so
    /// that a client whose answer was lost cannot leave an anonymous member behind. Returns
    /// that id (Kafka answers it with MEMBER_ID_REQUIRED).
    pub fn require_member_id(
        &mut self,
        now_ms: u64,
        request: &JoinRequest,
    ) -> Result<String, GroupError> {
        self.tick(now_ms);
        self.validate_join(request)?;
        debug_assert!(request.member_id.as_deref().is_none_or(str::is_empty));
        let id = self.new_member_id(&request.client_id)?;
        let expires_ms = now_ms.saturating_add(request.session_timeout_ms);
        self.pending_members.insert(id.clone(), expires_ms);
        Ok(id)
    }

    /// A fresh member id, refused when members and pending members fill `group.max.size`.
    fn new_member_id(&mut self, client_id: &str) -> Result<String, GroupError> {
        if self.members.len() + self.pending_members.len() >= self.limits.members_max {
            return Err(GroupError::Api(crate::error::ApiError::invalid_request(
                format!("group {} has group.max.size members", self.group_id),
            )));
        }
        self.next_member_seq += 1;
        Ok(self.member_ids.member_id(client_id, self.next_member_seq))
    }

    /// Takes the answer of `member_id`'s completed join. `Ok(None)`: still waiting.
    pub fn take_join_result(
        &mut self,
        now_ms: u64,
        member_id: &str,
    ) -> Result<Option<JoinResult>, GroupError> {
        self.tick(now_ms);
        match self.members.get_mut(member_id) {
            Some(member) => Ok(member.join_result.take()),
            None => Err(self.unknown_member(member_id)),
        }
    }

    /// A sync. The leader passes its assignment (others `None`); see [`SyncStep`].
    pub fn sync(
        &mut self,
        now_ms: u64,
        member_id: &str,
        generation: u64,
        assignment: Option<Assignment>,
    ) -> Result<SyncStep, GroupError> {
        self.tick(now_ms);
        self.check_member_generation(member_id, generation)?;
        let is_leader = self.leader_id.as_deref() == Some(member_id);
        let member = self.members.get_mut(member_id).expect("checked above");
        member.last_heartbeat_ms = now_ms;
        match self.state {
            GroupState::Stable => Ok(SyncStep::Done(
                member.assignment.clone().unwrap_or_default(),
            )),
            GroupState::CompletingRebalance => {
                member.sync_requested = true;
                match assignment {
                    Some(assignment) if is_leader && !self.sync_pending => {
                        self.sync_pending = true;
                        // Members missing from the leader's map get nothing; unknown ids are
                        // dropped (they left meanwhile).
                        let assignment: Assignment = self
                            .members
                            .keys()
                            .map(|id| (id.clone(), assignment.get(id).cloned().unwrap_or_default()))
                            .collect();
                        Ok(SyncStep::Persist(GroupRecord {
                            generation: self.generation,
                            protocol: self.protocol.clone().unwrap_or_default(),
                            leader_id: member_id.to_string(),
                            assignment,
                        }))
                    }
                    _ => Ok(SyncStep::Wait),
                }
            }
            _ => Err(self.rebalancing()),
        }
    }

    /// Ends the storing of a leader's assignment: Stable when `stored`, else a new rebalance.
    /// A record of an older generation (a rebalance started meanwhile) is ignored.
    pub fn complete_sync(&mut self, now_ms: u64, record: &GroupRecord, stored: bool) {
        self.sync_pending = false;
        if self.state != GroupState::CompletingRebalance || record.generation != self.generation {
            return;
        }
        if !stored {
            self.prepare_rebalance(now_ms, "storing the assignment failed".into());
            return;
        }
        for (id, member) in &mut self.members {
            member.assignment = Some(record.assignment.get(id).cloned().unwrap_or_default());
            member.last_heartbeat_ms = now_ms;
            member.last_poll_ms = now_ms;
        }
        self.state = GroupState::Stable;
        self.changes += 1;
    }

    /// A heartbeat. `polled`: the application polled since the last heartbeat.
    /// REBALANCE_IN_PROGRESS tells the member to rejoin.
    pub fn heartbeat(
        &mut self,
        now_ms: u64,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> Result<(), GroupError> {
        self.tick(now_ms);
        self.check_member_generation(member_id, generation)?;
        let member = self.members.get_mut(member_id).expect("checked above");
        member.last_heartbeat_ms = now_ms;
        if polled {
            member.last_poll_ms = now_ms;
        }
        match self.state {
            GroupState::PreparingRebalance => Err(self.rebalancing()),
            _ => Ok(()),
        }
    }

    /// A member leaves (Kafka's LeaveGroup): removed at once, rebalance.
    pub fn leave(&mut self, now_ms: u64, member_id: &str) -> Result<(), GroupError> {
        self.tick(now_ms);
        if !self.members.contains_key(member_id) {
            return Err(self.unknown_member(member_id));
        }
        self.remove_member(now_ms, member_id, &format!("member {member_id} left"));
        self.maybe_complete_join(now_ms);
        Ok(())
    }

    /// Checks an offset commit. A member commits with its generation (not while the group
    /// awaits the leader's assignment); a client outside the group commits with no member id
    /// and generation -1, only while the group is Empty (Kafka's rule). Counts as a heartbeat
    /// and a poll.
    pub fn check_commit(
        &mut self,
        now_ms: u64,
        member_id: Option<&str>,
        generation: i64,
    ) -> Result<(), GroupError> {
        self.tick(now_ms);
        let member_id = member_id.filter(|id| !id.is_empty());
        let Some(member_id) = member_id else {
            if generation < 0 && self.state == GroupState::Empty {
                return Ok(());
            }
            return Err(error(
                GroupErrorKind::UnknownMemberId,
                format!(
                    "group {} has members; commit with a member id and generation",
                    self.group_id
                ),
            ));
        };
        let generation = u64::try_from(generation).unwrap_or(u64::MAX);
        self.check_member_generation(member_id, generation)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(self.rebalancing());
        }
        let member = self.members.get_mut(member_id).expect("checked above");
        member.last_heartbeat_ms = now_ms;
        member.last_poll_ms = now_ms;
        Ok(())
    }

    /// Checks a transactional producer's offset commit (TxnOffsetCommit, Kafka's
    /// `GroupCoordinator.doTxnCommitOffsets`): the producer need not be a member, so with no
    /// member id and generation -1 (the request before KIP-447, v0-2) it commits whatever the
    /// group's state; a member id must be a member's, and a generation the current one.
    pub fn check_txn_commit(
        &mut self,
        now_ms: u64,
        member_id: Option<&str>,
        generation: i64,
    ) -> Result<(), GroupError> {
        self.tick(now_ms);
        if self.state == GroupState::Dead {
            return Err(self.unknown_member(member_id.unwrap_or("")));
        }
        if let Some(member_id) = member_id.filter(|id| !id.is_empty()) {
            if !self.members.contains_key(member_id) {
                return Err(self.unknown_member(member_id));
            }
        }
        if generation >= 0 && u64::try_from(generation) != Ok(self.generation) {
            return Err(self.illegal_generation(generation));
        }
        Ok(())
    }

    /// The group moved away (its offsets partition is led elsewhere now): Dead.
    pub fn unload(&mut self) {
        self.state = GroupState::Dead;
        self.members.clear();
        self.changes += 1;
    }

    /// Describe-group.
    pub fn describe(&mut self, now_ms: u64) -> GroupDescription {
        self.tick(now_ms);
        GroupDescription {
            group_id: self.group_id.clone(),
            state: self.state,
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader_id: self.leader_id.clone(),
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    client_id: m.client_id.clone(),
                    topics: m.topics.clone(),
                    assignment: m.assignment.clone().unwrap_or_default(),
                    session_timeout_ms: m.session_timeout_ms,
                    max_poll_interval_ms: m.max_poll_interval_ms,
                    last_heartbeat_ms: m.last_heartbeat_ms,
                    last_poll_ms: m.last_poll_ms,
                })
                .collect(),
            rebalances: self.rebalances,
            last_rebalance: self.last_rebalance.clone(),
        }
    }

    /// The earliest time at which [`Group::tick`] may change something (a session, poll or
    /// rebalance deadline), so waiting requests know when to look again.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let members = self.members.values().map(|m| {
            (m.last_heartbeat_ms + m.session_timeout_ms)
                .min(m.last_poll_ms + m.max_poll_interval_ms)
        });
        let round = match self.state {
            GroupState::PreparingRebalance => Some(self.rebalance_deadline_ms),
            GroupState::CompletingRebalance => Some(self.sync_deadline_ms),
            _ => None,
        };
        members.chain(round).min().map(|d| d + 1)
    }

    fn validate_join(&self, request: &JoinRequest) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(error(
                GroupErrorKind::NotCoordinator,
                format!("group {} is not coordinated here any more", self.group_id),
            ));
        }
        let limits = &self.limits;
        let session = request.session_timeout_ms;
        if session < limits.session_timeout_min_ms || session > limits.session_timeout_max_ms {
            return Err(error(
                GroupErrorKind::InvalidSessionTimeout,
                format!(
                    "session_timeout_ms={session} is outside [{}, {}]",
                    limits.session_timeout_min_ms, limits.session_timeout_max_ms
                ),
            ));
        }
        let poll = request.max_poll_interval_ms;
        if poll == 0 || poll > limits.rebalance_timeout_max_ms {
            return Err(GroupError::Api(crate::error::ApiError::invalid_request(
                format!(
                    "max_poll_interval_ms={poll} is outside [1, {}]",
                    limits.rebalance_timeout_max_ms
                ),
            )));
        }
        if request.assignors.is_empty() || request.topics.is_empty() {
            return Err(GroupError::Api(crate::error::ApiError::invalid_request(
                "a join needs at least one topic and one assignor",
            )));
        }
        // The member's own earlier assignors do not count against it.
        let mut others = self
            .members
            .iter()
            .filter(|(id, _)| request.member_id.as_deref() != Some(id.as_str()))
            .peekable();
        if others.peek().is_none() {
            return Ok(());
        }
        let others: Vec<&Member> = others.map(|(_, m)| m).collect();
        let shared = request
            .assignors
            .iter()
            .any(|a| others.iter().all(|m| m.assignors.contains(a)));
        if !shared {
            return Err(error(
                GroupErrorKind::InconsistentGroupProtocol,
                format!(
                    "assignors {:?} share none with the members of {}",
                    request.assignors, self.group_id
                ),
            ));
        }
        Ok(())
    }

    fn check_member_generation(&self, member_id: &str, generation: u64) -> Result<(), GroupError> {
        if !self.members.contains_key(member_id) {
            return Err(self.unknown_member(member_id));
        }
        if generation != self.generation {
            return Err(self.illegal_generation(generation));
        }
        Ok(())
    }

    fn illegal_generation(&self, generation: impl std::fmt::Display) -> GroupError {
        error(
            GroupErrorKind::IllegalGeneration,
            format!(
                "generation {generation} is not {}'s current generation {}",
                self.group_id, self.generation
            ),
        )
    }

    fn unknown_member(&self, member_id: &str) -> GroupError {
        if self.state == GroupState::Dead {
            return error(
                GroupErrorKind::NotCoordinator,
                format!("group {} is not coordinated here any more", self.group_id),
            );
        }
        error(
            GroupErrorKind::UnknownMemberId,
            format!("{member_id} is not a member of {}", self.group_id),
        )
    }

    fn rebalancing(&self) -> GroupError {
        error(
            GroupErrorKind::RebalanceInProgress,
            format!("group {} is rebalancing; rejoin", self.group_id),
        )
    }

    fn join_result_for(&self, member_id: &str) -> JoinResult {
        let leader_id = self.leader_id.clone().unwrap_or_default();
        let is_leader = leader_id == member_id;
        JoinResult {
            generation: self.generation,
            member_id: member_id.to_string(),
            leader_id,
            protocol: self.protocol.clone().unwrap_or_default(),
            members: if is_leader {
                self.members
                    .iter()
                    .map(|(id, m)| JoinedMember {
                        member_id: id.clone(),
                        topics: m.topics.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            partition_counts: if is_leader {
                self.assigned_partition_counts.clone()
            } else {
                BTreeMap::new()
            },
        }
    }

    fn prepare_rebalance(&mut self, now_ms: u64, reason: String) {
        assert_ne!(
            self.state,
            GroupState::Dead,
            "a Dead group never rebalances"
        );
        let timeout_ms = self
            .members
            .values()
            .map(|m| m.max_poll_interval_ms)
            .max()
            .unwrap_or(0);
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline_ms = now_ms + timeout_ms;
        self.sync_pending = false;
        for member in self.members.values_mut() {
            member.awaiting_join = false;
            member.sync_requested = false;
            member.assignment = None;
        }
        self.rebalances += 1;
        self.changes += 1;
        self.last_rebalance = Some(RebalanceNote {
            started_ms: now_ms,
            reason,
        });
    }

    fn maybe_complete_join(&mut self, now_ms: u64) {
        if self.state == GroupState::PreparingRebalance
            && self.members.values().all(|m| m.awaiting_join)
        {
            self.complete_join(now_ms);
        }
    }

    /// Ends a join round: every remaining member has joined. Bumps the generation, keeps the
    /// leader if it rejoined (else the first to join), picks the assignor.
    fn complete_join(&mut self, now_ms: u64) {
        debug_assert!(self.members.values().all(|m| m.awaiting_join));
        self.generation += 1;
        self.changes += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader_id = None;
            return;
        }
        let leader_kept = self
            .leader_id
            .as_ref()
            .is_some_and(|id| self.members.contains_key(id));
        if !leader_kept {
            let first = self.members.iter().min_by_key(|(_, m)| m.join_seq);
            self.leader_id = first.map(|(id, _)| id.clone());
        }
        let leader = &self.members[self.leader_id.as_ref().expect("a leader")];
        let protocol = leader
            .assignors
            .iter()
            .find(|a| self.members.values().all(|m| m.assignors.contains(a)))
            .or(leader.assignors.first())
            .cloned();
        self.protocol = protocol;
        self.state = GroupState::CompletingRebalance;
        self.sync_deadline_ms = now_ms
            + self
                .members
                .values()
                .map(|m| m.max_poll_interval_ms)
                .max()
                .unwrap_or(0);
        let subscribed = self.subscribed_topics();
        self.assigned_partition_counts = self
            .partition_counts
            .iter()
            .filter(|(topic, _)| subscribed.contains(topic))
            .map(|(topic, count)| (topic.clone(), *count))
            .collect();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result_for(&id);
            let member = self.members.get_mut(&id).expect("member present");
            member.awaiting_join = false;
            member.join_result = Some(result);
            member.last_heartbeat_ms = now_ms;
            member.last_poll_ms = now_ms;
        }
    }

    fn remove_member(&mut self, now_ms: u64, member_id: &str, reason: &str) {
        self.remove_member_quietly(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now_ms, reason.to_string());
            }
            GroupState::PreparingRebalance => {
                self.last_rebalance = Some(RebalanceNote {
                    started_ms: self
                        .last_rebalance
                        .as_ref()
                        .map_or(now_ms, |n| n.started_ms),
                    reason: reason.to_string(),
                });
            }
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    fn remove_member_quietly(&mut self, member_id: &str) {
        self.members.remove(member_id);
        self.changes += 1;
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = None;
        }
    }
}

fn new_member(now_ms: u64, request: JoinRequest) -> Member {
    Member {
        client_id: request.client_id,
        topics: request.topics,
        assignors: request.assignors,
        session_timeout_ms: request.session_timeout_ms,
        max_poll_interval_ms: request.max_poll_interval_ms,
        last_heartbeat_ms: now_ms,
        last_poll_ms: now_ms,
        awaiting_join: false,
        join_seq: 0,
        join_result: None,
        sync_requested: false,
        assignment: None,
    }
}
