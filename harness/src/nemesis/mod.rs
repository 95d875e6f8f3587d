//! The nemesis: injects faults (kill, pause, partition, power loss) on a schedule drawn from the run's seed
//! or from a fault plan, and records each one as a history operation.
//!
//! - [`target`]: which nodes a step hits (`one`, `majority`, `leader:t0/0`, `@bound`, `n1,n2`).
//! - [`plan`]: fault plans, timed steps in TOML; the shipped ones live in `harness/plans/`.
//! - [`schedule`]: the random schedule for `--nemesis kill,pause,partition`: weighted fault
//!   kinds, lengths drawn against the cluster's timeouts, resolved up front into a plan, so it
//!   is stored with the run and `--replay` repeats it.
//! - [`view`]: partition metadata (leader, ISR) the nemesis resolves targets against.
//! - [`executor`]: runs a plan against a [`crate::cluster::Cluster`], then the final step that
//!   heals, resumes and starts everything.
//!
//! History ops (process `"nemesis"`, type `info`), through the runner's [`Recorder`]:
//! `start-partition` (value: the grudge), `stop-partition` (null), `start-kill` (the nodes
//! killed or stopped), `stop-kill` (the nodes started), `start-power-loss` (the nodes whose
//! power was cut) / `stop-power-loss` (those of them booted again), `start-pause` /
//! `stop-pause` (nodes),
//! and `wait-for-isr-shrink` / `wait-for-isr-expand` / `wait-for-leader` (what was seen).

pub mod executor;
pub mod plan;
pub mod schedule;
pub mod target;
pub mod view;

pub use executor::{fault_kind, Nemesis};
pub use plan::{Action, FaultPlan, PartitionKind, Step};
pub use schedule::{parse_faults, random_plan, ClusterTimeouts, Fault, FaultKind};
pub use target::Target;
pub use view::{view_of, ClusterView, HttpView, KafkaView, PartitionState, StaticView};

use serde_json::Value;
use std::sync::Mutex;

/// Receives every nemesis operation; the runner writes them to the history.
pub trait Recorder: Send + Sync {
    /// One operation: `f` such as `start-partition`, its value, and an error if the fault
    /// could not be (fully) applied.
    fn nemesis(&self, f: &str, value: Value, error: Option<String>);
}

/// One recorded nemesis operation (see [`MemoryRecorder`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NemesisOp {
    /// The function, e.g. `start-kill`.
    pub f: String,
    /// Its value.
    pub value: Value,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Keeps operations in memory: for tests, and for callers that write them out themselves.
#[derive(Default)]
pub struct MemoryRecorder {
    /// Every operation, in order.
    ops: Mutex<Vec<NemesisOp>>,
}

impl MemoryRecorder {
    /// The operations so far.
    pub fn ops(&self) -> Vec<NemesisOp> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Recorder for MemoryRecorder {
    fn nemesis(&self, f: &str, value: Value, error: Option<String>) {
        self.ops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(NemesisOp {
                f: f.to_string(),
                value,
                error,
            });
    }
}
