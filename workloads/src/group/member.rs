//! [`Member`]: one process's membership of a group, as the worker keeps it between ops.

use std::collections::BTreeMap;

use tidewater_kafka_model::ErrorCode;
use tokio::time::Instant;

use crate::client::{ClientError, ErrorCause};
use crate::history::Key;
use crate::queue::Consumer;

/// One process's membership.
#[derive(Debug, Clone)]
pub struct Member {
    /// The group.
    pub group: String,
    /// The coordinator's id for this member, once joined.
    pub member_id: Option<String>,
    /// The generation it holds its assignment in; `None` until the next ok rebalance.
    pub generation: Option<u64>,
    /// Set when the coordinator asked it to rejoin; it commits once, then rebalances.
    pub rejoin: bool,
    /// Polled positions of the assigned keys (the queue consumer, reused).
    pub consumer: Consumer,
    /// The positions last committed (or fetched) per key, to commit only progress.
    pub committed: BTreeMap<Key, u64>,
    /// When the last heartbeat went out.
    pub last_heartbeat: Option<Instant>,
    /// Whether it polled since that heartbeat.
    pub polled: bool,
}

impl Member {
    /// A member of `group` that has not joined yet.
    pub fn new(group: &str) -> Member {
        Member {
            group: group.to_string(),
            member_id: None,
            generation: None,
            rejoin: false,
            consumer: Consumer::default(),
            committed: BTreeMap::new(),
            last_heartbeat: None,
            polled: false,
        }
    }

    /// Positions that moved past what was last committed.
    pub fn progress(&self) -> BTreeMap<Key, u64> {
        self.consumer
            .assigned
            .iter()
            .filter_map(|k| {
                let position = *self.consumer.positions.get(k)?;
                (self.committed.get(k) != Some(&position)).then(|| (k.clone(), position))
            })
            .collect()
    }

    /// Forgets the generation and the assignment (eager protocol: everything is revoked).
    pub(crate) fn revoke(&mut self) {
        self.generation = None;
        self.rejoin = false;
        self.consumer = Consumer::default();
        self.committed.clear();
    }

    /// Reacts to a coordinator error: rejoin (without the id when it is unknown).
    pub(crate) fn on_error(&mut self, e: &ClientError) {
        if let ErrorCause::Broker { name, .. } = &e.cause {
            match ErrorCode::from_name(name) {
                Some(ErrorCode::UnknownMemberId) => {
                    self.member_id = None;
                    self.rejoin = true;
                }
                Some(ErrorCode::IllegalGeneration | ErrorCode::RebalanceInProgress) => {
                    self.rejoin = true
                }
                _ => {}
            }
        }
    }
}
