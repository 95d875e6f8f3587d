//! `tidewater detect`: the detection benchmark. Runs every deliberate bug of the broker
//! (`tidewater.bug.*`, cargo feature `deliberate-bugs`, see `broker/src/bugs.rs`) and the
//! unmodified broker (`none`) under the random schedule with a few seeds and under the shipped
//! plans, each as a normal run into the store, and writes the detection table: which plan and
//! seed caught which bug, with the anomalies and the lost count (`docs/detection.md`).
//!
//! The planning and rendering are pure: [`run_detection`] takes the function that runs one
//! cell and rewrites the table after every run, so a partial benchmark still leaves an honest
//! table. The command (`detect_command`, with its flags [`DetectArgs`]) runs each cell as
//! `tidewater run` would, through `crate::launch::execute_run`.

use crate::launch::{check_schedule, default_config, execute_run, new_runtime, RunTarget};
use crate::runner::{self, EXIT_HARNESS, EXIT_SETUP};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{CheckResults, Validity};

/// The row of the unmodified broker: every switch off, so every anomaly is a false alarm.
pub const NO_BUG: &str = "none";
/// The settings every detection run uses: the safe configuration, under which a correct
/// broker must lose nothing.
pub const SAFE_SETTINGS: [(&str, &str); 2] = [
    ("min.insync.replicas", "2"),
    ("unclean.leader.election.enable", "false"),
];
/// Plans that cut the power of every broker at once, run with `flush.messages=1` on top of
/// [`SAFE_SETTINGS`]: with Kafka's default (no fsync per append) such a power cut takes
/// acknowledged records from a correct broker too, which its promise allows, so the column
/// could tell no bug apart. With every append fsynced a correct broker loses nothing there.
pub const FLUSHED_PLANS: [&str; 1] = ["power-loss-cluster"];
/// The deliberate bugs of `broker/src/bugs.rs` (`Bug::ALL`, short names), the default rows. The
/// harness reaches the broker only as a process, so the list is repeated here; a name the
/// broker does not know is refused by its own schema before the first run.
pub const BUGS: [&str; 10] = [
    "ack.before.replication",
    "hw.max.of.isr",
    "keep.divergent.suffix",
    "no.epoch.bump",
    "serve.uncommitted",
    "shrink.isr.without.controller",
    "unclean.election.parse",
    "ignore.min.insync",
    "min.insync.after.append",
    "recovery.cuts.at.checkpoint",
];
/// The deliberate bugs of the transactional parts (coordinator, markers, last stable offset,
/// fencing), the default rows of `--workload txn`.
pub const TXN_BUGS: [&str; 4] = [
    "txn.abort.marker.skipped",
    "txn.lso.ignores.open",
    "txn.stale.epoch.accepted",
    "txn.reload.forgets.ongoing",
];
/// The deliberate bugs of idempotent producers, the default rows of `--idempotence`.
pub const IDEMPOTENCE_BUGS: [&str; 1] = ["idempotence.dedupe.forgotten"];
/// The deliberate bugs of the group coordinator, the default rows of `--workload group`.
pub const GROUP_BUGS: [&str; 1] = ["group.reload.keeps.first"];
/// Runs per benchmark at most (each costs a full run of about a minute and a half).
pub const RUNS_MAX: usize = 2000;

/// One column of the table: the random schedule with a seed, or a shipped plan with a seed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Column {
    /// The plan's name, or `None` for the random schedule.
    pub plan: Option<String>,
    /// The run's seed.
    pub seed: u64,
}

impl Column {
    /// `random/s1`, `leader-isolation/s1`: the column's heading and run-name suffix.
    pub fn label(&self) -> String {
        format!(
            "{}/s{}",
            self.plan.as_deref().unwrap_or("random"),
            self.seed
        )
    }
}

/// One run of the benchmark: a bug (or [`NO_BUG`]) under a column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// The bug's short name (`ack.before.replication`) or `none`.
    pub bug: String,
    /// The column.
    pub column: Column,
}

impl Cell {
    /// The broker setting that switches this cell's bug on, if any.
    pub fn bug_setting(&self) -> Option<String> {
        (self.bug != NO_BUG).then(|| format!("tidewater.bug.{}.enable", self.bug))
    }

    /// Every `--set` of this cell's run: the safe settings (with `flush.messages=1` under
    /// [`FLUSHED_PLANS`]) and the bug's switch.
    pub fn sets(&self) -> BTreeMap<String, String> {
        let mut sets: BTreeMap<String, String> = SAFE_SETTINGS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if self
            .column
            .plan
            .as_deref()
            .is_some_and(|plan| FLUSHED_PLANS.contains(&plan))
        {
            sets.insert("flush.messages".into(), "1".into());
        }
        if let Some(setting) = self.bug_setting() {
            sets.insert(setting, "true".into());
        }
        sets
    }

    /// The test name of the run (`store/<name>/<timestamp>/`).
    pub fn run_name(&self) -> String {
        format!(
            "detect-{}-{}-s{}",
            self.bug,
            self.column.plan.as_deref().unwrap_or("random"),
            self.column.seed
        )
    }
}

/// What one run showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum CellOutcome {
    /// The run reached a verdict.
    Checked {
        /// `valid`, `invalid` or `unknown`.
        valid: String,
        /// Anomaly name -> count, of the anomalies that invalidate the history.
        anomalies: BTreeMap<String, u64>,
        /// `stats.lost_acknowledged.total`.
        lost: u64,
        /// The run directory.
        run_dir: PathBuf,
        /// Seconds into the run (history time) of the earliest operation an invalidating
        /// anomaly names, among the examples results.json keeps; `None` for a valid run or
        /// when no example names an operation. See [`first_anomaly_s`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_anomaly_s: Option<f64>,
        /// Wall-clock seconds of the whole run (setup to report), when measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_s: Option<f64>,
    },
    /// The run ended without a verdict (setup failed, harness error).
    Errored {
        /// Why, with the exit code.
        error: String,
        /// The run directory, if one was created.
        run_dir: Option<PathBuf>,
        /// Wall-clock seconds the attempt took, when measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_s: Option<f64>,
    },
}

impl CellOutcome {
    /// The outcome of a run whose results are `results`.
    pub fn from_results(results: &CheckResults, run_dir: &Path) -> CellOutcome {
        let anomalies = results
            .anomalies
            .iter()
            .filter(|(_, a)| a.invalidates)
            .map(|(name, a)| (name.clone(), a.count))
            .collect();
        let lost = results.stats["lost_acknowledged"]["total"]
            .as_u64()
            .unwrap_or(0);
        let valid = match results.valid {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        };
        CellOutcome::Checked {
            valid: valid.into(),
            anomalies,
            lost,
            run_dir: run_dir.to_path_buf(),
            first_anomaly_s: None,
            wall_s: None,
        }
    }

    /// The wall-clock seconds of the run, when measured.
    pub fn wall_s(&self) -> Option<f64> {
        match self {
            CellOutcome::Checked { wall_s, .. } | CellOutcome::Errored { wall_s, .. } => *wall_s,
        }
    }

    /// The time of the first invalidating anomaly, for a run that caught something.
    pub fn first_anomaly_s(&self) -> Option<f64> {
        match self {
            CellOutcome::Checked {
                first_anomaly_s, ..
            } if self.caught() => *first_anomaly_s,
            _ => None,
        }
    }

    /// Whether the run caught something: the history is invalid.
    pub fn caught(&self) -> bool {
        matches!(self, CellOutcome::Checked { valid, .. } if valid == "invalid")
    }

    /// The table cell: `CAUGHT lost-write 3, unseen 2 (lost 5)`, `-`, `unknown`, `error`.
    pub fn render(&self) -> String {
        match self {
            CellOutcome::Checked {
                valid,
                anomalies,
                lost,
                ..
            } => {
                if valid != "invalid" {
                    return if valid == "valid" {
                        "-".into()
                    } else {
                        valid.clone()
                    };
                }
                let names: Vec<String> = anomalies
                    .iter()
                    .map(|(name, count)| format!("{name} {count}"))
                    .collect();
                format!("**CAUGHT** {} (lost {lost})", names.join(", "))
            }
            CellOutcome::Errored { .. } => "error".into(),
        }
    }
}

/// The operation indices an anomaly's example names: every `*_op` number and every number of
/// an `ops` list (the example shapes of docs/checkers.md).
fn example_ops(example: &Value, out: &mut Vec<u64>) {
    let Value::Object(fields) = example else {
        return;
    };
    for (key, value) in fields {
        if key.ends_with("_op") {
            out.extend(value.as_u64());
        } else if key == "ops" {
            out.extend(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64),
            );
        }
    }
}

/// Seconds into the run (the history's `time`, from the test's start) of the earliest
/// operation that an invalidating anomaly of `results` names in its examples, looked up in
/// `history` (the text of history.jsonl). results.json keeps a few examples per anomaly, not
/// every instance, so this bounds the first anomaly from above; `None` when no invalidating
/// example names an operation that the history holds.
pub fn first_anomaly_s(results: &CheckResults, history: &str) -> Option<f64> {
    let mut ops = Vec::new();
    for anomaly in results.anomalies.values().filter(|a| a.invalidates) {
        for example in &anomaly.examples {
            example_ops(example, &mut ops);
        }
    }
    let wanted: std::collections::BTreeSet<u64> = ops.into_iter().collect();
    history
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|op| op["index"].as_u64().is_some_and(|i| wanted.contains(&i)))
        .filter_map(|op| op["time"].as_u64())
        .min()
        .map(|ns| ns as f64 / 1e9)
}

/// The 95% Wilson score interval of `caught` in `runs` Bernoulli trials, as fractions: the
/// interval for a catch rate that stays inside [0, 1] and is honest at 0 of n and n of n.
pub fn wilson_interval(caught: u64, runs: u64) -> (f64, f64) {
    if runs == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (caught as f64, runs as f64, 1.959_963_984_540_054_f64);
    let p = k / n;
    let denominator = 1.0 + z * z / n;
    let center = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    // At 0 of n and n of n the bound is exactly 0 or 1; rounding would leave 0.9999999.
    let low = if caught == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let high = if caught == runs {
        1.0
    } else {
        (center + half).min(1.0)
    };
    (low, high)
}

/// The median of `values` (the mean of the middle two for an even count), `None` if empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// A bug under one schedule (the random schedule or a plan) over every seed that ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// The bug's short name or `none`.
    pub bug: String,
    /// `random` or the plan's name.
    pub schedule: String,
    /// Runs that reached a verdict.
    pub runs: u64,
    /// Of them, runs whose history was invalid.
    pub caught: u64,
    /// Runs that ended without a verdict (not counted in `runs`).
    pub errors: u64,
    /// The 95% Wilson interval of `caught / runs`.
    pub interval: (f64, f64),
    /// The median over catching runs of [`CellOutcome::first_anomaly_s`].
    pub median_first_anomaly_s: Option<f64>,
    /// Wall-clock minutes of all this row's runs (errors too) per catch; `None` without a
    /// catch or when a run's time is unknown.
    pub machine_min_per_catch: Option<f64>,
}

impl Rate {
    /// `9/10`, `90% (60-98%)`.
    fn rate_text(&self) -> String {
        if self.runs == 0 {
            return "-".into();
        }
        let pct = |x: f64| (x * 100.0).round() as u64;
        format!(
            "{}% ({}-{}%)",
            pct(self.caught as f64 / self.runs as f64),
            pct(self.interval.0),
            pct(self.interval.1)
        )
    }
}

/// The benchmark's plan and what it found so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DetectionTable {
    /// Rows: bug short names, `none` last.
    pub bugs: Vec<String>,
    /// Columns: random seeds first, then the plans.
    pub columns: Vec<Column>,
    /// The time limit of every run, in seconds.
    pub time_limit_s: u64,
    /// The flags that chose every run's workload (` --workload txn`, ` --idempotence`, or
    /// empty for the queue workload of `tidewater run`), said in the table's header; `None`
    /// in tables written before it existed (their workload is not known).
    #[serde(default)]
    pub workload_flags: Option<String>,
    /// Results so far, keyed by (bug, column label).
    pub results: Vec<(Cell, CellOutcome)>,
}

impl DetectionTable {
    /// Plans `bugs` (plus `none`) x (the random schedule with seeds `1..=seeds`, then each of
    /// `plans` with seeds `1..=plan_seeds`). Every run of the table is a [`Cell`], in row order.
    pub fn plan(
        bugs: &[String],
        plans: &[String],
        seeds: u64,
        plan_seeds: u64,
        time_limit_s: u64,
    ) -> Self {
        let mut rows: Vec<String> = bugs.iter().filter(|b| *b != NO_BUG).cloned().collect();
        rows.push(NO_BUG.into());
        let mut columns: Vec<Column> = (1..=seeds)
            .map(|seed| Column { plan: None, seed })
            .collect();
        columns.extend(plans.iter().flat_map(|p| {
            (1..=plan_seeds).map(move |seed| Column {
                plan: Some(p.clone()),
                seed,
            })
        }));
        DetectionTable {
            bugs: rows,
            columns,
            time_limit_s,
            workload_flags: Some(String::new()),
            results: Vec::new(),
        }
    }

    /// Every run, in the order to run them: column by column (the random schedule first), each
    /// over every row, so a partial benchmark covers every bug under the first columns.
    pub fn cells(&self) -> Vec<Cell> {
        self.columns
            .iter()
            .flat_map(|column| {
                self.bugs.iter().map(move |bug| Cell {
                    bug: bug.clone(),
                    column: column.clone(),
                })
            })
            .collect()
    }

    /// Takes over the verdicts of `earlier` (a table written by an interrupted or another
    /// benchmark) for the cells this table plans, so they are not run again. A cell that
    /// ended without a verdict (setup failed, harness error) is run again.
    pub fn resume_from(&mut self, earlier: &DetectionTable) {
        let cells = self.cells();
        for (cell, outcome) in &earlier.results {
            let verdict = matches!(outcome, CellOutcome::Checked { .. });
            if verdict && cells.contains(cell) && self.outcome(cell).is_none() {
                self.results.push((cell.clone(), outcome.clone()));
            }
        }
    }

    /// The outcome of `cell`, if it ran.
    pub fn outcome(&self, cell: &Cell) -> Option<&CellOutcome> {
        self.results
            .iter()
            .rev()
            .find(|(c, _)| c == cell)
            .map(|(_, o)| o)
    }

    /// The schedules of the columns, in column order: `random` first, then each plan once.
    pub fn schedules(&self) -> Vec<Option<String>> {
        let mut out: Vec<Option<String>> = Vec::new();
        for column in &self.columns {
            if !out.contains(&column.plan) {
                out.push(column.plan.clone());
            }
        }
        out
    }

    /// Every bug under every schedule, over the seeds that ran: row by row, schedule by
    /// schedule.
    pub fn rates(&self) -> Vec<Rate> {
        let mut out = Vec::new();
        for bug in &self.bugs {
            for schedule in self.schedules() {
                let outcomes: Vec<&CellOutcome> = self
                    .columns
                    .iter()
                    .filter(|c| c.plan == schedule)
                    .filter_map(|column| {
                        self.outcome(&Cell {
                            bug: bug.clone(),
                            column: column.clone(),
                        })
                    })
                    .collect();
                let errors = outcomes
                    .iter()
                    .filter(|o| matches!(o, CellOutcome::Errored { .. }))
                    .count() as u64;
                let runs = outcomes.len() as u64 - errors;
                let caught = outcomes.iter().filter(|o| o.caught()).count() as u64;
                let walls: Option<Vec<f64>> = outcomes.iter().map(|o| o.wall_s()).collect();
                out.push(Rate {
                    bug: bug.clone(),
                    schedule: schedule.clone().unwrap_or_else(|| "random".into()),
                    runs,
                    caught,
                    errors,
                    interval: wilson_interval(caught, runs),
                    median_first_anomaly_s: median(
                        outcomes
                            .iter()
                            .filter_map(|o| o.first_anomaly_s())
                            .collect(),
                    ),
                    machine_min_per_catch: walls
                        .filter(|_| caught > 0)
                        .map(|w| w.iter().sum::<f64>() / 60.0 / caught as f64),
                });
            }
        }
        out
    }

    /// The rate table: a row per bug and schedule, over the seeds that ran.
    pub fn render_rates(&self) -> String {
        let mut out = String::from(
            "| bug | schedule | caught | rate (95% CI) | median first anomaly | machine min per catch |\n\
             |---|---|---|---|---|---|\n",
        );
        for rate in self.rates().iter().filter(|r| r.runs + r.errors > 0) {
            let errors = if rate.errors > 0 {
                format!(" (+{} error)", rate.errors)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "| `{}` | {} | {}/{}{errors} | {} | {} | {} |\n",
                rate.bug,
                rate.schedule,
                rate.caught,
                rate.runs,
                rate.rate_text(),
                rate.median_first_anomaly_s
                    .map_or("-".into(), |s| format!("{s:.1} s")),
                rate.machine_min_per_catch
                    .map_or("-".into(), |m| format!("{m:.1}")),
            ));
        }
        out
    }

    /// The markdown table: a row per bug, a column per plan/seed, then the summary lines.
    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        let workload = match self.workload_flags.as_deref().map(str::trim) {
            None => None,
            Some("") => Some("the queue workload of `tidewater run`".to_string()),
            Some(flags) => Some(format!("`{flags}`")),
        };
        if let Some(workload) = workload {
            out.push_str(&format!("Workload of every run: {workload}. "));
        }
        out.push_str(&format!(
            "Settings of every run: acks=all, min.insync.replicas=2, unclean.leader.election.enable=false, --time-limit {}; \
             `power-loss-cluster` also flush.messages=1 (a power cut of every broker takes unsynced writes from a correct broker too). \
             A cell is **CAUGHT** when the history is invalid (the invalidating anomalies with their counts, and `stats.lost_acknowledged`), \
             `-` when the run was valid, `unknown` when it could not tell, `error` when it ended without a verdict, and empty when it did not run.\n\n",
            self.time_limit_s
        ));
        out.push_str("| bug |");
        for column in &self.columns {
            out.push_str(&format!(" {} |", column.label()));
        }
        out.push_str(" caught |\n|---|");
        out.push_str(&"---|".repeat(self.columns.len() + 1));
        out.push('\n');
        for bug in &self.bugs {
            out.push_str(&format!("| `{bug}` |"));
            let (mut ran, mut caught) = (0, 0);
            for column in &self.columns {
                let cell = Cell {
                    bug: bug.clone(),
                    column: column.clone(),
                };
                let text = match self.outcome(&cell) {
                    Some(o) => {
                        ran += 1;
                        caught += o.caught() as u32;
                        o.render()
                    }
                    None => String::new(),
                };
                out.push_str(&format!(" {text} |"));
            }
            out.push_str(&format!(" {caught}/{ran} |\n"));
        }
        let none_runs: Vec<&CellOutcome> = self
            .results
            .iter()
            .filter(|(c, _)| c.bug == NO_BUG)
            .map(|(_, o)| o)
            .collect();
        let false_alarms = none_runs.iter().filter(|o| o.caught()).count();
        out.push_str(&format!(
            "\nUnmodified broker (`none`): {} run(s), {} with an invalidating anomaly (false alarms).\n",
            none_runs.len(),
            false_alarms
        ));
        out.push_str(
            "\nRates per bug and schedule over the seeds that ran (for `none`, the false alarms). \
             The interval is the 95% Wilson score interval; the first anomaly is the earliest \
             operation an invalidating anomaly's examples name (seconds since the test started), \
             median over the catching runs; machine minutes per catch are the wall time of all \
             the row's runs, divided by its catches.\n\n",
        );
        out.push_str(&self.render_rates());
        out
    }

    /// The command that runs the rest of this table (or all of it again).
    pub fn reproduce_command(&self, store: &Path, workload_flags: &str) -> String {
        let bugs: Vec<&str> = self
            .bugs
            .iter()
            .filter(|b| *b != NO_BUG)
            .map(String::as_str)
            .collect();
        let plans: Vec<String> = self.schedules().into_iter().flatten().collect();
        let plan_seeds = self
            .columns
            .iter()
            .filter(|c| c.plan.is_some())
            .map(|c| c.seed)
            .max()
            .unwrap_or(1);
        let plan_seeds = if plan_seeds == 1 {
            String::new()
        } else {
            format!(" --plan-seeds {plan_seeds}")
        };
        let seeds = self.columns.iter().filter(|c| c.plan.is_none()).count();
        let first_seed = self
            .columns
            .iter()
            .filter(|c| c.plan.is_none())
            .map(|c| c.seed)
            .min()
            .unwrap_or(1);
        let first = if first_seed == 1 {
            String::new()
        } else {
            format!(" --first-seed {first_seed}")
        };
        // A table of the unmodified broker alone is `--bugs none`; one without its row was
        // planned with `--skip-none`.
        let skip_none = if self.bugs.iter().any(|b| b == NO_BUG) {
            ""
        } else {
            " --skip-none"
        };
        format!(
            "tidewater detect{workload_flags} --bugs {} --plans {} --seeds {seeds}{first}{plan_seeds}{skip_none} --time-limit {} --store {}",
            if bugs.is_empty() {
                NO_BUG.into()
            } else {
                bugs.join(",")
            },
            if plans.is_empty() {
                "none".into()
            } else {
                plans.join(",")
            },
            self.time_limit_s,
            store.display()
        )
    }
}

/// The plans shipped in `harness/plans/` (by name, sorted).
pub fn shipped_plans() -> Vec<String> {
    let mut names: Vec<String> = crate::nemesis::plan::BUILTIN_PLANS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    names.sort();
    names
}

/// Runs every cell of `table` not yet run with `run_one`, `jobs` at a time (each call gets
/// its worker's number, 0 to `jobs - 1`, so concurrent runs can use different subnets),
/// writing `markdown` and `json` after each run, and returns the finished table.
pub fn run_detection(
    mut table: DetectionTable,
    markdown: &Path,
    json: &Path,
    jobs: usize,
    run_one: impl Fn(&Cell, usize) -> CellOutcome + Sync,
) -> std::io::Result<DetectionTable> {
    let cells: Vec<Cell> = table
        .cells()
        .into_iter()
        .filter(|c| table.outcome(c).is_none())
        .take(RUNS_MAX)
        .collect();
    write_table(&table, markdown, json)?;
    let queue = std::sync::Mutex::new(cells.into_iter());
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for worker in 0..jobs.max(1) {
            let (queue, done, run_one) = (&queue, done.clone(), &run_one);
            scope.spawn(move || loop {
                let next = queue.lock().expect("the queue's lock").next();
                let Some(cell) = next else { break };
                let outcome = run_one(&cell, worker);
                // A run a signal stopped is no result: a resumed table runs the cell again.
                if crate::cluster::guard::interrupted() {
                    break;
                }
                if done.send((cell, outcome)).is_err() {
                    break;
                }
            });
        }
        drop(done);
        for (cell, outcome) in finished {
            table.results.push((cell, outcome));
            write_table(&table, markdown, json)?;
        }
        Ok(table)
    })
}

fn write_table(table: &DetectionTable, markdown: &Path, json: &Path) -> std::io::Result<()> {
    if let Some(dir) = markdown.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(markdown, table.render_markdown())?;
    let text = serde_json::to_string_pretty(table).map_err(std::io::Error::other)?;
    std::fs::write(json, text)
}

/// `tidewater detect`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  tidewater detect --bugs ack.before.replication --plans none --seeds 1 --time-limit 30
  tidewater detect --seeds 3   # every bug and none x random seeds 1..3 and every shipped plan
  tidewater detect --workload group --plans none --seeds 10   # the group coordinator's bugs

Every run: acks=all, min.insync.replicas=2, unclean.leader.election.enable=false (and
flush.messages=1 under power-loss-cluster), plus the bug's tidewater.bug.NAME.enable=true. Without --broker-bin the broker is built with the cargo
feature deliberate-bugs. Exit codes: 0 the table was written, 3 bad flags, 5 harness error.")]
#[command(allow_negative_numbers = true)]
pub struct DetectArgs {
    /// Bugs to run, comma-separated short names (see docs/detection.md); the unmodified broker
    /// (`none`) is always added.
    #[arg(long, value_name = "NAMES", default_value = "all")]
    pub bugs: String,
    /// Shipped plans to run, comma-separated, `all` or `none`.
    #[arg(long, value_name = "NAMES", default_value = "all")]
    pub plans: String,
    /// Seeds of each plan: 1 to N (the plans' steps are fixed; the seed varies the workload
    /// and the steps' random targets).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub plan_seeds: u64,
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
    /// Client workers of every run, instead of `tidewater run`'s default (for tuning the
    /// default run against the table).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Client operations per second of every run (0 = as fast as possible), instead of the
    /// default.
    #[arg(long, value_name = "OPS")]
    pub rate: Option<f64>,
    /// The queue workload's share of the rate and workers given to t0/0, the partition the
    /// faults aim at, instead of `tidewater run`'s default (0.5; 0: every partition alike).
    #[arg(long, value_name = "SHARE")]
    pub focus: Option<f64>,
    /// Seconds between the random schedule's faults, instead of the default.
    #[arg(long, value_name = "SECS")]
    pub nemesis_interval: Option<f64>,
    /// Faults of the random schedule, as `tidewater run --nemesis` takes them (e.g.
    /// `kill,pause,partition,power-loss`), instead of the default `kill,pause,partition`.
    #[arg(long, value_name = "KINDS")]
    pub nemesis: Option<String>,
    /// The workload of every run: queue (the default run's), txn (transactions over Kafka's
    /// Java client; `--bugs all` then means the transactional bugs) or group (consumer groups
    /// over HTTP, as `tidewater run --workload group`; `--bugs all` then means the group
    /// coordinator's bugs).
    #[arg(long, value_name = "NAME", default_value = "queue", value_parser = ["queue", "txn", "group"])]
    pub workload: String,
    /// The queue workload with idempotent producers (enable.idempotence=true over Kafka's
    /// Java client, where a duplicate is a violation); `--bugs all` then means the
    /// idempotence bugs.
    #[arg(long)]
    pub idempotence: bool,
    /// Runs at once. With more than 1, each run is a `tidewater run` process of its own on a
    /// /24 of its own: --subnet (default 10.77.0.0/24) with its third number raised by the
    /// worker's number, so 10.77.0.0/24, 10.77.1.0/24, ...
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,
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
    let seeds_max = RUNS_MAX as u64;
    for (flag, seeds) in [("--seeds", args.seeds), ("--plan-seeds", args.plan_seeds)] {
        if seeds > seeds_max {
            return Err(format!(
                "{flag} {seeds} is more than the {seeds_max} runs a benchmark holds"
            ));
        }
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
    if let Some(kinds) = &args.nemesis {
        crate::nemesis::parse_faults(kinds).map_err(|e| e.0)?;
    }
    if args.focus.is_some() {
        // Its range and its workload, as `tidewater run --focus` checks them.
        base_config(args).validate()?;
    }
    if args.idempotence && args.workload == "txn" {
        return Err(
            "--idempotence is for the queue workload: the txn workload's producers are \
             transactional, hence idempotent, already"
                .into(),
        );
    }
    if args.idempotence && args.workload == "group" {
        return Err(
            "--idempotence is for the queue workload: the group workload's members run over \
             HTTP, which has no idempotent producer"
                .into(),
        );
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

/// The most runs `--jobs` starts at once.
pub const JOBS_MAX: usize = 16;

/// The /24 of each worker under `--jobs`: `--subnet` (or the local cluster's default) with its
/// third number raised by the worker's number. Refused before anything starts when one would
/// pass 255 or leave the private ranges.
fn worker_subnets(args: &DetectArgs) -> Result<Vec<String>, String> {
    if args.jobs == 0 || args.jobs > JOBS_MAX {
        return Err(format!(
            "--jobs {} is not between 1 and {JOBS_MAX}",
            args.jobs
        ));
    }
    let base = match &args.subnet {
        Some(s) => crate::cluster::local::LocalSpec::parse_subnet(s).map_err(|e| e.to_string())?,
        None => crate::cluster::local::DEFAULT_SUBNET,
    };
    let [a, b, c, _] = base.octets();
    (0..args.jobs)
        .map(|worker| {
            let third = u8::try_from(c as usize + worker).map_err(|_| {
                format!(
                    "--jobs {} from subnet {base}/24 runs past {a}.{b}.255.0/24",
                    args.jobs
                )
            })?;
            let subnet = format!("{a}.{b}.{third}.0/24");
            crate::cluster::local::LocalSpec::parse_subnet(&subnet).map_err(|e| e.to_string())?;
            Ok(subnet)
        })
        .collect()
}

/// A `tidewater run` process of the benchmark, stopped with its own teardown when the
/// benchmark is interrupted.
struct ChildRun {
    pid: u32,
    name: String,
    /// Set by the first teardown: a second SIGINT would make the run exit at once, before
    /// its own teardown is done.
    signalled: std::sync::atomic::AtomicBool,
}

/// How long an interrupted run is given to heal, stop its nodes and record itself.
const CHILD_TEARDOWN_MAX: std::time::Duration = std::time::Duration::from_secs(120);

impl crate::cluster::guard::Teardown for ChildRun {
    /// SIGINT, as a Ctrl-C in the terminal would send it, then waits until the run is gone.
    fn teardown(&self) -> crate::cluster::Result<()> {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        if !self
            .signalled
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        }
        let started = std::time::Instant::now();
        // The thread that waits for the run reaps it; until then it answers signal 0.
        while nix::sys::signal::kill(pid, None).is_ok() {
            if started.elapsed() > CHILD_TEARDOWN_MAX {
                return Err(crate::cluster::Error::State(format!(
                    "tidewater run {} (pid {}) still running {} s after SIGINT; \
                     run `tidewater clean`",
                    self.name,
                    self.pid,
                    CHILD_TEARDOWN_MAX.as_secs()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Ok(())
    }

    fn label(&self) -> String {
        format!("tidewater run {} (pid {})", self.name, self.pid)
    }
}

/// Runs `config` as a `tidewater run` process of this binary on `subnet`, its output kept
/// out of the benchmark's; the exit code and the run directory it printed.
fn run_as_process(
    config: &crate::runner::config::RunConfig,
    target: &RunTarget,
    subnet: &str,
) -> (i32, Option<crate::store::RunDir>) {
    // The running image, not the path it was started from: a table runs for an hour, and a
    // `cargo build` meanwhile replaces the file at that path (or leaves it half written).
    let self_exe = std::path::Path::new("/proc/self/exe");
    let exe = if self_exe.exists() {
        self_exe.to_path_buf()
    } else {
        match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                eprintln!("tidewater: detect: cannot find this executable: {e}");
                return (EXIT_HARNESS, None);
            }
        }
    };
    if crate::cluster::guard::interrupted() {
        // The benchmark is being stopped: its signal thread is tearing the runs down.
        return (EXIT_HARNESS, None);
    }
    let mut command = std::process::Command::new(exe);
    command
        .arg("run")
        .args(config.run_args())
        .arg("--store")
        .arg(&target.store)
        .args(["--subnet", subnet, "--plain"]);
    let child = match command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("tidewater: detect: cannot start tidewater run: {e}");
            return (EXIT_HARNESS, None);
        }
    };
    // A signal to the benchmark reaches its runs: each tears its own cluster down.
    let guard: std::sync::Arc<dyn crate::cluster::guard::Teardown> =
        std::sync::Arc::new(ChildRun {
            pid: child.id(),
            name: config.name.clone(),
            signalled: false.into(),
        });
    crate::cluster::guard::register(std::sync::Arc::downgrade(&guard));
    if crate::cluster::guard::interrupted() {
        // The signal came between the check above and the registration: the signal thread
        // may not have seen this run, so it is stopped here (once, whoever is first).
        let _ = guard.teardown();
    }
    let output = child.wait_with_output();
    drop(guard);
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            eprintln!("tidewater: detect: tidewater run {}: {e}", config.name);
            return (EXIT_HARNESS, None);
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("run directory: "))
        .and_then(|path| crate::store::RunDir::open(Path::new(path.trim())).ok());
    let code = output.status.code().unwrap_or(EXIT_HARNESS);
    if !matches!(code, 0..=2) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        eprintln!(
            "tidewater: detect: {} on {subnet} ended with exit code {code}: {}",
            config.name,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    (code, dir)
}

/// The outcome of one run that ended with `code` in `dir` after `wall_s` seconds.
fn outcome_of_run(code: i32, dir: Option<crate::store::RunDir>, wall_s: f64) -> CellOutcome {
    let dir = match dir {
        Some(dir) if matches!(code, 0 | 1 | 2 | runner::EXIT_LIVENESS) => dir,
        dir => {
            return CellOutcome::Errored {
                error: format!("the run ended with exit code {code}"),
                run_dir: dir.map(|d| d.path),
                wall_s: Some(wall_s),
            }
        }
    };
    let results = std::fs::read_to_string(dir.results())
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<CheckResults>(&t).map_err(|e| e.to_string()));
    match results {
        Ok(results) => {
            let history = std::fs::read_to_string(dir.history()).unwrap_or_default();
            let mut outcome = CellOutcome::from_results(&results, &dir.path);
            if let CellOutcome::Checked {
                first_anomaly_s: first,
                wall_s: wall,
                ..
            } = &mut outcome
            {
                *first = first_anomaly_s(&results, &history);
                *wall = Some(wall_s);
            }
            outcome
        }
        Err(e) => CellOutcome::Errored {
            error: format!("results unreadable: {e}"),
            run_dir: Some(dir.path),
            wall_s: Some(wall_s),
        },
    }
}

/// The run every cell starts from: `tidewater run`'s default, with the workload (and for
/// `txn` the Java client of transactional producers, for `--idempotence` the Java client of
/// idempotent ones; `group` keeps the HTTP client, as `tidewater run --workload group` does)
/// and the tuning flags given.
fn base_config(args: &DetectArgs) -> crate::runner::config::RunConfig {
    let mut base = default_config("detect");
    if args.workload != "queue" {
        // Only the queue workload has lanes to focus.
        base.focus = 0.0;
    }
    if args.workload == "group" {
        base.workload = "group".into();
    } else if args.workload == "txn" {
        base.workload = "txn".into();
        base.client = "java".into();
        base.java_client = Some(tidewater_workloads::java::ClientConfigs::for_run(
            "txn", "all", false,
        ));
    } else if args.idempotence {
        base.idempotence = true;
        base.client = "java".into();
        base.java_client = Some(tidewater_workloads::java::ClientConfigs::for_run(
            "queue", "all", true,
        ));
    }
    if let Some(n) = args.concurrency {
        base.concurrency = n;
    }
    if let Some(rate) = args.rate {
        base.rate = rate;
    }
    if let Some(share) = args.focus {
        base.focus = share;
    }
    if let Some(secs) = args.nemesis_interval {
        base.nemesis_interval_s = secs;
    }
    if let Some(kinds) = &args.nemesis {
        base.nemesis = kinds.split(',').map(|k| k.trim().to_string()).collect();
    }
    base
}

/// The flags of `args` that choose the workload and the random schedule's faults, as a
/// rerun needs them (with a leading space).
fn workload_flags(args: &DetectArgs) -> String {
    let workload = if args.workload == "txn" {
        " --workload txn"
    } else if args.workload == "group" {
        " --workload group"
    } else if args.idempotence {
        " --idempotence"
    } else {
        ""
    };
    let focus = match args.focus {
        Some(share) => format!(" --focus {share}"),
        None => String::new(),
    };
    match &args.nemesis {
        Some(kinds) => format!("{workload}{focus} --nemesis {kinds}"),
        None => format!("{workload}{focus}"),
    }
}

/// The bugs `--bugs all` means for the workload: the transactional ones for `txn`, the group
/// coordinator's for `group`, the idempotence ones for the queue workload with
/// `--idempotence`.
fn default_bugs(args: &DetectArgs) -> Vec<String> {
    let names: &[&str] = if args.workload == "txn" {
        &TXN_BUGS
    } else if args.workload == "group" {
        &GROUP_BUGS
    } else if args.idempotence {
        &IDEMPOTENCE_BUGS
    } else {
        &BUGS
    };
    names.iter().map(|b| b.to_string()).collect()
}

pub(crate) fn detect_command(args: &DetectArgs) -> i32 {
    if let Err(e) = check_detect_flags(args) {
        eprintln!("tidewater: detect: {e}");
        return EXIT_SETUP;
    }
    let all_bugs = default_bugs(args);
    let bugs = name_list(&args.bugs, &all_bugs);
    let plans = name_list(&args.plans, &shipped_plans());
    let mut table =
        DetectionTable::plan(&bugs, &plans, args.seeds, args.plan_seeds, args.time_limit);
    table.workload_flags = Some(workload_flags(args));
    for column in table.columns.iter_mut().filter(|c| c.plan.is_none()) {
        column.seed += args.first_seed.saturating_sub(1);
    }
    if args.skip_none {
        table.bugs.retain(|b| b != NO_BUG);
    }
    let markdown = args
        .out
        .clone()
        .unwrap_or_else(|| args.store.join("detect").join("detection.md"));
    let json = markdown.with_extension("json");
    // A table already at --out (an interrupted benchmark) is resumed: its runs are kept.
    if let Ok(text) = std::fs::read_to_string(&json) {
        match serde_json::from_str::<DetectionTable>(&text) {
            // Runs of another workload are not this table's: refused before anything runs,
            // and the earlier table is left as it is.
            Ok(earlier)
                if earlier
                    .workload_flags
                    .as_ref()
                    .is_some_and(|f| Some(f) != table.workload_flags.as_ref()) =>
            {
                eprintln!(
                    "tidewater: detect: {} holds a table of another workload ({:?}, this one {:?}); \
                     give another --out",
                    json.display(),
                    earlier.workload_flags.unwrap_or_default().trim(),
                    workload_flags(args).trim()
                );
                return EXIT_SETUP;
            }
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
    let subnets = match worker_subnets(args) {
        Ok(subnets) => subnets,
        Err(e) => {
            eprintln!("tidewater: detect: {e}");
            return EXIT_SETUP;
        }
    };
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
    let base = base_config(args);
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
    let result = run_detection(table, &markdown, &json, args.jobs, |cell, worker| {
        let (_, config) = configs
            .iter()
            .find(|(c, _)| c == cell)
            .expect("every cell was planned");
        let started = std::time::Instant::now();
        let (code, dir) = if args.jobs > 1 {
            println!(
                "detect: {} under {} on {}",
                cell.bug,
                cell.column.label(),
                subnets[worker]
            );
            run_as_process(config, &target, &subnets[worker])
        } else {
            println!("detect: {} under {}", cell.bug, cell.column.label());
            execute_run(config.clone(), &target, &runtime)
        };
        outcome_of_run(code, dir, started.elapsed().as_secs_f64())
    });
    if crate::cluster::guard::interrupted() {
        // The signal thread is stopping the runs; it exits with 128 + the signal when done.
        eprintln!(
            "tidewater: detect: interrupted; {} holds the cells that finished (rerun with \
             the same --out to go on)",
            markdown.display()
        );
        loop {
            std::thread::park();
        }
    }
    match result {
        Ok(table) => {
            println!("detection table: {}", markdown.display());
            println!(
                "rerun: {}",
                table.reproduce_command(&args.store, &workload_flags(args))
            );
            0
        }
        Err(e) => {
            eprintln!("tidewater: detect: {e}");
            EXIT_HARNESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> DetectionTable {
        DetectionTable::plan(
            &["ack.before.replication".into(), "no.epoch.bump".into()],
            &["leader-isolation".into()],
            2,
            1,
            60,
        )
    }

    #[test]
    fn the_txn_workload_runs_the_txn_bugs_over_the_java_client() {
        let txn = parse_detect(&["detect", "--workload", "txn", "--rate", "50"]).unwrap();
        assert_eq!(default_bugs(&txn), TXN_BUGS);
        let base = base_config(&txn);
        assert_eq!(
            (base.workload.as_str(), base.client.as_str()),
            ("txn", "java")
        );
        assert_eq!(base.rate, 50.0);
        base.validate().unwrap();
        let configs = base.java_client_configs().unwrap();
        assert_eq!(configs.merged()["isolation.level"], "read_committed");
        let queue = parse_detect(&["detect"]).unwrap();
        assert_eq!(default_bugs(&queue), BUGS);
        assert_eq!(base_config(&queue).client, "http");
        let idempotent = parse_detect(&["detect", "--idempotence"]).unwrap();
        assert_eq!(default_bugs(&idempotent), IDEMPOTENCE_BUGS);
        assert_eq!(workload_flags(&idempotent), " --idempotence");
        assert_eq!(workload_flags(&txn), " --workload txn");
        assert_eq!(workload_flags(&queue), "");
        let base = base_config(&idempotent);
        assert_eq!(
            (base.workload.as_str(), base.client.as_str()),
            ("queue", "java")
        );
        base.validate().unwrap();
        let configs = base.java_client_configs().unwrap();
        assert_eq!(configs.merged()["enable.idempotence"], "true");
        // What the runs get: the command line of a cell's run says so too.
        assert!(base.idempotence);
        assert!(base.command_line().contains(" --idempotence"));
        assert!(parse_detect(&["detect", "--workload", "stream"]).is_err());
        // --nemesis: the random schedule's faults of every run, in the table's flags (so a
        // resumed --out must have the same), refused before anything runs when unknown.
        let power =
            parse_detect(&["detect", "--nemesis", "kill,pause,partition,power-loss"]).unwrap();
        check_detect_flags(&power).unwrap();
        assert_eq!(
            base_config(&power).nemesis,
            ["kill", "pause", "partition", "power-loss"]
        );
        assert_eq!(
            workload_flags(&power),
            " --nemesis kill,pause,partition,power-loss"
        );
        assert_eq!(base_config(&queue).nemesis, ["kill", "pause", "partition"]);
        let bad = parse_detect(&["detect", "--nemesis", "kill,flood"]).unwrap();
        let e = check_detect_flags(&bad).unwrap_err();
        assert!(e.contains("flood"), "{e}");
    }

    #[test]
    fn focus_is_the_runs_default_unless_given_and_only_for_the_queue_workload() {
        let queue = parse_detect(&["detect"]).unwrap();
        assert_eq!(base_config(&queue).focus, crate::launch::DEFAULT_FOCUS);
        // The "before" of the focus: every partition alike, in the table's flags.
        let even = parse_detect(&["detect", "--focus", "0"]).unwrap();
        check_detect_flags(&even).unwrap();
        assert_eq!(base_config(&even).focus, 0.0);
        assert!(base_config(&even).command_line().contains(" --focus 0 "));
        assert_eq!(workload_flags(&even), " --focus 0");
        let idem = parse_detect(&["detect", "--idempotence", "--focus", "0.75"]).unwrap();
        check_detect_flags(&idem).unwrap();
        assert_eq!(workload_flags(&idem), " --idempotence --focus 0.75");
        // The txn and group workloads choose their partitions themselves.
        for workload in ["txn", "group"] {
            let plain = parse_detect(&["detect", "--workload", workload]).unwrap();
            assert_eq!(base_config(&plain).focus, 0.0);
            base_config(&plain).validate().unwrap();
            let focused =
                parse_detect(&["detect", "--workload", workload, "--focus", "0.5"]).unwrap();
            let e = check_detect_flags(&focused).unwrap_err();
            assert!(e.contains("--focus is for the queue workload"), "{e}");
        }
        for bad in ["1", "-0.5", "NaN"] {
            let e = check_detect_flags(&parse_detect(&["detect", "--focus", bad]).unwrap())
                .unwrap_err();
            assert!(e.contains("--focus"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_group_workload_runs_the_group_bugs_over_http() {
        let group = parse_detect(&["detect", "--workload", "group", "--seeds", "10"]).unwrap();
        assert_eq!(default_bugs(&group), GROUP_BUGS);
        assert_eq!(workload_flags(&group), " --workload group");
        check_detect_flags(&group).unwrap();
        let base = base_config(&group);
        assert_eq!(
            (base.workload.as_str(), base.client.as_str()),
            ("group", "http")
        );
        assert!(base.java_client.is_none());
        base.validate().unwrap();
        // A cell's run gets the workload: its command line says so.
        assert!(base.command_line().contains(" --workload group"));
        let idempotent = parse_detect(&["detect", "--workload", "group", "--idempotence"]).unwrap();
        let refused = check_detect_flags(&idempotent).unwrap_err();
        assert!(
            refused.contains("--idempotence is for the queue workload"),
            "{refused}"
        );
    }

    #[test]
    fn plan_puts_none_last_and_the_random_seeds_first() {
        let t = table();
        assert_eq!(t.bugs, ["ack.before.replication", "no.epoch.bump", "none"]);
        let labels: Vec<String> = t.columns.iter().map(Column::label).collect();
        assert_eq!(labels, ["random/s1", "random/s2", "leader-isolation/s1"]);
        let cells = t.cells();
        assert_eq!(cells.len(), 9);
        // Column by column: every bug under random seed 1 comes first.
        assert!(cells[..3].iter().all(|c| c.column.label() == "random/s1"));
        assert_eq!(cells[2].bug, "none");
    }

    #[test]
    fn cell_sets_are_the_safe_settings_plus_the_switch() {
        let cell = table().cells()[0].clone();
        let sets = cell.sets();
        assert_eq!(sets["min.insync.replicas"], "2");
        assert_eq!(sets["unclean.leader.election.enable"], "false");
        assert_eq!(sets["tidewater.bug.ack.before.replication.enable"], "true");
        assert_eq!(cell.run_name(), "detect-ack.before.replication-random-s1");
        let none = Cell {
            bug: NO_BUG.into(),
            column: cell.column,
        };
        assert_eq!(none.sets().len(), 2, "the unmodified broker gets no switch");
        let flushed = Cell {
            bug: "hw.max.of.isr".into(),
            column: Column {
                plan: Some("power-loss-cluster".into()),
                seed: 1,
            },
        };
        let sets = flushed.sets();
        assert_eq!(sets["flush.messages"], "1");
        assert_eq!(sets["tidewater.bug.hw.max.of.isr.enable"], "true");
        assert_eq!(sets.len(), 4);
        let leader = Cell {
            column: Column {
                plan: Some("power-loss-leader".into()),
                seed: 1,
            },
            ..flushed
        };
        assert!(
            !leader.sets().contains_key("flush.messages"),
            "a lone leader's power loss is survived by KIP-966, not by fsync"
        );
    }

    #[test]
    fn markdown_shows_caught_anomalies_valid_runs_and_false_alarms() {
        let mut t = table();
        let cells = t.cells();
        t.results.push((
            cells[0].clone(),
            CellOutcome::Checked {
                valid: "invalid".into(),
                anomalies: BTreeMap::from([("lost-write".into(), 3), ("unseen".into(), 2)]),
                lost: 5,
                run_dir: "store/x".into(),
                first_anomaly_s: None,
                wall_s: None,
            },
        ));
        t.results.push((
            cells[2].clone(),
            CellOutcome::Checked {
                valid: "valid".into(),
                anomalies: BTreeMap::new(),
                lost: 0,
                run_dir: "store/y".into(),
                first_anomaly_s: None,
                wall_s: None,
            },
        ));
        t.results.push((
            cells[1].clone(),
            CellOutcome::Errored {
                error: "exit 3".into(),
                run_dir: None,
                wall_s: None,
            },
        ));
        let md = t.render_markdown();
        assert!(md.starts_with("Workload of every run: the queue workload of `tidewater run`."));
        let mut txn = t.clone();
        txn.workload_flags = Some(" --workload txn".into());
        assert!(txn
            .render_markdown()
            .starts_with("Workload of every run: `--workload txn`."));
        assert!(md.contains("| bug | random/s1 | random/s2 | leader-isolation/s1 | caught |"));
        assert!(md.contains(
            "| `ack.before.replication` | **CAUGHT** lost-write 3, unseen 2 (lost 5) |  |  | 1/1 |"
        ));
        assert!(md.contains("| `no.epoch.bump` | error |  |  | 0/1 |"));
        assert!(md.contains("| `none` | - |  |  | 0/1 |"));
        assert!(md.contains("`none`): 1 run(s), 0 with an invalidating anomaly"));
        let json: DetectionTable =
            serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(json, t);
    }

    #[test]
    fn run_detection_skips_what_ran_and_writes_after_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let (md, json) = (dir.path().join("d.md"), dir.path().join("d.json"));
        let mut t = table();
        let first = t.cells()[0].clone();
        t.results.push((
            first.clone(),
            CellOutcome::Errored {
                error: "earlier".into(),
                run_dir: None,
                wall_s: None,
            },
        ));
        // Three workers at once: every cell not run yet runs exactly once, on some worker.
        let ran = std::sync::Mutex::new(Vec::new());
        let t = run_detection(t, &md, &json, 3, |cell, worker| {
            assert!(worker < 3);
            ran.lock().unwrap().push(cell.clone());
            CellOutcome::Errored {
                error: "x".into(),
                run_dir: None,
                wall_s: None,
            }
        })
        .unwrap();
        let ran = ran.into_inner().unwrap();
        assert_eq!(ran.len(), 8);
        assert!(!ran.contains(&first));
        let mut distinct = ran.clone();
        distinct.sort_by_key(|c| (c.bug.clone(), c.column.clone()));
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "no cell ran twice");
        assert_eq!(t.results.len(), 9);
        assert!(std::fs::read_to_string(&md).unwrap().contains("| `none` |"));
        let back: DetectionTable =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(back.results.len(), 9);
    }

    #[test]
    fn resume_takes_over_only_the_planned_cells_with_a_verdict() {
        let mut earlier = table();
        let checked = CellOutcome::Checked {
            valid: "valid".into(),
            anomalies: BTreeMap::new(),
            lost: 0,
            run_dir: PathBuf::from("/r"),
            first_anomaly_s: None,
            wall_s: None,
        };
        let errored = CellOutcome::Errored {
            error: "x".into(),
            run_dir: None,
            wall_s: None,
        };
        for cell in earlier.cells() {
            // The random/s2 cells ended without a verdict: a resume runs them again.
            let outcome = if cell.column.label() == "random/s2" {
                errored.clone()
            } else {
                checked.clone()
            };
            earlier.results.push((cell, outcome));
        }
        let mut t = DetectionTable::plan(&["no.epoch.bump".into()], &[], 3, 1, 60);
        t.resume_from(&earlier);
        // no.epoch.bump and none under random/s1 are kept; random/s2 errored and random/s3
        // is new.
        assert_eq!(t.results.len(), 2);
        assert!(t
            .results
            .iter()
            .all(|(c, o)| c.column.label() == "random/s1" && o == &checked));
        assert_eq!(t.cells().len(), 6);
    }

    #[test]
    fn reproduce_command_names_bugs_plans_and_seeds() {
        let t = table();
        assert_eq!(
            t.reproduce_command(Path::new("/work/store"), ""),
            "tidewater detect --bugs ack.before.replication,no.epoch.bump --plans leader-isolation --seeds 2 --time-limit 60 --store /work/store"
        );
        assert!(t
            .reproduce_command(Path::new("/s"), " --workload txn")
            .starts_with("tidewater detect --workload txn --bugs "));
        let mut none_only = table();
        none_only.bugs.retain(|b| b == NO_BUG);
        assert_eq!(
            none_only.reproduce_command(Path::new("/s"), ""),
            "tidewater detect --bugs none --plans leader-isolation --seeds 2 --time-limit 60 --store /s"
        );
        let mut skipped = table();
        skipped.bugs.retain(|b| b != NO_BUG);
        assert_eq!(
            skipped.reproduce_command(Path::new("/s"), ""),
            "tidewater detect --bugs ack.before.replication,no.epoch.bump --plans leader-isolation --seeds 2 --skip-none --time-limit 60 --store /s"
        );
    }

    #[test]
    fn wilson_interval_matches_the_formula_and_stays_in_bounds() {
        // 9 of 10: p = 0.9, the textbook interval is 0.596 to 0.982.
        let (low, high) = wilson_interval(9, 10);
        assert!((low - 0.5958).abs() < 1e-3 && (high - 0.9821).abs() < 1e-3);
        // 0 of 10 and 10 of 10 are not the degenerate [0, 0] and [1, 1].
        let (low, high) = wilson_interval(0, 10);
        assert_eq!(low, 0.0);
        assert!((high - 0.2775).abs() < 1e-3);
        let (low, high) = wilson_interval(10, 10);
        assert!((low - 0.7225).abs() < 1e-3);
        assert_eq!(high, 1.0);
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
    }

    fn results_with(examples: serde_json::Value, invalidates: bool) -> CheckResults {
        serde_json::from_value(serde_json::json!({
            "valid": !invalidates,
            "promise": "broken",
            "anomalies": {"lost-write": {"count": 2, "examples": examples, "invalidates": invalidates}},
            "stats": {"lost_acknowledged": {"total": 2}},
        }))
        .unwrap()
    }

    #[test]
    fn first_anomaly_is_the_earliest_op_an_invalidating_example_names() {
        let history: String = (0..10u64)
            .map(|i| {
                format!(
                    "{{\"index\":{i},\"time\":{},\"process\":0,\"type\":\"ok\",\"f\":\"send\"}}\n",
                    (i + 1) * 500_000_000
                )
            })
            .collect();
        let examples = serde_json::json!([
            {"value": 1, "send_op": 7, "ack_op": 8, "proving_read_op": 9},
            {"key": "t0/0", "ops": [6, 4]},
            {"value": 2, "send_op": null},
        ]);
        // op 4 is the earliest named: time 2.5 s.
        assert_eq!(
            first_anomaly_s(&results_with(examples.clone(), true), &history),
            Some(2.5)
        );
        // An anomaly that does not invalidate the history does not count.
        assert_eq!(
            first_anomaly_s(&results_with(examples, false), &history),
            None
        );
        // Ops the history does not hold give nothing rather than a made-up time.
        let absent = serde_json::json!([{"send_op": 99}]);
        assert_eq!(first_anomaly_s(&results_with(absent, true), &history), None);
    }

    fn checked(valid: &str, first: Option<f64>, wall: f64) -> CellOutcome {
        CellOutcome::Checked {
            valid: valid.into(),
            anomalies: BTreeMap::new(),
            lost: 0,
            run_dir: "store/r".into(),
            first_anomaly_s: first,
            wall_s: Some(wall),
        }
    }

    #[test]
    fn rates_count_each_schedule_over_its_seeds() {
        let mut t = DetectionTable::plan(
            &["no.epoch.bump".into()],
            &["leader-isolation".into()],
            4,
            2,
            60,
        );
        let labels: Vec<String> = t.columns.iter().map(Column::label).collect();
        assert_eq!(
            labels,
            [
                "random/s1",
                "random/s2",
                "random/s3",
                "random/s4",
                "leader-isolation/s1",
                "leader-isolation/s2"
            ]
        );
        let outcomes = [
            ("no.epoch.bump", 1, checked("invalid", Some(10.0), 90.0)),
            ("no.epoch.bump", 2, checked("valid", None, 80.0)),
            ("no.epoch.bump", 3, checked("invalid", Some(30.0), 100.0)),
            ("no.epoch.bump", 4, checked("invalid", Some(20.0), 90.0)),
            ("none", 1, checked("valid", None, 70.0)),
        ];
        for (bug, seed, outcome) in outcomes.iter().cloned() {
            let cell = Cell {
                bug: bug.into(),
                column: Column { plan: None, seed },
            };
            t.results.push((cell, outcome));
        }
        t.results.push((
            Cell {
                bug: "no.epoch.bump".into(),
                column: Column {
                    plan: Some("leader-isolation".into()),
                    seed: 1,
                },
            },
            CellOutcome::Errored {
                error: "exit 5".into(),
                run_dir: None,
                wall_s: Some(5.0),
            },
        ));
        let rates = t.rates();
        let random = &rates[0];
        assert_eq!(
            (random.bug.as_str(), random.schedule.as_str()),
            ("no.epoch.bump", "random")
        );
        let caught = outcomes[..4].iter().filter(|(_, _, o)| o.caught()).count() as u64;
        assert_eq!((random.caught, random.runs, random.errors), (caught, 4, 0));
        assert_eq!(random.interval, wilson_interval(caught, 4));
        assert_eq!(random.median_first_anomaly_s, Some(20.0));
        let wall: f64 = outcomes[..4]
            .iter()
            .map(|(_, _, o)| o.wall_s().unwrap())
            .sum();
        assert_eq!(
            random.machine_min_per_catch,
            Some(wall / 60.0 / caught as f64)
        );
        let plan = &rates[1];
        assert_eq!(
            (plan.schedule.as_str(), plan.runs, plan.errors),
            ("leader-isolation", 0, 1)
        );
        assert_eq!(plan.machine_min_per_catch, None, "no catch, no figure");
        let none = &rates[2];
        assert_eq!((none.bug.as_str(), none.caught, none.runs), ("none", 0, 1));
        let md = t.render_markdown();
        let per_catch = wall / 60.0 / caught as f64;
        assert!(
            md.contains(&format!(
                "| `no.epoch.bump` | random | 3/4 | 75% (30-95%) | 20.0 s | {per_catch:.1} |"
            )),
            "{md}"
        );
        assert!(
            md.contains("| `no.epoch.bump` | leader-isolation | 0/0 (+1 error) | - | - | - |"),
            "{md}"
        );
        assert!(
            md.contains("| `none` | random | 0/1 | 0% (0-79%) | - | - |"),
            "{md}"
        );
        assert!(
            !md.contains("| `none` | leader-isolation |"),
            "a schedule that never ran for a bug has no row"
        );
        assert!(t
            .reproduce_command(Path::new("s"), "")
            .contains("--seeds 4 --plan-seeds 2 --time-limit 60"));
        let back: DetectionTable =
            serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn tables_written_before_the_timings_still_load() {
        let old = r#"{"bugs":["none"],"columns":[{"plan":null,"seed":1}],"time_limit_s":60,
            "results":[[{"bug":"none","column":{"plan":null,"seed":1}},
            {"outcome":"checked","valid":"valid","anomalies":{},"lost":0,"run_dir":"store/x"}]]}"#;
        let t: DetectionTable = serde_json::from_str(old).unwrap();
        assert_eq!(t.results[0].1.wall_s(), None);
        assert_eq!(t.workload_flags, None);
        assert!(t.render_markdown().starts_with("Settings of every run"));
        assert!(t.render_rates().contains("| `none` | random | 0/1 |"));
    }

    fn args(jobs: usize, subnet: Option<&str>) -> DetectArgs {
        let mut argv = vec!["detect".to_string(), "--jobs".into(), jobs.to_string()];
        if let Some(s) = subnet {
            argv.extend(["--subnet".into(), s.into()]);
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        parse_detect(&argv).unwrap()
    }

    /// `tidewater detect`'s flags parsed from `argv` (its first word the command's name).
    fn parse_detect(argv: &[&str]) -> Result<DetectArgs, clap::Error> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            detect: DetectArgs,
        }
        Cli::try_parse_from(argv).map(|c| c.detect)
    }

    #[test]
    fn workers_get_a_subnet_each_or_a_clear_refusal() {
        assert_eq!(worker_subnets(&args(1, None)).unwrap(), ["10.77.0.0/24"]);
        assert_eq!(
            worker_subnets(&args(3, Some("10.223.4.0/24"))).unwrap(),
            ["10.223.4.0/24", "10.223.5.0/24", "10.223.6.0/24"]
        );
        let past = worker_subnets(&args(3, Some("10.223.254.0/24"))).unwrap_err();
        assert!(past.contains("runs past 10.223.255.0/24"), "{past}");
        let none = worker_subnets(&args(0, None)).unwrap_err();
        assert!(none.contains("--jobs 0 is not between 1 and 16"), "{none}");
    }
}
