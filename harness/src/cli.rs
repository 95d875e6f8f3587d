//! The `tidewater` command line: `run`, `check`, `report`, `clean`, `serve`, `matrix`,
//! `detect`, `shrink`, `kafka fetch` and `lossyfs`. The subcommands and their flags are declared here
//! or, for a command with a module of its own, beside its body there (`launch` for `run`,
//! `matrix`, `detect`, `shrink`, `serve`, `clean`); [`main`] dispatches to them.
//!
//! Exit codes: 0 valid, 1 invalid, 2 unknown, 3 setup failed, 4 the cluster did not recover
//! after heal (liveness), 5 other harness errors; clap's usage errors exit with 2 as well,
//! with a message that names the bad flag, except a value that does not parse (3).

use crate::clean::{clean_command, CleanArgs};
use crate::detect::{detect_command, DetectArgs};
use crate::launch::{parse_setting, print_results, run_command, RunArgs};
use crate::matrix::{matrix_command, MatrixArgs};
use crate::runner::config::RunConfig;
use crate::runner::{self, FinalReads, EXIT_HARNESS, EXIT_SETUP};
use crate::serve::{serve_command, ServeArgs};
use crate::shrink::{shrink_command, ShrinkArgs};
use crate::store::RunDir;
use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    /// From a failing run, a smaller fault plan (fewer steps, shorter, fewer nodes) that still
    /// shows the same anomaly in k of n reruns, written beside the run as shrunk-plan.toml
    /// (see docs/shrinking.md).
    Shrink(ShrinkArgs),
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

/// `tidewater report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
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
        Command::Shrink(args) => shrink_command(&args),
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
}
