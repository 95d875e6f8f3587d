//! A generator of large, realistic and *correct* histories: concurrent producers and
//! consumers against a correct in-memory log, with failed and indeterminate (info) sends,
//! crashed polls, reassignments, consumer-group members (eager rebalances, commits, stale
//! members' commits failing with `ILLEGAL_GENERATION`), and final reads of every key from
//! offset 0.
//!
//! Used by the benchmark (`benches/check.rs`) and the property tests: a generated history
//! has no anomaly, so every anomaly the checker reports on it is a checker bug, and every
//! mutation of it (a deleted or overwritten record) must be reported.
//!
//! [`Generator`] is an iterator, so a history of millions of ops can be written to a file
//! without holding it in memory.

use crate::history::{Op, OpType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};

/// The shape of a generated history.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Drives every random choice.
    pub seed: u64,
    /// The main phase stops invoking once this many ops were emitted (the final reads and
    /// completions of pending ops come on top).
    pub ops: u64,
    /// Keys `t0/0`, `t0/1`, ...
    pub keys: u32,
    /// Concurrent producer workers.
    pub producers: u32,
    /// Concurrent consumer workers (`assign`).
    pub consumers: u32,
    /// Concurrent members of consumer group `g0` (`rebalance`, `commit`).
    pub group_members: u32,
    /// At most this many sends per send op.
    pub sends_per_op_max: usize,
    /// At most this many records per key per poll.
    pub poll_records_max: usize,
    /// Probability that a send or poll ends `info` (a send then took effect half the time).
    pub info_probability: f64,
    /// Probability that a send ends `fail` (no effect).
    pub fail_probability: f64,
    /// Probability that a consumer reassigns instead of polling.
    pub reassign_probability: f64,
    /// Emit final reads of every key at the end.
    pub final_reads: bool,
    /// Probability, per step of the main phase, of an unclean leader election on a random
    /// key: its last 1 to 5 records are discarded (acknowledged or not, read or not) and
    /// later appends reuse their offsets. The history is then *not* correct: it shows what
    /// `unclean.leader.election.enable=true` costs. A nemesis op marks each one.
    pub unclean_truncation_probability: f64,
    /// Just before the final reads, each key's log loses a random tail of up to this many
    /// records with nothing written after it: the tail a truncation cut from under consumers
    /// that had already read it (they then lie above the final high watermark).
    pub final_tail_cut_max: usize,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 0,
            ops: 10_000,
            keys: 8,
            producers: 10,
            consumers: 10,
            group_members: 0,
            sends_per_op_max: 3,
            poll_records_max: 10,
            info_probability: 0.01,
            fail_probability: 0.01,
            reassign_probability: 0.02,
            final_reads: true,
            unclean_truncation_probability: 0.0,
            final_tail_cut_max: 0,
        }
    }
}

/// At most this many records per final read op.
const FINAL_READ_RECORDS_MAX: u64 = 1000;

/// What a worker is doing.
#[derive(Debug)]
enum Pending {
    Send(Vec<(u32, i64)>),
    Poll,
    Assign(Vec<u32>),
    Rebalance,
    Commit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Producer,
    Consumer,
    Member,
}

#[derive(Debug)]
struct Worker {
    role: Role,
    /// Member only: the generation it joined, if it is a member at all.
    generation: Option<u64>,
    /// Member only: its index among the group's members (decides its partitions).
    member_index: u32,
    process: u64,
    pending: Option<Pending>,
    /// Consumer only: assigned keys and the next offset to read on each; `None` before the
    /// first assign of this process.
    assignment: Option<BTreeMap<u32, u64>>,
}

/// Streams the ops of one generated history.
#[derive(Debug)]
pub struct Generator {
    cfg: GenConfig,
    rng: StdRng,
    /// The correct log: values per key; every record is committed at once (HW = length).
    logs: Vec<Vec<i64>>,
    workers: Vec<Worker>,
    next_process: u64,
    next_value: i64,
    next_index: u64,
    time_ns: u64,
    out: VecDeque<Op>,
    phase: Phase,
    /// The group's current generation; every join bumps it (eager rebalance).
    generation: u64,
    /// The group's committed offset per key.
    committed: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Main,
    Drain,
    Final(u32),
    Done,
}

fn key_name(k: u32) -> String {
    format!("t0/{k}")
}

impl Generator {
    /// A generator for `cfg`.
    pub fn new(cfg: GenConfig) -> Generator {
        let total = cfg.producers + cfg.consumers + cfg.group_members;
        let workers = (0..total)
            .map(|i| Worker {
                role: if i < cfg.producers {
                    Role::Producer
                } else if i < cfg.producers + cfg.consumers {
                    Role::Consumer
                } else {
                    Role::Member
                },
                generation: None,
                member_index: i.saturating_sub(cfg.producers + cfg.consumers),
                process: i as u64,
                pending: None,
                assignment: None,
            })
            .collect();
        Generator {
            rng: StdRng::seed_from_u64(cfg.seed),
            logs: vec![Vec::new(); cfg.keys.max(1) as usize],
            next_process: total as u64,
            generation: 0,
            committed: vec![0; cfg.keys.max(1) as usize],
            workers,
            next_value: 0,
            next_index: 0,
            time_ns: 0,
            out: VecDeque::new(),
            phase: Phase::Main,
            cfg,
        }
    }

    fn emit(&mut self, process: u64, kind: OpType, f: &str, value: Value) -> &mut Op {
        self.time_ns += self.rng.gen_range(1_000..2_000_000);
        let op = Op {
            index: self.next_index,
            time: self.time_ns,
            ..Op::client(process, kind, f, value)
        };
        self.next_index += 1;
        self.out.push_back(op);
        self.out.back_mut().expect("just pushed")
    }

    fn hws(&self, keys: impl IntoIterator<Item = u32>) -> BTreeMap<String, u64> {
        keys.into_iter()
            .map(|k| (key_name(k), self.logs[k as usize].len() as u64))
            .collect()
    }

    fn step(&mut self, w: usize) {
        match self.workers[w].pending.take() {
            Some(p) => self.complete(w, p),
            None => self.invoke(w),
        }
    }

    fn invoke(&mut self, w: usize) {
        let process = self.workers[w].process;
        let keys = self.logs.len() as u32;
        if self.workers[w].role == Role::Member {
            return self.invoke_member(w);
        }
        if self.workers[w].role == Role::Producer {
            let n = self.rng.gen_range(1..=self.cfg.sends_per_op_max.max(1));
            let sends: Vec<(u32, i64)> = (0..n)
                .map(|_| {
                    self.next_value += 1;
                    (self.rng.gen_range(0..keys), self.next_value)
                })
                .collect();
            let value = sends
                .iter()
                .map(|(k, v)| json!(["send", key_name(*k), v]))
                .collect();
            self.emit(process, OpType::Invoke, "send", Value::Array(value));
            self.workers[w].pending = Some(Pending::Send(sends));
        } else if self.workers[w].assignment.is_none()
            || self.rng.gen_bool(self.cfg.reassign_probability)
        {
            let chosen: Vec<u32> = (0..keys).filter(|_| self.rng.gen_bool(0.5)).collect();
            let chosen = if chosen.is_empty() {
                vec![self.rng.gen_range(0..keys)]
            } else {
                chosen
            };
            let value = chosen.iter().map(|k| json!(key_name(*k))).collect();
            self.emit(process, OpType::Invoke, "assign", Value::Array(value));
            self.workers[w].pending = Some(Pending::Assign(chosen));
        } else {
            self.emit(process, OpType::Invoke, "poll", json!([["poll"]]));
            self.workers[w].pending = Some(Pending::Poll);
        }
    }

    /// The keys member `index` owns in `generation`: a rotation, so ownership moves.
    fn member_keys(&self, index: u32, generation: u64) -> Vec<u32> {
        let members = self.cfg.group_members.max(1) as u64;
        (0..self.logs.len() as u32)
            .filter(|&k| (k as u64 + generation) % members == index as u64)
            .collect()
    }

    fn invoke_member(&mut self, w: usize) {
        let process = self.workers[w].process;
        let joined = self.workers[w].generation;
        if joined.is_none() || self.rng.gen_bool(self.cfg.reassign_probability) {
            // Joining bumps the generation: every other member is now stale and rejoins.
            self.generation += 1;
            self.emit(process, OpType::Invoke, "rebalance", Value::Null);
            self.workers[w].pending = Some(Pending::Rebalance);
        } else if joined != Some(self.generation) {
            // Stale: rejoin the current generation without starting another one.
            self.emit(process, OpType::Invoke, "rebalance", Value::Null);
            self.workers[w].pending = Some(Pending::Rebalance);
        } else if self.rng.gen_bool(0.3) {
            let value = self.commit_value(w);
            self.emit(process, OpType::Invoke, "commit", value);
            self.workers[w].pending = Some(Pending::Commit);
        } else {
            self.emit(process, OpType::Invoke, "poll", json!([["poll"]]));
            self.workers[w].pending = Some(Pending::Poll);
        }
    }

    fn commit_value(&self, w: usize) -> Value {
        let positions = self.workers[w].assignment.as_ref();
        positions
            .into_iter()
            .flatten()
            .map(|(&k, &pos)| json!(["commit", key_name(k), pos]))
            .collect()
    }

    fn complete_rebalance(&mut self, w: usize) {
        let process = self.workers[w].process;
        let index = self.workers[w].member_index;
        let keys = self.member_keys(index, self.generation);
        // Eager: all partitions revoked; positions restart from the committed offsets.
        let positions = keys
            .iter()
            .map(|&k| (k, self.committed[k as usize]))
            .collect();
        self.workers[w].assignment = Some(positions);
        self.workers[w].generation = Some(self.generation);
        let assignment: Vec<String> = keys.iter().map(|&k| key_name(k)).collect();
        let value = json!({"group": "g0", "generation": self.generation, "assignment": assignment});
        self.emit(process, OpType::Ok, "rebalance", value);
    }

    fn complete_commit(&mut self, w: usize) {
        let process = self.workers[w].process;
        let value = self.commit_value(w);
        if self.workers[w].generation != Some(self.generation) {
            // The coordinator rejects commits from a stale generation.
            let op = self.emit(process, OpType::Fail, "commit", value);
            op.error = Some("ILLEGAL_GENERATION".into());
            return;
        }
        for (&k, &pos) in self.workers[w].assignment.iter().flatten() {
            self.committed[k as usize] = pos;
        }
        self.emit(process, OpType::Ok, "commit", value);
    }

    fn retire(&mut self, w: usize) {
        self.workers[w].process = self.next_process;
        self.workers[w].assignment = None;
        self.workers[w].generation = None;
        self.next_process += 1;
    }

    fn complete(&mut self, w: usize, pending: Pending) {
        let process = self.workers[w].process;
        match pending {
            Pending::Send(sends) => {
                let invoke_value: Value = sends
                    .iter()
                    .map(|(k, v)| json!(["send", key_name(*k), v]))
                    .collect();
                let roll: f64 = self.rng.gen();
                if roll < self.cfg.fail_probability {
                    let op = self.emit(process, OpType::Fail, "send", invoke_value);
                    op.error = Some("NOT_ENOUGH_REPLICAS".into());
                } else if roll < self.cfg.fail_probability + self.cfg.info_probability {
                    if self.rng.gen_bool(0.5) {
                        for &(k, v) in &sends {
                            self.logs[k as usize].push(v);
                        }
                    }
                    let op = self.emit(process, OpType::Info, "send", invoke_value);
                    op.error = Some("REQUEST_TIMED_OUT".into());
                    self.retire(w);
                } else {
                    let mut value = Vec::with_capacity(sends.len());
                    for &(k, v) in &sends {
                        let log = &mut self.logs[k as usize];
                        log.push(v);
                        value.push(json!(["send", key_name(k), [log.len() - 1, v]]));
                    }
                    let hws = self.hws(sends.iter().map(|&(k, _)| k));
                    let op = self.emit(process, OpType::Ok, "send", Value::Array(value));
                    op.high_watermarks = Some(hws);
                }
            }
            Pending::Assign(keys) => {
                let old = self.workers[w].assignment.take().unwrap_or_default();
                let mut next = BTreeMap::new();
                for &k in &keys {
                    // Kept keys keep their position; new ones start anywhere in the log.
                    let len = self.logs[k as usize].len() as u64;
                    let start = old
                        .get(&k)
                        .copied()
                        .unwrap_or_else(|| self.rng.gen_range(0..=len));
                    next.insert(k, start);
                }
                self.workers[w].assignment = Some(next);
                let value = keys.iter().map(|k| json!(key_name(*k))).collect();
                self.emit(process, OpType::Ok, "assign", Value::Array(value));
            }
            Pending::Rebalance => self.complete_rebalance(w),
            Pending::Commit => self.complete_commit(w),
            Pending::Poll => {
                if self.rng.gen_bool(self.cfg.info_probability) {
                    let op = self.emit(process, OpType::Info, "poll", json!([["poll"]]));
                    op.error = Some("REQUEST_TIMED_OUT".into());
                    self.retire(w);
                    return;
                }
                let mut assignment = self.workers[w].assignment.take().unwrap_or_default();
                let mut records = Map::new();
                for (&k, pos) in assignment.iter_mut() {
                    let log = &self.logs[k as usize];
                    let n = self.rng.gen_range(0..=self.cfg.poll_records_max) as u64;
                    let end = (*pos + n).min(log.len() as u64);
                    let recs: Vec<Value> =
                        (*pos..end).map(|o| json!([o, log[o as usize]])).collect();
                    *pos = end;
                    records.insert(key_name(k), Value::Array(recs));
                }
                let hws = self.hws(assignment.keys().copied());
                self.workers[w].assignment = Some(assignment);
                let op = self.emit(process, OpType::Ok, "poll", json!([["poll", records]]));
                op.high_watermarks = Some(hws);
            }
        }
    }

    /// Discards the tail of a random key's log, as an unclean election of a lagging replica.
    fn unclean_election(&mut self) {
        let k = self.rng.gen_range(0..self.logs.len());
        let lost = self.rng.gen_range(1..=5);
        self.cut_tail(k, lost);
    }

    /// Discards the last `lost` records (at most all) of key `k`'s log, marked by a nemesis op.
    fn cut_tail(&mut self, k: usize, lost: usize) {
        let len = self.logs[k].len();
        let lost = lost.min(len);
        if lost == 0 {
            return;
        }
        self.logs[k].truncate(len - lost);
        let value =
            json!({"key": key_name(k as u32), "log_end_offset": len - lost, "discarded": lost});
        self.time_ns += 1_000;
        let op = Op {
            index: self.next_index,
            time: self.time_ns,
            ..Op::nemesis("unclean-election", value)
        };
        self.next_index += 1;
        self.out.push_back(op);
    }

    /// Final reads of key `k` by a fresh process, from offset 0 to the end.
    fn final_reads(&mut self, k: u32) {
        let process = self.next_process;
        self.next_process += 1;
        let name = key_name(k);
        self.emit(process, OpType::Invoke, "assign", json!([name]))
            .r#final = true;
        self.emit(process, OpType::Ok, "assign", json!([name]))
            .r#final = true;
        let len = self.logs[k as usize].len() as u64;
        let mut pos = 0;
        loop {
            let end = (pos + FINAL_READ_RECORDS_MAX).min(len);
            let recs: Vec<Value> = (pos..end)
                .map(|o| json!([o, self.logs[k as usize][o as usize]]))
                .collect();
            self.emit(process, OpType::Invoke, "poll", json!([["poll"]]))
                .r#final = true;
            let op = self.emit(
                process,
                OpType::Ok,
                "poll",
                json!([["poll", {name.clone(): recs}]]),
            );
            op.r#final = true;
            op.high_watermarks = Some([(name.clone(), len)].into());
            op.log_start_offsets = Some([(name.clone(), 0)].into());
            pos = end;
            if pos >= len {
                break;
            }
        }
    }

    fn advance(&mut self) {
        match self.phase {
            Phase::Main if self.next_index < self.cfg.ops && !self.workers.is_empty() => {
                if self.cfg.unclean_truncation_probability > 0.0
                    && self
                        .rng
                        .gen_bool(self.cfg.unclean_truncation_probability.min(1.0))
                {
                    self.unclean_election();
                }
                let w = self.rng.gen_range(0..self.workers.len());
                self.step(w);
            }
            Phase::Main => self.phase = Phase::Drain,
            Phase::Drain => match self.workers.iter().position(|w| w.pending.is_some()) {
                Some(w) => self.step(w),
                None if self.cfg.final_reads => {
                    for k in 0..self.logs.len() {
                        if self.cfg.final_tail_cut_max > 0 {
                            let cut = self.rng.gen_range(0..=self.cfg.final_tail_cut_max);
                            self.cut_tail(k, cut);
                        }
                    }
                    self.phase = Phase::Final(0)
                }
                None => self.phase = Phase::Done,
            },
            Phase::Final(k) if (k as usize) < self.logs.len() => {
                self.final_reads(k);
                self.phase = Phase::Final(k + 1);
            }
            Phase::Final(_) | Phase::Done => self.phase = Phase::Done,
        }
    }
}

impl Iterator for Generator {
    type Item = Op;
    fn next(&mut self) -> Option<Op> {
        while self.out.is_empty() && self.phase != Phase::Done {
            self.advance();
        }
        self.out.pop_front()
    }
}

/// Generates a whole history in memory (for tests; use [`Generator`] for big ones).
pub fn generate(cfg: GenConfig) -> Vec<Op> {
    Generator::new(cfg).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histories_are_reproducible_and_well_formed() {
        let cfg = GenConfig {
            ops: 500,
            seed: 7,
            ..Default::default()
        };
        let a = generate(cfg.clone());
        let b = generate(cfg);
        assert_eq!(a, b);
        assert!(a.len() >= 500);
        for (i, op) in a.iter().enumerate() {
            assert_eq!(op.index, i as u64);
            if op.kind != OpType::Invoke && (op.f == "send" || op.f == "poll") {
                op.micro_ops().unwrap();
            }
        }
        assert!(a
            .iter()
            .any(|op| op.r#final && op.f == "poll" && op.kind == OpType::Ok));
    }

    #[test]
    fn group_members_rebalance_commit_and_stay_correct() {
        let cfg = GenConfig {
            ops: 3000,
            seed: 11,
            group_members: 3,
            ..Default::default()
        };
        let ops = generate(cfg);
        let count =
            |f: &str, kind: OpType| ops.iter().filter(|o| o.f == f && o.kind == kind).count();
        assert!(count("rebalance", OpType::Ok) >= 3);
        assert!(count("commit", OpType::Ok) > 10);
        let committed_far = ops.iter().any(|o| {
            o.f == "commit" && o.kind == OpType::Ok && o.value[0][2].as_u64().is_some_and(|c| c > 5)
        });
        assert!(committed_far, "commits must move forward");
        let r = crate::checker::check(&ops, &crate::checker::CheckSettings::default());
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(r.stats["groups"], 1);
    }

    #[test]
    fn unclean_elections_lose_acknowledged_writes() {
        use crate::checker::{check, Acks, CheckSettings};
        use crate::results::Validity;
        let cfg = GenConfig {
            ops: 5000,
            seed: 5,
            unclean_truncation_probability: 0.01,
            ..Default::default()
        };
        let ops = generate(cfg);
        assert!(ops.iter().any(|o| o.f == "unclean-election"));
        let safe = check(&ops, &CheckSettings::default());
        assert_eq!(safe.valid, Validity::Invalid);
        let lost = &safe.anomalies["lost-write"];
        assert!(lost.count > 0 && lost.breaks_promise && lost.invalidates);
        assert!(lost.examples[0]["offset"].is_u64());
        let unclean = CheckSettings {
            acks: Acks::One,
            unclean_leader_election_enable: true,
            ..Default::default()
        };
        let r = check(&ops, &unclean);
        // Data was lost, so the history is invalid whatever the settings; the settings
        // allow it, so the promise is kept.
        assert_eq!(r.valid, Validity::Invalid, "{:?}", r.anomalies);
        assert_eq!(
            r.promise,
            crate::results::Promise::Kept,
            "{}",
            r.promise_reason
        );
        assert_eq!(r.anomalies["lost-write"].count, lost.count);
        assert!(!r.anomalies["lost-write"].breaks_promise);
        assert_eq!(r.stats["lost_writes_by_acks"]["1"], lost.count);
    }
}
