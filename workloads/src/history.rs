//! The history model: one [`Op`] per line of `history.jsonl`, in Jepsen's format.
//!
//! See `docs/history.md` for the format. Micro-op values are kept as raw JSON in
//! [`Op::value`] so that nemesis operations (whose values are free-form) and client
//! operations share one type; [`Op::micro_ops`] parses the client form.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// A key is a topic-partition written `topic/partition`, e.g. `t0/1`.
pub type Key = String;

/// Values sent by the queue workload are unique integers.
pub type Val = i64;

/// Who performed an operation: a numbered client process or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    /// A client process. A process whose op ended `info` never invokes again.
    Client(u64),
    /// The fault injector.
    Nemesis,
}

impl Serialize for Process {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(n) => s.serialize_u64(*n),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Process::Client(n)),
            Raw::S(s) if s == "nemesis" => Ok(Process::Nemesis),
            Raw::S(s) => Err(serde::de::Error::custom(format!(
                "process must be an integer or \"nemesis\", got {s:?}"
            ))),
        }
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(n) => write!(f, "{n}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

/// Jepsen's operation types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The operation started.
    Invoke,
    /// It completed and took effect.
    Ok,
    /// It certainly had no effect.
    Fail,
    /// Indeterminate: it may or may not have taken effect (timeout, reset, ...).
    Info,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history, dense from 0.
    pub index: u64,
    /// Nanoseconds since the test started.
    pub time: u64,
    /// The client process or `"nemesis"`.
    pub process: Process,
    /// invoke / ok / fail / info.
    #[serde(rename = "type")]
    pub kind: OpType,
    /// The function: `send`, `poll`, `txn`, `assign`, `subscribe`, `crash`, or a nemesis
    /// function such as `start-partition`.
    pub f: String,
    /// Micro-ops for client operations (see [`MicroOp`]); free-form for the nemesis.
    #[serde(default)]
    pub value: Value,
    /// The node the operation was sent to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// High watermark per key as reported by the broker with this completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_watermarks: Option<BTreeMap<Key, u64>>,
    /// Log start offset per key as reported by the broker with this completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_start_offsets: Option<BTreeMap<Key, u64>>,
    /// Per key, the ISR size the leader counted for an acks=all acknowledgement (`isr_size`
    /// of the produce answer), when it reported one. Checked against `min.insync.replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isr_sizes: Option<BTreeMap<Key, u64>>,
    /// The broker's error name (e.g. `NOT_ENOUGH_REPLICAS`) for fail/info completions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True on the reads of the final phase (after heal and recovery).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub r#final: bool,
    /// On a `txn` completion of a run with `--txn-retry-commit`: the calls that ended the
    /// transaction, so a retried commit or abort is in the history, never hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_end: Option<TxnEnd>,
}

/// How a transaction's end went when the client may call it again after a timeout
/// (`--txn-retry-commit`): which call, how many times it was made, and what each call that
/// did not return threw. `attempts` is `errors.len() + 1` when the last call returned, and
/// `errors.len()` when none did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnEnd {
    /// `commitTransaction` or `abortTransaction`.
    pub call: String,
    /// Calls made, the first included.
    pub attempts: u32,
    /// The exception of each call that did not return (the client's class names), in order.
    pub errors: Vec<String>,
}

impl TxnEnd {
    /// True when the call was made more than once.
    pub fn retried(&self) -> bool {
        self.attempts > 1
    }

    /// True when the last call returned (the commit or abort completed).
    pub fn returned(&self) -> bool {
        self.attempts as usize > self.errors.len()
    }
}

/// One micro-operation of a client op's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MicroOp {
    /// `["send", key, value]` on invoke, `["send", key, [offset, value]]` on completion
    /// (offset `null` when unknown).
    Send {
        /// topic/partition.
        key: Key,
        /// Offset assigned by the broker, when known.
        offset: Option<u64>,
        /// The unique value sent.
        value: Val,
    },
    /// `["poll"]` on invoke, `["poll", {key: [[offset, value], ...]}]` on completion.
    Poll(BTreeMap<Key, Vec<(u64, Val)>>),
}

/// A history line that does not follow the format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

fn bad(msg: impl Into<String>) -> FormatError {
    FormatError(msg.into())
}

impl MicroOp {
    /// Parses one micro-op from its JSON form (invoke or completion).
    pub fn from_value(v: &Value) -> Result<MicroOp, FormatError> {
        let arr = v
            .as_array()
            .ok_or_else(|| bad(format!("micro-op must be an array: {v}")))?;
        match arr.first().and_then(Value::as_str) {
            Some("send") => {
                let key = arr
                    .get(1)
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("send needs a key: {v}")))?
                    .to_string();
                let (offset, value) = match arr.get(2) {
                    Some(Value::Array(pair)) if pair.len() == 2 => {
                        let offset = match &pair[0] {
                            Value::Null => None,
                            o => Some(o.as_u64().ok_or_else(|| bad(format!("bad offset: {v}")))?),
                        };
                        let value = pair[1]
                            .as_i64()
                            .ok_or_else(|| bad(format!("bad value: {v}")))?;
                        (offset, value)
                    }
                    Some(x) => (
                        None,
                        x.as_i64().ok_or_else(|| bad(format!("bad value: {v}")))?,
                    ),
                    None => return Err(bad(format!("send needs a value: {v}"))),
                };
                Ok(MicroOp::Send { key, offset, value })
            }
            Some("poll") => {
                let mut out = BTreeMap::new();
                if let Some(m) = arr.get(1) {
                    let m = m
                        .as_object()
                        .ok_or_else(|| bad(format!("poll result must be an object: {v}")))?;
                    for (k, pairs) in m {
                        let pairs = pairs
                            .as_array()
                            .ok_or_else(|| bad(format!("poll pairs must be a list: {v}")))?;
                        let mut recs = Vec::with_capacity(pairs.len());
                        for p in pairs {
                            let o = p.get(0).and_then(Value::as_u64);
                            let x = p.get(1).and_then(Value::as_i64);
                            match (o, x) {
                                (Some(o), Some(x)) => recs.push((o, x)),
                                _ => return Err(bad(format!("bad poll pair {p} in {v}"))),
                            }
                        }
                        out.insert(k.clone(), recs);
                    }
                }
                Ok(MicroOp::Poll(out))
            }
            _ => Err(bad(format!("unknown micro-op: {v}"))),
        }
    }

    /// The invoke form: `["send", key, value]` or `["poll"]`.
    pub fn to_invoke_value(&self) -> Value {
        match self {
            MicroOp::Send { key, value, .. } => serde_json::json!(["send", key, value]),
            MicroOp::Poll(_) => serde_json::json!(["poll"]),
        }
    }

    /// The completion form: `["send", key, [offset, value]]` or `["poll", {...}]`.
    pub fn to_completion_value(&self) -> Value {
        match self {
            MicroOp::Send { key, offset, value } => {
                serde_json::json!(["send", key, [offset, value]])
            }
            MicroOp::Poll(m) => serde_json::json!(["poll", m]),
        }
    }
}

impl Op {
    /// A line of `process` without extensions; the recorder sets `index` and `time` (0 here).
    /// The one place that spells every field, so a new field is added here once.
    pub fn new(process: Process, kind: OpType, f: &str, value: Value) -> Op {
        Op {
            index: 0,
            time: 0,
            process,
            kind,
            f: f.to_string(),
            value,
            node: None,
            high_watermarks: None,
            log_start_offsets: None,
            isr_sizes: None,
            error: None,
            r#final: false,
            txn_end: None,
        }
    }

    /// A line of client process `process`.
    pub fn client(process: u64, kind: OpType, f: &str, value: Value) -> Op {
        Op::new(Process::Client(process), kind, f, value)
    }

    /// A nemesis line: process `nemesis`, type `info`, a free-form value.
    pub fn nemesis(f: &str, value: Value) -> Op {
        Op::new(Process::Nemesis, OpType::Info, f, value)
    }

    /// Parses the micro-ops of a `send`, `poll` or `txn` op.
    pub fn micro_ops(&self) -> Result<Vec<MicroOp>, FormatError> {
        let arr = self
            .value
            .as_array()
            .ok_or_else(|| bad(format!("op {} value must be a list", self.index)))?;
        arr.iter().map(MicroOp::from_value).collect()
    }

    /// The keys of an `assign` or `subscribe` op.
    pub fn keys(&self) -> Vec<Key> {
        self.value
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// True for client ops (not the nemesis).
    pub fn is_client(&self) -> bool {
        matches!(self.process, Process::Client(_))
    }
}

/// Reads a JSON Lines history. Errors name the line number.
pub fn read_history(reader: impl std::io::BufRead) -> Result<Vec<Op>, FormatError> {
    let mut ops = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let op: Op =
            serde_json::from_str(&line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_examples_round_trip() {
        let lines = [
            r#"{"index":7,"time":1834000000,"process":4,"type":"invoke","f":"send","value":[["send","t0/1",907]]}"#,
            r#"{"index":9,"time":1841000000,"process":4,"type":"ok","f":"send","value":[["send","t0/1",[17,907]]],"node":"n2"}"#,
            r#"{"index":10,"time":1850000000,"process":2,"type":"ok","f":"poll","value":[["poll",{"t0/1":[[16,903],[17,907]]}]],"high_watermarks":{"t0/1":18}}"#,
            r#"{"index":11,"time":1900000000,"process":"nemesis","type":"info","f":"start-partition","value":{"n1":["n2","n3"]}}"#,
        ];
        let ops = read_history(lines.join("\n").as_bytes()).unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!(
            ops[1].micro_ops().unwrap(),
            vec![MicroOp::Send {
                key: "t0/1".into(),
                offset: Some(17),
                value: 907
            }]
        );
        match &ops[2].micro_ops().unwrap()[0] {
            MicroOp::Poll(m) => assert_eq!(m["t0/1"], vec![(16, 903), (17, 907)]),
            other => panic!("expected poll, got {other:?}"),
        }
        assert_eq!(ops[3].process, Process::Nemesis);
        for (line, op) in lines.iter().zip(&ops) {
            let again: Op = serde_json::from_str(&serde_json::to_string(op).unwrap()).unwrap();
            assert_eq!(&again, op, "{line}");
        }
    }

    #[test]
    fn txn_ops_carry_sends_and_polls_committed_as_one() {
        let lines = [
            r#"{"index":3,"time":300,"process":1,"type":"invoke","f":"txn","value":[["send","t0/0",5],["poll"],["send","t0/1",6]]}"#,
            r#"{"index":4,"time":400,"process":1,"type":"ok","f":"txn","value":[["send","t0/0",[3,5]],["poll",{"t0/1":[[0,2]]}],["send","t0/1",[1,6]]]}"#,
            r#"{"index":5,"time":500,"process":2,"type":"fail","f":"txn","value":[["send","t0/0",7]],"error":"aborted"}"#,
        ];
        let ops = read_history(lines.join("\n").as_bytes()).unwrap();
        let micros = ops[1].micro_ops().unwrap();
        assert_eq!(micros.len(), 3);
        assert_eq!(
            micros[2],
            MicroOp::Send {
                key: "t0/1".into(),
                offset: Some(1),
                value: 6
            }
        );
        match &micros[1] {
            MicroOp::Poll(m) => assert_eq!(m["t0/1"], vec![(0, 2)]),
            other => panic!("expected poll, got {other:?}"),
        }
        // The invoke form of each completion micro-op is the invoke's.
        let invoke: Vec<Value> = micros.iter().map(MicroOp::to_invoke_value).collect();
        assert_eq!(Value::Array(invoke), ops[0].value);
        for (line, op) in lines.iter().zip(&ops) {
            assert_eq!(serde_json::to_string(op).unwrap(), *line);
        }
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        let err = read_history("{\"index\":0}\n".as_bytes()).unwrap_err();
        assert!(err.0.starts_with("line 1:"), "{err}");
    }
}
