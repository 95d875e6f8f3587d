//! The transactional workload, as Jepsen's Kafka workload runs it: each worker is one
//! transactional producer (its own `transactional.id`) with a `read_committed` consumer, and
//! does, one at a time,
//!
//! - `txn`: 1 to [`TxnSettings::micro_ops_max`] micro-ops, sends of unique values to any of
//!   the run's keys and polls of the consumer's assigned keys, committed as one; a share
//!   ([`TxnSettings::abort_fraction`]) is aborted on purpose after its sends were
//!   acknowledged, so aborted records really reach the logs; another share
//!   ([`TxnSettings::zombie_fraction`]) is a zombie's ([`Ending::Zombie`]): after its first
//!   send a successor producer of the same `transactional.id` is initialised, which fences
//!   it, and the fenced producer goes on sending to the partition it already added and asks
//!   to commit, as a paused instance of an application does when it wakes up;
//! - `poll`: a poll of the assigned keys outside any transaction (the run's pollers);
//! - `assign`: a fresh set of keys for the consumer.
//!
//! A committed transaction moves the consumer's positions to where its polls got; an aborted
//! or unknown one leaves them where the transaction began (its reads are void). After an
//! unknown (`info`) outcome the process retires: its client is closed, and the worker goes on
//! as a new process whose producer, of the same `transactional.id`, fences the old one and
//! makes the coordinator finish the old transaction (KIP-98's zombie fencing).
//!
//! With [`TxnSettings::end_attempts_max`] above 1 (`--txn-retry-commit`) the client calls
//! `commitTransaction` (or `abortTransaction`) again after a timeout, on the same producer, as
//! Kafka's client allows and many applications do, and goes on with that producer into its
//! next transaction when a call returned. The completion records the calls
//! ([`crate::history::TxnEnd`]); the outcome stays what the last call says: ok only when the
//! commit returned, info when no call did.
//!
//! The I/O is [`TxnClient`] (the Java client's driver implements it); the generator is pure.

use crate::group::OpSink;
use crate::history::{Key, MicroOp, Op, OpType, TxnEnd, Val};
use crate::queue::{Consumer, ValueSource};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A boxed future, so that [`TxnClient`] can be a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What became of a transaction, as the client reported it.
#[derive(Debug, Clone, PartialEq)]
pub enum TxnOutcome {
    /// Committed: the micro-ops in completion form (offsets, records read) and the consumer's
    /// positions after its polls.
    Committed {
        /// Completion forms, in invoke order.
        micro: Vec<MicroOp>,
        /// Next offset per assigned key.
        positions: BTreeMap<Key, u64>,
    },
    /// Aborted, or certainly never committed (the client's exception, or `aborted`).
    Aborted {
        /// The error name.
        error: String,
    },
    /// The commit was asked for and its outcome is unknown.
    Unknown {
        /// The error name.
        error: String,
    },
}

/// A transaction's outcome and, when the client may retry the end, the calls that ended it.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnReply {
    /// Committed, aborted or unknown.
    pub outcome: TxnOutcome,
    /// The commit or abort calls, when the end could be retried ([`TxnSettings::end_attempts_max`]
    /// above 1) and was called.
    pub end: Option<TxnEnd>,
}

impl From<TxnOutcome> for TxnReply {
    fn from(outcome: TxnOutcome) -> TxnReply {
        TxnReply { outcome, end: None }
    }
}

/// What a poll outside a transaction returned.
#[derive(Debug, Clone, PartialEq)]
pub enum PollOutcome {
    /// Records per key, the next positions, and the end offsets the fetches reported.
    Ok {
        /// Records read, per key.
        records: BTreeMap<Key, Vec<(u64, Val)>>,
        /// Next offset per key.
        positions: BTreeMap<Key, u64>,
    },
    /// The poll failed (no effect).
    Fail {
        /// The error name.
        error: String,
    },
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Committed (EndTxn COMMIT).
    Commit,
    /// Aborted on purpose after its sends were acknowledged.
    Abort,
    /// After its first micro-op (a send, and the next is a send to the same key) a new
    /// producer of the same `transactional.id` is initialised: KIP-98 says the coordinator
    /// bumps the epoch and aborts this transaction before that initialisation completes. The
    /// old producer, now a zombie, goes on with the rest and asks to commit; nothing of it may
    /// become visible. The successor is the client's producer from then on. When the
    /// successor's initialisation fails the transaction goes on as a plain commit.
    Zombie,
}

impl Ending {
    /// The name the driver protocol uses.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Commit => "commit",
            Ending::Abort => "abort",
            Ending::Zombie => "zombie",
        }
    }
}

/// The transactional workload's I/O: one logical client per worker, named by the worker.
pub trait TxnClient: Send + Sync + 'static {
    /// Runs `micro` (invoke forms) as one transaction of `client`, its polls reading the keys
    /// of `positions` from there (each waiting at most `limits.poll_max_wait_ms`), ended as
    /// `ending` says: the commit or abort called at most `limits.end_attempts_max` times
    /// (again only after a timeout).
    fn txn<'a>(
        &'a self,
        client: &'a str,
        micro: &'a [MicroOp],
        positions: &'a BTreeMap<Key, u64>,
        ending: Ending,
        limits: TxnLimits,
    ) -> BoxFuture<'a, TxnReply>;

    /// Polls the keys of `positions` from there, outside any transaction.
    fn poll<'a>(
        &'a self,
        client: &'a str,
        positions: &'a BTreeMap<Key, u64>,
        wait_ms: u64,
    ) -> BoxFuture<'a, PollOutcome>;

    /// Closes `client`'s producer and consumer; its next use makes new ones.
    fn close<'a>(&'a self, client: &'a str) -> BoxFuture<'a, ()>;
}

/// The bounds one transaction runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnLimits {
    /// Bound on one poll's wait.
    pub poll_max_wait_ms: u64,
    /// Most calls of the commit or abort ending the transaction (1: no retry).
    pub end_attempts_max: u32,
}

/// Calls of `commitTransaction` (or `abortTransaction`) with `--txn-retry-commit`: the first
/// and two retries, each waiting `max.block.ms`.
pub const RETRY_END_ATTEMPTS_MAX: u32 = 3;

/// Settings of the transactional workload.
#[derive(Debug, Clone)]
pub struct TxnSettings {
    /// Every key of the test.
    pub keys: Vec<Key>,
    /// Most micro-ops of one transaction (Jepsen's default is 4).
    pub micro_ops_max: usize,
    /// Share of transactions aborted on purpose.
    pub abort_fraction: f64,
    /// Share of transactions fenced midway by a successor producer ([`Ending::Zombie`]).
    pub zombie_fraction: f64,
    /// Share of ops that are polls outside a transaction.
    pub poll_fraction: f64,
    /// Share of a transaction's micro-ops that are polls.
    pub poll_micro_fraction: f64,
    /// Share of ops after which the consumer is assigned a fresh set of keys.
    pub reassign_fraction: f64,
    /// Bound on one poll's wait.
    pub poll_max_wait_ms: u64,
    /// Most calls of a transaction's commit or abort: 1 (the default) never calls again; above
    /// 1 (`--txn-retry-commit`) calls again after a timeout, on the same producer.
    pub end_attempts_max: u32,
}

impl TxnSettings {
    /// Jepsen's shape: up to 4 micro-ops, a tenth aborted, a quarter of ops plain polls; and
    /// one transaction in twenty a zombie's.
    pub fn new(keys: Vec<Key>) -> TxnSettings {
        TxnSettings {
            keys,
            micro_ops_max: 4,
            abort_fraction: 0.1,
            zombie_fraction: 0.05,
            poll_fraction: 0.25,
            poll_micro_fraction: 0.25,
            reassign_fraction: 0.05,
            poll_max_wait_ms: 100,
            end_attempts_max: 1,
        }
    }

    /// The bounds of one transaction.
    pub fn limits(&self) -> TxnLimits {
        TxnLimits {
            poll_max_wait_ms: self.poll_max_wait_ms,
            end_attempts_max: self.end_attempts_max,
        }
    }
}

/// What a worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnIntent {
    /// Assign these keys to the consumer.
    Assign(Vec<Key>),
    /// Poll the assigned keys outside a transaction.
    Poll,
    /// One transaction of these micro-ops (invoke forms), ended as `ending` says.
    Txn {
        /// The micro-ops.
        micro: Vec<MicroOp>,
        /// Commit, abort, or a zombie's commit.
        ending: Ending,
    },
}

impl TxnIntent {
    /// The history's `f`.
    pub fn f(&self) -> &'static str {
        match self {
            TxnIntent::Assign(_) => "assign",
            TxnIntent::Poll => "poll",
            TxnIntent::Txn { .. } => "txn",
        }
    }

    /// The history's invoke value.
    pub fn invoke_value(&self) -> Value {
        match self {
            TxnIntent::Assign(keys) => json!(keys),
            TxnIntent::Poll => json!([["poll"]]),
            TxnIntent::Txn { micro, .. } => {
                Value::Array(micro.iter().map(MicroOp::to_invoke_value).collect())
            }
        }
    }
}

/// Chooses one worker's ops from the run's seed and the worker's number.
pub struct TxnGenerator {
    rng: StdRng,
    settings: Arc<TxnSettings>,
    values: ValueSource,
}

impl TxnGenerator {
    /// The generator of worker `worker` of a run with `seed`.
    pub fn new(
        seed: u64,
        worker: u64,
        settings: Arc<TxnSettings>,
        values: ValueSource,
    ) -> TxnGenerator {
        assert!(!settings.keys.is_empty(), "the txn workload needs keys");
        assert!(settings.micro_ops_max >= 1, "a transaction has a micro-op");
        // A constant of its own, so a txn worker's stream differs from a queue worker's.
        let rng = StdRng::seed_from_u64(seed ^ worker.wrapping_mul(0xD1B5_4A32_D192_ED03));
        TxnGenerator {
            rng,
            settings,
            values,
        }
    }

    /// The next op for a consumer in state `consumer`.
    pub fn next(&mut self, consumer: &Consumer) -> TxnIntent {
        let s = self.settings.clone();
        if consumer.assigned.is_empty() || self.rng.gen_bool(s.reassign_fraction) {
            let n = self.rng.gen_range(1..=s.keys.len());
            let mut keys: Vec<Key> = s.keys.choose_multiple(&mut self.rng, n).cloned().collect();
            keys.sort();
            return TxnIntent::Assign(keys);
        }
        if self.rng.gen_bool(s.poll_fraction) {
            return TxnIntent::Poll;
        }
        let ending = if self.rng.gen_bool(s.abort_fraction) {
            Ending::Abort
        } else if s.micro_ops_max >= 2 && self.rng.gen_bool(s.zombie_fraction) {
            Ending::Zombie
        } else {
            Ending::Commit
        };
        let n = match ending {
            Ending::Zombie => self.rng.gen_range(2..=s.micro_ops_max),
            _ => self.rng.gen_range(1..=s.micro_ops_max),
        };
        let mut micro: Vec<MicroOp> = Vec::with_capacity(n);
        if ending == Ending::Zombie {
            // The first send adds its partition to the transaction before the fence; the
            // second, to the same key, is the zombie's write that needs no AddPartitionsToTxn.
            let key = s.keys.choose(&mut self.rng).expect("keys").clone();
            for _ in 0..2 {
                micro.push(self.send_to(key.clone()));
            }
        }
        while micro.len() < n {
            let op = if self.rng.gen_bool(s.poll_micro_fraction) {
                MicroOp::Poll(BTreeMap::new())
            } else {
                let key = s.keys.choose(&mut self.rng).expect("keys").clone();
                self.send_to(key)
            };
            micro.push(op);
        }
        TxnIntent::Txn { micro, ending }
    }

    fn send_to(&mut self, key: Key) -> MicroOp {
        MicroOp::Send {
            key,
            offset: None,
            value: self.values.next(),
        }
    }
}

/// The positions of every assigned key (0 for a key not read yet).
fn assigned_positions(consumer: &Consumer) -> BTreeMap<Key, u64> {
    consumer
        .assigned
        .iter()
        .map(|k| (k.clone(), consumer.positions.get(k).copied().unwrap_or(0)))
        .collect()
}

/// The name of worker `worker`'s logical client (its `transactional.id` ends with it).
pub fn client_name(worker: u64) -> String {
    format!("w{worker}")
}

/// A completion line's parts, as [`execute`] makes them.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnCompletion {
    /// ok, fail or info.
    pub kind: OpType,
    /// The completion's value.
    pub value: Value,
    /// The client's error, for fail and info.
    pub error: Option<String>,
    /// The commit or abort calls, with `--txn-retry-commit`.
    pub txn_end: Option<TxnEnd>,
}

impl TxnCompletion {
    fn new(kind: OpType, value: Value, error: Option<String>) -> TxnCompletion {
        TxnCompletion {
            kind,
            value,
            error,
            txn_end: None,
        }
    }
}

/// Runs `intent` for `consumer` of client `client`; returns the completion line's parts.
pub async fn execute(
    client: &dyn TxnClient,
    name: &str,
    settings: &TxnSettings,
    consumer: &mut Consumer,
    intent: &TxnIntent,
) -> TxnCompletion {
    let (kind, value, error) = match intent {
        TxnIntent::Assign(keys) => {
            consumer.assign(keys.clone());
            (OpType::Ok, json!(keys), None)
        }
        TxnIntent::Poll => {
            let positions = assigned_positions(consumer);
            match client
                .poll(name, &positions, settings.poll_max_wait_ms)
                .await
            {
                PollOutcome::Ok { records, positions } => {
                    consumer.positions.extend(positions);
                    (
                        OpType::Ok,
                        json!([MicroOp::Poll(records).to_completion_value()]),
                        None,
                    )
                }
                PollOutcome::Fail { error } => (OpType::Fail, json!([["poll"]]), Some(error)),
            }
        }
        TxnIntent::Txn { micro, ending } => {
            let positions = assigned_positions(consumer);
            let reply = client
                .txn(name, micro, &positions, *ending, settings.limits())
                .await;
            let (kind, value, error) = match reply.outcome {
                TxnOutcome::Committed { micro, positions } => {
                    consumer.positions.extend(positions);
                    let value = micro.iter().map(MicroOp::to_completion_value).collect();
                    (OpType::Ok, Value::Array(value), None)
                }
                TxnOutcome::Aborted { error } => (OpType::Fail, intent.invoke_value(), Some(error)),
                TxnOutcome::Unknown { error } => (OpType::Info, intent.invoke_value(), Some(error)),
            };
            return TxnCompletion {
                txn_end: reply.end,
                ..TxnCompletion::new(kind, value, error)
            };
        }
    };
    TxnCompletion::new(kind, value, error)
}

/// One worker of the transactional workload: ops until `stop` is set, each recorded as an
/// invoke and its completion through `sink`. Returns the number of ops.
pub async fn txn_worker<S: OpSink>(
    client: Arc<dyn TxnClient>,
    settings: Arc<TxnSettings>,
    sink: Arc<S>,
    seed: u64,
    worker: u64,
    values: ValueSource,
    stop: Arc<AtomicBool>,
) -> u64 {
    let mut generator = TxnGenerator::new(seed, worker, settings.clone(), values);
    let name = client_name(worker);
    let mut process = sink.new_process();
    let mut consumer = Consumer::default();
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        tokio::task::yield_now().await;
        sink.pace().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let intent = generator.next(&consumer);
        let f = intent.f();
        sink.record(Op::client(
            process,
            OpType::Invoke,
            f,
            intent.invoke_value(),
        ));
        let done = execute(&*client, &name, &settings, &mut consumer, &intent).await;
        let kind = done.kind;
        sink.record(Op {
            error: done.error,
            txn_end: done.txn_end,
            ..Op::client(process, kind, f, done.value)
        });
        ops += 1;
        if kind == OpType::Info {
            client.close(&name).await;
            process = sink.new_process();
            consumer = Consumer::default();
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn settings() -> Arc<TxnSettings> {
        Arc::new(TxnSettings::new(vec!["t0/0".into(), "t0/1".into()]))
    }

    #[test]
    fn transactions_have_one_to_max_micro_ops_some_aborted_some_zombies_and_unique_values() {
        let values = ValueSource::default();
        let mut g = TxnGenerator::new(3, 0, settings(), values.clone());
        let mut consumer = Consumer::default();
        consumer.assign(vec!["t0/0".into()]);
        let (mut txns, mut aborts, mut zombies, mut polls) = (0, 0, 0, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_000 {
            match g.next(&consumer) {
                TxnIntent::Txn { micro, ending } => {
                    assert!((1..=4).contains(&micro.len()));
                    txns += 1;
                    aborts += usize::from(ending == Ending::Abort);
                    if ending == Ending::Zombie {
                        zombies += 1;
                        // Two sends to one key first: the second is the zombie's write.
                        match &micro[..2] {
                            [MicroOp::Send { key: a, .. }, MicroOp::Send { key: b, .. }] => {
                                assert_eq!(a, b)
                            }
                            other => panic!("a zombie's transaction starts {other:?}"),
                        }
                    }
                    for m in micro {
                        if let MicroOp::Send { value, .. } = m {
                            assert!(seen.insert(value), "value {value} twice");
                        }
                    }
                }
                TxnIntent::Poll => polls += 1,
                TxnIntent::Assign(keys) => assert!(!keys.is_empty()),
            }
        }
        assert!(txns > 1_000 && polls > 300, "txns {txns} polls {polls}");
        assert!(aborts > txns / 20 && aborts < txns / 5, "aborts {aborts}");
        // 5 % of the 90 % not aborted: about 67 of 1,500.
        assert!(
            zombies > txns / 50 && zombies < txns / 10,
            "zombies {zombies}"
        );
    }

    /// Aborts the transactions asked to abort and commits the others; the first commit from
    /// the third transaction on times out once (unknown, or retried with retries on).
    #[derive(Default)]
    struct Scripted {
        txns: Mutex<u64>,
        timed_out: Mutex<bool>,
        closed: Mutex<Vec<String>>,
    }

    /// The lines a worker records.
    #[derive(Default)]
    struct Lines {
        ops: Mutex<Vec<Op>>,
        processes: std::sync::atomic::AtomicU64,
    }

    impl OpSink for Lines {
        fn new_process(&self) -> u64 {
            self.processes.fetch_add(1, Ordering::Relaxed)
        }

        fn record(&self, op: Op) {
            self.ops.lock().unwrap().push(op);
        }
    }

    impl TxnClient for Scripted {
        fn txn<'a>(
            &'a self,
            _client: &'a str,
            micro: &'a [MicroOp],
            positions: &'a BTreeMap<Key, u64>,
            ending: Ending,
            limits: TxnLimits,
        ) -> BoxFuture<'a, TxnReply> {
            Box::pin(async move {
                let n = {
                    let mut t = self.txns.lock().unwrap();
                    *t += 1;
                    *t
                };
                if ending == Ending::Abort {
                    return TxnOutcome::Aborted {
                        error: "aborted".into(),
                    }
                    .into();
                }
                // The first commit from the third transaction on times out once: unknown
                // without retries; with them, its second call returns.
                let times_out =
                    n >= 3 && !std::mem::replace(&mut *self.timed_out.lock().unwrap(), true);
                let retry = limits.end_attempts_max > 1;
                if times_out && !retry {
                    return TxnOutcome::Unknown {
                        error: "TimeoutException".into(),
                    }
                    .into();
                }
                let end = retry.then(|| TxnEnd {
                    call: "commitTransaction".into(),
                    attempts: if times_out { 2 } else { 1 },
                    errors: if times_out {
                        vec!["TimeoutException".into()]
                    } else {
                        vec![]
                    },
                });
                let micro = micro
                    .iter()
                    .enumerate()
                    .map(|(i, m)| match m {
                        MicroOp::Send { key, value, .. } => MicroOp::Send {
                            key: key.clone(),
                            offset: Some(i as u64),
                            value: *value,
                        },
                        MicroOp::Poll(_) => MicroOp::Poll(BTreeMap::new()),
                    })
                    .collect();
                let positions = positions.keys().map(|k| (k.clone(), 7)).collect();
                TxnReply {
                    outcome: TxnOutcome::Committed { micro, positions },
                    end,
                }
            })
        }

        fn poll<'a>(
            &'a self,
            _client: &'a str,
            positions: &'a BTreeMap<Key, u64>,
            _wait_ms: u64,
        ) -> BoxFuture<'a, PollOutcome> {
            Box::pin(async move {
                PollOutcome::Ok {
                    records: positions.keys().map(|k| (k.clone(), vec![])).collect(),
                    positions: positions.clone(),
                }
            })
        }

        fn close<'a>(&'a self, client: &'a str) -> BoxFuture<'a, ()> {
            Box::pin(async move { self.closed.lock().unwrap().push(client.to_string()) })
        }
    }

    #[tokio::test]
    async fn outcomes_become_ok_fail_info_and_only_commits_move_positions() {
        let client = Scripted::default();
        let s = settings();
        let mut consumer = Consumer::default();
        consumer.assign(vec!["t0/1".into()]);
        let send = |v| MicroOp::Send {
            key: "t0/0".into(),
            offset: None,
            value: v,
        };
        let commit = TxnIntent::Txn {
            micro: vec![send(1), MicroOp::Poll(BTreeMap::new())],
            ending: Ending::Commit,
        };
        let done = execute(&client, "w0", &s, &mut consumer, &commit).await;
        assert_eq!(
            (done.kind, done.error, done.txn_end),
            (OpType::Ok, None, None)
        );
        assert_eq!(done.value, json!([["send", "t0/0", [0, 1]], ["poll", {}]]));
        assert_eq!(consumer.positions["t0/1"], 7);

        consumer.positions.insert("t0/1".into(), 2);
        let abort = TxnIntent::Txn {
            micro: vec![send(2)],
            ending: Ending::Abort,
        };
        let done = execute(&client, "w0", &s, &mut consumer, &abort).await;
        assert_eq!(done.kind, OpType::Fail);
        assert_eq!(done.error.as_deref(), Some("aborted"));
        assert_eq!(done.value, json!([["send", "t0/0", 2]]));
        assert_eq!(consumer.positions["t0/1"], 2, "an abort leaves positions");

        let done = execute(&client, "w0", &s, &mut consumer, &commit).await;
        assert_eq!(done.kind, OpType::Info);
        assert_eq!(done.error.as_deref(), Some("TimeoutException"));
        assert_eq!(consumer.positions["t0/1"], 2);
    }

    #[tokio::test]
    async fn a_retried_commit_is_ok_and_its_calls_reach_the_history() {
        let client = Arc::new(Scripted::default());
        let mut s = TxnSettings::new(vec!["t0/0".into()]);
        s.end_attempts_max = RETRY_END_ATTEMPTS_MAX;
        // The worker records through a sink; its third transaction's commit is retried.
        let sink = Arc::new(Lines::default());
        let stop = Arc::new(AtomicBool::new(false));
        let worker = tokio::spawn(txn_worker(
            client.clone(),
            Arc::new(s),
            sink.clone(),
            9,
            0,
            ValueSource::default(),
            stop.clone(),
        ));
        while *client.txns.lock().unwrap() < 6 {
            tokio::task::yield_now().await;
        }
        stop.store(true, Ordering::Relaxed);
        worker.await.unwrap();
        let ops = sink.ops.lock().unwrap().clone();
        let ended: Vec<&Op> = ops
            .iter()
            .filter(|o| o.f == "txn" && o.kind != OpType::Invoke)
            .collect();
        let retried: Vec<&Op> = ended
            .iter()
            .copied()
            .filter(|o| o.txn_end.as_ref().is_some_and(TxnEnd::retried))
            .collect();
        assert_eq!(retried.len(), 1, "{ended:?}");
        assert_eq!(
            retried[0].kind,
            OpType::Ok,
            "a retried commit that returned is ok"
        );
        assert_eq!(
            retried[0].txn_end,
            Some(TxnEnd {
                call: "commitTransaction".into(),
                attempts: 2,
                errors: vec!["TimeoutException".into()],
            })
        );
        // Nothing ended unknown, so the worker kept its process (and its producer): no close.
        assert!(ended.iter().all(|o| o.kind != OpType::Info));
        assert!(client.closed.lock().unwrap().is_empty());
        assert!(ops.iter().all(|o| o.process == ops[0].process));
    }
}
