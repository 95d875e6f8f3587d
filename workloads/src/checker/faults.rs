//! Fault windows: when each fault was in effect on which nodes, from the nemesis ops.
//!
//! Every `start-X` is paired with its own `stop-X`, per node and per fault, so overlapping
//! faults keep their own windows: a `start-kill` of n1 and n2, then `stop-kill` of n1, then
//! `stop-kill` of n2 gives n1 and n2 separate windows that end at different times. Partitions
//! are whole-cluster states (a new grudge replaces the old one), so a partition window ends at
//! the next `start-partition` or `stop-partition`. A `stop-X` whose value is `null` (or that
//! names no node) ends every open window of fault `X`. A window never closed ends at the last
//! op of the history and is marked `open`.
//!
//! A `start-X` that carries an `error` failed on the nodes the error names (`"n2: ..."`); those
//! nodes get no window, and the failure is counted. Windows of one start that end at the same
//! time are merged into one window naming all their nodes. This list, written to
//! `stats.fault_windows`, is what every plot and table of the report draws.
//!
//! Ops are read with [`NemesisOp::parse`], which names the fault and the nodes of every op,
//! the harness's and other tools' alike (`crate::nemesis`).

use crate::history::{Op, Process};
use crate::nemesis::{Fault, NemesisOp, OpName};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One fault in effect on some nodes for a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The `X` of `start-X`: `kill`, `pause`, `partition`, ... (written by its name).
    pub kind: Fault,
    /// The nodes it was in effect on (for a partition: every node the grudge names).
    pub nodes: Vec<String>,
    /// Seconds since the test started (history time).
    pub start_s: f64,
    /// Seconds since the test started; the end of the history when `open`.
    pub end_s: f64,
    /// True when no `stop-X` ended it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// Index of the `start-X` op.
    pub start_op: u64,
}

/// Collects fault windows while a history streams by.
#[derive(Debug, Default)]
pub struct FaultTracker {
    /// Open windows: (fault, node) -> (start time ns, start op index).
    open: BTreeMap<(Fault, String), (u64, u64)>,
    /// Closed windows: (start op, fault, start ns, end ns, node), merged at the end.
    closed: Vec<(u64, Fault, u64, u64, String)>,
    /// Successful `start-X` ops by fault name (as results.json lists them).
    injected: BTreeMap<String, u64>,
    /// `start-X` ops that failed on at least one node.
    failed: u64,
    /// Time of the last op seen, ns.
    last_ns: u64,
    /// The most broker nodes under one fault at once (a node is under `power-loss` from its
    /// `start-power-loss` until the `stop-power-loss` that boots it).
    most_at_once: BTreeMap<Fault, usize>,
}

/// Whether a node name is the controller's (`c1`, as the harness names it).
fn is_controller(node: &str) -> bool {
    node.strip_prefix('c')
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `error` (the nodes' errors joined, each `"node: message"`) names `node`.
fn failed_on(error: &str, node: &str) -> bool {
    error
        .split("; ")
        .any(|part| part.strip_prefix(node).is_some_and(|r| r.starts_with(':')))
}

impl FaultTracker {
    /// Feeds one op (client ops only move the clock).
    pub fn observe(&mut self, op: &Op) {
        self.last_ns = self.last_ns.max(op.time);
        if op.process != Process::Nemesis {
            return;
        }
        let nemesis = NemesisOp::parse(&op.f, &op.value);
        match nemesis.name() {
            Some(OpName::Start(fault)) => self.start(fault, nemesis.nodes(), op),
            Some(OpName::Stop(fault)) => {
                let nodes = nemesis.nodes();
                // A partition is one state of the whole cluster: its stop ends it everywhere.
                let all = nodes.is_empty() || fault == Fault::Partition;
                self.stop(&fault, (!all).then_some(&nodes), op.time);
            }
            Some(OpName::Wait(_)) | None => {}
        }
    }

    fn start(&mut self, fault: Fault, mut nodes: Vec<String>, op: &Op) {
        if let Some(error) = &op.error {
            self.failed += 1;
            let named: Vec<String> = nodes
                .iter()
                .filter(|n| failed_on(error, n))
                .cloned()
                .collect();
            // An error that names no node failed as a whole.
            if named.is_empty() {
                return;
            }
            nodes.retain(|n| !named.contains(n));
        }
        if nodes.is_empty() {
            return;
        }
        if fault == Fault::Partition {
            self.stop(&fault, None, op.time);
        }
        *self.injected.entry(fault.name().to_string()).or_default() += 1;
        for node in nodes {
            // A second start on a node already under this fault keeps the first window.
            self.open
                .entry((fault.clone(), node))
                .or_insert((op.time, op.index));
        }
        // The controller (`c1`) holds no records, so only brokers count.
        let brokers = self
            .open
            .keys()
            .filter(|(f, n)| *f == fault && !is_controller(n))
            .count();
        let most = self.most_at_once.entry(fault).or_default();
        *most = (*most).max(brokers);
    }

    /// The most broker nodes that were under `fault` at the same time (0 if none).
    pub fn most_at_once(&self, fault: &Fault) -> usize {
        self.most_at_once.get(fault).copied().unwrap_or(0)
    }

    fn stop(&mut self, fault: &Fault, nodes: Option<&Vec<String>>, time_ns: u64) {
        let ending: Vec<(Fault, String)> = self
            .open
            .keys()
            .filter(|(f, n)| f == fault && nodes.is_none_or(|ns| ns.contains(n)))
            .cloned()
            .collect();
        for key in ending {
            let (start_ns, start_op) = self.open.remove(&key).expect("listed above");
            self.closed
                .push((start_op, key.0, start_ns, time_ns, key.1));
        }
    }

    /// Successful starts by fault name.
    pub fn injected(&self) -> &BTreeMap<String, u64> {
        &self.injected
    }

    /// `start-X` ops that failed on some node.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Every window, sorted by start; windows of one start that end together are merged.
    pub fn windows(&self) -> Vec<FaultWindow> {
        let secs = |ns: u64| ns as f64 / 1e9;
        // (start op, fault, start, end, open) -> nodes
        let mut merged: BTreeMap<(u64, Fault, u64, u64, bool), Vec<String>> = BTreeMap::new();
        for (start_op, kind, start, end, node) in &self.closed {
            merged
                .entry((*start_op, kind.clone(), *start, *end, false))
                .or_default()
                .push(node.clone());
        }
        for ((kind, node), (start, start_op)) in &self.open {
            merged
                .entry((
                    *start_op,
                    kind.clone(),
                    *start,
                    self.last_ns.max(*start),
                    true,
                ))
                .or_default()
                .push(node.clone());
        }
        let mut windows: Vec<FaultWindow> = merged
            .into_iter()
            .map(|((start_op, kind, start, end, open), mut nodes)| {
                nodes.sort();
                FaultWindow {
                    kind,
                    nodes,
                    start_s: secs(start),
                    end_s: secs(end),
                    open,
                    start_op,
                }
            })
            .collect();
        windows.sort_by(|a, b| {
            a.start_s
                .total_cmp(&b.start_s)
                .then(a.end_s.total_cmp(&b.end_s))
                .then(a.kind.name().cmp(b.kind.name()))
        });
        windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::OpType;
    use serde_json::{json, Value};

    fn nemesis(index: u64, time_s: u64, f: &str, value: Value, error: Option<&str>) -> Op {
        Op {
            index,
            time: time_s * 1_000_000_000,
            process: Process::Nemesis,
            kind: OpType::Info,
            f: f.to_string(),
            value,
            node: None,
            high_watermarks: None,
            log_start_offsets: None,
            isr_sizes: None,
            error: error.map(String::from),
            r#final: false,
            txn_end: None,
        }
    }

    fn track(ops: &[Op]) -> FaultTracker {
        let mut t = FaultTracker::default();
        ops.iter().for_each(|op| t.observe(op));
        t
    }

    #[test]
    fn overlapping_kills_pauses_and_partitions_keep_their_own_windows() {
        let t = track(&[
            nemesis(0, 1, "start-kill", json!(["n1"]), None),
            // A second kill while the first is open (the whole ISR down).
            nemesis(1, 2, "start-kill", json!(["n2", "n3"]), None),
            nemesis(2, 3, "start-pause", json!(["n4"]), None),
            nemesis(3, 4, "stop-kill", json!(["n2"]), None),
            nemesis(
                4,
                5,
                "start-partition",
                json!({"n1": ["n2"], "n2": ["n1"], "n3": []}),
                None,
            ),
            // A new grudge replaces the old one.
            nemesis(5, 6, "start-partition", json!({"n3": ["n4"]}), None),
            nemesis(6, 7, "stop-kill", json!(null), None),
            nemesis(7, 8, "stop-partition", json!(null), None),
            nemesis(8, 9, "stop-pause", json!(["n4"]), None),
        ]);
        let got: Vec<(String, Vec<String>, f64, f64)> = t
            .windows()
            .into_iter()
            .map(|w| (w.kind.name().to_string(), w.nodes, w.start_s, w.end_s))
            .collect();
        let w = |k: &str, n: &[&str], s: f64, e: f64| {
            (
                k.to_string(),
                n.iter().map(|x| x.to_string()).collect(),
                s,
                e,
            )
        };
        assert_eq!(
            got,
            vec![
                w("kill", &["n1"], 1.0, 7.0),
                w("kill", &["n2"], 2.0, 4.0),
                w("kill", &["n3"], 2.0, 7.0),
                w("pause", &["n4"], 3.0, 9.0),
                w("partition", &["n1", "n2"], 5.0, 6.0),
                w("partition", &["n3", "n4"], 6.0, 8.0),
            ]
        );
        assert_eq!(t.injected()["kill"], 2);
        assert_eq!(t.injected()["partition"], 2);
        assert_eq!(t.failed(), 0);
    }

    #[test]
    fn failed_starts_open_no_window_on_the_failed_nodes_and_unclosed_ones_stay_open() {
        let t = track(&[
            nemesis(
                0,
                1,
                "start-kill",
                json!(["n1", "n2"]),
                Some("n2: no such process"),
            ),
            nemesis(
                1,
                2,
                "start-pause",
                json!(["n3"]),
                Some("cluster call panicked"),
            ),
            nemesis(2, 5, "start-partition", json!({"n1": ["n3"]}), None),
        ]);
        let windows = t.windows();
        assert_eq!(windows.len(), 2, "{windows:?}");
        assert_eq!(
            (windows[0].kind.name(), windows[0].nodes.as_slice()),
            ("kill", &["n1".to_string()][..])
        );
        assert!(windows[0].open && windows[0].end_s == 5.0);
        assert_eq!(windows[1].nodes, vec!["n1", "n3"]);
        assert_eq!(t.failed(), 2);
        assert_eq!(t.injected().get("pause"), None);
    }
}
