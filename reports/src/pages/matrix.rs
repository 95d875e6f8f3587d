//! The comparison page of a settings matrix (`tidewater matrix`) and its JUnit XML.
//!
//! The harness runs every cell of the matrix (one combination of settings) some number of
//! times and hands this module a [`MatrixInput`]: per cell its settings, its expectation and
//! the run directories (or why a run errored). [`summarize_matrix`] reads each run's results
//! and history and decides whether each expectation held; [`render_matrix`] writes the page
//! and [`junit_xml`] the CI file. [`MatrixSummary::exit_code`] is what the CLI should exit
//! with.
//!
//! Lost acknowledged writes are `stats.lost_acknowledged.total` of each run, the figure the
//! run's report shows (the `lost-write` count only for results.json files written before
//! that field). A cell whose every run errored was not evaluated and is never shown as held.
//! The page lists the settings every cell shared (from the runs' config.json), since the
//! cells' labels name only what differs. With a `system` axis ([`SYSTEM_AXIS`]) it also sets
//! the systems side by side, one row per combination of the other axes.

use crate::draw::chart::{self, Bar, BLUE, ORANGE, PURPLE, VERMILLION};
use crate::error::ReportError;
use crate::html::{esc, href, ms, page, standing_badge};
use crate::scan::history::{percentile, scan_history};
use crate::scan::outcome::Outcome;
use crate::scan::run_files::{config_settings, display_value, lost_acknowledged, RunFiles};
use crate::scan::run_files::{HISTORY_FILE, REPORT_FILE};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Component, Path, PathBuf};
use tidewater_workloads::results::{CheckResults, Promise, Validity};

/// The comparison page's file name.
pub const MATRIX_FILE: &str = "matrix.html";

/// What the runs of a cell must show. Every bound that is set must hold for the cell to pass;
/// an expectation with nothing set always holds (a cell that is only observed, such as
/// acks=1, which may lose writes by design).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectation {
    /// The expectation in words, shown on the page and in JUnit failures, e.g. "no lost
    /// acknowledged write".
    pub description: String,
    /// Lost acknowledged writes allowed over all runs of the cell (`Some(0)`: none).
    pub lost_writes_max: Option<u64>,
    /// High-watermark regressions allowed over all runs of the cell.
    pub hw_regressions_max: Option<u64>,
    /// Anomalies that must not occur in any run (names as in results.json).
    pub forbidden_anomalies: Vec<String>,
    /// Lowest acceptable share of ok sends over all runs, 0.0 to 1.0.
    pub availability_min: Option<f64>,
    /// Every run's verdict must be valid (a fact: nothing lost, no anomaly).
    pub all_valid: bool,
    /// Every run must keep Kafka's promise under its settings (a judgement: losses the
    /// settings allow are fine, a broken promise or an unknown one is not).
    pub promise_kept: bool,
}

/// How one run of a cell ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The run completed and its directory holds results.json and history.jsonl.
    Completed(PathBuf),
    /// The run could not complete (setup failed, the harness crashed, ...).
    Errored {
        /// Its directory, when one was created.
        run_dir: Option<PathBuf>,
        /// Why.
        error: String,
    },
}

/// One cell of the matrix as the harness ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellInput {
    /// Unique label of the cell, e.g. `acks=all min.insync.replicas=2`.
    pub label: String,
    /// The settings that define the cell (axis name -> value).
    pub settings: BTreeMap<String, String>,
    /// What its runs must show.
    pub expectation: Expectation,
    /// Its runs, in the order they ran.
    pub runs: Vec<RunOutcome>,
}

/// A whole matrix run.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixInput {
    /// The matrix's name (its file name without extension, for example `durability`).
    pub title: String,
    /// Every cell.
    pub cells: Vec<CellInput>,
}

/// What one run contributed to its cell.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// The run directory, when there is one.
    pub run_dir: Option<PathBuf>,
    /// The verdict, `None` when the run errored or was not checked.
    pub verdict: Option<Validity>,
    /// The run's results, for its standing (verdict and promise); `None` when it errored.
    pub results: Option<CheckResults>,
    /// Lost acknowledged writes (`stats.lost_acknowledged.total`).
    pub lost_writes: u64,
    /// High-watermark regressions (`hw-regression` count).
    pub hw_regressions: u64,
    /// Why the run errored.
    pub error: Option<String>,
}

/// The figures of one cell and whether its expectation held.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSummary {
    /// The cell's label.
    pub label: String,
    /// Its settings.
    pub settings: BTreeMap<String, String>,
    /// Its expectation.
    pub expectation: Expectation,
    /// One row per run.
    pub runs: Vec<RunRow>,
    /// Runs that had at least one lost write.
    pub runs_with_lost_writes: u64,
    /// Lost acknowledged writes over all runs.
    pub lost_writes_total: u64,
    /// High-watermark regressions over all runs.
    pub hw_regressions_total: u64,
    /// Anomalies found (count > 0) in any run, with their total counts.
    pub anomalies_total: BTreeMap<String, u64>,
    /// Sends invoked over all runs.
    pub sends_invoked: u64,
    /// Sends acknowledged (ok) over all runs.
    pub sends_ok: u64,
    /// Median latency of ok sends over all runs, ns.
    pub send_latency_p50_ns: Option<u64>,
    /// 99th percentile latency of ok sends over all runs, ns.
    pub send_latency_p99_ns: Option<u64>,
    /// Why the expectation did not hold; empty when it held.
    pub failures: Vec<String>,
}

/// Whether a cell's expectation held, as the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellStatus {
    /// Every bound held and no run errored.
    Held,
    /// Every bound held over the runs that completed, but some runs errored.
    HeldWithErrors,
    /// A bound did not hold.
    Failed,
    /// Every run errored: nothing was evaluated (never shown as held).
    NotEvaluated,
}

impl CellSummary {
    /// What the page says about the cell's expectation.
    pub fn status(&self) -> CellStatus {
        let errored = self.runs_errored();
        if !self.failures.is_empty() {
            CellStatus::Failed
        } else if errored == self.runs.len() {
            CellStatus::NotEvaluated
        } else if errored > 0 {
            CellStatus::HeldWithErrors
        } else {
            CellStatus::Held
        }
    }

    /// Share of ok sends among invoked sends, `None` without sends.
    pub fn availability(&self) -> Option<f64> {
        (self.sends_invoked > 0).then(|| self.sends_ok as f64 / self.sends_invoked as f64)
    }

    /// Runs that errored.
    pub fn runs_errored(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count()
    }

    /// True when every set bound of the expectation held.
    pub fn expectation_held(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The summary of every cell.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSummary {
    /// The matrix's name.
    pub title: String,
    /// One per cell, in input order.
    pub cells: Vec<CellSummary>,
    /// Settings every run of every cell had alike (from their config.json: run settings
    /// such as the fault plan and time limit, and broker/topic settings), by name.
    pub shared_settings: BTreeMap<String, String>,
}

impl MatrixSummary {
    /// True when every expectation held and no run errored.
    pub fn passed(&self) -> bool {
        self.cells
            .iter()
            .all(|c| c.expectation_held() && c.runs_errored() == 0)
    }

    /// The exit code for `tidewater matrix`: 0 when [`Self::passed`], 1 when an expectation
    /// failed, 2 when runs errored but every expectation that could be checked held.
    pub fn exit_code(&self) -> i32 {
        if self.cells.iter().any(|c| !c.expectation_held()) {
            1
        } else if self.cells.iter().any(|c| c.runs_errored() > 0) {
            2
        } else {
            0
        }
    }
}

/// Reads every run of every cell and evaluates the expectations.
pub fn summarize_matrix(input: &MatrixInput) -> Result<MatrixSummary, ReportError> {
    let cells = input
        .cells
        .iter()
        .map(summarize_cell)
        .collect::<Result<_, _>>()?;
    Ok(MatrixSummary {
        title: input.title.clone(),
        cells,
        shared_settings: shared_settings(input),
    })
}

/// config.json fields that identify a run rather than set it up.
const NOT_SETTINGS: [&str; 8] = [
    "name",
    "seed",
    "command",
    "matrix_cell",
    "schedule",
    "replay_of",
    "settings",
    "sets",
];

/// The settings of one run's config.json, flattened: top-level run settings and the
/// broker/topic settings.
fn run_settings(config: &Value) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = config
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !NOT_SETTINGS.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), display_value(Some(v))))
        .collect();
    out.extend(config_settings(config));
    out
}

/// The settings alike in every run that has a config.json, minus the cells' own axes. A
/// fault plan replaces the random nemesis, so with one the nemesis fields are left out.
fn shared_settings(input: &MatrixInput) -> BTreeMap<String, String> {
    let axes: BTreeSet<&str> = input
        .cells
        .iter()
        .flat_map(|c| c.settings.keys().map(String::as_str))
        .collect();
    let mut shared: Option<BTreeMap<String, String>> = None;
    for run in input.cells.iter().flat_map(|c| &c.runs) {
        let dir = match run {
            RunOutcome::Completed(dir) => Some(dir),
            RunOutcome::Errored { run_dir, .. } => run_dir.as_ref(),
        };
        let Some(config) = dir.and_then(|d| {
            crate::scan::run_files::read_json_opt(&d.join(crate::scan::run_files::CONFIG_FILE))
                .ok()
                .flatten()
        }) else {
            continue;
        };
        let these = run_settings(&config);
        shared = Some(match shared {
            None => these,
            Some(mut s) => {
                s.retain(|k, v| these.get(k) == Some(v));
                s
            }
        });
    }
    let mut shared = shared.unwrap_or_default();
    shared.retain(|k, _| !axes.contains(k.as_str()));
    if shared.contains_key("plan") {
        shared.remove("nemesis");
        shared.remove("nemesis_interval_s");
    }
    shared
}

fn summarize_cell(cell: &CellInput) -> Result<CellSummary, ReportError> {
    let mut summary = CellSummary {
        label: cell.label.clone(),
        settings: cell.settings.clone(),
        expectation: cell.expectation.clone(),
        runs: Vec::new(),
        runs_with_lost_writes: 0,
        lost_writes_total: 0,
        hw_regressions_total: 0,
        anomalies_total: BTreeMap::new(),
        sends_invoked: 0,
        sends_ok: 0,
        send_latency_p50_ns: None,
        send_latency_p99_ns: None,
        failures: Vec::new(),
    };
    let mut latencies = Vec::new();
    for run in &cell.runs {
        let row = match run {
            RunOutcome::Errored { run_dir, error } => RunRow {
                run_dir: run_dir.clone(),
                verdict: None,
                results: None,
                lost_writes: 0,
                hw_regressions: 0,
                error: Some(error.clone()),
            },
            RunOutcome::Completed(dir) => summarize_run(dir, &mut summary, &mut latencies)?,
        };
        summary.runs.push(row);
    }
    latencies.sort_unstable();
    summary.send_latency_p50_ns = percentile(&latencies, 0.50);
    summary.send_latency_p99_ns = percentile(&latencies, 0.99);
    summary.failures = expectation_failures(&summary);
    Ok(summary)
}

fn summarize_run(
    dir: &Path,
    cell: &mut CellSummary,
    latencies: &mut Vec<u64>,
) -> Result<RunRow, ReportError> {
    let files = RunFiles::read(dir)?;
    let Some(results) = files.results else {
        return Ok(RunRow {
            run_dir: Some(dir.to_path_buf()),
            verdict: None,
            results: None,
            lost_writes: 0,
            hw_regressions: 0,
            error: Some("no results.json: the run was not checked".to_string()),
        });
    };
    let count = |name: &str| results.anomalies.get(name).map_or(0, |a| a.count);
    let (lost_writes, hw_regressions) = (lost_acknowledged(&results), count("hw-regression"));
    cell.lost_writes_total += lost_writes;
    cell.hw_regressions_total += hw_regressions;
    cell.runs_with_lost_writes += u64::from(lost_writes > 0);
    for (name, a) in results.anomalies.iter().filter(|(_, a)| a.count > 0) {
        *cell.anomalies_total.entry(name.clone()).or_default() += a.count;
    }
    let scan = scan_history(&dir.join(HISTORY_FILE), &BTreeSet::new())?;
    let sends: u64 = Outcome::ALL.iter().map(|o| scan.count("send", *o)).sum();
    cell.sends_invoked += sends + scan.open.get("send").copied().unwrap_or(0);
    cell.sends_ok += scan.count("send", Outcome::Ok);
    if let Some(points) = scan.latencies.get(&("send".to_string(), Outcome::Ok)) {
        latencies.extend(points.iter().map(|p| p.latency_ns));
    }
    Ok(RunRow {
        run_dir: Some(dir.to_path_buf()),
        verdict: Some(results.valid),
        results: Some(results),
        lost_writes,
        hw_regressions,
        error: None,
    })
}

fn expectation_failures(cell: &CellSummary) -> Vec<String> {
    let e = &cell.expectation;
    let mut failures = Vec::new();
    if let Some(max) = e.lost_writes_max {
        if cell.lost_writes_total > max {
            failures.push(format!(
                "{} lost acknowledged writes (allowed: {max})",
                cell.lost_writes_total
            ));
        }
    }
    if let Some(max) = e.hw_regressions_max {
        if cell.hw_regressions_total > max {
            failures.push(format!(
                "{} high-watermark regressions (allowed: {max})",
                cell.hw_regressions_total
            ));
        }
    }
    for name in &e.forbidden_anomalies {
        if let Some(n) = cell.anomalies_total.get(name) {
            failures.push(format!("{n} {name} (forbidden)"));
        }
    }
    if let Some(min) = e.availability_min {
        match cell.availability() {
            Some(a) if a >= min => {}
            Some(a) => failures.push(format!(
                "availability {:.1}% (required: {:.1}%)",
                a * 100.0,
                min * 100.0
            )),
            None => failures.push("no send completed, availability unknown".to_string()),
        }
    }
    if e.all_valid {
        let not_valid = cell
            .runs
            .iter()
            .filter(|r| r.error.is_none() && r.verdict != Some(Validity::Valid))
            .count();
        if not_valid > 0 {
            failures.push(format!("{not_valid} runs not valid"));
        }
    }
    if e.promise_kept {
        let not_kept = cell
            .runs
            .iter()
            .filter(|r| r.error.is_none())
            .filter(|r| r.results.as_ref().map(|res| res.promise) != Some(Promise::Kept))
            .count();
        if not_kept > 0 {
            failures.push(format!("{not_kept} runs did not keep the promise"));
        }
    }
    failures
}

/// `to` relative to the directory `from` (both absolute, or both relative to one place).
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to_parts: Vec<Component> = to.components().collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to_parts[common..] {
        out.push(part.as_os_str());
    }
    out
}

fn run_href(out_dir: &Path, run_dir: &Path) -> String {
    let rel = relative_path(out_dir, run_dir);
    let rel = rel.to_string_lossy().replace('\\', "/");
    let rel = if rel.is_empty() { ".".to_string() } else { rel };
    if run_dir.join(REPORT_FILE).is_file() {
        format!("{}/{REPORT_FILE}", href(&rel))
    } else {
        format!("{}/", href(&rel))
    }
}

fn cell_id(n: usize) -> String {
    format!("C{}", n + 1)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".to_string(), |a| format!("{:.1}%", a * 100.0))
}

fn charts(summary: &MatrixSummary) -> Result<String, ReportError> {
    let bars = |value: &dyn Fn(&CellSummary) -> f64, rgb| -> Vec<Bar> {
        summary
            .cells
            .iter()
            .enumerate()
            .map(|(n, c)| Bar {
                label: cell_id(n),
                value: value(c),
                rgb,
            })
            .collect()
    };
    let lost = chart::draw_bars(
        "chart-lost-writes",
        "lost acknowledged writes",
        &bars(&|c| c.lost_writes_total as f64, VERMILLION),
    )?;
    let availability = chart::draw_bars(
        "chart-availability",
        "ok sends (%)",
        &bars(&|c| c.availability().unwrap_or(0.0) * 100.0, BLUE),
    )?;
    let latency = chart::draw_bars(
        "chart-latency",
        "p99 send latency (ms)",
        &bars(&|c| c.send_latency_p99_ns.unwrap_or(0) as f64 / 1e6, ORANGE),
    )?;
    let regressions = chart::draw_bars(
        "chart-hw-regressions",
        "HW regressions",
        &bars(&|c| c.hw_regressions_total as f64, PURPLE),
    )?;
    Ok(format!(
        "<section id=\"charts\"><h2>Comparison</h2><div style=\"display:grid;\
         grid-template-columns:1fr 1fr;gap:0.5em\">\
         <figure id=\"chart-lost-writes\">{lost}<figcaption>Lost acknowledged writes over all runs of each cell.</figcaption></figure>\
         <figure id=\"chart-availability\">{availability}<figcaption>Share of sends acknowledged ok.</figcaption></figure>\
         <figure id=\"chart-latency\">{latency}<figcaption>99th percentile latency of ok sends.</figcaption></figure>\
         <figure id=\"chart-hw-regressions\">{regressions}<figcaption>High-watermark regressions over all runs.</figcaption></figure>\
         </div></section>"
    ))
}

fn cells_table(summary: &MatrixSummary) -> String {
    let mut out = String::from(
        "<section id=\"cells\"><h2>Cells</h2><table><tr><th>cell</th>\
         <th class=\"num\">runs</th><th class=\"num\">errored</th><th class=\"num\">runs losing writes</th>\
         <th class=\"num\">lost ack'd writes</th><th class=\"num\">HW regressions</th>\
         <th class=\"num\">ok sends</th><th class=\"num\">p50 ms</th><th class=\"num\">p99 ms</th>\
         <th>expectation</th><th>held</th></tr>",
    );
    for (n, c) in summary.cells.iter().enumerate() {
        // One setting per line: the label repeats them, but a column of its own is too wide.
        let settings: Vec<String> = c
            .settings
            .iter()
            .map(|(k, v)| esc(&format!("{k}={v}")))
            .collect();
        let cell = if settings.is_empty() {
            esc(&c.label)
        } else {
            settings.join("<br>")
        };
        let held = match c.status() {
            CellStatus::Held => "<span class=\"verdict valid\">yes</span>".to_string(),
            CellStatus::HeldWithErrors => format!(
                "<span class=\"verdict partial\">yes, over {} of {} runs</span> {} errored",
                c.runs.len() - c.runs_errored(),
                c.runs.len(),
                c.runs_errored()
            ),
            CellStatus::Failed => format!(
                "<span class=\"verdict invalid\">no</span> {}",
                esc(&c.failures.join("; "))
            ),
            CellStatus::NotEvaluated => format!(
                "<span class=\"verdict none\">not evaluated</span> every run errored ({})",
                esc(c
                    .runs
                    .iter()
                    .find_map(|r| r.error.as_deref())
                    .unwrap_or("no run"))
            ),
        };
        let expectation = if c.expectation.description.is_empty() {
            "<span class=\"muted\">none</span>".to_string()
        } else {
            esc(&c.expectation.description)
        };
        let _ = write!(
            out,
            "<tr id=\"cell-{id}\"><td><a href=\"#runs-{id}\">{id}</a><br><code>{cell}</code></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td>{expectation}</td><td>{held}</td></tr>",
            c.runs.len(),
            c.runs_errored(),
            c.runs_with_lost_writes,
            c.lost_writes_total,
            c.hw_regressions_total,
            pct(c.availability()),
            c.send_latency_p50_ns.map_or("–".to_string(), ms),
            c.send_latency_p99_ns.map_or("–".to_string(), ms),
            id = cell_id(n)
        );
    }
    out.push_str("</table></section>");
    out
}

fn runs_tables(summary: &MatrixSummary, out_dir: &Path) -> String {
    let mut out = String::from("<section id=\"runs\"><h2>Runs</h2>");
    for (n, c) in summary.cells.iter().enumerate() {
        let _ = write!(
            out,
            "<h3 id=\"runs-{}\">{} {}</h3><table><tr><th>#</th><th>verdict</th>\
             <th class=\"num\">lost ack'd writes</th><th class=\"num\">HW regressions</th><th>report</th></tr>",
            cell_id(n),
            cell_id(n),
            esc(&c.label)
        );
        for (i, run) in c.runs.iter().enumerate() {
            let link = match &run.run_dir {
                Some(dir) => format!(
                    "<a href=\"{}\">{}</a>",
                    run_href(out_dir, dir),
                    esc(&dir.display().to_string())
                ),
                None => String::new(),
            };
            let verdict = match &run.error {
                Some(e) => format!("<span class=\"verdict setup\">error</span> {}", esc(e)),
                None => standing_badge(run.results.as_ref(), "not checked"),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{verdict}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{link}</td></tr>",
                i + 1,
                run.lost_writes,
                run.hw_regressions
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</section>");
    out
}

/// The axis naming the system under test (`tidewater matrix`'s `system`).
pub const SYSTEM_AXIS: &str = "system";

/// With a `system` axis of two systems or more: the cells side by side, one row per
/// combination of the other axes, one column per system (in the matrix's order), each
/// entry its runs' verdicts and lost acknowledged writes; rows where the systems differ in
/// verdicts, in runs that lost writes or in promises kept are marked, since each such difference needs an explanation (a deviation of the
/// companion broker, or a behaviour of the real system).
fn systems_table(summary: &MatrixSummary) -> String {
    let mut systems: Vec<&str> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    let mut entries: BTreeMap<(String, &str), &CellSummary> = BTreeMap::new();
    for c in &summary.cells {
        let Some(system) = c.settings.get(SYSTEM_AXIS) else {
            continue;
        };
        if !systems.contains(&system.as_str()) {
            systems.push(system);
        }
        let row = c
            .settings
            .iter()
            .filter(|(k, _)| *k != SYSTEM_AXIS)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        if !rows.contains(&row) {
            rows.push(row.clone());
        }
        entries.insert((row, system.as_str()), c);
    }
    if systems.len() < 2 {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"systems\"><h2>Systems side by side</h2><table><tr><th>settings</th>",
    );
    for system in &systems {
        let _ = write!(out, "<th>{}</th>", esc(system));
    }
    out.push_str("<th>differs</th></tr>");
    for row in &rows {
        let cells: Vec<Option<&CellSummary>> = systems
            .iter()
            .map(|s| entries.get(&(row.clone(), *s)).copied())
            .collect();
        // How many acknowledged writes a run loses depends on its timing, which no two
        // systems share; whether the runs lose any, and what they are judged, is compared.
        let standings: BTreeSet<(usize, usize, u64, usize)> = cells
            .iter()
            .flatten()
            .map(|c| {
                (
                    verdicts(c, Validity::Valid),
                    verdicts(c, Validity::Invalid),
                    c.runs_with_lost_writes,
                    c.runs
                        .iter()
                        .filter(|r| {
                            r.results.as_ref().map(|res| res.promise) == Some(Promise::Kept)
                        })
                        .count(),
                )
            })
            .collect();
        let label = if row.is_empty() {
            "(no other axis)"
        } else {
            row
        };
        let _ = write!(out, "<tr><td>{}</td>", esc(label));
        for cell in &cells {
            match cell {
                Some(c) => {
                    let _ = write!(out, "<td>{}</td>", system_entry(c));
                }
                None => out.push_str("<td class=\"muted\">not run</td>"),
            }
        }
        let differs = if standings.len() > 1 {
            "<span class=\"verdict invalid\">yes</span>"
        } else {
            "<span class=\"muted\">no</span>"
        };
        let _ = write!(out, "<td>{differs}</td></tr>");
    }
    out.push_str(
        "</table><p class=\"muted\">Each entry: runs valid and invalid (of all runs), and \
         acknowledged writes lost over them. A row differs when the systems' verdicts, the \
         number of runs that lost acknowledged writes or the number that kept Kafka's promise \
         do (how many writes a run loses depends on its timing).</p></section>",
    );
    out
}

/// Runs of `cell` whose verdict is `verdict`.
fn verdicts(cell: &CellSummary, verdict: Validity) -> usize {
    cell.runs
        .iter()
        .filter(|r| r.verdict == Some(verdict))
        .count()
}

/// One entry of [`systems_table`]: `2 valid, 1 invalid of 3; lost 187`, errored runs named.
fn system_entry(c: &CellSummary) -> String {
    let (valid, invalid) = (verdicts(c, Validity::Valid), verdicts(c, Validity::Invalid));
    let class = if invalid > 0 {
        "invalid"
    } else if valid == c.runs.len() {
        "valid"
    } else {
        "none"
    };
    let mut text = format!(
        "<span class=\"verdict {class}\">{valid} valid, {invalid} invalid of {}</span> lost {}",
        c.runs.len(),
        c.lost_writes_total
    );
    if c.runs_errored() > 0 {
        let _ = write!(text, " ({} errored)", c.runs_errored());
    }
    text
}

/// The settings every cell shared.
fn shared_section(summary: &MatrixSummary) -> String {
    let mut out = String::from("<section id=\"shared\"><h2>Shared by every cell</h2>");
    if summary.shared_settings.is_empty() {
        out.push_str("<p class=\"muted\">No run's config.json was readable.</p></section>");
        return out;
    }
    out.push_str("<table>");
    for (k, v) in &summary.shared_settings {
        let _ = write!(
            out,
            "<tr><th>{}</th><td><code>{}</code></td></tr>",
            esc(k),
            esc(v)
        );
    }
    out.push_str(
        "</table><p class=\"muted\">From the runs' config.json; each cell's own settings are in \
         its row below.</p></section>",
    );
    out
}

/// The comparison page as HTML; links to run reports are relative to `out_dir`.
pub fn matrix_html(summary: &MatrixSummary, out_dir: &Path) -> Result<String, ReportError> {
    let mut body = format!("<h1>Matrix {}</h1>", esc(&summary.title));
    let failed = summary
        .cells
        .iter()
        .filter(|c| !c.expectation_held())
        .count();
    let errored: usize = summary.cells.iter().map(CellSummary::runs_errored).sum();
    let not_evaluated = summary
        .cells
        .iter()
        .filter(|c| c.status() == CellStatus::NotEvaluated)
        .count();
    let verdict = if summary.passed() {
        "<span class=\"verdict valid\">every expectation held</span>".to_string()
    } else if failed > 0 {
        format!(
            "<span class=\"verdict invalid\">{failed} expectation(s) failed</span> {errored} run(s) errored"
        )
    } else {
        format!(
            "<span class=\"verdict partial\">no expectation failed, but {errored} run(s) errored</span> \
             {not_evaluated} cell(s) not evaluated at all"
        )
    };
    let _ = write!(body, "<p>{verdict}</p>");
    body.push_str(&shared_section(summary));
    body.push_str(&systems_table(summary));
    body.push_str(&cells_table(summary));
    body.push_str(&charts(summary)?);
    body.push_str(&runs_tables(summary, out_dir));
    Ok(page(
        &format!("Matrix {} — Tidewater", summary.title),
        &body,
    ))
}

/// Writes `out_dir/matrix.html` and returns its path.
pub fn render_matrix(summary: &MatrixSummary, out_dir: &Path) -> Result<PathBuf, ReportError> {
    std::fs::create_dir_all(out_dir).map_err(|e| ReportError::io(out_dir, e))?;
    let path = out_dir.join(MATRIX_FILE);
    let html = matrix_html(summary, out_dir)?;
    std::fs::write(&path, html).map_err(|e| ReportError::io(&path, e))?;
    Ok(path)
}

/// Escapes text for XML content and attributes.
fn xml_esc(text: &str) -> String {
    // The same five entities as HTML; XML 1.0 also forbids most control characters.
    crate::html::esc(text)
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}

/// JUnit XML for CI: one test case per cell; a failure when its expectation failed, an error
/// when any of its runs errored.
pub fn junit_xml(summary: &MatrixSummary) -> String {
    let failures = summary
        .cells
        .iter()
        .filter(|c| !c.expectation_held())
        .count();
    let errors = summary
        .cells
        .iter()
        .filter(|c| c.runs_errored() > 0)
        .count();
    let title = xml_esc(&summary.title);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tidewater matrix {title}\" \
         tests=\"{0}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"{title}\" \
         tests=\"{0}\" failures=\"{failures}\" errors=\"{errors}\">\n",
        summary.cells.len()
    );
    for c in &summary.cells {
        let _ = writeln!(
            out,
            "    <testcase classname=\"tidewater.matrix.{title}\" name=\"{}\">",
            xml_esc(&c.label)
        );
        let errored: Vec<String> = c
            .runs
            .iter()
            .filter_map(|r| {
                r.error.as_ref().map(|e| {
                    format!(
                        "{}: {e}",
                        r.run_dir
                            .as_deref()
                            .map_or("-".into(), |d| d.display().to_string())
                    )
                })
            })
            .collect();
        if !errored.is_empty() {
            let _ = writeln!(
                out,
                "      <error message=\"{} of {} runs errored\">{}</error>",
                errored.len(),
                c.runs.len(),
                xml_esc(&errored.join("\n"))
            );
        }
        if !c.expectation_held() {
            let _ = writeln!(
                out,
                "      <failure message=\"expectation failed: {}\">{}</failure>",
                xml_esc(&c.expectation.description),
                xml_esc(&c.failures.join("\n"))
            );
        }
        let _ = writeln!(
            out,
            "      <system-out>runs={} lost_writes={} hw_regressions={} availability={}</system-out>\n    </testcase>",
            c.runs.len(),
            c.lost_writes_total,
            c.hw_regressions_total,
            pct(c.availability())
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_out_of_the_matrix_directory() {
        let rel = relative_path(
            Path::new("/s/matrix/durability/1"),
            Path::new("/s/cell-a/2026"),
        );
        assert_eq!(rel, PathBuf::from("../../../cell-a/2026"));
        assert_eq!(
            relative_path(Path::new("/s"), Path::new("/s/a/b")),
            PathBuf::from("a/b")
        );
    }
}
