//! The queue workload: producers send unique integers to random partitions, consumers poll
//! the partitions they are assigned and track their own positions.
//!
//! The pieces are split so the harness can drive them and a benchmark can replace the network:
//! - [`Generator`] decides the next operation from a seeded RNG (pure, no I/O);
//! - [`Consumer`] is one process's consumer state (assigned keys, position per key);
//! - [`QueueClient`] is the I/O: [`BrokerClient`] for real runs, anything else for tests;
//! - [`execute`] runs one [`Intent`] through a client and returns the history [`Completion`].

use crate::client::{BrokerClient, ClientError, Fetched, Outcome, Sent};
use crate::history::{Key, MicroOp, Op, OpType, Val};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use tidewater_kafka_model::ErrorCode;

/// The I/O a queue worker needs. [`BrokerClient`] implements it over HTTP.
pub trait QueueClient: Send + Sync + 'static {
    /// Produces `value` to `key` with the given acks.
    fn send(&self, key: &str, value: Val, acks: &str)
        -> impl Future<Output = Outcome<Sent>> + Send;
    /// Fetches committed records of `key` from `offset`.
    fn fetch(
        &self,
        key: &str,
        offset: u64,
        max_wait_ms: u64,
    ) -> impl Future<Output = Outcome<Fetched>> + Send;
    /// The log start offset of `key` (where a consumer resets to after OFFSET_OUT_OF_RANGE),
    /// `None` when it cannot be learned now. Clients without retention need not implement it.
    fn log_start(&self, _key: &str) -> impl Future<Output = Option<u64>> + Send {
        async { None }
    }
    /// The high watermark of `key` as its current leader reports it (ListOffsets latest),
    /// `None` when it cannot be learned now: how a consumer told OFFSET_OUT_OF_RANGE checks
    /// that the answer was not a deposed leader's, whose log ends below the position.
    fn log_end(&self, _key: &str) -> impl Future<Output = Option<u64>> + Send {
        async { None }
    }
}

impl QueueClient for BrokerClient {
    fn send(
        &self,
        key: &str,
        value: Val,
        acks: &str,
    ) -> impl Future<Output = Outcome<Sent>> + Send {
        BrokerClient::send(self, key, value, acks)
    }

    fn fetch(
        &self,
        key: &str,
        offset: u64,
        max_wait_ms: u64,
    ) -> impl Future<Output = Outcome<Fetched>> + Send {
        BrokerClient::fetch(self, key, offset, max_wait_ms)
    }

    async fn log_start(&self, key: &str) -> Option<u64> {
        self.list_offset(key, "earliest").await.ok()
    }

    async fn log_end(&self, key: &str) -> Option<u64> {
        self.list_offset(key, "latest").await.ok()
    }
}

/// Settings of the queue workload.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    /// Every key (`topic/partition`) of the test.
    pub keys: Vec<Key>,
    /// `"0"`, `"1"` or `"all"`.
    pub acks: String,
    /// Share of operations that are sends (the rest are polls), in [0, 1].
    pub send_fraction: f64,
    /// Share of operations after which a consumer is assigned a fresh set of keys.
    pub reassign_fraction: f64,
    /// Long-poll bound for fetches of the main phase.
    pub poll_max_wait_ms: u64,
}

impl QueueSettings {
    /// Even mix of sends and polls, occasional reassignment, short long-polls.
    pub fn new(keys: Vec<Key>, acks: &str) -> QueueSettings {
        QueueSettings {
            keys,
            acks: acks.to_string(),
            send_fraction: 0.5,
            reassign_fraction: 0.02,
            poll_max_wait_ms: 100,
        }
    }
}

/// What a worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Assign these keys to the consumer (a local op, always ok).
    Assign(Vec<Key>),
    /// Send a unique value to a key.
    Send {
        /// The partition.
        key: Key,
        /// The unique value.
        value: Val,
    },
    /// Poll the next assigned key.
    Poll,
}

impl Intent {
    /// The history's `f`.
    pub fn f(&self) -> &'static str {
        match self {
            Intent::Assign(_) => "assign",
            Intent::Send { .. } => "send",
            Intent::Poll => "poll",
        }
    }

    /// The history's invoke `value`.
    pub fn invoke_value(&self) -> Value {
        match self {
            Intent::Assign(keys) => json!(keys),
            Intent::Send { key, value } => json!([MicroOp::Send {
                key: key.clone(),
                offset: None,
                value: *value
            }
            .to_invoke_value()]),
            Intent::Poll => json!([["poll"]]),
        }
    }
}

/// Hands out values unique within a run, shared by all workers.
#[derive(Debug, Default, Clone)]
pub struct ValueSource(Arc<AtomicI64>);

impl ValueSource {
    /// The next unused value (starting at 0).
    pub fn next(&self) -> Val {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// Chooses operations for one worker. Seeded, so a worker's choices depend only on the seed
/// and its worker number (values come from the shared [`ValueSource`]).
pub struct Generator {
    rng: StdRng,
    settings: Arc<QueueSettings>,
    values: ValueSource,
}

impl Generator {
    /// A generator for worker `worker` of a run with `seed`.
    pub fn new(
        seed: u64,
        worker: u64,
        settings: Arc<QueueSettings>,
        values: ValueSource,
    ) -> Generator {
        assert!(
            !settings.keys.is_empty(),
            "the queue workload needs at least one key"
        );
        // Mix the worker number in with an odd constant so workers' streams differ.
        let rng = StdRng::seed_from_u64(seed ^ worker.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Generator {
            rng,
            settings,
            values,
        }
    }

    /// A random non-empty subset of the keys, in key order.
    pub fn assignment(&mut self) -> Vec<Key> {
        let keys = &self.settings.keys;
        let n = self.rng.gen_range(1..=keys.len());
        let mut chosen: Vec<Key> = keys.choose_multiple(&mut self.rng, n).cloned().collect();
        chosen.sort();
        chosen
    }

    /// The next operation for a consumer in state `consumer`.
    pub fn next(&mut self, consumer: &Consumer) -> Intent {
        if consumer.assigned.is_empty() || self.rng.gen_bool(self.settings.reassign_fraction) {
            return Intent::Assign(self.assignment());
        }
        if self.rng.gen_bool(self.settings.send_fraction) {
            let key = self
                .settings
                .keys
                .choose(&mut self.rng)
                .expect("keys are not empty")
                .clone();
            Intent::Send {
                key,
                value: self.values.next(),
            }
        } else {
            Intent::Poll
        }
    }
}

/// One process's consumer: its assigned keys and its position in each key it has read.
/// Positions survive reassignment so a process's polls of a key never go backwards.
#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Keys polled in turn.
    pub assigned: Vec<Key>,
    /// Next offset to fetch per key.
    pub positions: BTreeMap<Key, u64>,
    /// Index into `assigned` of the next key to poll.
    cursor: usize,
}

impl Consumer {
    /// Replaces the assignment; positions of keys seen before are kept.
    pub fn assign(&mut self, keys: Vec<Key>) {
        self.assigned = keys;
        self.cursor = 0;
    }

    /// The next key to poll, round-robin over the assignment.
    pub fn next_key(&mut self) -> Option<Key> {
        if self.assigned.is_empty() {
            return None;
        }
        let key = self.assigned[self.cursor % self.assigned.len()].clone();
        self.cursor = (self.cursor + 1) % self.assigned.len();
        Some(key)
    }
}

/// How an operation completed, ready to be written as the history's completion line.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// ok, fail or info.
    pub kind: OpType,
    /// The completion value (micro-ops).
    pub value: Value,
    /// The node that answered or was asked.
    pub node: Option<String>,
    /// High watermark per key, when the broker reported one.
    pub high_watermarks: Option<BTreeMap<Key, u64>>,
    /// Log start offset per key, when the broker reported one.
    pub log_start_offsets: Option<BTreeMap<Key, u64>>,
    /// ISR size per key of an acks=all acknowledgement, when the broker reported one.
    pub isr_sizes: Option<BTreeMap<Key, u64>>,
    /// The error name of fail/info completions.
    pub error: Option<String>,
}

impl Completion {
    /// The completion line of client process `process`'s op `f`, with every extension the
    /// broker reported.
    pub fn into_op(self, process: u64, f: &str) -> Op {
        Op {
            node: self.node,
            high_watermarks: self.high_watermarks,
            log_start_offsets: self.log_start_offsets,
            isr_sizes: self.isr_sizes,
            error: self.error,
            ..Op::client(process, self.kind, f, self.value)
        }
    }

    fn failed(kind: OpType, value: Value, e: ClientError) -> Completion {
        Completion {
            kind,
            value,
            node: e.node,
            high_watermarks: None,
            log_start_offsets: None,
            isr_sizes: None,
            error: Some(e.cause.name()),
        }
    }
}

fn one_key_map(key: &str, v: Option<u64>) -> Option<BTreeMap<Key, u64>> {
    v.map(|v| BTreeMap::from([(key.to_string(), v)]))
}

/// Runs one intent. Sends map the client's outcome directly; polls advance the consumer's
/// position on success and return the records seen.
pub async fn execute<C: QueueClient>(
    client: &C,
    settings: &QueueSettings,
    consumer: &mut Consumer,
    intent: &Intent,
) -> Completion {
    match intent {
        Intent::Assign(keys) => {
            consumer.assign(keys.clone());
            Completion {
                kind: OpType::Ok,
                value: json!(keys),
                node: None,
                high_watermarks: None,
                log_start_offsets: None,
                isr_sizes: None,
                error: None,
            }
        }
        Intent::Send { key, value } => {
            let invoke = intent.invoke_value();
            match client.send(key, *value, &settings.acks).await {
                Outcome::Ok(sent) => Completion {
                    kind: OpType::Ok,
                    value: json!([MicroOp::Send {
                        key: key.clone(),
                        offset: sent.offset,
                        value: *value
                    }
                    .to_completion_value()]),
                    node: Some(sent.node),
                    high_watermarks: one_key_map(key, sent.high_watermark),
                    log_start_offsets: None,
                    isr_sizes: one_key_map(key, sent.isr_size),
                    error: None,
                },
                Outcome::Fail(e) => Completion::failed(OpType::Fail, invoke, e),
                Outcome::Info(e) => Completion::failed(OpType::Info, invoke, e),
            }
        }
        Intent::Poll => {
            let Some(key) = consumer.next_key() else {
                return Completion {
                    kind: OpType::Fail,
                    value: json!([["poll"]]),
                    node: None,
                    high_watermarks: None,
                    log_start_offsets: None,
                    isr_sizes: None,
                    error: Some("not-assigned".into()),
                };
            };
            let position = consumer.positions.get(&key).copied().unwrap_or(0);
            poll_key(client, consumer, &key, position, settings.poll_max_wait_ms).await
        }
    }
}

/// Fetches `key` from `position`, records the result in `consumer` and returns the poll's
/// completion. Used by the main phase and by the final reads.
pub async fn poll_key<C: QueueClient>(
    client: &C,
    consumer: &mut Consumer,
    key: &str,
    position: u64,
    max_wait_ms: u64,
) -> Completion {
    match client.fetch(key, position, max_wait_ms).await {
        Outcome::Ok(f) => {
            // A fetch below the log start offset cannot return those records; move on to
            // the log start so the consumer makes progress (the gap is in the history).
            let next = match f.log_start_offset {
                Some(start) if f.records.is_empty() && start > position => start,
                _ => f.next_offset,
            };
            consumer
                .positions
                .insert(key.to_string(), next.max(position));
            let records: Vec<(u64, Val)> = f.records;
            Completion {
                kind: OpType::Ok,
                value: json!([MicroOp::Poll(BTreeMap::from([(key.to_string(), records)]))
                    .to_completion_value()]),
                node: Some(f.node),
                high_watermarks: one_key_map(key, f.high_watermark),
                log_start_offsets: one_key_map(key, f.log_start_offset),
                isr_sizes: None,
                error: None,
            }
        }
        Outcome::Fail(e) | Outcome::Info(e) => {
            if matches!(&e.cause, crate::client::ErrorCause::Broker { name, .. } if name == ErrorCode::OffsetOutOfRange.name())
            {
                // Kafka's auto.offset.reset=earliest: continue from the log start (below it
                // after retention, or past the end after an unclean election truncated it).
                // But only when the current leader says so: a deposed leader, not yet told of
                // its successor and behind it, answers OFFSET_OUT_OF_RANGE to a position the
                // partition holds (Kafka's consumer would be fenced by the leader epoch,
                // KIP-320); resetting then would read the log again from its start.
                let start = client.log_start(key).await.unwrap_or(0);
                let end = client.log_end(key).await;
                let held = end.is_some_and(|end| (start..=end).contains(&position));
                if !held {
                    consumer.positions.insert(key.to_string(), start);
                }
            }
            Completion::failed(OpType::Fail, json!([["poll"]]), e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ErrorCause;
    use std::sync::Mutex;

    /// A client over an in-memory log per key that can be told to fail.
    #[derive(Default)]
    struct MemoryClient {
        logs: Mutex<BTreeMap<Key, Vec<Val>>>,
        fail_sends_with: Mutex<Option<(bool, ErrorCause)>>,
        /// Offsets below this were deleted (retention).
        start: Mutex<u64>,
        /// Fetches answer OFFSET_OUT_OF_RANGE, as a deposed leader behind its successor does.
        deposed: Mutex<bool>,
    }

    impl QueueClient for MemoryClient {
        async fn send(&self, key: &str, value: Val, _acks: &str) -> Outcome<Sent> {
            if let Some((info, cause)) = self.fail_sends_with.lock().unwrap().clone() {
                let e = ClientError {
                    cause,
                    node: Some("n1".into()),
                    message: String::new(),
                };
                return if info {
                    Outcome::Info(e)
                } else {
                    Outcome::Fail(e)
                };
            }
            let mut logs = self.logs.lock().unwrap();
            let log = logs.entry(key.to_string()).or_default();
            log.push(value);
            Outcome::Ok(Sent {
                offset: Some(log.len() as u64 - 1),
                high_watermark: Some(log.len() as u64),
                isr_size: None,
                node: "n1".into(),
            })
        }

        async fn fetch(&self, key: &str, offset: u64, _max_wait_ms: u64) -> Outcome<Fetched> {
            if offset < *self.start.lock().unwrap() || *self.deposed.lock().unwrap() {
                return Outcome::Fail(ClientError {
                    cause: ErrorCause::Broker {
                        name: "OFFSET_OUT_OF_RANGE".into(),
                        status: 416,
                    },
                    node: Some("n2".into()),
                    message: String::new(),
                });
            }
            let logs = self.logs.lock().unwrap();
            let log = logs.get(key).cloned().unwrap_or_default();
            let records: Vec<(u64, Val)> = log
                .iter()
                .enumerate()
                .skip(offset as usize)
                .take(2)
                .map(|(o, v)| (o as u64, *v))
                .collect();
            let next_offset = records.last().map(|r| r.0 + 1).unwrap_or(offset);
            Outcome::Ok(Fetched {
                records,
                next_offset,
                high_watermark: Some(log.len() as u64),
                log_start_offset: Some(*self.start.lock().unwrap()),
                foreign_values: 0,
                node: "n2".into(),
            })
        }

        async fn log_start(&self, _key: &str) -> Option<u64> {
            Some(*self.start.lock().unwrap())
        }

        async fn log_end(&self, key: &str) -> Option<u64> {
            Some(
                self.logs
                    .lock()
                    .unwrap()
                    .get(key)
                    .map_or(0, |l| l.len() as u64),
            )
        }
    }

    fn settings() -> Arc<QueueSettings> {
        Arc::new(QueueSettings::new(
            vec!["t0/0".into(), "t0/1".into(), "t0/2".into()],
            "all",
        ))
    }

    #[test]
    fn generator_is_determined_by_seed_and_worker() {
        let run = |seed, worker| {
            let mut g = Generator::new(seed, worker, settings(), ValueSource::default());
            let mut c = Consumer::default();
            (0..50)
                .map(|_| {
                    let i = g.next(&c);
                    if let Intent::Assign(k) = &i {
                        c.assign(k.clone());
                    }
                    i
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7, 1), run(7, 1));
        assert_ne!(run(7, 1), run(7, 2));
        assert_ne!(run(7, 1), run(8, 1));
    }

    #[test]
    fn first_intent_assigns_and_values_are_unique_across_workers() {
        let values = ValueSource::default();
        let mut a = Generator::new(1, 0, settings(), values.clone());
        let mut b = Generator::new(1, 1, settings(), values.clone());
        let empty = Consumer::default();
        assert!(matches!(a.next(&empty), Intent::Assign(k) if !k.is_empty()));
        let mut consumer = Consumer::default();
        consumer.assign(vec!["t0/0".into()]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            for g in [&mut a, &mut b] {
                if let Intent::Send { value, key } = g.next(&consumer) {
                    assert!(settings().keys.contains(&key));
                    assert!(seen.insert(value), "value {value} generated twice");
                }
            }
        }
        assert!(seen.len() > 100, "sends should be about half of 1000 ops");
    }

    #[tokio::test]
    async fn polls_advance_positions_and_record_what_they_saw() {
        let client = MemoryClient::default();
        let s = settings();
        let mut consumer = Consumer::default();
        for v in [10, 11, 12] {
            let c = execute(
                &client,
                &s,
                &mut consumer,
                &Intent::Send {
                    key: "t0/1".into(),
                    value: v,
                },
            )
            .await;
            assert_eq!(c.kind, OpType::Ok);
        }
        execute(
            &client,
            &s,
            &mut consumer,
            &Intent::Assign(vec!["t0/1".into()]),
        )
        .await;
        let first = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(first.value, json!([["poll", {"t0/1": [[0, 10], [1, 11]]}]]));
        assert_eq!(
            first.high_watermarks,
            Some(BTreeMap::from([("t0/1".into(), 3)]))
        );
        let second = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(second.value, json!([["poll", {"t0/1": [[2, 12]]}]]));
        assert_eq!(consumer.positions["t0/1"], 3);
    }

    #[tokio::test]
    async fn offset_out_of_range_resets_the_position_to_the_log_start() {
        let client = MemoryClient::default();
        let s = settings();
        let mut consumer = Consumer::default();
        for v in [20, 21, 22] {
            let send = Intent::Send {
                key: "t0/0".into(),
                value: v,
            };
            execute(&client, &s, &mut consumer, &send).await;
        }
        *client.start.lock().unwrap() = 2;
        execute(
            &client,
            &s,
            &mut consumer,
            &Intent::Assign(vec!["t0/0".into()]),
        )
        .await;
        let failed = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(failed.kind, OpType::Fail);
        assert_eq!(failed.error.as_deref(), Some("OFFSET_OUT_OF_RANGE"));
        assert_eq!(consumer.positions["t0/0"], 2);
        let read = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(read.value, json!([["poll", {"t0/0": [[2, 22]]}]]));
    }

    #[tokio::test]
    async fn a_deposed_leader_s_out_of_range_keeps_a_position_the_leader_holds() {
        let client = MemoryClient::default();
        let s = settings();
        let mut consumer = Consumer::default();
        for v in [20, 21, 22] {
            let send = Intent::Send {
                key: "t0/0".into(),
                value: v,
            };
            execute(&client, &s, &mut consumer, &send).await;
        }
        let assign = Intent::Assign(vec!["t0/0".into()]);
        execute(&client, &s, &mut consumer, &assign).await;
        let first = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(first.value, json!([["poll", {"t0/0": [[0, 20], [1, 21]]}]]));
        *client.deposed.lock().unwrap() = true;
        let failed = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(failed.error.as_deref(), Some("OFFSET_OUT_OF_RANGE"));
        // The leader's log (0 to 3) holds position 2: no reset to the start, no re-read.
        assert_eq!(consumer.positions["t0/0"], 2);
        *client.deposed.lock().unwrap() = false;
        let read = execute(&client, &s, &mut consumer, &Intent::Poll).await;
        assert_eq!(read.value, json!([["poll", {"t0/0": [[2, 22]]}]]));
    }

    #[tokio::test]
    async fn send_completions_carry_offset_or_error() {
        let client = MemoryClient::default();
        let s = settings();
        let mut consumer = Consumer::default();
        let send = Intent::Send {
            key: "t0/2".into(),
            value: 907,
        };
        let ok = execute(&client, &s, &mut consumer, &send).await;
        assert_eq!(ok.value, json!([["send", "t0/2", [0, 907]]]));
        assert_eq!(ok.node.as_deref(), Some("n1"));

        *client.fail_sends_with.lock().unwrap() = Some((
            true,
            ErrorCause::Broker {
                name: "NOT_ENOUGH_REPLICAS_AFTER_APPEND".into(),
                status: 503,
            },
        ));
        let info = execute(&client, &s, &mut consumer, &send).await;
        assert_eq!(info.kind, OpType::Info);
        assert_eq!(
            info.error.as_deref(),
            Some("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
        );
        assert_eq!(info.value, json!([["send", "t0/2", 907]]));
    }
}
