//! Hand-built transactional histories (`f: "txn"`): each anomaly of the transaction analysis
//! flagged with its exact values, and a near miss one step away that must be clean.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use tidewater_workloads::checker::txn_gen::{generate_txns, TxnGenConfig};
use tidewater_workloads::checker::IsolationLevel;
use tidewater_workloads::checker::{check, check_file, check_reader, CheckSettings};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::results::{CheckResults, Promise, Validity};

const X: &str = "t0/0";
const Y: &str = "t0/1";

/// One micro-op of a transaction, in its completion form.
#[derive(Clone)]
enum M {
    /// `["send", key, [offset, value]]`.
    Send(&'static str, u64, i64),
    /// `["poll", {key: [[offset, value], ...]}]`.
    Poll(Vec<(&'static str, Vec<(u64, i64)>)>),
}

impl M {
    fn invoke(&self) -> Value {
        match self {
            M::Send(k, _, v) => json!(["send", k, v]),
            M::Poll(_) => json!(["poll"]),
        }
    }

    fn completion(&self) -> Value {
        match self {
            M::Send(k, o, v) => json!(["send", k, [o, v]]),
            M::Poll(reads) => {
                let m: serde_json::Map<String, Value> = reads
                    .iter()
                    .map(|(k, recs)| (k.to_string(), json!(recs)))
                    .collect();
                json!(["poll", m])
            }
        }
    }
}

fn poll(reads: &[(&'static str, &[(u64, i64)])]) -> M {
    M::Poll(reads.iter().map(|(k, r)| (*k, r.to_vec())).collect())
}

/// Builds a history op by op; indexes and times are assigned in order.
#[derive(Default)]
struct T {
    ops: Vec<Op>,
    /// Each key's committed records, for the final reads.
    log: BTreeMap<&'static str, Vec<(u64, i64)>>,
}

impl T {
    fn push(&mut self, p: u64, kind: OpType, f: &str, value: Value) -> u64 {
        let index = self.ops.len() as u64;
        self.ops.push(Op {
            index,
            time: index * 1_000_000,
            ..Op::client(p, kind, f, value)
        });
        index
    }

    fn invoke(&mut self, p: u64, micros: &[M]) -> u64 {
        let v: Vec<Value> = micros.iter().map(M::invoke).collect();
        self.push(p, OpType::Invoke, "txn", json!(v))
    }

    /// The completion of `p`'s transaction: ok carries the results (and its sends join the
    /// log the final reads return), fail and info repeat the invoke.
    fn complete(&mut self, p: u64, kind: OpType, micros: &[M]) -> u64 {
        let value: Vec<Value> = match kind {
            OpType::Ok => micros.iter().map(M::completion).collect(),
            _ => micros.iter().map(M::invoke).collect(),
        };
        if kind == OpType::Ok {
            for m in micros {
                if let M::Send(k, o, v) = m {
                    self.log.entry(k).or_default().push((*o, *v));
                }
            }
        }
        self.push(p, kind, "txn", json!(value))
    }

    /// A transaction invoked and completed at once; returns the completion's index.
    fn txn(&mut self, p: u64, kind: OpType, micros: &[M]) -> u64 {
        self.invoke(p, micros);
        self.complete(p, kind, micros)
    }

    /// Final reads of every key written, returning exactly its committed records (plus
    /// `extra`), the high watermark past them.
    fn final_reads_with(&mut self, extra: &[(&'static str, u64, i64)]) {
        let mut log = self.log.clone();
        for &(k, o, v) in extra {
            log.entry(k).or_default().push((o, v));
        }
        for (i, (k, mut recs)) in log.into_iter().enumerate() {
            recs.sort_unstable();
            let p = 1000 + i as u64;
            let hw = recs.last().map_or(0, |r| r.0 + 1);
            self.push(p, OpType::Invoke, "poll", json!([["poll"]]));
            self.ops.last_mut().unwrap().r#final = true;
            self.push(p, OpType::Ok, "poll", json!([["poll", {k: recs}]]));
            let op = self.ops.last_mut().unwrap();
            op.r#final = true;
            op.high_watermarks = Some(BTreeMap::from([(k.to_string(), hw)]));
        }
    }

    fn final_reads(&mut self) {
        self.final_reads_with(&[]);
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

fn read_uncommitted() -> CheckSettings {
    CheckSettings {
        isolation_level: IsolationLevel::ReadUncommitted,
        ..Default::default()
    }
}

/// Two committed transactions, each reading what the other committed before: clean.
#[test]
fn a_clean_transactional_history_is_valid() {
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(Y, 0, 2)]);
    h.txn(1, OpType::Ok, &[poll(&[(X, &[(0, 1)]), (Y, &[(0, 2)])])]);
    h.txn(1, OpType::Ok, &[M::Send(X, 2, 3), poll(&[])]);
    h.final_reads();
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid, "{:?}", r.anomalies);
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.promise, Promise::Kept);
    let t = &r.stats["transactions"];
    assert_eq!(
        t["txns"],
        json!({"committed": 3, "aborted": 0, "unknown": 0})
    );
    assert_eq!(t["graph"]["vertices"], 3 + 2); // three txns, two final reads
    assert_eq!(t["graph"]["edges"]["wr"], 4); // 0 -> 1, and 0, 2 -> the final reads
    assert_eq!(t["cycles"], json!({}));
}

#[test]
fn a_history_without_txn_ops_has_no_transaction_stats() {
    let mut h = T::default();
    h.push(0, OpType::Invoke, "send", json!([["send", X, 1]]));
    h.push(0, OpType::Ok, "send", json!([["send", X, [0, 1]]]));
    h.log.insert(X, vec![(0, 1)]);
    h.final_reads();
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid);
    assert!(r.stats.get("transactions").is_none());
    // The settings say transactional: the analysis runs all the same.
    let r = h.check_with(CheckSettings {
        transactional: true,
        ..Default::default()
    });
    assert_eq!(r.stats["transactions"]["recorded_ops"], 2);
}

#[test]
fn aborted_read_is_a_value_of_an_aborted_transaction_that_was_read() {
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(Y, 0, 9)]);
    let aborted = h.txn(1, OpType::Fail, &[M::Send(X, 1, 2), M::Send(Y, 1, 3)]);
    let read = h.txn(2, OpType::Ok, &[poll(&[(X, &[(0, 1), (1, 2)])])]);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["aborted-read"]);
    let a = &r.anomalies["aborted-read"];
    assert_eq!(a.count, 1);
    let ex = &a.examples[0];
    assert_eq!(
        (&ex["value"], &ex["offset"], &ex["key"]),
        (&json!(2), &json!(1), &json!(X))
    );
    assert_eq!(ex["send_op"], aborted - 1);
    assert_eq!(ex["read_op"], read);
    assert_eq!(ex["aborted_txn"], true);
    assert!(a.invalidates && a.breaks_promise, "{a:?}");
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.promise, Promise::Broken);
    // read_uncommitted consumers see aborted records: a fact, not a broken promise.
    let r = h.check_with(read_uncommitted());
    let a = &r.anomalies["aborted-read"];
    assert!(a.invalidates && !a.breaks_promise, "{a:?}");
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Kept));
    assert!(
        r.promise_reason
            .contains("isolation.level=read_uncommitted")
            && r.promise_reason.contains("aborted-read (1)"),
        "{}",
        r.promise_reason
    );
}

#[test]
fn a_read_proves_an_info_transaction_committed_no_aborted_read() {
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1)]);
    h.txn(1, OpType::Info, &[M::Send(X, 1, 2)]);
    h.txn(2, OpType::Ok, &[poll(&[(X, &[(0, 1), (1, 2)])])]);
    h.final_reads_with(&[(X, 1, 2)]);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.stats["sends"]["info_proven"], 1);
    assert_eq!(r.stats["transactions"]["txns"]["unknown"], 1);
}

#[test]
fn precommitted_read_is_a_transaction_reading_its_own_send() {
    let mut h = T::default();
    let op = h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), poll(&[(X, &[(0, 1)])])]);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["precommitted-read"]);
    let a = &r.anomalies["precommitted-read"];
    let ex = &a.examples[0];
    assert_eq!(
        (&ex["value"], &ex["offset"], &ex["own_write"]),
        (&json!(1), &json!(0), &json!(true))
    );
    assert_eq!(ex["op"]["op"], op);
    assert!(a.invalidates && a.breaks_promise);
    assert_eq!(r.promise, Promise::Broken);
    let r = h.check_with(read_uncommitted());
    assert!(!r.anomalies["precommitted-read"].breaks_promise);
    assert_eq!(r.promise, Promise::Kept);
}

#[test]
fn precommitted_read_is_a_read_completed_before_its_transaction_began() {
    let mut h = T::default();
    let read = h.txn(1, OpType::Ok, &[poll(&[(X, &[(0, 1)])])]);
    let writer_invoke = h.invoke(0, &[M::Send(X, 0, 1)]);
    h.complete(0, OpType::Ok, &[M::Send(X, 0, 1)]);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["precommitted-read"]);
    let ex = &r.anomalies["precommitted-read"].examples[0];
    assert_eq!(
        (&ex["value"], &ex["read_op"], &ex["before_invoke"]),
        (&json!(1), &json!(read), &json!(true))
    );
    assert_eq!(ex["writer"]["invoke_op"], writer_invoke);
}

#[test]
fn a_read_while_the_transaction_is_in_flight_is_no_precommitted_read() {
    // Near miss: the read completes after the writer's invoke, before its completion; the
    // commit may have happened in between.
    let mut h = T::default();
    h.invoke(0, &[M::Send(X, 0, 1)]);
    h.txn(1, OpType::Ok, &[poll(&[(X, &[(0, 1)])])]);
    h.complete(0, OpType::Ok, &[M::Send(X, 0, 1)]);
    h.final_reads();
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.valid, Validity::Valid);
}

#[test]
fn intermediate_read_sees_part_of_a_transactions_writes_to_a_key() {
    let mut h = T::default();
    let writer = h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(X, 1, 2)]);
    let read = h.txn(1, OpType::Ok, &[poll(&[(X, &[(0, 1)])])]);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["intermediate-read"]);
    let a = &r.anomalies["intermediate-read"];
    let ex = &a.examples[0];
    assert_eq!((&ex["value"], &ex["read_op"]), (&json!(1), &json!(read)));
    assert_eq!(ex["writer"]["op"], writer);
    assert_eq!(ex["writer_values"], json!([1, 2]));
    // A poll may end inside a committed transaction: reported, not counted.
    assert!(!a.invalidates && !a.breaks_promise);
    assert_eq!(r.valid, Validity::Valid);
    // Near miss: the poll returns both of the transaction's writes.
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(X, 1, 2)]);
    h.txn(1, OpType::Ok, &[poll(&[(X, &[(0, 1), (1, 2)])])]);
    h.final_reads();
    assert!(h.check().anomalies.is_empty());
}

#[test]
fn lost_write_is_an_acknowledged_transaction_write_never_read_below_what_was_read() {
    let mut h = T::default();
    let lost = h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(Y, 0, 5)]);
    h.txn(1, OpType::Ok, &[M::Send(X, 1, 2)]);
    h.txn(2, OpType::Ok, &[poll(&[(X, &[(1, 2)])])]);
    // The final reads no longer hold offset 0 of t0/0 either.
    h.log.get_mut(X).unwrap().retain(|&(o, _)| o != 0);
    h.final_reads();
    let r = h.check();
    let a = &r.anomalies["lost-write"];
    assert_eq!(a.count, 1);
    assert_eq!(
        (&a.examples[0]["value"], &a.examples[0]["ack_op"]),
        (&json!(1), &json!(lost))
    );
    assert!(a.breaks_promise);
    assert_eq!(r.lost_acknowledged(), 1);
    // The rest of the transaction survived: a torn transaction.
    assert_eq!(r.stats["lost_acknowledged"]["by_key"], json!({X: 1}));
}

#[test]
fn duplicate_breaks_the_promise_only_under_idempotence() {
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1)]);
    h.final_reads_with(&[(X, 1, 1)]);
    let r = h.check();
    assert_eq!(
        r.anomalies["duplicate"].examples[0]["offsets"],
        json!([0, 1])
    );
    for (settings, breaks) in [
        (CheckSettings::default(), true),
        (
            CheckSettings {
                enable_idempotence: Some(true),
                ..Default::default()
            },
            true,
        ),
        (
            CheckSettings {
                transactional: true,
                ..Default::default()
            },
            true,
        ),
        (
            CheckSettings {
                enable_idempotence: Some(false),
                ..Default::default()
            },
            false,
        ),
    ] {
        let r = h.check_with(settings.clone());
        let a = &r.anomalies["duplicate"];
        assert_eq!(a.breaks_promise, breaks, "{settings:?}: {}", a.note);
        assert!(a.invalidates);
        assert_eq!(r.valid, Validity::Invalid);
    }
}

#[test]
fn int_variants_inside_one_transaction() {
    // 11 at offset 1 is known (another txn sent it); one txn's polls step over it, then back.
    let mut h = T::default();
    for (o, v) in [(0, 10), (1, 11), (2, 12)] {
        h.txn(0, OpType::Ok, &[M::Send(X, o, v)]);
    }
    let skip = h.txn(
        1,
        OpType::Ok,
        &[poll(&[(X, &[(0, 10)])]), poll(&[(X, &[(2, 12)])])],
    );
    let back = h.txn(
        2,
        OpType::Ok,
        &[poll(&[(X, &[(0, 10), (1, 11)])]), poll(&[(X, &[(0, 10)])])],
    );
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["int-nonmonotonic-poll", "int-poll-skip"]);
    let s = &r.anomalies["int-poll-skip"].examples[0];
    assert_eq!(
        (&s["offsets"], &s["ops"]),
        (&json!([0, 2]), &json!([skip, skip]))
    );
    let n = &r.anomalies["int-nonmonotonic-poll"].examples[0];
    assert_eq!(
        (&n["offsets"], &n["ops"]),
        (&json!([1, 0]), &json!([back, back]))
    );
    // Near miss: the same polls, contiguous.
    let mut h = T::default();
    h.txn(
        0,
        OpType::Ok,
        &[M::Send(X, 0, 10), M::Send(X, 1, 11), M::Send(X, 2, 12)],
    );
    h.txn(
        1,
        OpType::Ok,
        &[poll(&[(X, &[(0, 10)])]), poll(&[(X, &[(1, 11), (2, 12)])])],
    );
    h.final_reads();
    assert!(h.check().anomalies.is_empty());
}

#[test]
fn int_send_skip_inside_a_transaction_is_reported_not_counted() {
    // Another producer's record lands between two sends of one transaction: Kafka's design.
    let mut h = T::default();
    h.invoke(0, &[M::Send(X, 0, 1), M::Send(X, 2, 3)]);
    h.txn(1, OpType::Ok, &[M::Send(X, 1, 2)]);
    h.complete(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(X, 2, 3)]);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["G0", "int-send-skip"]);
    assert!(!r.anomalies["int-send-skip"].invalidates);
    assert_eq!(r.valid, Validity::Valid);
}

/// The kinds of a cycle example's steps, and its ops' indexes, in order.
fn cycle_of(r: &CheckResults, name: &str) -> (Vec<String>, Vec<u64>) {
    let ex = &r.anomalies[name].examples[0];
    let kinds = ex["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect();
    let ops = ex["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_u64().unwrap())
        .collect();
    (kinds, ops)
}

#[test]
fn g0_is_two_transactions_appending_to_two_keys_in_opposite_orders() {
    let mut h = T::default();
    let t1 = [M::Send(X, 0, 1), M::Send(Y, 1, 2)];
    let t2 = [M::Send(X, 1, 3), M::Send(Y, 0, 4)];
    h.invoke(0, &t1);
    h.invoke(1, &t2);
    let a = h.complete(0, OpType::Ok, &t1);
    let b = h.complete(1, OpType::Ok, &t2);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["G0"]);
    let (kinds, mut ops) = cycle_of(&r, "G0");
    assert_eq!(kinds, ["ww", "ww"]);
    ops.sort_unstable();
    assert_eq!(ops, [a, b]);
    let g0 = &r.anomalies["G0"];
    assert!(!g0.invalidates && !g0.breaks_promise);
    assert_eq!(r.valid, Validity::Valid);
    assert_eq!(r.stats["transactions"]["cycles"], json!({"G0": 1}));
    // Near miss: the second transaction appends after the first on both keys.
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(Y, 0, 2)]);
    h.txn(1, OpType::Ok, &[M::Send(X, 1, 3), M::Send(Y, 1, 4)]);
    h.final_reads();
    assert!(h.check().anomalies.is_empty());
}

/// T1 sends x and polls y; T2 sends y and polls x; each sees the other's send.
fn mutual_reads(t2_sees_x: bool) -> (T, u64, u64) {
    let mut h = T::default();
    let t1 = [M::Send(X, 0, 1), poll(&[(Y, &[(0, 2)])])];
    let t2_reads: &[(u64, i64)] = if t2_sees_x { &[(0, 1)] } else { &[] };
    let t2 = [M::Send(Y, 0, 2), poll(&[(X, t2_reads)])];
    h.invoke(0, &t1);
    h.invoke(1, &t2);
    let a = h.complete(0, OpType::Ok, &t1);
    let b = h.complete(1, OpType::Ok, &t2);
    h.final_reads();
    (h, a, b)
}

#[test]
fn g1c_of_write_read_edges_alone_breaks_read_committed() {
    let (h, a, b) = mutual_reads(true);
    let r = h.check();
    assert_eq!(names(&r), ["G1c"]);
    let (kinds, mut ops) = cycle_of(&r, "G1c");
    assert_eq!(kinds, ["wr", "wr"]);
    ops.sort_unstable();
    assert_eq!(ops, [a, b]);
    let g1c = &r.anomalies["G1c"];
    assert_eq!(g1c.examples[0]["wr_only"], true);
    assert!(g1c.invalidates && g1c.breaks_promise, "{g1c:?}");
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Broken));
    let step = &g1c.examples[0]["steps"][0];
    assert!(
        step["explanation"].as_str().unwrap().contains("which op"),
        "{step}"
    );
    // read_uncommitted: a fact, the promise holds.
    let r = h.check_with(read_uncommitted());
    assert!(r.anomalies["G1c"].invalidates && !r.anomalies["G1c"].breaks_promise);
    assert_eq!(r.promise, Promise::Kept);
    // Near miss: T2's poll of x returned nothing, so no edge leads back to T2.
    let (h, _, _) = mutual_reads(false);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
}

#[test]
fn g1c_through_a_ww_edge_is_reported_not_counted() {
    // T1 appends x before T2 does (ww T1 -> T2); T1 polls y and sees T2's send (wr T2 -> T1).
    let mut h = T::default();
    let t1 = [M::Send(X, 0, 1), poll(&[(Y, &[(0, 3)])])];
    let t2 = [M::Send(X, 1, 2), M::Send(Y, 0, 3)];
    h.invoke(0, &t1);
    h.invoke(1, &t2);
    h.complete(1, OpType::Ok, &t2);
    h.complete(0, OpType::Ok, &t1);
    h.final_reads();
    let r = h.check();
    assert_eq!(names(&r), ["G1c"]);
    let (mut kinds, _) = cycle_of(&r, "G1c");
    kinds.sort();
    assert_eq!(kinds, ["wr", "ww"]);
    let g1c = &r.anomalies["G1c"];
    assert_eq!(g1c.examples[0]["wr_only"], false);
    assert!(!g1c.invalidates && !g1c.breaks_promise);
    assert_eq!(r.valid, Validity::Valid);
}

/// T0 writes x=1 and y=5; T1 polls x (sees 1) and y; T2 sends x=2 and y=3 before T1 polls y.
fn read_skew(t1_sees_x2: bool) -> (T, u64, u64) {
    let mut h = T::default();
    h.txn(9, OpType::Ok, &[M::Send(X, 0, 1)]);
    let x_reads: &[(u64, i64)] = if t1_sees_x2 {
        &[(0, 1), (1, 2)]
    } else {
        &[(0, 1)]
    };
    let t1 = [poll(&[(X, x_reads)]), poll(&[(Y, &[(0, 3)])])];
    let t2 = [M::Send(X, 1, 2), M::Send(Y, 0, 3)];
    h.invoke(0, &t1);
    let b = h.txn(1, OpType::Ok, &t2);
    let a = h.complete(0, OpType::Ok, &t1);
    h.final_reads();
    (h, a, b)
}

#[test]
fn g_single_is_read_skew_across_two_keys() {
    let (h, a, b) = read_skew(false);
    let r = h.check();
    assert_eq!(names(&r), ["G-single"]);
    let (kinds, ops) = cycle_of(&r, "G-single");
    let mut pairs: Vec<(String, u64)> = kinds.into_iter().zip(ops).collect();
    pairs.sort();
    // T1 -rw-> T2 (T1 saw x up to 1, T2 sent 2 next), T2 -wr-> T1 (T1 polled T2's 3).
    assert_eq!(pairs, [("rw".to_string(), a), ("wr".to_string(), b)]);
    let ex = &r.anomalies["G-single"].examples[0];
    let rw = ex["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "rw")
        .unwrap();
    assert_eq!((&rw["key"], &rw["values"]), (&json!(X), &json!([1, 2])));
    let g = &r.anomalies["G-single"];
    assert!(!g.invalidates && !g.breaks_promise, "{g:?}");
    assert!(g.note.contains("not serializable"), "{}", g.note);
    assert_eq!((r.valid, r.promise), (Validity::Valid, Promise::Kept));
    // Near miss: T1 saw T2's write to x too.
    let (h, _, _) = read_skew(true);
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
}

/// Write skew: T1 reads x and writes y, T2 reads y and writes x, neither sees the other.
fn write_skew(t2_sees_y: bool) -> T {
    let mut h = T::default();
    h.txn(9, OpType::Ok, &[M::Send(X, 0, 1), M::Send(Y, 0, 5)]);
    let t1 = [poll(&[(X, &[(0, 1)])]), M::Send(Y, 1, 6)];
    let y_reads: &[(u64, i64)] = if t2_sees_y {
        &[(0, 5), (1, 6)]
    } else {
        &[(0, 5)]
    };
    let t2 = [poll(&[(Y, y_reads)]), M::Send(X, 1, 2)];
    h.invoke(0, &t1);
    h.invoke(1, &t2);
    h.complete(0, OpType::Ok, &t1);
    h.complete(1, OpType::Ok, &t2);
    h.final_reads();
    h
}

#[test]
fn g2_is_write_skew_two_rw_edges() {
    let r = write_skew(false).check();
    assert_eq!(names(&r), ["G2"]);
    let (kinds, _) = cycle_of(&r, "G2");
    assert_eq!(kinds, ["rw", "rw"]);
    let g2 = &r.anomalies["G2"];
    assert_eq!(g2.examples[0]["edges"], json!({"rw": 2}));
    assert!(!g2.invalidates && !g2.breaks_promise);
    assert_eq!(r.valid, Validity::Valid);
    // Near miss: T2 saw T1's write to y, so only T1 -rw-> T2 and T1 -wr-> T2 remain.
    let r = write_skew(true).check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
}

#[test]
fn an_aborted_transaction_is_no_vertex() {
    // The G0 of the first test, with one side aborted: no cycle, and its reads do not count.
    let mut h = T::default();
    let t1 = [M::Send(X, 0, 1), M::Send(Y, 1, 2)];
    let t2 = [M::Send(X, 1, 3), M::Send(Y, 0, 4)];
    h.invoke(0, &t1);
    h.invoke(1, &t2);
    h.complete(0, OpType::Ok, &t1);
    h.complete(1, OpType::Fail, &t2);
    h.final_reads();
    let r = h.check();
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.stats["transactions"]["graph"]["vertices"], 1 + 2);
    assert_eq!(r.stats["transactions"]["txns"]["aborted"], 1);
}

#[test]
fn streaming_a_file_gives_the_same_results_as_checking_in_memory() {
    let (h, _, _) = mutual_reads(true);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let mut text = String::new();
    // A plain send first: the file is scanned ahead, so it is recorded too.
    let mut ops = vec![
        Op::client(7, OpType::Invoke, "send", json!([["send", X, 50]])),
        Op::client(7, OpType::Fail, "send", json!([["send", X, 50]])),
    ];
    ops.extend(h.ops.iter().cloned());
    for (i, op) in ops.iter_mut().enumerate() {
        op.index = i as u64;
        text.push_str(&serde_json::to_string(op).unwrap());
        text.push('\n');
    }
    std::fs::write(&path, &text).unwrap();
    let settings = CheckSettings::default();
    let in_memory = check(&ops, &settings);
    let streamed = check_file(&path, &settings).unwrap();
    assert_eq!(streamed, in_memory);
    assert_eq!(streamed.stats["transactions"]["recorded_ops"], 1 + 2 + 2);
    // A bare reader cannot look ahead: recording starts at the first txn op, and says so.
    let from_reader = check_reader(text.as_bytes(), &settings).unwrap();
    assert_eq!(from_reader.stats["transactions"]["recorded_from_op"], 2);
    assert_eq!(from_reader.anomalies, in_memory.anomalies);
}

/// Checks a generated history of 100,000+ ops: the analysis handles this size (the test
/// times nothing; `docs/PERFORMANCE.md` has the benchmark) and a correct history breaks no
/// promise.
#[test]
fn a_generated_history_of_100k_ops_breaks_no_promise() {
    let ops = generate_txns(TxnGenConfig {
        seed: 7,
        txns: 50_000,
        ..Default::default()
    });
    assert!(ops.len() > 100_000, "{}", ops.len());
    let r = check(&ops, &CheckSettings::default());
    assert_eq!(
        (r.valid, r.promise),
        (Validity::Valid, Promise::Kept),
        "{:?}",
        r.anomalies
    );
    let t = &r.stats["transactions"];
    // Every send, poll and txn op is recorded; the aborted ones are no vertices.
    let client_ops = ops
        .iter()
        .filter(|op| op.kind == OpType::Invoke && ["send", "poll", "txn"].contains(&op.f.as_str()))
        .count();
    let aborted = ops.iter().filter(|op| op.kind == OpType::Fail).count();
    assert_eq!(t["recorded_ops"], client_ops);
    assert_eq!(t["graph"]["vertices"], client_ops - aborted);
    let txn_fail = ops
        .iter()
        .filter(|op| op.kind == OpType::Fail && op.f == "txn")
        .count();
    assert_eq!(t["txns"]["aborted"], txn_fail);
    assert!(
        t["graph"]["largest_component"].as_u64().unwrap() > 1000,
        "{t}"
    );
}

/// A committed transaction's sends at offsets 0 and 1 of X, then read_committed final reads
/// of X that get the record at 0 and stand at last stable offset `lso` for `stalled_s`
/// seconds (two reads, that far apart), never completing.
fn stalled_final_reads(lso: u64, stalled_s: u64) -> T {
    let mut h = T::default();
    h.txn(0, OpType::Ok, &[M::Send(X, 0, 1), M::Send(X, 1, 2)]);
    let start_ns = h.ops.last().unwrap().time + 1_000_000;
    for (i, at_ns) in [start_ns, start_ns + stalled_s * 1_000_000_000]
        .into_iter()
        .enumerate()
    {
        let p = 1000 + i as u64;
        let records: Vec<(u64, i64)> = [(0, 1), (1, 2)][..lso as usize].to_vec();
        h.push(p, OpType::Invoke, "poll", json!([["poll"]]));
        let invoke = h.ops.last_mut().unwrap();
        (invoke.r#final, invoke.time) = (true, at_ns);
        h.push(p, OpType::Ok, "poll", json!([["poll", {X: records}]]));
        let op = h.ops.last_mut().unwrap();
        (op.r#final, op.time) = (true, at_ns + 1_000);
        op.high_watermarks = Some(BTreeMap::from([(X.to_string(), lso)]));
    }
    h
}

/// Transactional producers with a 10 s transaction timeout, final reads not completed.
fn stalled_settings() -> CheckSettings {
    CheckSettings {
        transactional: true,
        transaction_timeout_ms: Some(10_000),
        final_reads_completed: false,
        ..Default::default()
    }
}

#[test]
fn hanging_transaction_is_a_last_stable_offset_held_past_the_transaction_timeout() {
    // Held 25 s at 1, longer than 10 s + the coordinator's 10 s check, with the committed
    // send at offset 1 behind it.
    let r = stalled_final_reads(1, 25).check_with(stalled_settings());
    let a = &r.anomalies["hanging-transaction"];
    assert_eq!(a.count, 1);
    let ex = &a.examples[0];
    assert_eq!(
        (
            &ex["key"],
            &ex["last_stable_offset"],
            &ex["acknowledged_above"],
            &ex["first_acknowledged_above"],
            &ex["final_reads"]
        ),
        (&json!(X), &json!(1), &json!(1), &json!(1), &json!(2))
    );
    assert_eq!(ex["stalled_s"], json!(25.0));
    assert!(a.invalidates && a.breaks_promise, "{a:?}");
    assert_eq!((r.valid, r.promise), (Validity::Invalid, Promise::Broken));
    // Near misses: held 15 s, within what a coordinator may take to abort it: the final
    // reads only did not complete (unknown); and held 25 s at 2, past every acknowledged
    // write, while something else kept the final reads from completing.
    for (lso, stalled_s) in [(1, 15), (2, 25)] {
        let r = stalled_final_reads(lso, stalled_s).check_with(stalled_settings());
        assert!(
            !r.anomalies.contains_key("hanging-transaction"),
            "{lso} {stalled_s}: {:?}",
            r.anomalies
        );
        assert_eq!(r.valid, Validity::Unknown, "{lso} {stalled_s}");
    }
    // Without a transaction.timeout.ms the client's default, 60 s, holds: 25 s is no hang.
    let r = stalled_final_reads(1, 25).check_with(CheckSettings {
        transaction_timeout_ms: None,
        ..stalled_settings()
    });
    assert!(!r.anomalies.contains_key("hanging-transaction"));
    let r = stalled_final_reads(1, 75).check_with(CheckSettings {
        transaction_timeout_ms: None,
        ..stalled_settings()
    });
    assert!(r.anomalies.contains_key("hanging-transaction"));
}
