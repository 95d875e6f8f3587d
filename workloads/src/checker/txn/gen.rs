//! A generator of *correct* transactional histories: concurrent processes run `txn` ops of
//! sends and polls against an in-memory model of Kafka's transactional log, read as
//! `read_committed` consumers do.
//!
//! The model: each key is a log of records, each of an open, committed or aborted
//! transaction, plus one control record (a commit or abort marker, no value) per key a
//! transaction wrote, appended when it ends. A send appends at the log's end at once (other
//! transactions' sends interleave). A poll reads, from the process's position on each key,
//! committed records below the last stable offset (the first record of a still open
//! transaction), skipping aborted and control records, at most `poll_records_max` per key.
//! A transaction that aborts seeks its consumer back to where it began (its reads are
//! void). Ops made only of sends or only of polls are tagged `send` or `poll`, as Jepsen's
//! workload tags them. An `info` transaction committed or aborted (half each); its process
//! never runs again. The history ends with final reads of every key from offset 0.
//!
//! Such a history breaks no promise of Kafka's transactions: no aborted, precommitted or
//! lost write, no duplicate, no write-read-only cycle. It may hold the facts Kafka allows:
//! `G0`, `G1c` with ww edges, `G-single`, `G2`, `intermediate-read`, `int-send-skip`.

use crate::history::{Op, OpType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The shape of a generated transactional history.
#[derive(Debug, Clone)]
pub struct TxnGenConfig {
    /// Drives every random choice.
    pub seed: u64,
    /// Transactions to run (ops of the main phase, each an invoke and a completion).
    pub txns: u64,
    /// Keys `t0/0`, `t0/1`, ...
    pub keys: u32,
    /// Concurrent processes.
    pub processes: u32,
    /// At most this many micro-ops per transaction.
    pub micro_ops_max: usize,
    /// At most this many records per key per poll.
    pub poll_records_max: usize,
    /// Probability that a transaction aborts (`fail`).
    pub abort_probability: f64,
    /// Probability that a transaction ends `info`.
    pub info_probability: f64,
}

impl Default for TxnGenConfig {
    fn default() -> Self {
        TxnGenConfig {
            seed: 0,
            txns: 1000,
            keys: 4,
            processes: 5,
            micro_ops_max: 4,
            poll_records_max: 5,
            abort_probability: 0.1,
            info_probability: 0.02,
        }
    }
}

/// Whose and in what state a record of the model's log is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Committed,
    Aborted,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    /// `None` for a control record.
    value: Option<i64>,
    /// The transaction (its invoke index) that wrote it.
    txn: u64,
    state: State,
}

/// A micro-op planned by an invoke.
#[derive(Debug, Clone, Copy)]
enum Planned {
    Send(u32, i64),
    Poll,
}

/// A transaction in flight.
#[derive(Debug)]
struct Running {
    invoke_op: u64,
    f: &'static str,
    plan: Vec<Planned>,
    /// Micro-ops done, in their completion form.
    done: Vec<Value>,
    /// (key, offset) of each record it appended.
    appended: Vec<(u32, u64)>,
    /// Consumer positions when it began, restored on abort.
    positions_before: Vec<u64>,
}

#[derive(Debug)]
struct Process {
    number: u64,
    /// Next offset to read, per key.
    positions: Vec<u64>,
    running: Option<Running>,
}

struct Model {
    cfg: TxnGenConfig,
    rng: StdRng,
    logs: Vec<Vec<Record>>,
    /// Per key, no record below this offset is open: where the search for the last stable
    /// offset resumes (records only leave the open state, so it only moves up).
    settled: Vec<usize>,
    ops: Vec<Op>,
    next_value: i64,
    next_process: u64,
}

fn key_name(k: u32) -> String {
    format!("t0/{k}")
}

impl Model {
    fn emit(&mut self, process: u64, kind: OpType, f: &str, value: Value) -> &mut Op {
        let index = self.ops.len() as u64;
        self.ops.push(Op {
            index,
            time: index * 1_000_000,
            ..Op::client(process, kind, f, value)
        });
        self.ops.last_mut().expect("just pushed")
    }

    fn assign_all(&mut self, process: u64) {
        let keys: Vec<String> = (0..self.cfg.keys).map(key_name).collect();
        self.emit(process, OpType::Invoke, "assign", json!(keys));
        self.emit(process, OpType::Ok, "assign", json!(keys));
    }

    fn new_process(&mut self) -> Process {
        let number = self.next_process;
        self.next_process += 1;
        self.assign_all(number);
        Process {
            number,
            positions: vec![0; self.cfg.keys as usize],
            running: None,
        }
    }

    /// The last stable offset of `key`: its first record of an open transaction.
    fn lso(&mut self, key: u32) -> u64 {
        let log = &self.logs[key as usize];
        let at = &mut self.settled[key as usize];
        while *at < log.len() && log[*at].state != State::Open {
            *at += 1;
        }
        *at as u64
    }

    /// A read_committed poll of every key from `positions`, advancing them.
    fn poll(&mut self, positions: &mut [u64], max: usize) -> Map<String, Value> {
        let mut out = Map::new();
        for key in 0..self.cfg.keys {
            let lso = self.lso(key);
            let log = &self.logs[key as usize];
            let mut records = Vec::new();
            let mut at = positions[key as usize];
            while at < lso && records.len() < max {
                let r = log[at as usize];
                if let (State::Committed, Some(v)) = (r.state, r.value) {
                    records.push(json!([at, v]));
                }
                at += 1;
            }
            positions[key as usize] = at;
            if !records.is_empty() {
                out.insert(key_name(key), Value::Array(records));
            }
        }
        out
    }

    fn start(&mut self, p: &mut Process) {
        let n = self.rng.gen_range(1..=self.cfg.micro_ops_max.max(1));
        let plan: Vec<Planned> = (0..n)
            .map(|_| {
                if self.rng.gen_bool(0.5) {
                    let key = self.rng.gen_range(0..self.cfg.keys);
                    self.next_value += 1;
                    Planned::Send(key, self.next_value)
                } else {
                    Planned::Poll
                }
            })
            .collect();
        let f = if plan.iter().all(|m| matches!(m, Planned::Send(..))) {
            "send"
        } else if plan.iter().all(|m| matches!(m, Planned::Poll)) {
            "poll"
        } else {
            "txn"
        };
        let invoke: Vec<Value> = plan.iter().map(|m| invoke_form(*m)).collect();
        let invoke_op = self.emit(p.number, OpType::Invoke, f, json!(invoke)).index;
        p.running = Some(Running {
            invoke_op,
            f,
            plan,
            done: Vec::new(),
            appended: Vec::new(),
            positions_before: p.positions.clone(),
        });
    }

    /// Runs the next micro-op of `p`'s transaction; false when none is left.
    fn advance(&mut self, p: &mut Process) -> bool {
        let run = p.running.as_mut().expect("running");
        let Some(&next) = run.plan.get(run.done.len()) else {
            return false;
        };
        match next {
            Planned::Send(key, value) => {
                let log = &mut self.logs[key as usize];
                let offset = log.len() as u64;
                log.push(Record {
                    value: Some(value),
                    txn: run.invoke_op,
                    state: State::Open,
                });
                run.appended.push((key, offset));
                run.done
                    .push(json!(["send", key_name(key), [offset, value]]));
            }
            Planned::Poll => {
                let max = self.cfg.poll_records_max.max(1);
                let records = self.poll(&mut p.positions, max);
                let run = p.running.as_mut().expect("running");
                run.done.push(json!(["poll", records]));
            }
        }
        true
    }

    /// Ends `p`'s transaction: commit or abort in the model, and its completion.
    fn end(&mut self, p: &mut Process) -> bool {
        let run = p.running.take().expect("running");
        let roll: f64 = self.rng.gen();
        let (kind, commit) = if roll < self.cfg.info_probability {
            (OpType::Info, self.rng.gen_bool(0.5))
        } else if roll < self.cfg.info_probability + self.cfg.abort_probability {
            (OpType::Fail, false)
        } else {
            (OpType::Ok, true)
        };
        let state = if commit {
            State::Committed
        } else {
            State::Aborted
        };
        let mut keys: Vec<u32> = run.appended.iter().map(|&(k, _)| k).collect();
        keys.sort_unstable();
        keys.dedup();
        for &(key, offset) in &run.appended {
            self.logs[key as usize][offset as usize].state = state;
        }
        for key in keys {
            self.logs[key as usize].push(Record {
                value: None,
                txn: run.invoke_op,
                state,
            });
        }
        debug_assert!(run
            .appended
            .iter()
            .all(|&(k, o)| self.logs[k as usize][o as usize].txn == run.invoke_op));
        let value = match kind {
            OpType::Ok => json!(run.done),
            _ => json!(run.plan.iter().map(|m| invoke_form(*m)).collect::<Vec<_>>()),
        };
        if kind == OpType::Fail {
            p.positions = run.positions_before;
        }
        self.emit(p.number, kind, run.f, value);
        kind == OpType::Info
    }

    fn final_reads(&mut self) {
        for key in 0..self.cfg.keys {
            let number = self.next_process;
            self.next_process += 1;
            let name = key_name(key);
            self.emit(number, OpType::Invoke, "assign", json!([name]));
            self.emit(number, OpType::Ok, "assign", json!([name]));
            let records: Vec<Value> = self.logs[key as usize]
                .iter()
                .enumerate()
                .filter_map(|(o, r)| match (r.state, r.value) {
                    (State::Committed, Some(v)) => Some(json!([o, v])),
                    _ => None,
                })
                .collect();
            let hw = self.logs[key as usize].len() as u64;
            self.emit(number, OpType::Invoke, "poll", json!([["poll"]]))
                .r#final = true;
            let op = self.emit(
                number,
                OpType::Ok,
                "poll",
                json!([["poll", {name.clone(): records}]]),
            );
            op.r#final = true;
            op.high_watermarks = Some(BTreeMap::from([(name, hw)]));
        }
    }
}

fn invoke_form(m: Planned) -> Value {
    match m {
        Planned::Send(key, value) => json!(["send", key_name(key), value]),
        Planned::Poll => json!(["poll"]),
    }
}

/// Generates one correct transactional history.
pub fn generate_txns(cfg: TxnGenConfig) -> Vec<Op> {
    let mut m = Model {
        rng: StdRng::seed_from_u64(cfg.seed),
        logs: vec![Vec::new(); cfg.keys.max(1) as usize],
        settled: vec![0; cfg.keys.max(1) as usize],
        ops: Vec::new(),
        next_value: 0,
        next_process: 0,
        cfg: TxnGenConfig {
            keys: cfg.keys.max(1),
            ..cfg
        },
    };
    let mut processes: Vec<Process> = (0..m.cfg.processes.max(1))
        .map(|_| m.new_process())
        .collect();
    let mut started = 0u64;
    loop {
        let idle_all = processes.iter().all(|p| p.running.is_none());
        if started >= m.cfg.txns && idle_all {
            break;
        }
        let i = m.rng.gen_range(0..processes.len());
        let mut p = std::mem::replace(
            &mut processes[i],
            Process {
                number: 0,
                positions: Vec::new(),
                running: None,
            },
        );
        if p.running.is_none() {
            if started < m.cfg.txns {
                m.start(&mut p);
                started += 1;
            }
        } else if !m.advance(&mut p) && m.end(&mut p) {
            // An info transaction: the process never runs again.
            p = m.new_process();
        }
        processes[i] = p;
    }
    m.final_reads();
    m.ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_invoke_has_one_completion_and_values_are_unique() {
        let ops = generate_txns(TxnGenConfig {
            txns: 300,
            seed: 9,
            ..Default::default()
        });
        let mut open: BTreeMap<String, u64> = BTreeMap::new();
        let mut sent = std::collections::BTreeSet::new();
        let mut txns = 0;
        for op in &ops {
            let p = op.process.to_string();
            match op.kind {
                OpType::Invoke => {
                    assert!(open.insert(p, op.index).is_none(), "op {}", op.index);
                    if op.f == "assign" {
                        continue;
                    }
                    for m in op.micro_ops().unwrap() {
                        if let crate::history::MicroOp::Send { value, .. } = m {
                            assert!(sent.insert(value), "value {value} sent twice");
                        }
                    }
                    txns += (op.f == "txn") as u32;
                }
                _ => assert!(open.remove(&p).is_some(), "op {}", op.index),
            }
        }
        assert!(open.is_empty());
        assert!(txns > 50, "{txns} txn ops");
    }
}
