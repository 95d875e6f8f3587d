//! Transactions: what Kafka's transactions promise, and the dependency cycles they do not
//! rule out.
//!
//! # Layout
//! - `mod.rs` (this file): [`Txns`], the streaming record of every `send`, `poll` and `txn`
//!   op (what it wrote, the last offset it read per key, whose records it read), and
//!   [`finish`], which runs the passes below and returns what the verdict needs.
//! - `reads`: `precommitted-read` and `intermediate-read`, from the records alone.
//! - `graph`: the dependency graph between ops, ww / wr / rw edges derived from each key's
//!   offset order, with one witness (key and values) per edge.
//! - `cycles`: Tarjan's strongly connected components and the shortest cycle of each kind
//!   per component: `G0`, `G1c`, `G-single`, `G2`.
//! - `gen`: a generator of correct transactional histories (tests and benchmarks), public
//!   as `checker::txn_gen`.
//!
//! The analysis runs when the history has a `txn` op or the settings say the producers were
//! transactional. Every op is a vertex as in Jepsen's Kafka checker (a `send` or `poll` op
//! is a transaction of sends or polls only); `fail` ops (aborted) are left out of the graph,
//! since they committed nothing. Facts and promises stay apart (see `settings`): cycles with
//! read-write edges are facts Kafka does not promise away; `aborted-read` (G1a, in the
//! value pass), `precommitted-read` and write-read-only `G1c` cycles break the promise of
//! read_committed consumers.

mod cycles;
pub mod gen;
mod graph;
mod reads;

use super::found::Findings;
use super::fxhash::FxHashMap;
use super::{Checker, NONE};
use crate::history::{Op, OpType, Val};
use serde_json::{json, Value};

/// The function of a recorded op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Function {
    /// Sends only.
    Send,
    /// Polls only.
    Poll,
    /// A transaction: sends and polls committed (ok) or aborted (fail) as one.
    Txn,
}

impl Function {
    fn parse(f: &str) -> Option<Function> {
        match f {
            "send" => Some(Function::Send),
            "poll" => Some(Function::Poll),
            "txn" => Some(Function::Txn),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Function::Send => "send",
            Function::Poll => "poll",
            Function::Txn => "txn",
        }
    }
}

/// How a recorded op ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// No completion (yet): indeterminate at the end of the history.
    Pending,
    /// Committed.
    Ok,
    /// Aborted: certainly no effect.
    Fail,
    /// Indeterminate.
    Info,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Pending => "pending",
            Ended::Ok => "ok",
            Ended::Fail => "fail",
            Ended::Info => "info",
        }
    }
}

/// A range of one of [`Txns`]'s arenas.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: usize,
    len: u32,
}

impl Span {
    fn of<T>(self, arena: &[T]) -> &[T] {
        &arena[self.start..self.start + self.len as usize]
    }
}

/// One recorded op: small and fixed-size, its lists in the arenas of [`Txns`].
#[derive(Debug, Clone, Copy)]
pub(super) struct TxnOp {
    /// Index of the invoke: the op's identity while it is pending.
    pub invoke_op: u64,
    /// Index of the completion, [`NONE`] while pending.
    pub complete_op: u64,
    /// The client process.
    pub process: u64,
    /// send, poll or txn.
    pub f: Function,
    /// How it ended.
    pub ended: Ended,
    /// Its sends, `(key, value)` in the order of the invoke.
    writes: Span,
    /// Per key it read, the highest offset it read there and the value at it.
    last_reads: Span,
    /// Per op whose records it read, one `(writer's invoke index, key, value)`.
    read_from: Span,
}

impl TxnOp {
    /// The op's index as Jepsen names ops: its completion, or its invoke while pending.
    pub fn index(&self) -> u64 {
        if self.complete_op == NONE {
            self.invoke_op
        } else {
            self.complete_op
        }
    }

    /// True when the op is a vertex of the dependency graph: it was not aborted.
    pub fn in_graph(&self) -> bool {
        self.ended != Ended::Fail
    }

    /// The op as a cycle or example shows it.
    fn describe(&self) -> Value {
        json!({"op": self.index(), "invoke_op": self.invoke_op, "process": self.process,
               "f": self.f.as_str(), "type": self.ended.as_str()})
    }
}

/// The completion being observed: its op and what its reads showed so far.
#[derive(Debug, Default)]
struct Current {
    /// Position in [`Txns::ops`].
    op: usize,
    /// Per key, the highest offset read and its value.
    last_reads: Vec<(u32, u64, Val)>,
    /// Writers read from, one `(invoke index, key, value)` per value read.
    read_from: Vec<(u64, u32, Val)>,
}

/// The streaming record of every `send`, `poll` and `txn` op, for the passes of [`finish`].
#[derive(Debug, Default)]
pub struct Txns {
    /// False until the settings or the history say transactions are in play: a plain
    /// history pays nothing for this record.
    enabled: bool,
    /// The op index at which recording began, when it began at the first `txn` op rather
    /// than the history's first op (a streamed history whose settings did not say).
    enabled_at_op: Option<u64>,
    /// Every recorded op, in invoke order.
    ops: Vec<TxnOp>,
    /// Invoke index -> position in `ops`: how a value's writer (known by its send's invoke)
    /// becomes a vertex.
    by_invoke: FxHashMap<u64, usize>,
    /// Arena of every op's sends.
    writes: Vec<(u32, Val)>,
    /// Arena of every op's last reads per key.
    last_reads: Vec<(u32, u64, Val)>,
    /// Arena of every op's writers read from.
    read_from: Vec<(u64, u32, Val)>,
    /// The completion being observed, between [`Txns::begin`] and [`Txns::end`].
    current: Option<Current>,
    /// Counts of `txn` completions: ok, fail, info.
    txn_outcomes: [u64; 3],
}

impl Txns {
    /// Starts recording (before the first op, when the settings or a scan of the history
    /// show transactions).
    pub fn enable(&mut self) {
        self.enabled = true;
    }

    /// An invoke of `op`, whose sends (interned key, value) are `sends`.
    pub(super) fn invoke(&mut self, process: u64, op: &Op, sends: &[(u32, Val)]) {
        let Some(f) = Function::parse(&op.f) else {
            return;
        };
        if !self.enabled && f == Function::Txn {
            // A streamed history whose settings did not say: record from here on.
            self.enabled = true;
            self.enabled_at_op = Some(op.index);
        }
        if !self.enabled {
            return;
        }
        let writes = Span {
            start: self.writes.len(),
            len: sends.len() as u32,
        };
        self.writes.extend_from_slice(sends);
        self.by_invoke.insert(op.index, self.ops.len());
        self.ops.push(TxnOp {
            invoke_op: op.index,
            complete_op: NONE,
            process,
            f,
            ended: Ended::Pending,
            writes,
            last_reads: Span::default(),
            read_from: Span::default(),
        });
    }

    /// The completion `op` of the op invoked at `invoke_op` begins; its reads follow.
    pub(super) fn begin(&mut self, invoke_op: u64, op: &Op) {
        if op.f == "txn" {
            match op.kind {
                OpType::Ok => self.txn_outcomes[0] += 1,
                OpType::Fail => self.txn_outcomes[1] += 1,
                _ => self.txn_outcomes[2] += 1,
            }
        }
        let Some(&pos) = self.by_invoke.get(&invoke_op) else {
            return;
        };
        let rec = &mut self.ops[pos];
        if rec.complete_op != NONE {
            return;
        }
        rec.complete_op = op.index;
        rec.ended = match op.kind {
            OpType::Ok => Ended::Ok,
            OpType::Fail => Ended::Fail,
            _ => Ended::Info,
        };
        self.current = Some(Current {
            op: pos,
            ..Current::default()
        });
    }

    /// The completion being observed read `value` at `offset` of `key`; its send was
    /// invoked at `writer_invoke` ([`NONE`] if not yet). A transaction that reads its own
    /// send read it before it committed: `precommitted-read`.
    pub(super) fn read(
        &mut self,
        key: u32,
        key_name: &str,
        offset: u64,
        value: Val,
        writer_invoke: u64,
        findings: &mut Findings,
    ) {
        let Some(cur) = self.current.as_mut() else {
            return;
        };
        match cur.last_reads.iter_mut().find(|(k, _, _)| *k == key) {
            Some(last) if offset > last.1 => *last = (key, offset, value),
            Some(_) => {}
            None => cur.last_reads.push((key, offset, value)),
        }
        if writer_invoke == NONE {
            return;
        }
        let rec = &self.ops[cur.op];
        if writer_invoke == rec.invoke_op {
            if rec.f == Function::Txn {
                let op = rec.describe();
                findings.add("precommitted-read", true, || {
                    json!({"key": key_name, "value": value, "offset": offset, "op": op,
                           "own_write": true})
                });
            }
            return;
        }
        cur.read_from.push((writer_invoke, key, value));
    }

    /// The completion being observed has no more reads.
    pub(super) fn end(&mut self) {
        let Some(mut cur) = self.current.take() else {
            return;
        };
        // One witness per writer is enough for an edge: keep the first value read from each.
        cur.read_from.sort_by_key(|&(w, _, _)| w);
        cur.read_from.dedup_by_key(|&mut (w, _, _)| w);
        let rec = &mut self.ops[cur.op];
        rec.last_reads = Span {
            start: self.last_reads.len(),
            len: cur.last_reads.len() as u32,
        };
        self.last_reads.extend_from_slice(&cur.last_reads);
        rec.read_from = Span {
            start: self.read_from.len(),
            len: cur.read_from.len() as u32,
        };
        self.read_from.extend_from_slice(&cur.read_from);
    }

    /// The sends of `op`.
    pub(super) fn writes_of(&self, op: &TxnOp) -> &[(u32, Val)] {
        op.writes.of(&self.writes)
    }

    /// The last read per key of `op`: `(key, offset, value)`.
    pub(super) fn last_reads_of(&self, op: &TxnOp) -> &[(u32, u64, Val)] {
        op.last_reads.of(&self.last_reads)
    }

    /// The writers `op` read from: `(writer's invoke index, key, value)`.
    pub(super) fn read_from_of(&self, op: &TxnOp) -> &[(u64, u32, Val)] {
        op.read_from.of(&self.read_from)
    }

    /// The position in `ops` of the op whose send was invoked at `invoke_op`.
    pub(super) fn position(&self, invoke_op: u64) -> Option<usize> {
        self.by_invoke.get(&invoke_op).copied()
    }

    /// The recorded ops.
    pub(super) fn ops(&self) -> &[TxnOp] {
        &self.ops
    }
}

/// What the verdict needs from the transaction analysis.
#[derive(Debug, Default)]
pub(super) struct TxnVerdicts {
    /// `G1c` cycles of write-read edges alone (the ones read_committed rules out).
    pub g1c_wr_only: u64,
    /// `stats.transactions`, when the analysis ran.
    pub stats: Option<Value>,
}

/// Runs the transaction passes over what `c` recorded, adding their findings.
pub(super) fn finish(c: &Checker, findings: &mut Findings) -> TxnVerdicts {
    let txns = &c.txns;
    if !txns.enabled {
        return TxnVerdicts::default();
    }
    let key_names: Vec<&str> = c.keys.iter().map(|k| k.name.as_str()).collect();
    reads::precommitted_before_invoke(c, &key_names, findings);
    reads::intermediate(c, &key_names, findings);
    let g = graph::build(c);
    let found = cycles::search(&g);
    let mut g1c_wr_only = 0;
    for cycle in &found.cycles {
        if cycle.name == "G1c" && cycle.wr_only {
            g1c_wr_only += 1;
        }
        let example = cycles::describe(cycle, txns, &key_names);
        findings.add(cycle.name, true, || example);
    }
    let [committed, aborted, unknown] = txns.txn_outcomes;
    let stats = json!({
        "txns": {"committed": committed, "aborted": aborted, "unknown": unknown},
        "recorded_ops": txns.ops.len(),
        "recorded_from_op": txns.enabled_at_op,
        "graph": {
            "vertices": g.vertex_count(),
            "edges": {"ww": g.edge_count(graph::WW), "wr": g.edge_count(graph::WR),
                      "rw": g.edge_count(graph::RW)},
            "components": found.components,
            "largest_component": found.largest_component,
        },
        "cycles": found.by_name(),
    });
    TxnVerdicts {
        g1c_wr_only,
        stats: Some(stats),
    }
}
