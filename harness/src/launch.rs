//! `tidewater run`: its flags, where a run executes (the local cluster, or the hosts of a
//! cluster file), and one run from its config to the printed verdict: the fault schedule
//! resolved and printed, the run directory, `harness.log`, every phase, the summary and the
//! command that reproduces it. `matrix` and `detect` launch each of their cells through
//! `execute_run`.

use crate::progress::Progress;
use crate::runner::config::RunConfig;
use crate::runner::{self, ClusterFactory, EXIT_HARNESS, EXIT_SETUP};
use crate::store::{self, RunDir};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use tidewater_workloads::results::CheckResults;

/// `tidewater run`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  tidewater run --time-limit 30
  tidewater run --nemesis partition --nemesis-interval 5 --acks all --set min.insync.replicas=2
  tidewater run --plan unclean-election --acks 1 --set unclean.leader.election.enable=true
  tidewater run --replay store/latest

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 setup failed, 4 no recovery after heal, 5 harness error.")]
// `--time-limit -1` is a bad value to refuse, not a flag named `-1`.
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// Length of the main phase (workload and faults), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub time_limit: u64,
    /// Number of brokers (a controller node is added).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub nodes: usize,
    /// Faults of the random schedule: a comma-separated list of families (kill, pause,
    /// partition) and fault kinds (isolate-leader, leader-cut, failback, isr-cascade,
    /// pause-leader, kill-isr, rolling-restart, ...; see docs/nemesis.md), or none.
    #[arg(long, value_name = "KINDS", default_value = "kill,pause,partition")]
    pub nemesis: String,
    /// Recovery gap between two faults of the random schedule, in seconds (drawn from 0.75 to
    /// 1.5 times this); fault lengths follow broker.session.timeout.ms and
    /// replica.lag.time.max.ms.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub nemesis_interval: f64,
    /// A fault plan instead of the random schedule: the name of a plan in harness/plans/
    /// (e.g. unclean-election, leader-isolation) or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    pub plan: Option<String>,
    /// Seed of every random choice (default: random, printed first).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// The workload: queue (producers and independent consumers), group (producers and
    /// consumer groups that rebalance, commit and suffer consumer faults; see docs/groups.md)
    /// or txn (Jepsen's transactions: sends and polls over several partitions committed or
    /// aborted as one, read_committed pollers; over --client java, which it implies; see
    /// docs/real-kafka.md, and docs/kafka-protocol.md for the companion broker).
    #[arg(long, value_name = "NAME", default_value = "queue", value_parser = ["queue", "group", "txn"])]
    pub workload: String,
    /// How the workload talks to the brokers: http (the companion broker's HTTP API), kafka
    /// (Kafka's binary protocol through the rskafka client; acks=all only; see
    /// docs/kafka-protocol.md) or java (Apache Kafka's own Java client, compiled into a
    /// driver against the release under test, or the default release against the companion
    /// broker: idempotence and transactions; implied by --workload txn and --idempotence).
    #[arg(long, value_name = "NAME", default_value = "http", value_parser = ["http", "kafka", "java"])]
    pub client: String,
    /// Idempotent producers for the queue workload (enable.idempotence=true; needs
    /// --client java and --acks all): the checker then counts every duplicate as a violation.
    #[arg(long)]
    pub idempotence: bool,
    /// With --workload txn: after commitTransaction (or abortTransaction) times out, call it
    /// again on the same producer, up to 3 calls in all, and go on with that producer into
    /// the next transaction, as Kafka's client allows and many applications do (the
    /// KAFKA-17754 attempt, docs/real-kafka.md). Each transaction's calls are in the history
    /// (`txn_end`); without the flag an unknown commit retires the producer.
    #[arg(long)]
    pub txn_retry_commit: bool,
    /// Number of concurrent client workers.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub concurrency: usize,
    /// Client operations per second over all workers (0 = as fast as possible).
    #[arg(long, value_name = "OPS", default_value_t = 100.0)]
    pub rate: f64,
    /// Share of the queue workload's rate and workers given to t0/0, the partition the
    /// faults aim at, so a fault meets writes in flight; the other partitions share the rest
    /// alike. 0: every partition alike. Queue workload only [default: 0.5]
    #[arg(long, value_name = "SHARE")]
    pub focus: Option<f64>,
    /// Producer acks: 0, 1 or all.
    #[arg(long, value_name = "ACKS", default_value = "all", value_parser = ["0", "1", "all"])]
    pub acks: String,
    /// Partitions of the test topic.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub partitions: u32,
    /// Replication factor of the test topic (at most --nodes).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub replication_factor: u32,
    /// A broker or topic setting in Kafka's names, repeatable
    /// (e.g. --set min.insync.replicas=2 --set unclean.leader.election.enable=true).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub sets: Vec<(String, String)>,
    /// Bound on waiting for the cluster to recover after heal, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub recovery_time_limit: u64,
    /// Bound on the final reads, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub final_time_limit: u64,
    /// Directory of all runs.
    #[arg(long, value_name = "DIR", default_value = "store")]
    pub store: PathBuf,
    /// Test name: runs go to STORE/NAME/<timestamp>/ (default: the workload's name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The /24 subnet of the local cluster's bridge (must be unused on this host).
    #[arg(long, value_name = "A.B.C.0/24")]
    pub subnet: Option<String>,
    /// Run against remote hosts over ssh instead of a local cluster (a cluster file such as
    /// vagrant/cluster.toml; see docs/ssh.md). --nodes must match its brokers.
    #[arg(long, value_name = "FILE", conflicts_with = "subnet")]
    pub cluster: Option<PathBuf>,
    /// Repeat a stored run: its settings, seed and fault schedule (other settings are ignored,
    /// except --store, --subnet, --cluster, --kafka-home and --plain).
    #[arg(long, value_name = "RUN_DIR")]
    pub replay: Option<PathBuf>,
    /// Print plain log lines instead of a progress bar, even on a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Mount a lossy filesystem (lossyfs) over every node's data directory, so unsynced
    /// writes can be lost. On by default when the plan or --nemesis cuts power; local
    /// clusters only.
    #[arg(long)]
    pub lossy_fs: bool,
    /// The system under test of the local cluster: tidewater (the companion broker; also
    /// spelled companion), kafka (Apache Kafka, the default version) or kafka:X.Y.Z; Kafka
    /// implies --client kafka and
    /// is fetched with Maven unless cached or given with --kafka-home (docs/real-kafka.md).
    #[arg(
        long,
        value_name = "SYSTEM",
        default_value = "tidewater",
        conflicts_with = "cluster"
    )]
    pub system: String,
    /// An unpacked Kafka release (the tarball's layout, with libs/) for --system kafka,
    /// instead of one fetched from Maven Central.
    #[arg(long, value_name = "DIR")]
    pub kafka_home: Option<PathBuf>,
}

/// The queue workload's `--focus` when none is given: half the writes go to the partition
/// the faults aim at, a quarter to each of the default run's two others
/// (docs/detection.md, "Writes aimed at the faulted partition").
pub const DEFAULT_FOCUS: f64 = 0.5;

/// Parses `key=value`.
pub fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// Parses `--nemesis`: `none` or a comma-separated list.
pub fn parse_nemesis(s: &str) -> Vec<String> {
    if s.trim() == "none" {
        return Vec::new();
    }
    s.split(',')
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

impl RunArgs {
    /// The run's config from the flags (or from the replayed run), with the seed chosen.
    pub fn to_config(&self) -> Result<RunConfig, String> {
        if let Some(dir) = &self.replay {
            let mut config =
                RunConfig::load(&RunDir::open(dir).map_err(|e| e.to_string())?.config())?;
            config.replay_of = Some(dir.display().to_string());
            // A config.json edited by hand (or by an older harness) meets the same checks as
            // flags do, its stored plan included, before anything is made.
            config.validate()?;
            if !config.schedule.is_null() {
                runner::faults::stored_plan(&config)?;
            }
            return Ok(config);
        }
        let system = crate::kafka::System::parse(&self.system)?;
        // Kafka speaks nothing else: --system kafka implies a Kafka-protocol client, the Java
        // one when asked for or when only it can run the workload (transactions, idempotence).
        let wants_java = self.client == "java" || self.workload == "txn" || self.idempotence;
        let client = match system {
            crate::kafka::System::Kafka { .. } if wants_java => "java".to_string(),
            crate::kafka::System::Kafka { .. } => "kafka".to_string(),
            // The companion broker's transactions are Kafka's: the Java client drives them.
            crate::kafka::System::Tidewater
                if (self.workload == "txn" || self.idempotence) && self.client == "http" =>
            {
                "java".to_string()
            }
            crate::kafka::System::Tidewater => self.client.clone(),
        };
        let java_client = (client == "java").then(|| {
            tidewater_workloads::java::ClientConfigs::for_run(
                &self.workload,
                &self.acks,
                self.idempotence,
            )
        });
        let config = RunConfig {
            name: self.name.clone().unwrap_or_else(|| self.workload.clone()),
            seed: self.seed.unwrap_or_else(rand::random),
            time_limit_s: self.time_limit,
            nodes: self.nodes,
            nemesis: parse_nemesis(&self.nemesis),
            nemesis_interval_s: self.nemesis_interval,
            plan: self.plan.clone(),
            workload: self.workload.clone(),
            client,
            concurrency: self.concurrency,
            rate: self.rate,
            focus: match (self.workload.as_str(), self.focus) {
                ("queue", focus) => focus.unwrap_or(DEFAULT_FOCUS),
                (_, None) => 0.0,
                (other, Some(_)) => {
                    return Err(format!(
                        "--focus is for the queue workload: --workload {other} chooses its \
                         partitions itself"
                    ))
                }
            },
            acks: self.acks.clone(),
            topic: "t0".into(),
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            sets: self.sets.iter().cloned().collect::<BTreeMap<_, _>>(),
            recovery_time_limit_s: self.recovery_time_limit,
            final_time_limit_s: self.final_time_limit,
            schedule: serde_json::Value::Null,
            replay_of: None,
            matrix_cell: None,
            harness_defaults: Vec::new(),
            lossy_fs: self.lossy_fs,
            system: system.as_flag(),
            idempotence: self.idempotence,
            txn_end_attempts_max: if self.txn_retry_commit {
                tidewater_workloads::txn::RETRY_END_ATTEMPTS_MAX
            } else {
                1
            },
            java_client,
        };
        config.validate()?;
        Ok(config)
    }
}

/// The config `tidewater run --name NAME` would use: the base of matrix cells. Parsed from
/// the run flags alone (their defaults live in [`RunArgs`]'s attributes), so that the
/// commands that launch cells need nothing of the command line above them.
pub(crate) fn default_config(name: &str) -> RunConfig {
    use clap::FromArgMatches;
    let matches = RunArgs::augment_args(clap::Command::new("run"))
        .try_get_matches_from(["run", "--name", name, "--seed", "0"])
        .expect("the default run flags parse");
    RunArgs::from_arg_matches(&matches)
        .expect("the default run flags parse")
        .to_config()
        .expect("the default run settings are valid")
}

/// A short id for the names the local cluster creates: 6 base-36 characters from the clock
/// and the process id, so concurrent runs on one host do not collide.
fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut n = nanos ^ (u64::from(std::process::id()) << 40);
    let mut id = String::new();
    for _ in 0..6 {
        id.push(char::from_digit((n % 36) as u32, 36).expect("digit below 36"));
        n /= 36;
    }
    id
}

/// The Kafka version of a run of Apache Kafka on the local cluster (`--system kafka:V`).
fn local_kafka_version(config: &RunConfig) -> Option<String> {
    match crate::kafka::System::parse(&config.system) {
        Ok(crate::kafka::System::Kafka { version }) => Some(version),
        _ => None,
    }
}

/// What the local cluster's nodes run: the companion broker, or Kafka's JVMs.
fn node_program(
    config: &RunConfig,
    kafka_home: Option<&Path>,
) -> Result<crate::cluster::local::NodeProgram, String> {
    use crate::cluster::local::{find_broker_binary, kafka::KafkaProgram, NodeProgram};
    let settings: Vec<(String, String)> = config.broker_settings().into_iter().collect();
    match local_kafka_version(config) {
        Some(version) => {
            let release = crate::kafka::release_for(&version, kafka_home)?;
            let program = KafkaProgram::new(release, &settings).map_err(|e| e.to_string())?;
            Ok(NodeProgram::Kafka(program))
        }
        None => {
            let binary = find_broker_binary().map_err(|e| e.to_string())?;
            Ok(NodeProgram::Broker { binary, settings })
        }
    }
}

/// The local-cluster factory for a run.
fn local_cluster(subnet: Option<String>, kafka_home: Option<PathBuf>) -> ClusterFactory {
    Box::new(move |config: &RunConfig, run_dir: &RunDir| {
        use crate::cluster::local::{LocalCluster, LocalSpec, NodeProgram};
        let program = node_program(config, kafka_home.as_deref())?;
        let kafka = matches!(program, NodeProgram::Kafka(_));
        let id = run_id();
        // Named in harness.log, so a leftover can be told apart from another run's.
        tracing::info!("local cluster {id}: namespaces tw-{id}-<node>, bridge tw{id}br");
        let mut spec = LocalSpec::new(id, run_dir.path.clone(), program);
        if kafka {
            // Kafka's controlled shutdown (SIGTERM) hands leaderships over first.
            spec.stop_timeout_ms = 10_000;
        }
        spec.brokers = config.nodes;
        spec.lossy_fs = config.lossy_fs || runner::faults::cuts_power(config);
        if let Some(s) = &subnet {
            spec.subnet = LocalSpec::parse_subnet(s).map_err(|e| e.to_string())?;
        }
        let cluster = LocalCluster::create(spec).map_err(|e| e.to_string())?;
        cluster.start_all().map_err(|e| e.to_string())?;
        if kafka {
            cluster
                .wait_listening(crate::kafka::START_TIME_LIMIT)
                .map_err(|e| e.to_string())?;
        }
        Ok(Arc::new(cluster) as Arc<dyn crate::cluster::Cluster>)
    })
}

/// The `harness.log` that `tracing` output currently goes to (one per run; a matrix runs
/// several in one process, so the file is swapped rather than fixed at start).
static LOG_FILE: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// Writes to [`LOG_FILE`], or nowhere between runs.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG_FILE.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(f) => f.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match LOG_FILE.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// Sends `tracing` output to `harness.log` in the run directory.
fn log_to(path: &Path) {
    *LOG_FILE.lock().unwrap_or_else(|p| p.into_inner()) = std::fs::File::create(path).ok();
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_writer(|| LogWriter)
            .with_ansi(false)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("TIDEWATER_LOG")
                    // fuser warns on every xattr lookup the lossy filesystem does not serve.
                    .unwrap_or_else(|_| "info,fuser=error".into()),
            )
            .try_init();
    });
}

pub(crate) fn new_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Runtime::new() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("tidewater: cannot start the async runtime: {e}");
            None
        }
    }
}

pub(crate) fn run_command(args: RunArgs) -> i32 {
    let config = match args.to_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tidewater: {e}");
            return EXIT_SETUP;
        }
    };
    let target = RunTarget {
        store: args.store.clone(),
        subnet: args.subnet.clone(),
        cluster: args.cluster.clone(),
        plain: args.plain,
        kafka_home: args.kafka_home.clone(),
    };
    if let Err(e) = crate::cluster::local::guard::install_signal_handlers() {
        eprintln!("tidewater: cannot install signal handlers: {e}");
        return EXIT_HARNESS;
    }
    let Some(runtime) = new_runtime() else {
        return EXIT_HARNESS;
    };
    execute_run(config, &target, &runtime).0
}

/// Where and how runs execute: shared by `run` and `matrix`.
pub(crate) struct RunTarget {
    /// The store directory.
    pub(crate) store: PathBuf,
    /// The local cluster's subnet, if not the default.
    pub(crate) subnet: Option<String>,
    /// A cluster file: run on its hosts over ssh instead of locally.
    pub(crate) cluster: Option<PathBuf>,
    /// Log lines instead of a bar.
    pub(crate) plain: bool,
    /// An unpacked Kafka release for runs of `--system kafka` (else one is fetched).
    pub(crate) kafka_home: Option<PathBuf>,
}

impl RunTarget {
    /// What can be checked about the target before a run directory exists: the subnet (a
    /// private /24), the size of a local cluster and the cluster file (readable, with
    /// `--nodes` brokers). A refusal here leaves nothing behind, and `store/latest` still
    /// points at the last real run.
    pub(crate) fn preflight(&self, config: &RunConfig) -> Result<(), String> {
        let brokers_max = crate::cluster::local::BROKERS_MAX;
        if self.cluster.is_none() && config.nodes > brokers_max {
            return Err(format!(
                "--nodes {}: a local cluster holds 1 to {brokers_max} brokers on its /24",
                config.nodes
            ));
        }
        if let Some(subnet) = &self.subnet {
            crate::cluster::local::LocalSpec::parse_subnet(subnet).map_err(|e| e.to_string())?;
        }
        if let Some(file) = &self.cluster {
            let brokers = crate::cluster_file::brokers_in(file)
                .map_err(|e| format!("cluster file {}: {e}", file.display()))?;
            if brokers != config.nodes {
                return Err(format!(
                    "cluster file {} lists {brokers} brokers but the run asks for {} (--nodes)",
                    file.display(),
                    config.nodes
                ));
            }
            crate::cluster_file::check_run(file, &config.sets, &config.client)?;
        }
        if let Some(version) = local_kafka_version(config) {
            if self.cluster.is_some() {
                return Err(format!(
                    "--system {} runs Kafka on the local cluster; with --cluster the cluster \
                     file's kind says what the hosts run (docs/real-kafka.md)",
                    config.system
                ));
            }
            crate::kafka::properties::check_sets(&config.sets)?;
            // Fetched now, so a machine that cannot gets its one message before any run
            // directory exists; the cluster factory finds it in the cache.
            crate::kafka::release_for(&version, self.kafka_home.as_deref())?;
        }
        Ok(())
    }

    /// Whether the run's hosts run Apache Kafka (a cluster file with `kind = "kafka"`).
    pub(crate) fn runs_kafka(&self) -> bool {
        self.cluster.as_ref().is_some_and(|file| {
            crate::cluster_file::load(file)
                .is_ok_and(|s| s.kind == crate::cluster::ssh::Kind::Kafka)
        })
    }

    /// The flags that select this target, for the reproduce command.
    fn flags(&self) -> String {
        match (&self.cluster, &self.subnet) {
            (Some(file), _) => format!(" --cluster {}", file.display()),
            (None, Some(subnet)) => format!(" --subnet {subnet}"),
            (None, None) => String::new(),
        }
    }
}

/// After a signal interrupted a run (and the cluster was torn down): marks its results
/// `unknown` with the reason, unless it was already checked, updates the store's index and
/// prints where the run directory is.
pub(crate) fn record_interrupted(run_dir: &RunDir, sig: i32) {
    if !run_dir.results().exists() {
        let reason = format!(
            "the run was interrupted by signal {sig} before it was checked; its history up to then \
             is in history.jsonl (`tidewater check` can judge it, without final reads)"
        );
        let results = CheckResults {
            valid: tidewater_workloads::results::Validity::Unknown,
            promise: tidewater_workloads::results::Promise::Unknown,
            promise_reason: reason.clone(),
            anomalies: BTreeMap::new(),
            stats: serde_json::json!({"unknown_reasons": [reason], "interrupted_by_signal": sig}),
        };
        let text = serde_json::to_string_pretty(&results).expect("results serialize") + "\n";
        if let Err(e) = std::fs::write(run_dir.results(), text) {
            eprintln!(
                "tidewater: cannot write {}: {e}",
                run_dir.results().display()
            );
        }
    }
    if let Some(store) = run_dir.path.parent().and_then(|p| p.parent()) {
        if let Err(e) = tidewater_reports::render_index(store) {
            eprintln!("tidewater: index: {e}");
        }
    }
    eprintln!("tidewater: run directory: {}", run_dir.path.display());
}

/// The Java client's driver of a run over `--client java`, compiled (or found in the cache)
/// against the kafka-clients jar of the run's Kafka release, before anything starts.
fn java_driver(
    config: &RunConfig,
    target: &RunTarget,
) -> Result<Option<crate::kafka::driver::Driver>, String> {
    if config.client != "java" {
        return Ok(None);
    }
    // Against the companion broker, the client of the default Kafka release.
    let version =
        local_kafka_version(config).unwrap_or_else(|| crate::kafka::DEFAULT_VERSION.to_string());
    let release = crate::kafka::release_for(&version, target.kafka_home.as_deref())?;
    let driver = crate::kafka::driver::Driver::prepare(
        &release,
        &crate::kafka::driver::default_cache_dir(),
    )?;
    Ok(Some(driver))
}

/// Checks a run's `--set` with the broker's own schema before anything starts. With a
/// cluster file and no local `tidewater-broker` to ask, says so and leaves the check to the
/// hosts' brokers.
pub(crate) fn check_sets(config: &RunConfig, target: &RunTarget) -> Result<(), String> {
    // Kafka's hosts were checked against Kafka's names in the target's preflight.
    if config.sets.is_empty() || target.runs_kafka() || local_kafka_version(config).is_some() {
        return Ok(());
    }
    let binary = match crate::cluster::local::find_broker_binary() {
        Ok(binary) => binary,
        Err(e) if target.cluster.is_some() => {
            eprintln!("tidewater: --set not checked before the run ({e}); the hosts' brokers will");
            return Ok(());
        }
        Err(e) => return Err(e.to_string()),
    };
    crate::broker_config::check_sets(&binary, &config.sets).map(|_| ())
}

/// Resolves a planned run's fault schedule (its plan, or the random schedule of its seed) and
/// drops it: a matrix or detection cell whose plan is missing or cannot fit its time limit is
/// refused before the first run, as `tidewater run` refuses it before its run directory.
pub(crate) fn check_schedule(config: &RunConfig) -> Result<(), String> {
    let mut config = config.clone();
    config.apply_harness_defaults();
    runner::faults::resolve_schedule(&config).map(|_| ())
}

/// Runs one test from its config: resolves and prints the fault schedule, creates the run
/// directory, runs every phase and prints the summary whose last lines are the report path
/// and the verdict. Returns the exit code and the run directory (if one was created).
/// Fills in the harness's default settings and resolves the fault schedule: the config a
/// new run stores (`tidewater matrix --resume` compares stored runs with it).
pub(crate) fn resolve(config: &mut RunConfig) -> Result<(), String> {
    config.apply_harness_defaults();
    config.schedule = runner::faults::resolve_schedule(config)?;
    Ok(())
}

pub(crate) fn execute_run(
    mut config: RunConfig,
    target: &RunTarget,
    runtime: &tokio::runtime::Runtime,
) -> (i32, Option<RunDir>) {
    let progress = Arc::new(Progress::new(target.plain));
    // Resolve the fault schedule before anything starts, so it is printed and stored. A
    // replay (schedule already stored) keeps the settings it ran with.
    if config.schedule.is_null() {
        if let Err(e) = resolve(&mut config) {
            eprintln!("tidewater: {e}");
            return (EXIT_SETUP, None);
        }
    }
    // The seed comes first, before anything else prints (a broker build, a warning).
    progress.println(&format!("seed={}", config.seed));
    if let Err(e) = target
        .preflight(&config)
        .and_then(|()| check_sets(&config, target))
    {
        eprintln!("tidewater: {e}");
        return (EXIT_SETUP, None);
    }
    let java = match java_driver(&config, target) {
        Ok(java) => java,
        Err(e) => {
            eprintln!("tidewater: {e}");
            return (EXIT_SETUP, None);
        }
    };
    if let Some(warning) = runner::faults::schedule_warning(&config) {
        eprintln!("tidewater: warning: {warning}");
    }
    let run_dir = match store::create_run_dir(&target.store, &config.name, SystemTime::now()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "tidewater: cannot create the run directory in {}: {e}",
                target.store.display()
            );
            return (EXIT_HARNESS, None);
        }
    };
    log_to(&run_dir.harness_log());
    let interrupted_dir = run_dir.clone();
    crate::cluster::guard::set_on_interrupt(Some(Box::new(move |sig| {
        record_interrupted(&interrupted_dir, sig)
    })));
    let target_flags = target.flags();
    for (i, line) in describe(&config, &run_dir, &target_flags)
        .iter()
        .enumerate()
    {
        if i == 0 {
            tracing::info!("{line}"); // the seed, already printed
        } else {
            runner::say(&progress, line);
        }
    }
    if let Err(e) = config.save(&run_dir.config()) {
        eprintln!("tidewater: cannot write config.json: {e}");
        return (EXIT_HARNESS, Some(run_dir));
    }
    let factory = match &target.cluster {
        Some(file) => crate::cluster_file::cluster_factory(file.clone()),
        None => local_cluster(target.subnet.clone(), target.kafka_home.clone()),
    };
    let result = runtime.block_on(runner::run(
        config.clone(),
        run_dir.clone(),
        factory,
        progress.clone(),
        java,
    ));
    progress.finish();
    let reproduce = format!(
        "reproduce: {}{target_flags}  (or: {}{target_flags})",
        config.command_line(),
        RunConfig::replay_command(&run_dir.path)
    );
    let code = match result {
        Ok(outcome) => {
            print_results(&outcome.results);
            println!("{reproduce}");
            println!("run directory: {}", run_dir.path.display());
            match &outcome.report {
                Some(r) => println!("report: {}", r.display()),
                None => println!(
                    "report: not rendered (results: {})",
                    run_dir.results().display()
                ),
            }
            let code = outcome.exit_code();
            if !outcome.recovered {
                println!("liveness: the cluster did not recover after heal (exit {code})");
            }
            println!("verdict: {}", outcome.results.valid.as_str());
            tracing::info!("verdict {} exit {code}", outcome.results.valid.as_str());
            code
        }
        Err(e) => {
            eprintln!("tidewater: {e}");
            tracing::error!("{e}");
            println!("{reproduce}");
            println!("run directory: {}", run_dir.path.display());
            println!("verdict: none ({e})");
            e.exit_code()
        }
    };
    (code, Some(run_dir))
}

/// The lines printed before a run: the seed first, then every derived parameter.
pub fn describe(config: &RunConfig, run_dir: &RunDir, target_flags: &str) -> Vec<String> {
    let mut lines = vec![format!("seed={}", config.seed)];
    lines.push(format!(
        "name={} time_limit_s={} nodes={} concurrency={} rate={} focus={} acks={} topic={} \
         partitions={} replication_factor={} recovery_time_limit_s={} final_time_limit_s={}",
        config.name,
        config.time_limit_s,
        config.nodes,
        config.concurrency,
        config.rate,
        config.focus,
        config.acks,
        config.topic,
        config.partitions,
        config.replication_factor,
        config.recovery_time_limit_s,
        config.final_time_limit_s
    ));
    match &config.plan {
        Some(p) => lines.push(format!("plan={p}")),
        None => lines.push(format!(
            "nemesis={} nemesis_interval_s={}",
            if config.nemesis.is_empty() {
                "none".to_string()
            } else {
                config.nemesis.join(",")
            },
            config.nemesis_interval_s
        )),
    }
    for (k, v) in &config.sets {
        let harness_default = runner::config::HARNESS_DEFAULT_SETTINGS
            .iter()
            .any(|(name, value, _)| name == k && value == v);
        let note = if harness_default {
            " (harness default)"
        } else {
            ""
        };
        lines.push(format!("set {k}={v}{note}"));
    }
    let client = tidewater_workloads::client::ClientConfig::new(BTreeMap::new());
    if config.client == "kafka" {
        lines.push(format!(
            "client kafka (rskafka over the brokers' Kafka listeners): acks=all, one request \
             per op, request_timeout_ms={}",
            client.request_timeout_ms
        ));
    }
    if let Some(java) = config.java_client_configs() {
        let text = |m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        lines.push(format!(
            "client java (Kafka's Java client of the release under test, through the driver; \
             the harness's own calls below): producer {} consumer {}",
            text(&java.producer),
            text(&java.consumer)
        ));
    }
    if config.workload == "txn" {
        lines.push(if config.txn_end_attempts_max > 1 {
            format!(
                "txn end: commitTransaction/abortTransaction called again after a timeout, on \
                 the same producer, up to {} calls (--txn-retry-commit; each in the history's \
                 txn_end)",
                config.txn_end_attempts_max
            )
        } else {
            "txn end: one call; an unknown commit retires the producer".to_string()
        });
    }
    lines.push(format!(
        "client request_timeout_ms={} produce_timeout_ms={} metadata_timeout_ms={} \
         connect_timeout_ms={} retries={}",
        client.request_timeout_ms,
        client.produce_timeout_ms,
        client.metadata_timeout_ms,
        client.connect_timeout_ms,
        client.retries
    ));
    lines.push(format!("fault schedule: {}", config.schedule));
    if let Some(r) = &config.replay_of {
        lines.push(format!("replaying {r}"));
    }
    lines.push(format!("run directory: {}", run_dir.path.display()));
    lines.push(format!(
        "reproduce: {}{target_flags}",
        config.command_line()
    ));
    lines
}

/// Prints the anomalies, then the headline figures: what was lost, the verdict (a fact) and
/// the promise (a judgement of the settings).
pub(crate) fn print_results(results: &CheckResults) {
    for (name, a) in &results.anomalies {
        let kind = match (a.breaks_promise, a.invalidates) {
            (true, _) => "BREAKS THE PROMISE",
            (false, true) => "allowed by these settings",
            (false, false) => "reported",
        };
        println!("anomaly {name}: {} ({kind}) {}", a.count, a.note);
        for e in a.examples.iter().take(3) {
            println!("  e.g. {e}");
        }
    }
    if results.anomalies.is_empty() {
        println!("no anomalies");
    }
    println!("{}", replicas_line(&results.stats["replica_logs"]));
    println!("{}", results.headline());
    println!(
        "promise: {} ({})",
        results.promise.as_str(),
        results.promise_reason
    );
}

/// What the comparison of the replicas' own logs found, in one line: how many offsets differ
/// below the high watermark (`replica-divergence`) and above it, over how many partitions.
fn replicas_line(stats: &serde_json::Value) -> String {
    if stats["compared"] != true {
        let why = stats["reason"].as_str().unwrap_or("not in the results");
        return format!("replicas: not compared ({why})");
    }
    let partitions = stats["partitions"].as_array().map_or(0, Vec::len);
    let unsettled = stats["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["settled"] != true)
        .count();
    let mut line = format!(
        "replicas: {partitions} partitions compared offset by offset; {} offsets differ below the high watermark among the ISR, {} only outside it, {} above it",
        stats["divergent_below_hw"], stats["divergent_below_hw_outside_isr"], stats["divergent_above_hw"]
    );
    if unsettled > 0 {
        line.push_str(&format!(" ({unsettled} not settled when read)"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_s_run_args_parse_back_into_the_same_config() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let mut config = crate::runner::config::example();
        config
            .sets
            .insert("tidewater.bug.no.epoch.bump.enable".into(), "true".into());
        config.lossy_fs = true;
        for plan in [None, Some("leader-isolation".to_string())] {
            config.plan = plan;
            let args = config.run_args();
            let back = Cli::parse_from(std::iter::once("run".to_string()).chain(args.clone()))
                .run
                .to_config()
                .unwrap();
            assert_eq!(back.run_args(), args);
            assert_eq!(
                (back.seed, &back.sets, &back.plan, back.lossy_fs),
                (config.seed, &config.sets, &config.plan, true)
            );
            if config.plan.is_none() {
                // A plan replaces the random schedule: its nemesis list is not a flag then.
                assert_eq!(back.nemesis, config.nemesis);
            }
        }
    }

    #[test]
    fn an_ssh_cluster_that_cuts_power_is_checked_like_any_other() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster.toml");
        std::fs::write(&file, "not even read").unwrap();
        let target = RunTarget {
            store: dir.path().join("store"),
            subnet: None,
            cluster: Some(file),
            plain: true,
            kafka_home: None,
        };
        let mut config = crate::runner::config::example();
        config.plan = Some("power-loss-leader".into());
        // The ssh backend mounts lossyfs on the hosts: what gets checked is the cluster file.
        let e = target.preflight(&config).unwrap_err();
        assert!(e.contains("TOML parse error"), "{e}");
        config.plan = None;
        config.nemesis = vec!["kill".into()];
        config.lossy_fs = true;
        let e = target.preflight(&config).unwrap_err();
        assert!(e.contains("TOML parse error"), "{e}");
        assert!(!dir.path().join("store").exists(), "nothing was created");
    }

    #[test]
    fn a_kafka_cluster_is_refused_with_the_http_client_before_anything_starts() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kafka.toml");
        let mut text = String::from("kind = \"kafka\"\n");
        for (i, name) in ["c1", "n1", "n2", "n3"].iter().enumerate() {
            text.push_str(&format!(
                "[[node]]\nname = \"{name}\"\nhost = \"{name}\"\nip = \"10.224.0.{}\"\n",
                10 + i
            ));
        }
        std::fs::write(&file, text).unwrap();
        let target = RunTarget {
            store: dir.path().join("store"),
            subnet: None,
            cluster: Some(file),
            plain: true,
            kafka_home: None,
        };
        let mut config = crate::runner::config::example();
        config.apply_harness_defaults();
        let e = target.preflight(&config).unwrap_err();
        assert!(e.contains("--client kafka"), "{e}");
        config.sets.insert(
            "tidewater.unsafe.truncate.to.hw.enable".into(),
            "true".into(),
        );
        let e = target.preflight(&config).unwrap_err();
        assert!(e.contains("Kafka has no equivalent"), "{e}");
        assert!(target.runs_kafka());
        // With the Kafka client and settings Kafka has, the run may go ahead.
        config.sets.remove("tidewater.unsafe.truncate.to.hw.enable");
        config.client = "kafka".into();
        assert_eq!(target.preflight(&config), Ok(()));
        assert!(!dir.path().join("store").exists(), "nothing was created");
    }

    #[test]
    fn nemesis_none_means_no_faults() {
        assert!(parse_nemesis("none").is_empty());
        assert_eq!(parse_nemesis("kill, pause"), vec!["kill", "pause"]);
    }

    #[test]
    fn describe_prints_the_seed_first() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = RunDir {
            path: dir.path().to_path_buf(),
        };
        let lines = describe(
            &crate::runner::config::example(),
            &run_dir,
            " --subnet 10.1.2.0/24",
        );
        assert_eq!(lines[0], "seed=42");
        assert!(lines
            .iter()
            .any(|l| l.starts_with("reproduce: tidewater run")));
    }
}
