//! Acknowledged writes missing from the final reads: the plainest durability figure of a run,
//! printed at its end and stored in `results.json` under `stats.acked_missing_from_final_reads`.
//!
//! An ok send whose value no final read returned is *missing*. This is a little broader than
//! the checkers' `lost-write`, which needs the loss to be provable from offsets: a missing
//! write acknowledged at an offset beyond where the final log ends is only `unseen` there.
//! (A write that a consumer read and an unclean election later discarded is a `lost-write`
//! with `read_before_loss`.) Only keys whose final reads completed are judged; the others are
//! counted as unconfirmed. The file is streamed; memory is one entry per acknowledged send.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use tidewater_workloads::history::{Key, MicroOp, Op, OpType, Val};

/// Examples kept.
const EXAMPLES_MAX: usize = 10;

/// The summary stored in the results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Missing {
    /// Acknowledged sends on keys whose final reads completed.
    pub acked: u64,
    /// Of those, how many no final read returned.
    pub missing: u64,
    /// Acknowledged sends on keys whose final reads did not complete.
    pub unconfirmed: u64,
    /// The first missing sends: key, offset, value, op index.
    pub examples: Vec<Value>,
}

impl Missing {
    /// As JSON for `results.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "acked": self.acked,
            "missing": self.missing,
            "unconfirmed": self.unconfirmed,
            "examples": self.examples,
        })
    }
}

/// Streams a history; `complete(key)` tells whether that key's final reads completed.
/// Lines that do not parse are skipped (the checkers report them).
pub fn acked_missing_from_final_reads(
    reader: impl BufRead,
    complete: impl Fn(&str) -> bool,
) -> std::io::Result<Missing> {
    let mut acked: HashMap<Val, (Key, Option<u64>, u64)> = HashMap::new();
    let mut read: HashSet<Val> = HashSet::new();
    for line in reader.lines() {
        let line = line?;
        let Ok(op) = serde_json::from_str::<Op>(&line) else {
            continue;
        };
        if op.kind != OpType::Ok || !op.is_client() {
            continue;
        }
        for m in op.micro_ops().unwrap_or_default() {
            match m {
                MicroOp::Send { key, offset, value } if op.f == "send" => {
                    acked.insert(value, (key, offset, op.index));
                }
                MicroOp::Poll(reads) if op.r#final => {
                    read.extend(reads.values().flatten().map(|(_, v)| *v));
                }
                _ => {}
            }
        }
    }
    let mut out = Missing::default();
    let mut missing: BTreeMap<u64, Value> = BTreeMap::new();
    for (value, (key, offset, index)) in acked {
        if !complete(&key) {
            out.unconfirmed += 1;
            continue;
        }
        out.acked += 1;
        if !read.contains(&value) {
            out.missing += 1;
            missing.insert(
                index,
                json!({"key": key, "offset": offset, "value": value, "ack_op": index}),
            );
        }
    }
    out.examples = missing.into_values().take(EXAMPLES_MAX).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HISTORY: &str = r#"{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[0,10]]]}
{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[1,11]]]}
{"index":2,"time":3,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,10],[1,11]]}]]}
{"index":3,"time":4,"process":0,"type":"ok","f":"send","value":[["send","t0/1",[0,12]]]}
{"index":4,"time":5,"process":0,"type":"info","f":"send","value":[["send","t0/0",13]]}
{"index":5,"time":6,"process":2,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,10],[1,99]]}]],"final":true}
"#;

    #[test]
    fn a_write_read_during_the_run_but_gone_at_the_end_is_missing() {
        let m = acked_missing_from_final_reads(HISTORY.as_bytes(), |k| k == "t0/0").unwrap();
        assert_eq!(m.acked, 2);
        assert_eq!(m.missing, 1);
        assert_eq!(m.unconfirmed, 1, "t0/1's final reads did not complete");
        assert_eq!(
            m.examples,
            vec![json!({"key": "t0/0", "offset": 1, "value": 11, "ack_op": 1})]
        );
    }

    #[test]
    fn only_keys_with_complete_final_reads_are_judged() {
        let history = HISTORY.replace("[1,99]", "[1,11]");
        let m = acked_missing_from_final_reads(history.as_bytes(), |k| k == "t0/0").unwrap();
        assert_eq!((m.acked, m.missing, m.unconfirmed), (2, 0, 1));
        // Judged as complete, t0/1's acknowledged value 12 is missing: no final read has it.
        let m = acked_missing_from_final_reads(history.as_bytes(), |_| true).unwrap();
        assert_eq!((m.acked, m.missing, m.unconfirmed), (3, 1, 0));
        assert_eq!(m.examples[0]["value"], 12);
    }
}
