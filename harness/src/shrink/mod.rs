//! `tidewater shrink RUN_DIR`: from a failing run, a smaller fault plan that still fails.
//!
//! The run's fault schedule as it ran (`config.json`'s resolved plan: a shipped plan, a plan
//! file or the random schedule of its seed) is rerun with the run's own settings (system,
//! workload, `--set`, bug switches, seed), then made smaller one change at a time: fewer steps
//! (delta debugging), shorter delays, fewer nodes per step, a shorter main phase. A candidate
//! is rerun up to n times and kept when the run's anomaly class shows in k of them. Beside the
//! run it writes `shrunk-plan.toml` (replayable with `tidewater run --plan`), `shrink.md` and
//! `shrink.json` (every attempt: what it changed, its reruns, how many showed the class, how
//! long it took), and `shrink/attempt-N.toml` (each candidate's plan, which its reruns name).
//!
//! - [`ddmin`]: delta debugging over a list, pure.
//! - [`reduce`]: the ways a plan gets smaller (steps kept with their times, delays halved,
//!   targets narrowed), pure.
//! - [`search`]: the phases over a [`search::Rerunner`] (the cluster, or a test's model).
//! - [`report`]: `shrink.md`, `shrink.json` and the terminal table.

pub mod ddmin;
pub mod reduce;
pub mod report;
pub mod search;

use crate::launch::{check_sets, execute_run, new_runtime, RunTarget};
use crate::runner::config::RunConfig;
use crate::runner::{self, EXIT_HARNESS, EXIT_SETUP};
use crate::store::RunDir;
use clap::Args;
use search::{Bounds, Candidate, Rerun, Rerunner, Search};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tidewater_workloads::results::{CheckResults, Validity};

/// The anomaly class kept by default when the run shows it.
pub const LOST_WRITE: &str = "lost-write";

/// Most reruns per candidate.
pub const RERUNS_MAX: usize = 100;
/// Most attempts of one search.
pub const ATTEMPTS_MAX: usize = 1000;

/// `tidewater shrink`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  tidewater shrink store/latest
  tidewater shrink store/queue/20261202T063000 --reruns 1 --need 1 --max-attempts 12
  tidewater shrink RUN_DIR --anomaly lost-write --time-limit 1800 --subnet 10.244.1.0/24

Phases: the run's schedule again (baseline), fewer steps (delta debugging), shorter delays,
fewer nodes per step, a shorter main phase. Writes RUN_DIR/shrunk-plan.toml, shrink.md,
shrink.json and shrink/attempt-N.toml; the reruns go to STORE/<name>-shrink/. Needs what
`tidewater run` needs (root for the local cluster). Exit codes: 0 a shrunk plan was written,
2 the run's schedule did not fail again in k of n reruns (nothing written but the report),
3 bad input or setup failed, 5 harness error. See docs/shrinking.md.")]
#[command(allow_negative_numbers = true)]
pub struct ShrinkArgs {
    /// The failing run's directory (its config.json, results.json and history.jsonl).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Reruns of each candidate (n).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub reruns: usize,
    /// Reruns that must show the anomaly class for a candidate to be kept (k of n).
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub need: usize,
    /// Most candidates to try, the baseline included.
    #[arg(long, value_name = "M", default_value_t = 30)]
    pub max_attempts: usize,
    /// Bound on the whole search, in seconds: no attempt starts after it.
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<u64>,
    /// The anomaly class to keep, or several comma-separated (a rerun fails when it shows any
    /// of them, e.g. lost-write,unseen for any lost acknowledged write); default: lost-write if
    /// the run lost acknowledged writes, else its invalidating anomaly with the most instances.
    #[arg(long, value_name = "NAME[,NAME..]")]
    pub anomaly: Option<String>,
    /// Directory of the reruns' run directories (default: the store RUN_DIR is in).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// The /24 subnet of the local cluster's bridge.
    #[arg(long, value_name = "A.B.C.0/24")]
    pub subnet: Option<String>,
    /// Rerun on the hosts of a cluster file instead of a local cluster.
    #[arg(long, value_name = "FILE", conflicts_with = "subnet")]
    pub cluster: Option<PathBuf>,
    /// An unpacked Kafka release, for a run of Apache Kafka.
    #[arg(long, value_name = "DIR")]
    pub kafka_home: Option<PathBuf>,
    /// A `tidewater-broker` to rerun with (one built with `--features deliberate-bugs` for a
    /// run with a bug switch on), instead of the workspace's.
    #[arg(long, value_name = "FILE")]
    pub broker_bin: Option<PathBuf>,
    /// Print plain log lines instead of a progress bar.
    #[arg(long)]
    pub plain: bool,
}

/// What a shrink starts from, read and checked before anything runs.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The run being shrunk.
    pub run_dir: PathBuf,
    /// Its settings; each rerun's config is this one with the candidate's plan.
    pub config: RunConfig,
    /// The anomaly classes to keep, as the reports name them (`lost-write`, or
    /// `lost-write,unseen` for either).
    pub class: String,
    /// The classes one by one: a rerun fails when it shows any of them.
    pub classes: Vec<String>,
    /// The classes of `--anomaly` the run did not show (a rerun that shows one fails all the
    /// same; named at the start, in case one is a typo).
    pub not_shown: Vec<String>,
    /// How many instances of them the run found.
    pub class_count: u64,
    /// Its schedule without the steps that could never start within its time limit.
    pub candidate: Candidate,
    /// How many steps the stored schedule had.
    pub stored_steps: usize,
}

/// The invalidating anomaly classes of a run, with their counts.
fn invalidating(results: &CheckResults) -> Vec<(String, u64)> {
    results
        .anomalies
        .iter()
        .filter(|(_, a)| a.invalidates && a.count > 0)
        .map(|(name, a)| (name.clone(), a.count))
        .collect()
}

/// Reads a failing run and refuses what cannot be shrunk, each with why: not a run
/// directory, a run that did not fail, a class it did not show, a schedule with no fault.
pub fn origin(run_dir: &Path, anomaly: Option<&str>) -> Result<Origin, String> {
    let dir = RunDir::open(run_dir).map_err(|e| e.to_string())?;
    let config = RunConfig::load(&dir.config())?;
    config
        .validate()
        .map_err(|e| format!("{}: {e}", dir.config().display()))?;
    let text = std::fs::read_to_string(dir.results()).map_err(|e| {
        format!(
            "{} has no results.json ({e}): check it first (`tidewater check {}`)",
            run_dir.display(),
            run_dir.display()
        )
    })?;
    let results: CheckResults =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", dir.results().display()))?;
    let classes = invalidating(&results);
    let names = || {
        classes
            .iter()
            .map(|(n, c)| format!("{n} ({c})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if results.valid != Validity::Invalid || classes.is_empty() {
        return Err(format!(
            "{} is {} with no invalidating anomaly: nothing failed, so there is nothing to \
             shrink",
            run_dir.display(),
            results.valid.as_str()
        ));
    }
    let chosen: Vec<(String, u64)> = match anomaly {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|name| {
                let count = classes
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0, |(_, c)| *c);
                (name.to_string(), count)
            })
            .collect(),
        // Lost acknowledged writes are every run's headline; else the most frequent class.
        None => vec![classes
            .iter()
            .find(|(n, _)| n == LOST_WRITE)
            .or_else(|| {
                classes
                    .iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            })
            .cloned()
            .expect("classes is not empty")],
    };
    if chosen.is_empty() {
        return Err(format!("--anomaly names no class; the run's: {}", names()));
    }
    if chosen.iter().all(|(_, count)| *count == 0) {
        return Err(format!(
            "--anomaly {}: the run showed none of them; its invalidating anomalies: {}",
            anomaly.unwrap_or_default(),
            names()
        ));
    }
    let not_shown: Vec<String> = chosen
        .iter()
        .filter(|(_, count)| *count == 0)
        .map(|(n, _)| n.clone())
        .collect();
    let class_names: Vec<String> = chosen.iter().map(|(n, _)| n.clone()).collect();
    let class_count = chosen.iter().map(|(_, c)| c).sum();
    if config.schedule.is_null() {
        return Err(format!(
            "{} stores no fault schedule: nothing to shrink",
            dir.config().display()
        ));
    }
    let stored = runner::faults::stored_plan(&config)
        .map_err(|e| format!("{}: {e}", dir.config().display()))?;
    let never_ran = stored.steps_after(config.time_limit_s as f64).len();
    let ran: Vec<usize> = (0..stored.step.len() - never_ran).collect();
    let (plan, _) = reduce::keep_steps(&stored, &ran);
    if plan.step.is_empty() {
        return Err(format!(
            "{}'s schedule injected no fault within its --time-limit {}: nothing to shrink",
            run_dir.display(),
            config.time_limit_s
        ));
    }
    Ok(Origin {
        run_dir: run_dir.to_path_buf(),
        candidate: Candidate {
            plan,
            time_limit_s: config.time_limit_s,
        },
        stored_steps: stored.step.len(),
        config,
        class: class_names.join(","),
        classes: class_names,
        not_shown,
        class_count,
    })
}

/// Refuses numbers that make no search: n and k out of order, no attempts, no time.
fn check_flags(args: &ShrinkArgs) -> Result<(), String> {
    if !(1..=RERUNS_MAX).contains(&args.reruns) {
        return Err(format!(
            "--reruns {} must be between 1 and {RERUNS_MAX}",
            args.reruns
        ));
    }
    if !(1..=args.reruns).contains(&args.need) {
        return Err(format!(
            "--need {} must be between 1 and --reruns {}",
            args.need, args.reruns
        ));
    }
    if !(1..=ATTEMPTS_MAX).contains(&args.max_attempts) {
        return Err(format!(
            "--max-attempts {} must be between 1 and {ATTEMPTS_MAX}",
            args.max_attempts
        ));
    }
    let week_s = runner::config::TIME_LIMIT_MAX_S;
    if let Some(t) = args.time_limit.filter(|t| *t == 0 || *t > week_s) {
        return Err(format!("--time-limit {t} must be between 1 and {week_s} s"));
    }
    if let Some(bin) = args.broker_bin.as_ref().filter(|b| !b.is_file()) {
        return Err(format!("--broker-bin {} is not a file", bin.display()));
    }
    Ok(())
}

/// The reruns on a real cluster, through `tidewater run`'s own path.
struct ClusterRerunner<'a> {
    origin: &'a Origin,
    target: RunTarget,
    runtime: tokio::runtime::Runtime,
    /// Where `shrink.md`, `shrink.json` and the attempts' plans go.
    out: report::Outputs,
    started: Instant,
}

impl ClusterRerunner<'_> {
    /// The config of a rerun: the run's own, with the candidate's plan and main phase.
    fn config(&self, candidate: &Candidate, plan_file: &Path) -> Result<RunConfig, String> {
        let mut config = self.origin.config.clone();
        config.name = format!("{}-shrink", self.origin.config.name);
        config.time_limit_s = candidate.time_limit_s;
        config.plan = Some(plan_file.display().to_string());
        config.nemesis = Vec::new();
        config.schedule =
            serde_json::to_value(&candidate.plan).map_err(|e| format!("fault plan: {e}"))?;
        config.replay_of = None;
        config.matrix_cell = None;
        config.validate()?;
        Ok(config)
    }
}

impl Rerunner for ClusterRerunner<'_> {
    fn rerun(
        &mut self,
        candidate: &Candidate,
        attempt: usize,
        rerun: usize,
    ) -> Result<Rerun, String> {
        let plan_file = self.out.write_attempt_plan(attempt, candidate)?;
        let config = self.config(candidate, &plan_file)?;
        println!(
            "shrink: attempt {attempt}, rerun {rerun} of at most {}: {}, --time-limit {}",
            self.out.reruns,
            report::steps_text(candidate.plan.step.len()),
            candidate.time_limit_s
        );
        let (code, dir) = execute_run(config, &self.target, &self.runtime);
        let dir = match (code, dir) {
            (0 | 1 | 2 | runner::EXIT_LIVENESS, Some(dir)) => dir,
            (code, dir) => {
                let at = dir
                    .map(|d| format!(" ({})", d.path.display()))
                    .unwrap_or_default();
                return Err(format!(
                    "attempt {attempt}: the rerun failed with exit {code}{at}"
                ));
            }
        };
        let results: CheckResults = std::fs::read_to_string(dir.results())
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| format!("{}: {e}", dir.results().display()))?;
        let class_count = invalidating(&results)
            .into_iter()
            .filter(|(n, _)| self.origin.classes.contains(n))
            .map(|(_, c)| c)
            .sum();
        Ok(Rerun {
            run_dir: dir.path.display().to_string(),
            exit_code: code,
            class_seen: class_count > 0,
            class_count,
            last_fault_s: report::last_fault_s(&dir.history(), candidate.time_limit_s),
        })
    }

    fn attempted(&mut self, search: &Search) {
        let a = search.attempts.last().expect("an attempt was made");
        println!(
            "shrink: attempt {} ({}): {}: {} of {} reruns showed {}{} ({:.0} s)",
            a.number,
            a.phase.name(),
            a.change,
            a.failed,
            a.reruns.len(),
            self.origin.class,
            if a.kept { ", kept" } else { "" },
            a.seconds
        );
        if let Err(e) = self.out.write(self.origin, search, self.started.elapsed()) {
            eprintln!("tidewater: shrink: {e}");
        }
    }
}

pub(crate) fn shrink_command(args: &ShrinkArgs) -> i32 {
    let refuse = |e: String| {
        eprintln!("tidewater: shrink: {e}");
        EXIT_SETUP
    };
    if let Err(e) = check_flags(args) {
        return refuse(e);
    }
    // `store/latest` moves to each rerun: resolve it once, so the outputs stay with the run.
    let run_dir = args
        .run_dir
        .canonicalize()
        .unwrap_or_else(|_| args.run_dir.clone());
    let origin = match origin(&run_dir, args.anomaly.as_deref()) {
        Ok(o) => o,
        Err(e) => return refuse(e),
    };
    if let Some(bin) = &args.broker_bin {
        // Every rerun of this process (and the --set check) uses this binary.
        std::env::set_var(crate::cluster::local::BROKER_BIN_ENV, bin);
    }
    let store = args.store.clone().unwrap_or_else(|| {
        run_dir
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| PathBuf::from("store"), Path::to_path_buf)
    });
    let target = RunTarget {
        store,
        subnet: args.subnet.clone(),
        cluster: args.cluster.clone(),
        plain: args.plain,
        kafka_home: args.kafka_home.clone(),
    };
    if let Err(e) = target
        .preflight(&origin.config)
        .and_then(|()| check_sets(&origin.config, &target))
    {
        return refuse(e);
    }
    if let Err(e) = crate::cluster::local::guard::install_signal_handlers() {
        eprintln!("tidewater: cannot install signal handlers: {e}");
        return EXIT_HARNESS;
    }
    let Some(runtime) = new_runtime() else {
        return EXIT_HARNESS;
    };
    let started = Instant::now();
    let bounds = Bounds {
        reruns: args.reruns,
        need: args.need,
        max_attempts: args.max_attempts,
        deadline: args.time_limit.map(|s| started + Duration::from_secs(s)),
    };
    println!(
        "shrink: {}: keeping {} (the run found {}); {}{}, --time-limit {}. {}",
        origin.run_dir.display(),
        origin.class,
        origin.class_count,
        report::steps_text(origin.candidate.plan.step.len()),
        match origin.stored_steps - origin.candidate.plan.step.len() {
            0 => String::new(),
            late => format!(" ({late} more never started before the time limit)"),
        },
        origin.candidate.time_limit_s,
        report::k_of_n(args.need, args.reruns)
    );
    if !origin.not_shown.is_empty() {
        println!(
            "shrink: note: the run did not show {}; a rerun that does fails as well",
            origin.not_shown.join(", ")
        );
    }
    let mut search = Search::new(origin.candidate.clone(), bounds);
    let mut rerunner = ClusterRerunner {
        origin: &origin,
        target,
        runtime,
        out: report::Outputs::new(&origin.run_dir, args.reruns, args.need),
        started,
    };
    let result = search.run(&mut rerunner);
    if let Err(e) = rerunner.out.write(&origin, &search, started.elapsed()) {
        eprintln!("tidewater: shrink: {e}");
        return EXIT_HARNESS;
    }
    print!("{}", report::terminal(&origin, &search));
    println!("shrink report: {}", rerunner.out.markdown().display());
    match result {
        Err(e) => {
            eprintln!("tidewater: shrink: {e}");
            EXIT_HARNESS
        }
        Ok(()) if !search.reproduced => 2,
        Ok(()) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tidewater_workloads::results::{Anomaly, Promise};

    fn write_run(dir: &Path, valid: Validity, anomalies: &[(&str, u64, bool)], plan: &str) {
        let mut config = crate::runner::config::example();
        config.plan = Some(plan.into());
        config.time_limit_s = 25;
        config.schedule = runner::faults::resolve_schedule(&config).unwrap();
        config.save(&dir.join("config.json")).unwrap();
        let anomalies: BTreeMap<String, Anomaly> = anomalies
            .iter()
            .map(|(name, count, invalidates)| {
                let a = Anomaly {
                    count: *count,
                    examples: Vec::new(),
                    invalidates: *invalidates,
                    breaks_promise: false,
                    note: String::new(),
                };
                (name.to_string(), a)
            })
            .collect();
        let results = CheckResults {
            valid,
            promise: Promise::Kept,
            promise_reason: String::new(),
            anomalies,
            stats: serde_json::json!({}),
        };
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string(&results).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn bad_input_is_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let e = origin(dir.path(), None).unwrap_err();
        assert!(e.contains("is not a run directory"), "{e}");

        write_run(
            dir.path(),
            Validity::Valid,
            &[("unseen", 3, false)],
            "unclean-election",
        );
        let e = origin(dir.path(), None).unwrap_err();
        assert!(e.contains("is valid with no invalidating anomaly"), "{e}");

        let classes = [
            ("lost-write", 12, true),
            ("duplicate", 40, true),
            ("unseen", 99, false),
        ];
        write_run(dir.path(), Validity::Invalid, &classes, "unclean-election");
        let e = origin(dir.path(), Some("unseen")).unwrap_err();
        assert!(
            e.contains("anomalies: duplicate (40), lost-write (12)"),
            "{e}"
        );
        let o = origin(dir.path(), None).unwrap();
        assert_eq!(
            (o.class.as_str(), o.class_count),
            ("lost-write", 12),
            "the headline"
        );
        let o = origin(dir.path(), Some("duplicate")).unwrap();
        assert_eq!((o.class.as_str(), o.class_count), ("duplicate", 40));
        let o = origin(dir.path(), Some("lost-write, duplicate")).unwrap();
        assert_eq!(
            (o.class.as_str(), o.class_count),
            ("lost-write,duplicate", 52)
        );
        assert_eq!(o.classes, vec!["lost-write", "duplicate"]);
        let o = origin(dir.path(), Some("lost-write,unseen")).unwrap();
        assert_eq!(
            (o.class_count, o.not_shown),
            (12, vec!["unseen".to_string()])
        );
        let e = origin(dir.path(), Some("unseen,unsen")).unwrap_err();
        assert!(
            e.contains("--anomaly unseen,unsen: the run showed none of them"),
            "{e}"
        );
        let e = origin(dir.path(), Some(",")).unwrap_err();
        assert!(e.contains("names no class"), "{e}");
        // The plan's last step (at 29 s at the earliest) never starts within --time-limit 25.
        assert_eq!((o.stored_steps, o.candidate.plan.step.len()), (7, 6));

        let classes = [("nonmonotonic-send", 7, true), ("duplicate", 40, true)];
        write_run(dir.path(), Validity::Invalid, &classes, "unclean-election");
        let o = origin(dir.path(), None).unwrap();
        assert_eq!(
            o.class, "duplicate",
            "without lost writes, the most instances"
        );

        let mut config = RunConfig::load(&dir.path().join("config.json")).unwrap();
        config.schedule = serde_json::json!({"step": []});
        config.save(&dir.path().join("config.json")).unwrap();
        let e = origin(dir.path(), None).unwrap_err();
        assert!(e.contains("injected no fault"), "{e}");
    }

    #[test]
    fn flags_out_of_order_are_refused() {
        let args = |extra: &[&str]| {
            use clap::Parser;
            let mut argv = vec!["tidewater", "shrink", "store/latest"];
            argv.extend_from_slice(extra);
            match crate::cli::Cli::try_parse_from(argv).unwrap().command {
                crate::cli::Command::Shrink(a) => a,
                _ => unreachable!("parsed a shrink command"),
            }
        };
        assert_eq!(check_flags(&args(&[])), Ok(()));
        let e = check_flags(&args(&["--reruns", "2", "--need", "3"])).unwrap_err();
        assert!(
            e.contains("--need 3 must be between 1 and --reruns 2"),
            "{e}"
        );
        let e = check_flags(&args(&["--reruns", "0"])).unwrap_err();
        assert!(e.contains("--reruns 0"), "{e}");
        let e = check_flags(&args(&["--max-attempts", "0"])).unwrap_err();
        assert!(e.contains("--max-attempts 0"), "{e}");
        let e = check_flags(&args(&["--time-limit", "0"])).unwrap_err();
        assert!(e.contains("--time-limit 0"), "{e}");
        let e = check_flags(&args(&["--broker-bin", "/no/such/broker"])).unwrap_err();
        assert!(e.contains("is not a file"), "{e}");
    }
}
