//! The phases of a run: setup (cluster, topic) -> main (workload + nemesis for the time
//! limit) -> heal -> wait for recovery (bounded) -> final reads -> teardown (node logs
//! collected) -> check -> report. One seed, stored in `config.json`, drives every random
//! choice; the fault schedule is resolved up front and stored too, so `--replay` repeats it.
//!
//! # Layout
//! - `config`: [`config::RunConfig`], the content of `config.json`.
//! - `workload`: worker tasks running the queue or the group workload under a rate limit.
//! - `sampler`: `samples.jsonl`, each broker's partition status every 500 ms.
//! - `final_reads`: reading every partition from its log start after recovery.
//! - `faults`: the bridge to the nemesis (schedule, running it, the final heal step).
//! - this file: [`run`], which sequences the phases and never leaves a cluster behind.

pub mod config;
pub mod faults;
pub mod final_reads;
pub mod sampler;
pub mod workload;

use crate::cluster::Cluster;
use crate::progress::{Progress, Snapshot};
use crate::recorder::Recorder;
use crate::store::RunDir;
use config::RunConfig;
use final_reads::KeyCoverage;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::checker::{self, CheckSettings};
use tidewater_workloads::client::{BrokerClient, ClientConfig};
use tidewater_workloads::group::{GroupClient, GroupContext, GroupSettings, HttpGroupClient};
use tidewater_workloads::kafka::{KafkaClientConfig, KafkaQueueClient};
use tidewater_workloads::kafka_admin::KafkaAdmin;
use tidewater_workloads::kafka_group::KafkaGroupClient;
use tidewater_workloads::queue::{QueueClient, QueueSettings, ValueSource};
use tidewater_workloads::results::{CheckResults, Validity};
use tokio::time::Instant;
use workload::{spawn_group_workers, spawn_workers, RateLimiter, RecorderSink, WorkloadContext};

/// Exit code when the cluster or topic could not be set up.
pub const EXIT_SETUP: i32 = 3;
/// Exit code when the cluster did not recover after heal within the bound (liveness).
pub const EXIT_LIVENESS: i32 = 4;
/// Exit code for any other harness error (I/O, a bug).
pub const EXIT_HARNESS: i32 = 5;

/// Bound on setup: brokers registering, topic creation, first leaders.
const SETUP_TIME_LIMIT: Duration = Duration::from_secs(60);
/// Pause between two setup or recovery probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Bound on waiting for workers to finish their last op after the time limit: longer than
/// the client's request timeout times its attempts.
const WORKER_DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// Why a run could not produce a verdict.
#[derive(Debug)]
pub enum RunError {
    /// The cluster or the topic could not be set up.
    Setup(String),
    /// Anything else: I/O on the run directory, a task that panicked.
    Harness(String),
}

impl RunError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Setup(_) => EXIT_SETUP,
            RunError::Harness(_) => EXIT_HARNESS,
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Setup(m) => write!(f, "setup failed: {m}"),
            RunError::Harness(m) => write!(f, "harness error: {m}"),
        }
    }
}

impl std::error::Error for RunError {}

fn harness_err(context: &str) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |e| RunError::Harness(format!("{context}: {e}"))
}

/// What a finished run concluded.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Where everything was written.
    pub run_dir: RunDir,
    /// The checkers' results (also in `results.json`).
    pub results: CheckResults,
    /// Whether the cluster answered again within the recovery bound after heal.
    pub recovered: bool,
    /// How far the final reads got.
    pub final_reads: FinalReads,
    /// `report.html`, when the report was rendered.
    pub report: Option<std::path::PathBuf>,
}

impl RunOutcome {
    /// 1 when invalid (a safety violation wins), 4 when the cluster did not recover,
    /// otherwise the verdict's code (0 valid, 2 unknown).
    pub fn exit_code(&self) -> i32 {
        match (self.results.valid, self.recovered) {
            (Validity::Invalid, _) => 1,
            (_, false) => EXIT_LIVENESS,
            (v, true) => v.exit_code(),
        }
    }
}

/// Builds the cluster of a run (blocking; called on a blocking thread).
pub type ClusterFactory =
    Box<dyn FnOnce(&RunConfig, &RunDir) -> Result<Arc<dyn Cluster>, String> + Send>;

/// Prints a line for the user and writes it to `harness.log`.
pub fn say(progress: &Progress, line: &str) {
    tracing::info!("{line}");
    progress.println(line);
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RunError::Harness(format!("blocking task failed: {e}")))
}

/// Runs every phase. `config.schedule` must already be resolved and `config.json` saved.
/// The cluster is torn down before this returns, whatever happens after it was built.
pub async fn run(
    config: RunConfig,
    run_dir: RunDir,
    make_cluster: ClusterFactory,
    progress: Arc<Progress>,
) -> Result<RunOutcome, RunError> {
    let recorder = Recorder::create(&run_dir.history()).map_err(harness_err("history.jsonl"))?;
    progress.phase("setup", None);
    let (c, d) = (config.clone(), run_dir.clone());
    let cluster = blocking(move || make_cluster(&c, &d))
        .await?
        .map_err(RunError::Setup)?;
    say(
        &progress,
        &format!("cluster up: {}", describe_nodes(&*cluster)),
    );

    let phases = run_phases(&config, &run_dir, cluster.clone(), &recorder, &progress).await;

    progress.phase("teardown", None);
    let (c, d) = (cluster.clone(), run_dir.clone());
    let teardown = blocking(move || teardown(&*c, &d)).await?;
    let written = recorder.close().map_err(harness_err("history.jsonl"))?;
    say(
        &progress,
        &format!("history: {written} ops in {}", run_dir.history().display()),
    );
    if let Err(e) = teardown {
        say(&progress, &format!("teardown: {e}"));
    }
    let (recovered, coverage) = phases?;
    let final_reads = FinalReads::new(recovered, coverage);
    std::fs::write(
        run_dir.final_reads(),
        serde_json::to_string_pretty(&final_reads).expect("serializes") + "\n",
    )
    .map_err(harness_err("final-reads.json"))?;

    progress.phase("check", None);
    let results = check_run(&config, &run_dir, &final_reads)?;
    std::fs::write(
        run_dir.results(),
        serde_json::to_string_pretty(&results).expect("results serialize") + "\n",
    )
    .map_err(harness_err("results.json"))?;
    let report = render_report(&run_dir, &progress);
    progress.finish();
    Ok(RunOutcome {
        run_dir,
        results,
        recovered,
        final_reads,
        report,
    })
}

fn describe_nodes(cluster: &dyn Cluster) -> String {
    let kafka = cluster.kafka_bootstrap();
    if !kafka.is_empty() {
        // Apache Kafka: its brokers' Kafka listeners (the controller has none for clients).
        return kafka
            .iter()
            .map(|(name, address)| format!("{name}=kafka://{address}"))
            .collect::<Vec<_>>()
            .join(" ");
    }
    cluster
        .nodes()
        .iter()
        .map(|n| format!("{}={}", n.name, n.url()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Collects every node's logs into `nodes/<node>/`, then removes the cluster.
fn teardown(cluster: &dyn Cluster, run_dir: &RunDir) -> Result<(), String> {
    let mut errors = Vec::new();
    for node in cluster.node_names() {
        if let Err(e) = cluster.collect_logs(&node, &run_dir.nodes().join(&node)) {
            errors.push(format!("logs of {node}: {e}"));
        }
    }
    if let Err(e) = cluster.teardown() {
        errors.push(e.to_string());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The clients of a run: one for the brokers (the workload; it asks the controller for
/// metadata first), one for the controller alone (topic creation falls back to it), and the
/// workload client's config (the group workload's coordinator client uses it too).
fn clients(cluster: &dyn Cluster) -> (Arc<BrokerClient>, BrokerClient, ClientConfig) {
    let mut brokers = BTreeMap::new();
    let mut controller = BTreeMap::new();
    for n in cluster.nodes() {
        match n.role {
            crate::cluster::Role::Broker => brokers.insert(n.name.clone(), n.url()),
            crate::cluster::Role::Controller => controller.insert(n.name.clone(), n.url()),
        };
    }
    let workload = ClientConfig {
        controllers: controller.clone(),
        ..ClientConfig::new(brokers)
    };
    (
        Arc::new(BrokerClient::new(workload.clone())),
        BrokerClient::new(ClientConfig::new(controller)),
        workload,
    )
}

async fn run_phases(
    config: &RunConfig,
    run_dir: &RunDir,
    cluster: Arc<dyn Cluster>,
    recorder: &Arc<Recorder>,
    progress: &Arc<Progress>,
) -> Result<(bool, BTreeMap<String, KeyCoverage>), RunError> {
    let (client, controller, client_config) = clients(&*cluster);
    let kafka = kafka_client(config, &*cluster, &client, &client_config);
    // Apache Kafka (a `kind = "kafka"` cluster file) speaks nothing but Kafka's protocol: the
    // harness's own calls go through it too, and there is no `/v1/status` to sample.
    let real_kafka = kafka_admin(&*cluster);
    let keys = config.keys();
    match &real_kafka {
        Some(admin) => setup_kafka_topic(admin, config).await,
        None => setup_topic(&client, &controller, config).await,
    }
    .map_err(RunError::Setup)?;
    say(
        progress,
        &format!("topic {} ready: {}", config.topic, keys.join(" ")),
    );
    recorder.flush().map_err(harness_err("history.jsonl"))?;

    // Main phase: workers, sampler, nemesis and the progress ticker run side by side.
    let stop_workers = Arc::new(AtomicBool::new(false));
    let stop_background = Arc::new(AtomicBool::new(false));
    // On an early return (an I/O error on the history) the tasks must stop too.
    let _stop_guards = (
        StopOnDrop(stop_workers.clone()),
        StopOnDrop(stop_background.clone()),
    );
    let sampler = tokio::spawn({
        let (client, recorder, stop) = (client.clone(), recorder.clone(), stop_background.clone());
        let (nodes, path) = (cluster.broker_names(), run_dir.samples());
        let kafka_admin = real_kafka.as_ref().map(|_| kafka_admin(&*cluster));
        async move {
            match kafka_admin.flatten() {
                // Apache Kafka has no `/v1/status`: its Metadata instead.
                Some(admin) => sampler::run_kafka(admin, recorder, &path, stop).await,
                None => sampler::run(client, nodes, recorder, &path, stop).await,
            }
        }
    });
    let ticker = tokio::spawn(tick_progress(
        progress.clone(),
        recorder.clone(),
        stop_background.clone(),
    ));
    let time_limit = Duration::from_secs(config.time_limit_s);
    progress.phase("main", Some(time_limit));
    let deadline = Instant::now() + time_limit;
    let nemesis = faults::spawn(config, cluster.clone(), recorder.clone(), deadline)
        .map_err(RunError::Setup)?;
    let workers = if config.workload == "group" {
        let settings = GroupSettings::new(keys.clone(), &config.acks);
        let sink = Arc::new(RecorderSink {
            recorder: recorder.clone(),
            limiter: Arc::new(RateLimiter::new(config.rate)),
        });
        match &kafka {
            Some(kafka) => {
                let group =
                    KafkaGroupClient::new(kafka_bootstrap(&*cluster), &client_config, &settings);
                let ctx = group_context(kafka.clone(), group, settings, config, &stop_workers);
                spawn_group_workers(&ctx, sink, config.concurrency)
            }
            None => {
                let group = HttpGroupClient::new(&client_config, &settings);
                let ctx = group_context(client.clone(), group, settings, config, &stop_workers);
                spawn_group_workers(&ctx, sink, config.concurrency)
            }
        }
    } else {
        match &kafka {
            Some(kafka) => queue_workers(kafka.clone(), config, &keys, recorder, &stop_workers),
            None => queue_workers(client.clone(), config, &keys, recorder, &stop_workers),
        }
    };
    tokio::time::sleep_until(deadline).await;

    stop_workers.store(true, Ordering::Relaxed);
    let drained = tokio::time::timeout(WORKER_DRAIN_LIMIT, futures::future::join_all(workers))
        .await
        .is_ok();
    if !drained {
        say(
            progress,
            "some workers did not finish their last op in time",
        );
    }
    recorder.flush().map_err(harness_err("history.jsonl"))?;

    // The nemesis ends its plan at the deadline by itself; then heal, resume, start all.
    progress.phase("heal", None);
    match nemesis.finish().await {
        Ok(steps) => say(progress, &format!("nemesis: {steps} steps, then healed")),
        Err(e) => {
            say(progress, &format!("nemesis: {e}; healing again"));
            let healed =
                faults::final_step_without_plan(cluster.clone(), recorder.clone(), config.seed)
                    .await;
            if let Err(e) = healed {
                say(progress, &format!("heal: {e}"));
            }
        }
    }

    let recovery_limit = Duration::from_secs(config.recovery_time_limit_s);
    progress.phase("recovery", Some(recovery_limit));
    let recovered = match (&real_kafka, &kafka) {
        (Some(_), Some(kafka)) => wait_for_kafka_recovery(kafka, &keys, recovery_limit).await,
        _ => wait_for_recovery(&client, &keys, recovery_limit).await,
    };
    say(
        progress,
        &if recovered {
            "recovered: every partition has a leader that answers".to_string()
        } else {
            format!(
                "liveness: the cluster did not recover within {}s",
                config.recovery_time_limit_s
            )
        },
    );

    let final_limit = Duration::from_secs(config.final_time_limit_s);
    progress.phase("final-reads", Some(final_limit));
    let coverage = match &kafka {
        Some(kafka) => {
            final_reads::read_all(kafka.clone(), recorder.clone(), &keys, final_limit).await
        }
        None => final_reads::read_all(client.clone(), recorder.clone(), &keys, final_limit).await,
    };
    for (key, c) in &coverage {
        if !c.complete() {
            say(
                progress,
                &format!(
                    "final reads of {key} reached offset {} of {} within {}s",
                    c.reached, c.target, config.final_time_limit_s
                ),
            );
        }
    }
    stop_background.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    match sampler.await {
        Ok(Ok(lines)) => tracing::info!("samples: {lines} lines"),
        Ok(Err(e)) => say(progress, &format!("samples.jsonl: {e}")),
        Err(e) => say(progress, &format!("sampler task: {e}")),
    }
    recorder.flush().map_err(harness_err("history.jsonl"))?;
    Ok((recovered, coverage))
}

/// The group workload's context: produces and fetches on `queue`, coordinator calls on `group`.
fn group_context<C: QueueClient, G: GroupClient>(
    queue: Arc<C>,
    group: G,
    settings: GroupSettings,
    config: &RunConfig,
    stop: &Arc<AtomicBool>,
) -> GroupContext<C, G> {
    GroupContext {
        queue,
        group: Arc::new(group),
        settings: Arc::new(settings),
        seed: config.seed,
        values: ValueSource::default(),
        stop: stop.clone(),
    }
}

/// The queue workload's workers on `client`.
fn queue_workers<C: QueueClient>(
    client: Arc<C>,
    config: &RunConfig,
    keys: &[String],
    recorder: &Arc<Recorder>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let ctx = WorkloadContext {
        client,
        settings: Arc::new(QueueSettings::new(keys.to_vec(), &config.acks)),
        recorder: recorder.clone(),
        seed: config.seed,
        values: ValueSource::default(),
        rate_ops: config.rate,
        stop: stop.clone(),
    };
    spawn_workers(&ctx, config.concurrency)
}

/// With `--client kafka`, the workload's client over the brokers' Kafka listeners (the HTTP
/// client still tells when a partition's log has settled for the final reads).
fn kafka_client(
    config: &RunConfig,
    cluster: &dyn Cluster,
    http: &Arc<BrokerClient>,
    client_config: &ClientConfig,
) -> Option<Arc<KafkaQueueClient>> {
    if config.client != "kafka" {
        return None;
    }
    let settings = KafkaClientConfig {
        bootstrap: kafka_bootstrap(cluster),
        request_timeout_ms: client_config.request_timeout_ms,
        metadata_timeout_ms: client_config.metadata_timeout_ms,
    };
    // Only the companion broker can say when a log has settled (`/v1/status`).
    let settled = cluster.kafka_bootstrap().is_empty().then(|| http.clone());
    Some(Arc::new(KafkaQueueClient::new(settings, settled)))
}

/// `HOST:PORT` of every broker's Kafka listener: Apache Kafka's from the cluster file, the
/// companion broker's on the port after its HTTP port.
fn kafka_bootstrap(cluster: &dyn Cluster) -> Vec<String> {
    let kafka = cluster.kafka_bootstrap();
    if !kafka.is_empty() {
        return kafka.values().map(|a| a.to_string()).collect();
    }
    cluster
        .nodes()
        .iter()
        .filter(|n| n.role == crate::cluster::Role::Broker)
        .map(|n| n.kafka_address())
        .collect()
}

/// The harness's own Kafka-protocol calls on a cluster of Apache Kafka; `None` on the
/// companion broker, which the harness observes over HTTP.
fn kafka_admin(cluster: &dyn Cluster) -> Option<KafkaAdmin> {
    if cluster.kafka_bootstrap().is_empty() {
        return None;
    }
    Some(KafkaAdmin::new(
        kafka_bootstrap(cluster),
        Duration::from_millis(ClientConfig::new(BTreeMap::new()).request_timeout_ms),
    ))
}

/// [`setup_topic`] over Kafka's protocol: CreateTopics with the run's topic configs, then
/// Metadata until every partition has a leader, within [`SETUP_TIME_LIMIT`].
async fn setup_kafka_topic(admin: &KafkaAdmin, config: &RunConfig) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_TIME_LIMIT;
    let configs = config.topic_configs();
    let keys = config.keys();
    let mut created = false;
    let mut last_error = String::new();
    while Instant::now() < deadline {
        if !created {
            match admin
                .create_topic(
                    &config.topic,
                    config.partitions,
                    config.replication_factor,
                    &configs,
                )
                .await
            {
                Ok(()) => created = true,
                Err(e) => last_error = format!("{}: {}", e.cause.name(), e.message),
            }
        }
        if created {
            match admin.metadata().await {
                Ok(parts) => {
                    let led = keys
                        .iter()
                        .filter(|k| parts.iter().any(|p| &p.key == *k && p.leader.is_some()))
                        .count();
                    if led == keys.len() {
                        return Ok(());
                    }
                    last_error = format!("{led} of {} partitions have a leader", keys.len());
                }
                Err(e) => last_error = format!("metadata: {}", e.message),
            }
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    Err(format!("topic {}: {last_error}", config.topic))
}

/// [`wait_for_recovery`] over Kafka's protocol: every key's leader answers ListOffsets.
async fn wait_for_kafka_recovery(
    client: &KafkaQueueClient,
    keys: &[String],
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let answers = futures::future::join_all(keys.iter().map(|k| client.earliest(k))).await;
        if answers.iter().all(Result::is_ok) {
            return true;
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    false
}

/// Sets its flag when dropped: stops background tasks whichever way a phase ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn tick_progress(progress: Arc<Progress>, recorder: Arc<Recorder>, stop: Arc<AtomicBool>) {
    // A bar redraws often; plain lines every few seconds keep logs readable. Look at `stop`
    // every step so the run never waits for a whole plain-line interval at its end.
    let step = Duration::from_millis(250);
    let steps_per_update = if progress.is_bar() { 1 } else { 20 };
    let mut steps_left = steps_per_update;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(step).await;
        steps_left -= 1;
        if steps_left > 0 {
            continue;
        }
        steps_left = steps_per_update;
        let (ok, fail, info) = recorder.counts().snapshot();
        progress.update(&Snapshot {
            ok,
            fail,
            info,
            faults: recorder.faults_active(),
        });
    }
}

/// Creates the topic (retrying while brokers register) and waits until every partition has a
/// leader, within [`SETUP_TIME_LIMIT`].
async fn setup_topic(
    client: &BrokerClient,
    controller: &BrokerClient,
    config: &RunConfig,
) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_TIME_LIMIT;
    let configs = config.topic_configs();
    let mut last_error;
    loop {
        let created = match client
            .create_topic(
                &config.topic,
                config.partitions,
                config.replication_factor,
                &configs,
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(_) => {
                controller
                    .create_topic(
                        &config.topic,
                        config.partitions,
                        config.replication_factor,
                        &configs,
                    )
                    .await
            }
        };
        match created {
            Ok(()) => break,
            Err(e) => last_error = format!("{}: {}", e.cause.name(), e.message),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "could not create topic {}: {last_error}",
                config.topic
            ));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    let keys = config.keys();
    loop {
        match client.refresh_leaders().await {
            Ok(parts) => {
                let led: Vec<_> = parts.iter().filter(|p| p.leader.is_some()).collect();
                if keys.iter().all(|k| led.iter().any(|p| &p.key == k)) {
                    return Ok(());
                }
                last_error = format!("{} of {} partitions have a leader", led.len(), keys.len());
            }
            Err(e) => last_error = format!("metadata: {}", e.message),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "topic {} never got leaders: {last_error}",
                config.topic
            ));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Waits until every key has a leader that answers a list-offsets request.
async fn wait_for_recovery(client: &BrokerClient, keys: &[String], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if client.refresh_leaders().await.is_ok() {
            let answers =
                futures::future::join_all(keys.iter().map(|k| client.list_offset(k, "latest")))
                    .await;
            if answers.iter().all(Result::is_ok) {
                return true;
            }
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    false
}

/// The checkers' settings for a run: its acks and Kafka-style settings, its replication
/// factor, the faults it asked for, and whether the final reads completed.
pub fn check_settings(
    config: &RunConfig,
    final_reads_completed: bool,
) -> Result<CheckSettings, String> {
    let mut configs = config.sets.clone();
    configs
        .entry("replication.factor".into())
        .or_insert_with(|| config.replication_factor.to_string());
    let mut settings = CheckSettings::from_kafka_configs(&config.acks, &configs)?;
    settings.final_reads_completed = final_reads_completed;
    settings.faults_requested = faults::requested_faults(config);
    Ok(settings)
}

/// Checks a run's history, streamed from disk, and adds the final-read coverage to the stats.
pub fn check_run(
    config: &RunConfig,
    run_dir: &RunDir,
    final_reads: &FinalReads,
) -> Result<CheckResults, RunError> {
    let settings = check_settings(config, final_reads.completed).map_err(RunError::Harness)?;
    let mut results =
        checker::check_file(run_dir.history(), &settings).map_err(harness_err("history.jsonl"))?;
    if let Some(stats) = results.stats.as_object_mut() {
        stats.insert(
            "final_reads".into(),
            serde_json::to_value(final_reads).expect("serializes"),
        );
    }
    Ok(results)
}

/// How the final reads went, stored as `final-reads.json` so `tidewater check` can judge a
/// stored history the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FinalReads {
    /// True when the cluster recovered and every key was read up to its target.
    pub completed: bool,
    /// Per key: the offset to reach, the offset reached, and reads issued.
    pub by_key: BTreeMap<String, KeyCoverage>,
}

impl FinalReads {
    /// The summary of a run's final reads.
    pub fn new(recovered: bool, by_key: BTreeMap<String, KeyCoverage>) -> FinalReads {
        FinalReads {
            completed: recovered && by_key.values().all(KeyCoverage::complete),
            by_key,
        }
    }

    /// Reads `final-reads.json` of a run directory.
    pub fn load(run_dir: &RunDir) -> Option<FinalReads> {
        let text = std::fs::read_to_string(run_dir.final_reads()).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Renders `report.html` and the store's `index.html`; a failure is printed, not fatal (the
/// results are already on disk and `tidewater report RUN_DIR` can try again).
fn render_report(run_dir: &RunDir, progress: &Progress) -> Option<std::path::PathBuf> {
    let report = match tidewater_reports::render_run(&run_dir.path) {
        Ok(path) => Some(path),
        Err(e) => {
            say(progress, &format!("report: {e}"));
            None
        }
    };
    // The store is two levels up: store/<name>/<timestamp>.
    if let Some(store) = run_dir.path.parent().and_then(|p| p.parent()) {
        if let Err(e) = tidewater_reports::render_index(store) {
            say(progress, &format!("index: {e}"));
        }
    }
    report
}
