//! What a group worker does next: [`GroupIntent`], drawn by [`GroupGenerator`] from a seeded
//! RNG and the member's state (pure: no I/O).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::{GroupSettings, Member};
use crate::history::{Key, Val};
use crate::queue::{self, ValueSource};

/// What a worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupIntent {
    /// A producer's send.
    Send {
        /// The partition.
        key: Key,
        /// The unique value.
        value: Val,
    },
    /// Join and sync.
    Rebalance,
    /// Poll the next assigned key.
    Poll,
    /// Commit the positions that moved.
    Commit,
    /// The process crashes.
    Crash,
    /// Heartbeat without polling for longer than `max_poll_interval_ms`.
    Stall,
    /// Leave the group.
    Leave,
}

impl GroupIntent {
    /// The history's `f`.
    pub fn f(&self) -> &'static str {
        match self {
            GroupIntent::Send { .. } => "send",
            GroupIntent::Rebalance => "rebalance",
            GroupIntent::Poll => "poll",
            GroupIntent::Commit => "commit",
            GroupIntent::Crash => "crash",
            GroupIntent::Stall => "stall",
            GroupIntent::Leave => "leave",
        }
    }

    /// The invoke line's value, taken before the op runs; `None` for a crash, which is a lone
    /// `info` completion.
    pub fn invoke_value(&self, member: &Member) -> Option<Value> {
        match self {
            GroupIntent::Send { key, value } => Some(
                queue::Intent::Send {
                    key: key.clone(),
                    value: *value,
                }
                .invoke_value(),
            ),
            GroupIntent::Rebalance => Some(Value::Null),
            GroupIntent::Poll => Some(json!([["poll"]])),
            GroupIntent::Commit => Some(commit_value(&member.progress())),
            GroupIntent::Crash => None,
            GroupIntent::Stall | GroupIntent::Leave => Some(json!([])),
        }
    }
}

/// The value of a commit line: `[["commit", key, offset], ...]`.
pub(crate) fn commit_value(offsets: &BTreeMap<Key, u64>) -> Value {
    json!(offsets
        .iter()
        .map(|(k, o)| json!(["commit", k, o]))
        .collect::<Vec<_>>())
}

/// Chooses a worker's operations; seeded by the run's seed and the worker number.
pub struct GroupGenerator {
    rng: StdRng,
    settings: Arc<GroupSettings>,
    values: ValueSource,
    producer: bool,
}

impl GroupGenerator {
    /// The generator of worker `worker`.
    pub fn new(seed: u64, worker: u64, settings: Arc<GroupSettings>, values: ValueSource) -> Self {
        assert!(!settings.keys.is_empty(), "the group workload needs keys");
        assert!(
            !settings.groups.is_empty(),
            "the group workload needs a group"
        );
        let rng = StdRng::seed_from_u64(seed ^ worker.wrapping_mul(0xA24B_AED4_963E_E407));
        let producer = (worker as usize) < settings.producers;
        GroupGenerator {
            rng,
            settings,
            values,
            producer,
        }
    }

    /// Whether this worker only sends.
    pub fn is_producer(&self) -> bool {
        self.producer
    }

    /// The group of consumer worker `worker`.
    pub fn group_of(settings: &GroupSettings, worker: u64) -> String {
        let index = (worker as usize).saturating_sub(settings.producers) % settings.groups.len();
        settings.groups[index].clone()
    }

    /// The next intent for `member` (ignored for producers).
    pub fn next(&mut self, member: &Member) -> GroupIntent {
        if self.producer {
            let key = self
                .settings
                .keys
                .choose(&mut self.rng)
                .expect("keys")
                .clone();
            return GroupIntent::Send {
                key,
                value: self.values.next(),
            };
        }
        if member.rejoin {
            // onPartitionsRevoked: commit the progress first, then rejoin.
            if member.generation.is_some() && !member.progress().is_empty() {
                return GroupIntent::Commit;
            }
            return GroupIntent::Rebalance;
        }
        if member.generation.is_none() {
            return GroupIntent::Rebalance;
        }
        let s = &self.settings;
        let roll: f64 = self.rng.gen();
        let mut edge = s.crash_fraction;
        if roll < edge {
            return GroupIntent::Crash;
        }
        edge += s.stall_fraction;
        if roll < edge {
            return GroupIntent::Stall;
        }
        edge += s.leave_fraction;
        if roll < edge {
            return GroupIntent::Leave;
        }
        edge += s.commit_fraction;
        if roll < edge && !member.progress().is_empty() {
            return GroupIntent::Commit;
        }
        GroupIntent::Poll
    }
}
