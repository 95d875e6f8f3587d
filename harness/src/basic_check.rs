//! The basic check the harness runs until the full checkers are wired in: acknowledged sends
//! missing from the final reads, plus op statistics. It streams the history file, keeping
//! per-key state (acknowledged sends, values seen by final reads), never the whole history.
//!
//! Definitions:
//! - A key's **final coverage** is the highest of (last offset returned + 1) and the high
//!   watermark reported over the key's final reads: every offset below it was readable.
//! - `lost-write`: an ok send whose offset is below the final coverage, yet no final read
//!   returned its value.
//! - `unconfirmed-write`: an ok send at or above the final coverage (or with no offset and not
//!   read): the final reads did not get far enough to decide; this makes the verdict unknown.
//!
//! A lost write is a violation only when the settings promise durability: `acks=all`
//! without unclean leader election.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use tidewater_workloads::history::{FormatError, Key, MicroOp, Op, OpType, Process, Val};
use tidewater_workloads::results::{Anomaly, CheckResults, Validity};

/// Examples kept per anomaly.
pub const EXAMPLES_MAX: usize = 20;

/// The settings that decide whether a lost write is a violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicCheckSettings {
    /// The run's acks: "0", "1" or "all".
    pub acks: String,
    /// True when `unclean.leader.election.enable=true` was set.
    pub unclean_leader_election: bool,
}

impl BasicCheckSettings {
    /// Whether the settings promise that acknowledged writes survive.
    pub fn durability_promised(&self) -> bool {
        self.acks == "all" && !self.unclean_leader_election
    }
}

#[derive(Debug, Clone)]
struct Acked {
    offset: Option<u64>,
    value: Val,
    index: u64,
    time: u64,
    node: Option<String>,
}

#[derive(Default)]
struct State {
    acked: HashMap<Key, Vec<Acked>>,
    final_values: HashMap<Key, HashSet<Val>>,
    final_coverage: HashMap<Key, u64>,
    final_reads: u64,
    counts: BTreeMap<String, u64>,
    nemesis_ops: u64,
    ops: u64,
    time_end_ns: u64,
}

impl State {
    fn add(&mut self, op: &Op) -> Result<(), FormatError> {
        self.ops += 1;
        self.time_end_ns = self.time_end_ns.max(op.time);
        if op.process == Process::Nemesis {
            self.nemesis_ops += 1;
            return Ok(());
        }
        if op.kind != OpType::Invoke {
            let kind = serde_json::to_value(op.kind).expect("op type serializes");
            let name = format!("{}-{}", op.f, kind.as_str().unwrap_or("?"));
            *self.counts.entry(name).or_default() += 1;
        }
        if op.kind != OpType::Ok || !matches!(op.f.as_str(), "send" | "poll" | "txn") {
            return Ok(());
        }
        for m in op.micro_ops()? {
            match m {
                MicroOp::Send { key, offset, value } => {
                    self.acked.entry(key).or_default().push(Acked {
                        offset,
                        value,
                        index: op.index,
                        time: op.time,
                        node: op.node.clone(),
                    })
                }
                MicroOp::Poll(reads) if op.r#final => {
                    self.final_reads += 1;
                    for (key, records) in reads {
                        let cover = self.final_coverage.entry(key.clone()).or_default();
                        if let Some(hw) = op.high_watermarks.as_ref().and_then(|h| h.get(&key)) {
                            *cover = (*cover).max(*hw);
                        }
                        if let Some((o, _)) = records.last() {
                            *cover = (*cover).max(o + 1);
                        }
                        self.final_values
                            .entry(key)
                            .or_default()
                            .extend(records.iter().map(|(_, v)| *v));
                    }
                }
                MicroOp::Poll(_) => {}
            }
        }
        Ok(())
    }

    fn finish(self, settings: &BasicCheckSettings) -> CheckResults {
        let empty = HashSet::new();
        let mut lost = Vec::new();
        let mut unconfirmed = Vec::new();
        let mut acked_total = 0u64;
        for (key, sends) in &self.acked {
            let seen = self.final_values.get(key).unwrap_or(&empty);
            let cover = self.final_coverage.get(key).copied().unwrap_or(0);
            for a in sends {
                acked_total += 1;
                if seen.contains(&a.value) {
                    continue;
                }
                let example = json!({
                    "key": key, "value": a.value, "offset": a.offset, "index": a.index,
                    "time": a.time, "node": a.node, "final_coverage": cover,
                });
                match a.offset {
                    Some(o) if o < cover => lost.push((a.index, example)),
                    _ => unconfirmed.push((a.index, example)),
                }
            }
        }
        lost.sort_by_key(|(i, _)| *i);
        unconfirmed.sort_by_key(|(i, _)| *i);

        let mut anomalies = BTreeMap::new();
        let mut valid = Validity::Valid;
        if !lost.is_empty() {
            let violation = settings.durability_promised();
            if violation {
                valid = Validity::Invalid;
            }
            anomalies.insert(
                "lost-write".to_string(),
                Anomaly {
                    count: lost.len() as u64,
                    examples: lost
                        .iter()
                        .take(EXAMPLES_MAX)
                        .map(|(_, e)| e.clone())
                        .collect(),
                    violation,
                    note: if violation {
                        "acks=all without unclean leader election promises that acknowledged \
                         writes survive"
                            .into()
                    } else {
                        format!(
                            "acks={} / unclean.leader.election.enable={} may lose acknowledged \
                             writes: expected under these settings",
                            settings.acks, settings.unclean_leader_election
                        )
                    },
                },
            );
        }
        if !unconfirmed.is_empty() {
            valid = valid.and(Validity::Unknown);
            anomalies.insert(
                "unconfirmed-write".to_string(),
                Anomaly {
                    count: unconfirmed.len() as u64,
                    examples: unconfirmed
                        .iter()
                        .take(EXAMPLES_MAX)
                        .map(|(_, e)| e.clone())
                        .collect(),
                    violation: false,
                    note: "the final reads did not reach these acknowledged offsets".into(),
                },
            );
        }
        let final_coverage: BTreeMap<&Key, u64> =
            self.final_coverage.iter().map(|(k, v)| (k, *v)).collect();
        CheckResults {
            valid,
            anomalies,
            stats: json!({
                "checker": "basic",
                "ops": self.ops,
                "nemesis_ops": self.nemesis_ops,
                "completions": self.counts,
                "acked_sends": acked_total,
                "lost_writes": lost.len(),
                "final_reads": self.final_reads,
                "final_coverage": final_coverage,
                "time_end_ns": self.time_end_ns,
            }),
        }
    }
}

/// Checks ops from any iterator (tests, or a history already in memory).
pub fn check_ops<'a>(
    ops: impl IntoIterator<Item = &'a Op>,
    settings: &BasicCheckSettings,
) -> Result<CheckResults, FormatError> {
    let mut state = State::default();
    for op in ops {
        state.add(op)?;
    }
    Ok(state.finish(settings))
}

/// Streams a `history.jsonl` and checks it. Errors name the bad line.
pub fn check_reader(
    reader: impl BufRead,
    settings: &BasicCheckSettings,
) -> Result<CheckResults, FormatError> {
    let mut state = State::default();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| FormatError(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let op: Op =
            serde_json::from_str(&line).map_err(|e| FormatError(format!("line {}: {e}", n + 1)))?;
        state
            .add(&op)
            .map_err(|e| FormatError(format!("line {}: {e}", n + 1)))?;
    }
    Ok(state.finish(settings))
}

/// Reads `unclean.leader.election.enable` and acks from a config's settings.
pub fn settings_from(acks: &str, sets: &BTreeMap<String, String>) -> BasicCheckSettings {
    BasicCheckSettings {
        acks: acks.to_string(),
        unclean_leader_election: sets
            .get("unclean.leader.election.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
    }
}

/// Used by results consumers that want the example list of one anomaly.
pub fn examples(results: &CheckResults, name: &str) -> Vec<Value> {
    results
        .anomalies
        .get(name)
        .map(|a| a.examples.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Vec<Op> {
        tidewater_workloads::history::read_history(lines.join("\n").as_bytes()).unwrap()
    }

    const ALL: fn() -> BasicCheckSettings = || BasicCheckSettings {
        acks: "all".into(),
        unclean_leader_election: false,
    };

    #[test]
    fn a_covered_acknowledged_send_missing_from_final_reads_is_lost() {
        let ops = parse(&[
            r#"{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[0,10]]],"node":"n1"}"#,
            r#"{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[1,11]]]}"#,
            r#"{"index":2,"time":3,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,10],[1,99]]}]],"high_watermarks":{"t0/0":2},"final":true}"#,
        ]);
        let r = check_ops(&ops, &ALL()).unwrap();
        assert_eq!(r.valid, Validity::Invalid);
        let lost = &r.anomalies["lost-write"];
        assert_eq!(lost.count, 1);
        assert!(lost.violation);
        assert_eq!(lost.examples[0]["value"], 11);
        assert_eq!(lost.examples[0]["offset"], 1);
        assert_eq!(r.stats["acked_sends"], 2);
    }

    #[test]
    fn lost_writes_under_acks_1_are_reported_but_not_violations() {
        let ops = parse(&[
            r#"{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[0,10]]]}"#,
            r#"{"index":1,"time":3,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,77]]}]],"final":true}"#,
        ]);
        let settings = BasicCheckSettings {
            acks: "1".into(),
            unclean_leader_election: false,
        };
        let r = check_ops(&ops, &settings).unwrap();
        assert_eq!(r.valid, Validity::Valid);
        assert_eq!(r.anomalies["lost-write"].count, 1);
        assert!(!r.anomalies["lost-write"].violation);
    }

    #[test]
    fn sends_beyond_the_final_reads_make_the_verdict_unknown() {
        let ops = parse(&[
            r#"{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send","t0/1",[5,10]]]}"#,
            r#"{"index":1,"time":2,"process":0,"type":"info","f":"send","value":[["send","t0/1",12]]}"#,
            r#"{"index":2,"time":3,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/1":[[0,1]]}]],"high_watermarks":{"t0/1":3},"final":true}"#,
        ]);
        let r = check_ops(&ops, &ALL()).unwrap();
        assert_eq!(r.valid, Validity::Unknown);
        assert_eq!(r.anomalies["unconfirmed-write"].count, 1);
        assert!(!r.anomalies.contains_key("lost-write"));
    }

    #[test]
    fn non_final_reads_do_not_count_and_everything_read_is_valid() {
        let ops = parse(&[
            r#"{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[0,10]]]}"#,
            r#"{"index":1,"time":2,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,10]]}]]}"#,
            r#"{"index":2,"time":3,"process":"nemesis","type":"info","f":"start-kill","value":["n1"]}"#,
        ]);
        let r = check_ops(&ops, &ALL()).unwrap();
        assert_eq!(r.valid, Validity::Unknown, "no final read covers offset 0");
        let mut with_final = ops.clone();
        with_final.extend(parse(&[
            r#"{"index":3,"time":4,"process":2,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,10]]}]],"final":true}"#,
        ]));
        let r = check_ops(&with_final, &ALL()).unwrap();
        assert_eq!(r.valid, Validity::Valid);
        assert!(r.anomalies.is_empty());
        assert_eq!(r.stats["nemesis_ops"], 1);
    }

    #[test]
    fn streaming_names_the_bad_line_and_reads_settings() {
        let err = check_reader("\n{\"nope\":1}\n".as_bytes(), &ALL()).unwrap_err();
        assert!(err.0.starts_with("line 2:"), "{err}");
        let sets = BTreeMap::from([(
            "unclean.leader.election.enable".to_string(),
            "TRUE".to_string(),
        )]);
        assert!(settings_from("all", &sets).unclean_leader_election);
        assert!(!settings_from("all", &sets).durability_promised());
    }
}
