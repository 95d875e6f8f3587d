//! The phases of a run: setup (cluster, topic) -> main (workload + nemesis for the time
//! limit) -> heal -> wait for recovery (bounded) -> final reads -> teardown (node logs
//! collected) -> check -> report. One seed, stored in `config.json`, drives every random
//! choice; the fault schedule is resolved up front and stored too, so `--replay` repeats it.
//!
//! # Layout
//! - `config`: [`config::RunConfig`], the content of `config.json`.
//! - `workload`: worker tasks running the queue or the group workload under a rate limit.
//! - `sampler`: `samples.jsonl`, what the system under test says of its replicas every 500 ms.
//! - `final_reads`: reading every partition from its log start after recovery.
//! - `replica_logs`: then every replica's own log into `replicas.jsonl` (`replica-divergence`).
//! - `faults`: the bridge to the nemesis (schedule, running it, the final heal step).
//! - this file: [`run`], which builds the cluster, runs the phases against the system under
//!   test that [`crate::system::run_with`] chooses for it, and never leaves a cluster behind.
//!
//! No phase asks which system it runs against: each calls the [`System`] it is handed.

pub mod config;
pub mod faults;
pub mod final_reads;
pub mod replica_logs;
pub mod sampler;
pub mod workload;

use crate::cluster::Cluster;
use crate::progress::{Progress, Snapshot};
use crate::recorder::Recorder;
use crate::store::RunDir;
use crate::system::{self, System, PROBE_INTERVAL};
use config::RunConfig;
use final_reads::KeyCoverage;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::checker::{self, CheckSettings};
use tidewater_workloads::results::{CheckResults, Validity};
use tokio::time::Instant;
use workload::Workload;

/// Exit code when the cluster or topic could not be set up.
pub const EXIT_SETUP: i32 = 3;
/// Exit code when the cluster did not recover after heal within the bound (liveness).
pub const EXIT_LIVENESS: i32 = 4;
/// Exit code for any other harness error (I/O, a bug).
pub const EXIT_HARNESS: i32 = 5;

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
/// `java` is the compiled Java client's driver of a run over `--client java`.
pub async fn run(
    config: RunConfig,
    run_dir: RunDir,
    make_cluster: ClusterFactory,
    progress: Arc<Progress>,
    java: Option<crate::kafka::driver::Driver>,
) -> Result<RunOutcome, RunError> {
    let recorder = Recorder::create(&run_dir.history()).map_err(harness_err("history.jsonl"))?;
    progress.phase("setup", None);
    let (c, d) = (config.clone(), run_dir.clone());
    let cluster = blocking(move || make_cluster(&c, &d))
        .await?
        .map_err(RunError::Setup)?;
    let phases = RunPhases {
        config: &config,
        run_dir: &run_dir,
        cluster: cluster.clone(),
        recorder: &recorder,
        progress: &progress,
    };
    let java = match &java {
        Some(driver) => start_java_client(&config, &run_dir, &*cluster, driver)
            .await
            .map(Some),
        None => Ok(None),
    };
    let phases = match java {
        Ok(java) => {
            let phases = system::run_with(&*cluster, &config.client, java.clone(), phases).await;
            if let Some(java) = &java {
                java.driver().shutdown(JAVA_DRIVER_STOP_LIMIT).await;
            }
            phases
        }
        // Torn down below like any other run, its nodes' logs collected.
        Err(e) => Err(RunError::Setup(e)),
    };

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

/// Bound on the Java driver closing its clients and exiting at the end of a run.
const JAVA_DRIVER_STOP_LIMIT: Duration = Duration::from_secs(10);

/// Starts the Java client's driver against the cluster's Kafka listeners, its standard error
/// in `java-driver.log` of the run directory.
async fn start_java_client(
    config: &RunConfig,
    run_dir: &RunDir,
    cluster: &dyn Cluster,
    driver: &crate::kafka::driver::Driver,
) -> Result<Arc<tidewater_workloads::java::JavaQueueClient>, String> {
    use tidewater_workloads::java::{JavaClientSettings, JavaDriver, JavaQueueClient};
    let configs = config
        .java_client_configs()
        .ok_or("--client java without its settings")?;
    let transactional = configs.producer.contains_key("transactional.id");
    // Apache Kafka's listeners, or else the companion brokers' Kafka listeners.
    let kafka = cluster.kafka_bootstrap();
    let bootstrap = if kafka.is_empty() {
        cluster
            .nodes()
            .iter()
            .filter(|n| n.role == crate::cluster::Role::Broker)
            .map(|n| n.kafka_address())
            .collect()
    } else {
        kafka.values().map(|a| a.to_string()).collect()
    };
    let settings = JavaClientSettings { bootstrap, configs };
    let log = run_dir.path.join("java-driver.log");
    let process = JavaDriver::start(&driver.argv(), &settings, &log).await?;
    Ok(Arc::new(JavaQueueClient::new(
        Arc::new(process),
        transactional,
    )))
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

/// The phases between building the cluster and tearing it down, written once for every
/// system under test: setup of the topic, the main phase, heal, recovery and final reads.
/// They conclude whether the cluster recovered and how far the final reads got.
struct RunPhases<'a> {
    /// The run's settings.
    config: &'a RunConfig,
    /// Where `samples.jsonl` goes.
    run_dir: &'a RunDir,
    /// Node and network control, for the nemesis.
    cluster: Arc<dyn Cluster>,
    /// The history.
    recorder: &'a Arc<Recorder>,
    /// The user's display.
    progress: &'a Arc<Progress>,
}

impl system::Phases for RunPhases<'_> {
    type Output = Result<(bool, BTreeMap<String, KeyCoverage>), RunError>;

    async fn run<S: System>(self, system: Arc<S>) -> Self::Output {
        run_phases(
            self.config,
            self.run_dir,
            self.cluster,
            self.recorder,
            self.progress,
            system,
        )
        .await
    }
}

/// The phases against `system`; see [`RunPhases`].
async fn run_phases<S: System>(
    config: &RunConfig,
    run_dir: &RunDir,
    cluster: Arc<dyn Cluster>,
    recorder: &Arc<Recorder>,
    progress: &Arc<Progress>,
    system: Arc<S>,
) -> Result<(bool, BTreeMap<String, KeyCoverage>), RunError> {
    // The history's clock started before the cluster was built: its reading is how long the
    // cluster took to come up (docs/PERFORMANCE.md compares the systems by it).
    say(
        progress,
        &format!(
            "cluster up: {} (in {:.1} s)",
            system.describe_nodes(),
            recorder.now_ns() as f64 / 1e9
        ),
    );
    let topic = config.topic();
    let keys = &topic.keys;
    system.setup_topic(&topic).await.map_err(RunError::Setup)?;
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
        let (system, recorder, stop) = (system.clone(), recorder.clone(), stop_background.clone());
        let path = run_dir.samples();
        async move { sampler::run(system, recorder, &path, stop).await }
    });
    let ticker = tokio::spawn(tick_progress(
        progress.clone(),
        recorder.clone(),
        stop_background.clone(),
    ));
    let time_limit = Duration::from_secs(config.time_limit_s);
    progress.phase("main", Some(time_limit));
    let deadline = Instant::now() + time_limit;
    let nemesis = faults::spawn(
        config,
        cluster.clone(),
        system.view(),
        recorder.clone(),
        deadline,
    )
    .map_err(RunError::Setup)?;
    let workload = Workload {
        config,
        keys,
        recorder,
        stop: &stop_workers,
    };
    let workers = workload.start(
        system.queue(),
        |settings| system.group(settings),
        system.transactions(),
    );
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
            let healed = faults::final_step_without_plan(
                cluster.clone(),
                system.view(),
                recorder.clone(),
                config.seed,
            )
            .await;
            if let Err(e) = healed {
                say(progress, &format!("heal: {e}"));
            }
        }
    }

    let recovery_limit = Duration::from_secs(config.recovery_time_limit_s);
    progress.phase("recovery", Some(recovery_limit));
    let recovered = wait_for_recovery(&*system, keys, recovery_limit).await;
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
    let coverage = final_reads::read_all(
        system.queue(),
        system.clone(),
        recorder.clone(),
        keys,
        final_limit,
    )
    .await;
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
    progress.phase("replica-logs", Some(replica_logs::SETTLE_TIME_LIMIT));
    match replica_logs::read_all(&*system, keys).await {
        Ok(partitions) => {
            say(progress, &replica_logs::describe(&partitions));
            tidewater_workloads::replicas::write_file(&run_dir.replicas(), &partitions)
                .map_err(harness_err("replicas.jsonl"))?;
        }
        Err(e) => say(progress, &format!("replica logs not compared: {e}")),
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

/// Waits until every key has a leader that answers, probing every [`PROBE_INTERVAL`].
async fn wait_for_recovery<S: System>(system: &S, keys: &[String], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if system.leaders_answer(keys).await {
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

/// The checkers' settings for a run: its acks and Kafka-style settings, its replication
/// factor, the faults it asked for, and whether the final reads completed.
pub fn check_settings(
    config: &RunConfig,
    final_reads_completed: bool,
) -> Result<CheckSettings, String> {
    let mut configs = config.sets.clone();
    // The Java client's own settings (enable.idempotence, transactional.id,
    // isolation.level, ...) decide what duplicates and transactional reads mean.
    if let Some(java) = config.java_client_configs() {
        configs.extend(java.merged());
    }
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
        checker::check_file_with_replicas(run_dir.history(), &run_dir.replicas(), &settings)
            .map_err(harness_err("history.jsonl or replicas.jsonl"))?;
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
