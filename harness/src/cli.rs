//! The `tidewater` command line: `run`, `check`, `report`, `clean`, `serve`, `matrix` and
//! `detect`.
//!
//! Exit codes: 0 valid, 1 invalid, 2 unknown, 3 setup failed, 4 the cluster did not recover
//! after heal (liveness), 5 other harness errors; clap's usage errors exit with 2 as well,
//! with a message that names the bad flag, except a value that does not parse (3).

use crate::matrix::MatrixFile;
use crate::progress::Progress;
use crate::runner::config::RunConfig;
use crate::runner::{self, ClusterFactory, FinalReads, EXIT_HARNESS, EXIT_SETUP};
use crate::store::{self, RunDir};
use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use tidewater_reports::matrix::RunOutcome as MatrixOutcome;
use tidewater_workloads::checker::{self, CheckSettings};
use tidewater_workloads::results::CheckResults;

/// Tidewater: a Jepsen-style chaos harness for Kafka-style replicated logs.
///
/// `tidewater run` starts a controller and N brokers in network namespaces on this machine
/// (needs root), runs producers and consumers against them while injecting faults (process
/// kills, pauses, network partitions), heals, reads everything back, checks the history for
/// lost acknowledged writes and writes a run directory under `store/`.
#[derive(Debug, Parser)]
#[command(name = "tidewater", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
// Parsed once per process: the size of the largest variant (`run`'s flags) costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run a chaos test and check it (e.g. `tidewater run --time-limit 30`).
    Run(RunArgs),
    /// Check a stored history again, without rerunning the test.
    Check(CheckArgs),
    /// Render a run's report.html again.
    Report(ReportArgs),
    /// Remove what an interrupted run left behind (namespaces, bridge, rules, processes).
    Clean(CleanArgs),
    /// Browse the store in a browser: the index of runs and every run's files (read-only).
    Serve(ServeArgs),
    /// Run every combination of settings in a matrix file and compare them on one page
    /// (see docs/reports.md, "Matrix files"); the exit code says whether expectations held.
    Matrix(MatrixArgs),
    /// Run the broker's deliberate bugs (and the unmodified broker) under the random schedule
    /// and the shipped plans and write the detection table (see docs/detection.md).
    Detect(DetectArgs),
    /// Apache Kafka as the system under test: `tidewater kafka fetch` gathers a runnable
    /// release from Maven Central (see docs/real-kafka.md).
    #[command(subcommand)]
    Kafka(KafkaCommand),
    /// The lossy filesystem (mount, lose, sync, status), as the `tidewater-lossyfs` binary:
    /// for hosts that only have `tidewater` (see docs/lossyfs.md).
    #[command(subcommand)]
    Lossyfs(tidewater_lossyfs::cli::LossyfsCommand),
}

/// `tidewater kafka ...`.
#[derive(Debug, Subcommand)]
pub enum KafkaCommand {
    /// Gather a runnable Kafka (kafka_2.13, its runtime dependencies and a log4j2 binding)
    /// from Maven Central into the cache, unless it is there; prints its directory.
    Fetch(KafkaFetchArgs),
}

/// `tidewater kafka fetch`.
#[derive(Debug, Args)]
// `--version` names the Kafka version here, not tidewater's.
#[command(disable_version_flag = true)]
#[command(after_help = "\
Examples:
  tidewater kafka fetch                  # the default version
  tidewater kafka fetch --version 3.9.1  # the older system

Needs Maven (mvn) and a route to Maven Central; without them, unpack a release tarball and
give its directory to `tidewater run --system kafka --kafka-home DIR`. Exit codes: 0 fetched
(or already cached), 3 it could not be fetched.")]
pub struct KafkaFetchArgs {
    /// The Kafka version (X.Y.Z).
    #[arg(long, value_name = "X.Y.Z", default_value = crate::kafka::DEFAULT_VERSION)]
    pub version: String,
    /// The cache directory (default: ~/.cache/tidewater/kafka, or $XDG_CACHE_HOME's).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

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
    /// The workload: queue (producers and independent consumers) or group (producers and
    /// consumer groups that rebalance, commit and suffer consumer faults; see docs/groups.md).
    #[arg(long, value_name = "NAME", default_value = "queue", value_parser = ["queue", "group"])]
    pub workload: String,
    /// How the workload talks to the brokers: http (the companion broker's HTTP API) or kafka
    /// (Kafka's binary protocol through the rskafka client; acks=all only; see
    /// docs/kafka-protocol.md).
    #[arg(long, value_name = "NAME", default_value = "http", value_parser = ["http", "kafka"])]
    pub client: String,
    /// Number of concurrent client workers.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub concurrency: usize,
    /// Client operations per second over all workers (0 = as fast as possible).
    #[arg(long, value_name = "OPS", default_value_t = 100.0)]
    pub rate: f64,
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
    /// The system under test of the local cluster: tidewater (the companion broker), kafka
    /// (Apache Kafka, the default version) or kafka:X.Y.Z; Kafka implies --client kafka and
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

/// `tidewater check`.
#[derive(Debug, Args)]
#[command(after_help = "Exit codes: 0 valid, 1 invalid, 2 unknown, 5 unreadable history.")]
pub struct CheckArgs {
    /// The run directory (its config.json gives the settings; results.json is rewritten).
    #[arg(value_name = "RUN_DIR", required_unless_present = "history")]
    pub run_dir: Option<PathBuf>,
    /// Check this history file instead of a run directory (prints the results only).
    #[arg(long, value_name = "FILE", conflicts_with = "run_dir")]
    pub history: Option<PathBuf>,
    /// Acks of the run, for a bare history (decides whether lost writes are violations).
    #[arg(long, value_name = "ACKS", default_value = "all", value_parser = ["0", "1", "all"])]
    pub acks: String,
    /// Settings of the run, for a bare history (e.g. unclean.leader.election.enable=true).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub sets: Vec<(String, String)>,
    /// For a bare history: the final reads did not complete (unseen writes may be delayed).
    #[arg(long, requires = "history")]
    pub final_reads_incomplete: bool,
}

/// `tidewater matrix`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 every expectation held, 1 an expectation failed, \
2 runs errored, 3 a bad matrix file.",
    allow_negative_numbers = true
)]
pub struct MatrixArgs {
    /// The matrix file (TOML).
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// Directory of all runs; the matrix page goes to STORE/<matrix name>/matrix.html.
    #[arg(long, value_name = "DIR", default_value = "store")]
    pub store: PathBuf,
    /// The /24 subnet of the local cluster's bridge.
    #[arg(long, value_name = "A.B.C.0/24")]
    pub subnet: Option<String>,
    /// Run against the hosts of a cluster file over ssh (see docs/ssh.md).
    #[arg(long, value_name = "FILE", conflicts_with = "subnet")]
    pub cluster: Option<PathBuf>,
    /// Print plain log lines instead of a progress bar.
    #[arg(long)]
    pub plain: bool,
    /// Override the matrix file's `[run] time_limit_s` for every run (seconds), e.g. for a
    /// short night.
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<u64>,
    /// Run each cell once per seed, with these seeds (comma-separated), instead of
    /// `repetitions` runs with fresh random seeds: the same faults and choices every night.
    #[arg(long, value_name = "SEED,SEED,...", value_delimiter = ',')]
    pub seeds: Vec<u64>,
    /// This run is the night STAMP (`YYYYMMDDTHHMMSS`) of a nightly series: also write
    /// STORE/<name>/nights/STAMP/ with the night's matrix page, JUnit file, summary.json and
    /// summary.html (the changes since the previous night, regressions first); a regression
    /// makes the exit code 1.
    #[arg(long, value_name = "STAMP", value_parser = parse_night)]
    pub night: Option<String>,
}

/// A night's stamp: letters, digits, `-`, `_` and `.` only (it names a directory).
fn parse_night(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?}: a stamp such as 20261201T023000 (letters, digits, - _ .)"
        ))
    }
}

/// `tidewater detect`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  tidewater detect --bugs ack.before.replication --plans none --seeds 1 --time-limit 30
  tidewater detect --seeds 3   # every bug and none x random seeds 1..3 and every shipped plan

Every run: acks=all, min.insync.replicas=2, unclean.leader.election.enable=false (and
flush.messages=1 under power-loss-cluster), plus the bug's tidewater.bug.NAME.enable=true. Without --broker-bin the broker is built with the cargo
feature deliberate-bugs. Exit codes: 0 the table was written, 3 bad flags, 5 harness error.")]
#[command(allow_negative_numbers = true)]
pub struct DetectArgs {
    /// Bugs to run, comma-separated short names (see docs/detection.md); the unmodified broker
    /// (`none`) is always added.
    #[arg(long, value_name = "NAMES", default_value = "all")]
    pub bugs: String,
    /// Shipped plans to run (seed 1 each), comma-separated, `all` or `none`.
    #[arg(long, value_name = "NAMES", default_value = "all")]
    pub plans: String,
    /// Seeds of the random schedule: N of them, from --first-seed on.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub seeds: u64,
    /// The first seed of the random schedule's columns.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub first_seed: u64,
    /// Length of each run's main phase, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub time_limit: u64,
    /// Directory of all runs; the table goes to STORE/detect/detection.{md,json} unless --out.
    #[arg(long, value_name = "DIR", default_value = "store")]
    pub store: PathBuf,
    /// Markdown file of the table (the JSON goes beside it, .json). An existing JSON there is
    /// resumed: the runs it holds for planned cells are kept, not run again.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A `tidewater-broker` built with `--features deliberate-bugs` (default: build one).
    #[arg(long, value_name = "FILE")]
    pub broker_bin: Option<PathBuf>,
    /// The /24 subnet of the local cluster's bridge.
    #[arg(long, value_name = "A.B.C.0/24")]
    pub subnet: Option<String>,
    /// Leave out the unmodified broker's row (when another benchmark already measures it
    /// under the same columns).
    #[arg(long)]
    pub skip_none: bool,
    /// Print plain log lines instead of a progress bar.
    #[arg(long)]
    pub plain: bool,
}

/// `tidewater clean`.
#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Clean the hosts of this cluster file (Tidewater's iptables rules, brokers left
    /// running) instead of this machine's leftovers.
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
}

/// `tidewater serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory of all runs.
    #[arg(long, value_name = "DIR", default_value = "store")]
    pub store: PathBuf,
    /// Address to listen on (this machine only by default).
    #[arg(long, value_name = "ADDR:PORT", default_value = crate::serve::BIND_DEFAULT,
        value_parser = parse_bind)]
    pub bind: String,
}

/// `tidewater report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
}

/// Parses `--bind`: a host (or address) and a port from 0 to 65535, so that a typo is refused
/// as a setting (exit 3) instead of failing to listen (exit 5).
fn parse_bind(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(s.to_string()),
        _ => Err(format!(
            "{s:?}: expected ADDR:PORT with a port from 0 to 65535"
        )),
    }
}

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
        // Kafka speaks nothing else: --system kafka implies the Kafka-protocol client.
        let client = match system {
            crate::kafka::System::Kafka { .. } => "kafka".to_string(),
            crate::kafka::System::Tidewater => self.client.clone(),
        };
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
        };
        config.validate()?;
        Ok(config)
    }
}

/// The config `tidewater run --name NAME` would use: the base of matrix cells.
fn default_config(name: &str) -> RunConfig {
    let cli = Cli::try_parse_from(["tidewater", "run", "--name", name, "--seed", "0"])
        .expect("the default run flags parse");
    match cli.command {
        Command::Run(args) => args
            .to_config()
            .expect("the default run settings are valid"),
        _ => unreachable!("parsed a run command"),
    }
}

/// Parses the arguments and runs the command; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match cli.command {
        Command::Run(args) => run_command(args),
        Command::Check(args) => check_command(args),
        Command::Report(args) => report_command(&args.run_dir),
        Command::Clean(args) => clean_command(&args),
        Command::Serve(args) => serve_command(&args),
        Command::Matrix(args) => matrix_command(&args),
        Command::Detect(args) => detect_command(&args),
        Command::Kafka(KafkaCommand::Fetch(args)) => kafka_fetch_command(&args),
        Command::Lossyfs(command) => match tidewater_lossyfs::cli::run(command) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("tidewater lossyfs: {e}");
                EXIT_HARNESS
            }
        },
    }
}

/// Prints clap's message and gives the exit code: a value that does not parse as its flag's
/// type (`--time-limit -1`, `--rate fast`, `--set novalue`) is a refused setting (3), as an
/// out-of-range one is; other usage errors (an unknown flag, a value not among the choices)
/// keep clap's 2, and `--help` its 0.
fn usage_error(e: &clap::Error) -> i32 {
    let _ = e.print();
    match e.kind() {
        clap::error::ErrorKind::ValueValidation => EXIT_SETUP,
        _ => e.exit_code(),
    }
}

fn kafka_fetch_command(args: &KafkaFetchArgs) -> i32 {
    let cache = args
        .cache
        .clone()
        .unwrap_or_else(crate::kafka::fetch::default_cache_dir);
    match crate::kafka::fetch::fetch(&args.version, &cache) {
        Ok(release) => {
            println!("{}", release.home.display());
            0
        }
        Err(e) => {
            eprintln!("tidewater: {e}");
            EXIT_SETUP
        }
    }
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

/// Bound on Kafka's JVMs coming up (listening) after the local cluster starts them: a
/// start takes seconds on an idle machine, minutes on two cores shared with compilers.
const KAFKA_START_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(240);

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
                .wait_listening(KAFKA_START_TIME_LIMIT)
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

fn new_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Runtime::new() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("tidewater: cannot start the async runtime: {e}");
            None
        }
    }
}

fn run_command(args: RunArgs) -> i32 {
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
struct RunTarget {
    /// The store directory.
    store: PathBuf,
    /// The local cluster's subnet, if not the default.
    subnet: Option<String>,
    /// A cluster file: run on its hosts over ssh instead of locally.
    cluster: Option<PathBuf>,
    /// Log lines instead of a bar.
    plain: bool,
    /// An unpacked Kafka release for runs of `--system kafka` (else one is fetched).
    kafka_home: Option<PathBuf>,
}

impl RunTarget {
    /// What can be checked about the target before a run directory exists: the subnet (a
    /// private /24), the size of a local cluster and the cluster file (readable, with
    /// `--nodes` brokers). A refusal here leaves nothing behind, and `store/latest` still
    /// points at the last real run.
    fn preflight(&self, config: &RunConfig) -> Result<(), String> {
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
    fn runs_kafka(&self) -> bool {
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
fn record_interrupted(run_dir: &RunDir, sig: i32) {
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

/// Checks a run's `--set` with the broker's own schema before anything starts. With a
/// cluster file and no local `tidewater-broker` to ask, says so and leaves the check to the
/// hosts' brokers.
fn check_sets(config: &RunConfig, target: &RunTarget) -> Result<(), String> {
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
fn check_schedule(config: &RunConfig) -> Result<(), String> {
    let mut config = config.clone();
    config.apply_harness_defaults();
    runner::faults::resolve_schedule(&config).map(|_| ())
}

/// Runs one test from its config: resolves and prints the fault schedule, creates the run
/// directory, runs every phase and prints the summary whose last lines are the report path
/// and the verdict. Returns the exit code and the run directory (if one was created).
fn execute_run(
    mut config: RunConfig,
    target: &RunTarget,
    runtime: &tokio::runtime::Runtime,
) -> (i32, Option<RunDir>) {
    let progress = Arc::new(Progress::new(target.plain));
    // Resolve the fault schedule before anything starts, so it is printed and stored. A
    // replay (schedule already stored) keeps the settings it ran with.
    if config.schedule.is_null() {
        config.apply_harness_defaults();
        match runner::faults::resolve_schedule(&config) {
            Ok(s) => config.schedule = s,
            Err(e) => {
                eprintln!("tidewater: {e}");
                return (EXIT_SETUP, None);
            }
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

fn matrix_command(args: &MatrixArgs) -> i32 {
    let mut file = match MatrixFile::load(&args.file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tidewater: matrix {e}");
            return EXIT_SETUP;
        }
    };
    if let Some(limit) = args.time_limit {
        if limit > runner::config::TIME_LIMIT_MAX_S {
            eprintln!(
                "tidewater: --time-limit {limit} is longer than {} s (one week)",
                runner::config::TIME_LIMIT_MAX_S
            );
            return EXIT_SETUP;
        }
        let limit = i64::try_from(limit).expect("at most a week of seconds");
        file.run
            .insert("time_limit_s".into(), toml::Value::Integer(limit));
    }
    if !args.seeds.is_empty() {
        file.repetitions = args.seeds.len() as u32;
    }
    // Every cell's config and fault schedule (its plan exists and fits its time limit) is
    // checked before the first run, so a typo fails in seconds.
    let base = default_config(&file.name);
    let mut configs = Vec::new();
    for cell in file.cells() {
        let table = serde_json::to_value(cell.run_table(&file.run)).expect("TOML converts");
        let config = base
            .overlay(table.as_object().expect("a table is an object"))
            .and_then(|c| check_schedule(&c).map(|()| c));
        match config {
            Ok(c) => configs.push((cell.label.clone(), c)),
            Err(e) => {
                eprintln!("tidewater: matrix cell {}: {e}", cell.label);
                return EXIT_SETUP;
            }
        }
    }
    let target = RunTarget {
        store: args.store.clone(),
        subnet: args.subnet.clone(),
        cluster: args.cluster.clone(),
        plain: args.plain,
        kafka_home: None,
    };
    for (label, config) in &configs {
        if let Err(e) = target
            .preflight(config)
            .and_then(|()| check_sets(config, &target))
        {
            eprintln!("tidewater: matrix cell {label}: {e}");
            return EXIT_SETUP;
        }
    }
    // One look at every host before the first run: an unreachable cluster stops the matrix
    // with one message instead of erroring every run.
    if let Some(cluster) = &args.cluster {
        if let Err(e) = crate::cluster_file::preflight_cluster_file(cluster) {
            eprintln!(
                "tidewater: matrix not started: the cluster of {} is not ready: {e}",
                cluster.display()
            );
            return EXIT_SETUP;
        }
    }
    if let Err(e) = crate::cluster::local::guard::install_signal_handlers() {
        eprintln!("tidewater: cannot install signal handlers: {e}");
        return EXIT_HARNESS;
    }
    let Some(runtime) = new_runtime() else {
        return EXIT_HARNESS;
    };
    let out_dir = args.store.join(store::sanitize_name(&file.name));
    let result = crate::matrix::run_matrix(&file, &out_dir, |cell, repetition| {
        let (_, config) = configs
            .iter()
            .find(|(label, _)| *label == cell.label)
            .expect("every cell was planned");
        let mut config = config.clone();
        config.seed = match args.seeds.get(repetition as usize) {
            Some(seed) => *seed,
            None => rand::random(),
        };
        println!("matrix cell {} run {}", cell.label, repetition + 1);
        match execute_run(config, &target, &runtime) {
            // A verdict was reached (valid, invalid, unknown, or unknown with no recovery).
            (0 | 1 | 2 | runner::EXIT_LIVENESS, Some(dir)) => MatrixOutcome::Completed(dir.path),
            (code, dir) => MatrixOutcome::Errored {
                run_dir: dir.map(|d| d.path),
                error: format!("the run ended with exit code {code}"),
            },
        }
    });
    match result {
        Ok(run) => {
            println!("matrix page: {}", run.page.display());
            println!("junit: {}", run.junit.display());
            let mut code = run.exit_code();
            if let Some(night) = &args.night {
                match crate::matrix::write_night(&run, &out_dir, night) {
                    Ok(summary) => {
                        println!(
                            "night {night}: {} regression(s) since {}",
                            summary.regressions(),
                            summary.previous.as_deref().unwrap_or("no earlier night")
                        );
                        for change in &summary.changes {
                            let tag = if change.regression { "REGRESSION " } else { "" };
                            println!("  {tag}{}: {}", change.cell, change.what);
                        }
                        println!(
                            "night summary: {}",
                            out_dir
                                .join("nights")
                                .join(night)
                                .join("summary.json")
                                .display()
                        );
                        code = summary.exit_code;
                    }
                    Err(e) => {
                        eprintln!("tidewater: night summary: {e}");
                        return EXIT_HARNESS;
                    }
                }
            }
            if let Err(e) = tidewater_reports::render_index(&args.store) {
                eprintln!("tidewater: index: {e}");
            }
            code
        }
        Err(e) => {
            eprintln!("tidewater: matrix: {e}");
            EXIT_HARNESS
        }
    }
}

/// Splits a comma-separated list; `all` gives `all_names`, `none` nothing.
fn name_list(list: &str, all_names: &[String]) -> Vec<String> {
    match list.trim() {
        "all" => all_names.to_vec(),
        "none" => Vec::new(),
        other => other
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

/// The broker binary with the deliberate bugs: `--broker-bin`, or built with the feature and
/// copied under STORE/detect/ (cargo builds every feature set to the same path).
fn detect_broker_binary(args: &DetectArgs) -> Result<PathBuf, String> {
    if let Some(path) = &args.broker_bin {
        return if path.is_file() {
            Ok(path.clone())
        } else {
            Err(format!("--broker-bin {} is not a file", path.display()))
        };
    }
    let built = crate::cluster::local::build_broker_binary_with(false, &["deliberate-bugs"])
        .map_err(|e| e.to_string())?;
    let dir = args.store.join("detect");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let copy = dir.join("tidewater-broker-deliberate-bugs");
    std::fs::copy(&built, &copy).map_err(|e| format!("copy {}: {e}", built.display()))?;
    Ok(copy)
}

/// Refuses `detect`'s numbers before the broker is built: more seeds than runs a benchmark
/// may hold, seeds past `u64::MAX`, a time limit beyond a week.
fn check_detect_flags(args: &DetectArgs) -> Result<(), String> {
    let seeds_max = crate::detect::RUNS_MAX as u64;
    if args.seeds > seeds_max {
        return Err(format!(
            "--seeds {} is more than the {seeds_max} runs a benchmark holds",
            args.seeds
        ));
    }
    // The columns' seeds run from --first-seed to --first-seed + --seeds - 1.
    if args
        .first_seed
        .saturating_sub(1)
        .checked_add(args.seeds)
        .is_none()
    {
        return Err(format!(
            "--first-seed {} with --seeds {} runs past the largest seed",
            args.first_seed, args.seeds
        ));
    }
    let time_limit_max_s = runner::config::TIME_LIMIT_MAX_S;
    if args.time_limit > time_limit_max_s {
        return Err(format!(
            "--time-limit {} is longer than {time_limit_max_s} s (one week)",
            args.time_limit
        ));
    }
    Ok(())
}

fn detect_command(args: &DetectArgs) -> i32 {
    use crate::detect::{self, CellOutcome, DetectionTable};
    if let Err(e) = check_detect_flags(args) {
        eprintln!("tidewater: detect: {e}");
        return EXIT_SETUP;
    }
    let all_bugs: Vec<String> = detect::BUGS.iter().map(|b| b.to_string()).collect();
    let bugs = name_list(&args.bugs, &all_bugs);
    let plans = name_list(&args.plans, &detect::shipped_plans());
    let mut table = DetectionTable::plan(&bugs, &plans, args.seeds, args.time_limit);
    for column in table.columns.iter_mut().filter(|c| c.plan.is_none()) {
        column.seed += args.first_seed.saturating_sub(1);
    }
    if args.skip_none {
        table.bugs.retain(|b| b != detect::NO_BUG);
    }
    let binary = match detect_broker_binary(args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tidewater: detect: {e}");
            return EXIT_SETUP;
        }
    };
    println!("detect: broker {}", binary.display());
    // Every run of this process (and the --set check) uses this binary.
    std::env::set_var(crate::cluster::local::BROKER_BIN_ENV, &binary);
    let base = default_config("detect");
    let mut configs = Vec::new();
    for cell in table.cells() {
        let mut config = base.clone();
        config.name = cell.run_name();
        config.seed = cell.column.seed;
        config.time_limit_s = args.time_limit;
        config.plan = cell.column.plan.clone();
        config.sets = cell.sets();
        if let Err(e) = config.validate().and_then(|()| check_schedule(&config)) {
            eprintln!("tidewater: detect {}: {e}", cell.run_name());
            return EXIT_SETUP;
        }
        if let Err(e) = crate::broker_config::check_sets(&binary, &config.sets) {
            eprintln!("tidewater: detect {}: {e}", cell.run_name());
            return EXIT_SETUP;
        }
        configs.push((cell, config));
    }
    let target = RunTarget {
        store: args.store.clone(),
        subnet: args.subnet.clone(),
        cluster: None,
        plain: args.plain,
        kafka_home: None,
    };
    if let Err(e) = crate::cluster::local::guard::install_signal_handlers() {
        eprintln!("tidewater: cannot install signal handlers: {e}");
        return EXIT_HARNESS;
    }
    let Some(runtime) = new_runtime() else {
        return EXIT_HARNESS;
    };
    let markdown = args
        .out
        .clone()
        .unwrap_or_else(|| args.store.join("detect").join("detection.md"));
    let json = markdown.with_extension("json");
    // A table already at --out (an interrupted benchmark) is resumed: its runs are kept.
    if let Ok(text) = std::fs::read_to_string(&json) {
        match serde_json::from_str::<DetectionTable>(&text) {
            Ok(earlier) => table.resume_from(&earlier),
            Err(e) => {
                eprintln!(
                    "tidewater: detect: {} is not a detection table: {e}",
                    json.display()
                );
                return EXIT_SETUP;
            }
        }
    }
    let result = detect::run_detection(table, &markdown, &json, |cell| {
        let (_, config) = configs
            .iter()
            .find(|(c, _)| c == cell)
            .expect("every cell was planned");
        println!("detect: {} under {}", cell.bug, cell.column.label());
        match execute_run(config.clone(), &target, &runtime) {
            (0 | 1 | 2 | runner::EXIT_LIVENESS, Some(dir)) => {
                let results = std::fs::read_to_string(dir.results())
                    .map_err(|e| e.to_string())
                    .and_then(|t| {
                        serde_json::from_str::<CheckResults>(&t).map_err(|e| e.to_string())
                    });
                match results {
                    Ok(results) => CellOutcome::from_results(&results, &dir.path),
                    Err(e) => CellOutcome::Errored {
                        error: format!("results unreadable: {e}"),
                        run_dir: Some(dir.path),
                    },
                }
            }
            (code, dir) => CellOutcome::Errored {
                error: format!("the run ended with exit code {code}"),
                run_dir: dir.map(|d| d.path),
            },
        }
    });
    match result {
        Ok(table) => {
            println!("detection table: {}", markdown.display());
            println!("rerun: {}", table.reproduce_command(&args.store));
            0
        }
        Err(e) => {
            eprintln!("tidewater: detect: {e}");
            EXIT_HARNESS
        }
    }
}

/// The lines printed before a run: the seed first, then every derived parameter.
pub fn describe(config: &RunConfig, run_dir: &RunDir, target_flags: &str) -> Vec<String> {
    let mut lines = vec![format!("seed={}", config.seed)];
    lines.push(format!(
        "name={} time_limit_s={} nodes={} concurrency={} rate={} acks={} topic={} partitions={} \
         replication_factor={} recovery_time_limit_s={} final_time_limit_s={}",
        config.name,
        config.time_limit_s,
        config.nodes,
        config.concurrency,
        config.rate,
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
fn print_results(results: &CheckResults) {
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
    println!("{}", results.headline());
    println!(
        "promise: {} ({})",
        results.promise.as_str(),
        results.promise_reason
    );
}

fn check_command(args: CheckArgs) -> i32 {
    let flags: BTreeMap<String, String> = args.sets.iter().cloned().collect();
    let from_flags = |completed: bool| {
        let mut s = CheckSettings::from_kafka_configs(&args.acks, &flags)?;
        s.final_reads_completed = completed;
        Ok::<_, String>(s)
    };
    let (history, settings, run_dir) = match (&args.run_dir, &args.history) {
        (Some(dir), _) => {
            let dir = match RunDir::open(dir) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("tidewater: {e}");
                    return EXIT_HARNESS;
                }
            };
            // Without final-reads.json we cannot tell whether the reads completed: say not.
            let final_reads = FinalReads::load(&dir).unwrap_or_default();
            if dir.config().exists() {
                // A stored run: judge it exactly as the run itself did, or not at all.
                let config = match RunConfig::load(&dir.config()) {
                    Ok(config) => config,
                    Err(e) => {
                        eprintln!(
                            "tidewater: {} cannot be read, so the run's settings are unknown: {e}",
                            dir.config().display()
                        );
                        return EXIT_SETUP;
                    }
                };
                return match runner::check_run(&config, &dir, &final_reads) {
                    Ok(results) => finish_check(&results, Some(&dir)),
                    Err(e) => {
                        eprintln!("tidewater: {e}");
                        EXIT_HARNESS
                    }
                };
            }
            (dir.history(), from_flags(final_reads.completed), Some(dir))
        }
        (None, Some(h)) => (h.clone(), from_flags(!args.final_reads_incomplete), None),
        (None, None) => unreachable!("clap requires RUN_DIR or --history"),
    };
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tidewater: {e}");
            return EXIT_HARNESS;
        }
    };
    let results = match checker::check_file(&history, &settings) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tidewater: cannot read {}: {e}", history.display());
            return EXIT_HARNESS;
        }
    };
    finish_check(&results, run_dir.as_ref())
}

/// Prints the results, stores them in the run directory (if any) and returns the exit code.
fn finish_check(results: &CheckResults, run_dir: Option<&RunDir>) -> i32 {
    print_results(results);
    match run_dir {
        Some(dir) => {
            let text = serde_json::to_string_pretty(&results).expect("results serialize") + "\n";
            if let Err(e) = std::fs::write(dir.results(), text) {
                eprintln!("tidewater: cannot write {}: {e}", dir.results().display());
                return EXIT_HARNESS;
            }
            println!("results: {}", dir.results().display());
        }
        None => println!(
            "{}",
            serde_json::to_string_pretty(results).expect("results serialize")
        ),
    }
    println!("verdict: {}", results.valid.as_str());
    results.valid.exit_code()
}

fn report_command(run_dir: &Path) -> i32 {
    let dir = match RunDir::open(run_dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("tidewater: {e}");
            return EXIT_HARNESS;
        }
    };
    match tidewater_reports::render_run(&dir.path) {
        Ok(path) => {
            println!("report: {}", path.display());
            0
        }
        Err(e) => {
            eprintln!("tidewater: report of {}: {e}", dir.path.display());
            EXIT_HARNESS
        }
    }
}

fn serve_command(args: &ServeArgs) -> i32 {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tidewater: cannot start the async runtime: {e}");
            return EXIT_HARNESS;
        }
    };
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(&args.bind).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("tidewater: cannot listen on {}: {e}", args.bind);
                return EXIT_HARNESS;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        println!(
            "serving {} on http://{addr}/ (Ctrl-C stops)",
            args.store.display()
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match crate::serve::serve(&args.store, listener, shutdown).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("tidewater: serve {}: {e}", args.store.display());
                EXIT_HARNESS
            }
        }
    })
}

fn clean_command(args: &CleanArgs) -> i32 {
    if let Some(file) = &args.cluster {
        return match crate::cluster_file::clean_cluster_file(file) {
            Ok(()) => {
                println!("cleaned the hosts of {}", file.display());
                0
            }
            Err(e) => {
                eprintln!("tidewater: clean {}: {e}", file.display());
                EXIT_HARNESS
            }
        };
    }
    match crate::clean::clean_all() {
        Ok(report) => {
            println!(
                "cleaned {} run(s): {} process(es), {} namespace(s), {} link(s), {} lossy mount(s) removed",
                report.runs.len(),
                report.processes,
                report.namespaces,
                report.links,
                report.mounts
            );
            if !report.live.is_empty() {
                println!("skipped live run(s): {}", report.live.join(", "));
            }
            0
        }
        Err(e) => {
            eprintln!("tidewater: clean: {e}");
            EXIT_HARNESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn system_kafka_implies_the_kafka_client_and_is_local_only() {
        let parse = |args: &[&str]| {
            let mut all = vec!["tidewater", "run"];
            all.extend_from_slice(args);
            match Cli::try_parse_from(all).map(|c| c.command) {
                Ok(Command::Run(args)) => args.to_config(),
                Ok(_) => unreachable!("parsed a run command"),
                Err(e) => Err(e.to_string()),
            }
        };
        let config = parse(&["--system", "kafka", "--seed", "1"]).unwrap();
        assert_eq!(config.system, "kafka:4.1.1");
        assert_eq!(config.client, "kafka");
        let e = parse(&["--system", "kafka", "--acks", "1"]).unwrap_err();
        assert!(e.contains("acks=all only"), "{e}");
        let e = parse(&["--system", "kafka", "--cluster", "c.toml"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        assert_eq!(parse(&["--seed", "1"]).unwrap().system, "tidewater");
    }

    #[test]
    fn run_flags_become_a_config() {
        let cli = Cli::try_parse_from([
            "tidewater",
            "run",
            "--time-limit",
            "30",
            "--nodes",
            "5",
            "--nemesis",
            "kill,partition",
            "--seed",
            "7",
            "--acks",
            "1",
            "--set",
            "min.insync.replicas=2",
            "--set",
            "unclean.leader.election.enable=true",
            "--replication-factor",
            "3",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("expected run")
        };
        let c = args.to_config().unwrap();
        assert_eq!(c.seed, 7);
        assert_eq!(c.time_limit_s, 30);
        assert_eq!(c.nodes, 5);
        assert_eq!(c.nemesis, vec!["kill", "partition"]);
        assert_eq!(c.acks, "1");
        assert_eq!(c.sets["unclean.leader.election.enable"], "true");
        assert_eq!((c.workload.as_str(), c.name.as_str()), ("queue", "queue"));
    }

    #[test]
    fn a_group_run_is_named_after_its_workload_unless_named() {
        let config = |extra: &[&str]| {
            let mut argv = vec!["tidewater", "run", "--seed", "1", "--workload", "group"];
            argv.extend_from_slice(extra);
            let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("expected run")
            };
            args.to_config().unwrap()
        };
        let c = config(&[]);
        assert_eq!((c.workload.as_str(), c.name.as_str()), ("group", "group"));
        assert_eq!(config(&["--name", "g"]).name, "g");
        assert!(Cli::try_parse_from(["tidewater", "run", "--workload", "stream"]).is_err());
    }

    #[test]
    fn bad_flags_are_rejected_with_a_clear_error() {
        let err = Cli::try_parse_from(["tidewater", "run", "--acks", "2"]).unwrap_err();
        assert!(err.to_string().contains("--acks"), "{err}");
        let err = Cli::try_parse_from(["tidewater", "run", "--set", "novalue"]).unwrap_err();
        assert!(err.to_string().contains("KEY=VALUE"), "{err}");
        let err = Cli::try_parse_from(["tidewater", "run", "--frobnicate"]).unwrap_err();
        assert!(err.to_string().contains("--frobnicate"), "{err}");
        let cli = Cli::try_parse_from(["tidewater", "run", "--nemesis", "flood"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("expected run")
        };
        assert!(args.to_config().unwrap_err().contains("flood"));
    }

    #[test]
    fn matrix_cells_become_configs_over_the_run_defaults() {
        let file = MatrixFile::parse(
            r#"
name = "durability"
[run]
time_limit_s = 20
nemesis = ["kill"]
[axes]
acks = ["1", "all"]
"min.insync.replicas" = [2]
"#,
        )
        .unwrap();
        let base = default_config(&file.name);
        assert_eq!(base.concurrency, 10, "the run command's default");
        let cells = file.cells();
        let table = serde_json::to_value(cells[0].run_table(&file.run)).unwrap();
        let c = base.overlay(table.as_object().unwrap()).unwrap();
        assert_eq!(
            (c.name.as_str(), c.acks.as_str(), c.time_limit_s),
            ("durability", "1", 20)
        );
        assert_eq!(c.nemesis, vec!["kill"]);
        assert_eq!(c.sets["min.insync.replicas"], "2");
        assert_eq!(c.matrix_cell.as_deref(), Some(cells[0].label.as_str()));
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
    fn tidewater_lossyfs_embeds_the_lossyfs_command_line() {
        let cli = Cli::try_parse_from(["tidewater", "lossyfs", "lose", "/mnt/n1", "--torn", "3"])
            .unwrap();
        let Command::Lossyfs(tidewater_lossyfs::cli::LossyfsCommand::Lose { mountpoint, torn }) =
            cli.command
        else {
            panic!("expected lossyfs lose")
        };
        assert_eq!((mountpoint.to_str(), torn), (Some("/mnt/n1"), Some(3)));
    }

    #[test]
    fn nemesis_none_means_no_faults() {
        assert!(parse_nemesis("none").is_empty());
        assert_eq!(parse_nemesis("kill, pause"), vec!["kill", "pause"]);
    }

    #[test]
    fn replay_repeats_the_stored_settings_and_seed() {
        let dir = tempfile::tempdir().unwrap();
        let mut stored = crate::runner::config::example();
        stored.seed = 987;
        stored.schedule =
            serde_json::json!({"step": [{"at_s": 3, "action": "kill", "target": "n2"}]});
        stored.save(&dir.path().join("config.json")).unwrap();
        let path = dir.path().to_str().unwrap();
        let cli =
            Cli::try_parse_from(["tidewater", "run", "--replay", path, "--seed", "1"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("expected run")
        };
        let c = args.to_config().unwrap();
        assert_eq!(c.seed, 987);
        assert_eq!(c.schedule, stored.schedule);
        assert_eq!(c.replay_of.as_deref(), Some(path));
    }

    #[test]
    fn a_replay_checks_the_stored_settings_and_plan_as_flags_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        let replay = || {
            let cli = Cli::try_parse_from(["tidewater", "run", "--replay", path]).unwrap();
            let Command::Run(args) = cli.command else {
                panic!("expected run")
            };
            args.to_config()
        };
        let mut stored = crate::runner::config::example();
        stored.schedule = serde_json::json!({"step": [{"at_s": 1e300, "action": "heal"}]});
        stored.save(&dir.path().join("config.json")).unwrap();
        assert!(replay()
            .unwrap_err()
            .contains("step 1 (heal): at_s = 1e300"));
        stored.schedule = serde_json::json!({"step": [{"at_s": 3, "action": "heal"}]});
        stored.rate = -5.0;
        stored.save(&dir.path().join("config.json")).unwrap();
        assert!(replay().unwrap_err().contains("--rate -5 must be 0"));
        stored.rate = 5.0;
        stored.save(&dir.path().join("config.json")).unwrap();
        assert_eq!(replay().unwrap().rate, 5.0);
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
