//! One step of a fault plan: when it runs ([`When`]), what it does ([`Action`], each variant
//! with exactly its arguments), and the checks the types cannot make (numbers in bounds, a
//! `bind` only where there is a target).

use super::{number_text, STEP_TIME_MAX_S, WAIT_TIMEOUT_DEFAULT_S, WAIT_TIMEOUT_MAX_S};
use crate::nemesis::target::Target;
use crate::net::{self, Grudge};
use serde::{Deserialize, Serialize};
use tidewater_workloads::nemesis::{Fault, OpName, WaitFor};

/// What a step does, with exactly the arguments it takes. In a plan file the variant is the
/// step's `action` and its arguments are fields of the step beside it (`target`, `from`,
/// `kind`, `grudge`, `torn`, and `key` and `timeout_s` for waits); a field an action does not
/// take is refused when the plan is loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `isolate`: cut the target nodes (as one group) from every other node. Clients still
    /// reach them.
    Isolate {
        /// The nodes cut off.
        target: Target,
    },
    /// `partition`: apply a partition, a random shape or an explicit grudge.
    Partition(Partition),
    /// `cut`: cut the target nodes from the `from` nodes, both ways; every other link stays up.
    Cut {
        /// The nodes cut from `from`.
        target: Target,
        /// Resolved after the target; nodes in both stay with `from`.
        from: Target,
    },
    /// `cut-clients`: cut the harness host (clients) from the target nodes.
    CutClients {
        /// The nodes clients cannot reach.
        target: Target,
    },
    /// `heal`: remove every network fault.
    Heal,
    /// `kill`: SIGKILL the target nodes.
    Kill {
        /// The nodes killed.
        target: Target,
    },
    /// `power-loss`: cut the target nodes' power: SIGKILL, then lose every write they had not
    /// fsynced (needs a lossy filesystem under their data). `start` boots them on what is left.
    PowerLoss {
        /// The nodes whose power is cut.
        target: Target,
        /// `torn = true`: tear each file's last unsynced write instead of dropping it whole (a
        /// prefix survives, drawn from a seed of the nemesis), as a disk that lost power
        /// mid-write may. Default: clean losses.
        torn: bool,
    },
    /// `stop`: stop the target nodes gracefully (SIGTERM, SIGKILL after a bound).
    Stop {
        /// The nodes stopped.
        target: Target,
    },
    /// `start`: start the target nodes (those not running).
    Start {
        /// The nodes started.
        target: Target,
    },
    /// `restart`: stop, then start the target nodes.
    Restart {
        /// The nodes restarted.
        target: Target,
    },
    /// `pause`: SIGSTOP the target nodes.
    Pause {
        /// The nodes paused.
        target: Target,
    },
    /// `resume`: SIGCONT the target nodes.
    Resume {
        /// The nodes resumed.
        target: Target,
    },
    /// `wait-for-*`: wait until a partition's metadata says so.
    Wait(Wait),
}

/// The partition a `partition` step applies: exactly one of `kind` or `grudge`.
#[derive(Debug, Clone, PartialEq)]
pub enum Partition {
    /// `kind`: a random shape over every node, drawn when the step runs.
    Random(PartitionKind),
    /// `grudge`: an explicit grudge (node -> nodes it drops).
    Grudge(Grudge),
}

/// A `wait-for-*` step: what it waits for in the metadata of partition `key`, given up after
/// `timeout_s` (default 30 s, at most 600 s).
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// `wait-for-isr-shrink`: until none of the target nodes is in the ISR of `key`.
    IsrShrink {
        /// The partition, e.g. `t0/0`.
        key: String,
        /// The nodes that must leave the ISR.
        target: Target,
        /// The bound, if not the default.
        timeout_s: Option<f64>,
    },
    /// `wait-for-isr-expand`: until every target node is in the ISR of `key`.
    IsrExpand {
        /// The partition.
        key: String,
        /// The nodes that must join the ISR.
        target: Target,
        /// The bound, if not the default.
        timeout_s: Option<f64>,
    },
    /// `wait-for-leader`: until `key` has a leader (one of the target nodes, if given).
    Leader {
        /// The partition.
        key: String,
        /// The nodes one of which must lead, if any.
        target: Option<Target>,
        /// The bound, if not the default.
        timeout_s: Option<f64>,
    },
    /// `wait-for-isr-full`: until every replica of `key` is in its ISR.
    IsrFull {
        /// The partition.
        key: String,
        /// The bound, if not the default.
        timeout_s: Option<f64>,
    },
}

impl Wait {
    /// The condition, as the history names it.
    pub fn until(&self) -> WaitFor {
        match self {
            Wait::IsrShrink { .. } => WaitFor::IsrShrink,
            Wait::IsrExpand { .. } => WaitFor::IsrExpand,
            Wait::Leader { .. } => WaitFor::Leader,
            Wait::IsrFull { .. } => WaitFor::IsrFull,
        }
    }

    /// The partition waited on.
    pub fn key(&self) -> &str {
        match self {
            Wait::IsrShrink { key, .. }
            | Wait::IsrExpand { key, .. }
            | Wait::Leader { key, .. }
            | Wait::IsrFull { key, .. } => key,
        }
    }

    /// The bound as given, if given.
    pub fn timeout_s(&self) -> Option<f64> {
        match self {
            Wait::IsrShrink { timeout_s, .. }
            | Wait::IsrExpand { timeout_s, .. }
            | Wait::Leader { timeout_s, .. }
            | Wait::IsrFull { timeout_s, .. } => *timeout_s,
        }
    }

    /// The bound of the wait (the default when none is given).
    pub fn bound_s(&self) -> f64 {
        self.timeout_s().unwrap_or(WAIT_TIMEOUT_DEFAULT_S)
    }

    fn target(&self) -> Option<&Target> {
        match self {
            Wait::IsrShrink { target, .. } | Wait::IsrExpand { target, .. } => Some(target),
            Wait::Leader { target, .. } => target.as_ref(),
            Wait::IsrFull { .. } => None,
        }
    }
}

impl Action {
    /// The name used in plan files (`isolate`, `wait-for-leader`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Isolate { .. } => "isolate",
            Action::Partition(_) => "partition",
            Action::Cut { .. } => "cut",
            Action::CutClients { .. } => "cut-clients",
            Action::Heal => "heal",
            Action::Kill { .. } => "kill",
            Action::PowerLoss { .. } => "power-loss",
            Action::Stop { .. } => "stop",
            Action::Start { .. } => "start",
            Action::Restart { .. } => "restart",
            Action::Pause { .. } => "pause",
            Action::Resume { .. } => "resume",
            Action::Wait(wait) => wait.until().name(),
        }
    }

    /// The nodes the step acts on, for the actions that take a target.
    pub fn target(&self) -> Option<&Target> {
        match self {
            Action::Isolate { target }
            | Action::Cut { target, .. }
            | Action::CutClients { target }
            | Action::Kill { target }
            | Action::PowerLoss { target, .. }
            | Action::Stop { target }
            | Action::Start { target }
            | Action::Restart { target }
            | Action::Pause { target }
            | Action::Resume { target } => Some(target),
            Action::Wait(wait) => wait.target(),
            Action::Partition(_) | Action::Heal => None,
        }
    }

    /// The history name of the (first) op the action records: `start-partition` for every
    /// network fault, `start-kill` for kill, stop and restart, `stop-kill` for start, ...
    pub fn op_name(&self) -> OpName {
        match self {
            Action::Isolate { .. }
            | Action::Partition(_)
            | Action::Cut { .. }
            | Action::CutClients { .. } => OpName::Start(Fault::Partition),
            Action::Heal => OpName::Stop(Fault::Partition),
            Action::Kill { .. } | Action::Stop { .. } | Action::Restart { .. } => {
                OpName::Start(Fault::Kill)
            }
            Action::PowerLoss { .. } => OpName::Start(Fault::PowerLoss),
            Action::Start { .. } => OpName::Stop(Fault::Kill),
            Action::Pause { .. } => OpName::Start(Fault::Pause),
            Action::Resume { .. } => OpName::Stop(Fault::Pause),
            Action::Wait(wait) => OpName::Wait(wait.until()),
        }
    }

    /// The fault the action starts (the `X` of the history's `start-X`), if any.
    pub fn fault(&self) -> Option<Fault> {
        match self.op_name() {
            OpName::Start(fault) => Some(fault),
            OpName::Stop(_) | OpName::Wait(_) => None,
        }
    }
}

/// Random partition shapes over every node (controller included), drawn when the step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionKind {
    /// A random split in two (see [`crate::net::halves`]: minority and majority, or two
    /// equal halves for an even node count).
    Halves,
    /// Every node sees a different majority.
    MajoritiesRing,
    /// Two halves joined by one node.
    Bridge,
}

impl PartitionKind {
    /// The name in plans and in the random schedule: `halves`, `majorities-ring`, `bridge`.
    pub const fn name(self) -> &'static str {
        match self {
            PartitionKind::Halves => "halves",
            PartitionKind::MajoritiesRing => "majorities-ring",
            PartitionKind::Bridge => "bridge",
        }
    }

    /// The shape over `nodes`, in the order given (the caller shuffles them).
    pub fn grudge(self, nodes: &[String]) -> Grudge {
        match self {
            PartitionKind::Halves => net::halves(nodes),
            PartitionKind::MajoritiesRing => net::majorities_ring(nodes),
            PartitionKind::Bridge => net::bridge(nodes),
        }
    }
}

/// When a step runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// Right after the previous step finished (neither `at_s` nor `after_s`).
    Now,
    /// `at_s`: this many seconds after the main phase started (or at once if that is past).
    At {
        /// Seconds since the main phase started.
        at_s: f64,
    },
    /// `after_s`: this many seconds after the previous step finished.
    After {
        /// Seconds after the previous step.
        after_s: f64,
    },
}

impl When {
    /// The same time with its seconds multiplied by `factor` (tests compress plans).
    pub fn scaled(self, factor: f64) -> When {
        match self {
            When::Now => When::Now,
            When::At { at_s } => When::At {
                at_s: at_s * factor,
            },
            When::After { after_s } => When::After {
                after_s: after_s * factor,
            },
        }
    }
}

/// One timed step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When it runs.
    pub when: When,
    /// What it does.
    pub action: Action,
    /// Remember the resolved target nodes under this name, for later `@name` targets (only
    /// on a step whose action takes a target).
    pub bind: Option<String>,
    /// Free text for the reader of the plan.
    pub note: Option<String>,
}

impl Step {
    /// A step that runs right after the previous one, binding nothing; fill in the rest with
    /// struct update syntax.
    pub fn new(action: Action) -> Step {
        Step {
            when: When::Now,
            action,
            bind: None,
            note: None,
        }
    }

    /// Checks what the types cannot: times finite, not negative and within a run, a wait's
    /// bound at most [`WAIT_TIMEOUT_MAX_S`], a `bind` on an action with a target.
    pub(super) fn check(&self) -> Result<(), String> {
        let (at_s, after_s) = match self.when {
            When::Now => (None, None),
            When::At { at_s } => (Some(at_s), None),
            When::After { after_s } => (None, Some(after_s)),
        };
        let timeout_s = match &self.action {
            Action::Wait(wait) => wait.timeout_s(),
            _ => None,
        };
        check_times(at_s, after_s, timeout_s)?;
        if let Action::Wait(wait) = &self.action {
            check_wait_bound(wait.bound_s())?;
        }
        match &self.bind {
            Some(name) if self.action.target().is_none() => Err(bind_error(name)),
            _ => Ok(()),
        }
    }
}

/// The numbers of a step: finite, not negative, and no later than the longest run.
pub(super) fn check_times(
    at_s: Option<f64>,
    after_s: Option<f64>,
    timeout_s: Option<f64>,
) -> Result<(), String> {
    for (field, v) in [
        ("at_s", at_s),
        ("after_s", after_s),
        ("timeout_s", timeout_s),
    ] {
        if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return Err(format!("{field} must be a non-negative number"));
        }
    }
    for (field, v) in [("at_s", at_s), ("after_s", after_s)] {
        if let Some(v) = v.filter(|v| *v > STEP_TIME_MAX_S) {
            return Err(format!(
                "{field} = {} is beyond the longest run ({STEP_TIME_MAX_S} s)",
                number_text(v)
            ));
        }
    }
    Ok(())
}

fn check_wait_bound(bound_s: f64) -> Result<(), String> {
    if bound_s > WAIT_TIMEOUT_MAX_S {
        return Err(format!("timeout_s above {WAIT_TIMEOUT_MAX_S}"));
    }
    Ok(())
}

pub(super) fn bind_error(name: &str) -> String {
    format!("bind {name:?} needs a target and a simple name")
}
