//! Per-process order: `poll-skip`, `nonmonotonic-poll`, `nonmonotonic-send` and their
//! within-op variants (`int-...`).
//!
//! Each process remembers, per key, the last offset it polled and the last offset it was
//! acknowledged at. A step back (next offset <= previous) is decided at once. A step forward
//! by more than one offset is only a *candidate* skip: skips are measured in dense positions
//! (offsets at which no value is known are removed), and which offsets hold values is only
//! known once the whole history has been seen, so candidates are resolved in `finish`.
//! In a history without offset gaps there are no candidates at all.

use super::found::Findings;
use super::fxhash::FxHashMap;
use serde_json::json;

/// One step forward by more than one offset, to be resolved against the known offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The anomaly this gap is if a known value lies strictly inside it.
    pub kind: &'static str,
    /// Interned key.
    pub key: u32,
    /// The offset before the gap.
    pub from: u64,
    /// The offset after the gap.
    pub to: u64,
    /// The op that observed `from`.
    pub from_op: u64,
    /// The op that observed `to`.
    pub to_op: u64,
    /// The process.
    pub process: u64,
    /// True when the process used `subscribe` (rebalances may move its position).
    pub subscribe: bool,
}

/// The last offset a process saw on a key, and the op that saw it.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    /// (offset, op index) of the last record polled.
    poll: Option<(u64, u64)>,
    /// (offset, op index) of the last acknowledged send.
    send: Option<(u64, u64)>,
    /// A poll of the process failed with OFFSET_OUT_OF_RANGE since `poll` was seen: the
    /// consumer reset its position (auto.offset.reset), so the next poll may go back.
    poll_reset: bool,
}

/// What one process remembers.
#[derive(Debug, Default)]
struct ProcessState {
    /// True after a `subscribe`, false after an `assign`.
    subscribe: bool,
    /// Per key; a process holds few keys, so a vector beats a map.
    keys: Vec<(u32, Position)>,
}

impl ProcessState {
    fn position(&mut self, key: u32) -> &mut Position {
        match self.keys.iter().position(|(k, _)| *k == key) {
            Some(i) => &mut self.keys[i].1,
            None => {
                self.keys.push((key, Position::default()));
                &mut self.keys.last_mut().expect("just pushed").1
            }
        }
    }
}

/// Which stream of a process an offset belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// Records returned by polls.
    Poll,
    /// Offsets of acknowledged sends.
    Send,
}

/// Order tracking for every process.
#[derive(Debug, Default)]
pub struct Order {
    /// By client process number.
    processes: FxHashMap<u64, ProcessState>,
    /// Candidate skips, resolved at the end.
    pub gaps: Vec<Gap>,
}

impl Order {
    /// An `assign` or `subscribe` completed: forget positions on keys no longer held.
    pub fn reassign(&mut self, process: u64, keys: &[u32], subscribe: bool) {
        let state = self.processes.entry(process).or_default();
        state.subscribe = subscribe;
        state.keys.retain(|(k, _)| keys.contains(k));
    }

    /// A poll of `process` failed with OFFSET_OUT_OF_RANGE: its consumer resets its positions
    /// (the failed poll does not say which key), so a poll going back on any of its keys next
    /// is reported as `nonmonotonic-poll` with `after_reset` and does not count.
    pub fn reset_polls(&mut self, process: u64) {
        if let Some(state) = self.processes.get_mut(&process) {
            for (_, position) in &mut state.keys {
                position.poll_reset = position.poll.is_some();
            }
        }
    }

    /// The process ended with `info` and will never run again.
    pub fn retire(&mut self, process: u64) {
        self.processes.remove(&process);
    }

    /// The process observed `offset` on `key` in `stream`, within op `op`. `log_start` is the
    /// log start offset the op reported (0 when unknown): records below it could not be read,
    /// so stepping over them is no skip.
    #[allow(clippy::too_many_arguments)]
    pub fn observe(
        &mut self,
        process: u64,
        key: u32,
        key_name: &str,
        stream: Stream,
        offset: u64,
        value: i64,
        op: u64,
        log_start: u64,
        findings: &mut Findings,
    ) {
        let state = self.processes.entry(process).or_default();
        let subscribe = state.subscribe;
        let pos = state.position(key);
        let after_reset = matches!(stream, Stream::Poll) && std::mem::take(&mut pos.poll_reset);
        let slot = match stream {
            Stream::Poll => &mut pos.poll,
            Stream::Send => &mut pos.send,
        };
        if let Some((prev, prev_op)) = *slot {
            let within = prev_op == op;
            if offset <= prev {
                let (name, counts) = match (stream, within) {
                    (Stream::Poll, true) => ("int-nonmonotonic-poll", !subscribe),
                    (Stream::Poll, false) => ("nonmonotonic-poll", !subscribe && !after_reset),
                    (Stream::Send, true) => ("int-nonmonotonic-send", true),
                    (Stream::Send, false) => ("nonmonotonic-send", true),
                };
                findings.add(name, counts, || {
                    let mut example = json!({"key": key_name, "process": process,
                        "offsets": [prev, offset], "value": value, "ops": [prev_op, op],
                        "subscribe": subscribe});
                    if after_reset {
                        example["after_reset"] = json!(true);
                    }
                    example
                });
            } else if offset > prev.max(log_start.saturating_sub(1)) + 1 {
                let kind = match (stream, within) {
                    (Stream::Poll, true) => Some("int-poll-skip"),
                    (Stream::Poll, false) => Some("poll-skip"),
                    (Stream::Send, true) => Some("int-send-skip"),
                    // Other producers interleave between one process's ops: not an anomaly.
                    (Stream::Send, false) => None,
                };
                if let Some(kind) = kind {
                    self.gaps.push(Gap {
                        kind,
                        key,
                        from: prev.max(log_start.saturating_sub(1)),
                        to: offset,
                        from_op: prev_op,
                        to_op: op,
                        process,
                        subscribe,
                    });
                }
            }
        }
        *slot = Some((offset, op));
    }
}
