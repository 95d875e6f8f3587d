//! The main phase's client side: `concurrency` worker tasks, each driving the queue workload
//! (or the consumer-group workload, [`spawn_group_workers`]) as one process at a time,
//! recording invoke and completion of every op. [`Workload`] starts the run's workload on
//! the clients its system under test provides.
//!
//! Queue workers are split into **lanes**, one per partition (or per group of partitions when
//! there are fewer workers than partitions): a worker sends to and polls only its lane's
//! partitions, under its lane's share of the rate. A closed-loop worker waits out every
//! request it makes, so a worker that could touch every partition would sit in the timeout
//! of a stalled one most of the time; with lanes, a paused or isolated leader slows only the
//! workers of the partitions it leads, and every other partition keeps its throughput.
//!
//! With a **focus** (`--focus SHARE`, 0.5 by default), the partition the faults aim at is a
//! lane of its own with that share of the rate and of the workers, so the faults meet writes
//! in flight there; the other partitions split the rest alike ([`lane_plan`]).

use super::config::RunConfig;
use crate::recorder::Recorder;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidewater_workloads::group::{self, GroupClient, GroupContext, GroupSettings, OpSink};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::queue::{
    execute, Completion, Consumer, Generator, Intent, QueueClient, QueueSettings, ValueSource,
};
use tidewater_workloads::txn::{self, TxnClient, TxnSettings};
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
    /// Keys (all of them; each lane gets its share), acks, mix.
    pub settings: Arc<QueueSettings>,
    /// Where ops go.
    pub recorder: Arc<Recorder>,
    /// The run's seed; each worker derives its generator from it.
    pub seed: u64,
    /// Unique values for sends.
    pub values: ValueSource,
    /// Ops per second over all workers (0 or less: unlimited), split over the lanes in
    /// proportion to their partitions.
    pub rate_ops: f64,
    /// Set to stop the workers after their current op.
    pub stop: Arc<AtomicBool>,
    /// The partition given a share of the rate and workers of its own, and that share
    /// (`--focus`); `None`: every partition alike.
    pub focus: Option<(String, f64)>,
}

impl<C> Clone for WorkloadContext<C> {
    fn clone(&self) -> Self {
        WorkloadContext {
            client: self.client.clone(),
            settings: self.settings.clone(),
            recorder: self.recorder.clone(),
            seed: self.seed,
            values: self.values.clone(),
            rate_ops: self.rate_ops,
            stop: self.stop.clone(),
            focus: self.focus.clone(),
        }
    }
}

/// The partitions some workers own, and their share of the rate.
#[derive(Clone)]
pub struct Lane {
    /// The run's settings with only this lane's keys.
    pub settings: Arc<QueueSettings>,
    /// This lane's rate limit, shared by its workers only.
    pub limiter: Arc<RateLimiter>,
}

/// Splits `keys` over `min(workers, keys)` lanes: lane `l` owns the keys at positions `i`
/// with `i % lanes == l`, so with at least as many workers as partitions every partition has
/// lanes of its own. Never returns an empty lane.
pub fn lane_keys(keys: &[String], workers: usize) -> Vec<Vec<String>> {
    let lanes = workers.min(keys.len()).max(1);
    let mut out = vec![Vec::new(); lanes];
    for (i, key) in keys.iter().enumerate() {
        out[i % lanes].push(key.clone());
    }
    out.retain(|l| !l.is_empty());
    out
}

/// How the workers and the rate are split: a lane's keys and share of the rate, and the
/// lane of each worker (by worker number).
#[derive(Debug, Clone, PartialEq)]
pub struct LanePlan {
    /// Each lane's keys and its share of the rate (the shares add up to 1).
    pub lanes: Vec<(Vec<String>, f64)>,
    /// `worker_lane[w]`: the lane of worker `w`.
    pub worker_lane: Vec<usize>,
}

/// The lanes of `workers` workers over `keys`. Without a focus (or with one key or one
/// worker) every partition is alike: [`lane_keys`], worker `w` in lane `w % lanes`, each
/// lane's rate share in proportion to its keys. With `focus = Some((key, share))` that key is
/// a lane of its own with `share` of the rate and about `share` of the workers (at least
/// one, and at least one left for the rest), and the other keys split the rest alike.
pub fn lane_plan(keys: &[String], workers: usize, focus: Option<(&str, f64)>) -> LanePlan {
    let even = |keys: &[String], workers: usize, rate_share: f64, first_lane: usize| {
        let lanes: Vec<(Vec<String>, f64)> = lane_keys(keys, workers)
            .into_iter()
            .map(|lane| {
                let share = rate_share * lane.len() as f64 / keys.len().max(1) as f64;
                (lane, share)
            })
            .collect();
        let worker_lane = (0..workers).map(|w| first_lane + w % lanes.len()).collect();
        LanePlan { lanes, worker_lane }
    };
    let focused = focus.filter(|(key, share)| {
        *share > 0.0 && workers >= 2 && keys.len() >= 2 && keys.iter().any(|k| k == key)
    });
    let Some((hot, share)) = focused else {
        return even(keys, workers, 1.0, 0);
    };
    let hot_workers = ((share * workers as f64).round() as usize).clamp(1, workers - 1);
    let others: Vec<String> = keys.iter().filter(|k| *k != hot).cloned().collect();
    let rest = even(&others, workers - hot_workers, 1.0 - share, 1);
    let mut lanes = vec![(vec![hot.to_string()], share)];
    lanes.extend(rest.lanes);
    let mut worker_lane = vec![0; hot_workers];
    worker_lane.extend(rest.worker_lane);
    LanePlan { lanes, worker_lane }
}

/// The lanes of `concurrency` workers over the context's keys ([`lane_plan`] with the
/// context's focus), and each worker's lane.
pub fn lanes<C>(ctx: &WorkloadContext<C>, concurrency: usize) -> (Vec<Lane>, Vec<usize>) {
    let focus = ctx
        .focus
        .as_ref()
        .map(|(key, share)| (key.as_str(), *share));
    let plan = lane_plan(&ctx.settings.keys, concurrency, focus);
    let lanes = plan
        .lanes
        .into_iter()
        .map(|(keys, share)| Lane {
            limiter: Arc::new(RateLimiter::new(ctx.rate_ops * share)),
            settings: Arc::new(QueueSettings {
                keys,
                ..(*ctx.settings).clone()
            }),
        })
        .collect();
    (lanes, plan.worker_lane)
}

/// A client op line with the given fields; index and time are set by the recorder.
pub fn client_op(process: u64, kind: OpType, f: &str, value: Value) -> Op {
    Op::client(process, kind, f, value)
}

/// The completion line of an op.
pub fn completion_op(process: u64, f: &str, c: Completion, is_final: bool) -> Op {
    Op {
        r#final: is_final,
        ..c.into_op(process, f)
    }
}

/// One worker of `lane`: runs ops on the lane's keys until `stop` is set. An op is never
/// abandoned half-way (the client's timeouts bound it), so every invoke gets its completion.
/// After an `info` completion the process retires and the worker continues as a new process
/// with a fresh consumer.
pub async fn worker<C: QueueClient>(ctx: WorkloadContext<C>, lane: Lane, worker_id: u64) -> u64 {
    let mut generator = Generator::new(
        ctx.seed,
        worker_id,
        lane.settings.clone(),
        ctx.values.clone(),
    );
    let mut process = ctx.recorder.new_process();
    let mut consumer = Consumer::default();
    let mut ops = 0;
    while !ctx.stop.load(Ordering::Relaxed) {
        // Yield once per op: with a client that answers without I/O (tests, the overhead
        // benchmark) a worker would otherwise never give its thread back.
        tokio::task::yield_now().await;
        lane.limiter.wait().await;
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let intent: Intent = generator.next(&consumer);
        let f = intent.f();
        ctx.recorder
            .record(client_op(process, OpType::Invoke, f, intent.invoke_value()));
        let completion = execute(&*ctx.client, &lane.settings, &mut consumer, &intent).await;
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

/// Starts `concurrency` workers, worker `w` in lane `w % lanes` (see [`lanes`]); returns
/// their handles (each yields its op count).
pub fn spawn_workers<C: QueueClient>(
    ctx: &WorkloadContext<C>,
    concurrency: usize,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let (lanes, worker_lane) = lanes(ctx, concurrency);
    worker_lane
        .into_iter()
        .enumerate()
        .map(|(id, lane)| tokio::spawn(worker(ctx.clone(), lanes[lane].clone(), id as u64)))
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

/// The run's workload as its config sets it (`queue`, `group` or `txn`, keys, acks, rate,
/// concurrency, seed), waiting for a system's clients.
pub struct Workload<'a> {
    /// The run's settings.
    pub config: &'a RunConfig,
    /// The topic's keys.
    pub keys: &'a [String],
    /// Where ops go.
    pub recorder: &'a Arc<Recorder>,
    /// Set to stop the workers after their current op.
    pub stop: &'a Arc<AtomicBool>,
}

impl Workload<'_> {
    /// Starts the workers: produces and fetches on `queue`; in the group workload, coordinator
    /// calls on the client `group` makes for its settings; in the transactional workload,
    /// transactions on `txn`. Returns their handles (each yields its op count).
    pub fn start<C: QueueClient, G: GroupClient>(
        &self,
        queue: Arc<C>,
        group: impl FnOnce(&GroupSettings) -> G,
        txn: Option<Arc<dyn TxnClient>>,
    ) -> Vec<tokio::task::JoinHandle<u64>> {
        let config = self.config;
        if config.workload == "txn" {
            let txn = txn.expect("the run's config refuses --workload txn without a txn client");
            return self.start_txn(txn);
        }
        if config.workload != "group" {
            let ctx = WorkloadContext {
                client: queue,
                settings: Arc::new(QueueSettings::new(self.keys.to_vec(), &config.acks)),
                recorder: self.recorder.clone(),
                seed: config.seed,
                values: ValueSource::default(),
                rate_ops: config.rate,
                stop: self.stop.clone(),
                focus: (config.focus > 0.0).then(|| (config.fault_key(), config.focus)),
            };
            return spawn_workers(&ctx, config.concurrency);
        }
        let settings = GroupSettings::new(self.keys.to_vec(), &config.acks);
        let sink = Arc::new(RecorderSink {
            recorder: self.recorder.clone(),
            limiter: Arc::new(RateLimiter::new(config.rate)),
        });
        let ctx = GroupContext {
            queue,
            group: Arc::new(group(&settings)),
            settings: Arc::new(settings),
            seed: config.seed,
            values: ValueSource::default(),
            stop: self.stop.clone(),
        };
        spawn_group_workers(&ctx, sink, config.concurrency)
    }

    /// `concurrency` transactional workers, worker `w` as logical client `w` (its own
    /// `transactional.id`), under the run's overall rate.
    fn start_txn(&self, client: Arc<dyn TxnClient>) -> Vec<tokio::task::JoinHandle<u64>> {
        let config = self.config;
        let settings = Arc::new(TxnSettings {
            end_attempts_max: config.txn_end_attempts_max,
            ..TxnSettings::new(self.keys.to_vec())
        });
        let sink = Arc::new(RecorderSink {
            recorder: self.recorder.clone(),
            limiter: Arc::new(RateLimiter::new(config.rate)),
        });
        let values = ValueSource::default();
        (0..config.concurrency as u64)
            .map(|worker| {
                tokio::spawn(txn::txn_worker(
                    client.clone(),
                    settings.clone(),
                    sink.clone(),
                    config.seed,
                    worker,
                    values.clone(),
                    self.stop.clone(),
                ))
            })
            .collect()
    }
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
    fn lanes_give_every_partition_workers_of_its_own_when_there_are_enough() {
        let keys: Vec<String> = (0..5).map(|p| format!("t0/{p}")).collect();
        let lanes = lane_keys(&keys, 10);
        assert_eq!(lanes.len(), 5);
        assert!(lanes.iter().all(|l| l.len() == 1));
        let fewer = lane_keys(&keys, 2);
        assert_eq!(
            fewer,
            vec![vec!["t0/0", "t0/2", "t0/4"], vec!["t0/1", "t0/3"]]
        );
        assert_eq!(lane_keys(&keys[..1], 4), vec![vec!["t0/0"]]);
    }

    #[test]
    fn a_focus_gives_its_partition_a_lane_with_its_share_and_the_rest_split_alike() {
        let keys: Vec<String> = (0..3).map(|p| format!("t0/{p}")).collect();
        let lanes = |plan: &LanePlan| -> Vec<(Vec<String>, f64)> { plan.lanes.clone() };
        let owned = |k: &[&str]| k.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        // Without a focus: as before, one lane per partition, worker w in lane w % 3.
        let even = lane_plan(&keys, 10, None);
        assert_eq!(
            lanes(&even),
            vec![
                (owned(&["t0/0"]), 1.0 / 3.0),
                (owned(&["t0/1"]), 1.0 / 3.0),
                (owned(&["t0/2"]), 1.0 / 3.0)
            ]
        );
        assert_eq!(even.worker_lane, vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
        // The default run: half the rate and five of ten workers on t0/0, a quarter each on
        // the others (three workers and two).
        let focused = lane_plan(&keys, 10, Some(("t0/0", 0.5)));
        assert_eq!(
            lanes(&focused),
            vec![
                (owned(&["t0/0"]), 0.5),
                (owned(&["t0/1"]), 0.25),
                (owned(&["t0/2"]), 0.25)
            ]
        );
        assert_eq!(focused.worker_lane, vec![0, 0, 0, 0, 0, 1, 2, 1, 2, 1]);
        // The shares always add up to the whole rate, and every lane has a worker.
        for (workers, share) in [(2, 0.9), (3, 0.1), (7, 0.75), (100, 0.3)] {
            let plan = lane_plan(&keys, workers, Some(("t0/0", share)));
            let total: f64 = plan.lanes.iter().map(|(_, s)| s).sum();
            assert!((total - 1.0).abs() < 1e-9, "{workers} {share}: {total}");
            assert_eq!(plan.worker_lane.len(), workers);
            for lane in 0..plan.lanes.len() {
                assert!(
                    plan.worker_lane.contains(&lane),
                    "{workers} {share}: lane {lane}"
                );
            }
        }
        // Two workers over three partitions: one on t0/0, one for both others.
        let two = lane_plan(&keys, 2, Some(("t0/0", 0.75)));
        assert_eq!(
            lanes(&two),
            vec![(owned(&["t0/0"]), 0.75), (owned(&["t0/1", "t0/2"]), 0.25)]
        );
        assert_eq!(two.worker_lane, vec![0, 1]);
        // Nothing to focus: one worker, one partition, or a key not in the topic.
        assert_eq!(
            lane_plan(&keys, 1, Some(("t0/0", 0.5))),
            lane_plan(&keys, 1, None)
        );
        assert_eq!(
            lane_plan(&keys[..1], 4, Some(("t0/0", 0.5))),
            lane_plan(&keys[..1], 4, None)
        );
        assert_eq!(
            lane_plan(&keys, 4, Some(("t9/0", 0.5))),
            lane_plan(&keys, 4, None)
        );
    }

    /// Ops on `t0/0` hang until released, as against a paused leader; the rest answer at once.
    struct StalledPartitionClient {
        release: tokio::sync::Notify,
        released: AtomicBool,
        done: Mutex<std::collections::BTreeMap<String, u64>>,
    }

    impl StalledPartitionClient {
        async fn on(&self, key: &str) {
            if key == "t0/0" {
                while !self.released.load(Ordering::Relaxed) {
                    let notified = self.release.notified();
                    if self.released.load(Ordering::Relaxed) {
                        break;
                    }
                    notified.await;
                }
            }
            *self
                .done
                .lock()
                .unwrap()
                .entry(key.to_string())
                .or_default() += 1;
        }
    }

    impl QueueClient for StalledPartitionClient {
        async fn send(&self, key: &str, _value: i64, _acks: &str) -> Outcome<Sent> {
            self.on(key).await;
            Outcome::Ok(Sent {
                offset: None,
                high_watermark: None,
                isr_size: None,
                node: "n1".into(),
            })
        }
        async fn fetch(&self, key: &str, offset: u64, _w: u64) -> Outcome<Fetched> {
            self.on(key).await;
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

    /// Workers over `t0/0..t0/2` on a [`StalledPartitionClient`] (`t0/0` stalled unless
    /// `released`), recording into a history under `dir`.
    fn three_partitions(
        dir: &std::path::Path,
        released: bool,
        seed: u64,
        rate_ops: f64,
        focus: Option<(String, f64)>,
    ) -> (
        WorkloadContext<StalledPartitionClient>,
        Arc<StalledPartitionClient>,
        Arc<Recorder>,
    ) {
        let recorder = Recorder::create(&dir.join("history.jsonl")).unwrap();
        let client = Arc::new(StalledPartitionClient {
            release: tokio::sync::Notify::new(),
            released: AtomicBool::new(released),
            done: Mutex::new(Default::default()),
        });
        let keys: Vec<String> = (0..3).map(|p| format!("t0/{p}")).collect();
        let ctx = WorkloadContext {
            client: client.clone(),
            settings: Arc::new(QueueSettings::new(keys, "all")),
            recorder: recorder.clone(),
            seed,
            values: ValueSource::default(),
            rate_ops,
            stop: Arc::new(AtomicBool::new(false)),
            focus,
        };
        (ctx, client, recorder)
    }

    #[tokio::test]
    async fn a_stalled_partition_does_not_starve_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, client, recorder) = three_partitions(dir.path(), false, 5, 0.0, None);
        let handles = spawn_workers(&ctx, 6);
        // Every worker that could reach t0/0 is stuck there by now or soon; the workers of
        // t0/1 and t0/2 must go on regardless.
        let bound = std::time::Instant::now() + Duration::from_secs(20);
        let enough = |done: &std::collections::BTreeMap<String, u64>| {
            ["t0/1", "t0/2"]
                .iter()
                .all(|k| done.get(*k).copied().unwrap_or(0) >= 2_000)
        };
        loop {
            let done = client.done.lock().unwrap().clone();
            if enough(&done) {
                assert_eq!(done.get("t0/0"), None, "t0/0 completed an op while stalled");
                break;
            }
            assert!(
                std::time::Instant::now() < bound,
                "the other partitions stalled too; completed ops by key: {done:?}"
            );
            tokio::task::yield_now().await;
        }
        ctx.stop.store(true, Ordering::Relaxed);
        client.released.store(true, Ordering::Relaxed);
        client.release.notify_waiters();
        for h in handles {
            h.await.unwrap();
        }
        recorder.close().unwrap();
    }

    #[tokio::test]
    async fn with_a_focus_its_partition_gets_its_share_of_the_ops() {
        let dir = tempfile::tempdir().unwrap();
        let focus = Some(("t0/0".to_string(), 0.5));
        let (ctx, client, recorder) = three_partitions(dir.path(), true, 9, 2_000.0, focus);
        let handles = spawn_workers(&ctx, 10);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        ctx.stop.store(true, Ordering::Relaxed);
        let ops: u64 = futures::future::join_all(handles)
            .await
            .into_iter()
            .map(|h| h.unwrap())
            .sum();
        recorder.close().unwrap();
        // The client's own count by partition: sends and polls (assignments touch none).
        let done = client.done.lock().unwrap().clone();
        let total: u64 = done.values().sum();
        assert!(
            total >= 1_000 && total <= ops,
            "{total} of {ops} ops: {done:?}"
        );
        let share = |key: &str| done.get(key).copied().unwrap_or(0) as f64 / total as f64;
        assert!((share("t0/0") - 0.5).abs() < 0.05, "{done:?}");
        assert!((share("t0/1") - 0.25).abs() < 0.05, "{done:?}");
        assert!((share("t0/2") - 0.25).abs() < 0.05, "{done:?}");
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
            rate_ops: 0.0,
            stop: Arc::new(AtomicBool::new(false)),
            focus: None,
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
