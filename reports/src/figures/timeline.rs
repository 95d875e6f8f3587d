//! `plot-timeline`: the main phase's operations per worker lane, as Jepsen's timeline.html
//! shows them: a bar from each operation's invocation to its completion, coloured by outcome.

use super::{outcome_rgb, BandNote};
use crate::context::Ctx;
use crate::error::ReportError;
use crate::history_scan::Outcome;
use crate::plots::{draw_row_chart, RowBar, RowChart};
use crate::timeline::{OpKind, LANES_MAX, TIMELINE_OPS_MAX};

fn kind_text(k: OpKind) -> &'static str {
    match k {
        OpKind::Send => "send",
        OpKind::Poll => "poll",
        OpKind::Other => "op",
    }
}

pub(super) fn figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let t = &ctx.scan.timeline;
    let lanes = t.lanes.min(LANES_MAX);
    let rows: Vec<String> = (1..=lanes).map(|l| format!("lane {l}")).collect();
    let mut bars = Vec::new();
    let how = if t.overflowed {
        for (lane, start, end, outcome) in t.grid_runs() {
            bars.push(RowBar {
                row: lane,
                x0: start as f64 / 1e9,
                x1: end as f64 / 1e9,
                rgb: outcome_rgb(outcome),
                height: 0.7,
                title: format!(
                    "lane {}: {} from {:.2} s to {:.2} s",
                    lane + 1,
                    match outcome {
                        Outcome::Ok => "mostly ok",
                        Outcome::Fail => "mostly failed",
                        Outcome::Info => "mostly indeterminate",
                    },
                    start as f64 / 1e9,
                    end as f64 / 1e9
                ),
            });
        }
        format!(
            "With {} operations (more than {TIMELINE_OPS_MAX}) each lane is drawn in {:.2} s \
             columns coloured by the most frequent outcome in them (a stray failure does not \
             show here; the latency plot has every one).",
            t.ops_total,
            t.column_ns as f64 / 1e9
        )
    } else {
        for op in &t.ops {
            bars.push(RowBar {
                row: usize::from(op.lane),
                x0: op.invoke_ns as f64 / 1e9,
                x1: op.complete_ns as f64 / 1e9,
                rgb: outcome_rgb(op.outcome),
                height: 0.7,
                title: format!(
                    "process {} {} {}: {:.3} s to {:.3} s ({:.1} ms), op {}",
                    op.process,
                    kind_text(op.kind),
                    op.outcome.as_str(),
                    op.invoke_ns as f64 / 1e9,
                    op.complete_ns as f64 / 1e9,
                    (op.complete_ns - op.invoke_ns) as f64 / 1e6,
                    op.index
                ),
            });
        }
        format!(
            "Each of the {} operations is a bar from its invocation to its completion (hover for \
             the process, operation, latency and index).",
            t.ops_total
        )
    };
    let svg = draw_row_chart(&RowChart {
        id: "plot-timeline",
        x_label: "time since the test started (s)",
        x_range: ctx.x_range_s,
        rows,
        bands: &ctx.bands,
        bars,
    })?;
    let entries = Outcome::ALL
        .iter()
        .map(|o| (o.as_str().to_string(), outcome_rgb(*o)))
        .collect();
    let beyond = if t.ops_beyond_lanes > 0 {
        format!(
            " {} operations of lanes beyond the first {LANES_MAX} are not drawn.",
            t.ops_beyond_lanes
        )
    } else {
        String::new()
    };
    Ok(super::figure(
        "plot-timeline",
        "Timeline of operations per worker",
        &svg,
        &bands.legend(entries),
        &format!(
            "The main phase's client operations (final reads excluded), one lane per worker: a \
             process whose operation ended indeterminate (info) never runs again and its worker \
             continues as a new process, which takes a freed lane ({} processes in {} lanes). {how}{beyond} \
             {}",
            t.processes, t.lanes, bands.text
        ),
    ))
}
