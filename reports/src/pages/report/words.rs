//! Sentences that say what an anomaly example shows, built from its fields (docs/checkers.md
//! defines them), with links to the operations it names: "t0/0: value 13, acknowledged at
//! offset 3 by op 9 and read by op 11, is gone from the final reads; offset 3 now holds 20."
//!
//! An example whose anomaly has no sentence here, or that lacks the fields its sentence
//! needs, gets none; its fields are still shown in the table.

use crate::html::esc;
use crate::pages::report::examples::op_link;
use crate::scan::run_files::{config_settings, display_value, lost_acknowledged};
use serde_json::Value;
use tidewater_workloads::results::{CheckResults, Standing, Validity};

/// What the settings of a run allow to be lost, in a few words: `acks=1`, `unclean
/// election`, and the broker's unsafe switches.
fn loss_allowances(config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let acks = display_value(config.get("acks"));
    if acks == "0" || acks == "1" {
        out.push(format!("acks={acks}"));
    }
    let settings = config_settings(config);
    let on = |name: &str| {
        settings
            .get(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    };
    for (name, words) in [
        ("unclean.leader.election.enable", "unclean election"),
        (
            "tidewater.unsafe.truncate.to.hw.enable",
            "truncation to the high watermark",
        ),
        (
            "tidewater.unsafe.serve.lagging.hw.enable",
            "lagging high watermarks served",
        ),
    ] {
        if on(name) {
            out.push(words.to_string());
        }
    }
    out
}

/// The run's headline: what was lost, and whether the settings allow it. "DATA LOST: 557 of
/// 1750 acknowledged writes; allowed by acks=1 + unclean election", "no acknowledged write
/// lost; 61% of sends acknowledged", "UNKNOWN: ...". The figure is `stats.lost_acknowledged`;
/// the promise's full reason follows on the page.
pub fn headline(results: &CheckResults, config: &Value) -> String {
    let (lost, acked) = (lost_acknowledged(results), results.acknowledged());
    let judged = match results.standing() {
        Standing::Broken => "Kafka's promise broken".to_string(),
        _ => {
            let allowances = loss_allowances(config);
            if allowances.is_empty() {
                "allowed by these settings".to_string()
            } else {
                format!("allowed by {}", allowances.join(" + "))
            }
        }
    };
    let send = &results.stats["ops_by_f"]["send"];
    let mut share = match (send["ok"].as_u64(), send["invoke"].as_u64()) {
        (Some(ok), Some(n)) if n > 0 => {
            format!(
                "; {:.0}% of sends acknowledged",
                100.0 * ok as f64 / n as f64
            )
        }
        _ => String::new(),
    };
    if let Some([committed, aborted, unknown]) = txn_counts(results) {
        let all = committed + aborted + unknown;
        if all > 0 {
            share.push_str(&format!("; {committed} of {all} transactions committed"));
        }
    }
    // Results written before stats.sends existed do not say how many were acknowledged.
    let of_acked = if acked > 0 {
        format!(" of {acked}")
    } else {
        String::new()
    };
    match results.valid {
        Validity::Invalid if lost > 0 => {
            format!("DATA LOST: {lost}{of_acked} acknowledged writes; {judged}")
        }
        Validity::Invalid => {
            format!("INVALID: anomalies seen, no acknowledged write lost; {judged}")
        }
        Validity::Unknown if lost > 0 => format!(
            "DATA LOST: {lost}{of_acked} acknowledged writes; the verdict is unknown: {}",
            results.promise_reason
        ),
        Validity::Unknown => format!("UNKNOWN: {}", results.promise_reason),
        Validity::Valid => format!("no acknowledged write lost{share}"),
    }
}

/// `stats.transactions.txns` as [committed, aborted, unknown], when the transaction
/// analysis ran.
pub fn txn_counts(results: &CheckResults) -> Option<[u64; 3]> {
    let t = results.stats.get("transactions")?.get("txns")?;
    let n = |k: &str| t.get(k).and_then(Value::as_u64);
    Some([n("committed")?, n("aborted")?, n("unknown")?])
}

/// A field as display text (`?` when absent).
fn text(e: &Value, field: &str) -> String {
    match e.get(field) {
        None | Some(Value::Null) => "?".to_string(),
        Some(Value::String(s)) => esc(s),
        Some(v) => esc(&v.to_string()),
    }
}

/// Element `i` of a list field as display text.
fn nth(e: &Value, field: &str, i: usize) -> String {
    match e.get(field).and_then(|v| v.get(i)) {
        None | Some(Value::Null) => "?".to_string(),
        Some(Value::String(s)) => esc(s),
        Some(v) => esc(&v.to_string()),
    }
}

/// "op N" linked, when the field holds an op index.
fn op(e: &Value, field: &str) -> Option<String> {
    e.get(field)
        .and_then(Value::as_u64)
        .map(|i| format!("op {}", op_link(i)))
}

/// "op N" linked, for element `i` of a list field of op indexes.
fn op_nth(e: &Value, field: &str, i: usize) -> Option<String> {
    e.get(field)
        .and_then(|v| v.get(i))
        .and_then(Value::as_u64)
        .map(|i| format!("op {}", op_link(i)))
}

fn has(e: &Value, field: &str) -> bool {
    e.get(field).is_some_and(|v| !v.is_null())
}

/// `replica-divergence`: what each replica holds at the offset.
fn replica_divergence(e: &Value) -> String {
    let held: Vec<String> = e["replicas"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(node, r)| {
            format!(
                "{} holds value {} (leader epoch {}{})",
                esc(node),
                text(r, "value"),
                text(r, "leader_epoch"),
                if r["in_sync"] == false {
                    ", outside the ISR"
                } else {
                    ""
                }
            )
        })
        .collect();
    format!(
        "at offset {}, below the high watermark {} (leader {}), the replicas disagree: {}",
        text(e, "offset"),
        text(e, "high_watermark"),
        text(e, "leader"),
        held.join("; ")
    )
}

/// "op N" linked, when the field holds an op index or an op described as an object (the
/// transaction analysis writes `{"op": N, "invoke_op": ..., "f": ..., "type": ...}`).
fn op_any(e: &Value, field: &str) -> Option<String> {
    op(e, field).or_else(|| op(e.get(field)?, "op"))
}

/// What each anomaly is, in plain words, for the reader who does not know its name. The
/// definitions are docs/checkers.md's; whether it breaks Kafka's promise is the checker's
/// judgement (`breaks_promise`), never decided here.
pub fn explanation(name: &str) -> Option<&'static str> {
    Some(match name {
        "lost-write" => "An acknowledged write that the log no longer holds.",
        "unseen" => {
            "An acknowledged write that no read ever returned; it may only have been delayed."
        }
        "hw-regression" => {
            "A client saw a partition's high watermark go down: an operation observed a lower \
             one than an operation that had completed before it began."
        }
        "duplicate" => "One value sent once is in the log at two offsets.",
        "aborted-read" => {
            "A read returned a value whose send failed, or whose transaction aborted (G1a): \
             a write that should have had no effect was seen."
        }
        "unexpected" => "A read returned a value that no operation sent to that partition.",
        "inconsistent-offsets" => "Two reads saw different values at the same offset.",
        "replica-divergence" => {
            "Two in-sync replicas of a partition hold different records at one offset below \
             the high watermark: the replicas no longer agree on what was committed."
        }
        "under-min-isr-ack" => {
            "A write was acknowledged while the partition had fewer in-sync replicas than \
             min.insync.replicas."
        }
        "poll-skip" | "int-poll-skip" => {
            "A consumer's position jumped over records known to be in the log."
        }
        "nonmonotonic-poll" | "int-nonmonotonic-poll" => {
            "A consumer read a lower offset after a higher one: its position went back."
        }
        "nonmonotonic-send" | "int-nonmonotonic-send" => {
            "A producer's acknowledged offsets went back on a partition."
        }
        "send-skip" | "int-send-skip" => {
            "Two sends of one producer to a partition landed further apart than expected."
        }
        "group-split-ownership" => {
            "Two members of one consumer group owned the same partition in the same generation."
        }
        "commit-regression" => "A consumer group's committed offset went back.",
        "group-undelivered" => {
            "A record below a group's committed offset was never delivered to any member."
        }
        "precommitted-read" => {
            "A transaction's record was read before the transaction committed: by the \
             transaction itself, or by an operation that finished before the transaction began."
        }
        "intermediate-read" => {
            "A read ended part-way through one transaction's records on a partition: it saw \
             some of what the transaction sent there, but not its last value (G1b)."
        }
        "hanging-transaction" => {
            "After the producers stopped, a partition's last stable offset stayed below \
             acknowledged writes for longer than a transaction may stay open: a transaction no \
             coordinator ended hides them from read_committed consumers."
        }
        "G0" => {
            "Write cycle: transactions whose records are in one order on one partition and in \
             the other order on another (write-write edges only)."
        }
        "G1c" => {
            "Circular information flow: each transaction of the cycle read (wr) or appended \
             after (ww) the next, so none of them can have committed first."
        }
        "G-single" => {
            "Read skew: a cycle with exactly one read-write edge: a transaction saw one \
             partition before another transaction's write and a second partition after it."
        }
        "G2" => {
            "Write skew: a cycle with two or more read-write edges: transactions that each \
             missed the other's writes."
        }
        _ => return None,
    })
}

/// Steps named in a cycle's sentence at most; the drawing and the table have all.
const CYCLE_STEPS_IN_SENTENCE_MAX: usize = 8;

/// A cycle example (`ops`, `steps`, `edges`) in a line: "op #5 –ww t0/0→ op #6 –ww t0/1→
/// op #5 (2 ww edges)".
fn cycle_sentence(e: &Value) -> Option<String> {
    let steps = e.get("steps")?.as_array()?;
    let first = steps.first()?;
    let mut s = format!("op {}", op_link(first.get("from")?.as_u64()?));
    for step in steps.iter().take(CYCLE_STEPS_IN_SENTENCE_MAX) {
        let _ = std::fmt::Write::write_fmt(
            &mut s,
            format_args!(
                " –{} {}→ op {}",
                text(step, "kind"),
                text(step, "key"),
                op_link(step.get("to")?.as_u64()?)
            ),
        );
    }
    if steps.len() > CYCLE_STEPS_IN_SENTENCE_MAX {
        s.push_str(&format!(" … ({} steps in all)", steps.len()));
    }
    let edges: Vec<String> = e
        .get("edges")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, n)| format!("{n} {}", esc(k))).collect())
        .unwrap_or_default();
    if !edges.is_empty() {
        s.push_str(&format!(" ({} edges)", edges.join(", ")));
    }
    match e.get("wr_only").and_then(Value::as_bool) {
        Some(true) => s.push_str(
            "; write-read edges alone: each of these transactions read another's records \
             before that one committed",
        ),
        Some(false) => {
            s.push_str("; it needs a write-write edge: append order, which is not commit order")
        }
        None => {}
    }
    Some(s)
}

/// The sentence for example `e` of anomaly `name`, as HTML; `None` when there is none.
pub fn sentence(name: &str, e: &Value) -> Option<String> {
    if !e.is_object() {
        return None;
    }
    let key = text(e, "key");
    let s =
        match name.trim_start_matches("int-") {
            "lost-write" => lost_write(e),
            "unseen" => Some(format!(
                "value {}, acknowledged at offset {} by {}, was never returned by any read{}",
                text(e, "value"),
                text(e, "offset"),
                op(e, "ack_op")?,
                if has(e, "reach") {
                    format!(
                        " (reads of this partition reached offset {})",
                        text(e, "reach")
                    )
                } else {
                    String::new()
                }
            )),
            "duplicate" => Some(format!(
                "value {} is in the log twice, at offsets {} and {}{}",
                text(e, "value"),
                nth(e, "offsets", 0),
                nth(e, "offsets", 1),
                op(e, "send_op")
                    .map(|o| format!(" (sent by {o})"))
                    .unwrap_or_default()
            )),
            "aborted-read" if e.get("aborted_txn").and_then(Value::as_bool) == Some(true) => {
                Some(format!(
                    "{} read value {} at offset {}, though the transaction that sent it aborted \
                 (invoked as {})",
                    op(e, "read_op")?,
                    text(e, "value"),
                    text(e, "offset"),
                    op(e, "send_op").unwrap_or_else(|| "an op not in the history".into())
                ))
            }
            "aborted-read" => Some(format!(
                "{} read value {} at offset {}, though its send failed ({})",
                op(e, "read_op")?,
                text(e, "value"),
                text(e, "offset"),
                op(e, "send_op").unwrap_or_else(|| "no send op".into())
            )),
            "hanging-transaction" => Some(format!(
                "the final reads stood at last stable offset {} for {} s ({} reads), while {} \
                 acknowledged write(s) lay at or above it, the first at offset {}",
                text(e, "last_stable_offset"),
                text(e, "stalled_s"),
                text(e, "final_reads"),
                text(e, "acknowledged_above"),
                text(e, "first_acknowledged_above")
            )),
            "precommitted-read" if e.get("own_write").and_then(Value::as_bool) == Some(true) => {
                Some(format!(
                    "transaction {} read value {} at offset {}, which it had sent itself: it read \
                 its own write before it committed",
                    op_any(e, "op")?,
                    text(e, "value"),
                    text(e, "offset")
                ))
            }
            "precommitted-read" => Some(format!(
                "{} read value {} at offset {}, and completed before the transaction that sent it \
             ({}) was even invoked",
                op_any(e, "read_op")?,
                text(e, "value"),
                text(e, "offset"),
                op_any(e, "writer").unwrap_or_else(|| "an unknown op".into())
            )),
            "intermediate-read" => {
                Some(format!(
            "{}'s last read was value {} at offset {}, but transaction {} sent {} there: the \
             read saw only part of that transaction's writes to the key",
            op_any(e, "read_op")?,
            text(e, "value"),
            text(e, "offset"),
            op_any(e, "writer").unwrap_or_else(|| "?".into()),
            e.get("writer_values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().map(|v| esc(&v.to_string())).collect::<Vec<_>>().join(", "))
                .unwrap_or_else(|| "?".into())
        ))
            }
            "G0" | "G1c" | "G-single" | "G2" => cycle_sentence(e),
            "unexpected" => Some(format!(
                "{} read value {} at offset {}, {}",
                op(e, "read_op")?,
                text(e, "value"),
                text(e, "offset"),
                if has(e, "sent_to") {
                    format!("which was sent to {}", text(e, "sent_to"))
                } else {
                    "which no operation sent".to_string()
                }
            )),
            "replica-divergence" => Some(replica_divergence(e)),
            "inconsistent-offsets" => Some(format!(
                "offset {} held value {} ({}) and later value {} ({})",
                text(e, "offset"),
                nth(e, "values", 0),
                op_nth(e, "ops", 0)?,
                nth(e, "values", 1),
                op_nth(e, "ops", 1)?
            )),
            "nonmonotonic-poll" | "nonmonotonic-send" => {
                let what = if name.ends_with("poll") {
                    "read"
                } else {
                    "was acknowledged"
                };
                let mut s = format!(
                    "process {} {what} offset {} ({}) after offset {} ({}): its position went back",
                    text(e, "process"),
                    nth(e, "offsets", 1),
                    op_nth(e, "ops", 1)?,
                    nth(e, "offsets", 0),
                    op_nth(e, "ops", 0)?
                );
                if let Some(why) = e.get("explanation").and_then(Value::as_str) {
                    s.push_str(&format!(". Why: {}", esc(why)));
                }
                Some(s)
            }
            "poll-skip" | "send-skip" => Some(format!(
                "process {} went from offset {} ({}) to {} ({}), skipping {} record(s) known to \
             be in between",
                text(e, "process"),
                nth(e, "offsets", 0),
                op_nth(e, "ops", 0)?,
                nth(e, "offsets", 1),
                op_nth(e, "ops", 1)?,
                text(e, "skipped_count")
            )),
            "hw-regression" => Some(format!(
                "{} observed high watermark {} after {} had observed {} ({}){}",
                op_nth(e, "ops", 1)?,
                nth(e, "high_watermarks", 1),
                op_nth(e, "ops", 0)?,
                nth(e, "high_watermarks", 0),
                text(e, "class"),
                match e.get("lost_offsets").and_then(Value::as_array) {
                    Some(l) if !l.is_empty() => format!(
                        "; acknowledged records at offsets {} are gone",
                        l.iter()
                            .map(Value::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    _ => String::new(),
                }
            )),
            "group-split-ownership" => Some(format!(
            "in group {} generation {}, processes {} and {} both owned the partition ({} and {})",
            text(e, "group"),
            text(e, "generation"),
            nth(e, "processes", 0),
            nth(e, "processes", 1),
            op_nth(e, "ops", 0)?,
            op_nth(e, "ops", 1)?
        )),
            "commit-regression" => Some(format!(
                "group {}'s committed offset went back from {} ({}) to {} ({})",
                text(e, "group"),
                nth(e, "offsets", 0),
                op_nth(e, "ops", 0)?,
                nth(e, "offsets", 1),
                op_nth(e, "ops", 1)?
            )),
            "group-undelivered" => Some(format!(
                "value {} at offset {}, below group {}'s committed offset {}, was never delivered \
             to a member of the group",
                text(e, "value"),
                text(e, "offset"),
                text(e, "group"),
                text(e, "committed")
            )),
            _ => None,
        }?;
    Some(if key == "?" {
        format!("{s}.")
    } else {
        format!("{key}: {s}.")
    })
}

fn lost_write(e: &Value) -> Option<String> {
    let value = text(e, "value");
    let offset = text(e, "offset");
    let ack = op(e, "ack_op")?;
    let acks = if has(e, "acks") {
        format!(" (acks={})", text(e, "acks"))
    } else {
        String::new()
    };
    if e.get("read_before_loss").and_then(Value::as_bool) == Some(true) {
        let read = op(e, "first_read_op").unwrap_or_else(|| "a read".into());
        let now = if e.get("beyond_final_end").and_then(Value::as_bool) == Some(true) {
            format!(
                "the log now ends below it (final high watermark {})",
                text(e, "final_high_watermark")
            )
        } else if has(e, "now_at_offset") {
            format!("offset {offset} now holds {}", text(e, "now_at_offset"))
        } else {
            format!("nothing the final reads returned holds offset {offset}")
        };
        return Some(format!(
            "value {value}, acknowledged at offset {offset} by {ack}{acks} and read by {read}, \
             is gone from the final reads; {now}"
        ));
    }
    let proof = match op(e, "proving_read_op") {
        Some(p) => format!("{p} read past that offset without it"),
        None => "reads reached past that offset without it".to_string(),
    };
    Some(format!(
        "value {value}, acknowledged at offset {offset} by {ack}{acks}, was never read, \
         though {proof}: it is gone"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn headlines_say_what_was_lost_and_what_allows_it() {
        let lossy: CheckResults = serde_json::from_value(json!({
            "valid": false, "promise": "kept", "promise_reason": "allowed by these settings: ...",
            "anomalies": {"lost-write": {"count": 557, "examples": [], "invalidates": true}},
            "stats": {"lost_acknowledged": {"total": 557}, "sends": {"acked": 1750}}
        }))
        .unwrap();
        let config = json!({"acks": "1", "sets": {"unclean.leader.election.enable": "true"}});
        assert_eq!(
            headline(&lossy, &config),
            "DATA LOST: 557 of 1750 acknowledged writes; allowed by acks=1 + unclean election"
        );
        let clean: CheckResults = serde_json::from_value(json!({
            "valid": true, "promise": "kept", "anomalies": {},
            "stats": {"lost_acknowledged": {"total": 0}, "sends": {"acked": 61},
                      "ops_by_f": {"send": {"invoke": 100, "ok": 61}}}
        }))
        .unwrap();
        assert_eq!(
            headline(&clean, &json!({"acks": "all"})),
            "no acknowledged write lost; 61% of sends acknowledged"
        );
    }

    #[test]
    fn a_lost_write_read_before_its_loss_says_what_holds_its_offset_now() {
        let e = json!({"key": "t0/0", "value": 13, "offset": 3, "acks": "1", "ack_op": 9,
                       "first_read_op": 11, "read_before_loss": true, "beyond_final_end": false,
                       "final_high_watermark": 7, "now_at_offset": 20, "send_op": 8});
        assert_eq!(
            sentence("lost-write", &e).unwrap(),
            "t0/0: value 13, acknowledged at offset 3 by op <a href=\"#op-9\">#9</a> (acks=1) \
             and read by op <a href=\"#op-11\">#11</a>, is gone from the final reads; offset 3 \
             now holds 20."
        );
        let cut = json!({"key": "t0/1", "value": 5, "offset": 9, "ack_op": 2, "first_read_op": 4,
                         "read_before_loss": true, "beyond_final_end": true,
                         "final_high_watermark": 8, "now_at_offset": null});
        assert!(sentence("lost-write", &cut)
            .unwrap()
            .ends_with("the log now ends below it (final high watermark 8)."));
        let never_read = json!({"key": "t0/1", "value": 6, "offset": 2, "ack_op": 3,
                                "proving_read_op": 30});
        assert_eq!(
            sentence("lost-write", &never_read).unwrap(),
            "t0/1: value 6, acknowledged at offset 2 by op <a href=\"#op-3\">#3</a>, was never \
             read, though op <a href=\"#op-30\">#30</a> read past that offset without it: it is gone."
        );
    }

    #[test]
    fn transaction_reads_and_cycles_get_sentences_and_every_name_its_words() {
        let before = json!({"key": "t0/0", "value": 7, "offset": 3, "read_op": 11,
                            "writer": {"op": 20, "invoke_op": 18, "process": 2, "f": "txn",
                                       "type": "ok"},
                            "before_invoke": true});
        assert_eq!(
            sentence("precommitted-read", &before).unwrap(),
            "t0/0: op <a href=\"#op-11\">#11</a> read value 7 at offset 3, and completed before \
             the transaction that sent it (op <a href=\"#op-20\">#20</a>) was even invoked."
        );
        let g1c = json!({"steps": [{"from": 4, "to": 9, "kind": "wr", "key": "x", "value": 1},
                                   {"from": 9, "to": 4, "kind": "ww", "key": "y",
                                    "values": [2, 3]}],
                         "edges": {"wr": 1, "ww": 1}, "wr_only": false});
        assert_eq!(
            sentence("G1c", &g1c).unwrap(),
            "op <a href=\"#op-4\">#4</a> –wr x→ op <a href=\"#op-9\">#9</a> –ww y→ op \
             <a href=\"#op-4\">#4</a> (1 wr, 1 ww edges); it needs a write-write edge: append \
             order, which is not commit order."
        );
        for name in [
            "lost-write",
            "unseen",
            "hw-regression",
            "duplicate",
            "aborted-read",
            "unexpected",
            "inconsistent-offsets",
            "under-min-isr-ack",
            "poll-skip",
            "nonmonotonic-poll",
            "nonmonotonic-send",
            "int-poll-skip",
            "int-nonmonotonic-poll",
            "int-send-skip",
            "int-nonmonotonic-send",
            "group-split-ownership",
            "commit-regression",
            "group-undelivered",
            "precommitted-read",
            "intermediate-read",
            "hanging-transaction",
            "G0",
            "G1c",
            "G-single",
            "G2",
        ] {
            assert!(explanation(name).is_some(), "{name}");
        }
        assert_eq!(explanation("frobnicate"), None);
    }

    #[test]
    fn other_anomalies_get_sentences_and_unknown_ones_none() {
        let hanging = json!({"key": "t0/1", "last_stable_offset": 1699, "stalled_s": 59.98,
                             "final_reads": 238, "acknowledged_above": 6,
                             "first_acknowledged_above": 1700});
        assert_eq!(
            sentence("hanging-transaction", &hanging).unwrap(),
            "t0/1: the final reads stood at last stable offset 1699 for 59.98 s (238 reads), \
             while 6 acknowledged write(s) lay at or above it, the first at offset 1700."
        );
        let e = json!({"key": "t0/0", "process": 4, "offsets": [17, 3], "value": 1,
                       "ops": [40, 52], "explanation": "the consumer restarted lower"});
        let s = sentence("nonmonotonic-poll", &e).unwrap();
        assert!(
            s.starts_with(
                "t0/0: process 4 read offset 3 (op <a href=\"#op-52\">#52</a>) after offset 17"
            ),
            "{s}"
        );
        assert!(s.ends_with("Why: the consumer restarted lower."), "{s}");
        let hw = json!({"key": "t0/0", "class": "data-loss", "high_watermarks": [9, 4],
                        "ops": [1, 2], "lost_offsets": [5, 6]});
        assert!(sentence("hw-regression", &hw)
            .unwrap()
            .contains("(data-loss); acknowledged records at offsets 5, 6 are gone"));
        assert_eq!(sentence("frobnicate", &json!({"key": "x"})), None);
        assert_eq!(sentence("lost-write", &json!("plain")), None);
    }
}
