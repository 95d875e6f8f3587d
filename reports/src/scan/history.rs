//! One streaming pass over `history.jsonl` that gathers everything a report draws.
//!
//! A history can hold millions of operations, so it is never loaded whole: each line is
//! parsed into a light view of [`Op`] (the micro-op values are kept as raw text and parsed
//! only where needed: completed sends and final reads), and only what the plots and tables
//! need is kept: per-op latency, observed high watermarks, the nemesis ops, every
//! acknowledged send (key, offset, value, time; a committed `txn`'s sends are acknowledged
//! too), the values the final reads returned, send outcomes per partition, the operations
//! per lane for the timeline (a transaction drawn one by one with its micro-ops in a line),
//! and the raw lines of the ops that the checkers' examples refer to.
//!
//! The main phase starts at the first client invocation that is not a final read: the runner
//! records nothing during setup (cluster, topic), so that is when the workload began.

use crate::error::ReportError;
use crate::scan::outcome::Outcome;
use crate::scan::worker_lanes::{OpKind, Timeline};
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use tidewater_workloads::history::{Op, OpType, Process};

/// Nemesis ops beyond this many are not kept (a nemesis acts every few seconds).
pub const NEMESIS_OPS_MAX: usize = 100_000;

/// High-watermark regressions beyond this many are counted but not kept for drawing.
pub const HW_REGRESSIONS_KEPT_MAX: usize = 100_000;

/// One completed client operation, for the latency and throughput plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyPoint {
    /// When it was invoked, ns since the test started (Jepsen plots latency at invoke time).
    pub invoke_ns: u64,
    /// Completion time minus invoke time.
    pub latency_ns: u64,
}

/// An ok op that observed a lower high watermark for a key than an ok op that had completed
/// before it was invoked (the `hw-regression` definition of docs/checkers.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwRegression {
    /// The topic-partition.
    pub key: String,
    /// Index of the completion that observed the lower watermark.
    pub index: u64,
    /// Its completion time, ns.
    pub time_ns: u64,
    /// The watermark it observed.
    pub hw: u64,
    /// The higher watermark observed earlier.
    pub prior_hw: u64,
    /// Index of the completion that observed `prior_hw`.
    pub prior_index: u64,
}

/// The high watermarks observed for one key by ok completions.
#[derive(Debug, Clone, Default)]
pub struct KeyWatermarks {
    /// (completion time ns, observed HW), in history order.
    pub points: Vec<(u64, u64)>,
    /// (completion index, highest HW observed up to it, index of the op that observed that
    /// highest HW), in history order: a binary search by invoke index finds what had been
    /// observed before an op started.
    running_max: Vec<(u64, u64, u64)>,
}

impl KeyWatermarks {
    /// The highest watermark observed by a completion with index below `index`, and the
    /// index of the op that observed it.
    fn max_before(&self, index: u64) -> Option<(u64, u64)> {
        let n = self.running_max.partition_point(|(i, _, _)| *i < index);
        n.checked_sub(1)
            .map(|at| (self.running_max[at].1, self.running_max[at].2))
    }

    fn push(&mut self, index: u64, time_ns: u64, hw: u64) {
        self.points.push((time_ns, hw));
        let (max, at) = match self.running_max.last() {
            Some(&(_, max, at)) if max >= hw => (max, at),
            _ => (hw, index),
        };
        self.running_max.push((index, max, at));
    }
}

/// One acknowledged send (a micro-op of an ok `send` completion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedSend {
    /// The value sent (unique in a history).
    pub value: i64,
    /// The key's number in [`HistoryScan::keys`].
    pub key: u32,
    /// The offset the broker acknowledged, when it said.
    pub offset: Option<u64>,
    /// When it was acknowledged, ns.
    pub ack_ns: u64,
}

/// What the ok final reads showed of one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinalKey {
    /// The highest log start offset they reported.
    pub log_start: Option<u64>,
    /// The highest high watermark they reported.
    pub high_watermark: Option<u64>,
    /// The lowest offset they returned.
    pub first: Option<u64>,
    /// The highest offset they returned.
    pub reach: Option<u64>,
    /// Records they returned.
    pub records: u64,
}

/// Send micro-ops per key by outcome: what availability per partition is counted from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeySends {
    /// Acknowledged.
    pub ok: u64,
    /// Certainly not written.
    pub fail: u64,
    /// Indeterminate.
    pub info: u64,
}

/// What one pass over a history found.
#[derive(Debug, Clone, Default)]
pub struct HistoryScan {
    /// Number of history lines (invocations and completions).
    pub lines: u64,
    /// The latest time in the history, ns.
    pub time_max_ns: u64,
    /// Completed client ops by function and outcome.
    pub latencies: BTreeMap<(String, Outcome), Vec<LatencyPoint>>,
    /// Invocations without a completion, by function.
    pub open: BTreeMap<String, u64>,
    /// High watermarks observed by ok completions, by key.
    pub watermarks: BTreeMap<String, KeyWatermarks>,
    /// High-watermark regressions (the first [`HW_REGRESSIONS_KEPT_MAX`]).
    pub hw_regressions: Vec<HwRegression>,
    /// All high-watermark regressions, also those not kept.
    pub hw_regressions_count: u64,
    /// The nemesis ops, whole.
    pub nemesis: Vec<Op>,
    /// Raw lines of the ops asked for (and of their invocations), by index.
    pub referenced: BTreeMap<u64, String>,
    /// Problems that did not stop the scan.
    pub warnings: Vec<String>,
    /// The first client invocation that is not a final read, ns: the main phase's start.
    pub main_start_ns: Option<u64>,
    /// The first final read's invocation, ns.
    pub final_start_ns: Option<u64>,
    /// Every key named by a send or a final read, in order of appearance.
    pub keys: Vec<String>,
    /// Numbers of `keys`.
    key_ids: HashMap<String, u32>,
    /// Every acknowledged send, in history order.
    pub acked: Vec<AckedSend>,
    /// Every value an ok final read returned (any key), unsorted.
    pub final_values: Vec<i64>,
    /// What the ok final reads showed, by key number.
    pub final_keys: BTreeMap<u32, FinalKey>,
    /// Ok final reads.
    pub final_ok: u64,
    /// Send micro-ops by key number and outcome.
    pub sends_by_key: BTreeMap<u32, KeySends>,
    /// The main phase's operations per lane.
    pub timeline: Timeline,
}

impl HistoryScan {
    /// Number of completed ops of `f` with `outcome`.
    pub fn count(&self, f: &str, outcome: Outcome) -> u64 {
        self.latencies
            .get(&(f.to_string(), outcome))
            .map_or(0, |v| v.len() as u64)
    }

    /// The client functions seen, in order.
    pub fn functions(&self) -> BTreeSet<String> {
        let mut fs: BTreeSet<String> = self.latencies.keys().map(|(f, _)| f.clone()).collect();
        fs.extend(self.open.keys().cloned());
        fs
    }

    /// The name of key number `id`.
    pub fn key_name(&self, id: u32) -> &str {
        &self.keys[id as usize]
    }

    fn key_id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.push(key.to_string());
        self.key_ids.insert(key.to_string(), id);
        id
    }
}

/// [`Process`] parsed without serde's buffering of untagged enums, which costs a third of
/// the scan's time on large histories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ProcessView(Process);

impl<'de> Deserialize<'de> for ProcessView {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ProcessView;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a process number or \"nemesis\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<ProcessView, E> {
                Ok(ProcessView(Process::Client(n)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ProcessView, E> {
                match s {
                    "nemesis" => Ok(ProcessView(Process::Nemesis)),
                    _ => Err(E::custom(format!(
                        "process must be an integer or \"nemesis\", got {s:?}"
                    ))),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The fields of an [`Op`] the scan needs; micro-op values are kept as raw text, parsed
/// only for completed sends and final reads.
#[derive(Deserialize)]
struct OpView<'a> {
    index: u64,
    time: u64,
    process: ProcessView,
    #[serde(rename = "type")]
    kind: OpType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
    #[serde(default)]
    high_watermarks: Option<BTreeMap<Cow<'a, str>, u64>>,
    #[serde(default)]
    log_start_offsets: Option<BTreeMap<Cow<'a, str>, u64>>,
    #[serde(default, rename = "final")]
    is_final: bool,
}

/// A string borrowed from the line when it holds no escape, copied otherwise.
struct CowStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The third element of a send micro-op: the value on invoke (and on fail/info completions),
/// `[offset, value]` on an ok completion (offset `null` when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SendPayload {
    offset: Option<u64>,
    value: Option<i64>,
}

impl<'de> Deserialize<'de> for SendPayload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SendPayload;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a value or [offset, value]")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SendPayload, E> {
                Ok(SendPayload {
                    offset: None,
                    value: Some(v),
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SendPayload, E> {
                Ok(SendPayload {
                    offset: None,
                    value: i64::try_from(v).ok(),
                })
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<SendPayload, E> {
                Ok(SendPayload {
                    offset: None,
                    value: None,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SendPayload, A::Error> {
                let offset: Option<u64> = seq.next_element::<Option<u64>>()?.flatten();
                let value: Option<i64> = seq.next_element::<Option<i64>>()?.flatten();
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(SendPayload { offset, value })
            }
        }
        d.deserialize_any(V)
    }
}

/// Records of a poll micro-op: key -> `[[offset, value], ...]`.
struct PollRecords<'a>(Vec<(CowStr<'a>, Vec<(u64, i64)>)>);

impl<'de> Deserialize<'de> for PollRecords<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PollRecords<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of key to records")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<CowStr, Vec<(u64, i64)>>()? {
                    out.push((k, v));
                }
                Ok(PollRecords(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A micro-op, as far as the report needs it.
enum Micro<'a> {
    /// `["send", key, payload]`.
    Send(CowStr<'a>, SendPayload),
    /// `["poll", {key: records}]`.
    Poll(PollRecords<'a>),
    /// `["poll"]`: an invoke's poll, or an aborted transaction's that repeats its invoke.
    PollBare,
    /// Anything else.
    Other,
}

impl<'de> Deserialize<'de> for Micro<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Micro<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a micro-op [name, ...]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Micro<'de>, A::Error> {
                let name: Option<CowStr> = seq.next_element()?;
                let micro = match name.as_ref().map(|n| &*n.0) {
                    Some("send") => match (seq.next_element::<CowStr>()?, seq.next_element()?) {
                        (Some(key), Some(payload)) => Micro::Send(key, payload),
                        _ => Micro::Other,
                    },
                    Some("poll") => match seq.next_element::<PollRecords>()? {
                        Some(records) => Micro::Poll(records),
                        None => Micro::PollBare,
                    },
                    _ => Micro::Other,
                };
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(micro)
            }
        }
        d.deserialize_seq(V)
    }
}

/// The micro-ops of an op's value; `None` when the value is not a list of micro-ops.
fn micro_ops(value: Option<&RawValue>) -> Option<Vec<Micro<'_>>> {
    serde_json::from_str(value?.get()).ok()
}

/// Micro-ops listed in a transaction's summary at most; the rest are counted.
pub const MICRO_OPS_LISTED_MAX: usize = 8;

/// An op's micro-ops in a line, for tooltips and tables: `send t0/0 41 @17 · poll t0/1: 2
/// records @8–9 · send t0/1 42`, at most [`MICRO_OPS_LISTED_MAX`] of them then "and N
/// more". Sends show `@offset` when the completion gave one; a poll shows per key how many
/// records it returned and their offsets' range.
fn micro_summary(value: Option<&RawValue>) -> String {
    let Some(micros) = micro_ops(value) else {
        return String::new();
    };
    let mut parts: Vec<String> = Vec::new();
    for micro in micros.iter().take(MICRO_OPS_LISTED_MAX) {
        parts.push(match micro {
            Micro::Send(key, p) => {
                let value = p.value.map_or("?".to_string(), |v| v.to_string());
                match p.offset {
                    Some(o) => format!("send {} {value} @{o}", key.0),
                    None => format!("send {} {value}", key.0),
                }
            }
            Micro::Poll(records) if records.0.iter().all(|(_, r)| r.is_empty()) => {
                "poll: nothing".to_string()
            }
            Micro::Poll(records) => {
                let keys: Vec<String> = records
                    .0
                    .iter()
                    .filter(|(_, r)| !r.is_empty())
                    .map(|(key, r)| {
                        let lo = r.iter().map(|x| x.0).min().unwrap_or(0);
                        let hi = r.iter().map(|x| x.0).max().unwrap_or(0);
                        let plural = if r.len() == 1 { "" } else { "s" };
                        let at = if lo == hi {
                            format!("@{lo}")
                        } else {
                            format!("@{lo}–{hi}")
                        };
                        format!("{}: {} record{plural} {at}", key.0, r.len())
                    })
                    .collect();
                format!("poll {}", keys.join(", "))
            }
            Micro::PollBare => "poll".to_string(),
            Micro::Other => "other".to_string(),
        });
    }
    if micros.len() > MICRO_OPS_LISTED_MAX {
        parts.push(format!("and {} more", micros.len() - MICRO_OPS_LISTED_MAX));
    }
    parts.join(" · ")
}

/// The micro-ops of a raw history line in a line ([`micro_summary`]); empty when the line
/// is not an op or holds no micro-ops.
pub fn line_micro_summary(raw: &str) -> String {
    serde_json::from_str::<OpView>(raw)
        .map(|op| micro_summary(op.value))
        .unwrap_or_default()
}

/// Every `(key, value, offset)` a raw history line shows: its sends with an offset and its
/// polls' records. How the report finds the offsets of the values a cycle names.
pub fn line_offsets(raw: &str) -> Vec<(String, i64, u64)> {
    let Ok(op) = serde_json::from_str::<OpView>(raw) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for micro in micro_ops(op.value).unwrap_or_default() {
        match micro {
            Micro::Send(
                key,
                SendPayload {
                    offset: Some(o),
                    value: Some(v),
                },
            ) => {
                out.push((key.0.into_owned(), v, o));
            }
            Micro::Poll(records) => {
                for (key, pairs) in records.0 {
                    out.extend(pairs.iter().map(|&(o, v)| (key.0.to_string(), v, o)));
                }
            }
            _ => {}
        }
    }
    out
}

/// The invocation a client process is waiting on.
struct Pending {
    index: u64,
    time: u64,
    f: String,
    /// The raw invoke line, kept in case the completion is referenced by an example.
    raw: String,
}

/// Streams `path`, keeping the raw lines of the op indexes in `wanted`. A missing history is
/// an empty scan with a warning; a malformed line is an error unless it is the torn last
/// line of a killed run.
pub fn scan_history(path: &Path, wanted: &BTreeSet<u64>) -> Result<HistoryScan, ReportError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut scan = HistoryScan::default();
            scan.warnings.push(format!("{} is missing", path.display()));
            return Ok(scan);
        }
        Err(e) => return Err(ReportError::io(path, e)),
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut scanner = Scanner {
        scan: HistoryScan::default(),
        pending: HashMap::new(),
        wanted,
    };
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let mut torn: Option<String> = None;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ReportError::io(path, e))?;
        if n == 0 {
            break;
        }
        line_number += 1;
        if let Some(message) = torn.take() {
            return Err(ReportError::format(path, message));
        }
        // Bytes, not a String: a line that is not UTF-8 is named by its number, like a line
        // that is not JSON (a torn last line is a warning, one inside the history an error).
        let text = match std::str::from_utf8(&line) {
            Ok(text) => text.trim_end(),
            Err(e) => {
                torn = Some(format!("line {line_number}: not UTF-8 text ({e})"));
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str::<OpView>(text) {
            Ok(op) => scanner
                .add(op, text)
                .map_err(|m| ReportError::format(path, m))?,
            Err(e) => torn = Some(format!("line {line_number}: {e}")),
        }
    }
    let mut scan = scanner.finish();
    if let Some(message) = torn {
        scan.warnings
            .push(format!("ignored a torn last history line ({message})"));
    }
    Ok(scan)
}

struct Scanner<'w> {
    scan: HistoryScan,
    pending: HashMap<ProcessView, Pending>,
    wanted: &'w BTreeSet<u64>,
}

impl Scanner<'_> {
    fn add(&mut self, op: OpView, raw: &str) -> Result<(), String> {
        let scan = &mut self.scan;
        scan.lines += 1;
        scan.time_max_ns = scan.time_max_ns.max(op.time);
        if self.wanted.contains(&op.index) {
            scan.referenced.insert(op.index, raw.to_string());
        }
        let process = match op.process.0 {
            Process::Nemesis => {
                if scan.nemesis.len() < NEMESIS_OPS_MAX {
                    let whole: Op = serde_json::from_str(raw)
                        .map_err(|e| format!("nemesis op {}: {e}", op.index))?;
                    scan.nemesis.push(whole);
                }
                return Ok(());
            }
            Process::Client(p) => p,
        };
        let Some(outcome) = Outcome::of(op.kind) else {
            let first = if op.is_final {
                &mut scan.final_start_ns
            } else {
                &mut scan.main_start_ns
            };
            first.get_or_insert(op.time);
            self.invoke(op, raw);
            return Ok(());
        };
        let Some(invoke) = self.pending.remove(&op.process) else {
            // A completion without invocation: count it, but it has no latency to draw.
            return Ok(());
        };
        if self.wanted.contains(&op.index) {
            scan.referenced.insert(invoke.index, invoke.raw);
        }
        let point = LatencyPoint {
            invoke_ns: invoke.time,
            latency_ns: op.time.saturating_sub(invoke.time),
        };
        if !op.is_final {
            let kind = OpKind::of(&invoke.f);
            let kept = scan
                .timeline
                .add(process, kind, outcome, invoke.time, op.time, op.index);
            // Only the ops drawn one by one (a bounded number) pay for the summary.
            if let (Some(kept), OpKind::Txn) = (kept, kind) {
                kept.detail = micro_summary(op.value);
            }
        }
        scan.latencies
            .entry((invoke.f, outcome))
            .or_default()
            .push(point);
        // A committed transaction's sends are acknowledged writes like a send op's.
        if op.f == "send" || op.f == "txn" {
            observe_sends(scan, &op, outcome);
        }
        if outcome == Outcome::Ok {
            if op.is_final {
                observe_final(scan, &op);
            }
            if let Some(hws) = op.high_watermarks {
                for (key, hw) in hws {
                    observe_hw(scan, &key, invoke.index, op.index, op.time, hw);
                }
            }
        }
        Ok(())
    }

    fn invoke(&mut self, op: OpView, raw: &str) {
        // Reuse the previous invocation's buffers of this process: no allocation per op.
        let entry = self.pending.entry(op.process).or_insert_with(|| Pending {
            index: 0,
            time: 0,
            f: String::new(),
            raw: String::new(),
        });
        if !entry.f.is_empty() && entry.index != op.index {
            // The previous invocation never completed; Jepsen forbids this, count it as open.
            *self.scan.open.entry(entry.f.clone()).or_default() += 1;
        }
        entry.index = op.index;
        entry.time = op.time;
        entry.f.clear();
        entry.f.push_str(&op.f);
        entry.raw.clear();
        entry.raw.push_str(raw);
    }

    fn finish(mut self) -> HistoryScan {
        for (_, p) in self.pending.drain() {
            if !p.f.is_empty() {
                *self.scan.open.entry(p.f).or_default() += 1;
            }
        }
        self.scan
    }
}

/// Counts the send micro-ops of a completion per key, and keeps the acknowledged ones.
fn observe_sends(scan: &mut HistoryScan, op: &OpView, outcome: Outcome) {
    for micro in micro_ops(op.value).unwrap_or_default() {
        let Micro::Send(key, payload) = micro else {
            continue;
        };
        let key = scan.key_id(&key.0);
        let counts = scan.sends_by_key.entry(key).or_default();
        match outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Fail => counts.fail += 1,
            Outcome::Info => counts.info += 1,
        }
        if let (Outcome::Ok, Some(value)) = (outcome, payload.value) {
            scan.acked.push(AckedSend {
                value,
                key,
                offset: payload.offset,
                ack_ns: op.time,
            });
        }
    }
}

/// Keeps what an ok final read showed: its records, high watermarks and log start offsets.
fn observe_final(scan: &mut HistoryScan, op: &OpView) {
    scan.final_ok += 1;
    for micro in micro_ops(op.value).unwrap_or_default() {
        let Micro::Poll(records) = micro else {
            continue;
        };
        for (key, pairs) in records.0 {
            let key = scan.key_id(&key.0);
            let fk = scan.final_keys.entry(key).or_default();
            for &(offset, value) in &pairs {
                fk.records += 1;
                fk.first = Some(fk.first.map_or(offset, |f| f.min(offset)));
                fk.reach = Some(fk.reach.map_or(offset, |r| r.max(offset)));
                scan.final_values.push(value);
            }
        }
    }
    for (key, hw) in op.high_watermarks.iter().flatten() {
        let key = scan.key_id(key);
        let fk = scan.final_keys.entry(key).or_default();
        fk.high_watermark = Some(fk.high_watermark.map_or(*hw, |h| h.max(*hw)));
    }
    for (key, start) in op.log_start_offsets.iter().flatten() {
        let key = scan.key_id(key);
        let fk = scan.final_keys.entry(key).or_default();
        fk.log_start = Some(fk.log_start.map_or(*start, |s| s.max(*start)));
    }
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Records one observed watermark and checks it against those observed before the op began.
fn observe_hw(
    scan: &mut HistoryScan,
    key: &str,
    invoke_index: u64,
    index: u64,
    time: u64,
    hw: u64,
) {
    let marks = match scan.watermarks.get_mut(key) {
        Some(m) => m,
        None => scan.watermarks.entry(key.to_string()).or_default(),
    };
    if let Some((prior_hw, prior_index)) = marks.max_before(invoke_index) {
        if hw < prior_hw {
            scan.hw_regressions_count += 1;
            if scan.hw_regressions.len() < HW_REGRESSIONS_KEPT_MAX {
                scan.hw_regressions.push(HwRegression {
                    key: key.to_string(),
                    index,
                    time_ns: time,
                    hw,
                    prior_hw,
                    prior_index,
                });
            }
        }
    }
    marks.push(index, time, hw);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_lines(lines: &[&str], wanted: &[u64]) -> HistoryScan {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        scan_history(&path, &wanted.iter().copied().collect()).unwrap()
    }

    #[test]
    fn pairs_invocations_with_completions_per_process() {
        let scan = scan_lines(
            &[
                r#"{"index":0,"time":100,"process":1,"type":"invoke","f":"send","value":[["send","t/0",1]]}"#,
                r#"{"index":1,"time":150,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}"#,
                r#"{"index":2,"time":400,"process":1,"type":"ok","f":"send","value":[["send","t/0",[0,1]]]}"#,
                r#"{"index":3,"time":900,"process":2,"type":"info","f":"poll","value":[["poll"]]}"#,
                r#"{"index":4,"time":950,"process":3,"type":"invoke","f":"send","value":[["send","t/0",2]]}"#,
            ],
            &[2],
        );
        assert_eq!(scan.lines, 5);
        assert_eq!(scan.time_max_ns, 950);
        assert_eq!(
            scan.latencies[&("send".to_string(), Outcome::Ok)],
            vec![LatencyPoint {
                invoke_ns: 100,
                latency_ns: 300
            }]
        );
        assert_eq!(
            scan.latencies[&("poll".to_string(), Outcome::Info)],
            vec![LatencyPoint {
                invoke_ns: 150,
                latency_ns: 750
            }]
        );
        assert_eq!(scan.open["send"], 1);
        // The referenced completion brings its invocation along.
        assert_eq!(
            scan.referenced.keys().copied().collect::<Vec<_>>(),
            vec![0, 2]
        );
    }

    #[test]
    fn a_lower_watermark_after_a_completed_higher_one_is_a_regression() {
        let scan = scan_lines(
            &[
                r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#,
                r#"{"index":1,"time":2,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}"#,
                r#"{"index":2,"time":3,"process":1,"type":"ok","f":"poll","value":[["poll",{}]],"high_watermarks":{"t/0":10}}"#,
                // Concurrent with op 2 (invoked before 2 completed): lower is allowed.
                r#"{"index":3,"time":4,"process":2,"type":"ok","f":"poll","value":[["poll",{}]],"high_watermarks":{"t/0":8}}"#,
                r#"{"index":4,"time":5,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#,
                r#"{"index":5,"time":6,"process":1,"type":"ok","f":"poll","value":[["poll",{}]],"high_watermarks":{"t/0":7}}"#,
                r#"{"index":6,"time":7,"process":"nemesis","type":"info","f":"start-kill","value":["n1"]}"#,
            ],
            &[],
        );
        assert_eq!(scan.watermarks["t/0"].points, vec![(3, 10), (4, 8), (6, 7)]);
        assert_eq!(scan.hw_regressions_count, 1);
        assert_eq!(
            scan.hw_regressions[0],
            HwRegression {
                key: "t/0".into(),
                index: 5,
                time_ns: 6,
                hw: 7,
                prior_hw: 10,
                prior_index: 2
            }
        );
        assert_eq!(scan.nemesis.len(), 1);
        assert_eq!(scan.nemesis[0].f, "start-kill");
    }

    #[test]
    fn keeps_acknowledged_sends_final_reads_and_send_outcomes_per_key() {
        let scan = scan_lines(
            &[
                r#"{"index":0,"time":5,"process":1,"type":"invoke","f":"send","value":[["send","t/0",1],["send","t\/1",2]]}"#,
                r#"{"index":1,"time":9,"process":1,"type":"ok","f":"send","value":[["send","t/0",[0,1]],["send","t\/1",[null,2]]]}"#,
                r#"{"index":2,"time":10,"process":1,"type":"invoke","f":"send","value":[["send","t/0",3]]}"#,
                r#"{"index":3,"time":12,"process":1,"type":"fail","f":"send","value":[["send","t/0",3]],"error":"NOT_ENOUGH_REPLICAS"}"#,
                r#"{"index":4,"time":13,"process":1,"type":"invoke","f":"send","value":[["send","t/0",4]]}"#,
                r#"{"index":5,"time":14,"process":1,"type":"info","f":"send","value":[["send","t/0",4]]}"#,
                r#"{"index":6,"time":20,"process":9,"type":"invoke","f":"poll","value":[["poll"]],"final":true}"#,
                r#"{"index":7,"time":21,"process":9,"type":"ok","f":"poll","value":[["poll",{"t/0":[[3,7],[4,1]]}]],"high_watermarks":{"t/0":5},"log_start_offsets":{"t/0":3},"final":true}"#,
            ],
            &[],
        );
        assert_eq!(scan.main_start_ns, Some(5));
        assert_eq!(scan.final_start_ns, Some(20));
        assert_eq!(scan.keys, vec!["t/0".to_string(), "t/1".to_string()]);
        assert_eq!(
            scan.acked,
            vec![
                AckedSend {
                    value: 1,
                    key: 0,
                    offset: Some(0),
                    ack_ns: 9
                },
                AckedSend {
                    value: 2,
                    key: 1,
                    offset: None,
                    ack_ns: 9
                }
            ]
        );
        assert_eq!(
            scan.sends_by_key[&0],
            KeySends {
                ok: 1,
                fail: 1,
                info: 1
            }
        );
        assert_eq!(scan.final_ok, 1);
        assert_eq!(scan.final_values, vec![7, 1]);
        assert_eq!(
            scan.final_keys[&0],
            FinalKey {
                log_start: Some(3),
                high_watermark: Some(5),
                first: Some(3),
                reach: Some(4),
                records: 2
            }
        );
        // Final reads are not part of the main phase's timeline.
        assert_eq!(scan.timeline.ops_total, 3);
    }

    #[test]
    fn a_torn_last_line_is_a_warning_but_a_torn_middle_line_is_an_error() {
        let good =
            r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#;
        let scan = scan_lines(&[good, r#"{"index":1,"ti"#], &[]);
        assert_eq!(scan.lines, 1);
        assert_eq!(scan.warnings.len(), 1, "{:?}", scan.warnings);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, format!("{{\"index\":0,\"ti\n{good}\n")).unwrap();
        let err = scan_history(&path, &BTreeSet::new()).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named_by_its_number() {
        let good =
            r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut bytes = format!("{good}\n").into_bytes();
        bytes.extend_from_slice(b"\xff\xfe binary\n");
        bytes.extend_from_slice(format!("{good}\n").as_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let err = scan_history(&path, &BTreeSet::new()).unwrap_err();
        assert!(err.to_string().contains("line 2: not UTF-8"), "{err}");

        // As the torn last line, it is a warning and the lines before it are kept.
        bytes.truncate(good.len() + 1 + b"\xff\xfe binary\n".len());
        std::fs::write(&path, &bytes).unwrap();
        let scan = scan_history(&path, &BTreeSet::new()).unwrap();
        assert_eq!(scan.lines, 1);
        assert!(
            scan.warnings[0].contains("line 2: not UTF-8"),
            "{:?}",
            scan.warnings
        );
    }
}
