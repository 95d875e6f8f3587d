//! The report's Transactions section and its line under the verdict: how many transactions
//! committed, aborted or ended unknown (the checker's `stats.transactions`, beside the
//! report's own count of `txn` completions in the history), the dependency graph's size,
//! and the cycles found, each linked to its anomaly and its drawings.
//!
//! Whether a cycle breaks Kafka's promise is the checker's `breaks_promise`, shown as is.

use crate::html::esc;
use crate::pages::report::context::Ctx;
use crate::pages::report::cycles::{edges_legend, is_cycle, CYCLE_ANOMALIES};
use crate::pages::report::words::txn_counts;
use crate::scan::history::HistoryScan;
use crate::scan::outcome::Outcome;
use serde_json::Value;
use std::fmt::Write;
use tidewater_workloads::results::CheckResults;

/// `txn` completions in the history by outcome: [committed (ok), aborted (fail), unknown
/// (info)], as the report's own pass counted them.
pub(crate) fn history_txn_counts(scan: &HistoryScan) -> [u64; 3] {
    Outcome::ALL.map(|o| scan.count("txn", o))
}

/// True when the report has transactions to show: the checker analysed them, or the
/// history has `txn` ops.
pub(crate) fn has_transactions(ctx: &Ctx) -> bool {
    let stats = ctx
        .files
        .results
        .as_ref()
        .is_some_and(|r| r.stats.get("transactions").is_some());
    stats || history_txn_counts(ctx.scan).iter().sum::<u64>() > 0
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "–".to_string()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// The line under the verdict: "Transactions: 40 committed, 5 aborted, 2 unknown (of 47;
/// stats.transactions) · cycles: G0 1 (…)". Empty when the run has no transactions.
pub(crate) fn verdict_line(ctx: &Ctx) -> String {
    if !has_transactions(ctx) {
        return String::new();
    }
    let results = ctx.files.results.as_ref();
    let (counts, source) = match results.and_then(txn_counts) {
        Some(c) => (c, "stats.transactions"),
        None => (history_txn_counts(ctx.scan), "counted in the history"),
    };
    let [committed, aborted, unknown] = counts;
    let mut out = format!(
        "<p id=\"verdict-transactions\">Transactions: <strong>{committed} committed</strong>, \
         {aborted} aborted, {unknown} unknown (of {}; {source})",
        committed + aborted + unknown
    );
    let cycles: Vec<String> = results
        .map(|r| {
            CYCLE_ANOMALIES
                .iter()
                .filter_map(|name| r.anomalies.get(*name).map(|a| (name, a.count)))
                .filter(|(_, count)| *count > 0)
                .map(|(name, count)| format!("<a href=\"#anomaly-{0}\">{0}</a> {count}", esc(name)))
                .collect()
        })
        .unwrap_or_default();
    if !cycles.is_empty() {
        let _ = write!(out, " · cycles: {}", cycles.join(", "));
    }
    out.push_str(" · <a href=\"#transactions\">details</a>.</p>");
    out
}

/// A disagreement between the checker's transaction counts and the report's own, for the
/// verdict's warnings.
pub(crate) fn disagreement(ctx: &Ctx) -> Option<String> {
    let theirs = ctx.files.results.as_ref().and_then(txn_counts)?;
    let ours = history_txn_counts(ctx.scan);
    (ours != theirs).then(|| {
        format!(
            "transactions: the history has {} committed, {} aborted and {} unknown txn \
             completions, stats.transactions says {}, {} and {}",
            ours[0], ours[1], ours[2], theirs[0], theirs[1], theirs[2]
        )
    })
}

/// A number of a stats object, or a dash.
fn num(v: &Value, path: &[&str]) -> String {
    let mut at = v;
    for p in path {
        at = &at[*p];
    }
    match at {
        Value::Null => "–".to_string(),
        other => esc(&other.to_string()),
    }
}

/// The section: outcomes (checker and history side by side), the graph, the cycles.
pub(crate) fn section(ctx: &Ctx) -> String {
    if !has_transactions(ctx) {
        return String::new();
    }
    let results = ctx.files.results.as_ref();
    let mut out = String::from(
        "<section id=\"transactions\"><h2>Transactions</h2><table><tr><th>source</th>\
         <th class=\"num\">committed</th><th class=\"num\">aborted</th>\
         <th class=\"num\">unknown</th><th class=\"num\">all</th>\
         <th class=\"num\">committed share</th></tr>",
    );
    let mut row = |label: &str, [c, a, u]: [u64; 3]| {
        let _ = write!(
            out,
            "<tr><td>{label}</td><td class=\"num\">{c}</td><td class=\"num\">{a}</td>\
             <td class=\"num\">{u}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            c + a + u,
            share(c, c + a + u)
        );
    };
    if let Some(counts) = results.and_then(txn_counts) {
        row("the checker (<code>stats.transactions.txns</code>)", counts);
    }
    row(
        "this report's count of txn completions in history.jsonl",
        history_txn_counts(ctx.scan),
    );
    out.push_str("</table>");
    out.push_str(
        "<p class=\"muted\">A <code>txn</code> op commits its sends and polls as one: \
         <code>ok</code> committed, <code>fail</code> aborted, <code>info</code> unknown (it \
         committed only if a read returns one of its values). In the timeline, transactions \
         are the taller bars; hover one for its micro-ops.</p>",
    );
    let Some(stats) = results.and_then(|r| r.stats.get("transactions")) else {
        out.push_str(
            "<p>The checker did not analyse transactions (no results.json).</p></section>",
        );
        return out;
    };
    if let Some(from) = stats.get("recorded_from_op").and_then(Value::as_u64) {
        let _ = write!(
            out,
            "<p class=\"warning\">The checker recorded transactions from op {from} on (the \
             first txn op of a streamed history); earlier ops are not in its graph.</p>"
        );
    }
    let _ = write!(
        out,
        "<h3>Dependency graph</h3><table><tr><th class=\"num\">ops recorded</th>\
         <th class=\"num\">vertices</th><th class=\"num\">ww edges</th><th class=\"num\">wr edges</th>\
         <th class=\"num\">rw edges</th><th class=\"num\">components (2+ ops)</th>\
         <th class=\"num\">largest component</th></tr><tr><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr></table>",
        num(stats, &["recorded_ops"]),
        num(stats, &["graph", "vertices"]),
        num(stats, &["graph", "edges", "ww"]),
        num(stats, &["graph", "edges", "wr"]),
        num(stats, &["graph", "edges", "rw"]),
        num(stats, &["graph", "components"]),
        num(stats, &["graph", "largest_component"]),
    );
    out.push_str(&edges_legend());
    out.push_str(
        "<p class=\"muted\">Vertices: every send, poll and txn op that did not abort. A cycle \
         lies in one strongly connected component; the checker reports one shortest cycle per \
         component and kind (docs/checkers.md, \"The dependency graph\").</p>",
    );
    out.push_str(&cycles_table(results, stats));
    out.push_str("</section>");
    out
}

/// One row per cycle kind: count, the checker's judgement, links to the drawings.
fn cycles_table(results: Option<&CheckResults>, stats: &Value) -> String {
    let mut out = String::from(
        "<h3>Cycles</h3><p class=\"muted\">One cycle is reported per strongly connected \
         component of the edges the kind may use, so a count is of components: G0's of the ww \
         edges alone, G1c's of the wr edges alone and then of ww and wr together, G-single's \
         and G2's of all edges. Components of fewer edges are smaller and more numerous, so \
         G0 may count more than the graph's components above.</p>\
         <table><tr><th>anomaly</th><th class=\"num\">count (components showing it)</th>\
         <th>Kafka's promise (the checker's judgement)</th><th>drawn</th></tr>",
    );
    for name in CYCLE_ANOMALIES {
        let count = stats["cycles"][name].as_u64().unwrap_or(0);
        let anomaly = results.and_then(|r| r.anomalies.get(name));
        let judged = match anomaly {
            None => "<span class=\"muted\">none found</span>".to_string(),
            Some(a) if a.breaks_promise => {
                "<span class=\"tag violation\">breaks the promise</span>".to_string()
            }
            Some(a) if a.invalidates => {
                "<span class=\"tag allowed-tag\">invalid, allowed by the settings</span>"
                    .to_string()
            }
            Some(_) => "<span class=\"tag allowed\">not promised away</span>".to_string(),
        };
        let drawn: Vec<String> = anomaly
            .map(|a| {
                a.examples
                    .iter()
                    .take(super::EXAMPLES_SHOWN_MAX)
                    .enumerate()
                    .filter(|(_, e)| is_cycle(e))
                    .map(|(n, _)| format!("<a href=\"#cycle-{name}-{n}\">{}</a>", n + 1))
                    .collect()
            })
            .unwrap_or_default();
        let label = if anomaly.is_some() {
            format!("<a href=\"#anomaly-{name}\">{name}</a>")
        } else {
            name.to_string()
        };
        let _ = write!(
            out,
            "<tr><td>{label}</td><td class=\"num\">{count}</td><td>{judged}</td><td>{}</td></tr>",
            drawn.join(" ")
        );
    }
    out.push_str("</table>");
    out
}
