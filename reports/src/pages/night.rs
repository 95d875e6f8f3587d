//! A night's summary: what each cell of a nightly matrix showed, and what changed since the
//! previous night, regressions first.
//!
//! `tidewater matrix --night STAMP` writes `STORE/<matrix>/nights/STAMP/` with the night's
//! matrix page, JUnit file, `summary.json` ([`NightSummary`]) and `summary.html`; the previous
//! night is the newest earlier stamp there with a `summary.json`. The store's index lists the
//! nights with links to both pages ([`list_nights`]).
//!
//! A change is a regression when, against the previous night, a cell lost more acknowledged
//! writes, broke its promise in more runs, stopped holding its expectation, lost more than
//! [`AVAILABILITY_DROP_MAX`] of availability, or its p99 send latency grew by more than
//! [`LATENCY_GROWTH_MAX`] (and by at least [`LATENCY_FLOOR_MS`]).

use crate::error::ReportError;
use crate::html::{esc, href, page};
use crate::pages::matrix::{CellStatus, MatrixSummary, MATRIX_FILE};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{Promise, Validity};

/// The summary file of a night.
pub const SUMMARY_FILE: &str = "summary.json";
/// Its page.
pub const SUMMARY_PAGE: &str = "summary.html";
/// The directory of a matrix's nights, under its output directory.
pub const NIGHTS_DIR: &str = "nights";
/// A drop in availability (a share) beyond this is a regression.
pub const AVAILABILITY_DROP_MAX: f64 = 0.05;
/// p99 latency growth beyond this factor is a regression...
pub const LATENCY_GROWTH_MAX: f64 = 1.5;
/// ...when it also grew by at least this many milliseconds.
pub const LATENCY_FLOOR_MS: f64 = 10.0;

/// One cell of one night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NightCell {
    /// The cell's label (the key across nights).
    pub label: String,
    /// Runs, and how many errored.
    pub runs: usize,
    /// Runs that errored (nothing ran, or it was not checked).
    pub errored: usize,
    /// Acknowledged writes lost over all runs (`stats.lost_acknowledged`).
    pub lost_acknowledged: u64,
    /// Share of sends acknowledged over all runs.
    pub availability: Option<f64>,
    /// 99th percentile latency of ok sends, milliseconds.
    pub p99_ms: Option<f64>,
    /// Runs by verdict: valid, invalid, unknown.
    pub valid: [usize; 3],
    /// Runs by promise: kept, broken, unknown.
    pub promise: [usize; 3],
    /// `held`, `held-with-errors`, `failed` or `errored`.
    pub expectation: String,
    /// Why the expectation failed.
    pub failures: Vec<String>,
}

/// One difference from the previous night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The cell.
    pub cell: String,
    /// What changed, in words: "lost acknowledged writes 0 -> 12".
    pub what: String,
    /// True when it is worse.
    pub regression: bool,
}

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NightSummary {
    /// The night's stamp (`YYYYMMDDTHHMMSS`).
    pub night: String,
    /// The matrix's name.
    pub matrix: String,
    /// The night compared against, if any.
    pub previous: Option<String>,
    /// Every cell.
    pub cells: Vec<NightCell>,
    /// Changes against the previous night, regressions first.
    pub changes: Vec<Change>,
    /// The night's exit code: the matrix's, or 1 when anything regressed.
    pub exit_code: i32,
}

impl NightSummary {
    /// The regressions among the changes.
    pub fn regressions(&self) -> usize {
        self.changes.iter().filter(|c| c.regression).count()
    }
}

fn cell_of(c: &crate::pages::matrix::CellSummary) -> NightCell {
    let mut valid = [0; 3];
    let mut promise = [0; 3];
    for r in c.runs.iter().filter(|r| r.error.is_none()) {
        if let Some(res) = &r.results {
            valid[match res.valid {
                Validity::Valid => 0,
                Validity::Invalid => 1,
                Validity::Unknown => 2,
            }] += 1;
            promise[match res.promise {
                Promise::Kept => 0,
                Promise::Broken => 1,
                Promise::Unknown => 2,
            }] += 1;
        }
    }
    NightCell {
        label: c.label.clone(),
        runs: c.runs.len(),
        errored: c.runs_errored(),
        lost_acknowledged: c.lost_writes_total,
        availability: c.availability(),
        p99_ms: c.send_latency_p99_ns.map(|ns| ns as f64 / 1e6),
        valid,
        promise,
        expectation: match c.status() {
            CellStatus::Held => "held",
            CellStatus::HeldWithErrors => "held-with-errors",
            CellStatus::Failed => "failed",
            CellStatus::NotEvaluated => "errored",
        }
        .to_string(),
        failures: c.failures.clone(),
    }
}

/// What changed in one cell since the previous night.
fn changes_of(now: &NightCell, before: &NightCell) -> Vec<Change> {
    let mut out = Vec::new();
    let mut add = |what: String, regression: bool| {
        out.push(Change {
            cell: now.label.clone(),
            what,
            regression,
        })
    };
    if now.lost_acknowledged != before.lost_acknowledged {
        add(
            format!(
                "lost acknowledged writes {} -> {}",
                before.lost_acknowledged, now.lost_acknowledged
            ),
            now.lost_acknowledged > before.lost_acknowledged,
        );
    }
    if now.promise[1] != before.promise[1] {
        add(
            format!(
                "runs breaking the promise {} -> {}",
                before.promise[1], now.promise[1]
            ),
            now.promise[1] > before.promise[1],
        );
    }
    if now.expectation != before.expectation {
        let worse = |e: &str| matches!(e, "failed" | "errored");
        add(
            format!("expectation {} -> {}", before.expectation, now.expectation),
            worse(&now.expectation) && !worse(&before.expectation),
        );
    }
    if let (Some(a), Some(b)) = (now.availability, before.availability) {
        if (a - b).abs() > AVAILABILITY_DROP_MAX {
            add(
                format!("availability {:.0}% -> {:.0}%", b * 100.0, a * 100.0),
                a < b,
            );
        }
    }
    if let (Some(a), Some(b)) = (now.p99_ms, before.p99_ms) {
        let grew = a > b * LATENCY_GROWTH_MAX && a - b >= LATENCY_FLOOR_MS;
        let shrank = b > a * LATENCY_GROWTH_MAX && b - a >= LATENCY_FLOOR_MS;
        if grew || shrank {
            add(format!("p99 send latency {b:.0} ms -> {a:.0} ms"), grew);
        }
    }
    out
}

/// The summary of a night from its matrix summary, compared with `previous`.
pub fn night_summary(
    summary: &MatrixSummary,
    night: &str,
    previous: Option<&NightSummary>,
) -> NightSummary {
    let cells: Vec<NightCell> = summary.cells.iter().map(cell_of).collect();
    let mut changes = Vec::new();
    if let Some(prev) = previous {
        for cell in &cells {
            match prev.cells.iter().find(|c| c.label == cell.label) {
                Some(before) => changes.extend(changes_of(cell, before)),
                None => changes.push(Change {
                    cell: cell.label.clone(),
                    what: "new cell".into(),
                    regression: false,
                }),
            }
        }
        for gone in prev
            .cells
            .iter()
            .filter(|p| !cells.iter().any(|c| c.label == p.label))
        {
            changes.push(Change {
                cell: gone.label.clone(),
                what: "cell no longer in the matrix".into(),
                regression: false,
            });
        }
    }
    // Regressions first; otherwise in matrix order.
    changes.sort_by_key(|c| !c.regression);
    let regressed = changes.iter().any(|c| c.regression);
    let exit_code = match summary.exit_code() {
        0 | 2 if regressed => 1,
        code => code,
    };
    NightSummary {
        night: night.to_string(),
        matrix: summary.title.clone(),
        previous: previous.map(|p| p.night.clone()),
        cells,
        changes,
        exit_code,
    }
}

/// The newest night before `night` in `nights_dir` that has a summary.
pub fn previous_night(nights_dir: &Path, night: &str) -> Option<NightSummary> {
    let mut stamps: Vec<String> = std::fs::read_dir(nights_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|s| s.as_str() < night && !s.starts_with('.'))
        .collect();
    stamps.sort();
    stamps.iter().rev().find_map(|s| {
        let text = std::fs::read_to_string(nights_dir.join(s).join(SUMMARY_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    })
}

fn share(x: Option<f64>) -> String {
    x.map_or("–".into(), |a| format!("{:.0}%", a * 100.0))
}

/// The night's page.
pub fn night_html(n: &NightSummary) -> String {
    let mut body = format!(
        "<h1>{} — night {}</h1><p><a href=\"{MATRIX_FILE}\">matrix page</a> · \
         <a href=\"{SUMMARY_FILE}\">summary.json</a> · <a href=\"../../../index.html\">index</a></p>",
        esc(&n.matrix),
        esc(&n.night)
    );
    let verdict = match (n.exit_code, n.regressions()) {
        (0, _) => "every expectation held and nothing regressed".to_string(),
        (_, r) if r > 0 => format!("{r} regression(s) since the previous night"),
        (1, _) => "an expectation failed".to_string(),
        (2, _) => "runs errored".to_string(),
        (code, _) => format!("exit {code}"),
    };
    let _ = write!(
        body,
        "<p><strong>{}</strong> (exit {}).</p>",
        esc(&verdict),
        n.exit_code
    );
    body.push_str("<section id=\"changes\"><h2>Changes</h2>");
    match (&n.previous, n.changes.is_empty()) {
        (None, _) => body.push_str("<p>No earlier night to compare with.</p>"),
        (Some(p), true) => {
            let _ = write!(body, "<p>Nothing changed since {}.</p>", esc(p));
        }
        (Some(p), false) => {
            let _ = write!(body, "<p>Since {}:</p><ul>", esc(p));
            for c in &n.changes {
                let tag = if c.regression {
                    "<span class=\"tag violation\">regression</span> "
                } else {
                    ""
                };
                let _ = write!(
                    body,
                    "<li>{tag}<code>{}</code>: {}</li>",
                    esc(&c.cell),
                    esc(&c.what)
                );
            }
            body.push_str("</ul>");
        }
    }
    body.push_str(
        "</section><section id=\"cells\"><h2>Cells</h2><table><tr><th>cell</th>\
         <th class=\"num\">lost ack'd writes</th><th class=\"num\">availability</th>\
         <th class=\"num\">p99 send</th><th>valid / invalid / unknown</th>\
         <th>promise kept / broken / unknown</th><th>expectation</th></tr>",
    );
    for c in &n.cells {
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{} / {} / {}</td><td>{} / {} / {}</td><td>{}{}</td></tr>",
            esc(&c.label),
            c.lost_acknowledged,
            share(c.availability),
            c.p99_ms.map_or("–".into(), |ms| format!("{ms:.0} ms")),
            c.valid[0],
            c.valid[1],
            c.valid[2],
            c.promise[0],
            c.promise[1],
            c.promise[2],
            esc(&c.expectation),
            if c.failures.is_empty() {
                String::new()
            } else {
                format!(": {}", esc(&c.failures.join("; ")))
            }
        );
    }
    body.push_str("</table></section>");
    page(&format!("{} night {}", n.matrix, n.night), &body)
}

/// Writes `summary.json` and `summary.html` into `dir`.
pub fn write_night(n: &NightSummary, dir: &Path) -> Result<PathBuf, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let json = dir.join(SUMMARY_FILE);
    let text = serde_json::to_string_pretty(n).expect("summary serializes") + "\n";
    std::fs::write(&json, text).map_err(|e| ReportError::io(&json, e))?;
    let html = dir.join(SUMMARY_PAGE);
    std::fs::write(&html, night_html(n)).map_err(|e| ReportError::io(&html, e))?;
    Ok(json)
}

/// Every night of every matrix in a store, newest first: (store-relative directory, summary).
pub fn list_nights(store_dir: &Path) -> Vec<(String, NightSummary)> {
    let mut out = Vec::new();
    let Ok(tests) = std::fs::read_dir(store_dir) else {
        return out;
    };
    for test in tests.filter_map(|e| e.ok()) {
        let nights = test.path().join(NIGHTS_DIR);
        let Ok(entries) = std::fs::read_dir(&nights) else {
            continue;
        };
        for night in entries.filter_map(|e| e.ok()) {
            let Ok(text) = std::fs::read_to_string(night.path().join(SUMMARY_FILE)) else {
                continue;
            };
            if let Ok(summary) = serde_json::from_str::<NightSummary>(&text) {
                let rel = format!(
                    "{}/{NIGHTS_DIR}/{}",
                    test.file_name().to_string_lossy(),
                    night.file_name().to_string_lossy()
                );
                out.push((rel, summary));
            }
        }
    }
    out.sort_by(|a, b| b.1.night.cmp(&a.1.night).then(a.0.cmp(&b.0)));
    out
}

/// The index's section listing the nights (empty when there are none).
pub fn nights_section(store_dir: &Path) -> String {
    let nights = list_nights(store_dir);
    if nights.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"nights\"><h2>Nights</h2><table><tr><th>night</th><th>matrix</th>\
         <th>outcome</th><th class=\"num\">lost ack'd writes</th><th>changes</th></tr>",
    );
    for (rel, n) in nights.iter().take(60) {
        let lost: u64 = n.cells.iter().map(|c| c.lost_acknowledged).sum();
        let outcome = match (n.exit_code, n.regressions()) {
            (0, _) => "<span class=\"verdict clean\">held</span>".to_string(),
            (_, r) if r > 0 => format!("<span class=\"verdict broken\">{r} regression(s)</span>"),
            (1, _) => "<span class=\"verdict broken\">expectation failed</span>".to_string(),
            (_, _) => "<span class=\"verdict unknown\">runs errored</span>".to_string(),
        };
        let _ = write!(
            out,
            "<tr><td><a href=\"{0}/{SUMMARY_PAGE}\">{1}</a></td><td><a href=\"{0}/{MATRIX_FILE}\">{2}</a></td>\
             <td>{outcome}</td><td class=\"num\">{lost}</td><td>{3}</td></tr>",
            href(rel),
            esc(&n.night),
            esc(&n.matrix),
            n.changes.len()
        );
    }
    out.push_str("</table></section>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(
        label: &str,
        lost: u64,
        availability: f64,
        p99_ms: f64,
        expectation: &str,
    ) -> NightCell {
        NightCell {
            label: label.into(),
            runs: 1,
            errored: 0,
            lost_acknowledged: lost,
            availability: Some(availability),
            p99_ms: Some(p99_ms),
            valid: [1, 0, 0],
            promise: [1, 0, 0],
            expectation: expectation.into(),
            failures: vec![],
        }
    }

    fn night(stamp: &str, cells: Vec<NightCell>) -> NightSummary {
        NightSummary {
            night: stamp.into(),
            matrix: "m".into(),
            previous: None,
            cells,
            changes: vec![],
            exit_code: 0,
        }
    }

    #[test]
    fn regressions_come_first_and_small_moves_are_no_change() {
        let before = vec![
            cell("a", 0, 0.90, 20.0, "held"),
            cell("b", 5, 0.60, 20.0, "held"),
            cell("gone", 0, 1.0, 1.0, "held"),
        ];
        let now = [
            // Lost more, availability down 10 points, p99 doubled by 20 ms, failed.
            cell("a", 3, 0.80, 40.0, "failed"),
            // Lost fewer, availability up 2 points (no change), p99 up 40% (no change).
            cell("b", 1, 0.62, 28.0, "held"),
            cell("new", 0, 1.0, 1.0, "held"),
        ];
        let mut changes = Vec::new();
        for (n, b) in now.iter().zip(&before) {
            changes.extend(changes_of(n, b));
        }
        let what: Vec<(&str, &str, bool)> = changes
            .iter()
            .map(|c| (c.cell.as_str(), c.what.as_str(), c.regression))
            .collect();
        assert_eq!(
            what,
            [
                ("a", "lost acknowledged writes 0 -> 3", true),
                ("a", "expectation held -> failed", true),
                ("a", "availability 90% -> 80%", true),
                ("a", "p99 send latency 20 ms -> 40 ms", true),
                ("b", "lost acknowledged writes 5 -> 1", false),
            ]
        );
        let prev = night("20261130T023000", before);
        let dir = tempfile::tempdir().unwrap();
        for (stamp, n) in [
            ("20261129T023000", night("20261129T023000", vec![])),
            ("20261130T023000", prev.clone()),
        ] {
            write_night(&n, &dir.path().join(stamp)).unwrap();
        }
        // The newest earlier night is the one compared with; a later one is ignored.
        write_night(
            &night("20261202T023000", vec![]),
            &dir.path().join("20261202T023000"),
        )
        .unwrap();
        assert_eq!(previous_night(dir.path(), "20261201T023000"), Some(prev));
        assert_eq!(previous_night(dir.path(), "20261129T023000"), None);
    }
}
