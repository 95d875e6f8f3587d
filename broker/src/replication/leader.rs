//! Leader-side replication state of one partition: each follower's fetch progress, the ISR
//! with its pending change, and the high watermark.
//!
//! Pure (no I/O, time passed in), following Kafka's `Partition.scala` and `Replica.scala`:
//!
//! - A follower's fetch at offset `o` tells the leader its LEO is `o`. Its
//!   `last_caught_up_time_ms` moves to the fetch time when `o` reached the leader's LEO at that
//!   fetch, or to the previous fetch's time when `o` reached the leader's LEO as of the
//!   previous fetch (`Replica.updateFetchState`).
//! - A follower is out of sync when its LEO is not the leader's LEO and it has not been caught
//!   up for `replica.lag.time.max.ms`; the leader proposes an ISR without it (shrink).
//! - A follower outside the ISR joins when its LEO reaches the HW and the start offset of the
//!   leader's epoch, and it is not fenced (expand).
//! - One ISR change is in flight at a time (an AlterPartition to the controller); while it is
//!   pending the HW is computed over the *maximal* ISR (old ∪ proposed), so a shrink cannot
//!   commit records the old ISR has not got, and an expansion counts the joining replica.
//! - HW = min LEO over the maximal ISR (leader included), and only moves forward.
//! - With eligible leader replicas (KIP-966) the HW does not move while the maximal ISR is
//!   smaller than `min.insync.replicas`: the replicas that left the ISR (the controller's ELR)
//!   then hold every committed record, so any of them may lead without losing one.

use std::collections::{BTreeMap, BTreeSet};

use crate::bugs::{Bug, Bugs};
use crate::controller::protocol::PartitionMetadata;

/// What the leader knows about one follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's LEO as of its last fetch; `None` until it fetches from this leader (so a
    /// new leader cannot advance the HW on stale knowledge).
    pub log_end_offset: Option<u64>,
    /// The follower's log start offset as of its last fetch (for the low watermark).
    pub log_start_offset: Option<u64>,
    /// Last time the follower was known to have all of the leader's log.
    pub last_caught_up_time_ms: u64,
    /// The leader's LEO at the follower's previous fetch.
    last_fetch_leader_log_end_offset: u64,
    /// Time of the follower's previous fetch.
    last_fetch_time_ms: u64,
}

impl FollowerState {
    fn new(in_sync: bool, now_ms: u64) -> Self {
        Self {
            log_end_offset: None,
            log_start_offset: None,
            // Kafka's `resetReplicaState`: ISR members start caught up as of the election,
            // the others never caught up.
            last_caught_up_time_ms: if in_sync { now_ms } else { 0 },
            last_fetch_leader_log_end_offset: 0,
            last_fetch_time_ms: 0,
        }
    }

    /// Kafka's `Replica.isCaughtUp`.
    fn is_caught_up(&self, leader_log_end_offset: u64, now_ms: u64, lag_time_max_ms: u64) -> bool {
        self.log_end_offset == Some(leader_log_end_offset)
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= lag_time_max_ms
    }
}

/// An ISR change sent to the controller and not yet answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIsrChange {
    /// The ISR the leader asked for.
    pub proposed_isr: Vec<u32>,
    /// True for a shrink (members removed), false for an expansion.
    pub is_shrink: bool,
    /// Identifies the request, so a late answer to an abandoned one is ignored.
    pub seq: u64,
}

/// The leader's view of a partition it leads.
#[derive(Debug, Clone)]
pub struct LeaderState {
    /// This broker's id.
    pub broker_id: u32,
    /// The epoch this broker leads in.
    pub leader_epoch: u32,
    /// The partition epoch the ISR below is based on (sent with AlterPartition).
    pub partition_epoch: u32,
    /// The leader's LEO when it became leader: records from here on belong to its epoch, and a
    /// follower must reach it before joining the ISR (otherwise it could hold another
    /// leader's divergent records below it).
    pub epoch_start_offset: u64,
    /// The committed ISR (as last decided by the controller).
    isr: BTreeSet<u32>,
    /// An in-flight AlterPartition, if any.
    pending: Option<PendingIsrChange>,
    /// Every other assigned replica.
    followers: BTreeMap<u32, FollowerState>,
    /// Sequence number of the last ISR change begun.
    last_seq: u64,
    /// Committed offset; only moves forward.
    high_watermark: u64,
    /// Deliberate bugs of this broker (all off unless built with `deliberate-bugs`).
    pub bugs: Bugs,
    /// The ISR size below which the HW stands still: the topic's `min.insync.replicas` with
    /// eligible leader replicas (KIP-966), 0 without (the HW then follows any ISR).
    pub hw_min_isr: usize,
}

impl LeaderState {
    /// State of a new leadership as the metadata `partition` describes it. `high_watermark`
    /// is the replica's own HW (it may be below `epoch_start_offset`: reads are served below it,
    /// and KIP-207 withholds the latest offset, until it catches up).
    pub fn new(
        broker_id: u32,
        partition: &PartitionMetadata,
        epoch_start_offset: u64,
        high_watermark: u64,
        now_ms: u64,
    ) -> Self {
        let isr: BTreeSet<u32> = partition.isr.iter().copied().collect();
        let followers = partition
            .replicas
            .iter()
            .filter(|&&r| r != broker_id)
            .map(|&r| (r, FollowerState::new(isr.contains(&r), now_ms)))
            .collect();
        Self {
            broker_id,
            leader_epoch: partition.leader_epoch,
            partition_epoch: partition.partition_epoch,
            epoch_start_offset,
            isr,
            pending: None,
            followers,
            last_seq: 0,
            high_watermark,
            bugs: Bugs::default(),
            hw_min_isr: 0,
        }
    }

    /// The committed ISR, sorted.
    pub fn isr(&self) -> Vec<u32> {
        self.isr.iter().copied().collect()
    }

    /// The committed ISR plus the members of a pending change: what the HW waits for.
    pub fn maximal_isr(&self) -> BTreeSet<u32> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending {
            isr.extend(pending.proposed_isr.iter().copied());
        }
        isr
    }

    /// The pending ISR change, if any.
    pub fn pending(&self) -> Option<&PendingIsrChange> {
        self.pending.as_ref()
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }

    /// A follower's state, if it is a replica.
    pub fn follower(&self, id: u32) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    /// Records a fetch by `follower` at `fetch_offset` (its LEO) when the leader's LEO is
    /// `leader_log_end_offset`. Returns false when `follower` is not a replica.
    pub fn record_fetch(
        &mut self,
        follower: u32,
        fetch_offset: u64,
        follower_log_start_offset: u64,
        leader_log_end_offset: u64,
        now_ms: u64,
    ) -> bool {
        let Some(state) = self.followers.get_mut(&follower) else {
            return false;
        };
        if fetch_offset >= leader_log_end_offset {
            state.last_caught_up_time_ms = state.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= state.last_fetch_leader_log_end_offset {
            state.last_caught_up_time_ms =
                state.last_caught_up_time_ms.max(state.last_fetch_time_ms);
        }
        state.log_end_offset = Some(fetch_offset);
        state.log_start_offset = Some(follower_log_start_offset);
        state.last_fetch_leader_log_end_offset = leader_log_end_offset;
        state.last_fetch_time_ms = now_ms;
        true
    }

    /// Recomputes the HW as the minimum LEO over the maximal ISR; returns the new HW when it
    /// moved forward. A member whose LEO is unknown holds the HW where it is, and so does an
    /// ISR smaller than [`LeaderState::hw_min_isr`].
    pub fn maybe_advance_high_watermark(&mut self, leader_log_end_offset: u64) -> Option<u64> {
        if self.maximal_isr().len() < self.hw_min_isr {
            return None;
        }
        if self.bugs.on(Bug::HwMaxOfIsr) {
            // Deliberate bug: the maximum, not the minimum, of the ISR's log end offsets.
            let candidate = leader_log_end_offset;
            return (candidate > self.high_watermark).then(|| {
                self.high_watermark = candidate;
                candidate
            });
        }
        let mut candidate = leader_log_end_offset;
        for member in self.maximal_isr() {
            if member == self.broker_id {
                continue;
            }
            match self.followers.get(&member).and_then(|f| f.log_end_offset) {
                Some(leo) => candidate = candidate.min(leo),
                None => return None,
            }
        }
        (candidate > self.high_watermark).then(|| {
            self.high_watermark = candidate;
            candidate
        })
    }

    /// The ISR to propose when `follower` may join: not in the ISR, no change pending, LEO at
    /// or above both the HW and the epoch start offset, and `eligible` (not fenced).
    pub fn expansion_for(&self, follower: u32, eligible: bool) -> Option<Vec<u32>> {
        if self.pending.is_some() || self.isr.contains(&follower) || !eligible {
            return None;
        }
        let leo = self.followers.get(&follower)?.log_end_offset?;
        if leo < self.high_watermark || leo < self.epoch_start_offset {
            return None;
        }
        let mut isr = self.isr.clone();
        isr.insert(follower);
        Some(isr.into_iter().collect())
    }

    /// The ISR to propose without the members that are out of sync, if any (and no change is
    /// pending). The leader itself always stays.
    pub fn shrink_for(
        &self,
        leader_log_end_offset: u64,
        now_ms: u64,
        lag_time_max_ms: u64,
    ) -> Option<Vec<u32>> {
        if self.pending.is_some() {
            return None;
        }
        let in_sync: Vec<u32> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| {
                r == self.broker_id
                    || self.followers.get(&r).is_some_and(|f| {
                        f.is_caught_up(leader_log_end_offset, now_ms, lag_time_max_ms)
                    })
            })
            .collect();
        (in_sync.len() < self.isr.len()).then_some(in_sync)
    }

    /// Deliberate bug `shrink.isr.without.controller`: takes `proposed_isr` as the committed ISR
    /// at once, without asking the controller (whose ISR, the one elections use, stays larger).
    pub fn shrink_without_controller(&mut self, proposed_isr: &[u32]) {
        self.isr = proposed_isr.iter().copied().collect();
    }

    /// Marks `proposed_isr` as sent to the controller; returns the change's sequence number.
    pub fn begin_isr_change(&mut self, proposed_isr: Vec<u32>) -> u64 {
        assert!(self.pending.is_none(), "one ISR change at a time");
        assert!(
            proposed_isr.contains(&self.broker_id),
            "the leader stays in its ISR"
        );
        let is_shrink = proposed_isr.len() < self.isr.len();
        self.last_seq += 1;
        let seq = self.last_seq;
        self.pending = Some(PendingIsrChange {
            proposed_isr,
            is_shrink,
            seq,
        });
        seq
    }

    /// The controller answered change `seq`: `Some((partition_epoch, isr))` when accepted,
    /// `None` when rejected or undelivered. An answer to a change that is no longer pending
    /// (the metadata already settled it) is ignored. Returns whether the ISR state changed.
    pub fn complete_isr_change(&mut self, seq: u64, accepted: Option<(u32, &[u32])>) -> bool {
        if self.pending.as_ref().map(|p| p.seq) != Some(seq) {
            return false;
        }
        match accepted {
            Some((partition_epoch, isr)) => self.apply_partition_state(partition_epoch, isr),
            None => {
                self.abort_isr_change();
                false
            }
        }
    }

    /// The controller accepted a change (or metadata shows a newer partition state in the same
    /// leader epoch): adopt its ISR and partition epoch, unless they are older than ours.
    /// Returns whether the state changed.
    pub fn apply_partition_state(&mut self, partition_epoch: u32, isr: &[u32]) -> bool {
        if partition_epoch < self.partition_epoch {
            return false;
        }
        let isr: BTreeSet<u32> = isr.iter().copied().collect();
        let changed = partition_epoch != self.partition_epoch || isr != self.isr;
        self.partition_epoch = partition_epoch;
        self.isr = isr;
        self.pending = None;
        changed
    }

    /// The controller rejected the pending change (stale epochs, ineligible replica, or it
    /// could not be reached): forget it; the next check proposes again from fresh state.
    pub fn abort_isr_change(&mut self) {
        self.pending = None;
    }

    /// The low watermark: the smallest log start offset over the replicas whose start is known
    /// (the leader's own included).
    pub fn low_watermark(&self, leader_log_start_offset: u64) -> u64 {
        self.followers
            .values()
            .filter_map(|f| f.log_start_offset)
            .fold(leader_log_start_offset, u64::min)
    }

    /// The low watermark over the leader and the followers for which `counted` holds (Kafka
    /// counts the replicas on live brokers); a follower that never fetched counts as 0.
    pub fn low_watermark_of(
        &self,
        leader_log_start_offset: u64,
        counted: impl Fn(u32) -> bool,
    ) -> u64 {
        self.followers
            .iter()
            .filter(|(id, _)| counted(**id))
            .map(|(_, f)| f.log_start_offset.unwrap_or(0))
            .fold(leader_log_start_offset, u64::min)
    }

    /// Number of assigned replicas not in the committed ISR (under-replicated when > 0).
    pub fn out_of_sync_count(&self) -> usize {
        (self.followers.len() + 1).saturating_sub(self.isr.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG_MS: u64 = 10_000;

    fn meta(
        leader_epoch: u32,
        partition_epoch: u32,
        replicas: &[u32],
        isr: &[u32],
    ) -> PartitionMetadata {
        PartitionMetadata {
            partition: 0,
            leader: Some(1),
            leader_epoch,
            partition_epoch,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            elr: Vec::new(),
            last_known_leader: None,
        }
    }

    /// Broker 1 leads [1, 2, 3] with the full ISR, epoch start 0, HW 0, at t=0.
    fn leader() -> LeaderState {
        LeaderState::new(1, &meta(5, 3, &[1, 2, 3], &[1, 2, 3]), 0, 0, 0)
    }

    #[test]
    fn hw_waits_for_every_isr_member_and_is_their_minimum() {
        let mut l = leader();
        assert_eq!(
            l.maybe_advance_high_watermark(10),
            None,
            "followers' LEOs are unknown"
        );
        l.record_fetch(2, 10, 0, 10, 1);
        assert_eq!(
            l.maybe_advance_high_watermark(10),
            None,
            "follower 3 is still unknown"
        );
        l.record_fetch(3, 4, 0, 10, 1);
        assert_eq!(l.maybe_advance_high_watermark(10), Some(4));
        assert_eq!(l.high_watermark(), 4);
    }

    #[cfg(feature = "deliberate-bugs")]
    #[test]
    fn bug_hw_max_of_isr_commits_what_only_the_leader_has() {
        let mut l = leader();
        l.bugs.set(Bug::HwMaxOfIsr, true);
        assert_eq!(l.maybe_advance_high_watermark(10), Some(10));
    }

    #[cfg(feature = "deliberate-bugs")]
    #[test]
    fn bug_shrink_without_controller_changes_the_isr_with_nothing_pending() {
        let mut l = leader();
        let before = l.isr();
        let smaller: Vec<u32> = before[..before.len() - 1].to_vec();
        l.shrink_without_controller(&smaller);
        assert_eq!(l.isr(), smaller);
        assert!(l.pending().is_none());
    }

    #[test]
    fn hw_stands_still_below_min_isr_with_eligible_leader_replicas() {
        let mut l = LeaderState::new(1, &meta(5, 3, &[1, 2, 3], &[1, 2]), 0, 0, 0);
        l.hw_min_isr = 2;
        l.record_fetch(2, 6, 0, 10, 1);
        assert_eq!(l.maybe_advance_high_watermark(10), Some(6));
        // The ISR shrinks to the leader alone: its own appends are no longer committed.
        assert!(l.apply_partition_state(4, &[1]));
        assert_eq!(l.maybe_advance_high_watermark(10), None);
        assert_eq!(l.high_watermark(), 6);
        // Back at min ISR, the HW follows the ISR again.
        l.record_fetch(2, 10, 0, 10, 2);
        assert!(l.apply_partition_state(5, &[1, 2]));
        assert_eq!(l.maybe_advance_high_watermark(10), Some(10));
    }

    #[test]
    fn hw_never_moves_back() {
        let mut l = LeaderState::new(1, &meta(5, 3, &[1, 2], &[1, 2]), 0, 8, 0);
        l.record_fetch(2, 3, 0, 10, 1);
        assert_eq!(l.maybe_advance_high_watermark(10), None);
        assert_eq!(l.high_watermark(), 8);
    }

    #[test]
    fn caught_up_time_follows_replica_scala_rules() {
        let mut l = leader();
        // Fetch at the leader's LEO: caught up now.
        l.record_fetch(2, 10, 0, 10, 100);
        assert_eq!(l.follower(2).unwrap().last_caught_up_time_ms, 100);
        // Behind the current LEO (12) but at the LEO of the previous fetch (10): caught up as
        // of the previous fetch time.
        l.record_fetch(2, 10, 0, 12, 200);
        assert_eq!(l.follower(2).unwrap().last_caught_up_time_ms, 100);
        l.record_fetch(2, 12, 0, 15, 300);
        assert_eq!(l.follower(2).unwrap().last_caught_up_time_ms, 200);
        // Behind both: no progress.
        l.record_fetch(2, 13, 0, 20, 400);
        assert_eq!(l.follower(2).unwrap().last_caught_up_time_ms, 200);
    }

    #[test]
    fn shrink_removes_only_lagging_followers_after_lag_time() {
        let mut l = leader();
        l.record_fetch(2, 10, 0, 10, 1_000);
        l.record_fetch(3, 5, 0, 10, 1_000);
        assert_eq!(
            l.shrink_for(10, LAG_MS, LAG_MS),
            None,
            "members start caught up at election time"
        );
        // Follower 2 keeps fetching at the end; 3 stops.
        l.record_fetch(2, 10, 0, 10, LAG_MS + 500);
        assert_eq!(l.shrink_for(10, LAG_MS + 1, LAG_MS), Some(vec![1, 2]));
        // A follower exactly at the leader's LEO is in sync however long ago it fetched.
        let mut idle = leader();
        idle.record_fetch(2, 10, 0, 10, 0);
        idle.record_fetch(3, 10, 0, 10, 0);
        assert_eq!(idle.shrink_for(10, 10 * LAG_MS, LAG_MS), None);
    }

    #[test]
    fn pending_shrink_keeps_the_larger_isr_for_the_hw() {
        let mut l = leader();
        l.record_fetch(2, 10, 0, 10, 1);
        l.record_fetch(3, 2, 0, 10, 1);
        l.begin_isr_change(vec![1, 2]);
        assert_eq!(
            l.maybe_advance_high_watermark(10),
            Some(2),
            "3 still counts while pending"
        );
        assert_eq!(
            l.shrink_for(10, 10 * LAG_MS, LAG_MS),
            None,
            "one change at a time"
        );
        assert!(l.apply_partition_state(4, &[1, 2]));
        assert_eq!(l.isr(), vec![1, 2]);
        assert!(l.pending().is_none());
        assert_eq!(l.maybe_advance_high_watermark(10), Some(10));
    }

    #[test]
    fn expansion_needs_hw_and_epoch_start_offset_and_eligibility() {
        let mut l = LeaderState::new(1, &meta(5, 3, &[1, 2, 3], &[1, 2]), 20, 15, 0);
        l.record_fetch(2, 25, 0, 25, 1);
        l.maybe_advance_high_watermark(25);
        assert_eq!(l.high_watermark(), 25);
        l.record_fetch(3, 18, 0, 25, 2);
        assert_eq!(
            l.expansion_for(3, true),
            None,
            "below the HW and the epoch start"
        );
        l.record_fetch(3, 25, 0, 25, 3);
        assert_eq!(
            l.expansion_for(3, false),
            None,
            "fenced replicas cannot join"
        );
        assert_eq!(l.expansion_for(3, true), Some(vec![1, 2, 3]));
        assert_eq!(l.expansion_for(2, true), None, "already a member");
    }

    #[test]
    fn expansion_below_epoch_start_is_refused_even_at_the_hw() {
        // A new leader whose HW (10) lags its epoch start (20): a follower at 10 has the HW but
        // may hold another leader's records in 10..20.
        let mut l = LeaderState::new(1, &meta(5, 3, &[1, 2], &[1]), 20, 10, 0);
        l.record_fetch(2, 10, 0, 20, 1);
        assert_eq!(l.expansion_for(2, true), None);
    }

    #[test]
    fn pending_expansion_counts_the_joining_replica() {
        let mut l = LeaderState::new(1, &meta(5, 3, &[1, 2], &[1]), 0, 10, 0);
        l.record_fetch(2, 10, 0, 12, 1);
        l.begin_isr_change(vec![1, 2]);
        assert_eq!(
            l.maybe_advance_high_watermark(12),
            None,
            "HW waits for the joining replica"
        );
        l.record_fetch(2, 12, 0, 12, 2);
        assert_eq!(l.maybe_advance_high_watermark(12), Some(12));
    }

    #[test]
    fn stale_partition_state_is_ignored_and_abort_clears_pending() {
        let mut l = leader();
        l.begin_isr_change(vec![1, 2]);
        assert!(!l.apply_partition_state(2, &[1]));
        assert!(l.pending().is_some());
        l.abort_isr_change();
        assert!(l.pending().is_none());
        assert_eq!(l.isr(), vec![1, 2, 3]);
    }

    #[test]
    fn late_answer_to_a_superseded_change_is_ignored() {
        let mut l = leader();
        let first = l.begin_isr_change(vec![1, 2]);
        // Metadata settles the change before its answer arrives, and a new change starts.
        l.apply_partition_state(4, &[1, 2]);
        let second = l.begin_isr_change(vec![1]);
        assert!(!l.complete_isr_change(first, Some((4, &[1, 2]))));
        assert_eq!(l.pending().map(|p| p.seq), Some(second));
        assert!(l.complete_isr_change(second, Some((5, &[1]))));
        assert_eq!(l.isr(), vec![1]);
        assert!(l.pending().is_none());
    }

    #[test]
    fn low_watermark_is_the_minimum_known_log_start() {
        let mut l = leader();
        assert_eq!(l.low_watermark(7), 7);
        assert_eq!(
            l.low_watermark_of(7, |_| true),
            0,
            "unknown followers hold it at 0"
        );
        l.record_fetch(2, 10, 5, 10, 1);
        l.record_fetch(3, 10, 9, 10, 1);
        assert_eq!(l.low_watermark(7), 5);
        assert_eq!(
            l.low_watermark_of(7, |id| id != 2),
            7,
            "dead replicas do not count"
        );
    }
}
