//! Deliberate bugs: switches that break one safety rule each, so that the harness can measure
//! which plans and seeds catch which bug (`tidewater detect`, `docs/detection.md`).
//!
//! The settings (`tidewater.bug.*`) exist only in a build with the cargo feature
//! `deliberate-bugs`; the default build refuses them as unknown settings, and every switch
//! reads false there whatever the struct holds ([`Bugs::on`] is `cfg!`-gated), so no bug can be
//! turned on in a broker that was not built for it. Each switch is documented with the
//! real-world bug class it models; `docs/detection.md` lists them with what caught them.

/// One deliberate bug: its setting name and the real bug it models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// acks=all is answered as soon as the leader appended locally (acks=1 in disguise).
    AckBeforeReplication,
    /// The HW is the maximum of the ISR's log end offsets instead of their minimum.
    HwMaxOfIsr,
    /// A follower keeps its divergent suffix instead of truncating by leader epoch.
    KeepDivergentSuffix,
    /// The controller moves the leadership without bumping the leader epoch.
    NoEpochBump,
    /// Consumer fetches are served up to the log end offset, not the HW.
    ServeUncommitted,
    /// The leader shrinks its ISR locally without the controller's AlterPartition.
    ShrinkIsrWithoutController,
    /// `unclean.leader.election.enable=false` is read as enabled.
    UncleanElectionParse,
    /// acks=all is acknowledged with an ISR smaller than `min.insync.replicas`.
    IgnoreMinInsync,
    /// The `min.insync.replicas` refusal comes after the append: NOT_ENOUGH_REPLICAS is
    /// answered for a record the log holds.
    MinInsyncAfterAppend,
    /// Records a follower appends are not counted toward `flush.messages`: with
    /// `flush.messages=1` followers do not fsync per append.
    FollowerFlushUncounted,
    /// The transaction coordinator skips the abort marker of a transaction's first partition.
    TxnAbortMarkerSkipped,
    /// The last stable offset is the high watermark: open transactions do not hold it.
    TxnLsoIgnoresOpen,
    /// A transactional produce of a fenced (older) producer epoch is appended.
    TxnStaleEpochAccepted,
    /// A new leader forgets the sequence numbers of idle producers: retries append again.
    IdempotenceDedupeForgotten,
    /// A transaction coordinator that loads its partition reads open transactions as empty.
    TxnReloadForgetsOngoing,
    /// The controller drops a partition's eligible leader replicas whenever it fences a broker.
    ElrClearedOnFence,
    /// A group coordinator that loads an offsets partition keeps the first record of a key
    /// (a committed offset, a group's metadata) instead of the last.
    GroupReloadKeepsFirst,
    /// Recovery after an unclean stop cuts the log at the recovery-point checkpoint instead
    /// of verifying what lies past it.
    RecoveryCutsAtCheckpoint,
}

impl Bug {
    /// Every deliberate bug, in the order of the detection table.
    pub const ALL: [Bug; 18] = [
        Bug::AckBeforeReplication,
        Bug::HwMaxOfIsr,
        Bug::KeepDivergentSuffix,
        Bug::NoEpochBump,
        Bug::ServeUncommitted,
        Bug::ShrinkIsrWithoutController,
        Bug::UncleanElectionParse,
        Bug::IgnoreMinInsync,
        Bug::MinInsyncAfterAppend,
        Bug::FollowerFlushUncounted,
        Bug::TxnAbortMarkerSkipped,
        Bug::TxnLsoIgnoresOpen,
        Bug::TxnStaleEpochAccepted,
        Bug::IdempotenceDedupeForgotten,
        Bug::TxnReloadForgetsOngoing,
        Bug::ElrClearedOnFence,
        Bug::GroupReloadKeepsFirst,
        Bug::RecoveryCutsAtCheckpoint,
    ];

    /// The broker setting that switches it on.
    pub fn setting(self) -> &'static str {
        match self {
            Bug::AckBeforeReplication => "tidewater.bug.ack.before.replication.enable",
            Bug::HwMaxOfIsr => "tidewater.bug.hw.max.of.isr.enable",
            Bug::KeepDivergentSuffix => "tidewater.bug.keep.divergent.suffix.enable",
            Bug::NoEpochBump => "tidewater.bug.no.epoch.bump.enable",
            Bug::ServeUncommitted => "tidewater.bug.serve.uncommitted.enable",
            Bug::ShrinkIsrWithoutController => "tidewater.bug.shrink.isr.without.controller.enable",
            Bug::UncleanElectionParse => "tidewater.bug.unclean.election.parse.enable",
            Bug::IgnoreMinInsync => "tidewater.bug.ignore.min.insync.enable",
            Bug::MinInsyncAfterAppend => "tidewater.bug.min.insync.after.append.enable",
            Bug::FollowerFlushUncounted => "tidewater.bug.follower.flush.uncounted.enable",
            Bug::TxnAbortMarkerSkipped => "tidewater.bug.txn.abort.marker.skipped.enable",
            Bug::TxnLsoIgnoresOpen => "tidewater.bug.txn.lso.ignores.open.enable",
            Bug::TxnStaleEpochAccepted => "tidewater.bug.txn.stale.epoch.accepted.enable",
            Bug::IdempotenceDedupeForgotten => "tidewater.bug.idempotence.dedupe.forgotten.enable",
            Bug::TxnReloadForgetsOngoing => "tidewater.bug.txn.reload.forgets.ongoing.enable",
            Bug::ElrClearedOnFence => "tidewater.bug.elr.cleared.on.fence.enable",
            Bug::GroupReloadKeepsFirst => "tidewater.bug.group.reload.keeps.first.enable",
            Bug::RecoveryCutsAtCheckpoint => "tidewater.bug.recovery.cuts.at.checkpoint.enable",
        }
    }

    /// The short name used by `tidewater detect --bugs` and the detection table.
    pub fn name(self) -> &'static str {
        self.setting()
            .trim_start_matches("tidewater.bug.")
            .trim_end_matches(".enable")
    }

    /// What it breaks and the real-world bug class it models (one paragraph).
    pub fn models(self) -> &'static str {
        match self {
            Bug::AckBeforeReplication => "acks=all answered on the leader's local append. Models a leader that completes a delayed produce before the HW passes it (the produce purgatory of KAFKA-1211's title skipped): acks=-1 silently degraded to acks=1, which loses acknowledged records on every failover before the followers fetched them.",
            Bug::HwMaxOfIsr => "The high watermark is the maximum log end offset of the ISR instead of the minimum. Models an aggregate taken the wrong way round in Partition.maybeIncrementLeaderHW: the leader counts a record committed once any one replica has it.",
            Bug::KeepDivergentSuffix => "A follower skips truncation (OffsetsForLeaderEpoch) when it starts following a new leader and keeps its divergent suffix. Models the replica-divergence bugs KIP-101 and KIP-279 fixed (KAFKA-1211, KAFKA-6361): replicas that disagree about what is at an offset.",
            Bug::NoEpochBump => "The controller changes the leader without bumping the leader epoch. Models a re-election that does not fence the old leader (the zombie-leader class behind KIP-101 and KIP-320): two leaders append under one epoch and truncation by epoch cannot tell their suffixes apart.",
            Bug::ServeUncommitted => "Consumer fetches are served up to the log end offset instead of the high watermark. Models a leader that exposes records above the HW (Kafka reads to the HW so that a consumer never sees what a failover may truncate): consumers read records that are later cut, and values whose produce failed.",
            Bug::ShrinkIsrWithoutController => "The leader removes lagging followers from its own ISR without an AlterPartition to the controller. Models the ISR-propagation bugs that KIP-497 (AlterIsr) fixed: the leader commits with a smaller ISR than the controller elects from, so the controller may elect a replica that lacks committed records.",
            Bug::UncleanElectionParse => "The controller reads unclean.leader.election.enable=false as enabled. Models a config parse or precedence bug (a topic override ignored, a default inverted; KIP-106 changed the default to false): an out-of-sync replica is elected and acknowledged records are lost.",
            Bug::IgnoreMinInsync => "acks=all is acknowledged with an ISR smaller than min.insync.replicas. Models a leader that skips the NOT_ENOUGH_REPLICAS check in Partition.appendRecordsToLeader: the write is durable on fewer replicas than the user asked for, which loses nothing until a second failure. min.insync.replicas itself came out of Jepsen's 2013 Kafka analysis (KAFKA-1555), where an ISR shrunk to the leader alone lost acknowledged writes.",
            Bug::MinInsyncAfterAppend => "With acks=all and an ISR smaller than min.insync.replicas, the leader appends the batch and only then refuses it with NOT_ENOUGH_REPLICAS, the error that says nothing was written. Models a check moved to the wrong side of the append, or the two errors Kafka keeps apart confused: NOT_ENOUGH_REPLICAS is raised in Partition.appendRecordsToLeader before anything is appended, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank after the append (the record may survive). A producer told its write definitely failed gives up on it (or sends it again), while the record stays in the log, is replicated when the ISR grows back and is read by consumers: a failed write that is visible.",
            Bug::FollowerFlushUncounted => "Records a follower appends from its fetches are not counted toward flush.messages, so with flush.messages=1 a follower fsyncs only when it rolls a segment or flushes on shutdown, while the leader fsyncs every append. Models fsync accounting kept on one append path only (in Kafka both the leader's and the replica fetcher's appends go through UnifiedLog.append, whose unflushed-message count decides the flush): a whole-cluster power cut then takes from every follower what it acknowledged as replicated, and when a follower is elected after the cut, acknowledged records are lost although every append was meant to be on disk.",
            Bug::TxnAbortMarkerSkipped => "The transaction coordinator counts the abort marker of a transaction's first partition as written without writing it. Models the lost-marker class (KAFKA-12671, a hanging transaction after a marker was not written; the markers KIP-890 hardens): on that partition the aborted records stay part of an open transaction, which the producer's next commit marker then commits, so read_committed consumers read aborted writes (G1a).",
            Bug::TxnLsoIgnoresOpen => "The last stable offset is the high watermark: an open transaction does not hold it. Models a partition leader that forgets a producer's ongoing transaction when it computes the LSO (the LSO bugs around producer-state loading, e.g. KAFKA-9144's stale first offsets): read_committed consumers read records of transactions that are not decided yet and may still abort.",
            Bug::TxnStaleEpochAccepted => "A transactional produce carrying a producer epoch older than the producer's current one on the partition is taken for the current producer's batch before any check: neither verified with the coordinator (KIP-890 part 1) nor refused with INVALID_PRODUCER_EPOCH, it is appended. Models a zombie producer that fencing does not stop (the class KIP-98's epochs and KIP-588 exist for): a producer fenced by a newer instance of its transactional id still writes into the partition.",
            Bug::IdempotenceDedupeForgotten => "A replica that becomes leader drops the state of every producer without an open transaction (its last batches' sequence numbers), so it takes the producer for a new one and accepts any sequence. Models producer state lost or not rebuilt on a leader change (the producer-state snapshot and loading bugs, e.g. KAFKA-5793 and KAFKA-8710, and sequence dedupe forgotten after a failover): an idempotent producer's retry of a batch the old leader appended and replicated, but did not answer, is appended a second time, a duplicate enable.idempotence=true promises away.",
            Bug::TxnReloadForgetsOngoing => "A transaction coordinator that (re)loads a partition of __transaction_state after a failover takes every transaction it finds Ongoing for Empty, forgetting the partitions it had added. Models coordinator state lost on reload (the hanging-transaction class of KAFKA-12671 and KIP-664: a transaction no coordinator will ever end): the producer's commit is refused, no marker reaches the partitions its records are on, the open transaction holds their last stable offset, and when the producer later writes there again and commits, that marker commits the forgotten records too.",
            Bug::ElrClearedOnFence => "When the controller fences a broker it builds the change of each partition the broker replicates from an empty ELR, so every eligible leader replica the partition had is dropped (only a replica leaving the ISR in that very change may join). Models a fencing path that builds its partition change without the partition's ELR (KIP-966 keeps a replica that left an ISR below min.insync.replicas eligible; fencing takes a broker out of ISRs only, never out of the ELR, as KAFKA-15586's review says; apache/kafka#20716 moved the ELR switch into PartitionChangeBuilder's constructor so that no path builds a change without it): once the followers that left the ISR are fenced, nobody holds the committed records but the leader, and when the leader loses power the controller elects it again as the last known leader on what its disk kept, so acknowledged records are lost although min.insync.replicas=2 promised they survive one power loss.",
            Bug::GroupReloadKeepsFirst => "A group coordinator that (re)loads a partition of __consumer_offsets after a failover keeps the first record it reads of each key instead of the last: a group's first plain offset commit of each topic-partition, and the group's first metadata record, hence its first stored generation. Models coordinator state rebuilt wrong on load (Kafka's GroupMetadataManager replays the partition so that the latest record of a key wins, as compaction keeps it; apache/kafka#2436, 'consumer offsets not properly loaded on coordinator failover', fixed such a load in 2017; a putIfAbsent where a put belongs is the one-word version): while the coordinator stays put the group is right; after it moves, the group's committed offsets go back to its first commits and its generation to the first one stored, so the coordinator hands out generation numbers it has handed out before, and two members own one partition in one generation (the generation no longer fences the old members' commits).",
            Bug::RecoveryCutsAtCheckpoint => "A log that opens after an unclean stop (kill -9, a crash, a power cut) cuts itself at its recovery-point checkpoint, discarding every record past it, instead of verifying those records batch by batch and cutting only at the first torn or corrupt one. Models storage recovery that takes a checkpoint for the end of the durable log (Kafka's LogLoader recovers the segments past the recovery point and keeps every valid batch; the checkpoint itself is written only every log.flush.offset.checkpoint.interval.ms, so it lags what was fsynced): with flush.messages=1 every acknowledged record was on disk, yet after a power cut of every broker each one comes back without what its last checkpoint had not caught up with, and the acknowledged records are gone from every replica.",
        }
    }

    /// The bug whose setting or short name is `name`.
    pub fn parse(name: &str) -> Option<Bug> {
        Bug::ALL
            .into_iter()
            .find(|b| b.setting() == name || b.name() == name)
    }
}

/// The deliberate bugs switched on in this broker (all off by default, and always off in a
/// build without the `deliberate-bugs` feature).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bugs {
    /// Bit `i` set: `Bug::ALL[i]` is on.
    enabled: u32,
}

impl Bugs {
    /// Whether `bug` is on. Always false without the `deliberate-bugs` feature.
    pub fn on(&self, bug: Bug) -> bool {
        cfg!(feature = "deliberate-bugs") && self.enabled & Self::bit(bug) != 0
    }

    /// Switches `bug` on or off.
    pub fn set(&mut self, bug: Bug, enabled: bool) {
        if enabled {
            self.enabled |= Self::bit(bug);
        } else {
            self.enabled &= !Self::bit(bug);
        }
    }

    fn bit(bug: Bug) -> u32 {
        let index = Bug::ALL
            .iter()
            .position(|b| *b == bug)
            .expect("every bug is in Bug::ALL");
        1 << index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for bug in Bug::ALL {
            assert_eq!(Bug::parse(bug.setting()), Some(bug));
            assert_eq!(Bug::parse(bug.name()), Some(bug));
            assert!(bug.setting().starts_with("tidewater.bug."));
        }
        let names: std::collections::BTreeSet<_> = Bug::ALL.iter().map(|b| b.name()).collect();
        assert_eq!(names.len(), Bug::ALL.len());
        assert_eq!(Bug::parse("no.such.bug"), None);
    }

    #[test]
    fn a_switch_is_on_only_in_a_build_with_the_feature() {
        let mut bugs = Bugs::default();
        bugs.set(Bug::NoEpochBump, true);
        assert_eq!(bugs.on(Bug::NoEpochBump), cfg!(feature = "deliberate-bugs"));
        assert!(!bugs.on(Bug::ServeUncommitted));
        bugs.set(Bug::NoEpochBump, false);
        assert!(!bugs.on(Bug::NoEpochBump));
    }
}
