//! `plot-faults`: one row per node, a bar for each fault window that named it. Overlapping
//! windows (a kill of the whole ISR while a stale follower is already down) are each visible.

use super::BandNote;
use crate::draw::chart::{draw_row_chart, RowBar, RowChart};
use crate::error::ReportError;
use crate::pages::report::context::Ctx;
use crate::scan::fault_windows::BandColour;

pub(super) fn figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let nodes = ctx.faults.nodes();
    let mut bars = Vec::new();
    for w in &ctx.faults.windows {
        for node in &w.nodes {
            let row = nodes.iter().position(|n| n == node).expect("listed");
            bars.push(RowBar {
                row,
                x0: w.start_s,
                x1: w.end_s,
                rgb: w.kind.rgb(),
                height: 0.7,
                title: format!(
                    "{} of {} ({}) from {:.1} s to {:.1} s{}",
                    w.kind,
                    node,
                    w.nodes.join(","),
                    w.start_s,
                    w.end_s,
                    if w.open { ", never stopped" } else { "" }
                ),
            });
        }
    }
    let svg = draw_row_chart(&RowChart {
        id: "plot-faults",
        x_label: "time since the test started (s)",
        x_range: ctx.x_range_s,
        rows: nodes.clone(),
        bands: &[],
        bars,
    })?;
    let source = match ctx.faults.source {
        crate::scan::fault_windows::WindowSource::Results => "results.json's stats.fault_windows",
        crate::scan::fault_windows::WindowSource::History => {
            "the history's nemesis ops (results.json has no stats.fault_windows)"
        }
    };
    let caption = if ctx.faults.windows.is_empty() {
        "No fault was injected.".to_string()
    } else {
        format!(
            "One row per node; a bar for every fault window that named it, from its start to \
             its own stop (every start is paired with the stop of the same node and fault, so \
             overlapping windows each show). {} windows, from {source}; the Faults section \
             lists them.",
            ctx.faults.windows.len()
        )
    };
    Ok(super::figure(
        "plot-faults",
        "Faults per node",
        &svg,
        &bands.legend(Vec::new()),
        &caption,
    ))
}
