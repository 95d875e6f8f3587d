//! `store/index.html`: every run of the store, newest first, and per matrix cell its recent
//! runs as a trend.
//!
//! A run is a directory `store/<name>/<timestamp>/` holding at least one of config.json,
//! results.json or history.jsonl. Symbolic links (`store/latest`) are not followed, so no run
//! is listed twice. Each run shows its standing (verdict and promise together, in the
//! standing colours), its lost acknowledged writes (`stats.lost_acknowledged`) and the share
//! of sends acknowledged; a run without results says why when its harness.log does (setup
//! failed, harness error). Trend squares are coloured by the share of acknowledged writes
//! lost, with a bar under each for the share of sends acknowledged.

use crate::error::ReportError;
use crate::html::{esc, href, page, standing_badge};
use crate::scan::run_files::{
    config_settings, display_value, lost_acknowledged, parse_results, read_json_opt, CONFIG_FILE,
    HISTORY_FILE, REPORT_FILE, RESULTS_FILE,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{CheckResults, Validity};

/// Runs listed in the index at most (the newest); older runs stay on disk.
pub const INDEX_RUNS_MAX: usize = 5000;
/// Runs shown in each matrix cell's trend.
pub const TREND_RUNS_MAX: usize = 30;
/// The index's file name.
pub const INDEX_FILE: &str = "index.html";

/// What the index shows of one run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The run directory.
    pub dir: PathBuf,
    /// The run directory relative to the store, `<name>/<timestamp>`.
    pub rel: String,
    /// The test name.
    pub name: String,
    /// The timestamp directory name.
    pub timestamp: String,
    /// config.json (`Null` when absent).
    pub config: Value,
    /// results.json, when the run was checked.
    pub results: Option<CheckResults>,
    /// Why results.json could not be read, when it exists but is malformed.
    pub results_error: Option<String>,
    /// Whether report.html exists.
    pub has_report: bool,
    /// Why a run without results ended, from its harness.log: ("setup failed" or "harness
    /// error", the message).
    pub failure: Option<(String, String)>,
}

/// The end of harness.log read for a failure line.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The last "setup failed: ..." or "harness error: ..." of a run's harness.log.
fn failure_of(dir: &Path) -> Option<(String, String)> {
    let mut file = std::fs::File::open(dir.join("harness.log")).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))
        .ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().rev().find_map(|line| {
        ["setup failed", "harness error"].iter().find_map(|kind| {
            let at = line.find(&format!("{kind}: "))?;
            Some((
                kind.to_string(),
                line[at + kind.len() + 2..].trim().to_string(),
            ))
        })
    })
}

impl RunSummary {
    /// Reads the summary of the run in `dir`; `rel` is its path relative to the store.
    pub fn read(dir: &Path, rel: String) -> Result<RunSummary, ReportError> {
        let config = match read_json_opt(&dir.join(CONFIG_FILE)) {
            Ok(v) => v.unwrap_or(Value::Null),
            // One broken config must not hide the whole store.
            Err(_) => Value::Null,
        };
        let (results, results_error) = match read_json_opt(&dir.join(RESULTS_FILE)) {
            Ok(Some(v)) => match parse_results(v) {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e.to_string())),
            },
            Ok(None) => (None, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let mut parts = rel.rsplitn(2, '/');
        let timestamp = parts.next().unwrap_or_default().to_string();
        let dir_name = parts.next().unwrap_or_default().to_string();
        let name = config
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(dir_name);
        let failure = if results.is_none() {
            failure_of(dir)
        } else {
            None
        };
        Ok(RunSummary {
            dir: dir.to_path_buf(),
            rel,
            name,
            timestamp,
            has_report: dir.join(REPORT_FILE).is_file(),
            config,
            results,
            results_error,
            failure,
        })
    }

    /// The verdict, `None` when not checked.
    pub fn verdict(&self) -> Option<Validity> {
        self.results.as_ref().map(|r| r.valid)
    }

    /// The matrix cell label, when the run belongs to a matrix.
    pub fn matrix_cell(&self) -> Option<&str> {
        self.config.get("matrix_cell").and_then(Value::as_str)
    }

    /// The run's badge: its standing, or why it has no results.
    pub fn badge(&self) -> String {
        match (&self.results, &self.failure) {
            (Some(r), _) => standing_badge(Some(r), ""),
            (None, Some((kind, message))) => format!(
                "<span class=\"verdict setup\" title=\"{}\">{}</span><span class=\"facts\">{}</span>",
                esc(message),
                esc(kind),
                esc(message)
            ),
            (None, None) => standing_badge(None, "not checked"),
        }
    }

    /// The CSS class of the run's standing: `clean`, `allowed`, `broken`, `unknown`, or
    /// `setup` (no results, and harness.log says why) or `none` (not checked).
    pub fn standing_class(&self) -> &'static str {
        match (&self.results, &self.failure) {
            (Some(r), _) => r.standing().class(),
            (None, Some(_)) => "setup",
            (None, None) => "none",
        }
    }

    /// (lost, acknowledged) from `stats.lost_acknowledged`, when checked.
    pub fn lost(&self) -> Option<(u64, u64)> {
        self.results
            .as_ref()
            .map(|r| (lost_acknowledged(r), r.acknowledged()))
    }

    /// The share of send ops acknowledged ok (`stats.ops_by_f.send`), when known.
    pub fn availability(&self) -> Option<f64> {
        let send = &self.results.as_ref()?.stats["ops_by_f"]["send"];
        let (ok, invoked) = (send["ok"].as_u64()?, send["invoke"].as_u64()?);
        (invoked > 0).then(|| ok as f64 / invoked as f64)
    }

    /// One line of settings: acks, the fault plan when one ran (else the random nemesis),
    /// then the broker/topic settings.
    pub fn settings_summary(&self) -> String {
        let mut parts = Vec::new();
        let planned = self.config.get("plan").is_some_and(|p| !p.is_null());
        let faults = if planned { "plan" } else { "nemesis" };
        for key in ["acks", faults] {
            let v = display_value(self.config.get(key));
            if !v.is_empty() {
                parts.push(format!("{key}={v}"));
            }
        }
        parts.extend(
            config_settings(&self.config)
                .iter()
                .map(|(k, v)| format!("{k}={v}")),
        );
        parts.join(", ")
    }
}

fn is_run_dir(dir: &Path) -> bool {
    [CONFIG_FILE, RESULTS_FILE, HISTORY_FILE]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// Real (non-symlink) subdirectories of `dir`, not hidden, by name.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, ReportError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let entry = entry.map_err(|e| ReportError::io(dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| ReportError::io(entry.path(), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_dir() && !name.starts_with('.') {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Every run of the store, newest first (by timestamp directory name, then test name).
pub fn list_runs(store_dir: &Path) -> Result<Vec<RunSummary>, ReportError> {
    let mut runs = Vec::new();
    for (name, test_dir) in subdirs(store_dir)? {
        for (timestamp, run_dir) in subdirs(&test_dir)? {
            if is_run_dir(&run_dir) {
                runs.push(RunSummary::read(&run_dir, format!("{name}/{timestamp}"))?);
            }
        }
    }
    runs.sort_by(|a, b| {
        b.timestamp
            .cmp(&a.timestamp)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(runs)
}

/// Nonzero anomaly counts; violations in bold red.
fn anomaly_counts(run: &RunSummary) -> String {
    let Some(results) = &run.results else {
        return match &run.results_error {
            Some(e) => format!(
                "<span class=\"muted\">unreadable results: {}</span>",
                esc(e)
            ),
            None => String::new(),
        };
    };
    let parts: Vec<String> = results
        .anomalies
        .iter()
        .filter(|(_, a)| a.count > 0)
        .map(|(name, a)| {
            if a.breaks_promise {
                format!(
                    "<strong class=\"nowrap\" style=\"color:#c62828\">{} {}</strong>",
                    esc(name),
                    a.count
                )
            } else {
                format!("<span class=\"nowrap\">{} {}</span>", esc(name), a.count)
            }
        })
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

fn run_link(run: &RunSummary, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", run_target(run), esc(text))
}

/// The colour of a run's trend square: by the share of acknowledged writes lost.
pub fn loss_colour(run: &RunSummary) -> &'static str {
    match (run.lost(), &run.failure) {
        (None, Some(_)) => "#37474f",
        (None, None) => "#bdbdbd",
        // Older results say what was lost but not how much was acknowledged.
        (Some((0, 0)), _) => "#bdbdbd",
        (Some((_, 0)), _) => "#d55e00",
        (Some((0, _)), _) if run.verdict() == Some(Validity::Valid) => "#2e7d32",
        (Some((0, _)), _) => "#9e9e9e",
        (Some((lost, acked)), _) => {
            let share = lost as f64 / acked as f64;
            if share < 0.01 {
                "#e6a700"
            } else if share < 0.1 {
                "#d55e00"
            } else {
                "#a50f15"
            }
        }
    }
}

/// The colour of the bar under a trend square: by the share of sends acknowledged.
pub fn availability_colour(run: &RunSummary) -> &'static str {
    match run.availability() {
        None => "#e0e0e0",
        Some(a) if a >= 0.95 => "#08519c",
        Some(a) if a >= 0.8 => "#3182bd",
        Some(a) if a >= 0.5 => "#6baed6",
        Some(_) => "#c6dbef",
    }
}

/// A run's figures in words, for tooltips.
fn run_words(run: &RunSummary) -> String {
    let standing = match (&run.results, &run.failure) {
        (Some(r), _) => r.standing_label().to_string(),
        (None, Some((kind, message))) => format!("{kind}: {message}"),
        (None, None) => "not checked".to_string(),
    };
    let lost = match run.lost() {
        Some((lost, acked)) if acked > 0 => format!(
            "; {lost} of {acked} acknowledged writes lost ({:.1}%)",
            100.0 * lost as f64 / acked as f64
        ),
        Some(_) => "; no acknowledged write".to_string(),
        None => String::new(),
    };
    let avail = run
        .availability()
        .map(|a| format!("; {:.0}% of sends acknowledged", a * 100.0))
        .unwrap_or_default();
    format!("{} {standing}{lost}{avail}", run.timestamp)
}

/// The trend of the recent runs of each matrix cell: oldest to newest, left to right.
fn trends_section(runs: &[RunSummary]) -> String {
    let mut cells: BTreeMap<&str, Vec<&RunSummary>> = BTreeMap::new();
    for run in runs {
        if let Some(cell) = run.matrix_cell() {
            cells.entry(cell).or_default().push(run);
        }
    }
    if cells.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"trends\"><h2>Matrix cells</h2><p class=\"muted\">Recent runs of each \
         cell, oldest to newest; each square links to its report. Square: acknowledged writes \
         lost (<span class=\"swatch\" style=\"background:#2e7d32\"></span>none, valid \
         <span class=\"swatch\" style=\"background:#e6a700\"></span>under 1% \
         <span class=\"swatch\" style=\"background:#d55e00\"></span>under 10% \
         <span class=\"swatch\" style=\"background:#a50f15\"></span>10% or more \
         <span class=\"swatch\" style=\"background:#9e9e9e\"></span>none, but not valid \
         <span class=\"swatch\" style=\"background:#bdbdbd\"></span>not checked \
         <span class=\"swatch\" style=\"background:#37474f\"></span>setup failed); bar \
         under it: sends acknowledged (<span class=\"swatch\" style=\"background:#08519c\">\
         </span>95% or more <span class=\"swatch\" style=\"background:#3182bd\"></span>80% \
         <span class=\"swatch\" style=\"background:#6baed6\"></span>50% \
         <span class=\"swatch\" style=\"background:#c6dbef\"></span>less). Hover for the \
         figures.</p><table><tr><th>cell</th><th>trend</th><th>latest</th>\
         <th class=\"num\">runs</th></tr>",
    );
    for (cell, cell_runs) in cells {
        let recent: Vec<&&RunSummary> = cell_runs.iter().take(TREND_RUNS_MAX).collect();
        let mut squares = String::new();
        for run in recent.iter().rev() {
            let _ = write!(
                squares,
                "<a class=\"{}\" href=\"{}\" title=\"{}\"><span class=\"loss\" style=\"background:{}\">\
                 </span><span class=\"avail\" style=\"background:{}\"></span></a>",
                run.standing_class(),
                run_target(run),
                esc(&run_words(run)),
                loss_colour(run),
                availability_colour(run)
            );
        }
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td class=\"trend\">{squares}</td><td>{}</td>\
             <td class=\"num\">{}</td></tr>",
            esc(cell),
            cell_runs[0].badge(),
            cell_runs.len()
        );
    }
    out.push_str("</table></section>");
    out
}

/// The href of a run: its report, or its directory when it has none yet.
fn run_target(run: &RunSummary) -> String {
    if run.has_report {
        format!("{}/{REPORT_FILE}", href(&run.rel))
    } else {
        format!("{}/", href(&run.rel))
    }
}

/// The index page of the runs of `store_dir`, as HTML: the nightly matrices' nights (each
/// linking its summary and matrix page), the trend of every matrix cell, then every run.
pub fn index_html(store_dir: &Path, runs: &[RunSummary]) -> String {
    let mut body = String::from("<h1>Tidewater runs</h1>");
    let _ = write!(body, "<p class=\"muted\">{} runs.</p>", runs.len());
    body.push_str(&crate::pages::night::nights_section(store_dir));
    body.push_str(&trends_section(runs));
    body.push_str(
        "<section id=\"runs\"><h2>Runs</h2><table><tr><th>test</th><th>time</th><th>standing</th>\
         <th class=\"num\">lost ack'd writes</th><th class=\"num\">sends ok</th>\
         <th>anomalies</th><th>settings</th></tr>",
    );
    for run in runs.iter().take(INDEX_RUNS_MAX) {
        let lost = match run.lost() {
            Some((lost, 0)) => lost.to_string(),
            Some((lost, acked)) => format!("{lost} of {acked}"),
            None => "–".to_string(),
        };
        let avail = run
            .availability()
            .map_or("–".to_string(), |a| format!("{:.0}%", a * 100.0));
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{lost}</td>\
             <td class=\"num\">{avail}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&run.name),
            run_link(run, &run.timestamp),
            run.badge(),
            anomaly_counts(run),
            esc(&run.settings_summary())
        );
    }
    body.push_str("</table>");
    if runs.len() > INDEX_RUNS_MAX {
        let _ = write!(
            body,
            "<p class=\"muted\">Only the newest {INDEX_RUNS_MAX} runs are listed.</p>"
        );
    }
    body.push_str("</section>");
    page("Tidewater runs", &body)
}

/// Writes `store_dir/index.html` listing every run and returns its path.
pub fn render_index(store_dir: &Path) -> Result<PathBuf, ReportError> {
    let runs = list_runs(store_dir)?;
    let path = store_dir.join(INDEX_FILE);
    let tmp = store_dir.join(format!(".{INDEX_FILE}.tmp"));
    std::fs::write(&tmp, index_html(store_dir, &runs)).map_err(|e| ReportError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| ReportError::io(&path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_encode_everything_but_path_characters() {
        assert_eq!(
            href("my test/2026-11-30T23:00"),
            "my%20test/2026-11-30T23%3A00"
        );
    }
}
