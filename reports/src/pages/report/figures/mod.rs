//! The plots of a run report: each figure is an inline SVG chart, a legend and a caption
//! that says how to read it (docs/reports.md describes them for users).
//!
//! - `faults`: which fault was in effect on which node (`plot-faults`).
//! - `losses`: lost writes by offset (`plot-lost-writes`), unseen and gone writes over time
//!   (`plot-unseen`).
//! - `replicas`: ISR size with offline periods (`plot-isr`), leaders (`plot-leaders`).
//! - `watermarks`: high watermarks as steps, regressions as episodes (`plot-hw`).
//! - `latency`: throughput (`plot-throughput`), latency marks (`plot-latency`) and quantiles
//!   (`plot-latency-quantiles`).
//! - `timeline`: operations per worker lane (`plot-timeline`).
//! - `rebalances`: consumer-group runs only (`plot-rebalances`).

mod faults;
mod latency;
pub(crate) mod losses;
mod rebalances;
mod replicas;
mod timeline;
mod watermarks;

use crate::draw::chart::{band_legend, legend, Rgb, BLUE, ORANGE, VERMILLION};
use crate::error::ReportError;
use crate::html::esc;
use crate::pages::report::context::Ctx;
use crate::pages::report::examples;
use crate::scan::outcome::Outcome;
use std::collections::BTreeSet;

/// Partitions drawn per per-partition chart; more would make an unreadable chart.
pub const PARTITIONS_DRAWN_MAX: usize = 32;

/// The id of every chart in a report, in page order.
pub const PLOT_IDS: [&str; 10] = [
    "plot-faults",
    "plot-lost-writes",
    "plot-unseen",
    "plot-isr",
    "plot-leaders",
    "plot-hw",
    "plot-throughput",
    "plot-latency",
    "plot-latency-quantiles",
    "plot-timeline",
];

/// Charts drawn only for a consumer-group run (results with `stats.rebalances`).
pub const GROUP_PLOT_IDS: [&str; 1] = ["plot-rebalances"];

/// Titles of the plots, for the report's contents line.
pub const PLOT_TITLES: [(&str, &str); 10] = [
    ("plot-faults", "faults"),
    ("plot-lost-writes", "lost writes"),
    ("plot-unseen", "unseen and gone"),
    ("plot-isr", "ISR"),
    ("plot-leaders", "leaders"),
    ("plot-hw", "high watermark"),
    ("plot-throughput", "throughput"),
    ("plot-latency", "latency"),
    ("plot-latency-quantiles", "latency quantiles"),
    ("plot-timeline", "timeline"),
];

/// The colour of an outcome in the latency and timeline plots.
pub(crate) fn outcome_rgb(o: Outcome) -> Rgb {
    match o {
        Outcome::Ok => BLUE,
        Outcome::Fail => VERMILLION,
        Outcome::Info => ORANGE,
    }
}

/// A figure: the chart, its legend and a caption saying how to read it.
pub(crate) fn figure(id: &str, title: &str, svg: &str, legend_html: &str, caption: &str) -> String {
    figure_with(id, title, svg, legend_html, caption, "")
}

/// A figure with more HTML (a table) after its caption.
pub(crate) fn figure_with(
    id: &str,
    title: &str,
    svg: &str,
    legend_html: &str,
    caption: &str,
    after: &str,
) -> String {
    format!(
        "<figure id=\"{id}\"><h3>{}</h3>{svg}{legend_html}<figcaption>{caption}</figcaption>{after}</figure>",
        esc(title)
    )
}

/// Op `i` as a link when the report lists it (ops named by examples), else as plain text:
/// what is found while drawing is not known before the history is read.
pub(crate) fn op_ref(ctx: &Ctx, i: u64) -> String {
    if ctx.scan.referenced.contains_key(&i) {
        examples::op_link(i)
    } else {
        format!("#{i}")
    }
}

/// Partitions to draw: the first [`PARTITIONS_DRAWN_MAX`] in name order, and how many exist.
pub(crate) fn drawn_keys<'k>(keys: impl IntoIterator<Item = &'k String>) -> (Vec<String>, usize) {
    let all: BTreeSet<&String> = keys.into_iter().collect();
    let total = all.len();
    (
        all.into_iter()
            .take(PARTITIONS_DRAWN_MAX)
            .cloned()
            .collect(),
        total,
    )
}

/// "Only the first N of M partitions are drawn." when some are left out.
pub(crate) fn omitted_note(drawn: usize, total: usize) -> String {
    if total > drawn {
        format!(" Only the first {drawn} of {total} partitions are drawn.")
    } else {
        String::new()
    }
}

/// The legend entries of the fault bands, and the sentence about them.
pub(crate) struct BandNote {
    entries: Vec<(String, Rgb)>,
    text: &'static str,
}

impl BandNote {
    fn new(ctx: &Ctx) -> BandNote {
        let entries = band_legend(&ctx.faults.kinds());
        let text = if entries.is_empty() {
            "No fault was injected."
        } else {
            "Shaded bands: fault windows (hover for the nodes and times; overlapping windows \
             shade darker)."
        };
        BandNote { entries, text }
    }

    /// `entries` followed by the bands' entries, as an HTML legend.
    pub(crate) fn legend(&self, mut entries: Vec<(String, Rgb)>) -> String {
        entries.extend_from_slice(&self.entries);
        legend(&entries)
    }
}

/// The plots section of a report.
pub(crate) fn plots_section(ctx: &Ctx) -> Result<String, ReportError> {
    let mut out = String::from("<section id=\"plots\"><h2>Plots</h2>");
    let (x_lo, x_hi) = ctx.x_range_s;
    let start = match ctx.scan.main_start_ns {
        Some(ns) => format!(
            "Time axes start at the main phase, {:.1} s after the test started (its first \
             client operation; setup is not shown), and end at {x_hi:.1} s{}.",
            ns as f64 / 1e9,
            ctx.scan
                .final_start_ns
                .map(|f| format!(" (final reads from {:.1} s)", f as f64 / 1e9))
                .unwrap_or_default()
        ),
        None => format!("Time axes run from {x_lo:.1} s to {x_hi:.1} s."),
    };
    out.push_str(&format!("<p class=\"muted\">{start}</p>"));
    let bands = BandNote::new(ctx);
    out.push_str(&faults::figure(ctx, &bands)?);
    out.push_str(&losses::lost_writes_figure(ctx)?);
    out.push_str(&losses::unseen_figure(ctx, &bands)?);
    out.push_str(&replicas::isr_figure(ctx, &bands)?);
    out.push_str(&replicas::leaders_figure(ctx, &bands)?);
    out.push_str(&watermarks::figure(ctx, &bands)?);
    out.push_str(&latency::throughput_figure(ctx, &bands)?);
    out.push_str(&latency::latency_figure(ctx, &bands)?);
    out.push_str(&latency::quantiles_figure(ctx, &bands)?);
    out.push_str(&timeline::figure(ctx, &bands)?);
    if let Some(rebalances) = rebalances::figure(ctx, &bands)? {
        out.push_str(&rebalances);
    }
    out.push_str("</section>");
    Ok(out)
}
