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

use super::found::{Found, Verdicts};
use super::{CheckSettings, Checker, Outcome, NONE};
use crate::history::Val;
use crate::nemesis::Fault;
use crate::results::{CheckResults, Promise, Validity};
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
    /// `aborted-read` instances whose value an aborted transaction sent (not a failed send).
    aborted_txn_reads: u64,
    /// Acknowledged values per key.
    acked_by_key: Vec<u64>,
    /// Acknowledged values that are gone, per key: lost writes, and unseen ones once the
    /// final reads completed (`stats.lost_acknowledged`).
    lost_by_key: Vec<u64>,
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
    // Final reads count as complete only when the history holds some: a prefix of a history
    // (or one whose runner gave up reading) cannot show what the log held at the end.
    let final_completed = c.settings.final_reads_completed && c.counters.final_ok > 0;
    c.settings.final_reads_completed = final_completed;
    // The promise under power loss depends on how many brokers were down at once.
    c.settings.power_lost_at_once =
        u32::try_from(c.faults.most_at_once(&Fault::PowerLoss)).unwrap_or(u32::MAX);
    let (mut instances, counts, gone_by_key) = value_pass(&c, final_completed);
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
    explain_resets_after_loss(&c, &mut findings, &gone_by_key);
    hanging_transactions(&c, &mut findings, final_completed);
    let hw_classes = classify_regressions(&c, &mut findings, &gone_by_key, final_completed);
    let txns = super::txn::finish(&c, &mut findings);
    let settings = c.settings.clone();
    let anomalies = findings.into_anomalies(|name, found: &Found| {
        match name {
            "hw-regression" => return judge_regressions(&settings, &hw_classes),
            "G1c" => {
                let j = settings.judge_g1c(txns.g1c_wr_only);
                return Verdicts {
                    invalidates: txns.g1c_wr_only > 0,
                    breaks_promise: j.breaks_promise,
                    note: j.note,
                };
            }
            "aborted-read" if counts.aborted_txn_reads > 0 => {
                let j = settings.judge_aborted_reads(counts.aborted_txn_reads, found.count);
                return Verdicts {
                    invalidates: true,
                    breaks_promise: j.breaks_promise,
                    note: j.note,
                };
            }
            _ => {}
        }
        let j = settings.judge(name);
        let counting = found.counting > 0;
        Verdicts {
            invalidates: counting && settings.invalidates(name),
            breaks_promise: counting && j.breaks_promise,
            note: j.note,
        }
    });
    let unknown_reasons = unknown_reasons(&c, &counts);
    let valid = if anomalies.values().any(|a| a.invalidates) {
        Validity::Invalid
    } else if !unknown_reasons.is_empty() {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let (promise, promise_reason) = promise(&settings, &anomalies, valid, &unknown_reasons);
    let mut stats = stats(&mut c, &counts, &anomalies, &hw_classes, unknown_reasons);
    if let Some(t) = txns.stats {
        stats["transactions"] = t;
    }
    CheckResults {
        valid,
        promise,
        promise_reason,
        anomalies,
        stats,
    }
}

/// `hanging-transaction`: with transactional producers and read_committed final reads that
/// did not complete, a key whose final reads stood at one last stable offset for longer than
/// a transaction may stay open (`transaction.timeout.ms` plus the coordinator's check
/// interval, [`CheckSettings::hanging_after_ms`]) while acknowledged writes lie at or above
/// it: an open transaction no coordinator ended, which keeps every later record from
/// read_committed consumers (KAFKA-12671, KIP-664).
fn hanging_transactions(c: &Checker, findings: &mut super::Findings, final_completed: bool) {
    if final_completed
        || !c.settings.transactional
        || !c.settings.isolation_level.is_read_committed()
    {
        return;
    }
    let hanging_after_ns = c.settings.hanging_after_ms().saturating_mul(1_000_000);
    let mut above: Vec<(u64, u64)> = vec![(0, u64::MAX); c.keys.len()];
    for state in c.values.values() {
        if state.outcome == Outcome::Ok && state.ack_offset != NONE {
            let Some(stall) = c.keys[state.key as usize].final_stall else {
                continue;
            };
            if state.ack_offset >= stall.offset {
                let a = &mut above[state.key as usize];
                a.0 += 1;
                a.1 = a.1.min(state.ack_offset);
            }
        }
    }
    for (key, k) in c.keys.iter().enumerate() {
        let Some(stall) = k.final_stall else { continue };
        let (count, first) = above[key];
        let stalled_ns = stall.last_ns.saturating_sub(stall.since_ns);
        if count == 0 || stalled_ns < hanging_after_ns {
            continue;
        }
        findings.add("hanging-transaction", true, || {
            json!({
                "key": k.name,
                "last_stable_offset": stall.offset,
                "acknowledged_above": count,
                "first_acknowledged_above": first,
                // Tenths of a second: the reads' own timing is no finer.
                "stalled_s": (stalled_ns as f64 / 1e8).round() / 10.0,
                "final_reads": stall.reads,
            })
        });
    }
}

/// High-watermark regressions: only the `data-loss` class invalidates the history; whether
/// a class breaks the promise depends on the settings.
fn judge_regressions(settings: &CheckSettings, hw_classes: &BTreeMap<String, u64>) -> Verdicts {
    let mut v = Verdicts::default();
    let mut notes = Vec::new();
    for (class, n) in hw_classes {
        if *n > 0 && class != "unknown" {
            let j = settings.judge_hw_regression(class);
            v.breaks_promise |= j.breaks_promise;
            v.invalidates |= class == "data-loss";
            notes.push(format!("{class} ({n}): {}", j.note));
        }
    }
    if hw_classes.get("unknown").copied().unwrap_or(0) > 0 {
        notes.push("unclassified: the final reads did not complete".into());
    }
    v.note = notes.join("; ");
    v
}

/// Why the run cannot be judged valid even though nothing invalid was found: final reads
/// missing or incomplete, problems with the history, or a run that tested nothing (no
/// acknowledged write, a partition below the floor, none of the requested faults injected).
fn unknown_reasons(c: &Checker, counts: &ValueCounts) -> Vec<String> {
    let mut reasons = Vec::new();
    if !c.settings.final_reads_completed {
        if c.counters.final_ok == 0 {
            reasons.push(
                "the history has no ok final read (no op with \"final\": true), so it cannot show what the log held at the end"
                    .to_string(),
            );
        } else {
            reasons.push("the final reads did not complete".to_string());
        }
    }
    if c.problem_count > 0 {
        reasons.push(format!(
            "{} problem(s) with the history itself (see stats.problems)",
            c.problem_count
        ));
    }
    if counts.acked == 0 {
        reasons.push(format!(
            "nothing was tested: no send was acknowledged ({} sent, {} failed, {} indeterminate)",
            counts.sent, counts.failed, counts.info
        ));
    } else {
        let floor = c.settings.min_acked_per_key;
        let below: Vec<String> = c
            .sent_keys
            .iter()
            .enumerate()
            .filter(|&(key, &sent)| sent && counts.acked_by_key[key] < floor)
            .map(|(key, _)| format!("{} ({})", c.keys[key].name, counts.acked_by_key[key]))
            .collect();
        if !below.is_empty() {
            reasons.push(format!(
                "too little was tested: partitions with fewer than {floor} acknowledged write(s): {}",
                below.join(", ")
            ));
        }
    }
    reasons.extend(c.groups.untested_reason());
    let requested = &c.settings.faults_requested;
    if !requested.is_empty()
        && !requested
            .iter()
            .any(|f| c.faults.injected().contains_key(f))
    {
        reasons.push(format!(
            "nothing was tested under faults: none of the requested faults ({}) was injected",
            requested.join(", ")
        ));
    }
    reasons
}

/// Kafka's promise under the run's settings: broken when an anomaly the settings forbid was
/// seen; kept when the history is valid, or invalid only in ways the settings allow; unknown
/// when the run could not show it.
fn promise(
    settings: &CheckSettings,
    anomalies: &BTreeMap<String, crate::results::Anomaly>,
    valid: Validity,
    unknown_reasons: &[String],
) -> (Promise, String) {
    let broken: Vec<String> = anomalies
        .iter()
        .filter(|(_, a)| a.breaks_promise)
        .map(|(name, a)| format!("{name} ({})", a.count))
        .collect();
    if !broken.is_empty() {
        return (
            Promise::Broken,
            format!(
                "Kafka's promise broken under {}: {}",
                settings.describe(),
                broken.join(", ")
            ),
        );
    }
    if !unknown_reasons.is_empty() {
        return (Promise::Unknown, unknown_reasons.join("; "));
    }
    let loss = settings.loss_reasons();
    match valid {
        // Invalid with no loss permitted: the anomalies seen are ones the settings allow
        // otherwise (read_uncommitted consumers, a producer retrying without idempotence).
        Validity::Invalid if loss.is_empty() => {
            let allowed: Vec<String> = anomalies
                .iter()
                .filter(|(_, a)| a.invalidates)
                .map(|(name, a)| format!("{name} ({})", a.count))
                .collect();
            (
                Promise::Kept,
                format!(
                    "allowed by these settings ({}): {}",
                    settings.describe(),
                    allowed.join(", ")
                ),
            )
        }
        Validity::Invalid => (
            Promise::Kept,
            format!("allowed by these settings: {}", loss.join("; ")),
        ),
        _ => (
            Promise::Kept,
            format!("nothing was lost under {}", settings.describe()),
        ),
    }
}

/// A consumer whose position lay beyond the final end of a log that lost acknowledged
/// records was answered `OFFSET_OUT_OF_RANGE` and restarted lower: its nonmonotonic poll is a
/// consequence of the loss, and its example says so.
fn explain_resets_after_loss(
    c: &Checker,
    findings: &mut super::Findings,
    gone_by_key: &[Vec<u64>],
) {
    let Some(examples) = findings.examples_mut("nonmonotonic-poll") else {
        return;
    };
    for example in examples.iter_mut() {
        let Some(key) = example["key"].as_str().and_then(|k| c.key_ids.get(k)) else {
            continue;
        };
        let k = &c.keys[*key as usize];
        let (Some(from), Some(hw)) = (example["offsets"][0].as_u64(), k.final_hw) else {
            continue;
        };
        let lost = gone_by_key[*key as usize].len();
        if from >= hw && lost > 0 {
            example["after_loss"] = json!(true);
            example["explanation"] = json!(format!(
                "the consumer had read up to offset {from}, beyond the final end of {} (high watermark {hw}) after {lost} acknowledged record(s) were lost there; the broker answered OFFSET_OUT_OF_RANGE and the consumer restarted lower",
                k.name
            ));
        }
    }
}

/// Walks every value once. Returns the instances found, counts for `stats`, and per key the
/// sorted offsets of acknowledged values that are gone (lost or never seen by complete final
/// reads), for classifying high-watermark regressions.
fn value_pass(c: &Checker, final_completed: bool) -> (Vec<Instance>, ValueCounts, Vec<Vec<u64>>) {
    let mut out = Vec::new();
    let mut counts = ValueCounts::default();
    let mut gone_by_key: Vec<Vec<u64>> = vec![Vec::new(); c.keys.len()];
    counts.acked_by_key = vec![0; c.keys.len()];
    counts.lost_by_key = vec![0; c.keys.len()];
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
            let mut example = json!({"value": value, "offset": s.first_read_offset,
                "send_op": opt(s.invoke_op), "read_op": s.first_read_op});
            if s.by_txn {
                // G1a proper: the transaction that sent it aborted.
                counts.aborted_txn_reads += 1;
                example["aborted_txn"] = json!(true);
            }
            out.push(Instance {
                name: "aborted-read",
                key: s.first_read_key,
                offset: s.first_read_offset,
                value,
                example: ValueOrd(example),
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
        counts.acked_by_key[s.key as usize] += 1;
        if s.read_final {
            counts.acked_read_by_final += 1;
        }
        let k = &c.keys[s.key as usize];
        if s.read_ok {
            // Read once, yet absent from the final reads that covered its offset: the record
            // was visible and is now gone from the log (an unclean election or truncation
            // replaced it, or cut the log's tail below it). Jepsen would call this only an
            // inconsistent offset; for durability it is a lost acknowledged write, reported
            // with `read_before_loss`.
            let position = if s.ack_offset != NONE {
                s.ack_offset
            } else {
                s.first_read_offset
            };
            if s.read_final || !k.final_read {
                continue;
            }
            if position < k.final_log_start {
                counts.retention_excluded += 1;
                continue;
            }
            // Final reads page from the log start: with it reported they cover everything
            // from there; without it, only from the first offset they returned. Complete
            // final reads reached the final high watermark, so a record above it is gone too
            // (the log's tail was cut); incomplete ones prove only what they returned.
            let covered_from = if k.final_log_start_known {
                k.final_log_start
            } else {
                k.final_first.unwrap_or(0).max(k.final_log_start)
            };
            let covered = position >= covered_from
                && (final_completed || k.final_reach.is_some_and(|reach| position <= reach));
            if covered {
                gone_by_key[s.key as usize].push(position);
                counts.lost_by_key[s.key as usize] += 1;
                let beyond_end = k.final_hw.is_some_and(|hw| position >= hw);
                out.push(Instance {
                    name: "lost-write",
                    key: s.key,
                    offset: position,
                    value,
                    example: ValueOrd(json!({"value": value, "offset": position, "acks": acks,
                        "send_op": opt(s.invoke_op), "ack_op": s.ack_op,
                        "read_before_loss": true, "first_read_op": s.first_read_op,
                        "beyond_final_end": beyond_end, "final_high_watermark": k.final_hw,
                        "now_at_offset": final_value_at(c, s.key, position)})),
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
            counts.lost_by_key[s.key as usize] += 1;
            out.push(Instance {
                name: "lost-write",
                key: s.key,
                offset: s.ack_offset,
                value,
                example: ValueOrd(json!({"value": value, "offset": s.ack_offset, "acks": acks,
                    "send_op": opt(s.invoke_op), "ack_op": s.ack_op, "proving_read_op": proof})),
            });
        } else {
            if final_completed {
                counts.lost_by_key[s.key as usize] += 1;
                if s.ack_offset != NONE {
                    gone_by_key[s.key as usize].push(s.ack_offset);
                }
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

/// The value the final reads returned at `offset` of `key`, if any: the first value seen
/// there when the final reads returned it too, else the one they returned over another.
fn final_value_at(c: &Checker, key: u32, offset: u64) -> Option<Val> {
    let k = &c.keys[key as usize];
    if let Some(&v) = k.final_at.get(&offset) {
        return Some(v);
    }
    let &(first, _) = k.at_offset.get(&offset)?;
    let s = c.values.get(&first)?;
    (s.read_final && s.min_offset <= offset && offset <= s.max_offset).then_some(first)
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
    let lost_by_key: serde_json::Map<String, Value> = c
        .keys
        .iter()
        .zip(&counts.lost_by_key)
        .filter(|(_, &n)| n > 0)
        .map(|(k, &n)| (k.name.clone(), json!(n)))
        .collect();
    let lost_total: u64 = counts.lost_by_key.iter().sum();
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
        "lost_acknowledged": {
            "total": lost_total, "by_key": lost_by_key, "of_acked": counts.acked,
            "final_reads_completed": c.settings.final_reads_completed,
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
        "faults": {
            "requested": c.settings.faults_requested,
            "injected": c.faults.injected(),
            "failed": c.faults.failed(),
        },
        "fault_windows": c.faults.windows(),
    })
}
