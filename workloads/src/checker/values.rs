//! The end of the history: passes that need every op, over values and offsets only.
//!
//! - `lost-write`: acknowledged, never returned by an ok read, at an offset at or below what
//!   ok reads (or the final reads' high watermark) reached on its key; or acknowledged and read
//!   once, but absent from the final reads that covered its offset (`read_before_loss`).
//! - `unseen`: acknowledged, never returned by an ok read, and not provably lost.
//! - `duplicate`: a value at two offsets (its lowest and highest offset differ).
//! - `aborted-read`: a value read whose send failed.
//! - `unexpected`: a value read that no op sent (or read on another key than it was sent to).
//! - `group-undelivered`: acknowledged below a group's committed offset, never polled by a
//!   group member.
//! - candidate skips resolved in dense positions; `hw-regression` classified.
//!
//! Instances are sorted (by key, offset, value) before they become examples, so results are
//! deterministic even though values live in a hash map.

use super::found::Found;
use super::{Checker, Outcome, NONE};
use crate::results::{CheckResults, Validity};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One finding of the value pass, sortable so that examples do not depend on hash order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Instance {
    name: &'static str,
    key: u32,
    offset: u64,
    value: i64,
    example: ValueOrd,
}

/// A JSON example that sorts as equal to every other (order comes from the other fields).
#[derive(Debug, Clone)]
struct ValueOrd(Value);

impl PartialEq for ValueOrd {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for ValueOrd {}
impl PartialOrd for ValueOrd {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ValueOrd {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

fn opt(x: u64) -> Value {
    if x == NONE {
        Value::Null
    } else {
        json!(x)
    }
}

/// Counts of acknowledged values, for `stats`.
#[derive(Debug, Default)]
struct ValueCounts {
    sent: u64,
    acked: u64,
    failed: u64,
    info: u64,
    info_proven: u64,
    pending: u64,
    read: u64,
    acked_read_by_final: u64,
    retention_excluded: u64,
}

pub(super) fn finish(mut c: Checker) -> CheckResults {
    // Info sends that a read proved join the offset map with the offsets they reported.
    for (key, offset, value, op) in std::mem::take(&mut c.info_offsets) {
        if c.values
            .get(&value)
            .is_some_and(|s| s.first_read_op != NONE)
        {
            c.note_offset(key, offset, value, op);
        }
    }
    let final_completed = c.settings.final_reads_completed && c.counters.final_ok > 0;
    let (mut instances, counts, lost_by_key) = value_pass(&c, final_completed);
    resolve_gaps(&c, &mut instances);
    instances.sort();
    let key_names: Vec<String> = c.keys.iter().map(|k| k.name.clone()).collect();
    let mut findings = std::mem::replace(&mut c.findings, super::Findings::new(0));
    for inst in instances {
        let name = inst.name;
        let counts_against = match name {
            "poll-skip" | "int-poll-skip" => inst.example.0["subscribe"] != json!(true),
            _ => true,
        };
        let mut example = inst.example.0;
        example["key"] = json!(key_names[inst.key as usize]);
        findings.add(name, counts_against, || example);
    }
    let hw_classes = classify_regressions(&c, &mut findings, &lost_by_key, final_completed);
    let settings = c.settings.clone();
    let anomalies = findings.into_anomalies(|name, found: &Found| {
        if name == "hw-regression" {
            let mut violation = false;
            let mut notes = Vec::new();
            for (class, n) in &hw_classes {
                if *n > 0 && class != "unknown" {
                    let j = settings.judge_hw_regression(class);
                    violation |= j.violation;
                    notes.push(format!("{class} ({n}): {}", j.note));
                }
            }
            if hw_classes.get("unknown").copied().unwrap_or(0) > 0 {
                notes.push("unclassified: the final reads did not complete".into());
            }
            return (violation, notes.join("; "));
        }
        let j = settings.judge(name);
        (j.violation && found.counting > 0, j.note)
    });
    let invalid = anomalies.values().any(|a| a.violation);
    let mut unknown_reasons = Vec::new();
    if !c.settings.final_reads_completed {
        unknown_reasons.push("the final reads did not complete".to_string());
    } else if c.counters.final_ok == 0 {
        unknown_reasons
            .push("the history has no ok final read (no op with \"final\": true)".to_string());
    }
    if c.problem_count > 0 {
        unknown_reasons.push(format!(
            "{} problem(s) with the history itself (see stats.problems)",
            c.problem_count
        ));
    }
    let valid = if invalid {
        Validity::Invalid
    } else if !unknown_reasons.is_empty() {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let stats = stats(&mut c, &counts, &anomalies, &hw_classes, unknown_reasons);
    CheckResults {
        valid,
        anomalies,
        stats,
    }
}

/// Walks every value once. Returns the instances found, counts for `stats`, and per key the
/// sorted offsets of acknowledged values that are gone (lost or never seen by complete final
/// reads), for classifying high-watermark regressions.
fn value_pass(c: &Checker, final_completed: bool) -> (Vec<Instance>, ValueCounts, Vec<Vec<u64>>) {
    let mut out = Vec::new();
    let mut counts = ValueCounts::default();
    let mut gone_by_key: Vec<Vec<u64>> = vec![Vec::new(); c.keys.len()];
    let acks = c.settings.acks.as_str();
    let committed = c.groups.committed_by_key(c.keys.len());
    for (&value, s) in &c.values {
        let read_any = s.first_read_op != NONE;
        counts.read += read_any as u64;
        match s.outcome {
            Outcome::NotSent => {}
            Outcome::Pending => counts.pending += 1,
            Outcome::Ok => counts.acked += 1,
            Outcome::Fail => counts.failed += 1,
            Outcome::Info => {
                counts.info += 1;
                counts.info_proven += read_any as u64;
            }
        }
        counts.sent += (s.outcome != Outcome::NotSent) as u64;
        if s.min_offset != s.max_offset {
            out.push(Instance {
                name: "duplicate",
                key: s.key,
                offset: s.min_offset,
                value,
                example: ValueOrd(json!({"value": value, "offsets": [s.min_offset, s.max_offset],
                    "send_op": opt(s.invoke_op), "ack_offset": opt(s.ack_offset), "first_read_op": opt(s.first_read_op)})),
            });
        }
        if read_any && s.outcome == Outcome::Fail {
            out.push(Instance {
                name: "aborted-read",
                key: s.first_read_key,
                offset: s.first_read_offset,
                value,
                example: ValueOrd(json!({"value": value, "offset": s.first_read_offset,
                    "send_op": opt(s.invoke_op), "read_op": s.first_read_op})),
            });
        }
        if read_any && (s.outcome == Outcome::NotSent || s.first_read_key != s.key) {
            let sent_to =
                (s.outcome != Outcome::NotSent).then(|| c.keys[s.key as usize].name.clone());
            out.push(Instance {
                name: "unexpected",
                key: s.first_read_key,
                offset: s.first_read_offset,
                value,
                example: ValueOrd(json!({"value": value, "offset": s.first_read_offset,
                    "read_op": s.first_read_op, "sent_to": sent_to})),
            });
        }
        // Delivery concerns every record in the log: acknowledged or proven by a read.
        let in_log = s.outcome == Outcome::Ok || (s.outcome == Outcome::Info && read_any);
        let position = if s.ack_offset != NONE {
            s.ack_offset
        } else {
            s.min_offset
        };
        if let Some((group, max)) = committed[s.key as usize] {
            if in_log && !s.read_group && position != NONE && position < max {
                out.push(Instance {
                    name: "group-undelivered",
                    key: s.key,
                    offset: position,
                    value,
                    example: ValueOrd(json!({"value": value, "offset": position, "group": group,
                        "committed": max, "ack_op": opt(s.ack_op)})),
                });
            }
        }
        if s.outcome != Outcome::Ok {
            continue;
        }
        if s.read_final {
            counts.acked_read_by_final += 1;
        }
        let k = &c.keys[s.key as usize];
        if s.read_ok {
            // Read once, yet absent from the final reads that covered its offset: the record
            // was visible and is now gone from the log (an unclean election or truncation
            // replaced it). Jepsen would call this only an inconsistent offset; for durability
            // it is a lost acknowledged write, reported with `read_before_loss`.
            let position = if s.ack_offset != NONE {
                s.ack_offset
            } else {
                s.first_read_offset
            };
            let gone_at_end = !s.read_final
                && position >= k.final_log_start
                && k.final_first.is_some_and(|first| position >= first)
                && k.final_reach.is_some_and(|reach| position <= reach);
            if gone_at_end {
                gone_by_key[s.key as usize].push(position);
                out.push(Instance {
                    name: "lost-write",
                    key: s.key,
                    offset: position,
                    value,
                    example: ValueOrd(json!({"value": value, "offset": position, "acks": acks,
                        "send_op": opt(s.invoke_op), "ack_op": s.ack_op,
                        "read_before_loss": true, "first_read_op": s.first_read_op})),
                });
            }
            continue;
        }
        if s.ack_offset != NONE && s.ack_offset < k.final_log_start {
            // Possibly deleted by retention before anyone read it: proves nothing.
            counts.retention_excluded += 1;
            continue;
        }
        let lost = s.ack_offset != NONE && k.reach_max().is_some_and(|max| s.ack_offset <= max);
        if lost {
            let proof = k
                .proving_read(s.ack_offset)
                .map_or(Value::Null, |op| json!(op));
            gone_by_key[s.key as usize].push(s.ack_offset);
            out.push(Instance {
                name: "lost-write",
                key: s.key,
                offset: s.ack_offset,
                value,
                example: ValueOrd(json!({"value": value, "offset": s.ack_offset, "acks": acks,
                    "send_op": opt(s.invoke_op), "ack_op": s.ack_op, "proving_read_op": proof})),
            });
        } else {
            if final_completed && s.ack_offset != NONE {
                gone_by_key[s.key as usize].push(s.ack_offset);
            }
            out.push(Instance {
                name: "unseen",
                key: s.key,
                offset: s.ack_offset,
                value,
                example: ValueOrd(
                    json!({"value": value, "offset": opt(s.ack_offset), "acks": acks,
                    "send_op": opt(s.invoke_op), "ack_op": s.ack_op, "reach": k.reach_max()}),
                ),
            });
        }
    }
    for gone in &mut gone_by_key {
        gone.sort_unstable();
    }
    (out, counts, gone_by_key)
}

/// Turns candidate skips into anomalies when a known value lies strictly inside the gap,
/// i.e. when the step is more than one dense position.
fn resolve_gaps(c: &Checker, out: &mut Vec<Instance>) {
    if c.order.gaps.is_empty() {
        return;
    }
    let mut known: Vec<Option<Vec<u64>>> = vec![None; c.keys.len()];
    for gap in &c.order.gaps {
        let offsets = known[gap.key as usize].get_or_insert_with(|| {
            let mut o: Vec<u64> = c.keys[gap.key as usize].at_offset.keys().copied().collect();
            o.sort_unstable();
            o
        });
        let lo = offsets.partition_point(|&o| o <= gap.from);
        let hi = offsets.partition_point(|&o| o < gap.to);
        if hi > lo {
            let at_offset = &c.keys[gap.key as usize].at_offset;
            let skipped: Vec<Value> = offsets[lo..hi.min(lo + 5)]
                .iter()
                .map(|o| json!([o, at_offset[o].0]))
                .collect();
            out.push(Instance {
                name: gap.kind,
                key: gap.key,
                offset: gap.from,
                value: gap.to as i64,
                example: ValueOrd(
                    json!({"process": gap.process, "offsets": [gap.from, gap.to],
                    "ops": [gap.from_op, gap.to_op], "skipped_count": hi - lo,
                    "skipped": skipped, "subscribe": gap.subscribe}),
                ),
            });
        }
    }
}

/// Classifies every regression as `visibility-only` (every acknowledged record between B's
/// and A's high watermark is still there at the end) or `data-loss`, or `unknown` without
/// complete final reads. Adds them to the findings; returns the count per class.
fn classify_regressions(
    c: &Checker,
    findings: &mut super::Findings,
    gone_by_key: &[Vec<u64>],
    final_completed: bool,
) -> BTreeMap<String, u64> {
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    for r in &c.watermarks.regressions {
        let k = &c.keys[r.key as usize];
        let gone = &gone_by_key[r.key as usize];
        let lo = gone.partition_point(|&o| o < r.b_hw);
        let hi = gone.partition_point(|&o| o < r.a_hw);
        let class = if !final_completed || !k.final_read {
            "unknown"
        } else if k.final_hw.is_some_and(|hw| hw < r.a_hw) || hi > lo {
            "data-loss"
        } else {
            "visibility-only"
        };
        *classes.entry(class.to_string()).or_default() += 1;
        let lost: Vec<u64> = gone[lo..hi.min(lo + 5)].to_vec();
        findings.add("hw-regression", true, || {
            json!({"key": k.name, "class": class, "high_watermarks": [r.a_hw, r.b_hw],
                   "ops": [r.a_op, r.b_op], "final_hw": k.final_hw, "lost_offsets": lost})
        });
    }
    classes
}

fn stats(
    c: &mut Checker,
    counts: &ValueCounts,
    anomalies: &BTreeMap<String, crate::results::Anomaly>,
    hw_classes: &BTreeMap<String, u64>,
    unknown_reasons: Vec<String>,
) -> Value {
    let ops_by_f: serde_json::Map<String, Value> = c
        .counters
        .by_f
        .iter()
        .map(|(f, n)| {
            (
                f.clone(),
                json!({"invoke": n[0], "ok": n[1], "fail": n[2], "info": n[3]}),
            )
        })
        .collect();
    let acks = c.settings.acks.as_str();
    let lost = anomalies.get("lost-write").map_or(0, |a| a.count);
    let mut unseen_series = std::mem::take(&mut c.unseen.points);
    let end = [c.counters.last_time_ns, c.unseen.count.max(0) as u64];
    if unseen_series.last() != Some(&end) {
        unseen_series.push(end);
    }
    let final_keys: Vec<Value> = c
        .keys
        .iter()
        .filter(|k| k.final_read)
        .map(|k| {
            json!({"key": k.name, "high_watermark": k.final_hw, "log_start_offset": k.final_log_start,
                   "records": k.final_records})
        })
        .collect();
    let coverage = if counts.acked == 0 {
        Value::Null
    } else {
        json!(counts.acked_read_by_final as f64 / counts.acked as f64)
    };
    json!({
        "ops": c.counters.ops,
        "ops_by_f": ops_by_f,
        "keys": c.keys.len(),
        "sends": {
            "values": counts.sent, "acked": counts.acked, "failed": counts.failed,
            "info": counts.info, "info_proven": counts.info_proven, "pending": counts.pending,
        },
        "acked_sends_by_acks": {acks: counts.acked},
        "lost_writes_by_acks": {acks: lost},
        "reads": {"ok_polls": c.counters.ok_polls, "records": c.counters.records_read, "values": counts.read},
        "final_reads": {
            "completed": c.settings.final_reads_completed && c.counters.final_ok > 0,
            "ops": c.counters.final_ops, "ok": c.counters.final_ok,
            "acked_values_read": counts.acked_read_by_final, "coverage": coverage,
            "keys": final_keys,
        },
        "unseen_final": anomalies.get("unseen").map_or(0, |a| a.count),
        "unseen_series": unseen_series,
        "hw_regressions": hw_classes,
        "retention_excluded": counts.retention_excluded,
        "groups": c.groups.group_count(),
        "rebalances": c.groups.rebalance_stats(),
        "redeliveries": c.groups.redelivery_stats(),
        "settings": c.settings,
        "problem_count": c.problem_count,
        "problems": c.problems,
        "unknown_reasons": unknown_reasons,
    })
}
