//! Tests of the group state machine with an injected clock: every timeout is reached by
//! moving `now_ms`, never by sleeping.

use std::collections::BTreeMap;

use super::assignor::{self, Assignment, TopicPartition};
use super::error::GroupErrorKind;
use super::state::{
    Group, GroupLimits, GroupState, JoinRequest, JoinResult, MemberIdScope, SyncStep,
};

const SESSION_MS: u64 = 1_000;
const POLL_MS: u64 = 5_000;

fn request(member_id: Option<&str>, topics: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.map(str::to_string),
        client_id: "c".into(),
        topics: topics.iter().map(|t| t.to_string()).collect(),
        assignors: vec![assignor::RANGE.into(), assignor::ROUND_ROBIN.into()],
        session_timeout_ms: SESSION_MS,
        max_poll_interval_ms: POLL_MS,
    }
}

/// Member ids of broker 1's coordinator, started at unix ms 42, leading in epoch 0.
const SCOPE: MemberIdScope = MemberIdScope {
    broker_id: 1,
    incarnation: 42,
    leader_epoch: 0,
};

fn group() -> Group {
    let mut group = Group::new("g", 0, SCOPE, GroupLimits::default());
    group.observe_topics(&["t0".to_string(), "t1".to_string()], counts);
    group
}

fn counts(topic: &str) -> Option<u32> {
    (topic == "t0").then_some(4)
}

fn kind<T: std::fmt::Debug>(result: Result<T, super::GroupError>) -> GroupErrorKind {
    result.unwrap_err().kind().expect("a group error")
}

fn joined(group: &mut Group, now_ms: u64, member_id: &str) -> JoinResult {
    group
        .take_join_result(now_ms, member_id)
        .unwrap()
        .expect("join completed")
}

/// The leader computes range over its join answer and syncs; the record is stored.
fn lead_sync(group: &mut Group, now_ms: u64, leader: &JoinResult) -> Assignment {
    let subscriptions: BTreeMap<String, Vec<String>> = leader
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.topics.clone()))
        .collect();
    let assignment = assignor::range(&subscriptions, &leader.partition_counts);
    let step = group
        .sync(
            now_ms,
            &leader.member_id,
            leader.generation,
            Some(assignment.clone()),
        )
        .unwrap();
    let SyncStep::Persist(record) = step else {
        panic!("leader sync must be stored first, got {step:?}");
    };
    group.complete_sync(now_ms, &record, true);
    assignment
}

/// One member joins an empty group and becomes leader of generation 1.
fn stable_with_one(group: &mut Group) -> String {
    let a = group.join(0, request(None, &["t0"])).unwrap();
    let result = joined(group, 0, &a);
    lead_sync(group, 0, &result);
    a
}

#[test]
fn first_member_becomes_leader_and_group_goes_stable() {
    let mut g = group();
    assert_eq!(g.state(), GroupState::Empty);
    let a = g.join(0, request(None, &["t0"])).unwrap();
    assert_eq!(
        a, "c-1-42-0-1",
        "ids carry the client id, broker id, incarnation, leader epoch and a sequence"
    );
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let result = joined(&mut g, 0, &a);
    assert_eq!(
        (result.generation, result.leader_id.as_str()),
        (1, a.as_str())
    );
    assert_eq!(result.protocol, "range");
    assert_eq!(result.partition_counts["t0"], 4);
    let assignment = lead_sync(&mut g, 0, &result);
    assert_eq!(assignment[&a].len(), 4);
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(
        g.sync(1, &a, 1, None).unwrap(),
        SyncStep::Done((0..4).map(|p| TopicPartition::new("t0", p)).collect())
    );
}

#[test]
fn second_member_triggers_a_rebalance_that_waits_for_the_first() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let b = g.join(10, request(None, &["t0"])).unwrap();
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(g.take_join_result(10, &b).unwrap(), None, "b waits for a");
    // a learns of the rebalance from its heartbeat, and its commit is still accepted.
    assert_eq!(
        kind(g.heartbeat(20, &a, 1, true)),
        GroupErrorKind::RebalanceInProgress
    );
    g.check_commit(20, Some(&a), 1).unwrap();
    g.join(30, request(Some(&a), &["t0"])).unwrap();
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let ra = joined(&mut g, 30, &a);
    let rb = joined(&mut g, 30, &b);
    assert_eq!((ra.generation, rb.generation), (2, 2));
    assert_eq!(ra.leader_id, a, "the leader is kept when it rejoins");
    assert_eq!(ra.members.len(), 2, "the leader sees every member");
    assert!(rb.members.is_empty(), "followers see no members");
    // A follower's sync waits for the leader's assignment; commits are refused meanwhile.
    assert_eq!(g.sync(31, &b, 2, None).unwrap(), SyncStep::Wait);
    assert_eq!(
        kind(g.check_commit(31, Some(&b), 2)),
        GroupErrorKind::RebalanceInProgress
    );
    // The old generation is illegal now.
    assert_eq!(
        kind(g.heartbeat(31, &a, 1, true)),
        GroupErrorKind::IllegalGeneration
    );
    assert_eq!(
        kind(g.check_commit(31, Some(&a), 1)),
        GroupErrorKind::IllegalGeneration
    );
    let assignment = lead_sync(&mut g, 32, &ra);
    assert_eq!(g.state(), GroupState::Stable);
    let SyncStep::Done(for_b) = g.sync(33, &b, 2, None).unwrap() else {
        panic!("b's sync completes once Stable");
    };
    assert_eq!(for_b, assignment[&b]);
    assert_eq!(for_b.len(), 2);
    g.check_commit(34, Some(&b), 2).unwrap();
}

#[test]
fn unknown_members_and_bad_generations_are_refused() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    assert_eq!(
        kind(g.heartbeat(1, "nobody", 1, true)),
        GroupErrorKind::UnknownMemberId
    );
    assert_eq!(
        kind(g.join(1, request(Some("nobody"), &["t0"]))),
        GroupErrorKind::UnknownMemberId
    );
    assert_eq!(
        kind(g.sync(1, &a, 7, None)),
        GroupErrorKind::IllegalGeneration
    );
    assert_eq!(
        kind(g.check_commit(1, None, -1)),
        GroupErrorKind::UnknownMemberId
    );
    assert_eq!(kind(g.leave(1, "nobody")), GroupErrorKind::UnknownMemberId);
}

#[test]
fn a_client_outside_the_group_commits_only_while_it_is_empty() {
    let mut g = group();
    g.check_commit(0, None, -1).unwrap();
    let a = stable_with_one(&mut g);
    assert_eq!(
        kind(g.check_commit(1, None, -1)),
        GroupErrorKind::UnknownMemberId
    );
    g.leave(2, &a).unwrap();
    assert_eq!(g.state(), GroupState::Empty);
    g.check_commit(3, None, -1).unwrap();
}

#[test]
fn a_transactional_producer_commits_beside_the_members_and_a_stated_member_is_checked() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let generation = i64::try_from(g.generation()).unwrap();
    // Before KIP-447 (no member, generation -1) the producer commits into a Stable group,
    // where a plain commit from outside it is refused.
    g.check_txn_commit(1, None, -1).unwrap();
    assert_eq!(
        kind(g.check_commit(1, None, -1)),
        GroupErrorKind::UnknownMemberId
    );
    // With the member's group metadata (v3): the member and its generation.
    g.check_txn_commit(1, Some(&a), generation).unwrap();
    assert_eq!(
        kind(g.check_txn_commit(1, Some("nobody"), generation)),
        GroupErrorKind::UnknownMemberId
    );
    assert_eq!(
        kind(g.check_txn_commit(1, Some(&a), generation + 1)),
        GroupErrorKind::IllegalGeneration
    );
    g.unload();
    assert_eq!(
        kind(g.check_txn_commit(1, None, -1)),
        GroupErrorKind::NotCoordinator
    );
}

#[test]
fn session_timeout_removes_a_silent_member_and_rebalances() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let b = g.join(0, request(None, &["t0"])).unwrap();
    g.join(0, request(Some(&a), &["t0"])).unwrap();
    let ra = joined(&mut g, 0, &a);
    lead_sync(&mut g, 0, &ra);
    assert_eq!(g.generation(), 2);
    // a heartbeats, b stays silent past its session.
    g.heartbeat(SESSION_MS, &a, 2, true).unwrap();
    g.heartbeat(SESSION_MS, &b, 2, true).unwrap();
    g.heartbeat(2 * SESSION_MS, &a, 2, true).unwrap();
    assert_eq!(
        g.state(),
        GroupState::Stable,
        "exactly at the limit b is still alive"
    );
    let result = g.heartbeat(2 * SESSION_MS + 1, &a, 2, true);
    assert_eq!(kind(result), GroupErrorKind::RebalanceInProgress);
    assert!(!g.has_member(&b), "b's session expired");
    let note = g.describe(2 * SESSION_MS + 1).last_rebalance.unwrap();
    assert!(
        note.reason.contains("session.timeout.ms"),
        "{}",
        note.reason
    );
    g.join(2 * SESSION_MS + 2, request(Some(&a), &["t0"]))
        .unwrap();
    assert_eq!(joined(&mut g, 2 * SESSION_MS + 2, &a).generation, 3);
}

#[test]
fn a_member_that_heartbeats_but_never_polls_leaves_after_max_poll_interval() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let mut now = 0;
    while now + SESSION_MS / 2 <= POLL_MS {
        now += SESSION_MS / 2;
        g.heartbeat(now, &a, 1, false).unwrap();
    }
    assert!(g.has_member(&a), "at the limit the member is still in");
    now += SESSION_MS / 2;
    assert_eq!(
        kind(g.heartbeat(now, &a, 1, false)),
        GroupErrorKind::UnknownMemberId
    );
    let description = g.describe(now);
    assert_eq!(description.state, GroupState::Empty);
    assert!(description
        .last_rebalance
        .unwrap()
        .reason
        .contains("max.poll.interval.ms"));
}

#[test]
fn polling_heartbeats_keep_a_member_past_max_poll_interval() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    for step in 1..=20 {
        g.heartbeat(step * SESSION_MS / 2, &a, 1, true).unwrap();
    }
    const { assert!(10 * SESSION_MS > POLL_MS) };
    assert_eq!(g.state(), GroupState::Stable);
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    // a keeps heartbeating but never rejoins; c joins at 100.
    let c = g.join(100, request(None, &["t0"])).unwrap();
    for now in (200..100 + POLL_MS).step_by(500) {
        let _ = g.heartbeat(now, &a, 1, true);
        assert_eq!(g.take_join_result(now, &c).unwrap(), None);
    }
    let result = joined(&mut g, 100 + POLL_MS, &c);
    assert_eq!(result.generation, 2);
    assert_eq!(result.leader_id, c, "a was dropped, so c leads");
    assert!(!g.has_member(&a));
}

#[test]
fn a_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout() {
    let mut g = group();
    let a = g.join(0, request(None, &["t0"])).unwrap();
    joined(&mut g, 0, &a);
    let b = g.join(0, request(None, &["t0"])).unwrap();
    g.join(0, request(Some(&a), &["t0"])).unwrap();
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    joined(&mut g, 0, &b);
    assert_eq!(g.sync(1, &b, 2, None).unwrap(), SyncStep::Wait);
    g.tick(POLL_MS + 1);
    assert!(!g.has_member(&a), "the leader never synced");
    assert!(g.has_member(&b));
    assert_eq!(g.state(), GroupState::PreparingRebalance);
}

#[test]
fn leave_rebalances_and_the_last_leave_empties_the_group() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let b = g.join(0, request(None, &["t0"])).unwrap();
    g.join(0, request(Some(&a), &["t0"])).unwrap();
    let ra = joined(&mut g, 0, &a);
    lead_sync(&mut g, 0, &ra);
    g.leave(1, &a).unwrap();
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    g.join(2, request(Some(&b), &["t0"])).unwrap();
    let rb = joined(&mut g, 2, &b);
    assert_eq!(
        (rb.generation, rb.leader_id.as_str()),
        (3, b.as_str()),
        "b leads now"
    );
    lead_sync(&mut g, 2, &rb);
    g.leave(3, &b).unwrap();
    assert_eq!(g.state(), GroupState::Empty);
    assert_eq!(
        g.generation(),
        4,
        "the empty round counts as a generation, as in Kafka"
    );
}

#[test]
fn subscription_change_and_partition_count_change_rebalance() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    // Rejoining with the same subscription in Stable is a no-op for a follower... but a is
    // the leader, so Kafka rebalances.
    g.join(1, request(Some(&a), &["t0"])).unwrap();
    let result = joined(&mut g, 1, &a);
    assert_eq!(result.generation, 2);
    lead_sync(&mut g, 1, &result);
    g.join(2, request(Some(&a), &["t0", "t1"])).unwrap();
    assert_eq!(
        joined(&mut g, 2, &a).generation,
        3,
        "a new subscription rebalances"
    );
    let result = g.describe(2);
    assert!(result
        .last_rebalance
        .unwrap()
        .reason
        .contains("subscription"));
    // Stable again, then t0 grows to 6 partitions.
    let ra = JoinResult {
        generation: 3,
        ..joined_again(&mut g, 3, &a)
    };
    lead_sync(&mut g, 3, &ra);
    assert_eq!(g.state(), GroupState::Stable);
    g.observe_partition_counts(4, |t| (t == "t0").then_some(6));
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert!(g
        .describe(4)
        .last_rebalance
        .unwrap()
        .reason
        .contains("partition counts"));
}

/// Rejoins in CompletingRebalance with unchanged metadata: answered with the same generation.
fn joined_again(group: &mut Group, now_ms: u64, member_id: &str) -> JoinResult {
    group
        .join(now_ms, request(Some(member_id), &["t0", "t1"]))
        .unwrap();
    joined(group, now_ms, member_id)
}

#[test]
fn a_follower_rejoining_a_stable_group_unchanged_gets_the_same_generation() {
    let mut g = group();
    let a = stable_with_one(&mut g);
    let b = g.join(0, request(None, &["t0"])).unwrap();
    g.join(0, request(Some(&a), &["t0"])).unwrap();
    let ra = joined(&mut g, 0, &a);
    lead_sync(&mut g, 0, &ra);
    g.join(1, request(Some(&b), &["t0"])).unwrap();
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(joined(&mut g, 1, &b).generation, 2);
}

#[test]
fn incompatible_assignors_and_bad_timeouts_are_refused() {
    let mut g = group();
    stable_with_one(&mut g);
    let mut sticky = request(None, &["t0"]);
    sticky.assignors = vec!["sticky".into()];
    assert_eq!(
        kind(g.join(1, sticky)),
        GroupErrorKind::InconsistentGroupProtocol
    );
    let mut short = request(None, &["t0"]);
    short.session_timeout_ms = 1;
    assert_eq!(
        kind(g.join(1, short)),
        GroupErrorKind::InvalidSessionTimeout
    );
    assert_eq!(
        g.state(),
        GroupState::Stable,
        "refused joins change nothing"
    );
}

#[test]
fn a_failed_assignment_store_starts_a_new_rebalance() {
    let mut g = group();
    let a = g.join(0, request(None, &["t0"])).unwrap();
    let result = joined(&mut g, 0, &a);
    let step = g.sync(0, &a, 1, Some(Assignment::new())).unwrap();
    let SyncStep::Persist(record) = step else {
        panic!("expected a record to store");
    };
    assert_eq!(
        g.sync(0, &a, 1, Some(Assignment::new())).unwrap(),
        SyncStep::Wait,
        "one store at a time"
    );
    g.complete_sync(1, &record, false);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(
        kind(g.sync(1, &a, result.generation, None)),
        GroupErrorKind::RebalanceInProgress
    );
}

#[test]
fn a_loaded_group_continues_its_generations() {
    let mut g = Group::new("g", 7, SCOPE, GroupLimits::default());
    let a = g.join(0, request(None, &["t0"])).unwrap();
    assert_eq!(joined(&mut g, 0, &a).generation, 8);
    g.unload();
    assert_eq!(g.state(), GroupState::Dead);
    assert_eq!(
        kind(g.heartbeat(1, &a, 8, true)),
        GroupErrorKind::NotCoordinator
    );
    assert_eq!(
        kind(g.join(1, request(None, &["t0"]))),
        GroupErrorKind::NotCoordinator
    );
}

#[test]
fn next_deadline_is_the_earliest_session_or_round_end() {
    let mut g = group();
    assert_eq!(g.next_deadline_ms(), None);
    let a = stable_with_one(&mut g);
    assert_eq!(g.next_deadline_ms(), Some(SESSION_MS + 1));
    g.heartbeat(400, &a, 1, true).unwrap();
    assert_eq!(g.next_deadline_ms(), Some(400 + SESSION_MS + 1));
}

/// A group as the coordinator of broker `broker_id`, started at unix ms `incarnation`, builds
/// it when it loads the offsets partition in `leader_epoch`.
fn loaded(generation: u64, broker_id: u32, incarnation: u64, leader_epoch: u32) -> Group {
    let member_ids = MemberIdScope {
        broker_id,
        incarnation,
        leader_epoch,
    };
    let mut group = Group::new("g", generation, member_ids, GroupLimits::default());
    group.observe_topics(&["t0".to_string()], counts);
    group
}

/// The run_group failure (`group-split-ownership`): brokers 2 and 3 started in the same
/// millisecond, so after broker 2 died, broker 3's coordinator handed out the very ids broker
/// 2's had. A member of broker 2's time that kept its id (its calls to the dead broker failed
/// with connection errors, which keep the id) rejoined broker 3 with it, was taken for the new
/// member that had been given the same id, and got that member's partitions in the same
/// generation. Member ids must never match across loads: not across brokers started in the
/// same millisecond, not across two loads by one broker in two leader epochs.
#[test]
fn member_ids_of_two_loads_never_match() {
    const STARTED_MS: u64 = 1_796_130_522_486;
    let join_all = |g: &mut Group, now_ms: u64, n: usize| -> Vec<String> {
        (0..n)
            .map(|_| g.join(now_ms, request(None, &["t0"])).unwrap())
            .collect()
    };
    // Broker 2 coordinates in epoch 0: three members.
    let mut old = loaded(0, 2, STARTED_MS, 0);
    let olds = join_all(&mut old, 0, 3);
    // Broker 2 dies; broker 3 loads generation 5 in epoch 1. The first new member makes
    // generation 6 alone, two more join, it rejoins: generation 7 has the three, Stable.
    let mut new = loaded(5, 3, STARTED_MS, 1);
    let news = join_all(&mut new, 0, 3);
    new.join(0, request(Some(&news[0]), &["t0"])).unwrap();
    let leader = joined(&mut new, 0, &news[0]);
    assert_eq!((leader.generation, leader.members.len()), (7, 3));
    let assignment = lead_sync(&mut new, 0, &leader);
    assert_eq!(new.state(), GroupState::Stable);
    assert!(!assignment[&news[1]].is_empty());
    for id in &olds {
        assert!(!news.contains(id), "{id} was handed out by both brokers");
        // Before the fix, the old member holding news[1]'s id got generation 7 at once (a
        // follower rejoining a Stable group unchanged) and news[1]'s partitions on sync.
        assert_eq!(
            kind(new.join(1, request(Some(id), &["t0"]))),
            GroupErrorKind::UnknownMemberId,
            "an old member must rejoin without its id"
        );
    }
    assert_eq!(new.state(), GroupState::Stable, "nothing changed");
    // Broker 2 leads again later (epoch 2) without having restarted: its new load's ids are
    // new too.
    let mut again = loaded(6, 2, STARTED_MS, 2);
    let agains = join_all(&mut again, 0, 3);
    for id in olds.iter().chain(&news) {
        assert!(!agains.contains(id), "{id} was handed out by two loads");
    }
}

/// KIP-394: a first join of v4 or later is given an id instead of a place in the group; the
/// join that names the id is admitted, an id nobody was given is UNKNOWN_MEMBER_ID, and a
/// pending id its member never used expires with its session timeout.
#[test]
fn a_new_member_is_given_an_id_and_admitted_only_when_it_joins_with_it() {
    let mut group = group();
    let id = group.require_member_id(0, &request(None, &["t0"])).unwrap();
    assert_eq!(group.state(), GroupState::Empty, "nobody was admitted");
    assert_eq!(
        kind(group.join(10, request(Some("c-unknown"), &["t0"]))),
        GroupErrorKind::UnknownMemberId
    );
    let admitted = group.join(20, request(Some(&id), &["t0"])).unwrap();
    assert_eq!(admitted, id);
    let result = joined(&mut group, 20, &id);
    assert_eq!((result.generation, result.leader_id), (1, id.clone()));

    let late = group
        .require_member_id(30, &request(None, &["t0"]))
        .unwrap();
    assert_ne!(late, id);
    assert_eq!(
        kind(group.join(30 + SESSION_MS + 1, request(Some(&late), &["t0"]))),
        GroupErrorKind::UnknownMemberId,
        "a pending id expires with its session timeout"
    );
}

/// Pending ids count against `group.max.size`: a client asking again and again for an id
/// cannot grow the group past it.
#[test]
fn pending_member_ids_count_against_the_group_size() {
    let limits = GroupLimits {
        members_max: 2,
        ..GroupLimits::default()
    };
    let mut group = Group::new("g", 0, SCOPE, limits);
    group.observe_topics(&["t0".to_string()], counts);
    group.require_member_id(0, &request(None, &["t0"])).unwrap();
    group.require_member_id(0, &request(None, &["t0"])).unwrap();
    assert!(group.require_member_id(0, &request(None, &["t0"])).is_err());
    assert!(group.join(0, request(None, &["t0"])).is_err());
    // Both expire unused; there is room again.
    assert!(group
        .require_member_id(SESSION_MS + 1, &request(None, &["t0"]))
        .is_ok());
}
