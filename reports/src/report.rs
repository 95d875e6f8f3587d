//! `report.html` of one run: verdict, settings, anomalies with examples, plots with fault
//! windows, a summary of operations, the faults, and the operations the examples refer to.

use crate::error::ReportError;
use crate::examples;
use crate::faults::{fault_windows, Faults};
use crate::figures::{plots_section, unseen_series};
use crate::history_scan::{scan_history, HistoryScan, Outcome};
use crate::html::{esc, ms, page, verdict_badge};
use crate::plots;
use crate::run_dir::{display_value, RunFiles, Sample, HISTORY_FILE, REPORT_FILE};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{Anomaly, CheckResults};

/// Examples shown per anomaly; the rest stay in results.json.
pub const EXAMPLES_SHOWN_MAX: usize = 20;
/// Operations listed in the "referenced operations" section at most.
pub const REFERENCED_OPS_MAX: usize = 2000;
/// Fault windows and nemesis events listed at most.
pub const FAULT_ROWS_MAX: usize = 500;
pub use crate::figures::{GROUP_PLOT_IDS, PARTITIONS_DRAWN_MAX, PLOT_IDS};
/// Renders `run_dir/report.html` from the files of the run and returns its path.
pub fn render_run(run_dir: &Path) -> Result<PathBuf, ReportError> {
    let html = render_run_html(run_dir)?;
    let path = run_dir.join(REPORT_FILE);
    // Write then rename, so a browser or `tidewater serve` never sees half a report.
    let tmp = run_dir.join(format!(".{REPORT_FILE}.tmp"));
    std::fs::write(&tmp, html).map_err(|e| ReportError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| ReportError::io(&path, e))?;
    Ok(path)
}

/// The report of `run_dir` as an HTML string.
pub fn render_run_html(run_dir: &Path) -> Result<String, ReportError> {
    let files = RunFiles::read(run_dir)?;
    let wanted = referenced_indexes(files.results.as_ref());
    let scan = scan_history(&run_dir.join(HISTORY_FILE), &wanted)?;
    let x_max_ns = files
        .samples
        .iter()
        .map(|s| s.time)
        .chain(
            unseen_series(files.results.as_ref())
                .iter()
                .map(|p| (p.0 * 1e9) as u64),
        )
        .fold(scan.time_max_ns, u64::max);
    let faults = fault_windows(&scan.nemesis, x_max_ns);
    let ctx = Ctx {
        files: &files,
        scan: &scan,
        faults: &faults,
        x_max_s: x_max_ns as f64 / 1e9,
        samples_by_key: group_leader_samples(&files.samples),
    };

    let mut body = String::new();
    let name = files.name();
    let _ = write!(body, "<h1>{}</h1>", esc(&name));
    let _ = write!(
        body,
        "<p class=\"muted\"><code>{}</code></p>",
        esc(&run_dir.display().to_string())
    );
    body.push_str(CONTENTS);
    body.push_str(&verdict_section(&ctx));
    body.push_str(&settings_section(&files));
    body.push_str(&anomalies_section(files.results.as_ref()));
    body.push_str(&plots_section(&ctx)?);
    body.push_str(&summary_section(&scan));
    body.push_str(&stats_section(files.results.as_ref()));
    body.push_str(&faults_section(&faults));
    body.push_str(&referenced_section(&scan, &wanted));
    Ok(page(&format!("{name} — Tidewater report"), &body))
}

/// Links to the sections and plots, at the top of the report.
const CONTENTS: &str = "<nav class=\"muted\"><a href=\"#verdict\">verdict</a> · \
    <a href=\"#settings\">settings</a> · <a href=\"#anomalies\">anomalies</a> · plots: \
    <a href=\"#plot-latency\">latency</a>, <a href=\"#plot-throughput\">throughput</a>, \
    <a href=\"#plot-hw\">high watermark</a>, <a href=\"#plot-lost-writes\">lost writes</a>, \
    <a href=\"#plot-unseen\">unseen</a>, <a href=\"#plot-isr\">ISR</a> · \
    <a href=\"#summary\">operations</a> · <a href=\"#stats\">checker statistics</a> · \
    <a href=\"#faults\">faults</a> · <a href=\"#ops\">referenced operations</a></nav>";

/// Statistics too long for the table (drawn as a plot, or the checker's own settings).
const STATS_SKIPPED: [&str; 2] = ["unseen_series", "settings"];

/// What every section may read.
pub(crate) struct Ctx<'a> {
    /// config.json, results.json and samples.jsonl.
    pub(crate) files: &'a RunFiles,
    /// What the pass over the history gathered.
    pub(crate) scan: &'a HistoryScan,
    /// Fault windows, shaded on every time plot.
    pub(crate) faults: &'a Faults,
    /// The end of the time axis: the latest op, sample or unseen point, in seconds.
    pub(crate) x_max_s: f64,
    /// The leaders' samples by key, grouped once: a run can have millions of samples.
    samples_by_key: BTreeMap<&'a str, Vec<&'a Sample>>,
}

impl<'a> Ctx<'a> {
    /// The samples of `key` answered by its leader, in file order.
    pub(crate) fn leader_samples(&self, key: &str) -> impl Iterator<Item = &'a Sample> + '_ {
        self.samples_by_key.get(key).into_iter().flatten().copied()
    }
}

fn group_leader_samples(samples: &[Sample]) -> BTreeMap<&str, Vec<&Sample>> {
    let mut by_key: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.from_leader()) {
        by_key.entry(s.key.as_str()).or_default().push(s);
    }
    by_key
}

/// The op indexes named by the examples shown.
fn referenced_indexes(results: Option<&CheckResults>) -> BTreeSet<u64> {
    let mut wanted = BTreeSet::new();
    for anomaly in results.iter().flat_map(|r| r.anomalies.values()) {
        for example in anomaly.examples.iter().take(EXAMPLES_SHOWN_MAX) {
            for i in examples::op_indexes(example) {
                if wanted.len() < REFERENCED_OPS_MAX {
                    wanted.insert(i);
                }
            }
        }
    }
    wanted
}

/// Violations first, then the allowed anomalies; each group by name.
fn ordered_anomalies(results: &CheckResults) -> Vec<(&String, &Anomaly)> {
    let mut list: Vec<_> = results.anomalies.iter().collect();
    list.sort_by_key(|(name, a)| (!a.breaks_promise, name.as_str()));
    list
}

fn verdict_section(ctx: &Ctx) -> String {
    let mut out = String::from("<section id=\"verdict\">");
    let results = ctx.files.results.as_ref();
    let _ = write!(
        out,
        "<p>Verdict: {}</p>",
        verdict_badge(results.map(|r| r.valid))
    );
    match results {
        None => out.push_str("<p>No results.json: this run was not checked.</p>"),
        Some(r) => {
            let found: Vec<String> = ordered_anomalies(r)
                .into_iter()
                .filter(|(_, a)| a.count > 0)
                .map(|(name, a)| {
                    let tag = if a.breaks_promise { "violation" } else { "allowed" };
                    format!(
                        "<a href=\"#anomaly-{0}\">{0}</a> ({1}, <span class=\"tag {tag}\">{tag}</span>)",
                        esc(name),
                        a.count
                    )
                })
                .collect();
            if found.is_empty() {
                out.push_str("<p>No anomaly found.</p>");
            } else {
                let _ = write!(out, "<p>Anomalies: {}</p>", found.join(", "));
            }
        }
    }
    let _ = write!(
        out,
        "<p class=\"muted\">{} history lines, {:.1} s.</p>",
        ctx.scan.lines, ctx.x_max_s
    );
    let stats = results.map(|r| &r.stats);
    for (key, title) in [
        ("unknown_reasons", "Why the verdict is unknown"),
        ("problems", "History problems"),
    ] {
        let items = stats.and_then(|s| s.get(key)).and_then(Value::as_array);
        if let Some(items) = items.filter(|i| !i.is_empty()) {
            let _ = write!(out, "<div class=\"warning\"><strong>{title}</strong><ul>");
            for item in items {
                let _ = write!(out, "<li>{}</li>", esc(&short(item)));
            }
            out.push_str("</ul></div>");
        }
    }
    let warnings: Vec<&String> = ctx
        .files
        .warnings
        .iter()
        .chain(&ctx.scan.warnings)
        .collect();
    if !warnings.is_empty() {
        out.push_str("<div class=\"warning\"><strong>Warnings</strong><ul>");
        for w in warnings {
            let _ = write!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul></div>");
    }
    out.push_str("</section>");
    out
}

/// The reproduce command: a string as is, a list joined with shell quoting where needed.
fn command_line(v: Option<&Value>) -> String {
    match v {
        Some(Value::Array(words)) => words
            .iter()
            .map(|w| {
                let w = display_value(Some(w));
                if w.is_empty()
                    || w.contains(|c: char| c.is_whitespace() || "'\"$\\;&|<>*?".contains(c))
                {
                    format!("'{}'", w.replace('\'', r"'\''"))
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => display_value(other),
    }
}

/// The stored fault schedule in a line: RunConfig stores a plan (`description`, `step`
/// list); a bare list of steps is counted.
fn schedule_summary(schedule: Option<&Value>) -> Option<String> {
    let schedule = schedule?;
    let steps = schedule
        .get("step")
        .or(Some(schedule))
        .and_then(Value::as_array)
        .map(Vec::len);
    let described = schedule
        .get("description")
        .or_else(|| schedule.get("name"))
        .and_then(Value::as_str);
    match (described, steps) {
        (Some(d), Some(n)) => Some(format!("{d} ({n} steps)")),
        (Some(d), None) => Some(d.to_string()),
        (None, Some(n)) => Some(format!("{n} steps")),
        (None, None) => None,
    }
}

fn settings_section(files: &RunFiles) -> String {
    const KNOWN: [(&str, &str); 9] = [
        ("name", "test"),
        ("seed", "seed"),
        ("time_limit_s", "time limit (s)"),
        ("acks", "acks"),
        ("nemesis", "nemesis"),
        ("plan", "fault plan"),
        ("nodes", "nodes"),
        ("matrix_cell", "matrix cell"),
        ("workload", "workload"),
    ];
    // A fault plan replaces the random schedule, so its nemesis list and interval were unused.
    let planned = files.config.get("plan").is_some_and(|p| !p.is_null());
    let unused = |k: &str| planned && (k == "nemesis" || k == "nemesis_interval_s");
    let mut out = String::from("<section id=\"settings\"><h2>Settings</h2><table>");
    for (key, label) in KNOWN.into_iter().filter(|(k, _)| !unused(k)) {
        if let Some(v) = files.config.get(key).filter(|v| !v.is_null()) {
            let _ = write!(
                out,
                "<tr><th>{label}</th><td><code>{}</code></td></tr>",
                esc(&display_value(Some(v)))
            );
        }
    }
    if let Some(obj) = files.config.as_object() {
        // `sets` is RunConfig's name for the settings; the schedule is summarised below.
        let skip = |k: &str| {
            KNOWN.iter().any(|(key, _)| *key == k)
                || ["settings", "sets", "command", "schedule"].contains(&k)
                || unused(k)
        };
        for (key, v) in obj.iter().filter(|(k, _)| !skip(k)) {
            let mut text = display_value(Some(v));
            if text.len() > 300 {
                text = text.chars().take(300).collect::<String>() + " …";
            }
            let _ = write!(
                out,
                "<tr><th>{}</th><td><code>{}</code></td></tr>",
                esc(key),
                esc(&text)
            );
        }
    }
    out.push_str("</table>");
    let settings = files.settings();
    if settings.is_empty() {
        out.push_str("<p class=\"muted\">No broker or topic settings recorded (defaults).</p>");
    } else {
        out.push_str(
            "<h3>Broker and topic settings</h3><table><tr><th>setting</th><th>value</th></tr>",
        );
        for (k, v) in &settings {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td><code>{}</code></td></tr>",
                esc(k),
                esc(v)
            );
        }
        out.push_str("</table>");
    }
    if let Some(schedule) = schedule_summary(files.config.get("schedule")) {
        let _ = write!(
            out,
            "<p>Fault schedule: {} (in config.json; the Faults section shows when each fault \
             was in effect).</p>",
            esc(&schedule)
        );
    }
    // The harness's `--replay` repeats any stored run, so it is the fallback command.
    let mut command = command_line(files.config.get("command"));
    if command.is_empty() && !files.config.is_null() {
        command = format!("tidewater run --replay {}", files.dir.display());
    }
    if !command.is_empty() {
        let _ = write!(
            out,
            "<h3>Reproduce</h3><pre id=\"reproduce\">{}</pre>",
            esc(&command)
        );
    }
    out.push_str("</section>");
    out
}

fn anomalies_section(results: Option<&CheckResults>) -> String {
    let mut out = String::from("<section id=\"anomalies\"><h2>Anomalies</h2>");
    let Some(results) = results else {
        out.push_str("<p>Not checked.</p></section>");
        return out;
    };
    if results.anomalies.is_empty() {
        out.push_str("<p>The checkers found no anomaly.</p>");
    }
    for (name, a) in ordered_anomalies(results) {
        // The checker marks an anomaly as a violation when the settings forbid it; only an
        // anomaly that occurred is worth the red tag.
        let tag = match (a.count, a.breaks_promise) {
            (0, _) => "<span class=\"muted\">none found</span>",
            (_, true) => "<span class=\"tag violation\">violation</span>",
            (_, false) => "<span class=\"tag allowed\">allowed by the settings</span>",
        };
        let _ = write!(
            out,
            "<div id=\"anomaly-{0}\" class=\"anomaly\"><h3>{0}: {1} {tag}</h3>",
            esc(name),
            a.count
        );
        if !a.note.is_empty() {
            let _ = write!(out, "<p>{}</p>", esc(&a.note));
        }
        let shown = &a.examples[..a.examples.len().min(EXAMPLES_SHOWN_MAX)];
        out.push_str(&examples::examples_table(name, shown));
        if a.examples.len() > EXAMPLES_SHOWN_MAX {
            let _ = write!(
                out,
                "<p class=\"muted\">{} more examples in results.json.</p>",
                a.examples.len() - EXAMPLES_SHOWN_MAX
            );
        } else if a.count > a.examples.len() as u64 && a.count > 0 {
            let _ = write!(
                out,
                "<p class=\"muted\">{} of {} instances have examples.</p>",
                a.examples.len(),
                a.count
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");
    out
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn summary_section(scan: &HistoryScan) -> String {
    let mut out = String::from(
        "<section id=\"summary\"><h2>Operations</h2><table><tr><th>operation</th>\
         <th class=\"num\">invoked</th><th class=\"num\">ok</th><th class=\"num\">fail</th>\
         <th class=\"num\">info</th><th class=\"num\">no completion</th>\
         <th class=\"num\">p50 ms</th><th class=\"num\">p95 ms</th><th class=\"num\">p99 ms</th>\
         <th class=\"num\">max ms</th></tr>",
    );
    for f in scan.functions() {
        let counts: Vec<u64> = Outcome::ALL.iter().map(|o| scan.count(&f, *o)).collect();
        let open = scan.open.get(&f).copied().unwrap_or(0);
        let mut ok: Vec<u64> = scan
            .latencies
            .get(&(f.clone(), Outcome::Ok))
            .map(|v| v.iter().map(|p| p.latency_ns).collect())
            .unwrap_or_default();
        ok.sort_unstable();
        let pct = |p: f64| percentile(&ok, p).map_or("–".to_string(), ms);
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{open}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&f),
            counts.iter().sum::<u64>() + open,
            counts[0],
            counts[1],
            counts[2],
            pct(0.50),
            pct(0.95),
            pct(0.99),
            pct(1.0)
        );
    }
    out.push_str(
        "</table><p class=\"muted\">Latencies are of ok operations. \"no completion\": invoked \
         but never completed before the history ended.</p></section>",
    );
    out
}

/// The checkers' statistics (results.json `stats`), one row per field.
fn stats_section(results: Option<&CheckResults>) -> String {
    let mut out = String::from("<section id=\"stats\"><h2>Checker statistics</h2>");
    let Some(stats) = results.and_then(|r| r.stats.as_object()) else {
        out.push_str("<p>None.</p></section>");
        return out;
    };
    out.push_str("<table>");
    for (key, v) in stats
        .iter()
        .filter(|(k, _)| !STATS_SKIPPED.contains(&k.as_str()))
    {
        let _ = write!(
            out,
            "<tr><th>{}</th><td><code>{}</code></td></tr>",
            esc(key),
            esc(&short(v))
        );
    }
    out.push_str("</table><p class=\"muted\">See docs/checkers.md for each field.</p></section>");
    out
}

fn short(v: &Value) -> String {
    let text = display_value(Some(v));
    if text.chars().count() > 400 {
        text.chars().take(400).collect::<String>() + " …"
    } else {
        text
    }
}

fn faults_section(faults: &Faults) -> String {
    let mut out = String::from("<section id=\"faults\"><h2>Faults</h2>");
    if faults.windows.is_empty() && faults.events.is_empty() {
        out.push_str("<p>No fault was injected.</p></section>");
        return out;
    }
    out.push_str(
        "<table><tr><th>fault</th><th class=\"num\">start s</th><th class=\"num\">end s</th>\
         <th>targets</th></tr>",
    );
    for w in faults.windows.iter().take(FAULT_ROWS_MAX) {
        let end = if w.open_ended {
            format!("{:.2} (never stopped)", w.end_ns as f64 / 1e9)
        } else {
            format!("{:.2}", w.end_ns as f64 / 1e9)
        };
        let _ = write!(
            out,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td>\
             <td class=\"num\">{:.2}</td><td class=\"num\">{end}</td><td><code>{}</code></td></tr>",
            plots::svg_hex(w.kind.rgb()),
            esc(w.kind.label()),
            w.start_ns as f64 / 1e9,
            esc(&short(&w.value))
        );
    }
    out.push_str("</table>");
    if !faults.events.is_empty() {
        out.push_str("<h3>Other nemesis events</h3><table><tr><th>f</th><th class=\"num\">time s</th><th>value</th></tr>");
        for e in faults.events.iter().take(FAULT_ROWS_MAX) {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td><code>{}</code></td></tr>",
                esc(&e.f),
                e.time_ns as f64 / 1e9,
                esc(&short(&e.value))
            );
        }
        out.push_str("</table>");
    }
    let listed = faults.windows.len().min(FAULT_ROWS_MAX) + faults.events.len().min(FAULT_ROWS_MAX);
    if listed < faults.windows.len() + faults.events.len() {
        let _ = write!(
            out,
            "<p class=\"muted\">Only the first {FAULT_ROWS_MAX} rows of each table are listed.</p>"
        );
    }
    out.push_str("</section>");
    out
}

fn referenced_section(scan: &HistoryScan, wanted: &BTreeSet<u64>) -> String {
    let mut out = String::from("<section id=\"ops\"><h2>Operations referenced by examples</h2>");
    let indexes: BTreeSet<u64> = wanted
        .iter()
        .chain(scan.referenced.keys())
        .copied()
        .collect();
    if indexes.is_empty() {
        out.push_str("<p>None.</p></section>");
        return out;
    }
    out.push_str("<table><tr><th class=\"num\">index</th><th>history line</th></tr>");
    for i in indexes {
        let line = match scan.referenced.get(&i) {
            Some(raw) => format!("<code>{}</code>", esc(raw)),
            None => "<span class=\"muted\">not in the history</span>".to_string(),
        };
        let _ = write!(
            out,
            "<tr id=\"op-{i}\"><td class=\"num\">{i}</td><td>{line}</td></tr>"
        );
    }
    out.push_str("</table></section>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&[7], 0.5), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn schedules_are_summarised_by_description_and_steps() {
        let plan = serde_json::json!({"name": "random", "description": "kill every 4 s",
                                      "step": [{"action": "kill"}, {"action": "start"}]});
        assert_eq!(
            schedule_summary(Some(&plan)).unwrap(),
            "kill every 4 s (2 steps)"
        );
        let steps = serde_json::json!([{"at_s": 1}]);
        assert_eq!(schedule_summary(Some(&steps)).unwrap(), "1 steps");
        assert_eq!(schedule_summary(Some(&serde_json::json!(null))), None);
    }

    fn files_with(config: serde_json::Value) -> RunFiles {
        RunFiles {
            dir: std::path::PathBuf::from("/nowhere"),
            config,
            results: None,
            samples: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn a_fault_plan_hides_the_unused_random_nemesis_settings() {
        let base = serde_json::json!({"nemesis": ["kill", "pause"], "nemesis_interval_s": 10.0});
        let random = settings_section(&files_with(base.clone()));
        assert!(random.contains("<th>nemesis</th>"), "{random}");
        assert!(random.contains("<th>nemesis_interval_s</th>"), "{random}");

        let mut planned = base;
        planned["plan"] = serde_json::json!("unclean-election");
        let planned = settings_section(&files_with(planned));
        assert!(planned.contains("<th>fault plan</th>"), "{planned}");
        assert!(!planned.contains("<th>nemesis</th>"), "{planned}");
        assert!(!planned.contains("nemesis_interval_s"), "{planned}");
    }

    #[test]
    fn command_lists_are_shell_quoted() {
        let v = serde_json::json!(["tidewater", "run", "--seed", "42", "--name", "a b"]);
        assert_eq!(
            command_line(Some(&v)),
            "tidewater run --seed 42 --name 'a b'"
        );
        assert_eq!(
            command_line(Some(&serde_json::json!("tidewater run"))),
            "tidewater run"
        );
    }
}
