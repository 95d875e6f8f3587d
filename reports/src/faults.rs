//! Fault windows: when each kind of fault was in effect, from the nemesis ops of a history.
//!
//! A window of kind `X` opens at a `start-X` op and closes at the next `stop-X` op (or at the
//! end of the history). When the nemesis logs both an invocation and a completion for a step,
//! the window spans from the first `start-X` to the last `stop-X` of that pair, the widest
//! time the fault may have been in effect. Functions not of the form `start-X` / `stop-X`
//! are kept as point events.

use serde_json::Value;
use tidewater_workloads::history::{Op, OpType};

/// The kind of a fault, which decides its colour.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Processes killed with SIGKILL.
    Kill,
    /// Processes paused with SIGSTOP.
    Pause,
    /// Network partition.
    Partition,
    /// Any other `start-X` / `stop-X` pair (named `X`).
    Other(String),
}

impl FaultKind {
    /// Parses the `X` of `start-X`.
    pub fn from_name(name: &str) -> FaultKind {
        match name {
            "kill" => FaultKind::Kill,
            "pause" => FaultKind::Pause,
            "partition" => FaultKind::Partition,
            other => FaultKind::Other(other.to_string()),
        }
    }

    /// The label shown in legends.
    pub fn label(&self) -> &str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Other(name) => name,
        }
    }

    /// The band colour: distinct from each other and from the outcome colours of points.
    pub fn rgb(&self) -> (u8, u8, u8) {
        match self {
            FaultKind::Kill => (214, 39, 140),
            FaultKind::Pause => (230, 190, 0),
            FaultKind::Partition => (23, 160, 207),
            FaultKind::Other(_) => (127, 127, 127),
        }
    }
}

/// One interval during which a fault was in effect.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultWindow {
    /// What kind of fault.
    pub kind: FaultKind,
    /// Start, ns since the test started.
    pub start_ns: u64,
    /// End, ns; the end of the history when it was never stopped.
    pub end_ns: u64,
    /// True when no `stop-X` closed it.
    pub open_ended: bool,
    /// The value of the `start-X` op (targets, grudge), for the fault table.
    pub value: Value,
    /// Index of the `start-X` op.
    pub start_index: u64,
}

/// A nemesis op that is not part of a start/stop pair (for example `heal` or an unknown f).
#[derive(Debug, Clone, PartialEq)]
pub struct NemesisEvent {
    /// Its function.
    pub f: String,
    /// When, ns.
    pub time_ns: u64,
    /// Its value.
    pub value: Value,
    /// Its index.
    pub index: u64,
}

/// Fault windows and other nemesis events of a history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Windows ordered by start time.
    pub windows: Vec<FaultWindow>,
    /// Everything else the nemesis did.
    pub events: Vec<NemesisEvent>,
}

impl Faults {
    /// The distinct kinds present, in a stable order.
    pub fn kinds(&self) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> = self.windows.iter().map(|w| w.kind.clone()).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }
}

/// Builds the windows from `nemesis` ops in history order; `end_ns` closes open windows.
pub fn fault_windows(nemesis: &[Op], end_ns: u64) -> Faults {
    let mut faults = Faults::default();
    // Open windows by kind, and the last closed window per kind if its stop was an invocation
    // (its completion may follow and extend it).
    let mut open: Vec<FaultWindow> = Vec::new();
    let mut closed_by_invoke: Vec<(FaultKind, usize)> = Vec::new();
    for op in nemesis {
        if let Some(name) = op.f.strip_prefix("start-") {
            let kind = FaultKind::from_name(name);
            if !open.iter().any(|w| w.kind == kind) {
                open.push(FaultWindow {
                    kind,
                    start_ns: op.time,
                    end_ns,
                    open_ended: true,
                    value: op.value.clone(),
                    start_index: op.index,
                });
            }
        } else if let Some(name) = op.f.strip_prefix("stop-") {
            let kind = FaultKind::from_name(name);
            if let Some(at) = open.iter().position(|w| w.kind == kind) {
                let mut w = open.remove(at);
                w.end_ns = op.time.max(w.start_ns);
                w.open_ended = false;
                closed_by_invoke.retain(|(k, _)| *k != kind);
                if op.kind == OpType::Invoke {
                    closed_by_invoke.push((kind, faults.windows.len()));
                }
                faults.windows.push(w);
            } else if let Some(pos) = closed_by_invoke.iter().position(|(k, _)| *k == kind) {
                let (_, at) = closed_by_invoke.remove(pos);
                faults.windows[at].end_ns = faults.windows[at].end_ns.max(op.time);
            }
        } else {
            faults.events.push(NemesisEvent {
                f: op.f.clone(),
                time_ns: op.time,
                value: op.value.clone(),
                index: op.index,
            });
        }
    }
    faults.windows.extend(open);
    faults.windows.sort_by_key(|w| (w.start_ns, w.start_index));
    faults
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidewater_workloads::history::Process;

    fn nem(index: u64, time: u64, kind: OpType, f: &str) -> Op {
        Op {
            index,
            time,
            process: Process::Nemesis,
            kind,
            f: f.into(),
            value: serde_json::json!(["n1"]),
            node: None,
            high_watermarks: None,
            log_start_offsets: None,
            isr_sizes: None,
            error: None,
            r#final: false,
        }
    }

    #[test]
    fn windows_run_from_start_to_stop_per_kind_and_unknown_fs_are_events() {
        let ops = [
            nem(0, 10, OpType::Info, "start-kill"),
            nem(1, 20, OpType::Info, "start-partition"),
            nem(2, 30, OpType::Info, "stop-kill"),
            nem(3, 35, OpType::Info, "start-clock-skew"),
            nem(4, 40, OpType::Info, "stop-partition"),
            nem(5, 50, OpType::Info, "start-pause"),
            nem(6, 55, OpType::Info, "heal-everything"),
        ];
        let faults = fault_windows(&ops, 100);
        let got: Vec<_> = faults
            .windows
            .iter()
            .map(|w| {
                (
                    w.kind.label().to_string(),
                    w.start_ns,
                    w.end_ns,
                    w.open_ended,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("kill".to_string(), 10, 30, false),
                ("partition".to_string(), 20, 40, false),
                ("clock-skew".to_string(), 35, 100, true),
                ("pause".to_string(), 50, 100, true),
            ]
        );
        assert_eq!(faults.events.len(), 1);
        assert_eq!(faults.events[0].f, "heal-everything");
    }

    #[test]
    fn invoke_and_completion_pairs_make_the_widest_window() {
        let ops = [
            nem(0, 10, OpType::Invoke, "start-pause"),
            nem(1, 12, OpType::Info, "start-pause"),
            nem(2, 30, OpType::Invoke, "stop-pause"),
            nem(3, 33, OpType::Info, "stop-pause"),
        ];
        let faults = fault_windows(&ops, 100);
        assert_eq!(faults.windows.len(), 1);
        assert_eq!(
            (faults.windows[0].start_ns, faults.windows[0].end_ns),
            (10, 33)
        );
    }
}
