//! `tidewater matrix FILE.toml`: run every combination of settings (a cell) a number of
//! times, then compare the cells on one page and tell CI whether each cell's expectation held.
//!
//! The matrix file (see docs/reports.md, "Matrix files"):
//!
//! ```toml
//! name = "durability"
//! repetitions = 2
//!
//! [run]                 # flags shared by every run, by RunConfig's field names
//! time_limit_s = 60
//! plan = "leader-isolation"
//!
//! [axes]                # every combination becomes a cell
//! acks = ["1", "all"]
//! "min.insync.replicas" = [1, 2]
//! "unclean.leader.election.enable" = [false, true]
//!
//! [[expect]]            # applies to every cell whose settings match `when`
//! when = { acks = "all", "min.insync.replicas" = 2, "unclean.leader.election.enable" = false }
//! description = "no lost acknowledged write"
//! lost_writes_max = 0
//! ```
//!
//! Axes named `acks`, `plan`, `nemesis`, `client` or `system` change the run itself
//! ([`CellPlan::run`]); every other axis is a broker or topic setting ([`CellPlan::sets`],
//! like `--set`). `system` is the system under test, as `tidewater run --system` takes it:
//! `companion` (or `tidewater`), `kafka:4.1.1`, `kafka:3.9.1`, ...; a Kafka cell runs the
//! Kafka-protocol client, as `--system kafka` implies, so a matrix comparing systems
//! compares their brokers under one client when its `[run]` sets `client = "kafka"`. This
//! module
//! plans the cells and, given a function that runs one, summarises them with
//! `tidewater_reports::pages::matrix` and writes `matrix.html` and `junit.xml`. The command
//! (`matrix_command`, with its flags [`MatrixArgs`]) runs each cell as `tidewater run` would,
//! through `crate::launch::execute_run`.

use crate::launch::RunTarget;
use crate::launch::{check_schedule, check_sets, default_config, execute_run, new_runtime};
use crate::runner::config::RunConfig;
use crate::runner::{self, EXIT_HARNESS, EXIT_SETUP};
use crate::store;
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tidewater_reports::pages::matrix::{
    junit_xml, render_matrix, summarize_matrix, CellInput, Expectation, MatrixInput, MatrixSummary,
    RunOutcome,
};
use tidewater_reports::pages::night::{night_summary, previous_night, NightSummary, NIGHTS_DIR};
use tidewater_reports::ReportError;

/// Cells per matrix at most: each costs `repetitions` full runs.
pub const CELLS_MAX: usize = 256;
/// Repetitions per cell at most.
pub const REPETITIONS_MAX: u32 = 100;
/// Axes that change the run rather than the broker or topic configuration.
pub const RUN_AXES: [&str; 5] = ["acks", "plan", "nemesis", "client", "system"];

/// The axis that names the system under test (the matrix page sets the systems side by side).
pub use tidewater_reports::pages::matrix::SYSTEM_AXIS;

/// The `plan` axis value of cells that run the random schedule (`[run]`'s `nemesis`) rather
/// than a fault plan.
pub const RANDOM_PLAN: &str = "random";

/// The key naming a profile: an axis value that is a table of settings varied together.
pub const PROFILE_NAME: &str = "name";
/// The JUnit file written beside `matrix.html`.
pub const JUNIT_FILE: &str = "junit.xml";

/// One `[[expect]]` rule of a matrix file.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectRule {
    /// Settings a cell must have for the rule to apply (all of them; empty: every cell).
    #[serde(default)]
    pub when: BTreeMap<String, toml::Value>,
    /// The expectation in words.
    #[serde(default)]
    pub description: String,
    /// Lost acknowledged writes allowed over the cell's runs.
    pub lost_writes_max: Option<u64>,
    /// High-watermark regressions allowed over the cell's runs.
    pub hw_regressions_max: Option<u64>,
    /// Anomalies that must not occur in any run of the cell.
    #[serde(default)]
    pub forbidden_anomalies: Vec<String>,
    /// Lowest share of ok sends, 0.0 to 1.0.
    pub availability_min: Option<f64>,
    /// Every run must be valid (a fact about its history: nothing lost, no anomaly).
    #[serde(default)]
    pub all_valid: bool,
    /// Every run must keep Kafka's promise under its settings (losses they allow are fine).
    #[serde(default)]
    pub promise_kept: bool,
}

/// A parsed matrix file.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    /// The matrix's name: test names of its runs and the title of its page.
    pub name: String,
    /// Runs per cell.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Run settings shared by every cell (RunConfig field names), passed to the runner.
    #[serde(default)]
    pub run: toml::Table,
    /// Setting name -> the values to try.
    pub axes: BTreeMap<String, Vec<toml::Value>>,
    /// Expectations, by the cells they apply to.
    #[serde(default)]
    pub expect: Vec<ExpectRule>,
}

fn one() -> u32 {
    1
}

/// One cell: a combination of axis values, and what its runs must show.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPlan {
    /// `name=value` of every axis, space-separated: unique in the matrix, used as the
    /// `matrix_cell` of its runs' config.json (the index draws a trend per cell).
    pub label: String,
    /// Every axis value of the cell, as text.
    pub settings: BTreeMap<String, String>,
    /// Overrides of run settings (`acks`, `plan`, `nemesis`, `client`), as text.
    pub run: BTreeMap<String, String>,
    /// Broker and topic settings (`--set key=value`).
    pub sets: BTreeMap<String, String>,
    /// The combined expectation of every rule that applies.
    pub expectation: Expectation,
}

impl CellPlan {
    /// The run settings of this cell: `base` (the matrix's `[run]` table) with the cell's
    /// run axes (`acks`, `plan`, `nemesis` as a list split at commas, `system` as `--system`
    /// writes it, with the Kafka client for Kafka), its broker and topic settings merged into
    /// `sets`, and `matrix_cell` set to the label. Field names are RunConfig's, so the runner
    /// can fill in its defaults and deserialize.
    pub fn run_table(&self, base: &toml::Table) -> toml::Table {
        let mut table = base.clone();
        for (k, v) in &self.run {
            if k == "plan" && v == RANDOM_PLAN {
                table.remove("plan");
                continue;
            }
            let value = if k == SYSTEM_AXIS {
                match crate::kafka::System::parse(v) {
                    Ok(system @ crate::kafka::System::Kafka { .. }) => {
                        // Kafka speaks nothing else (`--system kafka` implies it too).
                        table.insert("client".into(), toml::Value::String("kafka".into()));
                        toml::Value::String(system.as_flag())
                    }
                    Ok(system) => toml::Value::String(system.as_flag()),
                    // Refused by the run's own check, with the value named.
                    Err(_) => toml::Value::String(v.clone()),
                }
            } else if k == "nemesis" {
                let kinds = v
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty() && *k != "none");
                toml::Value::Array(kinds.map(|k| toml::Value::String(k.to_string())).collect())
            } else {
                toml::Value::String(v.clone())
            };
            table.insert(k.clone(), value);
        }
        let mut sets = match table.remove("sets") {
            Some(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
        for (k, v) in &self.sets {
            sets.insert(k.clone(), toml::Value::String(v.clone()));
        }
        table.insert("sets".into(), toml::Value::Table(sets));
        table.insert(
            "matrix_cell".into(),
            toml::Value::String(self.label.clone()),
        );
        table
    }
}

/// A TOML value as the text `--set` would take: strings bare, others as TOML writes them.
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl MatrixFile {
    /// Parses and validates a matrix file's text.
    pub fn parse(text: &str) -> Result<MatrixFile, String> {
        let file: MatrixFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.name.is_empty() || file.name.contains(['/', '\\']) || file.name.starts_with('.') {
            return Err(format!(
                "name {:?} must be a plain directory name",
                file.name
            ));
        }
        if !(1..=REPETITIONS_MAX).contains(&file.repetitions) {
            return Err(format!("repetitions must be 1 to {REPETITIONS_MAX}"));
        }
        if let Some((axis, _)) = file.axes.iter().find(|(_, values)| values.is_empty()) {
            return Err(format!("axis {axis:?} has no values"));
        }
        let cells = file
            .axes
            .values()
            .try_fold(1usize, |n, v| n.checked_mul(v.len()));
        if !matches!(cells, Some(n) if n <= CELLS_MAX) {
            return Err(format!("more than {CELLS_MAX} cells"));
        }
        for (axis, values) in &file.axes {
            check_profiles(axis, values, &file.axes)?;
        }
        if let Some(values) = file.axes.get(SYSTEM_AXIS) {
            check_system_axis(values, file.axes.get("client"))?;
        }
        if let Some(values) = file.axes.get("acks") {
            if let Some(bad) = values
                .iter()
                .map(value_text)
                .find(|a| !["0", "1", "all"].contains(&a.as_str()))
            {
                return Err(format!("acks must be 0, 1 or all, got {bad:?}"));
            }
        }
        for rule in &file.expect {
            if let Some(axis) = rule.when.keys().find(|k| !file.axes.contains_key(*k)) {
                return Err(format!("expect.when names {axis:?}, which is not an axis"));
            }
            // A share above 1 could never hold: a typo for a percentage, not an expectation.
            if let Some(share) = rule.availability_min {
                if !(0.0..=1.0).contains(&share) {
                    return Err(format!(
                        "availability_min {share} must be a share from 0.0 to 1.0"
                    ));
                }
            }
        }
        Ok(file)
    }

    /// Reads and parses a matrix file.
    pub fn load(path: &Path) -> Result<MatrixFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        MatrixFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Keeps only the cells whose `axis` is one of the values given for it (`--only
    /// axis=value`, repeated: values of one axis are alternatives, axes all apply); a
    /// profile is named by its `name`. Cell labels stay as they were (a label names every
    /// setting), so runs of a restricted matrix are the same cells' runs as the whole one's.
    pub fn restrict(&mut self, only: &[(String, String)]) -> Result<(), String> {
        let mut wanted: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (axis, value) in only {
            wanted.entry(axis).or_default().push(value);
        }
        let mut axes = self.axes.clone();
        for (axis, names) in wanted {
            let Some(values) = axes.get_mut(axis) else {
                let axes: Vec<&str> = self.axes.keys().map(String::as_str).collect();
                return Err(format!(
                    "--only {axis}=...: the matrix has no axis {axis:?} (its axes: {})",
                    axes.join(", ")
                ));
            };
            let name = |v: &toml::Value| match v {
                toml::Value::Table(profile) => profile.get(PROFILE_NAME).map(value_text),
                v => Some(value_text(v)),
            };
            if let Some(missing) = names
                .iter()
                .find(|n| !values.iter().any(|v| name(v).as_deref() == Some(**n)))
            {
                let known: Vec<String> = values.iter().filter_map(name).collect();
                return Err(format!(
                    "--only {axis}={missing}: axis {axis} has no value {missing:?} (its values: {})",
                    known.join(", ")
                ));
            }
            values.retain(|v| name(v).is_some_and(|n| names.contains(&n.as_str())));
        }
        self.axes = axes;
        Ok(())
    }

    /// Every cell, the last axis (by name) varying fastest.
    pub fn cells(&self) -> Vec<CellPlan> {
        let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
        for (axis, values) in &self.axes {
            combos = combos
                .into_iter()
                .flat_map(|combo| {
                    values.iter().map(move |v| {
                        let mut next = combo.clone();
                        match v {
                            // A profile: its name labels the cell, its settings apply.
                            toml::Value::Table(profile) => {
                                for (k, setting) in profile {
                                    let key = if k == PROFILE_NAME { axis } else { k };
                                    next.insert(key.clone(), value_text(setting));
                                }
                            }
                            v => {
                                next.insert(axis.clone(), value_text(v));
                            }
                        }
                        next
                    })
                })
                .collect();
        }
        combos
            .into_iter()
            .map(|settings| self.cell(settings))
            .collect()
    }

    /// Whether `axis` is an axis of profiles (its name only labels cells).
    fn is_profile_axis(&self, axis: &str) -> bool {
        self.axes
            .get(axis)
            .is_some_and(|values| values.iter().any(toml::Value::is_table))
    }

    fn cell(&self, settings: BTreeMap<String, String>) -> CellPlan {
        let label = settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let (run, sets) = settings
            .iter()
            .filter(|(k, _)| !self.is_profile_axis(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| RUN_AXES.contains(&k.as_str()));
        let rules = self.expect.iter().filter(|rule| {
            rule.when
                .iter()
                .all(|(k, v)| settings.get(k) == Some(&value_text(v)))
        });
        CellPlan {
            label,
            expectation: combine(rules),
            settings,
            run,
            sets,
        }
    }
}

/// Checks an axis of profiles (values that are tables): every value is one, named by a
/// string `name` and unique, whose settings are scalars naming no axis and not the axis
/// itself; the axis is not one that changes the run.
fn check_profiles(
    axis: &str,
    values: &[toml::Value],
    axes: &BTreeMap<String, Vec<toml::Value>>,
) -> Result<(), String> {
    if !values.iter().any(toml::Value::is_table) {
        return Ok(());
    }
    if RUN_AXES.contains(&axis) {
        return Err(format!("axis {axis:?} takes values, not profiles (tables)"));
    }
    let mut names = std::collections::BTreeSet::new();
    for value in values {
        let toml::Value::Table(profile) = value else {
            return Err(format!(
                "axis {axis:?} mixes profiles (tables) and plain values"
            ));
        };
        let Some(toml::Value::String(name)) = profile.get(PROFILE_NAME) else {
            return Err(format!(
                "axis {axis:?}: every profile needs a {PROFILE_NAME} = \"...\" (it labels the cell)"
            ));
        };
        if !names.insert(name.clone()) {
            return Err(format!("axis {axis:?}: two profiles named {name:?}"));
        }
        for (key, setting) in profile {
            if key != PROFILE_NAME && (axes.contains_key(key) || key == axis) {
                return Err(format!(
                    "axis {axis:?}, profile {name:?}: {key:?} is an axis of its own"
                ));
            }
            if setting.is_table() || setting.is_array() {
                return Err(format!(
                    "axis {axis:?}, profile {name:?}: {key:?} must be a single value"
                ));
            }
        }
    }
    Ok(())
}

/// Checks a `system` axis: every value a system `--system` takes, and no `client = "http"`
/// beside Kafka (whose cells run the Kafka client: such a cell would not be what its label
/// says).
fn check_system_axis(
    values: &[toml::Value],
    clients: Option<&Vec<toml::Value>>,
) -> Result<(), String> {
    let mut kafka = false;
    for value in values {
        let text = value_text(value);
        let system = crate::kafka::System::parse(&text)
            .map_err(|e| format!("axis system: {}", e.trim_start_matches("--system ")))?;
        kafka |= matches!(system, crate::kafka::System::Kafka { .. });
    }
    let http = clients.is_some_and(|c| c.iter().any(|v| value_text(v) == "http"));
    if kafka && http {
        return Err(
            "axis system has Kafka and axis client has http: Kafka speaks only its \
                    own protocol, so its cells run the Kafka client; to compare the systems \
                    under one client, set client = \"kafka\" in [run] instead of a client axis"
                .into(),
        );
    }
    Ok(())
}

/// The strictest combination of the rules: the lowest bounds, every forbidden anomaly.
fn combine<'a>(rules: impl Iterator<Item = &'a ExpectRule>) -> Expectation {
    let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut e = Expectation::default();
    let mut descriptions = Vec::new();
    for rule in rules {
        if !rule.description.is_empty() {
            descriptions.push(rule.description.clone());
        }
        e.lost_writes_max = min(e.lost_writes_max, rule.lost_writes_max);
        e.hw_regressions_max = min(e.hw_regressions_max, rule.hw_regressions_max);
        for name in &rule.forbidden_anomalies {
            if !e.forbidden_anomalies.contains(name) {
                e.forbidden_anomalies.push(name.clone());
            }
        }
        e.availability_min = match (e.availability_min, rule.availability_min) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        e.all_valid |= rule.all_valid;
        e.promise_kept |= rule.promise_kept;
    }
    e.description = descriptions.join("; ");
    e
}

/// What a finished matrix produced.
#[derive(Debug, Clone)]
pub struct MatrixRun {
    /// Figures and verdicts per cell.
    pub summary: MatrixSummary,
    /// The comparison page.
    pub page: PathBuf,
    /// The JUnit XML file.
    pub junit: PathBuf,
}

impl MatrixRun {
    /// The exit code of `tidewater matrix`: 0 every expectation held and no run errored, 1 an
    /// expectation failed, 2 runs errored.
    pub fn exit_code(&self) -> i32 {
        self.summary.exit_code()
    }
}

/// Writes a night's own copy of the matrix page and JUnit file, its `summary.json` and
/// `summary.html` (compared with the previous night) into `out_dir/nights/<night>/`.
/// Returns the summary.
pub fn write_night(
    run: &MatrixRun,
    out_dir: &Path,
    night: &str,
) -> Result<NightSummary, ReportError> {
    let nights = out_dir.join(NIGHTS_DIR);
    let dir = nights.join(night);
    let previous = previous_night(&nights, night);
    let summary = night_summary(&run.summary, night, previous.as_ref());
    render_matrix(&run.summary, &dir)?;
    let junit = dir.join(JUNIT_FILE);
    std::fs::write(&junit, junit_xml(&run.summary)).map_err(|e| ReportError::Io {
        path: junit.clone(),
        source: e,
    })?;
    tidewater_reports::pages::night::write_night(&summary, &dir)?;
    Ok(summary)
}

/// Runs every repetition of every cell with `run_one(cell, repetition)` (repetitions count
/// from 0; the runner gives each run `config.matrix_cell = cell.label`), then writes
/// `out_dir/matrix.html` and `out_dir/junit.xml`.
pub fn run_matrix(
    file: &MatrixFile,
    out_dir: &Path,
    mut run_one: impl FnMut(&CellPlan, u32) -> RunOutcome,
) -> Result<MatrixRun, ReportError> {
    let mut cells = Vec::new();
    for plan in file.cells() {
        let runs = (0..file.repetitions)
            .map(|rep| run_one(&plan, rep))
            .collect();
        cells.push(CellInput {
            label: plan.label.clone(),
            settings: plan.settings.clone(),
            expectation: plan.expectation.clone(),
            runs,
        });
    }
    let summary = summarize_matrix(&MatrixInput {
        title: file.name.clone(),
        cells,
    })?;
    let page = render_matrix(&summary, out_dir)?;
    let junit = out_dir.join(JUNIT_FILE);
    std::fs::write(&junit, junit_xml(&summary)).map_err(|e| ReportError::Io {
        path: junit.clone(),
        source: e,
    })?;
    Ok(MatrixRun {
        summary,
        page,
        junit,
    })
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
    /// With `--seeds`: a cell's run with a seed that the store already holds finished (the
    /// same settings and fault schedule, checked, not interrupted) is taken as it is instead
    /// of run again, so a matrix too long for one sitting goes on where it stopped.
    #[arg(long, requires = "seeds")]
    pub resume: bool,
    /// Run only the cells whose AXIS has this value (a profile by its name); repeat it for
    /// more values of one axis or for other axes, e.g. `--only system=kafka:3.9.1 --only
    /// plan=power-loss-leader`. The matrix page then shows those cells alone.
    #[arg(long, value_name = "AXIS=VALUE", value_parser = parse_only)]
    pub only: Vec<(String, String)>,
}

fn parse_only(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((axis, value)) if !axis.is_empty() && !value.is_empty() => {
            Ok((axis.to_string(), value.to_string()))
        }
        _ => Err(format!("{s:?}: AXIS=VALUE, e.g. system=kafka:3.9.1")),
    }
}

/// The newest run in `dir` (a matrix's store directory) that ran exactly `planned` (its
/// settings, seed and resolved fault schedule) and finished: its verdict is in results.json
/// and no signal interrupted it. `tidewater matrix --resume` takes it instead of running the
/// cell's seed again.
pub fn finished_run(dir: &Path, planned: &RunConfig) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("config.json").is_file())
        .collect();
    // Run directories are named by their start time, so the newest sorts last.
    runs.sort();
    runs.into_iter().rev().find(|path| {
        let run = store::RunDir { path: path.clone() };
        let same = RunConfig::load(&run.config()).is_ok_and(|stored| stored == *planned);
        let results = std::fs::read_to_string(run.results())
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let finished = results.is_some_and(|r| {
            r.get("valid").is_some() && r["stats"].get("interrupted_by_signal").is_none()
        });
        same && finished
    })
}

/// The config a matrix run of `config` with `seed` stores (`launch::resolve`).
fn resolved(config: &RunConfig, seed: u64) -> Result<RunConfig, String> {
    let mut config = config.clone();
    config.seed = seed;
    crate::launch::resolve(&mut config)?;
    Ok(config)
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

pub(crate) fn matrix_command(args: &MatrixArgs) -> i32 {
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
    if let Err(e) = file.restrict(&args.only) {
        eprintln!("tidewater: matrix {}: {e}", args.file.display());
        return EXIT_SETUP;
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
    let result = run_matrix(&file, &out_dir, |cell, repetition| {
        let (_, config) = configs
            .iter()
            .find(|(label, _)| *label == cell.label)
            .expect("every cell was planned");
        let mut config = config.clone();
        config.seed = match args.seeds.get(repetition as usize) {
            Some(seed) => *seed,
            None => rand::random(),
        };
        if args.resume {
            let done = resolved(&config, config.seed)
                .ok()
                .and_then(|planned| finished_run(&out_dir, &planned));
            if let Some(dir) = done {
                println!(
                    "matrix cell {} run {}: seed {} finished before, in {} (--resume)",
                    cell.label,
                    repetition + 1,
                    config.seed,
                    dir.display()
                );
                return RunOutcome::Completed(dir);
            }
        }
        println!("matrix cell {} run {}", cell.label, repetition + 1);
        match execute_run(config, &target, &runtime) {
            // A verdict was reached (valid, invalid, unknown, or unknown with no recovery).
            (0 | 1 | 2 | runner::EXIT_LIVENESS, Some(dir)) => RunOutcome::Completed(dir.path),
            (code, dir) => RunOutcome::Errored {
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
                match write_night(&run, &out_dir, night) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const DURABILITY: &str = r#"
        name = "durability"
        repetitions = 2

        [run]
        time_limit_s = 30
        plan = "leader-isolation"

        [axes]
        acks = ["1", "all"]
        "min.insync.replicas" = [1, 2]

        [[expect]]
        when = { acks = "all", "min.insync.replicas" = 2 }
        description = "no lost acknowledged write"
        lost_writes_max = 0
        forbidden_anomalies = ["lost-write"]

        [[expect]]
        description = "mostly available"
        availability_min = 0.5
    "#;

    #[test]
    fn axes_expand_into_cells_with_their_expectations() {
        let file = MatrixFile::parse(DURABILITY).unwrap();
        let cells = file.cells();
        let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "acks=1 min.insync.replicas=1",
                "acks=1 min.insync.replicas=2",
                "acks=all min.insync.replicas=1",
                "acks=all min.insync.replicas=2"
            ]
        );
        let strict = &cells[3];
        assert_eq!(
            strict.run,
            BTreeMap::from([("acks".to_string(), "all".to_string())])
        );
        assert_eq!(
            strict.sets,
            BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())])
        );
        assert_eq!(strict.expectation.lost_writes_max, Some(0));
        assert_eq!(strict.expectation.forbidden_anomalies, ["lost-write"]);
        assert_eq!(strict.expectation.availability_min, Some(0.5));
        assert_eq!(
            strict.expectation.description,
            "no lost acknowledged write; mostly available"
        );
        assert_eq!(
            cells[0].expectation.lost_writes_max, None,
            "acks=1 may lose writes"
        );
        assert_eq!(
            file.run.get("time_limit_s"),
            Some(&toml::Value::Integer(30))
        );
    }

    /// The nightly matrix shipped for vagrant/nightly.sh.
    const SHIPPED_DURABILITY: &str = include_str!("../matrix/durability.toml");

    /// The power-loss matrix shipped beside it.
    const SHIPPED_POWER_LOSS: &str = include_str!("../matrix/power-loss.toml");

    /// The companion broker against Kafka 4.1.1 and 3.9.1 (docs/real-kafka.md).
    const SHIPPED_FAITHFULNESS: &str = include_str!("../matrix/faithfulness.toml");

    /// The config of `cell` over `tidewater run`'s defaults, or why it is refused.
    fn cell_config(
        file: &MatrixFile,
        cell: &CellPlan,
    ) -> Result<crate::runner::config::RunConfig, String> {
        let table = serde_json::to_value(cell.run_table(&file.run)).unwrap();
        default_config(&file.name).overlay(table.as_object().unwrap())
    }

    #[test]
    fn a_system_axis_runs_each_cell_on_its_system_with_kafkas_client_for_kafka() {
        let file = MatrixFile::parse(
            "name = \"m\"\n[run]\nplan = \"kill-isr\"\ntime_limit_s = 60\n\
             [axes]\nsystem = [\"companion\", \"kafka:4.1.1\", \"kafka\"]",
        )
        .unwrap();
        let runs: Vec<(String, String, String)> = file
            .cells()
            .iter()
            .map(|cell| {
                let config = cell_config(&file, cell).unwrap();
                assert!(!config.sets.contains_key("system"), "{}", cell.label);
                (cell.label.clone(), config.system, config.client)
            })
            .collect();
        let run = |label: &str, system: &str, client: &str| {
            (label.to_string(), system.to_string(), client.to_string())
        };
        assert_eq!(
            runs,
            [
                run("system=companion", "tidewater", "http"),
                run("system=kafka:4.1.1", "kafka:4.1.1", "kafka"),
                run(
                    "system=kafka",
                    &format!("kafka:{}", crate::kafka::DEFAULT_VERSION),
                    "kafka"
                ),
            ]
        );
        for (text, reason) in [
            (
                "system = [\"zookeeper\"]",
                "axis system: \"zookeeper\": expected tidewater",
            ),
            (
                "system = [\"kafka:4\"]",
                "expected tidewater (or companion), kafka or kafka:X.Y.Z",
            ),
            (
                "system = [\"companion\", \"kafka:3.9.1\"]\nclient = [\"http\", \"kafka\"]",
                "set client = \"kafka\" in [run]",
            ),
        ] {
            let e = MatrixFile::parse(&format!("name = \"m\"\n[axes]\n{text}")).unwrap_err();
            assert!(e.contains(reason), "{text}: {e}");
        }
        // Without Kafka beside it, the companion broker may be compared over both clients.
        let both = "name = \"m\"\n[axes]\nsystem = [\"companion\"]\nclient = [\"http\", \"kafka\"]";
        assert_eq!(MatrixFile::parse(both).unwrap().cells().len(), 2);
    }

    #[test]
    fn profiles_vary_settings_together_and_random_runs_the_random_schedule() {
        let file = MatrixFile::parse(
            r#"
name = "m"
[run]
plan = "kill-isr"
nemesis = ["kill"]
time_limit_s = 60
[axes]
plan = ["random", "kill-isr"]
safety = [
  { name = "safe", "min.insync.replicas" = 2, "unclean.leader.election.enable" = false },
  { name = "unsafe", "min.insync.replicas" = 1, "unclean.leader.election.enable" = true },
]
[[expect]]
when = { safety = "unsafe" }
promise_kept = true
"#,
        )
        .unwrap();
        let cells = file.cells();
        let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "min.insync.replicas=2 plan=random safety=safe unclean.leader.election.enable=false",
                "min.insync.replicas=1 plan=random safety=unsafe unclean.leader.election.enable=true",
                "min.insync.replicas=2 plan=kill-isr safety=safe unclean.leader.election.enable=false",
                "min.insync.replicas=1 plan=kill-isr safety=unsafe unclean.leader.election.enable=true",
            ]
        );
        let unsafe_random = &cells[1];
        assert!(unsafe_random.expectation.promise_kept);
        assert!(!cells[0].expectation.promise_kept);
        let config = cell_config(&file, unsafe_random).unwrap();
        assert_eq!(config.plan, None, "the random schedule, not [run]'s plan");
        assert_eq!(config.nemesis, ["kill"]);
        assert_eq!(
            config.sets,
            BTreeMap::from([
                ("min.insync.replicas".to_string(), "1".to_string()),
                (
                    "unclean.leader.election.enable".to_string(),
                    "true".to_string()
                ),
            ]),
            "the profile's settings, not its name"
        );
        assert_eq!(
            cell_config(&file, &cells[2]).unwrap().plan.as_deref(),
            Some("kill-isr")
        );
        for (axes, reason) in [
            ("s = [{ name = \"a\" }, 1]", "mixes profiles"),
            ("s = [{ x = 1 }]", "every profile needs a name"),
            (
                "s = [{ name = \"a\" }, { name = \"a\" }]",
                "two profiles named \"a\"",
            ),
            (
                "s = [{ name = \"a\", acks = \"1\" }]\nacks = [\"all\"]",
                "\"acks\" is an axis",
            ),
            ("s = [{ name = \"a\", x = [1] }]", "must be a single value"),
            ("plan = [{ name = \"a\" }]", "takes values, not profiles"),
        ] {
            let e = MatrixFile::parse(&format!("name = \"m\"\n[axes]\n{axes}")).unwrap_err();
            assert!(e.contains(reason), "{axes}: {e}");
        }
    }

    #[test]
    fn the_shipped_elr_matrix_cuts_the_leaders_power_with_elr_off_and_on() {
        let file = MatrixFile::parse(include_str!("../matrix/faithfulness-elr.toml")).unwrap();
        let cells = file.cells();
        assert_eq!(cells.len(), 8);
        for cell in &cells {
            let config = cell_config(&file, cell).unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            assert_eq!(config.plan.as_deref(), Some("power-loss-leader"));
            let schedule = crate::runner::faults::resolve_schedule(&config).unwrap();
            let config = crate::runner::config::RunConfig { schedule, ..config };
            assert!(crate::runner::faults::cuts_power(&config), "{}", cell.label);
            let settings: Vec<(String, String)> = config.broker_settings().into_iter().collect();
            let features = crate::kafka::properties::format_features(&settings).unwrap();
            let elr = &cell.sets["eligible.leader.replicas.enable"];
            assert_eq!(
                features,
                [format!(
                    "eligible.leader.replicas.version={}",
                    u8::from(elr == "true")
                )],
                "{}",
                cell.label
            );
            let judged = cell.sets["min.insync.replicas"] == "2" && elr == "true";
            assert_eq!(
                cell.expectation.lost_writes_max,
                judged.then_some(0),
                "{}",
                cell.label
            );
            assert_eq!(cell.expectation.forbidden_anomalies, ["unexpected"]);
        }
    }

    #[test]
    fn the_shipped_faithfulness_matrix_runs_every_plan_on_three_systems() {
        let file = MatrixFile::parse(SHIPPED_FAITHFULNESS).unwrap();
        let cells = file.cells();
        let shipped: std::collections::BTreeSet<String> =
            std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("plans"))
                .unwrap()
                .map(|e| {
                    e.unwrap()
                        .file_name()
                        .to_string_lossy()
                        .trim_end_matches(".toml")
                        .to_string()
                })
                .collect();
        let plans: std::collections::BTreeSet<String> =
            cells.iter().map(|c| c.run["plan"].clone()).collect();
        let mut expected = shipped.clone();
        expected.insert(RANDOM_PLAN.into());
        assert_eq!(
            plans, expected,
            "every shipped plan and the random schedule"
        );
        assert_eq!(cells.len(), 3 * expected.len() * 2);
        let mut systems = std::collections::BTreeSet::new();
        for cell in &cells {
            let config = cell_config(&file, cell).unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            assert_eq!(
                (config.client.as_str(), config.acks.as_str()),
                ("kafka", "all")
            );
            let safe = cell.settings["safety"] == "safe";
            assert_eq!(
                config.sets["min.insync.replicas"],
                if safe { "2" } else { "1" },
                "{}",
                cell.label
            );
            assert!(cell.expectation.promise_kept, "{}", cell.label);
            // Every plan fits the time limit and every setting has a route to Kafka.
            crate::runner::faults::resolve_schedule(&config)
                .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            crate::kafka::properties::check_sets(&config.sets)
                .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            systems.insert(config.system);
        }
        assert_eq!(
            systems.into_iter().collect::<Vec<_>>(),
            ["kafka:3.9.1", "kafka:4.1.1", "tidewater"]
        );
    }

    #[test]
    fn the_shipped_power_loss_matrix_judges_every_cell() {
        let file = MatrixFile::parse(SHIPPED_POWER_LOSS).unwrap();
        let cells = file.cells();
        assert_eq!(cells.len(), 8);
        for cell in &cells {
            let flushed = cell.sets["flush.messages"] == "1";
            let leader = cell.run["plan"] == "power-loss-leader";
            // Eligible leader replicas (KIP-966) keep min.insync.replicas=2 from losing.
            let elr_saves = leader && cell.sets["min.insync.replicas"] == "2";
            let e = &cell.expectation;
            assert_eq!(
                e.lost_writes_max,
                (flushed || elr_saves).then_some(0),
                "{}",
                cell.label
            );
            assert_eq!(e.all_valid, flushed, "{}", cell.label);
            assert!(e.promise_kept, "{}", cell.label);
            assert_eq!(e.forbidden_anomalies, ["unexpected"], "{}", cell.label);
            let table = serde_json::to_value(cell.run_table(&file.run)).unwrap();
            let config = crate::runner::config::example()
                .overlay(table.as_object().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            assert_eq!(config.acks, "all");
            let schedule = crate::runner::faults::resolve_schedule(&config).unwrap();
            let config = crate::runner::config::RunConfig { schedule, ..config };
            assert!(crate::runner::faults::cuts_power(&config), "{}", cell.label);
        }
    }

    #[test]
    fn the_shipped_durability_matrix_expands_to_sixteen_judged_cells() {
        let file = MatrixFile::parse(SHIPPED_DURABILITY).unwrap();
        assert_eq!((file.name.as_str(), file.repetitions), ("durability", 3));
        let cells = file.cells();
        let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
        let mut expected = Vec::new();
        for acks in ["1", "all"] {
            for min_isr in [1, 2] {
                for plan in ["unclean-election", "power-loss-leader"] {
                    for unclean in [false, true] {
                        expected.push(format!(
                            "acks={acks} min.insync.replicas={min_isr} plan={plan} \
                             unclean.leader.election.enable={unclean}"
                        ));
                    }
                }
            }
        }
        assert_eq!(labels, expected);
        for cell in &cells {
            let strict = cell.run["acks"] == "all"
                && cell.sets["min.insync.replicas"] == "2"
                && cell.sets["unclean.leader.election.enable"] == "false";
            let clean = cell.sets["unclean.leader.election.enable"] == "false"
                && cell.run["acks"] == "all"
                && (cell.run["plan"] == "unclean-election" || strict);
            let e = &cell.expectation;
            // Only Kafka's promise bounds losses; the other cells are observed.
            assert_eq!(e.lost_writes_max, strict.then_some(0), "{}", cell.label);
            let mut forbidden = Vec::new();
            if strict {
                forbidden.push("lost-write");
            }
            if clean {
                forbidden.push("inconsistent-offsets");
            }
            forbidden.push("unexpected");
            assert_eq!(e.forbidden_anomalies, forbidden, "{}", cell.label);
            assert_eq!(
                (e.hw_regressions_max, e.availability_min, e.all_valid),
                (None, None, false),
                "{}",
                cell.label
            );
            // Every cell becomes a valid run config with its plan; power-loss-leader cuts power.
            let table = serde_json::to_value(cell.run_table(&file.run)).unwrap();
            let config = crate::runner::config::example()
                .overlay(table.as_object().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            assert_eq!(config.plan.as_deref(), Some(cell.run["plan"].as_str()));
            assert_eq!((config.time_limit_s, config.replication_factor), (90, 3));
            assert_eq!(config.acks, cell.settings["acks"]);
            assert_eq!(
                config.sets["unclean.leader.election.enable"],
                cell.settings["unclean.leader.election.enable"]
            );
            assert_eq!(config.matrix_cell.as_deref(), Some(cell.label.as_str()));
            crate::runner::faults::resolve_schedule(&config)
                .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
            assert_eq!(
                crate::runner::faults::cuts_power(&config),
                cell.run["plan"] == "power-loss-leader",
                "{}",
                cell.label
            );
        }
    }

    #[test]
    fn a_cells_run_table_merges_base_settings_run_axes_and_sets() {
        let file = MatrixFile::parse(
            "name = \"m\"\n[run]\ntime_limit_s = 30\nsets = { \"retention.ms\" = \"-1\" }\n\
             [axes]\nacks = [\"all\"]\nnemesis = [\"kill,pause\", \"none\"]\n\
             \"min.insync.replicas\" = [2]",
        )
        .unwrap();
        let cells = file.cells();
        let table = cells[0].run_table(&file.run);
        assert_eq!(table["time_limit_s"], toml::Value::Integer(30));
        assert_eq!(table["acks"], toml::Value::String("all".into()));
        assert_eq!(
            table["nemesis"],
            toml::Value::Array(vec!["kill".into(), "pause".into()])
        );
        assert_eq!(
            table["sets"]["retention.ms"],
            toml::Value::String("-1".into())
        );
        assert_eq!(
            table["sets"]["min.insync.replicas"],
            toml::Value::String("2".into())
        );
        assert_eq!(
            table["matrix_cell"],
            toml::Value::String(cells[0].label.clone())
        );
        assert_eq!(
            cells[1].run_table(&file.run)["nemesis"],
            toml::Value::Array(vec![])
        );
    }

    #[test]
    fn a_client_axis_compares_http_and_kafka_in_one_matrix() {
        let file = MatrixFile::parse(
            "name = \"m\"\n[axes]\nclient = [\"http\", \"kafka\"]\nplan = [\"kill-isr\"]",
        )
        .unwrap();
        let clients: Vec<String> = file
            .cells()
            .iter()
            .map(|cell| {
                let table = serde_json::to_value(cell.run_table(&file.run)).unwrap();
                let config = crate::runner::config::example()
                    .overlay(table.as_object().unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", cell.label));
                assert!(config.sets.is_empty() || !config.sets.contains_key("client"));
                config.client
            })
            .collect();
        assert_eq!(clients, ["http", "kafka"]);
        let bad = MatrixFile::parse("name = \"m\"\n[axes]\nclient = [\"grpc\"]").unwrap();
        let table = serde_json::to_value(bad.cells()[0].run_table(&bad.run)).unwrap();
        let refused = crate::runner::config::example()
            .overlay(table.as_object().unwrap())
            .unwrap_err();
        assert!(refused.contains("--client"), "{refused}");
    }

    #[test]
    fn bad_matrix_files_are_refused_with_the_reason() {
        for (text, reason) in [
            ("name = \"m\"\n[axes]\nacks = []", "no values"),
            ("name = \"m\"\n[axes]\nacks = [\"2\"]", "acks must be"),
            (
                "name = \"m/x\"\n[axes]\nacks = [\"1\"]",
                "plain directory name",
            ),
            (
                "name = \"m\"\nrepetitions = 0\n[axes]\nacks = [\"1\"]",
                "repetitions",
            ),
            (
                "name = \"m\"\n[axes]\nacks = [\"1\"]\n[[expect]]\nwhen = { x = 1 }",
                "not an axis",
            ),
            (
                "name = \"m\"\n[axes]\nacks = [\"1\"]\n[[expect]]\nlost = 1",
                "unknown field",
            ),
            (
                "name = \"m\"\n[axes]\nacks = [\"1\"]\n[[expect]]\navailability_min = 95.0",
                "share from 0.0 to 1.0",
            ),
        ] {
            let err = MatrixFile::parse(text).unwrap_err();
            assert!(err.contains(reason), "{text}: {err}");
        }
    }

    /// A run directory whose results say `lost` writes were lost, with one ok send.
    fn fake_run(dir: &Path, lost: u64) -> RunOutcome {
        std::fs::create_dir_all(dir).unwrap();
        let results = serde_json::json!({
            "valid": lost == 0,
            "anomalies": {"lost-write": {"count": lost, "examples": [], "invalidates": lost > 0, "breaks_promise": lost > 0}}
        });
        std::fs::write(dir.join("results.json"), results.to_string()).unwrap();
        std::fs::write(
            dir.join("history.jsonl"),
            "{\"index\":0,\"time\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"send\",\"value\":[[\"send\",\"t0/0\",1]]}\n\
             {\"index\":1,\"time\":5000000,\"process\":0,\"type\":\"ok\",\"f\":\"send\",\"value\":[[\"send\",\"t0/0\",[0,1]]]}\n",
        )
        .unwrap();
        RunOutcome::Completed(dir.to_path_buf())
    }

    #[test]
    fn a_lost_write_where_none_is_allowed_fails_the_matrix() {
        let tmp = tempfile::tempdir().unwrap();
        let file = MatrixFile::parse(DURABILITY).unwrap();
        let mut calls = Vec::new();
        let run = run_matrix(&file, &tmp.path().join("matrix"), |cell, rep| {
            calls.push((cell.label.clone(), rep));
            let dir = tmp.path().join(format!("runs/{}/{rep}", calls.len()));
            // acks=1 loses a write in its first run (allowed); the strict cell loses one too.
            let lost = u64::from(
                rep == 0 && (cell.run["acks"] == "1" || cell.sets["min.insync.replicas"] == "2"),
            );
            fake_run(&dir, lost)
        })
        .unwrap();
        assert_eq!(calls.len(), 8, "4 cells x 2 repetitions");
        let failed: Vec<&str> = run
            .summary
            .cells
            .iter()
            .filter(|c| !c.expectation_held())
            .map(|c| c.label.as_str())
            .collect();
        assert_eq!(failed, ["acks=all min.insync.replicas=2"]);
        assert_eq!(run.exit_code(), 1);
        let junit = std::fs::read_to_string(&run.junit).unwrap();
        assert!(
            junit.contains("tests=\"4\" failures=\"1\" errors=\"0\""),
            "{junit}"
        );
        let page = std::fs::read_to_string(&run.page).unwrap();
        assert!(page.contains("acks=all min.insync.replicas=2"));

        // Without losses but with an errored run, the exit code says "errored".
        let run = run_matrix(&file, &tmp.path().join("matrix2"), |cell, rep| {
            if cell.label.starts_with("acks=1 min.insync.replicas=1") && rep == 1 {
                return RunOutcome::Errored {
                    run_dir: None,
                    error: "setup failed".into(),
                };
            }
            fake_run(
                &tmp.path()
                    .join(format!("ok/{}/{rep}", cell.label.replace(' ', "_"))),
                0,
            )
        })
        .unwrap();
        assert_eq!(run.exit_code(), 2);
    }

    #[test]
    fn only_keeps_the_named_cells_under_their_whole_labels() {
        let mut file = MatrixFile::parse(
            r#"
name = "m"
[axes]
system = ["companion", "kafka:4.1.1", "kafka:3.9.1"]
plan = ["random", "kill-isr"]
safety = [
  { name = "safe", "min.insync.replicas" = 2 },
  { name = "unsafe", "min.insync.replicas" = 1 },
]
"#,
        )
        .unwrap();
        let whole: Vec<String> = file.cells().into_iter().map(|c| c.label).collect();
        assert_eq!(whole.len(), 12);
        let only = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, v)| (a.to_string(), v.to_string()))
                .collect()
        };
        let mut some = file.clone();
        some.restrict(&only(&[
            ("system", "kafka:3.9.1"),
            ("system", "companion"),
            ("safety", "unsafe"),
        ]))
        .unwrap();
        let kept: Vec<String> = some.cells().into_iter().map(|c| c.label).collect();
        let expected: Vec<String> = whole
            .iter()
            .filter(|l| {
                (l.contains("system=kafka:3.9.1") || l.contains("system=companion"))
                    && l.contains("safety=unsafe")
            })
            .cloned()
            .collect();
        assert_eq!(expected.len(), 4);
        assert_eq!(kept, expected, "the same labels as in the whole matrix");
        let err = file.restrict(&only(&[("sytem", "companion")])).unwrap_err();
        assert!(
            err.contains("no axis \"sytem\" (its axes: plan, safety, system)"),
            "{err}"
        );
        let err = file.restrict(&only(&[("safety", "risky")])).unwrap_err();
        assert!(
            err.contains("has no value \"risky\" (its values: safe, unsafe)"),
            "{err}"
        );
        assert_eq!(
            file.cells().len(),
            12,
            "a refused restriction changes nothing"
        );
        assert!(parse_only("plan").is_err() && parse_only("=x").is_err());
        assert_eq!(parse_only("system=kafka:3.9.1").unwrap().1, "kafka:3.9.1");
    }

    #[test]
    fn resume_takes_only_a_finished_run_of_the_same_settings_seed_and_schedule() {
        let tmp = tempfile::tempdir().unwrap();
        let base = crate::runner::config::example();
        let planned = resolved(&base, 7).unwrap();
        assert!(!planned.schedule.is_null() && planned.seed == 7);
        assert!(planned
            .harness_defaults
            .contains(&"replica.lag.time.max.ms".to_string()));
        let write = |stamp: &str, config: &RunConfig, results: Option<serde_json::Value>| {
            let dir = tmp.path().join(stamp);
            std::fs::create_dir_all(&dir).unwrap();
            config.save(&dir.join("config.json")).unwrap();
            if let Some(r) = results {
                std::fs::write(dir.join("results.json"), r.to_string()).unwrap();
            }
            dir
        };
        let checked = serde_json::json!({"valid": "invalid", "stats": {}});
        let interrupted =
            serde_json::json!({"valid": "unknown", "stats": {"interrupted_by_signal": 2}});
        assert_eq!(finished_run(tmp.path(), &planned), None, "an empty store");
        let done = write("20261204T100000", &planned, Some(checked.clone()));
        // Newer runs of the same cell and seed that did not finish are passed over.
        write("20261204T110000", &planned, Some(interrupted));
        write("20261204T120000", &planned, None);
        assert_eq!(finished_run(tmp.path(), &planned), Some(done.clone()));
        // Another seed, other settings or a schedule resolved differently are other runs.
        assert_eq!(finished_run(tmp.path(), &resolved(&base, 8).unwrap()), None);
        let mut longer = base.clone();
        longer.time_limit_s += 10;
        assert_eq!(
            finished_run(tmp.path(), &resolved(&longer, 7).unwrap()),
            None
        );
        let mut other_schedule = planned.clone();
        other_schedule.schedule = serde_json::json!([]);
        assert_eq!(finished_run(tmp.path(), &other_schedule), None);
        // The newest finished one wins.
        let again = write("20261204T130000", &planned, Some(checked));
        assert_eq!(finished_run(tmp.path(), &planned), Some(again));
        assert_ne!(finished_run(tmp.path(), &planned), Some(done));
    }

    #[test]
    fn expectations_refer_to_the_fact_or_to_the_promise() {
        let tmp = tempfile::tempdir().unwrap();
        let file = MatrixFile::parse(
            "name = \"m\"\n[axes]\nacks = [\"1\"]\n\
             [[expect]]\ndescription = \"keeps the promise\"\npromise_kept = true\n",
        )
        .unwrap();
        let plan = &file.cells()[0];
        assert!(plan.expectation.promise_kept && !plan.expectation.all_valid);
        // acks=1 lost a write, which its settings allow: invalid, yet the promise is kept.
        let write = |name: &str, promise: &str| {
            let dir = tmp.path().join(name);
            let run = fake_run(&dir, 1);
            let mut results: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                    .unwrap();
            results["promise"] = promise.into();
            results["anomalies"]["lost-write"]["breaks_promise"] = (promise == "broken").into();
            std::fs::write(dir.join("results.json"), results.to_string()).unwrap();
            run
        };
        let kept = run_matrix(&file, &tmp.path().join("kept"), |_, _| write("a", "kept")).unwrap();
        assert_eq!(kept.exit_code(), 0, "{:?}", kept.summary.cells[0].failures);
        let broken = run_matrix(&file, &tmp.path().join("broken"), |_, _| {
            write("b", "broken")
        })
        .unwrap();
        assert_eq!(
            broken.summary.cells[0].failures,
            ["1 runs did not keep the promise"]
        );
        // The same runs against all_valid: the loss is a fact, so it fails either way.
        let strict = MatrixFile::parse(
            "name = \"m\"\n[axes]\nacks = [\"1\"]\n[[expect]]\nall_valid = true\n",
        )
        .unwrap();
        let run = run_matrix(&strict, &tmp.path().join("strict"), |_, _| {
            write("c", "kept")
        })
        .unwrap();
        assert_eq!(run.summary.cells[0].failures, ["1 runs not valid"]);
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
}
