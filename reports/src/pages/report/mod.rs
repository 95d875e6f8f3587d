//! `report.html` of one run: the headline (what was lost, and whether the settings allow it),
//! verdict and promise, settings, anomalies with plain words, the checker's judgement and a
//! sentence per example (each dependency cycle drawn), the transactions of a transactional
//! run, plots with fault
//! windows, availability per partition, a summary of operations, the checkers' statistics as
//! tables, the faults, and the operations the examples refer to.

mod context;
pub mod cycles;
pub mod examples;
mod figures;
pub mod stats_tables;
mod transactions;
pub mod words;

use crate::draw::chart::{self, bands};
use crate::error::ReportError;
use crate::html::{esc, ms, page, standing_badge};
use crate::scan::fault_windows::{fault_windows, BandColour, Faults, WindowSource};
use crate::scan::history::{scan_history, HistoryScan};
use crate::scan::lost_writes::find_losses;
use crate::scan::outcome::Outcome;
use crate::scan::replica_states::replica_states;
use crate::scan::run_files::{display_value, RunFiles, HISTORY_FILE, REPORT_FILE};
use context::Ctx;
use figures::{losses::unseen_series, plots_section, PLOT_TITLES};
use serde_json::Value;
use stats_tables::object_tables;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{Anomaly, CheckResults};
use words::sentence;

/// Examples shown per anomaly; the rest stay in results.json.
pub const EXAMPLES_SHOWN_MAX: usize = 20;
/// Operations listed in the "referenced operations" section at most.
pub const REFERENCED_OPS_MAX: usize = 2000;
/// Fault windows and nemesis events listed at most.
pub const FAULT_ROWS_MAX: usize = 500;
/// Node log files linked at most.
pub const NODE_FILES_MAX: usize = 60;
pub use crate::scan::history::percentile;
pub use figures::{GROUP_PLOT_IDS, PARTITIONS_DRAWN_MAX, PLOT_IDS};

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
    let results = files.results.as_ref();
    let wanted = referenced_indexes(results);
    let scan = scan_history(&run_dir.join(HISTORY_FILE), &wanted)?;
    let x_max_ns = files
        .samples
        .iter()
        .map(|s| s.time)
        .chain(unseen_series(results).iter().map(|p| (p.0 * 1e9) as u64))
        .fold(scan.time_max_ns, u64::max);
    let faults = fault_windows(results, &scan.nemesis, x_max_ns);
    let losses = find_losses(&scan, results);
    let replicas = replica_states(&files.samples);
    let x_min_s = scan.main_start_ns.unwrap_or(0) as f64 / 1e9;
    let ctx = Ctx {
        files: &files,
        scan: &scan,
        bands: bands(&faults),
        faults: &faults,
        losses: &losses,
        replicas: &replicas,
        x_range_s: (x_min_s, (x_max_ns as f64 / 1e9).max(x_min_s + 1e-3)),
    };

    let mut body = String::new();
    let name = files.name();
    let _ = write!(body, "<h1>{}</h1>", esc(&name));
    let _ = write!(
        body,
        "<p class=\"muted\"><code>{}</code></p>",
        esc(&run_dir.display().to_string())
    );
    body.push_str(&files_line(run_dir));
    body.push_str(&contents(transactions::has_transactions(&ctx)));
    body.push_str(&verdict_section(&ctx));
    body.push_str(&settings_section(&files));
    body.push_str(&anomalies_section(results, &scan, &wanted));
    body.push_str(&replicas_section(results));
    body.push_str(&transactions::section(&ctx));
    body.push_str(&plots_section(&ctx)?);
    body.push_str(&availability_section(&ctx));
    body.push_str(&summary_section(&scan));
    body.push_str(&stats_section(results));
    body.push_str(&faults_section(&faults));
    body.push_str(&referenced_section(&scan, &wanted));
    Ok(page(&format!("{name} — Tidewater report"), &body))
}

/// Links to the run's files that exist: history, results, config, samples, logs, node logs,
/// and the store's index (when the run lies in a store: `../../index.html` or `../../latest`
/// exists, as the harness writes the index right after the report).
fn files_line(run_dir: &Path) -> String {
    let mut links: Vec<String> = Vec::new();
    for file in [
        HISTORY_FILE,
        crate::scan::run_files::RESULTS_FILE,
        crate::scan::run_files::CONFIG_FILE,
        crate::scan::run_files::SAMPLES_FILE,
        "final-reads.json",
        "replicas.jsonl",
        "harness.log",
    ] {
        if run_dir.join(file).is_file() {
            links.push(format!("<a href=\"{0}\">{0}</a>", esc(file)));
        }
    }
    let nodes = node_files(run_dir);
    let mut out = format!("<p class=\"files\">Files: {}", links.join(" "));
    if !nodes.is_empty() {
        out.push_str(" · node logs: ");
        let node_links: Vec<String> = nodes
            .iter()
            .map(|rel| {
                format!(
                    "<a href=\"{}\">{}</a>",
                    crate::html::href(rel),
                    esc(rel.trim_start_matches("nodes/"))
                )
            })
            .collect();
        out.push_str(&node_links.join(" "));
    }
    let store = run_dir.parent().and_then(Path::parent);
    if store.is_some_and(|s| {
        s.join(crate::pages::index::INDEX_FILE).is_file() || s.join("latest").exists()
    }) {
        let _ = write!(
            out,
            " · <a href=\"../../{}\">all runs (index)</a>",
            crate::pages::index::INDEX_FILE
        );
    }
    out.push_str("</p>");
    out
}

/// The files under `nodes/` (two levels: `nodes/<node>/<file>`), relative to the run, at most
/// [`NODE_FILES_MAX`], in name order.
fn node_files(run_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(nodes) = std::fs::read_dir(run_dir.join("nodes")) else {
        return out;
    };
    let mut nodes: Vec<_> = nodes.flatten().filter(|e| e.path().is_dir()).collect();
    nodes.sort_by_key(|e| e.file_name());
    for node in nodes {
        let Ok(files) = std::fs::read_dir(node.path()) else {
            continue;
        };
        let mut files: Vec<_> = files.flatten().filter(|e| e.path().is_file()).collect();
        files.sort_by_key(|e| e.file_name());
        for f in files {
            if out.len() >= NODE_FILES_MAX {
                return out;
            }
            out.push(format!(
                "nodes/{}/{}",
                node.file_name().to_string_lossy(),
                f.file_name().to_string_lossy()
            ));
        }
    }
    out
}

/// Links to the sections and plots, at the top of the report (the Transactions section's
/// when the run has one).
fn contents(transactions: bool) -> String {
    let plots: Vec<String> = PLOT_TITLES
        .iter()
        .map(|(id, title)| format!("<a href=\"#{id}\">{title}</a>"))
        .collect();
    let txns = if transactions {
        " · <a href=\"#transactions\">transactions</a>"
    } else {
        ""
    };
    format!(
        "<nav class=\"muted\"><a href=\"#verdict\">verdict</a> · <a href=\"#settings\">settings</a> · \
         <a href=\"#anomalies\">anomalies</a> · <a href=\"#replicas-compared\">replicas compared</a>{txns} · \
         plots: {} · <a href=\"#availability\">availability</a> · \
         <a href=\"#summary\">operations</a> · <a href=\"#stats\">checker statistics</a> · \
         <a href=\"#faults\">faults</a> · <a href=\"#ops\">referenced operations</a></nav>",
        plots.join(", ")
    )
}

/// Statistics shown elsewhere (drawn, listed under the verdict, in the Faults, the Replicas
/// compared or the Transactions section).
const STATS_SKIPPED: [&str; 7] = [
    "unseen_series",
    "replica_logs",
    "settings",
    "fault_windows",
    "unknown_reasons",
    "problems",
    "transactions",
];

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

/// Promise breakers first, then anomalies that invalidate the history, then the rest; in
/// each group lost writes first, then by name.
fn ordered_anomalies(results: &CheckResults) -> Vec<(&String, &Anomaly)> {
    let mut list: Vec<_> = results.anomalies.iter().collect();
    list.sort_by_key(|(name, a)| {
        (
            !a.breaks_promise,
            !a.invalidates,
            name.as_str() != "lost-write",
            name.as_str(),
        )
    });
    list
}

/// The tag of an anomaly that occurred: whether it breaks the promise, or invalidates the
/// history in a way the settings allow, or neither.
fn anomaly_tag(a: &Anomaly) -> &'static str {
    match (a.count, a.breaks_promise, a.invalidates) {
        (0, _, _) => "<span class=\"muted\">none found</span>",
        (_, true, _) => "<span class=\"tag violation\">breaks the promise</span>",
        (_, false, true) => {
            "<span class=\"tag allowed-tag\">invalid, allowed by the settings</span>"
        }
        (_, false, false) => "<span class=\"tag allowed\">does not invalidate</span>",
    }
}

fn verdict_section(ctx: &Ctx) -> String {
    let mut out = String::from("<section id=\"verdict\">");
    let results = ctx.files.results.as_ref();
    match results {
        None => out.push_str(
            "<p class=\"headline unknown\">NOT CHECKED: this run has no results.json.</p>",
        ),
        Some(r) => {
            let _ = write!(
                out,
                "<p class=\"headline {}\">{}</p>",
                r.standing().class(),
                esc(&words::headline(r, &ctx.files.config))
            );
        }
    }
    let _ = write!(out, "<p>{}</p>", standing_badge(results, "not checked"));
    if let Some(r) = results {
        if !r.promise_reason.is_empty() {
            let _ = write!(
                out,
                "<p>Promise {}: {}</p>",
                r.promise.as_str(),
                esc(&r.promise_reason)
            );
        }
        out.push_str(&loss_line(ctx, r));
        out.push_str(&transactions::verdict_line(ctx));
        let found: Vec<String> = ordered_anomalies(r)
            .into_iter()
            .filter(|(_, a)| a.count > 0)
            .map(|(name, a)| {
                format!(
                    "<a href=\"#anomaly-{0}\">{0}</a> ({1}) {2}",
                    esc(name),
                    a.count,
                    anomaly_tag(a)
                )
            })
            .collect();
        if found.is_empty() {
            out.push_str("<p>No anomaly found.</p>");
        } else {
            let _ = write!(out, "<p>Anomalies: {}</p>", found.join(", "));
        }
    }
    let _ = write!(
        out,
        "<p class=\"muted\">{} history lines; main phase from {:.1} s, run ends at {:.1} s.</p>",
        ctx.scan.lines, ctx.x_range_s.0, ctx.x_range_s.1
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
                let _ = write!(out, "<li>{}</li>", esc(&display_value(Some(item))));
            }
            out.push_str("</ul></div>");
        }
    }
    let mut warnings: Vec<String> = ctx
        .files
        .warnings
        .iter()
        .chain(&ctx.scan.warnings)
        .cloned()
        .collect();
    warnings.extend(transactions::disagreement(ctx));
    for (key, ours, theirs) in ctx.losses.disagreements() {
        warnings.push(format!(
            "{key}: the report counts {ours} acknowledged writes gone, the checker {theirs} \
             (stats.lost_acknowledged.by_key); the headline uses the checker's figure"
        ));
    }
    if !warnings.is_empty() {
        out.push_str("<div class=\"warning\"><strong>Warnings</strong><ul>");
        for w in warnings {
            let _ = write!(out, "<li>{}</li>", esc(&w));
        }
        out.push_str("</ul></div>");
    }
    out.push_str("</section>");
    out
}

/// "Lost acknowledged writes: N of M (by partition) · sends acknowledged: ...".
fn loss_line(ctx: &Ctx, r: &CheckResults) -> String {
    let lost = &r.stats["lost_acknowledged"];
    let by_key: Vec<String> = lost["by_key"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{} {}", esc(k), v)).collect())
        .unwrap_or_default();
    let sends = &r.stats["ops_by_f"]["send"];
    let share = match (sends["ok"].as_u64(), sends["invoke"].as_u64()) {
        (Some(ok), Some(n)) if n > 0 => format!(
            " · sends acknowledged: {ok} of {n} ({:.0}%)",
            100.0 * ok as f64 / n as f64
        ),
        _ => String::new(),
    };
    let _ = ctx;
    format!(
        "<p>Lost acknowledged writes: <strong>{} of {}</strong>{}{share}.</p>",
        crate::scan::run_files::lost_acknowledged(r),
        r.acknowledged(),
        if by_key.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_key.join(", "))
        }
    )
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
    const KNOWN: [(&str, &str); 10] = [
        ("name", "test"),
        ("seed", "seed"),
        ("time_limit_s", "time limit (s)"),
        ("acks", "acks"),
        ("nemesis", "nemesis"),
        ("plan", "fault plan"),
        ("nodes", "nodes"),
        ("matrix_cell", "matrix cell"),
        ("workload", "workload"),
        ("client", "client"),
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

/// Whether Kafka promises an anomaly away under the run's settings, as the checker judged
/// it (`breaks_promise`); nothing is decided here.
fn promise_line(a: &Anomaly) -> &'static str {
    match (a.breaks_promise, a.invalidates) {
        (true, _) => {
            "<p class=\"promise\">Kafka promises this away under this run's settings \
             (the checker's judgement): these instances break the promise.</p>"
        }
        (false, true) => {
            "<p class=\"promise\">This run's settings allow it (the checker's judgement): \
             the history is invalid, but no promise is broken.</p>"
        }
        (false, false) => {
            "<p class=\"promise\">Kafka does not promise this away (the checker's \
             judgement): reported as a fact, not counted against the run.</p>"
        }
    }
}

fn anomalies_section(
    results: Option<&CheckResults>,
    scan: &HistoryScan,
    listed: &BTreeSet<u64>,
) -> String {
    let mut out = String::from("<section id=\"anomalies\"><h2>Anomalies</h2>");
    let Some(results) = results else {
        out.push_str("<p>Not checked.</p></section>");
        return out;
    };
    if results.anomalies.is_empty() {
        out.push_str("<p>The checkers found no anomaly.</p>");
    }
    for (name, a) in ordered_anomalies(results) {
        let _ = write!(
            out,
            "<div id=\"anomaly-{0}\" class=\"anomaly\"><h3>{0}: {1} {2}</h3>",
            esc(name),
            a.count,
            anomaly_tag(a)
        );
        if let Some(what) = words::explanation(name) {
            let _ = write!(out, "<p class=\"explanation\">{}</p>", esc(what));
        }
        if a.count > 0 {
            out.push_str(promise_line(a));
        }
        if !a.note.is_empty() {
            let _ = write!(out, "<p>{}</p>", esc(&a.note));
        }
        let shown = &a.examples[..a.examples.len().min(EXAMPLES_SHOWN_MAX)];
        let is_cycle_anomaly = cycles::CYCLE_ANOMALIES.contains(&name.as_str());
        let sentences: Vec<(usize, String)> = shown
            .iter()
            .enumerate()
            .filter_map(|(n, e)| sentence(name, e).map(|s| (n, s)))
            .collect();
        let sentences_count = sentences.len();
        if !sentences.is_empty() {
            out.push_str("<ol class=\"sentences\">");
            for (n, s) in sentences {
                let drawn = if is_cycle_anomaly && cycles::is_cycle(&shown[n]) {
                    format!(
                        " (<a href=\"#cycle-{}-{n}\">the cycle drawn</a>)",
                        esc(name)
                    )
                } else {
                    String::new()
                };
                let _ = write!(
                    out,
                    "<li class=\"sentence\" value=\"{}\"><a href=\"#anomaly-{}-{n}\">example {}</a>: {s}{drawn}</li>",
                    n + 1,
                    esc(name),
                    n + 1
                );
            }
            out.push_str("</ol>");
        }
        if is_cycle_anomaly {
            for (n, e) in shown.iter().enumerate() {
                if let Some(view) = cycles::cycle_view(name, n, e, scan, listed) {
                    out.push_str(&view);
                }
            }
        }
        let table = examples::examples_table(name, shown);
        if !table.is_empty() {
            // With a sentence for every example the fields are details; else they are the
            // only account of the examples and stay open.
            let open = if sentences_count == shown.len() {
                ""
            } else {
                " open"
            };
            let _ = write!(
                out,
                "<details{open}><summary>Every field of {} example(s)</summary>{table}</details>",
                shown.len()
            );
        }
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

/// Every replica's own log compared offset by offset after the final reads
/// (`stats.replica_logs`): per partition and replica its offsets, and the offsets where the
/// replicas disagree below and above the high watermark.
fn replicas_section(results: Option<&CheckResults>) -> String {
    let mut out = String::from("<section id=\"replicas-compared\"><h2>Replicas compared</h2>");
    let stats = results.map(|r| &r.stats["replica_logs"]);
    let Some(stats) = stats.filter(|s| s["compared"] == true) else {
        let why = stats
            .and_then(|s| s["reason"].as_str())
            .unwrap_or("the results hold no comparison of the replicas' logs");
        let _ = write!(
            out,
            "<p class=\"muted\">Not compared: {}.</p></section>",
            esc(why)
        );
        return out;
    };
    let _ = write!(
        out,
        "<p>After the final reads every replica's own log was read from its node and compared \
         offset by offset. Below the high watermark the replicas in the ISR must agree \
         (<code>replica-divergence</code>); above it a follower may still hold what it has \
         not truncated. Offsets where replicas differ: <b id=\"replicas-below-hw\">{}</b> below \
         the HW among the ISR, {} below the HW involving only replicas outside it, {} above \
         the HW.</p>",
        stats["divergent_below_hw"],
        stats["divergent_below_hw_outside_isr"],
        stats["divergent_above_hw"]
    );
    out.push_str(
        "<table id=\"replicas-table\"><tr><th>partition</th><th>replica</th><th>role</th>\
         <th>in ISR</th><th class=\"num\">log start</th><th class=\"num\">HW</th>\
         <th class=\"num\">LEO</th><th class=\"num\">records</th>\
         <th class=\"num\">differ below HW</th><th class=\"num\">differ above HW</th></tr>",
    );
    let number = |v: &serde_json::Value| v.as_u64().map_or("–".to_string(), |n| n.to_string());
    for p in stats["partitions"].as_array().into_iter().flatten() {
        let key = esc(p["key"].as_str().unwrap_or("?"));
        let settled = if p["settled"] == true {
            ""
        } else {
            " (not settled)"
        };
        for (node, r) in p["replicas"].as_object().into_iter().flatten() {
            let _ = write!(
                out,
                "<tr><td>{key}{settled}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(node),
                esc(r["role"].as_str().unwrap_or("?")),
                if r["in_sync"] == true { "yes" } else { "no" },
                number(&r["log_start_offset"]),
                number(&r["high_watermark"]),
                number(&r["log_end_offset"]),
                number(&r["records"]),
                number(&p["divergent_below_hw"]),
                number(&p["divergent_above_hw"]),
            );
        }
        for u in p["unread"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "<tr><td>{key}</td><td>{}</td><td colspan=\"8\" class=\"muted\">not read: {}</td></tr>",
                esc(u["node"].as_str().unwrap_or("?")),
                esc(u["error"].as_str().unwrap_or("?"))
            );
        }
    }
    out.push_str("</table></section>");
    out
}

/// Per partition: its sends by outcome, the share acknowledged, and how long it had no
/// leader during the main phase.
fn availability_section(ctx: &Ctx) -> String {
    let mut out = String::from(
        "<section id=\"availability\"><h2>Availability per partition</h2><table><tr>\
         <th>partition</th><th class=\"num\">sends</th><th class=\"num\">ok</th>\
         <th class=\"num\">fail</th><th class=\"num\">info</th><th class=\"num\">ok share</th>\
         <th class=\"num\">without a leader (s)</th><th class=\"num\">longest (s)</th></tr>",
    );
    let (from, to) = ctx.main_phase_ns();
    let mut keys: BTreeSet<&str> = ctx
        .scan
        .sends_by_key
        .keys()
        .map(|&id| ctx.scan.key_name(id))
        .collect();
    keys.extend(ctx.replicas.by_key.keys().map(String::as_str));
    let mut totals = [0u64; 3];
    for key in &keys {
        let id = ctx.scan.keys.iter().position(|k| k == key);
        let s = id
            .and_then(|id| ctx.scan.sends_by_key.get(&(id as u32)))
            .copied()
            .unwrap_or_default();
        totals[0] += s.ok;
        totals[1] += s.fail;
        totals[2] += s.info;
        let (offline, longest) = ctx.replicas.by_key.get(*key).map_or((None, None), |k| {
            let (t, l) = k.offline_within(from, to);
            (Some(t), Some(l))
        });
        let secs =
            |v: Option<u64>| v.map_or("–".to_string(), |ns| format!("{:.1}", ns as f64 / 1e9));
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(key),
            s.ok + s.fail + s.info,
            s.ok,
            s.fail,
            s.info,
            share(s.ok, s.ok + s.fail + s.info),
            secs(offline),
            secs(longest)
        );
    }
    let all: u64 = totals.iter().sum();
    let _ = write!(
        out,
        "<tr><th>all</th><th class=\"num\">{all}</th><th class=\"num\">{}</th><th class=\"num\">{}</th>\
         <th class=\"num\">{}</th><th class=\"num\">{}</th><th></th><th></th></tr></table>",
        totals[0],
        totals[1],
        totals[2],
        share(totals[0], all)
    );
    let _ = write!(
        out,
        "<p class=\"muted\">Sends are counted per record (a send op may carry several), at \
         completion. Time without a leader: the partition's offline periods (no leader \
         answered the sampler, see the ISR plot) within the main phase, {:.1} s to {:.1} s.</p></section>",
        from as f64 / 1e9,
        to as f64 / 1e9
    );
    out
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "–".to_string()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
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

/// The checkers' statistics (results.json `stats`) as tables.
fn stats_section(results: Option<&CheckResults>) -> String {
    let mut out = String::from("<section id=\"stats\"><h2>Checker statistics</h2>");
    let Some(stats) = results.and_then(|r| r.stats.as_object()) else {
        out.push_str("<p>None.</p></section>");
        return out;
    };
    let shown: serde_json::Map<String, Value> = stats
        .iter()
        .filter(|(k, _)| !STATS_SKIPPED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.push_str(&object_tables(&shown, 0));
    out.push_str(
        "<p class=\"muted\">See docs/checkers.md for each field; the unseen series is drawn, \
         the fault windows are in the Faults section, unknown reasons and problems under the \
         verdict.</p></section>",
    );
    out
}

fn faults_section(faults: &Faults) -> String {
    let mut out = String::from("<section id=\"faults\"><h2>Faults</h2>");
    if faults.windows.is_empty() && faults.events.is_empty() {
        out.push_str("<p>No fault was injected.</p></section>");
        return out;
    }
    let source = match faults.source {
        WindowSource::Results => "results.json (stats.fault_windows, derived by the checker)",
        WindowSource::History => {
            "the history's nemesis ops (results.json has no stats.fault_windows)"
        }
    };
    let _ = write!(
        out,
        "<p class=\"muted\">Every start paired with its own stop, per node and per fault; \
         overlapping windows are each listed. From {source}.</p>"
    );
    out.push_str(
        "<table><tr><th>fault</th><th>nodes</th><th class=\"num\">start s</th>\
         <th class=\"num\">end s</th><th class=\"num\">duration s</th><th class=\"num\">start op</th></tr>",
    );
    for w in faults.windows.iter().take(FAULT_ROWS_MAX) {
        let end = if w.open {
            format!("{:.2} (never stopped)", w.end_s)
        } else {
            format!("{:.2}", w.end_s)
        };
        let _ = write!(
            out,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>\
             <td class=\"num\">{:.2}</td><td class=\"num\">{end}</td><td class=\"num\">{:.2}</td>\
             <td class=\"num\">{}</td></tr>",
            chart::svg_hex(w.kind.rgb()),
            esc(w.kind.name()),
            esc(&w.nodes.join(", ")),
            w.start_s,
            w.end_s - w.start_s,
            w.start_op
        );
    }
    out.push_str("</table>");
    if !faults.events.is_empty() {
        out.push_str(
            "<h3>Other nemesis events</h3><table><tr><th>f</th><th class=\"num\">time s</th>\
             <th>value</th><th>error</th></tr>",
        );
        for e in faults.events.iter().take(FAULT_ROWS_MAX) {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td><code>{}</code></td><td>{}</td></tr>",
                esc(&e.f),
                e.time_ns as f64 / 1e9,
                esc(&display_value(Some(&e.value))),
                esc(e.error.as_deref().unwrap_or(""))
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
