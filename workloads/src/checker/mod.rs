//! The checkers: from a history (and the run's settings) to a verdict with anomalies.
//!
//! # Layout
//! - `settings`: [`CheckSettings`] and the policy deciding which anomalies break the promise.
//! - `order`: per-process order (`poll-skip`, `nonmonotonic-*`, `int-*`).
//! - `watermark`: `hw-regression`.
//! - `group`: the consumer-group workload (`group-split-ownership`, `commit-regression`,
//!   `group-undelivered`).
//! - `divergence`: `replica-divergence`, every replica's own log compared offset by offset
//!   (from `replicas.jsonl`, not the history).
//! - `values`: the end-of-history passes over every value and offset (`lost-write`, `unseen`,
//!   `duplicate`, `aborted-read`, `unexpected`, skip resolution, regression classes).
//! - `txn`: transactions: `precommitted-read`, `intermediate-read` and the dependency cycles
//!   (`G0`, `G1c`, `G-single`, `G2`) over ww / wr / rw edges derived from offsets.
//! - `found`: bounded collections of examples.
//! - `gen`: a generator of large, correct histories (benchmarks and property tests).
//!
//! [`Checker`] is streaming: `observe` each op in history order, then `finish`. It keeps one
//! small record per sent value and per known offset, never the ops themselves, so a history
//! of millions of ops is checked without holding it. [`check`] and [`check_file`] are built on
//! it. Definitions of every anomaly: `docs/checkers.md`.

mod divergence;
mod faults;
mod found;
mod fxhash;
pub mod gen;
mod group;
mod order;
mod settings;
mod txn;
mod values;
mod watermark;

pub use faults::{FaultTracker, FaultWindow};
pub use settings::{Acks, CheckSettings, IsolationLevel, Judgement};
pub use txn::gen as txn_gen;

use crate::history::{Op, OpType, Process, Val};
use crate::results::CheckResults;
use found::Findings;
use fxhash::FxHashMap;
use order::{Order, Stream};
use serde_json::{json, Map, Value};
use std::io::BufRead;
use std::path::Path;
use watermark::Watermarks;

/// "No value": offsets and op indexes are u64 and this one never occurs in a real history.
const NONE: u64 = u64::MAX;

/// At most this many history problems (malformed ops, ...) are kept as messages.
const PROBLEMS_MAX: usize = 20;

/// At most this many points in `stats.unseen_series`; when exceeded, every other point is
/// dropped and the sampling interval doubles.
const UNSEEN_POINTS_MAX: usize = 2000;

/// The first sampling interval of `stats.unseen_series`: 100 ms.
const UNSEEN_INTERVAL_NS: u64 = 100_000_000;

/// Checks a whole history held in memory.
pub fn check(history: &[Op], settings: &CheckSettings) -> CheckResults {
    let mut checker = Checker::new(settings.clone());
    if history.iter().any(|op| op.f == "txn") {
        checker.txns.enable();
    }
    for op in history {
        checker.observe(op);
    }
    checker.finish()
}

/// Checks a JSON Lines history file, streaming it. A line that is not a valid op is counted
/// as a problem (the verdict becomes at best `unknown`); only I/O errors fail.
pub fn check_file(
    path: impl AsRef<Path>,
    settings: &CheckSettings,
) -> std::io::Result<CheckResults> {
    let path = path.as_ref();
    let mut checker = Checker::new(settings.clone());
    // The transaction analysis records every op from the first one on; a file is read once
    // ahead to learn whether it holds transactions, so a plain history pays nothing for it.
    if !settings.transactional && has_txn_ops(path)? {
        checker.txns.enable();
    }
    let file = std::fs::File::open(path)?;
    feed(checker, std::io::BufReader::with_capacity(1 << 20, file))
}

/// Checks a history file (as [`check_file`]) and compares the replicas' own logs of
/// `replicas` (`replicas.jsonl`, [`crate::replicas`]) for `replica-divergence`; without the
/// file the results say why nothing was compared. A line of it that does not parse fails.
pub fn check_file_with_replicas(
    path: impl AsRef<Path>,
    replicas: &Path,
    settings: &CheckSettings,
) -> std::io::Result<CheckResults> {
    let path = path.as_ref();
    let mut checker = Checker::new(settings.clone());
    if !settings.transactional && has_txn_ops(path)? {
        checker.txns.enable();
    }
    if replicas.is_file() {
        crate::replicas::read_file(replicas, |p| checker.observe_replicas(&p))?;
    } else {
        checker.replicas_not_compared(format!("no {} in the run", replicas.display()));
    }
    let file = std::fs::File::open(path)?;
    feed(checker, std::io::BufReader::with_capacity(1 << 20, file))
}

/// True when some line of the JSON Lines file at `path` is an op of `f` `txn` (a scan of the
/// bytes, without parsing).
fn has_txn_ops(path: &Path) -> std::io::Result<bool> {
    let mut reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(false);
        }
        const TXN: &[u8] = br#""f":"txn""#;
        if line.windows(TXN.len()).any(|w| w == TXN) {
            return Ok(true);
        }
    }
}

/// Checks a JSON Lines history from any reader, streaming it (see [`check_file`]). The
/// transaction analysis records ops from the first `txn` op on, or from the start when
/// `settings.transactional` is set (`stats.transactions.recorded_from_op` says which).
pub fn check_reader(
    reader: impl BufRead,
    settings: &CheckSettings,
) -> std::io::Result<CheckResults> {
    feed(Checker::new(settings.clone()), reader)
}

/// Feeds every op of a JSON Lines history to `checker`, then finishes it.
fn feed(mut checker: Checker, mut reader: impl BufRead) -> std::io::Result<CheckResults> {
    let mut line = Vec::new();
    let mut line_number = 0u64;
    loop {
        line.clear();
        // Bytes, not a String: a line that is not UTF-8 (a torn or binary tail) is one bad
        // line like any other, named by its number, not an error that ends the whole check.
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        line_number += 1;
        let text = match std::str::from_utf8(&line) {
            Ok(text) => text,
            Err(e) => {
                checker.problem(format!("line {line_number}: not UTF-8 text ({e})"));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Op>(text) {
            Ok(op) => checker.observe(&op),
            Err(e) => checker.problem(format!("line {line_number}: {e}")),
        }
    }
    Ok(checker.finish())
}

/// What became of a sent value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Never invoked as a send (only read, or only seen in a completion).
    NotSent,
    /// Invoked, no completion yet (or none ever: the history ended).
    Pending,
    /// Acknowledged.
    Ok,
    /// Certainly not written.
    Fail,
    /// Indeterminate.
    Info,
}

/// Everything the checker remembers about one value. One per sent or read value, so it is
/// kept small: offsets and op indexes use [`NONE`] instead of `Option`.
#[derive(Debug, Clone, Copy)]
struct ValueState {
    /// Interned key it was sent to (or first read from).
    key: u32,
    /// What became of its send.
    outcome: Outcome,
    /// Index of the send's invoke.
    invoke_op: u64,
    /// Index of the ok completion.
    ack_op: u64,
    /// Offset the ok completion reported.
    ack_offset: u64,
    /// Lowest and highest offset at which it was acknowledged or read ("first and last
    /// position"): they differ exactly when the value is a duplicate.
    min_offset: u64,
    max_offset: u64,
    /// First op of any completion type that read it, and the offset it was read at.
    first_read_op: u64,
    first_read_offset: u64,
    /// Key it was first read from (to spot a value read on another key than sent to).
    first_read_key: u32,
    /// Read by an ok op.
    read_ok: bool,
    /// Read by an ok final read.
    read_final: bool,
    /// Read by an ok poll of a consumer-group member.
    read_group: bool,
    /// Sent by a `txn` op: a read of it after an abort, or before the commit, is judged by
    /// the consumers' isolation level.
    by_txn: bool,
    /// Counted in the running unseen count (acknowledged before any ok read saw it).
    unseen_counted: bool,
}

impl ValueState {
    fn new(key: u32) -> ValueState {
        ValueState {
            key,
            outcome: Outcome::NotSent,
            invoke_op: NONE,
            ack_op: NONE,
            ack_offset: NONE,
            min_offset: NONE,
            max_offset: NONE,
            first_read_op: NONE,
            first_read_offset: NONE,
            first_read_key: u32::MAX,
            read_ok: false,
            read_final: false,
            read_group: false,
            by_txn: false,
            unseen_counted: false,
        }
    }

    fn note_offset(&mut self, offset: u64) {
        if self.min_offset == NONE || offset < self.min_offset {
            self.min_offset = offset;
        }
        if self.max_offset == NONE || offset > self.max_offset {
            self.max_offset = offset;
        }
    }
}

/// Everything the checker remembers about one key.
#[derive(Debug, Default)]
struct KeyState {
    /// `topic/partition`.
    name: String,
    /// The first value seen at each offset, and the op that showed it. This is the offset map:
    /// reads of every completion type, ok sends and proven info sends feed it.
    at_offset: FxHashMap<u64, (Val, u64)>,
    /// Offsets already reported as inconsistent, so each is reported once.
    conflicted: Vec<u64>,
    /// Running maximum offset returned by ok reads (and final high watermark - 1), as steps
    /// (op index, max offset): finds the first read that proves a loss.
    reach: Vec<(u64, u64)>,
    /// Highest high watermark reported by an ok final read.
    final_hw: Option<u64>,
    /// Highest log start offset reported by an ok final read: records below it may have been
    /// deleted by retention, so their absence proves nothing.
    final_log_start: u64,
    /// Records returned by ok final reads.
    final_records: u64,
    /// True when some ok final read covered this key.
    final_read: bool,
    /// Highest offset returned by an ok final read. Final reads page through the log from its
    /// start, so every offset between `final_log_start` and this one was read at the end.
    final_reach: Option<u64>,
    /// Lowest offset returned by an ok final read: where the final reads began.
    final_first: Option<u64>,
    /// Values the final reads returned at offsets where another value was seen first (so
    /// the offset map does not hold them): what now stands where a lost record stood.
    final_at: FxHashMap<u64, Val>,
    /// True when an ok final read reported this key's log start offset: the final reads then
    /// began at the log start, so they cover every offset from `final_log_start` on.
    final_log_start_known: bool,
    /// The ok final reads that reported this key's highest high watermark (under
    /// read_committed: the last stable offset): where the final reads stood at the end, and
    /// for how long (`hanging-transaction`).
    final_stall: Option<FinalStall>,
}

/// Ok final reads of one key that all reported the same, highest, watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FinalStall {
    /// The watermark they reported.
    pub offset: u64,
    /// Time of the first of them, and of the last (ns since the test started).
    pub since_ns: u64,
    pub last_ns: u64,
    /// How many there were.
    pub reads: u64,
}

impl KeyState {
    fn extend_reach(&mut self, op: u64, offset: u64) {
        if self.reach.last().is_none_or(|&(_, max)| offset > max) {
            self.reach.push((op, offset));
        }
    }

    fn reach_max(&self) -> Option<u64> {
        self.reach.last().map(|&(_, max)| max)
    }

    /// The first ok read whose reach is at or beyond `offset`.
    fn proving_read(&self, offset: u64) -> Option<u64> {
        let i = self.reach.partition_point(|&(_, max)| max < offset);
        self.reach.get(i).map(|&(op, _)| op)
    }
}

/// An invoke waiting for its completion.
#[derive(Debug, Default)]
struct Pending {
    /// Index of the invoke.
    invoke_op: u64,
    /// Time of the invoke, in nanoseconds since the test started.
    invoke_time_ns: u64,
    /// Values the invoke sends, with their interned keys.
    sends: Vec<(u32, Val)>,
}

/// Counters for `stats`.
#[derive(Debug, Default)]
struct Counters {
    ops: u64,
    /// Per `f`: counts of invoke, ok, fail, info.
    by_f: Vec<(String, [u64; 4])>,
    ok_polls: u64,
    records_read: u64,
    final_ops: u64,
    final_ok: u64,
    last_time_ns: u64,
}

impl Counters {
    fn count(&mut self, f: &str, kind: OpType) {
        self.ops += 1;
        let slot = match kind {
            OpType::Invoke => 0,
            OpType::Ok => 1,
            OpType::Fail => 2,
            OpType::Info => 3,
        };
        match self.by_f.iter_mut().find(|(name, _)| name == f) {
            Some((_, counts)) => counts[slot] += 1,
            None => {
                let mut counts = [0; 4];
                counts[slot] = 1;
                self.by_f.push((f.to_string(), counts));
            }
        }
    }
}

/// The number of acknowledged values not yet read, sampled over time.
#[derive(Debug)]
struct UnseenSeries {
    count: i64,
    points: Vec<[u64; 2]>,
    interval_ns: u64,
    next_ns: u64,
}

impl UnseenSeries {
    fn new() -> UnseenSeries {
        UnseenSeries {
            count: 0,
            points: Vec::new(),
            interval_ns: UNSEEN_INTERVAL_NS,
            next_ns: 0,
        }
    }

    fn sample(&mut self, time_ns: u64) {
        if time_ns < self.next_ns {
            return;
        }
        self.points.push([time_ns, self.count.max(0) as u64]);
        self.next_ns = time_ns.saturating_add(self.interval_ns);
        if self.points.len() > UNSEEN_POINTS_MAX {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.interval_ns = self.interval_ns.saturating_mul(2);
        }
    }
}

/// The streaming checker: `observe` every op in history order, then `finish`.
#[derive(Debug)]
pub struct Checker {
    settings: CheckSettings,
    /// Key name -> interned id (index into `keys`).
    key_ids: std::collections::HashMap<String, u32>,
    keys: Vec<KeyState>,
    values: FxHashMap<Val, ValueState>,
    /// By client process number.
    pending: FxHashMap<u64, Pending>,
    order: Order,
    watermarks: Watermarks,
    groups: group::Groups,
    findings: Findings,
    counters: Counters,
    unseen: UnseenSeries,
    /// Offsets reported by info sends: they join the offset map at the end if proven.
    info_offsets: Vec<(u32, u64, Val, u64)>,
    /// Messages about ops that do not follow the format (bounded), and their count.
    problems: Vec<String>,
    problem_count: u64,
    /// The nemesis ops, paired into fault windows.
    faults: FaultTracker,
    /// Keys some send was invoked on: each must reach the floor of acknowledged writes.
    sent_keys: Vec<bool>,
    /// The record of send, poll and txn ops for the transaction analysis.
    txns: txn::Txns,
    /// What the comparison of the replicas' own logs found (`stats.replica_logs`); `None`
    /// when the run gave none to compare.
    replica_logs: Option<divergence::ReplicaStats>,
}

/// A micro-op borrowed from an op's JSON value, without allocating.
enum Micro<'a> {
    Send {
        key: &'a str,
        offset: Option<u64>,
        value: Val,
    },
    Poll(Option<&'a Map<String, Value>>),
    Commit {
        key: &'a str,
        offset: u64,
    },
}

fn parse_micro(v: &Value) -> Option<Micro<'_>> {
    let arr = v.as_array()?;
    match arr.first()?.as_str()? {
        "send" => {
            let key = arr.get(1)?.as_str()?;
            match arr.get(2)? {
                Value::Array(pair) if pair.len() == 2 => {
                    let offset = match &pair[0] {
                        Value::Null => None,
                        o => Some(o.as_u64()?),
                    };
                    Some(Micro::Send {
                        key,
                        offset,
                        value: pair[1].as_i64()?,
                    })
                }
                x => Some(Micro::Send {
                    key,
                    offset: None,
                    value: x.as_i64()?,
                }),
            }
        }
        "commit" => Some(Micro::Commit {
            key: arr.get(1)?.as_str()?,
            offset: arr.get(2)?.as_u64()?,
        }),
        "poll" => match arr.get(1) {
            None | Some(Value::Null) => Some(Micro::Poll(None)),
            Some(m) => Some(Micro::Poll(Some(m.as_object()?))),
        },
        _ => None,
    }
}

impl Checker {
    /// A checker judging by `settings`.
    pub fn new(settings: CheckSettings) -> Checker {
        let mut txns = txn::Txns::default();
        if settings.transactional {
            txns.enable();
        }
        Checker {
            findings: Findings::new(settings.examples_max),
            settings,
            key_ids: Default::default(),
            keys: Vec::new(),
            values: FxHashMap::default(),
            pending: FxHashMap::default(),
            order: Order::default(),
            watermarks: Watermarks::default(),
            groups: group::Groups::default(),
            counters: Counters::default(),
            unseen: UnseenSeries::new(),
            info_offsets: Vec::new(),
            problems: Vec::new(),
            problem_count: 0,
            faults: FaultTracker::default(),
            sent_keys: Vec::new(),
            txns,
            replica_logs: None,
        }
    }

    /// Compares every replica's own log of one partition (a line of `replicas.jsonl`),
    /// reporting `replica-divergence` below the high watermark.
    pub fn observe_replicas(&mut self, partition: &crate::replicas::PartitionReplicas) {
        let stats = self.replica_logs.get_or_insert_with(Default::default);
        divergence::compare(partition, &mut self.findings, stats);
    }

    /// Says why the replicas' logs were not compared (shown in `stats.replica_logs`).
    pub fn replicas_not_compared(&mut self, reason: String) {
        self.replica_logs = Some(divergence::ReplicaStats {
            unread_reason: Some(reason),
            ..Default::default()
        });
    }

    /// Records a problem with the history itself (the verdict can then be at best unknown).
    pub fn problem(&mut self, message: String) {
        self.problem_count += 1;
        if self.problems.len() < PROBLEMS_MAX {
            self.problems.push(message);
        }
    }

    fn key_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.key_ids.get(name) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.push(KeyState {
            name: name.to_string(),
            ..Default::default()
        });
        self.key_ids.insert(name.to_string(), id);
        id
    }

    /// Feeds one op, in history order.
    pub fn observe(&mut self, op: &Op) {
        self.counters.count(&op.f, op.kind);
        self.counters.last_time_ns = self.counters.last_time_ns.max(op.time);
        if op.r#final {
            self.counters.final_ops += 1;
        }
        self.faults.observe(op);
        if let Process::Client(process) = op.process {
            match op.kind {
                OpType::Invoke => self.invoke(process, op),
                _ => self.complete(process, op),
            }
        }
        self.unseen.sample(op.time);
    }

    fn invoke(&mut self, process: u64, op: &Op) {
        let mut pending = Pending {
            invoke_op: op.index,
            invoke_time_ns: op.time,
            sends: Vec::new(),
        };
        if let Some(micros) = op.value.as_array() {
            for m in micros {
                if let Some(Micro::Send { key, value, .. }) = parse_micro(m) {
                    let key = self.key_id(key);
                    let state = self
                        .values
                        .entry(value)
                        .or_insert_with(|| ValueState::new(key));
                    if state.invoke_op != NONE {
                        let first = state.invoke_op;
                        self.problem(format!(
                            "value {value} sent twice (ops {first} and {}); values must be unique",
                            op.index
                        ));
                        continue;
                    }
                    state.invoke_op = op.index;
                    state.key = key;
                    state.by_txn = op.f == "txn";
                    if self.sent_keys.len() <= key as usize {
                        self.sent_keys.resize(key as usize + 1, false);
                    }
                    self.sent_keys[key as usize] = true;
                    if state.outcome == Outcome::NotSent {
                        state.outcome = Outcome::Pending;
                    }
                    pending.sends.push((key, value));
                }
            }
        }
        self.txns.invoke(process, op, &pending.sends);
        if self.pending.insert(process, pending).is_some() {
            self.problem(format!(
                "process {process} invoked op {} while its previous op was still pending",
                op.index
            ));
        }
    }

    fn complete(&mut self, process: u64, op: &Op) {
        let pending = match self.pending.remove(&process) {
            Some(p) => p,
            None => {
                if op.f != "crash" {
                    self.problem(format!(
                        "op {} completes process {process}, which had no pending invoke",
                        op.index
                    ));
                }
                Pending {
                    invoke_op: op.index,
                    invoke_time_ns: op.time,
                    sends: Vec::new(),
                }
            }
        };
        let ok = op.kind == OpType::Ok;
        if op.r#final && ok {
            self.counters.final_ok += 1;
        }
        if op.f == "poll"
            && op.kind == OpType::Fail
            && op.error.as_deref() == Some("OFFSET_OUT_OF_RANGE")
        {
            // The consumer resets its positions, as auto.offset.reset=earliest does.
            self.order.reset_polls(process);
        }
        match op.f.as_str() {
            "assign" | "subscribe" => {
                if ok {
                    let keys: Vec<u32> = op
                        .value
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|k| self.key_id(k))
                        .collect();
                    self.order.reassign(process, &keys, op.f == "subscribe");
                }
            }
            "rebalance" => {
                self.groups
                    .rebalance_ended(op.kind, pending.invoke_time_ns, op.time);
                if ok {
                    self.complete_rebalance(process, op);
                }
            }
            _ => {
                self.txns.begin(pending.invoke_op, op);
                self.complete_micro_ops(process, op, &pending);
                self.txns.end();
            }
        }
        // Sends of the invoke that the completion did not mention take the completion's type.
        let outcome = match op.kind {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => Outcome::Info,
        };
        for &(_, value) in &pending.sends {
            if let Some(state) = self.values.get_mut(&value) {
                if state.outcome == Outcome::Pending {
                    self.settle(value, outcome, op.index);
                }
            }
        }
        if ok {
            if let Some(hws) = &op.high_watermarks {
                for (key, &hw) in hws {
                    let key = self.key_id(key);
                    self.watermarks
                        .observe(key, pending.invoke_op, op.index, hw);
                    if op.r#final {
                        let k = &mut self.keys[key as usize];
                        k.final_hw = Some(k.final_hw.map_or(hw, |h| h.max(hw)));
                        k.final_read = true;
                        match &mut k.final_stall {
                            Some(stall) if stall.offset == hw => {
                                stall.last_ns = op.time;
                                stall.reads += 1;
                            }
                            Some(stall) if stall.offset > hw => {}
                            _ => {
                                k.final_stall = Some(FinalStall {
                                    offset: hw,
                                    since_ns: op.time,
                                    last_ns: op.time,
                                    reads: 1,
                                })
                            }
                        }
                        if hw > 0 {
                            k.extend_reach(op.index, hw - 1);
                        }
                    }
                }
            }
            if op.r#final {
                if let Some(starts) = &op.log_start_offsets {
                    for (key, &start) in starts {
                        let key = self.key_id(key);
                        let k = &mut self.keys[key as usize];
                        k.final_log_start = k.final_log_start.max(start);
                        k.final_log_start_known = true;
                    }
                }
            }
        }
        if op.kind == OpType::Info {
            // The process never runs again; its worker continues under a new number.
            self.order.retire(process);
        }
    }

    fn complete_rebalance(&mut self, process: u64, op: &Op) {
        let Some(r) = group::parse_rebalance(&op.value) else {
            self.problem(format!(
                "op {}: rebalance value must be {{\"group\", \"generation\", \"assignment\"}}",
                op.index
            ));
            return;
        };
        let ids: Vec<u32> = r.assignment.iter().map(|k| self.key_id(k)).collect();
        let keys: Vec<(u32, &str)> = ids
            .iter()
            .map(|&id| (id, self.keys[id as usize].name.as_str()))
            .collect();
        self.groups.rebalance(
            process,
            r.group,
            r.generation,
            &keys,
            op.index,
            &mut self.findings,
        );
        // Eager rebalancing: every partition is revoked and positions restart from the
        // committed offsets, so nothing the process remembers carries over.
        self.order.reassign(process, &[], true);
    }

    /// Marks a pending value with its outcome, keeping the unseen count.
    fn settle(&mut self, value: Val, outcome: Outcome, op: u64) {
        let Some(state) = self.values.get_mut(&value) else {
            return;
        };
        state.outcome = outcome;
        if outcome == Outcome::Ok {
            state.ack_op = op;
            if !state.read_ok {
                state.unseen_counted = true;
                self.unseen.count += 1;
            }
        }
    }

    fn complete_micro_ops(&mut self, process: u64, op: &Op, pending: &Pending) {
        let Some(micros) = op.value.as_array() else {
            if op.kind == OpType::Ok {
                self.problem(format!("op {} value must be a list of micro-ops", op.index));
            }
            return;
        };
        for m in micros {
            match parse_micro(m) {
                Some(Micro::Send { key, offset, value }) => {
                    self.complete_send(process, op, pending, key, offset, value)
                }
                Some(Micro::Poll(Some(records))) => self.complete_poll(process, op, records),
                Some(Micro::Poll(None)) => {}
                Some(Micro::Commit { key, offset }) if op.kind == OpType::Ok => {
                    let key_id = self.key_id(key);
                    let name = &self.keys[key_id as usize].name;
                    let committed = self.groups.commit(
                        process,
                        key_id,
                        name,
                        offset,
                        pending.invoke_op,
                        op.index,
                        &mut self.findings,
                    );
                    if let Err(e) = committed {
                        self.problem(e);
                    }
                }
                Some(Micro::Commit { .. }) => {}
                None => self.problem(format!("op {}: malformed micro-op {m}", op.index)),
            }
        }
    }

    fn complete_send(
        &mut self,
        process: u64,
        op: &Op,
        pending: &Pending,
        key: &str,
        offset: Option<u64>,
        value: Val,
    ) {
        let key_id = self.key_id(key);
        let state = self
            .values
            .entry(value)
            .or_insert_with(|| ValueState::new(key_id));
        if state.invoke_op == NONE {
            // A completion mentioning a value no invoke sent: adopt it, but say so.
            state.invoke_op = pending.invoke_op;
            state.key = key_id;
            self.problem(format!(
                "op {} completes a send of {value} that its invoke did not send",
                op.index
            ));
        }
        let state = self.values.get_mut(&value).expect("inserted above");
        match op.kind {
            OpType::Ok => {
                if state.outcome == Outcome::Ok {
                    return;
                }
                state.ack_offset = offset.unwrap_or(NONE);
                self.settle(value, Outcome::Ok, op.index);
                self.check_ack_isr_size(op, key, offset, value);
                if let Some(offset) = offset {
                    self.note_offset(key_id, offset, value, op.index);
                    let name = &self.keys[key_id as usize].name;
                    self.order.observe(
                        process,
                        key_id,
                        name,
                        Stream::Send,
                        offset,
                        value,
                        op.index,
                        0,
                        &mut self.findings,
                    );
                }
            }
            OpType::Fail => self.settle(value, Outcome::Fail, op.index),
            _ => {
                self.settle(value, Outcome::Info, op.index);
                if let Some(offset) = offset {
                    self.info_offsets.push((key_id, offset, value, op.index));
                }
            }
        }
    }

    /// `under-min-isr-ack`: an acks=all acknowledgement whose leader reported counting fewer
    /// in-sync replicas than `min.insync.replicas` (the broker should have answered
    /// NOT_ENOUGH_REPLICAS). Loses nothing by itself, so no other check sees it.
    fn check_ack_isr_size(&mut self, op: &Op, key: &str, offset: Option<u64>, value: Val) {
        if self.settings.acks != Acks::All {
            return;
        }
        let Some(isr_size) = op.isr_sizes.as_ref().and_then(|m| m.get(key)).copied() else {
            return;
        };
        let min_insync_replicas = u64::from(self.settings.min_insync_replicas);
        if isr_size < min_insync_replicas {
            self.findings.add("under-min-isr-ack", true, || {
                json!({"key": key, "value": value, "offset": offset, "isr_size": isr_size,
                    "min_insync_replicas": min_insync_replicas, "ack_op": op.index, "node": op.node})
            });
        }
    }

    fn complete_poll(&mut self, process: u64, op: &Op, records: &Map<String, Value>) {
        let ok = op.kind == OpType::Ok;
        if ok {
            self.counters.ok_polls += 1;
        }
        for (key, pairs) in records {
            let key_id = self.key_id(key);
            let Some(pairs) = pairs.as_array() else {
                self.problem(format!(
                    "op {}: poll records of {key} must be a list",
                    op.index
                ));
                continue;
            };
            if op.r#final && ok {
                self.keys[key_id as usize].final_read = true;
            }
            let log_start = op
                .log_start_offsets
                .as_ref()
                .and_then(|m| m.get(key))
                .copied()
                .unwrap_or(0);
            for pair in pairs {
                let (Some(offset), Some(value)) = (
                    pair.get(0).and_then(Value::as_u64),
                    pair.get(1).and_then(Value::as_i64),
                ) else {
                    self.problem(format!("op {}: bad poll record {pair}", op.index));
                    continue;
                };
                self.read(process, key_id, offset, value, op, ok);
                if ok {
                    let name = &self.keys[key_id as usize].name;
                    self.order.observe(
                        process,
                        key_id,
                        name,
                        Stream::Poll,
                        offset,
                        value,
                        op.index,
                        log_start,
                        &mut self.findings,
                    );
                }
            }
        }
    }

    fn read(&mut self, process: u64, key: u32, offset: u64, value: Val, op: &Op, ok: bool) {
        self.counters.records_read += 1;
        let group_read = ok && self.groups.is_member(process);
        if group_read {
            self.groups.deliver(process, value);
        }
        let state = self
            .values
            .entry(value)
            .or_insert_with(|| ValueState::new(key));
        if state.first_read_op == NONE {
            state.first_read_op = op.index;
            state.first_read_offset = offset;
            state.first_read_key = key;
        }
        let writer_invoke = state.invoke_op;
        if ok {
            if !state.read_ok {
                state.read_ok = true;
                if state.unseen_counted {
                    self.unseen.count -= 1;
                }
            }
            if op.r#final {
                state.read_final = true;
            }
            state.read_group |= group_read;
        }
        let name = &self.keys[key as usize].name;
        self.txns
            .read(key, name, offset, value, writer_invoke, &mut self.findings);
        let k = &mut self.keys[key as usize];
        if ok {
            k.extend_reach(op.index, offset);
            if op.r#final {
                k.final_records += 1;
                k.final_reach = Some(k.final_reach.map_or(offset, |r| r.max(offset)));
                k.final_first = Some(k.final_first.map_or(offset, |f| f.min(offset)));
            }
        }
        self.note_offset(key, offset, value, op.index);
        if ok && op.r#final {
            let k = &mut self.keys[key as usize];
            if k.at_offset
                .get(&offset)
                .is_some_and(|&(first, _)| first != value)
            {
                k.final_at.insert(offset, value);
            }
        }
    }

    /// Adds `value` at `offset` to the offset map, reporting a second value at one offset.
    fn note_offset(&mut self, key: u32, offset: u64, value: Val, op: u64) {
        if let Some(state) = self.values.get_mut(&value) {
            state.note_offset(offset);
        }
        let k = &mut self.keys[key as usize];
        let (first, first_op) = *k.at_offset.entry(offset).or_insert((value, op));
        if first != value && !k.conflicted.contains(&offset) {
            k.conflicted.push(offset);
            let name = k.name.clone();
            self.findings.add("inconsistent-offsets", true, || {
                json!({"key": name, "offset": offset, "values": [first, value], "ops": [first_op, op]})
            });
        }
    }

    /// Ends the history: resolves what needs the whole history and returns the results.
    pub fn finish(mut self) -> CheckResults {
        let replica_logs = self.replica_logs.take();
        let mut results = values::finish(self);
        if let (Some(stats), Some(r)) = (results.stats.as_object_mut(), replica_logs) {
            stats.insert("replica_logs".into(), r.to_json());
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_ops_parse_without_allocating_and_reject_garbage() {
        let send = json!(["send", "t0/1", [17, 907]]);
        assert!(matches!(
            parse_micro(&send),
            Some(Micro::Send {
                key: "t0/1",
                offset: Some(17),
                value: 907
            })
        ));
        let invoke = json!(["send", "t0/1", 907]);
        assert!(matches!(
            parse_micro(&invoke),
            Some(Micro::Send { offset: None, .. })
        ));
        assert!(matches!(
            parse_micro(&json!(["poll"])),
            Some(Micro::Poll(None))
        ));
        assert!(parse_micro(&json!(["send", "t0/1", "x"])).is_none());
        assert!(parse_micro(&json!({"send": 1})).is_none());
        assert!(parse_micro(&json!(["frob"])).is_none());
    }

    #[test]
    fn unseen_series_stays_bounded() {
        let mut s = UnseenSeries::new();
        for i in 0..100_000u64 {
            s.count = i as i64;
            s.sample(i * UNSEEN_INTERVAL_NS);
        }
        assert!(s.points.len() <= UNSEEN_POINTS_MAX, "{}", s.points.len());
        assert!(s.points.len() > UNSEEN_POINTS_MAX / 4);
        assert_eq!(s.points[0], [0, 0]);
    }
}
