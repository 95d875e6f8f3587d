//! `tidewater detect`: the detection benchmark. Runs every deliberate bug of the broker
//! (`tidewater.bug.*`, cargo feature `deliberate-bugs`, see `broker/src/bugs.rs`) and the
//! unmodified broker (`none`) under the random schedule with a few seeds and under the shipped
//! plans, each as a normal run into the store, and writes the detection table: which plan and
//! seed caught which bug, with the anomalies and the lost count (`docs/detection.md`).
//!
//! This module is pure planning and rendering; the CLI runs the cells ([`run_detection`] takes
//! the function that runs one) and rewrites the table after every run, so a partial benchmark
//! still leaves an honest table.

use serde::{Deserialize, Serialize};
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
pub const BUGS: [&str; 8] = [
    "ack.before.replication",
    "hw.max.of.isr",
    "keep.divergent.suffix",
    "no.epoch.bump",
    "serve.uncommitted",
    "shrink.isr.without.controller",
    "unclean.election.parse",
    "ignore.min.insync",
];
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
    },
    /// The run ended without a verdict (setup failed, harness error).
    Errored {
        /// Why, with the exit code.
        error: String,
        /// The run directory, if one was created.
        run_dir: Option<PathBuf>,
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

/// The benchmark's plan and what it found so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DetectionTable {
    /// Rows: bug short names, `none` last.
    pub bugs: Vec<String>,
    /// Columns: random seeds first, then the plans.
    pub columns: Vec<Column>,
    /// The time limit of every run, in seconds.
    pub time_limit_s: u64,
    /// Results so far, keyed by (bug, column label).
    pub results: Vec<(Cell, CellOutcome)>,
}

impl DetectionTable {
    /// Plans `bugs` (plus `none`) x (the random schedule with seeds `1..=seeds`, then each of
    /// `plans` with seed 1). Every run of the table is a [`Cell`], in row order.
    pub fn plan(bugs: &[String], plans: &[String], seeds: u64, time_limit_s: u64) -> Self {
        let mut rows: Vec<String> = bugs.iter().filter(|b| *b != NO_BUG).cloned().collect();
        rows.push(NO_BUG.into());
        let mut columns: Vec<Column> = (1..=seeds)
            .map(|seed| Column { plan: None, seed })
            .collect();
        columns.extend(plans.iter().map(|p| Column {
            plan: Some(p.clone()),
            seed: 1,
        }));
        DetectionTable {
            bugs: rows,
            columns,
            time_limit_s,
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

    /// Takes over the results of `earlier` (a table written by an interrupted or another
    /// benchmark) for the cells this table plans, so they are not run again.
    pub fn resume_from(&mut self, earlier: &DetectionTable) {
        let cells = self.cells();
        for (cell, outcome) in &earlier.results {
            if cells.contains(cell) && self.outcome(cell).is_none() {
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

    /// The markdown table: a row per bug, a column per plan/seed, then the summary lines.
    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
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
        out
    }

    /// The command that runs the rest of this table (or all of it again).
    pub fn reproduce_command(&self, store: &Path) -> String {
        let bugs: Vec<&str> = self
            .bugs
            .iter()
            .filter(|b| *b != NO_BUG)
            .map(String::as_str)
            .collect();
        let plans: Vec<String> = self.columns.iter().filter_map(|c| c.plan.clone()).collect();
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
        format!(
            "tidewater detect --bugs {} --plans {} --seeds {seeds}{first} --time-limit {} --store {}",
            bugs.join(","),
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

/// Runs every cell of `table` not yet run with `run_one`, writing `markdown` and `json` after
/// each run, and returns the finished table.
pub fn run_detection(
    mut table: DetectionTable,
    markdown: &Path,
    json: &Path,
    mut run_one: impl FnMut(&Cell) -> CellOutcome,
) -> std::io::Result<DetectionTable> {
    let cells: Vec<Cell> = table
        .cells()
        .into_iter()
        .filter(|c| table.outcome(c).is_none())
        .take(RUNS_MAX)
        .collect();
    write_table(&table, markdown, json)?;
    for cell in cells {
        let outcome = run_one(&cell);
        table.results.push((cell, outcome));
        write_table(&table, markdown, json)?;
    }
    Ok(table)
}

fn write_table(table: &DetectionTable, markdown: &Path, json: &Path) -> std::io::Result<()> {
    if let Some(dir) = markdown.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(markdown, table.render_markdown())?;
    let text = serde_json::to_string_pretty(table).map_err(std::io::Error::other)?;
    std::fs::write(json, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> DetectionTable {
        DetectionTable::plan(
            &["ack.before.replication".into(), "no.epoch.bump".into()],
            &["leader-isolation".into()],
            2,
            60,
        )
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
            },
        ));
        t.results.push((
            cells[2].clone(),
            CellOutcome::Checked {
                valid: "valid".into(),
                anomalies: BTreeMap::new(),
                lost: 0,
                run_dir: "store/y".into(),
            },
        ));
        t.results.push((
            cells[1].clone(),
            CellOutcome::Errored {
                error: "exit 3".into(),
                run_dir: None,
            },
        ));
        let md = t.render_markdown();
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
            },
        ));
        let mut ran = Vec::new();
        let t = run_detection(t, &md, &json, |cell| {
            ran.push(cell.clone());
            CellOutcome::Errored {
                error: "x".into(),
                run_dir: None,
            }
        })
        .unwrap();
        assert_eq!(ran.len(), 8);
        assert!(!ran.contains(&first));
        assert_eq!(t.results.len(), 9);
        assert!(std::fs::read_to_string(&md).unwrap().contains("| `none` |"));
        let back: DetectionTable =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(back.results.len(), 9);
    }

    #[test]
    fn resume_takes_over_only_the_planned_cells() {
        let mut earlier = table();
        let errored = CellOutcome::Errored {
            error: "x".into(),
            run_dir: None,
        };
        for cell in earlier.cells() {
            earlier.results.push((cell, errored.clone()));
        }
        let mut t = DetectionTable::plan(&["no.epoch.bump".into()], &[], 3, 60);
        t.resume_from(&earlier);
        // no.epoch.bump and none under random/s1 and random/s2; random/s3 is new.
        assert_eq!(t.results.len(), 4);
        assert_eq!(t.cells().len(), 6);
    }

    #[test]
    fn reproduce_command_names_bugs_plans_and_seeds() {
        let t = table();
        assert_eq!(
            t.reproduce_command(Path::new("/work/store")),
            "tidewater detect --bugs ack.before.replication,no.epoch.bump --plans leader-isolation --seeds 2 --time-limit 60 --store /work/store"
        );
    }
}
