//! What the nemesis needs to know about the cluster's metadata: who leads a partition and who
//! is in its ISR, to resolve targets such as `leader:t0/0` and to wait for ISR changes.
//!
//! Each system under test answers it its own way (`crate::system`: the companion broker's
//! `HttpView`, Apache Kafka's `KafkaView`); [`StaticView`] answers what a test sets.

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Bound on one metadata request of a view, so a paused or cut-off node does not stall the
/// nemesis.
pub const METADATA_TIMEOUT: Duration = Duration::from_millis(1_500);

/// Leader, ISR and replicas of one partition, by node name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionState {
    /// The leader, if there is one.
    pub leader: Option<String>,
    /// In-sync replicas.
    pub isr: Vec<String>,
    /// Every replica.
    pub replicas: Vec<String>,
}

/// Reads partition metadata. `None` when no node could tell.
pub trait ClusterView: Send + Sync {
    /// The state of partition `key` (`topic/partition`).
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>>;
}

/// A view whose answers the test sets: for tests of the nemesis without a broker.
#[derive(Default)]
pub struct StaticView {
    /// Partition states by key.
    states: Mutex<BTreeMap<String, PartitionState>>,
}

impl StaticView {
    /// Sets what the view answers for `key`.
    pub fn set(&self, key: &str, state: PartitionState) {
        self.states.lock().unwrap().insert(key.to_string(), state);
    }
}

impl ClusterView for StaticView {
    fn partition_state<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<PartitionState>> {
        let state = self.states.lock().unwrap().get(key).cloned();
        Box::pin(async move { state })
    }
}
