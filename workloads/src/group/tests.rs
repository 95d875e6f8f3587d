//! The group workload's member logic against an in-memory log and a one-member coordinator:
//! rebalances, polls, commits, the revocation commit, and a crashed consumer's new process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;
use crate::client::{ClientError, ErrorCause, Fetched, Outcome, Sent};
use crate::history::{Key, Op, OpType, Val};
use crate::queue::{QueueClient, ValueSource};

/// One partition log in memory per key.
#[derive(Default)]
struct Logs(Mutex<BTreeMap<Key, Vec<Val>>>);

impl QueueClient for Logs {
    async fn send(&self, key: &str, value: Val, _acks: &str) -> Outcome<Sent> {
        let mut logs = self.0.lock().unwrap();
        let log = logs.entry(key.to_string()).or_default();
        log.push(value);
        Outcome::Ok(Sent {
            offset: Some(log.len() as u64 - 1),
            high_watermark: Some(log.len() as u64),
            isr_size: None,
            node: "n1".into(),
        })
    }

    async fn fetch(&self, key: &str, offset: u64, _wait: u64) -> Outcome<Fetched> {
        let logs = self.0.lock().unwrap();
        let log = logs.get(key).cloned().unwrap_or_default();
        let records: Vec<(u64, Val)> = log
            .iter()
            .enumerate()
            .skip(offset as usize)
            .map(|(o, v)| (o as u64, *v))
            .collect();
        Outcome::Ok(Fetched {
            next_offset: records.last().map_or(offset, |r| r.0 + 1),
            records,
            high_watermark: Some(log.len() as u64),
            log_start_offset: Some(0),
            foreign_values: 0,
            node: "n1".into(),
        })
    }
}

/// A one-member coordinator: every join is generation `generation + 1` with this member
/// as leader; heartbeats answer `heartbeat_error` when set.
#[derive(Default)]
struct OneMember {
    generation: Mutex<u64>,
    committed: Mutex<BTreeMap<Key, u64>>,
    heartbeat_error: Mutex<Option<&'static str>>,
    assignments: Mutex<Vec<BTreeMap<String, Vec<Key>>>>,
}

fn broker_error(name: &str) -> ClientError {
    ClientError {
        cause: ErrorCause::Broker {
            name: name.into(),
            status: 409,
        },
        node: Some("n1".into()),
        message: String::new(),
    }
}

impl GroupClient for OneMember {
    async fn join(
        &self,
        _group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> Outcome<Joined> {
        let mut generation = self.generation.lock().unwrap();
        *generation += 1;
        let member_id = member_id.unwrap_or("m-1").to_string();
        Outcome::Ok(Joined {
            generation: *generation,
            members: BTreeMap::from([(member_id.clone(), topics.to_vec())]),
            member_id,
            leader: true,
            partition_counts: settings.partition_counts(),
            node: "n2".into(),
        })
    }

    async fn sync(
        &self,
        _group: &str,
        member_id: &str,
        _generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> Outcome<Vec<Key>> {
        let assignment = assignment.expect("the only member leads").clone();
        self.assignments.lock().unwrap().push(assignment.clone());
        Outcome::Ok(assignment[member_id].clone())
    }

    async fn heartbeat(&self, _g: &str, _m: &str, _gen: u64, _polled: bool) -> Outcome<()> {
        match *self.heartbeat_error.lock().unwrap() {
            Some(name) => Outcome::Fail(broker_error(name)),
            None => Outcome::Ok(()),
        }
    }

    async fn leave(&self, _group: &str, _member_id: &str) -> Outcome<()> {
        Outcome::Ok(())
    }

    async fn commit(
        &self,
        _group: &str,
        _member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> Outcome<String> {
        if generation != *self.generation.lock().unwrap() {
            return Outcome::Fail(broker_error("ILLEGAL_GENERATION"));
        }
        self.committed.lock().unwrap().extend(offsets.clone());
        Outcome::Ok("n2".into())
    }

    async fn fetch_offsets(&self, _group: &str) -> Outcome<BTreeMap<Key, u64>> {
        Outcome::Ok(self.committed.lock().unwrap().clone())
    }
}

/// Two keys of one topic, acks=all, and a heartbeat before every op.
pub(crate) fn settings() -> GroupSettings {
    let mut s = GroupSettings::new(vec!["t0/0".into(), "t0/1".into()], "all");
    s.heartbeat_interval_ms = 0; // every op heartbeats
    s
}

#[tokio::test]
async fn a_member_starts_from_committed_offsets_polls_and_commits_its_progress() {
    let logs = Logs::default();
    for v in [10, 11, 12] {
        logs.send("t0/0", v, "all").await;
    }
    let coordinator = OneMember::default();
    coordinator
        .committed
        .lock()
        .unwrap()
        .insert("t0/0".into(), 1);
    let s = settings();
    let mut member = Member::new("g0");
    let joined = execute(
        &logs,
        &coordinator,
        &s,
        &mut member,
        &GroupIntent::Rebalance,
    )
    .await;
    assert_eq!(joined.kind, OpType::Ok);
    assert_eq!(
        joined.value,
        json!({"group": "g0", "generation": 1, "assignment": ["t0/0", "t0/1"]})
    );
    assert!(member.progress().is_empty(), "nothing polled yet");
    let polled = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
    assert_eq!(
        polled.value,
        json!([["poll", {"t0/0": [[1, 11], [2, 12]]}]])
    );
    assert_eq!(member.progress(), BTreeMap::from([("t0/0".to_string(), 3)]));
    let invoke = GroupIntent::Commit.invoke_value(&member);
    assert_eq!(invoke, Some(json!([["commit", "t0/0", 3]])));
    let commit = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Commit).await;
    assert_eq!(
        (commit.kind, commit.value),
        (OpType::Ok, json!([["commit", "t0/0", 3]]))
    );
    assert!(member.progress().is_empty());
    assert_eq!(coordinator.committed.lock().unwrap()["t0/0"], 3);
}

#[tokio::test]
async fn rebalance_in_progress_commits_the_progress_then_rejoins() {
    let logs = Logs::default();
    logs.send("t0/1", 7, "all").await;
    let coordinator = OneMember::default();
    let s = Arc::new(settings());
    let mut generator = GroupGenerator::new(1, 5, s.clone(), ValueSource::default());
    assert!(!generator.is_producer());
    let mut member = Member::new("g0");
    assert_eq!(generator.next(&member), GroupIntent::Rebalance);
    execute(
        &logs,
        &coordinator,
        &s,
        &mut member,
        &GroupIntent::Rebalance,
    )
    .await;
    execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
    execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
    assert_eq!(member.progress().len(), 1);
    *coordinator.heartbeat_error.lock().unwrap() = Some("REBALANCE_IN_PROGRESS");
    let quiet = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
    assert_eq!(quiet.kind, OpType::Ok, "the poll itself still runs");
    assert!(member.rejoin);
    assert_eq!(
        generator.next(&member),
        GroupIntent::Commit,
        "revocation commit first"
    );
    let commit = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Commit).await;
    assert_eq!(commit.kind, OpType::Ok);
    assert_eq!(generator.next(&member), GroupIntent::Rebalance);
    *coordinator.heartbeat_error.lock().unwrap() = None;
    let again = execute(
        &logs,
        &coordinator,
        &s,
        &mut member,
        &GroupIntent::Rebalance,
    )
    .await;
    assert_eq!(again.value["generation"], 2);
    assert_eq!(
        member.consumer.positions["t0/1"], 1,
        "restarts from the commit"
    );
}

/// Collects lines and stops the worker after `limit` of them.
struct Lines {
    ops: Mutex<Vec<Op>>,
    processes: Mutex<u64>,
    stop: Arc<AtomicBool>,
    limit: usize,
}

impl OpSink for Lines {
    fn new_process(&self) -> u64 {
        let mut p = self.processes.lock().unwrap();
        *p += 1;
        *p
    }

    fn record(&self, op: Op) {
        let mut ops = self.ops.lock().unwrap();
        ops.push(op);
        if ops.len() >= self.limit {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

#[tokio::test]
async fn a_crashed_consumer_continues_as_a_new_process_and_member() {
    let mut s = settings();
    s.producers = 0;
    s.crash_fraction = 1.0;
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = GroupContext {
        queue: Arc::new(Logs::default()),
        group: Arc::new(OneMember::default()),
        settings: Arc::new(s),
        seed: 3,
        values: ValueSource::default(),
        stop: stop.clone(),
    };
    let sink = Arc::new(Lines {
        ops: Mutex::new(vec![]),
        processes: Mutex::new(0),
        stop,
        limit: 6,
    });
    let ops = group_worker(ctx, sink.clone(), 0).await;
    assert_eq!(ops, 4);
    let lines = sink.ops.lock().unwrap();
    let summary: Vec<(String, OpType, String)> = lines
        .iter()
        .map(|o| (o.process.to_string(), o.kind, o.f.clone()))
        .collect();
    let expected = [
        ("1", OpType::Invoke, "rebalance"),
        ("1", OpType::Ok, "rebalance"),
        ("1", OpType::Info, "crash"),
        ("2", OpType::Invoke, "rebalance"),
        ("2", OpType::Ok, "rebalance"),
        ("2", OpType::Info, "crash"),
    ]
    .map(|(p, k, f)| (p.to_string(), k, f.to_string()));
    assert_eq!(summary, expected);
    assert_eq!(
        lines[4].value["generation"], 2,
        "the new member joined a new generation"
    );
}
