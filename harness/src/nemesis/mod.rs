//! The nemesis: injects faults (kill, pause, partition, power loss) on a schedule drawn from the run's seed
//! or from a fault plan, and records each one as a history operation.
//!
//! - [`target`]: which nodes a step hits (`one`, `majority`, `leader:t0/0`, `@bound`, `n1,n2`).
//! - [`plan`]: fault plans, timed steps in TOML; the shipped ones live in `harness/plans/`.
//!   [`plan::step`] is a step as code sees it (an [`Action`] whose variants carry exactly their
//!   arguments); `plan/file.rs` the shape of plan files, typed into steps when loaded.
//! - [`schedule`]: the random schedule for `--nemesis kill,pause,partition`: weighted fault
//!   kinds, lengths drawn against the cluster's timeouts, resolved up front into a plan, so it
//!   is stored with the run and `--replay` repeats it.
//! - [`view`]: partition metadata (leader, ISR) the nemesis resolves targets against.
//! - [`executor`]: runs a plan against a [`crate::cluster::Cluster`], then the final step that
//!   heals, resumes and starts everything.
//!
//! One fault vocabulary runs through all of it: a plan [`Step`]'s [`Action`] carries exactly
//! its arguments; the random schedule's [`FaultKind`]s expand into such steps and name the
//! fault families ([`Fault`], shared with the checker and the reports) they need; the executor
//! records every op as a [`NemesisOp`] (`tidewater_workloads::nemesis`), which writes the
//! history's `f` and `value` and reads them back for the checker's fault windows and the
//! report's bands. History ops (process `"nemesis"`, type `info`), through the runner's
//! [`Recorder`]: `start-partition` (value: the grudge), `stop-partition` (null), `start-kill`
//! (the nodes killed or stopped), `stop-kill` (the nodes started), `start-power-loss` (the
//! nodes whose power was cut) / `stop-power-loss` (those of them booted again), `start-pause`
//! / `stop-pause` (nodes), and `wait-for-isr-shrink` / `wait-for-isr-expand` /
//! `wait-for-leader` / `wait-for-isr-full` (what was seen).

pub mod executor;
pub mod plan;
pub mod schedule;
pub mod target;
pub mod view;

pub use executor::Nemesis;
pub use plan::{Action, FaultPlan, Partition, PartitionKind, Step, Wait, When};
pub use schedule::{
    parse_faults, parse_faults_for, random_plan, random_plan_for, ClusterTimeouts, FaultKind,
};
pub use target::Target;
pub use tidewater_workloads::nemesis::{Fault, NemesisOp};
pub use view::{ClusterView, PartitionState, StaticView};

use serde_json::Value;
use std::sync::Mutex;

/// Receives every nemesis operation; the runner writes them to the history.
pub trait Recorder: Send + Sync {
    /// One operation, and an error if the fault could not be (fully) applied.
    fn nemesis(&self, op: NemesisOp, error: Option<String>);
}

/// One recorded nemesis operation, as the history would hold it (see [`MemoryRecorder`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedOp {
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
    ops: Mutex<Vec<RecordedOp>>,
}

impl MemoryRecorder {
    /// The operations so far.
    pub fn ops(&self) -> Vec<RecordedOp> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Recorder for MemoryRecorder {
    fn nemesis(&self, op: NemesisOp, error: Option<String>) {
        self.ops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(RecordedOp {
                f: op.f(),
                value: op.value(),
                error,
            });
    }
}
