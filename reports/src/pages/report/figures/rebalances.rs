//! `plot-rebalances`: consumer-group runs only. Every rebalance's duration at the time it
//! ended, with the counts of rebalances and redeliveries in the caption.

use super::BandNote;
use crate::draw::chart::{self, Points, Shape, TimeChart, BLUE};
use crate::error::ReportError;
use crate::pages::report::context::Ctx;
use serde_json::Value;

/// `stats.rebalances.series` as (completion s, duration ms).
fn rebalance_series(stats: &Value) -> Vec<(f64, f64)> {
    stats["series"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.get(0)?.as_f64()? / 1e3, p.get(1)?.as_f64()?)))
        .collect()
}

/// Consumer-group runs only: every rebalance's duration at the time it ended, with the
/// counts of rebalances and redeliveries in the caption.
pub(super) fn figure(ctx: &Ctx, bands: &BandNote) -> Result<Option<String>, ReportError> {
    let Some(stats) = ctx.files.results.as_ref().map(|r| &r.stats) else {
        return Ok(None);
    };
    let rebalances = &stats["rebalances"];
    let Some(count) = rebalances["count"].as_u64().filter(|&n| n > 0) else {
        return Ok(None);
    };
    let series = rebalance_series(rebalances);
    let y_max = series.iter().map(|p| p.1).fold(1.0, f64::max);
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-rebalances",
        y_label: "rebalance duration (ms)",
        x_range_s: (
            ctx.x_range_s.0,
            ctx.x_range_s
                .1
                .max(series.iter().map(|p| p.0).fold(0.0, f64::max)),
        ),
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.bands,
        lines: Vec::new(),
        points: vec![Points {
            rgb: BLUE,
            shape: Shape::Circle,
            size_px: 3,
            points: series.clone(),
            title: "rebalance".into(),
        }],
    })?;
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let redeliveries = &stats["redeliveries"];
    let thinned = if (series.len() as u64) < count {
        format!(" {} of them are drawn (evenly thinned).", series.len())
    } else {
        String::new()
    };
    let entries = vec![("rebalance".to_string(), BLUE)];
    Ok(Some(super::figure(
        "plot-rebalances",
        "Rebalances",
        &svg,
        &bands.legend(entries),
        &format!(
            "Each dot is one rebalance (a member's join and sync) at the time it ended; its \
             height is how long it took. Rebalances: {count} ({} ok, {} failed, {} \
             indeterminate), mean {:.0} ms, longest {} ms.{thinned} Redeliveries: {} \
             deliveries of {} records that their group had already been given, out of {} \
             records delivered (at-least-once: what a member processed but had not committed \
             before a rebalance or crash is delivered again). {}",
            n(&rebalances["ok"]),
            n(&rebalances["fail"]),
            n(&rebalances["info"]),
            rebalances["duration_ms_mean"].as_f64().unwrap_or(0.0),
            n(&rebalances["duration_ms_max"]),
            n(&redeliveries["redeliveries"]),
            n(&redeliveries["redelivered_records"]),
            n(&redeliveries["delivered"]),
            bands.text,
        ),
    )))
}
