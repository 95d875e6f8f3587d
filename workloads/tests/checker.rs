//! Hand-built histories for every anomaly: one that must be flagged with the exact offending
//! values, and a near miss that must not be.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use tidewater_workloads::checker::{check, check_reader, Acks, CheckSettings};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::results::{CheckResults, Promise, Validity};

/// Builds a history op by op; indexes and times are assigned in order.
#[derive(Default, Clone)]
struct H {
    ops: Vec<Op>,
}

const K: &str = "t0/0";
const FINAL_PROCESS: u64 = 1000;

impl H {
    fn push(&mut self, process: u64, kind: OpType, f: &str, value: Value) -> &mut Op {
        let index = self.ops.len() as u64;
        self.ops.push(Op {
            index,
            time: index * 200_000_000,
            ..Op::client(process, kind, f, value)
        });
        self.ops.last_mut().unwrap()
    }

    fn invoke_send(&mut self, p: u64, sends: &[(&str, i64)]) -> &mut Self {
        let v: Vec<Value> = sends.iter().map(|(k, v)| json!(["send", k, v])).collect();
        self.push(p, OpType::Invoke, "send", json!(v));
        self
    }

    fn ack(&mut self, p: u64, sends: &[(&str, u64, i64)]) -> &mut Self {
        let v: Vec<Value> = sends
            .iter()
            .map(|(k, o, v)| json!(["send", k, [o, v]]))
            .collect();
        self.push(p, OpType::Ok, "send", json!(v));
        self
    }

    /// Invoke and ok of one send of `value` to `key` acknowledged at `offset`.
    fn send_ok(&mut self, p: u64, key: &str, offset: u64, value: i64) -> &mut Self {
        self.invoke_send(p, &[(key, value)])
            .ack(p, &[(key, offset, value)])
    }

    fn send_ended(&mut self, p: u64, key: &str, value: i64, kind: OpType) -> &mut Self {
        self.invoke_send(p, &[(key, value)]);
        self.push(p, kind, "send", json!([["send", key, value]]))
            .error = Some("X".into());
        self
    }

    fn assign(&mut self, p: u64, keys: &[&str], f: &str) -> &mut Self {
        self.push(p, OpType::Invoke, f, json!(keys));
        self.push(p, OpType::Ok, f, json!(keys));
        self
    }

    fn rebalance(&mut self, p: u64, group: &str, generation: u64, keys: &[&str]) -> &mut Self {
        self.push(p, OpType::Invoke, "rebalance", Value::Null);
        let v = json!({"group": group, "generation": generation, "assignment": keys});
        self.push(p, OpType::Ok, "rebalance", v);
        self
    }

    fn commit(&mut self, p: u64, offset: u64) -> &mut Self {
        self.push(p, OpType::Invoke, "commit", json!([["commit", K, offset]]));
        self.push(p, OpType::Ok, "commit", json!([["commit", K, offset]]));
        self
    }

    fn poll_with(&mut self, p: u64, records: &[(u64, i64)], hw: Option<u64>, fin: bool) -> u64 {
        self.push(p, OpType::Invoke, "poll", json!([["poll"]]))
            .r#final = fin;
        let recs: Vec<Value> = records.iter().map(|(o, v)| json!([o, v])).collect();
        let op = self.push(p, OpType::Ok, "poll", json!([["poll", {K: recs}]]));
        op.r#final = fin;
        op.high_watermarks = hw.map(|hw| BTreeMap::from([(K.to_string(), hw)]));
        op.index
    }

    /// Invoke and ok of a poll of `K` returning `records`; returns the ok's index.
    fn poll(&mut self, p: u64, records: &[(u64, i64)]) -> u64 {
        self.poll_with(p, records, None, false)
    }

    /// The final read of `K`: every record, with the final high watermark.
    fn final_read(&mut self, records: &[(u64, i64)], hw: u64) -> u64 {
        self.assign(FINAL_PROCESS, &[K], "assign");
        self.poll_with(FINAL_PROCESS, records, Some(hw), true)
    }

    fn check(&self) -> CheckResults {
        check(&self.ops, &CheckSettings::default())
    }

    fn check_with(&self, settings: CheckSettings) -> CheckResults {
        check(&self.ops, &settings)
    }
}

fn names(r: &CheckResults) -> Vec<&str> {
    r.anomalies.keys().map(String::as_str).collect()
}

/// A log t0/0 = [10, 11, 12, 13, 14] written by process 0 and 1, read by process 2.
fn five_records() -> H {
    let mut h = H::default();
    for (o, v) in (10..15).enumerate() {
        h.send_ok(o as u64 % 2, K, o as u64, v);
    }
    h
}

const ALL5: [(u64, i64); 5] = [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14)];

#[test]
fn a_clean_history_is_valid() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..2]);
    h.poll(2, &ALL5[2..]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
    assert!(r.anomalies.is_empty());
    assert_eq!(r.stats["sends"]["acked"], 5);
    assert_eq!(r.stats["final_reads"]["coverage"], 1.0);
    assert_eq!(r.stats["acked_sends_by_acks"]["all"], 5);
    assert_eq!(r.stats["ops_by_f"]["send"]["ok"], 5);
}

#[test]
fn lost_write_names_value_offset_ack_and_proving_read() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    let proving = h.poll(2, &[(0, 10), (2, 12)]);
    h.final_read(&[(0, 10), (2, 12), (3, 13), (4, 14)], 5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Invalid);
    let lost = &r.anomalies["lost-write"];
    assert_eq!(lost.count, 1);
    assert!(lost.breaks_promise);
    let ex = &lost.examples[0];
    assert_eq!(ex["value"], 11);
    assert_eq!(ex["offset"], 1);
    assert_eq!(ex["key"], K);
    assert_eq!(ex["acks"], "all");
    assert_eq!(ex["ack_op"], 3);
    assert_eq!(ex["proving_read_op"], proving);
    assert_eq!(r.stats["lost_writes_by_acks"]["all"], 1);
    // The skip over offset 1 is a poll anomaly of its own.
    assert_eq!(r.anomalies["int-poll-skip"].count, 2);
}

#[test]
fn lost_write_with_acks_1_is_reported_but_expected() {
    let mut h = five_records();
    h.final_read(&[(0, 10), (2, 12), (3, 13), (4, 14)], 5);
    let settings = CheckSettings {
        acks: Acks::One,
        ..Default::default()
    };
    let r = h.check_with(settings);
    let lost = &r.anomalies["lost-write"];
    assert_eq!((lost.count, lost.breaks_promise), (1, false));
    assert!(
        lost.note.contains("acks=1 may lose acknowledged writes"),
        "{}",
        lost.note
    );
    assert_eq!(lost.examples[0]["acks"], "1");
    assert_eq!(r.stats["lost_writes_by_acks"]["1"], 1);
    assert_eq!(r.stats["lost_acknowledged"]["total"], 1);
    // A write is gone: the history is invalid whatever the settings. acks=1 allows it (and
    // the skip inside the final read), so the promise is kept.
    assert_eq!(r.valid, Validity::Invalid, "{:?}", r.anomalies);
    assert_eq!(r.promise, Promise::Kept, "{}", r.promise_reason);
    assert!(r.promise_reason.contains("acks=1"), "{}", r.promise_reason);
}

#[test]
fn lost_write_with_unclean_election_is_expected() {
    let mut h = five_records();
    h.final_read(&[(0, 10), (2, 12), (3, 13), (4, 14)], 5);
    let settings = CheckSettings {
        unclean_leader_election_enable: true,
        ..Default::default()
    };
    let lost = &h.check_with(settings).anomalies["lost-write"];
    assert!(!lost.breaks_promise && lost.note.contains("unclean.leader.election.enable=true"));
}

#[test]
fn a_write_beyond_every_read_is_unseen_not_lost() {
    // Near miss for lost-write: nothing reached offset 4.
    let mut h = five_records();
    h.final_read(&ALL5[..4], 4);
    let r = h.check_with(CheckSettings {
        final_reads_completed: true,
        ..Default::default()
    });
    assert!(!r.anomalies.contains_key("lost-write"));
    let unseen = &r.anomalies["unseen"];
    assert_eq!(unseen.count, 1);
    assert_eq!(unseen.examples[0]["value"], 14);
    assert_eq!(unseen.examples[0]["offset"], 4);
    // The final reads covered the log, so the write is gone: a violation.
    assert!(unseen.breaks_promise, "{}", unseen.note);
    assert_eq!(r.stats["unseen_final"], 1);
}

#[test]
fn unseen_without_final_reads_is_unknown_not_invalid() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..3]);
    let r = h.check_with(CheckSettings {
        final_reads_completed: false,
        ..Default::default()
    });
    let unseen = &r.anomalies["unseen"];
    assert_eq!(unseen.count, 2);
    assert!(!unseen.breaks_promise);
    let values: Vec<&Value> = unseen.examples.iter().map(|e| &e["value"]).collect();
    assert_eq!(values, [&json!(13), &json!(14)]);
    assert_eq!(r.valid, Validity::Unknown);
    // The count over time rises with the acks and falls with the read.
    let series = r.stats["unseen_series"].as_array().unwrap();
    let counts: Vec<u64> = series.iter().map(|p| p[1].as_u64().unwrap()).collect();
    assert_eq!(*counts.iter().max().unwrap(), 5);
    assert_eq!(*counts.last().unwrap(), 2);
}

#[test]
fn info_sends_count_only_when_a_read_proves_them() {
    let mut h = H::default();
    h.send_ok(0, K, 0, 10);
    h.send_ended(1, K, 11, OpType::Info); // proven below
    h.send_ended(2, K, 12, OpType::Info); // never read: indeterminate, not lost
    h.send_ok(3, K, 2, 13);
    h.final_read(&[(0, 10), (1, 11), (2, 13)], 3);
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
    assert_eq!(r.stats["sends"]["info"], 2);
    assert_eq!(r.stats["sends"]["info_proven"], 1);
}

#[test]
fn an_unproven_info_send_leaves_a_gap_that_is_not_a_skip() {
    // Offset 1 held value 11 from an info send nobody read: the final read skipping it is
    // fine because no known value lies at offset 1.
    let mut h = H::default();
    h.send_ok(0, K, 0, 10);
    h.send_ended(1, K, 11, OpType::Info);
    h.send_ok(2, K, 2, 12);
    h.final_read(&[(0, 10), (2, 12)], 3);
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
}

#[test]
fn offsets_with_gaps_are_skipped_in_dense_positions() {
    // Offsets 2..4 hold no known value (compaction, aborted batches): reading 1 then 5 is no
    // skip, but the unread acknowledged write at offset 6 is lost.
    let mut h = H::default();
    for (o, v) in [(0, 10), (1, 11), (5, 15), (6, 16), (7, 17)] {
        h.send_ok(0, K, o, v);
    }
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (1, 11)]);
    h.poll(2, &[(5, 15)]);
    h.final_read(&[(0, 10), (1, 11), (5, 15), (7, 17)], 8);
    let r = h.check();
    assert_eq!(names(&r), ["int-poll-skip", "lost-write"]);
    let lost = &r.anomalies["lost-write"].examples[0];
    assert_eq!((&lost["value"], &lost["offset"]), (&json!(16), &json!(6)));
    let skip = &r.anomalies["int-poll-skip"].examples[0];
    assert_eq!(skip["offsets"], json!([5, 7]));
    assert_eq!(skip["skipped"], json!([[6, 16]]));
}

#[test]
fn duplicates_with_inconsistent_offsets() {
    // 11 was acknowledged at 1 but read at 1 and at 3; offset 3 also holds 13.
    let mut h = H::default();
    for (o, v) in [(0, 10), (1, 11), (2, 12), (3, 13)] {
        h.send_ok(0, K, o, v);
    }
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (1, 11), (2, 12)]);
    h.poll(2, &[(3, 11)]);
    h.final_read(&[(0, 10), (1, 11), (2, 12), (3, 13)], 4);
    let r = h.check();
    assert_eq!(r.valid, Validity::Invalid);
    let dup = &r.anomalies["duplicate"];
    assert_eq!(dup.count, 1);
    assert_eq!(dup.examples[0]["value"], 11);
    assert_eq!(dup.examples[0]["offsets"], json!([1, 3]));
    let inc = &r.anomalies["inconsistent-offsets"];
    assert_eq!(inc.count, 1);
    assert_eq!(inc.examples[0]["offset"], 3);
    assert_eq!(inc.examples[0]["values"], json!([13, 11]));
    assert!(dup.breaks_promise && inc.breaks_promise);
    // 13 was read by the final read, so it is not lost despite the conflict.
    assert!(!r.anomalies.contains_key("lost-write"));
}

#[test]
fn one_value_read_many_times_at_one_offset_is_no_duplicate() {
    let mut h = five_records();
    for p in 2..5 {
        h.assign(p, &[K], "assign");
        h.poll(p, &ALL5);
    }
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.stats["reads"]["records"], 20);
}

/// [`five_records`] whose acknowledgement of 12 (offset 2) reports `isr_size`, read in full.
fn acks_with_isr_size(isr_size: u64) -> H {
    let mut h = H::default();
    for (o, v) in (10..15).enumerate() {
        h.invoke_send(0, &[(K, v)]).ack(0, &[(K, o as u64, v)]);
        let ack = h.ops.last_mut().unwrap();
        ack.isr_sizes = Some(BTreeMap::from([(
            K.to_string(),
            if v == 12 { isr_size } else { 3 },
        )]));
    }
    h.final_read(&ALL5, 5);
    h
}

#[test]
fn under_min_isr_ack_is_an_acks_all_acknowledgement_counted_below_min_insync() {
    let h = acks_with_isr_size(1);
    let r = h.check();
    assert_eq!(names(&r), ["under-min-isr-ack"]);
    let a = &r.anomalies["under-min-isr-ack"];
    assert_eq!(a.count, 1);
    assert!(a.invalidates && a.breaks_promise);
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.promise, Promise::Broken);
    let ex = &a.examples[0];
    assert_eq!(
        (
            ex["value"].clone(),
            ex["offset"].clone(),
            ex["isr_size"].clone()
        ),
        (json!(12), json!(2), json!(1))
    );
    assert_eq!(ex["min_insync_replicas"], 2);
    assert_eq!(ex["ack_op"], 5);
}

#[test]
fn an_ack_counted_with_exactly_min_insync_replicas_is_no_anomaly() {
    // Near miss: ISR 2 with min.insync.replicas=2 is what the rule allows.
    let r = acks_with_isr_size(2).check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.valid, Validity::Valid);
    // And an acks=1 run is not judged by the ISR rule at all.
    let settings = CheckSettings {
        acks: Acks::One,
        ..CheckSettings::default()
    };
    let r = acks_with_isr_size(1).check_with(settings);
    assert!(!r.anomalies.contains_key("under-min-isr-ack"));
}

#[test]
fn aborted_read_is_a_failed_send_that_was_read() {
    let mut h = H::default();
    h.send_ok(0, K, 0, 10);
    h.send_ended(1, K, 11, OpType::Fail);
    h.send_ended(2, K, 12, OpType::Fail); // near miss: failed and never read
    h.final_read(&[(0, 10), (1, 11)], 2);
    let r = h.check();
    assert_eq!(names(&r), ["aborted-read"]);
    let a = &r.anomalies["aborted-read"];
    assert_eq!(a.count, 1);
    assert_eq!(
        (&a.examples[0]["value"], &a.examples[0]["offset"]),
        (&json!(11), &json!(1))
    );
    assert_eq!(a.examples[0]["send_op"], 2);
    assert_eq!(r.valid, Validity::Invalid);
}

#[test]
fn unexpected_is_a_value_nobody_sent() {
    let mut h = H::default();
    h.send_ok(0, K, 0, 10);
    // Near miss: 11 is read while its send is still pending (invoked, not yet acknowledged).
    h.invoke_send(1, &[(K, 11)]);
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (1, 11)]);
    h.ack(1, &[(K, 1, 11)]);
    h.final_read(&[(0, 10), (1, 11), (2, 999)], 3);
    let r = h.check();
    assert_eq!(names(&r), ["unexpected"]);
    let u = &r.anomalies["unexpected"];
    assert_eq!((u.count, &u.examples[0]["value"]), (1, &json!(999)));
    assert_eq!(u.examples[0]["offset"], 2);
}

#[test]
fn a_value_read_on_another_key_is_unexpected() {
    let mut h = H::default();
    h.send_ok(0, "t0/1", 0, 10);
    h.final_read(&[(0, 10)], 1);
    let r = h.check();
    let u = &r.anomalies["unexpected"];
    assert_eq!(u.examples[0]["sent_to"], "t0/1");
    assert_eq!(u.examples[0]["key"], K);
}

#[test]
fn poll_skip_across_polls_of_one_process() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    let first = h.poll(2, &ALL5[..2]);
    let second = h.poll(2, &ALL5[3..]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["poll-skip"]);
    let s = &r.anomalies["poll-skip"];
    assert!(s.breaks_promise);
    assert_eq!(s.examples[0]["offsets"], json!([1, 3]));
    assert_eq!(s.examples[0]["skipped"], json!([[2, 12]]));
    assert_eq!(s.examples[0]["ops"], json!([first, second]));
    assert_eq!(s.examples[0]["process"], 2);
}

#[test]
fn reassigning_resets_what_a_process_remembers() {
    // Near miss: the process let go of the key in between, so starting at 3 is no skip.
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..2]);
    h.assign(2, &["t0/1"], "assign");
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[3..]);
    h.final_read(&ALL5, 5);
    assert!(h.check().anomalies.is_empty());
}

#[test]
fn keeping_a_key_across_assigns_keeps_its_position() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..2]);
    h.assign(2, &[K, "t0/1"], "assign");
    h.poll(2, &ALL5[3..]);
    h.final_read(&ALL5, 5);
    assert_eq!(names(&h.check()), ["poll-skip"]);
}

#[test]
fn nonmonotonic_poll_goes_back() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..3]);
    h.poll(2, &ALL5[1..3]);
    // Near miss: another process reading the same records is not going back.
    h.assign(3, &[K], "assign");
    h.poll(3, &ALL5[1..]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["nonmonotonic-poll"]);
    let n = &r.anomalies["nonmonotonic-poll"];
    assert_eq!(n.count, 1);
    assert_eq!(n.examples[0]["offsets"], json!([2, 1]));
    assert_eq!(n.examples[0]["value"], 11);
    assert!(n.breaks_promise);
}

#[test]
fn a_poll_going_back_after_an_out_of_range_reset_is_reported_but_no_violation() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[2..4]);
    // The consumer was told OFFSET_OUT_OF_RANGE and reset to the log start.
    h.push(2, OpType::Invoke, "poll", json!([["poll"]]));
    h.push(2, OpType::Fail, "poll", json!([["poll"]])).error = Some("OFFSET_OUT_OF_RANGE".into());
    h.poll(2, &ALL5[..2]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    let n = &r.anomalies["nonmonotonic-poll"];
    assert_eq!(
        (n.count, n.breaks_promise, n.invalidates),
        (1, false, false)
    );
    assert_eq!(n.examples[0]["after_reset"], true);
    assert_eq!(r.valid, Validity::Valid);
    // Near miss: a poll failing for another reason resets nothing.
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[2..4]);
    h.push(2, OpType::Invoke, "poll", json!([["poll"]]));
    h.push(2, OpType::Fail, "poll", json!([["poll"]])).error =
        Some("NOT_LEADER_OR_FOLLOWER".into());
    h.poll(2, &ALL5[..2]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    let n = &r.anomalies["nonmonotonic-poll"];
    assert!(n.breaks_promise && n.invalidates);
    assert!(n.examples[0].get("after_reset").is_none());
    assert_eq!(r.valid, Validity::Invalid);
}

#[test]
fn poll_anomalies_under_subscribe_are_reported_but_not_violations() {
    let mut h = five_records();
    h.assign(2, &[K], "subscribe");
    h.poll(2, &ALL5[..3]);
    h.poll(2, &ALL5[1..3]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    let n = &r.anomalies["nonmonotonic-poll"];
    assert_eq!((n.count, n.breaks_promise), (1, false));
    assert_eq!(n.examples[0]["subscribe"], true);
    assert_eq!(r.valid, Validity::Valid);
}

#[test]
fn int_poll_skip_within_one_poll() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (2, 12)]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["int-poll-skip"]);
    let s = &r.anomalies["int-poll-skip"].examples[0];
    assert_eq!(
        (&s["offsets"], &s["skipped"]),
        (&json!([0, 2]), &json!([[1, 11]]))
    );
}

#[test]
fn int_poll_gap_without_known_values_is_no_skip() {
    let mut h = H::default();
    h.send_ok(0, K, 0, 10);
    h.send_ok(0, K, 2, 12);
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (2, 12)]);
    h.final_read(&[(0, 10), (2, 12)], 3);
    assert!(h.check().anomalies.is_empty());
}

#[test]
fn int_nonmonotonic_poll_within_one_poll() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &[(1, 11), (0, 10)]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["int-nonmonotonic-poll"]);
    assert_eq!(
        r.anomalies["int-nonmonotonic-poll"].examples[0]["offsets"],
        json!([1, 0])
    );
}

#[test]
fn nonmonotonic_send_by_one_process() {
    let mut h = H::default();
    h.send_ok(0, K, 1, 11);
    h.send_ok(0, K, 0, 10);
    // Near miss: a different process acknowledged at a lower offset.
    h.send_ok(1, K, 2, 12);
    h.send_ok(2, K, 1, 13);
    h.final_read(&[(0, 10), (1, 11), (2, 12)], 3);
    let r = h.check();
    let n = &r.anomalies["nonmonotonic-send"];
    assert_eq!(n.count, 1);
    assert_eq!(
        (&n.examples[0]["offsets"], &n.examples[0]["value"]),
        (&json!([1, 0]), &json!(10))
    );
    assert_eq!(n.examples[0]["process"], 0);
    // 13 at offset 1 conflicts with 11 and is lost.
    assert_eq!(r.anomalies["inconsistent-offsets"].count, 1);
    assert_eq!(r.anomalies["lost-write"].examples[0]["value"], 13);
}

#[test]
fn int_send_skip_is_a_violation_only_for_atomic_batches() {
    let mut h = H::default();
    h.invoke_send(0, &[(K, 10), (K, 12)]);
    h.send_ok(1, K, 1, 11);
    h.ack(0, &[(K, 0, 10), (K, 2, 12)]);
    // Near miss: contiguous sends of one op.
    h.invoke_send(0, &[(K, 13), (K, 14)]);
    h.ack(0, &[(K, 3, 13), (K, 4, 14)]);
    h.final_read(&ALL5.map(|(o, _)| (o, 10 + o as i64)), 5);
    let r = h.check();
    let s = &r.anomalies["int-send-skip"];
    assert_eq!(s.count, 1);
    assert_eq!(
        (&s.examples[0]["offsets"], &s.examples[0]["skipped"]),
        (&json!([0, 2]), &json!([[1, 11]]))
    );
    assert!(!s.breaks_promise);
    assert_eq!(r.valid, Validity::Valid);
    let atomic = h.check_with(CheckSettings {
        atomic_send_batches: true,
        ..Default::default()
    });
    assert!(atomic.anomalies["int-send-skip"].breaks_promise);
    assert_eq!(atomic.valid, Validity::Invalid);
}

#[test]
fn int_nonmonotonic_send_within_one_op() {
    let mut h = H::default();
    h.invoke_send(0, &[(K, 10), (K, 11)]);
    h.ack(0, &[(K, 1, 10), (K, 0, 11)]);
    h.final_read(&[(0, 11), (1, 10)], 2);
    let r = h.check();
    assert_eq!(names(&r), ["int-nonmonotonic-send"]);
    assert_eq!(
        r.anomalies["int-nonmonotonic-send"].examples[0]["offsets"],
        json!([1, 0])
    );
}

/// A completes with hw 5, then B (invoked after A completed) sees `b_hw`; C is concurrent
/// with A and sees 2.
fn regression(b_hw: u64, final_records: &[(u64, i64)], final_hw: u64) -> H {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.assign(3, &[K], "assign");
    h.push(3, OpType::Invoke, "poll", json!([["poll"]]));
    let a = h.poll_with(2, &ALL5, Some(5), false);
    let c = h.push(3, OpType::Ok, "poll", json!([["poll", {K: []}]]));
    c.high_watermarks = Some(BTreeMap::from([(K.to_string(), 2)]));
    assert!(a > 0);
    h.poll_with(2, &[], Some(b_hw), false);
    h.final_read(final_records, final_hw);
    h
}

#[test]
fn hw_regression_visibility_only() {
    let h = regression(3, &ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["hw-regression"]);
    let reg = &r.anomalies["hw-regression"];
    assert_eq!(
        reg.count, 1,
        "the concurrent op seeing 2 is not a regression"
    );
    assert_eq!(reg.examples[0]["class"], "visibility-only");
    assert_eq!(reg.examples[0]["high_watermarks"], json!([5, 3]));
    assert!(!reg.breaks_promise, "no record was lost");
    assert!(reg.note.contains("visibility-only (1)"), "{}", reg.note);
    assert_eq!(r.stats["hw_regressions"]["visibility-only"], 1);
    assert_eq!(r.valid, Validity::Valid);
    let lagging = h.check_with(CheckSettings {
        serve_lagging_hw: true,
        ..Default::default()
    });
    assert!(lagging.anomalies["hw-regression"]
        .note
        .contains("pre-KIP-207"));
}

#[test]
fn hw_regression_with_data_loss() {
    let h = regression(3, &ALL5[..3], 3);
    let r = h.check();
    let reg = &r.anomalies["hw-regression"];
    assert!(reg.breaks_promise);
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(reg.examples[0]["class"], "data-loss");
    assert_eq!(reg.examples[0]["final_hw"], 3);
    // With unclean election this is the expected cost.
    let unclean = h.check_with(CheckSettings {
        unclean_leader_election_enable: true,
        ..Default::default()
    });
    assert!(!unclean.anomalies["hw-regression"].breaks_promise);
    // serve_lagging_hw excuses only visibility, not loss.
    let lagging = h.check_with(CheckSettings {
        serve_lagging_hw: true,
        ..Default::default()
    });
    assert!(lagging.anomalies["hw-regression"].breaks_promise);
}

#[test]
fn no_hw_regression_when_it_only_grows() {
    let h = regression(5, &ALL5, 5);
    assert!(h.check().anomalies.is_empty());
}

#[test]
fn odd_histories_give_unknown_with_reasons_not_panics() {
    let mut h = five_records();
    h.push(7, OpType::Ok, "poll", json!([["poll", {K: [[0, 10]]}]])); // no invoke
    h.push(8, OpType::Invoke, "send", json!("not a list"));
    h.push(8, OpType::Ok, "send", json!([["send", K, "x"]]));
    h.push(9, OpType::Ok, "poll", json!([["poll", {K: [["a", 1]]}]]));
    h.push(9, OpType::Ok, "assign", json!(42));
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Unknown, "{:?}", r.anomalies);
    assert!(r.stats["problem_count"].as_u64().unwrap() >= 3);
    assert!(!r.stats["unknown_reasons"].as_array().unwrap().is_empty());
}

#[test]
fn a_history_without_final_reads_is_unknown() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Unknown);
    assert!(r.anomalies.is_empty());
}

#[test]
fn streaming_a_file_gives_the_same_results_and_tolerates_bad_lines() {
    let mut h = five_records();
    h.final_read(&ALL5[..4], 5);
    let mut text = String::new();
    for op in &h.ops {
        text.push_str(&serde_json::to_string(op).unwrap());
        text.push('\n');
    }
    let settings = CheckSettings::default();
    let streamed = check_reader(text.as_bytes(), &settings).unwrap();
    assert_eq!(streamed, check(&h.ops, &settings));
    text.push_str("{not json\n");
    let bad = check_reader(text.as_bytes(), &settings).unwrap();
    assert_eq!(bad.valid, Validity::Invalid, "the lost write still decides");
    assert_eq!(bad.stats["problem_count"], 1);
}

#[test]
fn a_line_that_is_not_utf8_is_a_problem_named_by_its_line_number() {
    let mut h = five_records();
    h.final_read(&ALL5, 5);
    let mut bytes = Vec::new();
    for (i, op) in h.ops.iter().enumerate() {
        if i == 2 {
            bytes.extend_from_slice(b"\xff\xfe{\"index\"\n");
        }
        bytes.extend_from_slice(serde_json::to_string(op).unwrap().as_bytes());
        bytes.push(b'\n');
    }
    let settings = CheckSettings::default();
    let r = check_reader(bytes.as_slice(), &settings).expect("a bad line does not end the check");
    assert_eq!(r.stats["problem_count"], 1);
    let problem = r.stats["problems"][0].as_str().unwrap();
    assert!(problem.starts_with("line 3: not UTF-8 text"), "{problem}");
    assert_eq!(
        r.valid,
        Validity::Unknown,
        "a damaged history is judged at best unknown"
    );
}

#[test]
fn records_below_the_log_start_offset_are_neither_skipped_nor_lost() {
    // Offset 2 was deleted (retention / DeleteRecords) before anyone read it.
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..2]);
    h.push(2, OpType::Invoke, "poll", json!([["poll"]]));
    let op = h.push(
        2,
        OpType::Ok,
        "poll",
        json!([["poll", {K: [[3, 13], [4, 14]]}]]),
    );
    op.log_start_offsets = Some(BTreeMap::from([(K.to_string(), 3)]));
    h.assign(FINAL_PROCESS, &[K], "assign");
    h.poll_with(FINAL_PROCESS, &ALL5[3..], Some(5), true);
    h.ops.last_mut().unwrap().log_start_offsets = Some(BTreeMap::from([(K.to_string(), 3)]));
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    // Offsets 0 and 1 (read before the deletion) and 2 (never read) lie below the final log
    // start: their absence proves nothing.
    assert_eq!(r.stats["retention_excluded"], 3);
    assert_eq!(r.stats["lost_acknowledged"]["total"], 0);
    assert_eq!(r.valid, Validity::Valid);
}

#[test]
fn group_split_ownership_is_two_owners_in_one_generation() {
    let mut h = five_records();
    h.rebalance(2, "g0", 1, &[K]);
    h.rebalance(3, "g0", 1, &[K, "t0/1"]);
    // Near miss: the next generation moves the key to process 3.
    h.rebalance(3, "g0", 2, &[K]);
    // Near miss: another group.
    h.rebalance(4, "g1", 1, &[K]);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["group-split-ownership"]);
    let s = &r.anomalies["group-split-ownership"];
    assert_eq!(s.count, 1);
    assert_eq!(s.examples[0]["processes"], json!([2, 3]));
    assert_eq!(s.examples[0]["generation"], 1);
    assert!(s.breaks_promise);
    assert_eq!(r.stats["groups"], 2);
}

#[test]
fn commit_regression_is_a_later_commit_going_back() {
    let mut h = five_records();
    h.rebalance(2, "g0", 1, &[K]);
    h.rebalance(3, "g0", 2, &[K]);
    // Near miss: 3's commit of 1 is concurrent with 2's commit of 2.
    h.push(3, OpType::Invoke, "commit", json!([["commit", K, 1]]));
    h.commit(2, 2);
    h.push(3, OpType::Ok, "commit", json!([["commit", K, 1]]));
    h.commit(3, 3);
    h.commit(2, 1);
    h.final_read(&ALL5, 5);
    let r = h.check();
    let c = &r.anomalies["commit-regression"];
    assert_eq!(c.count, 1);
    assert_eq!(c.examples[0]["offsets"], json!([3, 1]));
    assert_eq!(c.examples[0]["group"], "g0");
    assert!(c.breaks_promise);
}

#[test]
fn group_undelivered_is_committed_past_but_never_polled_by_the_group() {
    let mut h = five_records();
    h.rebalance(2, "g0", 1, &[K]);
    h.poll(2, &ALL5[..2]);
    h.commit(2, 2);
    h.rebalance(3, "g0", 2, &[K]);
    h.poll(3, &ALL5[3..]);
    h.commit(3, 5);
    // A process outside the group reading 12 does not deliver it to the group.
    h.assign(9, &[K], "assign");
    h.poll(9, &ALL5);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(names(&r), ["group-undelivered"]);
    let u = &r.anomalies["group-undelivered"];
    assert_eq!(u.count, 1);
    assert_eq!(
        (&u.examples[0]["value"], &u.examples[0]["offset"]),
        (&json!(12), &json!(2))
    );
    assert_eq!(u.examples[0]["committed"], 5);
    assert!(u.breaks_promise);
}

#[test]
fn a_group_that_committed_only_what_it_read_delivered_everything() {
    let mut h = five_records();
    h.rebalance(2, "g0", 1, &[K]);
    h.poll(2, &ALL5[..3]);
    h.commit(2, 3);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
}

#[test]
fn a_write_read_once_then_gone_from_the_final_reads_is_lost() {
    // Values 13 and 14 were read, then an unclean election replaced offsets 3 and 4 with 20 and
    // 21: the final reads cover those offsets and no longer return them.
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5);
    h.send_ok(3, K, 3, 20).send_ok(3, K, 4, 21);
    h.final_read(&[(0, 10), (1, 11), (2, 12), (3, 20), (4, 21)], 5);
    let settings = CheckSettings {
        acks: Acks::One,
        unclean_leader_election_enable: true,
        ..Default::default()
    };
    let r = h.check_with(settings);
    let lost = &r.anomalies["lost-write"];
    assert_eq!(lost.count, 2, "{:?}", lost.examples);
    let gone: Vec<(i64, u64, bool)> = lost
        .examples
        .iter()
        .map(|e| {
            let v = e["value"].as_i64().unwrap();
            let o = e["offset"].as_u64().unwrap();
            (v, o, e["read_before_loss"] == true)
        })
        .collect();
    assert_eq!(gone, vec![(13, 3, true), (14, 4, true)]);
    assert!(
        !lost.breaks_promise,
        "expected under acks=1 with unclean election"
    );
    assert!(r.anomalies.contains_key("inconsistent-offsets"));
    // Under the safe settings the same history is invalid.
    assert_eq!(h.check().valid, Validity::Invalid);
}

#[test]
fn a_write_read_once_below_where_the_final_reads_began_is_not_lost() {
    // Near miss: the final reads started at offset 3 (say a consumer's position), so the
    // absence of offsets 0..=2 from them proves nothing.
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5);
    h.final_read(&ALL5[3..], 5);
    let r = h.check();
    assert!(!r.anomalies.contains_key("lost-write"), "{:?}", r.anomalies);
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
}

#[test]
fn redeliveries_count_records_a_group_was_given_again() {
    let mut h = five_records();
    h.rebalance(2, "g0", 1, &[K]);
    h.poll(2, &ALL5[..3]);
    h.commit(2, 1);
    // The next generation starts from the commit: 11 and 12 reach g0 a second time.
    h.rebalance(3, "g0", 2, &[K]);
    h.poll(3, &ALL5[1..]);
    h.commit(3, 5);
    // Near misses: another group's first delivery, and a process outside any group.
    h.rebalance(4, "g1", 1, &[K]);
    h.poll(4, &ALL5);
    h.assign(9, &[K], "assign");
    h.poll(9, &ALL5);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(
        r.stats["redeliveries"],
        json!({"delivered": 10, "redelivered_records": 2, "redeliveries": 2})
    );
}

#[test]
fn rebalances_are_counted_by_outcome_with_their_durations() {
    let mut h = five_records();
    // Each line is 200 ms after the previous one (see `push`).
    h.rebalance(2, "g0", 1, &[K]);
    h.push(3, OpType::Invoke, "rebalance", Value::Null);
    h.push(2, OpType::Invoke, "poll", json!([["poll"]]));
    h.push(2, OpType::Ok, "poll", json!([["poll", {}]]));
    h.push(3, OpType::Fail, "rebalance", Value::Null).error = Some("REBALANCE_IN_PROGRESS".into());
    h.final_read(&ALL5, 5);
    let r = h.check();
    let s = &r.stats["rebalances"];
    assert_eq!(
        (&s["count"], &s["ok"], &s["fail"], &s["info"]),
        (&json!(2), &json!(1), &json!(1), &json!(0))
    );
    assert_eq!(s["duration_ms_max"], 600);
    assert_eq!(s["duration_ms_mean"], 400.0);
    // Five sends are ten lines (0..9); the ok rebalance completes at line 11, the failed one
    // at line 15.
    assert_eq!(s["series"], json!([[2200, 200], [3000, 600]]));
    assert_eq!(r.stats["redeliveries"]["redeliveries"], 0);
}

/// A group run in which no rebalance completed tested none of the group checks: unknown,
/// not valid (a Kafka run whose client failed every join said valid). One completed
/// rebalance is the near miss.
#[test]
fn a_group_run_whose_rebalances_all_failed_tested_nothing() {
    let mut h = five_records();
    for p in [2, 3] {
        h.push(p, OpType::Invoke, "rebalance", Value::Null);
        h.push(p, OpType::Fail, "rebalance", Value::Null).error = Some("MEMBER_ID_REQUIRED".into());
    }
    h.push(4, OpType::Invoke, "rebalance", Value::Null);
    h.push(4, OpType::Info, "rebalance", Value::Null).error = Some("timeout".into());
    let mut near = h.clone();
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Unknown);
    let reasons = r.stats["unknown_reasons"].to_string();
    assert!(
        reasons.contains("no rebalance completed (2 failed, 1 indeterminate)"),
        "{reasons}"
    );

    near.rebalance(5, "g0", 1, &[K]);
    near.final_read(&ALL5, 5);
    let r = near.check();
    assert_eq!(r.valid, Validity::Valid, "{}", r.stats["unknown_reasons"]);
}

// ---- Truncation shapes: every acknowledged write that is gone is counted exactly once. ----

/// Every record of `five_records` read by process 2, with high watermark 5.
fn five_records_read() -> H {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll_with(2, &ALL5, Some(5), false);
    h
}

fn lost_values(r: &CheckResults) -> Vec<i64> {
    let mut v: Vec<i64> = ["lost-write", "unseen"]
        .iter()
        .filter_map(|n| r.anomalies.get(*n))
        .flat_map(|a| a.examples.iter().map(|e| e["value"].as_i64().unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn a_tail_cut_below_records_consumers_read_is_lost_above_the_final_high_watermark() {
    let mut h = five_records_read();
    // The log's tail was cut: the final reads end at offset 2, high watermark 3.
    h.final_read(&ALL5[..3], 3);
    let r = h.check();
    assert_eq!(lost_values(&r), vec![13, 14]);
    let lost = &r.anomalies["lost-write"];
    let e = &lost.examples[0];
    assert_eq!(
        (e["value"].as_i64(), e["offset"].as_u64()),
        (Some(13), Some(3))
    );
    assert_eq!(e["read_before_loss"], true);
    assert_eq!(e["beyond_final_end"], true);
    assert_eq!(e["final_high_watermark"], 3);
    assert_eq!(r.stats["lost_acknowledged"]["total"], 2);
    assert_eq!(r.stats["lost_acknowledged"]["by_key"][K], 2);
    // The consumer saw high watermark 5, the final reads 3: a regression that lost data,
    // naming the offsets lost.
    let reg = &r.anomalies["hw-regression"].examples[0];
    assert_eq!(reg["class"], "data-loss");
    assert_eq!(reg["lost_offsets"], json!([3, 4]));
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Broken));
    assert!(
        r.headline()
            .starts_with("DATA LOST: 2 of 5 acknowledged writes"),
        "{}",
        r.headline()
    );
}

#[test]
fn near_miss_a_tail_the_final_reads_still_hold_is_not_lost() {
    let mut h = five_records_read();
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.lost_acknowledged(), 0);
    assert_eq!((r.valid, r.promise), (Validity::Valid, Promise::Kept));
}

#[test]
fn an_unclean_rewrite_loses_the_records_it_replaced_and_names_what_stands_there_now() {
    let mut h = five_records_read();
    // An out-of-sync replica became leader at log end 3; offsets 3 and 4 are written again.
    h.send_ok(0, K, 3, 20).send_ok(1, K, 4, 21);
    h.final_read(&[(0, 10), (1, 11), (2, 12), (3, 20), (4, 21)], 5);
    let unclean = CheckSettings {
        acks: Acks::One,
        unclean_leader_election_enable: true,
        ..Default::default()
    };
    let r = h.check_with(unclean);
    assert_eq!(lost_values(&r), vec![13, 14]);
    let e = &r.anomalies["lost-write"].examples[0];
    assert_eq!(
        (e["offset"].as_u64(), e["now_at_offset"].as_i64()),
        (Some(3), Some(20))
    );
    assert_eq!(e["beyond_final_end"], false);
    assert_eq!(r.anomalies["inconsistent-offsets"].count, 2);
    assert_eq!(r.lost_acknowledged(), 2);
    // A fact: data was lost. The settings allow it: the promise is kept, and says why.
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Kept));
    assert!(
        r.promise_reason
            .contains("unclean.leader.election.enable=true"),
        "{}",
        r.promise_reason
    );
    assert!(!r.anomalies["lost-write"].breaks_promise && r.anomalies["lost-write"].invalidates);
}

#[test]
fn near_miss_a_rewrite_of_records_never_acknowledged_loses_nothing() {
    let mut h = five_records();
    h.send_ended(0, K, 15, OpType::Info)
        .send_ended(1, K, 16, OpType::Info);
    // 15 and 16 may have been written at 5 and 6 and replaced; nobody read them.
    h.send_ok(0, K, 5, 20).send_ok(1, K, 6, 21);
    h.final_read(
        &[
            (0, 10),
            (1, 11),
            (2, 12),
            (3, 13),
            (4, 14),
            (5, 20),
            (6, 21),
        ],
        7,
    );
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!((r.valid, r.lost_acknowledged()), (Validity::Valid, 0));
}

#[test]
fn a_divergent_suffix_loses_the_deposed_leaders_acknowledged_records() {
    // The deposed leader acknowledged 13 at 3 and 14 at 4 (acks=1) while the new leader,
    // which never had them, acknowledged 23 at 3. Nobody read 13 or 14.
    let mut h = five_records();
    h.ops.truncate(h.ops.len() - 4);
    h.send_ok(0, K, 3, 13)
        .send_ok(1, K, 3, 23)
        .send_ok(0, K, 4, 14);
    h.assign(2, &[K], "assign");
    h.poll(2, &[(0, 10), (1, 11), (2, 12), (3, 23)]);
    h.final_read(&[(0, 10), (1, 11), (2, 12), (3, 23)], 4);
    let acks1 = CheckSettings {
        acks: Acks::One,
        ..Default::default()
    };
    let r = h.check_with(acks1.clone());
    // 13: at an offset reads reached, never read: lost-write. 14: above the final end, never
    // read; the complete final reads prove it gone: unseen, and counted as lost.
    assert_eq!(r.anomalies["lost-write"].examples[0]["value"], 13);
    assert_eq!(r.anomalies["unseen"].examples[0]["value"], 14);
    assert_eq!(r.lost_acknowledged(), 2);
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Kept));
    // Near miss: without complete final reads only the provable loss counts, and the
    // unseen write may only be delayed.
    let partial = h.check_with(CheckSettings {
        final_reads_completed: false,
        ..acks1
    });
    assert_eq!(partial.lost_acknowledged(), 1);
    assert!(!partial.anomalies["unseen"].invalidates);
    assert_eq!(
        partial.valid,
        Validity::Invalid,
        "the provable loss still decides"
    );
}

// ---- Runs that tested nothing are unknown, never valid. ----

#[test]
fn a_run_without_an_acknowledged_write_is_unknown() {
    let mut h = H::default();
    h.send_ended(0, K, 10, OpType::Fail)
        .send_ended(1, K, 11, OpType::Fail);
    h.final_read(&[], 0);
    let r = h.check();
    assert!(r.anomalies.is_empty());
    assert_eq!((r.valid, r.promise), (Validity::Unknown, Promise::Unknown));
    assert!(
        r.promise_reason.contains("no send was acknowledged"),
        "{}",
        r.promise_reason
    );
    // Near miss: one acknowledged write is enough.
    h.ops.clear();
    h.send_ended(0, K, 10, OpType::Fail).send_ok(1, K, 0, 11);
    h.final_read(&[(0, 11)], 1);
    assert_eq!(h.check().valid, Validity::Valid);
}

#[test]
fn a_partition_below_the_floor_of_acknowledged_writes_is_unknown() {
    let mut h = five_records();
    h.send_ended(0, "t0/1", 20, OpType::Info);
    h.final_read(&ALL5, 5);
    let r = h.check();
    assert_eq!(r.valid, Validity::Unknown);
    let reasons = r.stats["unknown_reasons"].to_string();
    assert!(reasons.contains("t0/1 (0)"), "{reasons}");
    // Near miss: a floor of zero accepts it.
    let r = h.check_with(CheckSettings {
        min_acked_per_key: 0,
        ..Default::default()
    });
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.stats["unknown_reasons"]);
}

fn nemesis(h: &mut H, f: &str, value: Value, error: Option<&str>) {
    let index = h.ops.len() as u64;
    h.ops.push(Op {
        index,
        time: index * 200_000_000,
        error: error.map(String::from),
        ..Op::nemesis(f, value)
    });
}

#[test]
fn a_run_that_injected_none_of_the_requested_faults_is_unknown() {
    let faults = CheckSettings {
        faults_requested: vec!["kill".into(), "partition".into()],
        ..Default::default()
    };
    let mut h = five_records();
    // A fault that failed everywhere was not injected.
    nemesis(
        &mut h,
        "start-kill",
        json!(["n1"]),
        Some("n1: no such process"),
    );
    h.final_read(&ALL5, 5);
    let r = h.check_with(faults.clone());
    assert_eq!(r.valid, Validity::Unknown);
    assert!(
        r.promise_reason
            .contains("none of the requested faults (kill, partition)"),
        "{}",
        r.promise_reason
    );
    assert_eq!(r.stats["faults"]["failed"], 1);
    // Near miss: one partition was injected.
    let mut h = five_records();
    nemesis(&mut h, "start-partition", json!({"n1": ["n2"]}), None);
    nemesis(&mut h, "stop-partition", Value::Null, None);
    h.final_read(&ALL5, 5);
    let r = h.check_with(faults);
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.stats["unknown_reasons"]);
    assert_eq!(r.stats["faults"]["injected"]["partition"], 1);
    let windows = r.stats["fault_windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0]["nodes"], json!(["n1", "n2"]));
}

#[test]
fn a_history_prefix_without_final_reads_is_unknown_not_invalid() {
    let mut h = five_records();
    h.assign(2, &[K], "assign");
    h.poll(2, &ALL5[..2]);
    // The default settings say the final reads completed, but the history has none.
    let r = h.check();
    assert_eq!(r.valid, Validity::Unknown, "{:?}", r.anomalies);
    assert!(!r.anomalies["unseen"].invalidates && !r.anomalies["unseen"].breaks_promise);
    assert_eq!(r.lost_acknowledged(), 0);
    assert!(
        r.promise_reason.contains("no ok final read"),
        "{}",
        r.promise_reason
    );
}

#[test]
fn a_consumer_reset_after_a_loss_is_explained_by_the_loss() {
    let mut h = five_records_read();
    // The tail was cut to 3; the consumer, at offset 4, is answered OFFSET_OUT_OF_RANGE and
    // restarts from the log start.
    h.poll_with(2, &ALL5[..3], Some(3), false);
    h.final_read(&ALL5[..3], 3);
    let r = h.check();
    let e = &r.anomalies["nonmonotonic-poll"].examples[0];
    assert_eq!(e["after_loss"], true, "{e}");
    assert!(e["explanation"]
        .as_str()
        .unwrap()
        .contains("OFFSET_OUT_OF_RANGE"));
    // Near miss: a reset while nothing was lost is not explained away.
    let mut h = five_records_read();
    h.poll_with(2, &ALL5[..3], Some(5), false);
    h.final_read(&ALL5, 5);
    let e = &h.check().anomalies["nonmonotonic-poll"].examples[0];
    assert!(e.get("after_loss").is_none(), "{e}");
}

/// Five acknowledged records, then the nemesis's `ops` (f, nodes), then a final read that
/// lost offset 1: the lost write is judged against the power losses.
fn lost_after_power_loss(ops: &[(&str, Value)], settings: CheckSettings) -> CheckResults {
    let mut h = five_records();
    for (f, nodes) in ops {
        nemesis(&mut h, f, nodes.clone(), None);
    }
    h.final_read(&[(0, 10), (2, 12), (3, 13), (4, 14)], 5);
    h.check_with(settings)
}

fn min_isr(n: u32) -> CheckSettings {
    CheckSettings {
        min_insync_replicas: n,
        ..Default::default()
    }
}

#[test]
fn a_power_loss_of_min_insync_brokers_at_once_permits_losing_acks_all_writes() {
    let r = lost_after_power_loss(
        &[
            ("start-power-loss", json!(["n1"])),
            ("stop-power-loss", json!(["n1"])),
        ],
        min_isr(1),
    );
    let lost = &r.anomalies["lost-write"];
    assert_eq!((lost.count, lost.breaks_promise), (1, false));
    assert!(lost.note.contains("power was lost"), "{}", lost.note);
    assert_eq!(
        r.valid,
        Validity::Invalid,
        "a loss is a fact whatever the promise"
    );
    assert_eq!(r.promise, Promise::Kept, "{}", r.promise_reason);
    // Two brokers down at once with min.insync.replicas=2: permitted too.
    let r = lost_after_power_loss(
        &[
            ("start-power-loss", json!(["n1"])),
            ("start-power-loss", json!(["n2"])),
            ("stop-power-loss", json!(["n1", "n2"])),
        ],
        min_isr(2),
    );
    assert_eq!(r.promise, Promise::Kept, "{}", r.promise_reason);
}

#[test]
fn near_misses_of_a_permitted_power_loss_break_the_promise() {
    let broken = |ops: &[(&str, Value)], settings: CheckSettings, why: &str| {
        let r = lost_after_power_loss(ops, settings);
        assert_eq!(r.promise, Promise::Broken, "{why}: {}", r.promise_reason);
        assert!(r.anomalies["lost-write"].breaks_promise, "{why}");
        assert_eq!(r.valid, Validity::Invalid, "{why}");
    };
    // One broker short of min.insync.replicas=2.
    broken(
        &[
            ("start-power-loss", json!(["n1"])),
            ("stop-power-loss", json!(["n1"])),
        ],
        min_isr(2),
        "one of two",
    );
    // Two power losses that never overlap: n1 is booted before n2 loses power.
    broken(
        &[
            ("start-power-loss", json!(["n1"])),
            ("stop-power-loss", json!(["n1"])),
            ("start-power-loss", json!(["n2"])),
            ("stop-power-loss", json!(["n2"])),
        ],
        min_isr(2),
        "two in turn",
    );
    // The controller holds no records: c1 and n1 at once are one broker.
    broken(
        &[
            ("start-power-loss", json!(["c1", "n1"])),
            ("stop-power-loss", json!(["c1", "n1"])),
        ],
        min_isr(2),
        "controller and one broker",
    );
    // Two brokers killed (SIGKILL only: the page cache survives) are no power loss.
    broken(
        &[
            ("start-kill", json!(["n1", "n2"])),
            ("stop-kill", json!(["n1", "n2"])),
        ],
        min_isr(2),
        "kill is not power loss",
    );
    // Every broker lost power, but flush.messages=1 fsynced every record before its ack.
    let flushed = CheckSettings {
        flush_messages: Some(1),
        ..min_isr(2)
    };
    broken(
        &[
            ("start-power-loss", json!(["n1", "n2", "n3"])),
            ("stop-power-loss", json!(["n1", "n2", "n3"])),
        ],
        flushed,
        "flush.messages=1",
    );
}

#[test]
fn flush_messages_comes_from_its_kafka_names() {
    let configs = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    let s = CheckSettings::from_kafka_configs("all", &configs("flush.messages", "1")).unwrap();
    assert_eq!(s.flush_messages, Some(1));
    let s = CheckSettings::from_kafka_configs("all", &configs("log.flush.interval.messages", "5"))
        .unwrap();
    assert_eq!(s.flush_messages, Some(5));
    let s = CheckSettings::from_kafka_configs("all", &BTreeMap::new()).unwrap();
    assert_eq!(s.flush_messages, None);
    assert!(CheckSettings::from_kafka_configs("all", &configs("flush.messages", "x")).is_err());
}

/// `replica-divergence` through the files a run writes: a clean history beside replica logs
/// that differ below the HW is invalid and breaks the promise; the same logs in agreement
/// leave it valid; with truncation to the HW (pre-KIP-101) the divergence is expected.
#[test]
fn replica_divergence_below_the_hw_invalidates_a_clean_history() {
    use tidewater_workloads::checker::check_file_with_replicas;
    use tidewater_workloads::replicas::{write_file, PartitionReplicas, ReplicaLog};
    let mut h = five_records();
    h.final_read(&ALL5, 5);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    let text: String = h
        .ops
        .iter()
        .map(|o| serde_json::to_string(o).unwrap() + "\n")
        .collect();
    std::fs::write(&history, text).unwrap();
    let log = |node: &str, values: [i64; 5]| ReplicaLog {
        node: node.into(),
        role: None,
        log_start_offset: 0,
        high_watermark: 5,
        log_end_offset: 5,
        records: values
            .iter()
            .enumerate()
            .map(|(o, v)| (o as u64, 0, None, v.to_string()).into())
            .collect(),
        truncated: false,
    };
    let replicas = |follower: [i64; 5]| PartitionReplicas {
        key: K.into(),
        leader: Some("n1".into()),
        isr: vec!["n1".into(), "n2".into()],
        settled: true,
        replicas: vec![log("n1", [10, 11, 12, 13, 14]), log("n2", follower)],
        unread: Vec::new(),
    };
    let path = dir.path().join("replicas.jsonl");
    let settings = CheckSettings::default();

    write_file(&path, &[replicas([10, 11, 12, 13, 14])]).unwrap();
    let r = check_file_with_replicas(&history, &path, &settings).unwrap();
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
    assert_eq!(r.stats["replica_logs"]["compared"], true);
    assert_eq!(r.stats["replica_logs"]["divergent_below_hw"], 0);

    write_file(&path, &[replicas([10, 11, 97, 98, 14])]).unwrap();
    let r = check_file_with_replicas(&history, &path, &settings).unwrap();
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Broken));
    let a = &r.anomalies["replica-divergence"];
    assert_eq!((a.count, a.invalidates, a.breaks_promise), (2, true, true));
    assert_eq!(a.examples[0]["offset"], 2);
    assert_eq!(a.examples[0]["replicas"]["n1"]["value"], 12);
    assert_eq!(a.examples[0]["replicas"]["n2"]["value"], 97);
    assert_eq!(a.examples[1]["offset"], 3);
    assert_eq!(r.stats["replica_logs"]["divergent_below_hw"], 2);

    let pre_kip101 = CheckSettings {
        truncate_to_hw: true,
        ..CheckSettings::default()
    };
    let r = check_file_with_replicas(&history, &path, &pre_kip101).unwrap();
    let a = &r.anomalies["replica-divergence"];
    assert!(a.invalidates && !a.breaks_promise, "{a:?}");

    let missing = dir.path().join("none.jsonl");
    let r = check_file_with_replicas(&history, &missing, &settings).unwrap();
    assert_eq!(r.valid, Validity::Valid);
    assert_eq!(r.stats["replica_logs"]["compared"], false);
}
