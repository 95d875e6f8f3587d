//! A transactional run directory built by hand: every transaction anomaly the checker
//! reports, each on keys of its own (docs/checkers.md's examples), plus aborted and unknown
//! transactions, final reads, and results.json from the real checker.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tidewater_workloads::checker::{check, CheckSettings};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::results::CheckResults;

/// One micro-op of a transaction, in its completion form.
#[derive(Clone)]
pub enum M {
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

/// A poll of `key` returning `records`.
pub fn poll(key: &'static str, records: &[(u64, i64)]) -> M {
    M::Poll(vec![(key, records.to_vec())])
}

/// Time between two ops of a built history, ns: a transaction spans a few of them, so the
/// timeline shows it as a bar a reader can hover.
pub const OP_SPACING_NS: u64 = 40_000_000;

/// Builds a history op by op; indexes are dense and op `i` happens at `i` x
/// [`OP_SPACING_NS`].
#[derive(Default)]
pub struct TxnHistory {
    pub ops: Vec<Op>,
    /// Each key's committed records, for the final reads.
    log: BTreeMap<&'static str, Vec<(u64, i64)>>,
}

impl TxnHistory {
    /// A history of ready-made ops (a generated one), with its final reads.
    pub fn from_ops(ops: Vec<Op>) -> TxnHistory {
        TxnHistory {
            ops,
            log: BTreeMap::new(),
        }
    }

    fn push(&mut self, p: u64, kind: OpType, f: &str, value: Value) -> u64 {
        let index = self.ops.len() as u64;
        self.ops.push(Op {
            index,
            time: index * OP_SPACING_NS,
            ..Op::client(p, kind, f, value)
        });
        index
    }

    /// Invokes `p`'s transaction; returns the invoke's index.
    pub fn invoke(&mut self, p: u64, micros: &[M]) -> u64 {
        let v: Vec<Value> = micros.iter().map(M::invoke).collect();
        self.push(p, OpType::Invoke, "txn", json!(v))
    }

    /// Completes `p`'s transaction: ok carries the results (its sends join the log the
    /// final reads return), fail and info repeat the invoke. Returns the completion's index.
    pub fn complete(&mut self, p: u64, kind: OpType, micros: &[M]) -> u64 {
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
    pub fn txn(&mut self, p: u64, kind: OpType, micros: &[M]) -> u64 {
        self.invoke(p, micros);
        self.complete(p, kind, micros)
    }

    /// Final reads of every key written, returning exactly its committed records.
    pub fn final_reads(&mut self) {
        for (i, (k, mut recs)) in self.log.clone().into_iter().enumerate() {
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

    /// Writes history.jsonl, config.json and the checker's results.json into `dir`.
    pub fn write_run(&self, dir: &Path, name: &str) -> CheckResults {
        std::fs::create_dir_all(dir).unwrap();
        let lines: Vec<String> = self
            .ops
            .iter()
            .map(|op| serde_json::to_string(op).unwrap())
            .collect();
        std::fs::write(dir.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
        let results = check(&self.ops, &CheckSettings::default());
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&results).unwrap(),
        )
        .unwrap();
        super::write_json(
            &dir.join("config.json"),
            &json!({"name": name, "seed": 7, "workload": "txn", "acks": "all",
                    "nodes": ["n1", "n2", "n3"],
                    "sets": {"isolation.level": "read_committed",
                             "transactional.id": "tidewater"}}),
        );
        results
    }
}

/// The op indexes of the fixture's anomalies, for the assertions.
pub struct TxnFixture {
    pub history: TxnHistory,
    /// G0: two transactions appending to a0 and a1 in opposite orders.
    pub g0: (u64, u64),
    /// G1c of wr edges only: each of two transactions read the other's send (b0, b1).
    pub g1c: (u64, u64),
    /// G-single: the reader saw c0 before the writer's send and c1 after it.
    pub g_single_reader: u64,
    pub g_single_writer: u64,
    /// G2: each of two transactions missed the other's write (d0, d1).
    pub g2: (u64, u64),
    /// aborted-read: the aborted transaction's invoke and the read of its value (e0).
    pub aborted_invoke: u64,
    pub aborted_reader: u64,
    /// precommitted-read: a transaction that read its own send (f0).
    pub own_reader: u64,
    /// intermediate-read: the writer of two values to g0 and the read of the first.
    pub intermediate_writer: u64,
    pub intermediate_reader: u64,
    /// A transaction that ended info and one more that aborted (h0).
    pub unknown: u64,
    pub aborted_plain: u64,
}

/// Every transaction anomaly on keys of its own, as in workloads/tests/checker_txn.rs.
pub fn txn_fixture() -> TxnFixture {
    let mut h = TxnHistory::default();
    // G0: T1 first on a0, second on a1; T2 the other way round.
    let t1 = [M::Send("a0", 0, 1), M::Send("a1", 1, 2)];
    let t2 = [M::Send("a0", 1, 3), M::Send("a1", 0, 4)];
    h.invoke(1, &t1);
    h.invoke(2, &t2);
    let g0 = (
        h.complete(1, OpType::Ok, &t1),
        h.complete(2, OpType::Ok, &t2),
    );
    // G1c: T1 sends b0 and reads T2's b1; T2 sends b1 and reads T1's b0.
    let t1 = [M::Send("b0", 0, 11), poll("b1", &[(0, 12)])];
    let t2 = [M::Send("b1", 0, 12), poll("b0", &[(0, 11)])];
    h.invoke(3, &t1);
    h.invoke(4, &t2);
    let g1c = (
        h.complete(3, OpType::Ok, &t1),
        h.complete(4, OpType::Ok, &t2),
    );
    // G-single: T0 writes c0=21; T1 reads c0 (21) then c1 (23), T2 writes c0=22, c1=23 between.
    h.txn(5, OpType::Ok, &[M::Send("c0", 0, 21)]);
    let reader = [poll("c0", &[(0, 21)]), poll("c1", &[(0, 23)])];
    h.invoke(6, &reader);
    let g_single_writer = h.txn(7, OpType::Ok, &[M::Send("c0", 1, 22), M::Send("c1", 0, 23)]);
    let g_single_reader = h.complete(6, OpType::Ok, &reader);
    // G2: T0 writes d0=31, d1=35; T1 reads d0 and writes d1=36; T2 reads d1 and writes d0=32.
    h.txn(8, OpType::Ok, &[M::Send("d0", 0, 31), M::Send("d1", 0, 35)]);
    let t1 = [poll("d0", &[(0, 31)]), M::Send("d1", 1, 36)];
    let t2 = [poll("d1", &[(0, 35)]), M::Send("d0", 1, 32)];
    h.invoke(9, &t1);
    h.invoke(10, &t2);
    let g2 = (
        h.complete(9, OpType::Ok, &t1),
        h.complete(10, OpType::Ok, &t2),
    );
    // aborted-read: T1 aborted, T2 read its value all the same.
    h.txn(11, OpType::Ok, &[M::Send("e0", 0, 41)]);
    let aborted_invoke = h.invoke(12, &[M::Send("e0", 1, 42)]);
    h.complete(12, OpType::Fail, &[M::Send("e0", 1, 42)]);
    let aborted_reader = h.txn(13, OpType::Ok, &[poll("e0", &[(0, 41), (1, 42)])]);
    // precommitted-read: a transaction read its own send.
    let own_reader = h.txn(
        14,
        OpType::Ok,
        &[M::Send("f0", 0, 51), poll("f0", &[(0, 51)])],
    );
    // intermediate-read: a read ends between a transaction's two sends to g0.
    let intermediate_writer = h.txn(
        15,
        OpType::Ok,
        &[M::Send("g0", 0, 61), M::Send("g0", 1, 62)],
    );
    let intermediate_reader = h.txn(16, OpType::Ok, &[poll("g0", &[(0, 61)])]);
    // A committed send, then an unknown transaction (never read) and another abort, on h0.
    h.txn(19, OpType::Ok, &[M::Send("h0", 0, 73)]);
    let unknown = h.txn(17, OpType::Info, &[M::Send("h0", 0, 71)]);
    let aborted_plain = h.txn(18, OpType::Fail, &[M::Send("h0", 0, 72), poll("a0", &[])]);
    h.final_reads();
    TxnFixture {
        history: h,
        g0,
        g1c,
        g_single_reader,
        g_single_writer,
        g2,
        aborted_invoke,
        aborted_reader,
        own_reader,
        intermediate_writer,
        intermediate_reader,
        unknown,
        aborted_plain,
    }
}

/// `txn` completions of `ops` by outcome, counted from the ops themselves: [ok, fail, info].
pub fn count_txns(ops: &[Op]) -> [u64; 3] {
    let n = |kind: OpType| {
        ops.iter()
            .filter(|op| op.f == "txn" && op.kind == kind)
            .count() as u64
    };
    [n(OpType::Ok), n(OpType::Fail), n(OpType::Info)]
}
