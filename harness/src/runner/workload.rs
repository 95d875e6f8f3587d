//! The main phase's client side: `concurrency` worker tasks, each driving the queue workload
//! (or the consumer-group workload, [`spawn_group_workers`]) as one process at a time,
//! recording invoke and completion of every op, under one overall rate limit.

use crate::recorder::Recorder;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidewater_workloads::group::{self, GroupClient, GroupContext, OpSink};
use tidewater_workloads::history::{Op, OpType, Process};
use tidewater_workloads::queue::{
    execute, Completion, Consumer, Generator, Intent, QueueClient, QueueSettings, ValueSource,
};
use tokio::time::Instant;

/// Spaces ops evenly so that all workers together do at most `rate` ops per second.
/// Each caller reserves the next free slot and sleeps until it.
pub struct RateLimiter {
    /// Time between two ops; `None` when unlimited.
    interval: Option<Duration>,
    /// The next free slot.
    next: Mutex<Instant>,
}

impl RateLimiter {
    /// `rate_ops` ops per second overall; 0 or less means unlimited.
    pub fn new(rate_ops: f64) -> RateLimiter {
        RateLimiter {
            interval: (rate_ops > 0.0).then(|| Duration::from_secs_f64(1.0 / rate_ops)),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Reserves a slot and returns when it is due.
    pub fn reserve(&self) -> Instant {
        let Some(interval) = self.interval else {
            return Instant::now();
        };
        let mut next = self.next.lock().expect("rate limiter lock");
        let slot = (*next).max(Instant::now());
        *next = slot + interval;
        slot
    }

    /// Waits for the next slot.
    pub async fn wait(&self) {
        if self.interval.is_some() {
            tokio::time::sleep_until(self.reserve()).await;
        }
    }
}

/// Everything the workers share.
pub struct WorkloadContext<C> {
    /// The I/O.
    pub client: Arc<C>,
    /// Keys, acks, mix.
    pub settings: Arc<QueueSettings>,
    /// Where ops go.
    pub recorder: Arc<Recorder>,
    /// The run's seed; each worker derives its generator from it.
    pub seed: u64,
    /// Unique values for sends.
    pub values: ValueSource,
    /// Overall rate limit.
    pub limiter: Arc<RateLimiter>,
    /// Set to stop the workers after their current op.
    pub stop: Arc<AtomicBool>,
}

impl<C> Clone for WorkloadContext<C> {
    fn clone(&self) -> Self {
        WorkloadContext {
            client: self.client.clone(),
            settings: self.settings.clone(),
            recorder: self.recorder.clone(),
            seed: self.seed,
            values: self.values.clone(),
            limiter: self.limiter.clone(),
            stop: self.stop.clone(),
        }
    }
}

/// A client op line with the given fields; index and time are set by the recorder.
pub fn client_op(process: u64, kind: OpType, f: &str, value: Value) -> Op {
    Op {
        index: 0,
        time: 0,
        process: Process::Client(process),
        kind,
        f: f.to_string(),
        value,
        node: None,
        high_watermarks: None,
        log_start_offsets: None,
        error: None,
        r#final: false,
    }
}

/// The completion line of an op.
pub fn completion_op(process: u64, f: &str, c: Completion, is_final: bool) -> Op {
    Op {
        node: c.node,
        high_watermarks: c.high_watermarks,
        log_start_offsets: c.log_start_offsets,
        error: c.error,
        r#final: is_final,
        ..client_op(process, c.kind, f, c.value)
    }
}

/// One worker: runs ops until `stop` is set. An op is never abandoned half-way (the client's
/// timeouts bound it), so every invoke gets its completion. After an `info` completion the
/// process retires and the worker continues as a new process with a fresh consumer.
pub async fn worker<C: QueueClient>(ctx: WorkloadContext<C>, worker_id: u64) -> u64 {
    let mut generator = Generator::new(
        ctx.seed,
        worker_id,
        ctx.settings.clone(),
        ctx.values.clone(),
    );
    let mut process = ctx.recorder.new_process();
    let mut consumer = Consumer::default();
    let mut ops = 0;
    while !ctx.stop.load(Ordering::Relaxed) {
        // Yield once per op: with a client that answers without I/O (tests, the overhead
        // benchmark) a worker would otherwise never give its thread back.
        tokio::task::yield_now().await;
        ctx.limiter.wait().await;
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let intent: Intent = generator.next(&consumer);
        let f = intent.f();
        ctx.recorder
            .record(client_op(process, OpType::Invoke, f, intent.invoke_value()));
        let completion = execute(&*ctx.client, &ctx.settings, &mut consumer, &intent).await;
        let retire = completion.kind == OpType::Info;
        ctx.recorder
            .record(completion_op(process, f, completion, false));
        ops += 1;
        if retire {
            process = ctx.recorder.new_process();
            consumer = Consumer::default();
        }
    }
    ops
}

/// Starts `concurrency` workers; returns their handles (each yields its op count).
pub fn spawn_workers<C: QueueClient>(
    ctx: &WorkloadContext<C>,
    concurrency: usize,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..concurrency as u64)
        .map(|id| tokio::spawn(worker(ctx.clone(), id)))
        .collect()
}

/// The group workload's [`OpSink`]: the run's recorder and its overall rate limit.
pub struct RecorderSink {
    /// Where ops go.
    pub recorder: Arc<Recorder>,
    /// Overall rate limit, shared with nothing else in a group run.
    pub limiter: Arc<RateLimiter>,
}

impl OpSink for RecorderSink {
    fn new_process(&self) -> u64 {
        self.recorder.new_process()
    }

    fn record(&self, op: Op) {
        self.recorder.record(op);
    }

    async fn pace(&self) {
        self.limiter.wait().await;
    }
}

/// Starts `concurrency` group workers (the first `settings.producers` only send, the others
/// are group members); returns their handles (each yields its op count). Each worker's ops,
/// consumer faults (crash, stall, leave) included, come from a generator seeded by the run's
/// seed and the worker's number.
pub fn spawn_group_workers<C: QueueClient, G: GroupClient>(
    ctx: &GroupContext<C, G>,
    sink: Arc<RecorderSink>,
    concurrency: usize,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..concurrency as u64)
        .map(|id| tokio::spawn(group::group_worker(ctx.clone(), sink.clone(), id)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidewater_workloads::client::{ClientError, ErrorCause, Fetched, Outcome, Sent};
    use tidewater_workloads::history::read_history;

    /// Every send ends `info`, every poll ok and empty.
    struct InfoClient;

    impl QueueClient for InfoClient {
        async fn send(&self, _key: &str, _value: i64, _acks: &str) -> Outcome<Sent> {
            Outcome::Info(ClientError {
                cause: ErrorCause::Timeout,
                node: Some("n1".into()),
                message: String::new(),
            })
        }
        async fn fetch(&self, _key: &str, offset: u64, _w: u64) -> Outcome<Fetched> {
            Outcome::Ok(Fetched {
                records: vec![],
                next_offset: offset,
                high_watermark: Some(0),
                log_start_offset: Some(0),
                foreign_values: 0,
                node: "n1".into(),
            })
        }
    }

    #[tokio::test]
    async fn group_workers_record_through_the_recorder_and_retire_after_info() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let recorder = Recorder::create(&path).unwrap();
        let settings = group::GroupSettings::new(vec!["t0/0".into()], "all");
        // Two workers: both producers, so the coordinator (no nodes here) is never called.
        let config = tidewater_workloads::client::ClientConfig::new(Default::default());
        let ctx = GroupContext {
            queue: Arc::new(InfoClient),
            group: Arc::new(group::HttpGroupClient::new(&config, &settings)),
            settings: Arc::new(settings),
            seed: 3,
            values: ValueSource::default(),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let sink = Arc::new(RecorderSink {
            recorder: recorder.clone(),
            limiter: Arc::new(RateLimiter::new(0.0)),
        });
        let handles = spawn_group_workers(&ctx, sink, 2);
        while recorder.counts().snapshot().2 < 10 {
            tokio::task::yield_now().await;
        }
        ctx.stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.await.unwrap();
        }
        recorder.close().unwrap();
        let ops =
            read_history(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        assert!(ops.iter().all(|op| op.f == "send"));
        // Each process invokes one send, which ends info, and is never seen again.
        let mut lines_by_process = std::collections::HashMap::new();
        for op in &ops {
            lines_by_process
                .entry(op.process)
                .or_insert_with(Vec::new)
                .push(op.kind);
        }
        assert!(lines_by_process.len() >= 10);
        for kinds in lines_by_process.values() {
            assert_eq!(kinds, &[OpType::Invoke, OpType::Info]);
        }
    }

    #[test]
    fn rate_limiter_spaces_slots_by_the_interval() {
        let limiter = RateLimiter::new(10.0);
        let a = limiter.reserve();
        let b = limiter.reserve();
        let c = limiter.reserve();
        assert_eq!(b - a, Duration::from_millis(100));
        assert_eq!(c - b, Duration::from_millis(100));
        let unlimited = RateLimiter::new(0.0);
        assert!(unlimited.interval.is_none());
    }

    #[tokio::test]
    async fn a_process_never_invokes_again_after_info() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let recorder = Recorder::create(&path).unwrap();
        let ctx = WorkloadContext {
            client: Arc::new(InfoClient),
            settings: Arc::new(QueueSettings::new(vec!["t0/0".into()], "all")),
            recorder: recorder.clone(),
            seed: 3,
            values: ValueSource::default(),
            limiter: Arc::new(RateLimiter::new(0.0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let handles = spawn_workers(&ctx, 2);
        while recorder.counts().snapshot().2 < 20 {
            tokio::task::yield_now().await;
        }
        ctx.stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.await.unwrap();
        }
        recorder.close().unwrap();
        let ops =
            read_history(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        let mut retired = std::collections::HashSet::new();
        let mut open = std::collections::HashMap::new();
        for op in &ops {
            assert!(
                !retired.contains(&op.process),
                "retired {} acted",
                op.process
            );
            match op.kind {
                OpType::Invoke => assert!(open.insert(op.process, op.f.clone()).is_none()),
                kind => {
                    assert_eq!(open.remove(&op.process), Some(op.f.clone()));
                    if kind == OpType::Info {
                        retired.insert(op.process);
                    }
                }
            }
        }
        assert!(open.is_empty(), "every invoke has a completion: {open:?}");
        assert!(retired.len() >= 20);
    }
}
