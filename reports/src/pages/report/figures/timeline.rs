//! `plot-timeline`: the main phase's operations per worker lane, as Jepsen's timeline.html
//! shows them: a bar from each operation's invocation to its completion, coloured by outcome.
//! A transaction (`txn`) is a taller bar, its outcome said as a transaction's (committed,
//! aborted, unknown) and its micro-ops in its tooltip.

use super::{outcome_rgb, BandNote};
use crate::draw::chart::{draw_row_chart, RowBar, RowChart};
use crate::error::ReportError;
use crate::pages::report::context::Ctx;
use crate::scan::outcome::Outcome;
use crate::scan::worker_lanes::{OpKind, TimelineOp, LANES_MAX, TIMELINE_OPS_MAX};

fn kind_text(k: OpKind) -> &'static str {
    match k {
        OpKind::Send => "send",
        OpKind::Poll => "poll",
        OpKind::Txn => "txn",
        OpKind::Other => "op",
    }
}

/// How an op of kind `k` ended, in words: a transaction's outcome is committed, aborted or
/// unknown (docs/history.md).
fn outcome_text(k: OpKind, o: Outcome) -> &'static str {
    match (k, o) {
        (OpKind::Txn, Outcome::Ok) => "committed",
        (OpKind::Txn, Outcome::Fail) => "aborted",
        (OpKind::Txn, Outcome::Info) => "unknown",
        (_, o) => o.as_str(),
    }
}

/// Bar heights, as a share of the lane: transactions taller than sends and polls.
const TXN_BAR_HEIGHT: f64 = 0.9;
const OP_BAR_HEIGHT: f64 = 0.7;

/// The tooltip of one operation's bar.
fn op_title(op: &TimelineOp) -> String {
    let mut title = format!(
        "process {} {} {}: {:.3} s to {:.3} s ({:.1} ms), op {}",
        op.process,
        kind_text(op.kind),
        outcome_text(op.kind, op.outcome),
        op.invoke_ns as f64 / 1e9,
        op.complete_ns as f64 / 1e9,
        (op.complete_ns - op.invoke_ns) as f64 / 1e6,
        op.index
    );
    if !op.detail.is_empty() {
        title.push_str(": ");
        title.push_str(&op.detail);
    }
    title
}

pub(super) fn figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let t = &ctx.scan.timeline;
    let has_txns = Outcome::ALL.iter().any(|o| ctx.scan.count("txn", *o) > 0);
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
        let txns = if has_txns {
            format!(
                " Transactions count here by their outcome (committed as ok, aborted as fail, \
                 unknown as info); their micro-ops are in the tooltips only while a run has at \
                 most {TIMELINE_OPS_MAX} operations."
            )
        } else {
            String::new()
        };
        format!(
            "With {} operations (more than {TIMELINE_OPS_MAX}) each lane is drawn in {:.2} s \
             columns coloured by the most frequent outcome in them (a stray failure does not \
             show here; the latency plot has every one).{txns}",
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
                height: if op.kind == OpKind::Txn {
                    TXN_BAR_HEIGHT
                } else {
                    OP_BAR_HEIGHT
                },
                title: op_title(op),
            });
        }
        let txns = if has_txns {
            " Transactions are the taller bars; a transaction's tooltip also lists its \
             micro-ops (sends with the offset the broker gave, polls with the records per key)."
        } else {
            ""
        };
        format!(
            "Each of the {} operations is a bar from its invocation to its completion (hover for \
             the process, operation, latency and index).{txns}",
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
        .map(|&o| {
            let label = if has_txns {
                format!("{} (txn: {})", o.as_str(), outcome_text(OpKind::Txn, o))
            } else {
                o.as_str().to_string()
            };
            (label, outcome_rgb(o))
        })
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
