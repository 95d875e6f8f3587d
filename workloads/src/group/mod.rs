//! The consumer-group workload: producers send unique integers as in the queue workload;
//! consumers in groups join through the broker's group coordinator (`docs/groups.md`), poll
//! their assigned partitions from the committed offsets, commit what they processed, and
//! suffer consumer faults: a crash (the process vanishes without leaving), a stall (it keeps
//! heartbeating but stops polling past `max.poll.interval.ms`) and a leave.
//!
//! History (see `docs/history.md`, "Consumer groups"):
//! - `rebalance`: join + sync; ok value `{"group", "generation", "assignment": [keys]}`;
//! - `poll`: as in the queue workload, on the member's assigned keys;
//! - `commit`: `[["commit", key, offset], ...]`, offset = the next offset to read;
//! - `crash`: one `info` line (no invoke): the process is gone, its worker continues as a new
//!   process and a new member;
//! - `stall` and `leave`: ok/fail with value `[]`; the member must rejoin afterwards.
//!
//! # Layout
//!
//! Split like the queue workload's pieces, by what each does:
//! - [`GroupSettings`] (here): the workload's settings.
//! - `assignors`: [`range`] and [`round_robin`] over history keys, the shared model's
//!   assignors (`tidewater-kafka-model`) as the leader member runs them.
//! - `client`: the [`GroupClient`] trait (the coordinator calls) and how their failures
//!   classify (`fail` or `info`).
//! - `coordinator`: finding a group's coordinator again when it moved, for both clients
//!   ([`HttpGroupClient`] and [`crate::kafka_group::KafkaGroupClient`]).
//! - `http`: [`HttpGroupClient`], the coordinator calls over the broker's HTTP API.
//! - `member`: [`Member`], one process's membership (member id, generation, assignment,
//!   positions).
//! - `intent`: [`GroupIntent`] and [`GroupGenerator`], the next op from a seeded RNG (pure).
//! - `execute`: [`execute`], which runs one intent and returns its completion, and the
//!   heartbeats folded into it.
//! - `worker`: [`group_worker`], the loop a runner spawns per worker, writing to an [`OpSink`].

use crate::history::Key;
use crate::queue::QueueSettings;
use std::collections::BTreeMap;

mod assignors;
mod client;
pub(crate) mod coordinator;
mod execute;
mod http;
mod intent;
mod member;
mod worker;

#[cfg(test)]
mod tests;

pub use assignors::{range, round_robin};
pub(crate) use client::{certain, commit_outcome};
pub use client::{GroupClient, Joined};
pub use execute::{execute, heartbeat_if_due};
pub use http::HttpGroupClient;
pub use intent::{GroupGenerator, GroupIntent};
pub use member::Member;
pub use worker::{group_worker, GroupContext, OpSink};

/// Settings of the group workload.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// Every key (`topic/partition`) of the test; the subscribed topics are their topics.
    pub keys: Vec<Key>,
    /// `acks` of the producers.
    pub acks: String,
    /// Group ids; consumer worker `i` belongs to `groups[i % groups.len()]`.
    pub groups: Vec<String>,
    /// The first `producers` workers only send; the others are group members.
    pub producers: usize,
    /// Share of a member's ops that commit (the rest poll), in [0, 1].
    pub commit_fraction: f64,
    /// Share of a member's ops that crash the process.
    pub crash_fraction: f64,
    /// Share of a member's ops that stall it past `max_poll_interval_ms`.
    pub stall_fraction: f64,
    /// Share of a member's ops that leave the group.
    pub leave_fraction: f64,
    /// `session.timeout.ms` of the members.
    pub session_timeout_ms: u64,
    /// `max.poll.interval.ms` of the members (also the rebalance timeout).
    pub max_poll_interval_ms: u64,
    /// `heartbeat.interval.ms` of the members.
    pub heartbeat_interval_ms: u64,
    /// Long-poll bound of the members' fetches.
    pub poll_max_wait_ms: u64,
    /// `range` or `roundrobin`.
    pub assignor: String,
}

impl GroupSettings {
    /// Two producers, one group, rare faults, timeouts short enough for a chaos run.
    pub fn new(keys: Vec<Key>, acks: &str) -> GroupSettings {
        GroupSettings {
            keys,
            acks: acks.to_string(),
            groups: vec!["g0".into()],
            producers: 2,
            commit_fraction: 0.2,
            crash_fraction: 0.002,
            stall_fraction: 0.002,
            leave_fraction: 0.002,
            session_timeout_ms: 6_000,
            max_poll_interval_ms: 10_000,
            heartbeat_interval_ms: 1_000,
            poll_max_wait_ms: 100,
            assignor: "range".into(),
        }
    }

    /// The subscribed topics: the topics of the keys, sorted.
    pub fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .keys
            .iter()
            .filter_map(|k| k.rsplit_once('/').map(|(t, _)| t.to_string()))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// Partition counts of the subscribed topics, from the keys.
    pub fn partition_counts(&self) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for key in &self.keys {
            if let Some((topic, p)) = crate::client::split_key(key) {
                let count = counts.entry(topic.to_string()).or_insert(0u32);
                *count = (*count).max(p + 1);
            }
        }
        counts
    }

    /// The queue workload's settings for the producers' sends and the members' polls.
    pub(crate) fn queue_settings(&self) -> QueueSettings {
        let mut queue = QueueSettings::new(self.keys.clone(), &self.acks);
        queue.poll_max_wait_ms = self.poll_max_wait_ms;
        queue
    }
}
