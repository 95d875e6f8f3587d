//! `plot-throughput` (completions per second per operation and outcome), `plot-latency`
//! (one mark per operation, Jepsen's latency-raw) and `plot-latency-quantiles` (p50, p95,
//! p99 and max per operation over time, Jepsen's latency-quantiles).

use super::{outcome_rgb, BandNote};
use crate::draw::chart::{self, legend_lines, Line, Points, Shape, Stroke, TimeChart};
use crate::draw::chart::{BLACK, BLUE, GREEN, ORANGE, PURPLE, SKY, VERMILLION};
use crate::draw::downsample::{min_max_per_bucket, rate_per_bucket, BUCKETS_DEFAULT};
use crate::error::ReportError;
use crate::html::esc;
use crate::pages::report::context::Ctx;
use crate::scan::history::LatencyPoint;
use crate::scan::outcome::Outcome;
use std::collections::BTreeMap;

/// Slices of the quantiles plot at most; each is at least one second.
const QUANTILE_SLICES_MAX: usize = 150;

/// The dash of an operation's lines: sends solid, polls dashed, others dotted.
fn dash_of(f: &str) -> &'static str {
    match f {
        "send" => "",
        "poll" => "7 3",
        _ => "2 2",
    }
}

/// A distinct colour per (operation, outcome): each outcome has one colour for sends and
/// another for polls, so that "send ok" and "poll ok" never look alike. Transactions take
/// the outcome colours of the latency plot (committed blue, aborted vermillion, unknown
/// orange), told from sends by their dotted line.
fn throughput_rgb(f: &str, outcome: Outcome) -> (u8, u8, u8) {
    match (f, outcome) {
        ("txn", o) => outcome_rgb(o),
        ("send", Outcome::Ok) => BLUE,
        ("send", Outcome::Fail) => VERMILLION,
        ("send", Outcome::Info) => ORANGE,
        ("poll", Outcome::Ok) => GREEN,
        ("poll", Outcome::Fail) => PURPLE,
        ("poll", Outcome::Info) => SKY,
        _ => BLACK,
    }
}

pub(super) fn throughput_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let (x_lo, x_hi) = ctx.x_range_s;
    let buckets = ((x_hi - x_lo).ceil() as usize).clamp(1, 300);
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    let mut width_s = x_hi - x_lo;
    for ((f, outcome), points) in &ctx.scan.latencies {
        let stroke = Stroke {
            rgb: throughput_rgb(f, *outcome),
            dash: dash_of(f),
            width_px: 1.5,
        };
        let times = points
            .iter()
            .map(|p| (p.invoke_ns + p.latency_ns) as f64 / 1e9 - x_lo);
        let (width, rates) = rate_per_bucket(times, x_hi - x_lo, buckets);
        width_s = width;
        y_max = rates.iter().map(|p| p.1).fold(y_max, f64::max);
        let label = format!("{f} {}", outcome.as_str());
        lines.push(Line {
            stroke,
            segments: vec![rates.into_iter().map(|(x, y)| (x + x_lo, y)).collect()],
            title: label.clone(),
        });
        entries.push((label, stroke));
    }
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-throughput",
        y_label: "completions per second",
        x_range_s: ctx.x_range_s,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.bands,
        lines,
        points: Vec::new(),
    })?;
    Ok(super::figure(
        "plot-throughput",
        "Throughput over time",
        &svg,
        &(legend_lines(&entries) + &bands.legend(Vec::new())),
        &format!(
            "Completed operations per second by operation and outcome, counted in {width_s:.2} s \
             slices at completion time; sends are solid, polls dashed, other operations \
             (transactions, ...) dotted, and each outcome of an operation has its own colour. \
             Availability is the ok lines: a fault the cluster tolerates barely dents them. {}",
            bands.text
        ),
    ))
}

fn shape_of(f: &str) -> (Shape, &'static str) {
    match f {
        "send" => (Shape::Circle, "●"),
        "poll" => (Shape::Triangle, "▲"),
        _ => (Shape::Cross, "✕"),
    }
}

/// A log axis covering every latency, in ms.
fn log_range(lo: f64, hi: f64) -> (f64, f64) {
    if hi > 0.0 && lo.is_finite() {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil()).max(lo * 10.0),
        )
    } else {
        (0.1, 1000.0)
    }
}

pub(super) fn latency_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let (x_lo, x_hi) = ctx.x_range_s;
    let mut series = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    let mut shapes = BTreeMap::new();
    for ((f, outcome), points) in &ctx.scan.latencies {
        let raw: Vec<(f64, f64)> = points
            .iter()
            .map(|p| {
                (
                    p.invoke_ns as f64 / 1e9,
                    (p.latency_ns as f64 / 1e6).max(0.001),
                )
            })
            .collect();
        for &(_, y) in &raw {
            lo = lo.min(y);
            hi = hi.max(y);
        }
        let (shape, glyph) = shape_of(f);
        shapes.insert(f.clone(), glyph);
        series.push(Points {
            rgb: outcome_rgb(*outcome),
            shape,
            size_px: 2,
            points: min_max_per_bucket(&raw, x_lo, x_hi, BUCKETS_DEFAULT),
            title: format!("{f} {}", outcome.as_str()),
        });
    }
    // Put fail and info on top of ok: they are rarer and matter more.
    series.sort_by_key(|s| s.rgb != outcome_rgb(Outcome::Ok));
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-latency",
        y_label: "latency (ms, log)",
        x_range_s: ctx.x_range_s,
        y_range: log_range(lo, hi),
        y_log: true,
        y_integer: false,
        bands: &ctx.bands,
        lines: Vec::new(),
        points: series,
    })?;
    let entries: Vec<(String, (u8, u8, u8))> = Outcome::ALL
        .iter()
        .map(|o| (o.as_str().to_string(), outcome_rgb(*o)))
        .collect();
    let shape_text: Vec<String> = shapes
        .iter()
        .map(|(f, g)| format!("{g} {}", esc(f)))
        .collect();
    Ok(super::figure(
        "plot-latency",
        "Latency over time",
        &svg,
        &format!(
            "{}<div class=\"legend\">{}</div>",
            bands.legend(entries),
            shape_text.join(" &nbsp; ")
        ),
        &format!(
            "One mark per completed operation at its invocation time: colour is the outcome, \
             shape the operation. Per series and time slice only the fastest and slowest are \
             drawn. {}",
            bands.text
        ),
    ))
}

/// The quantiles plotted, with their colours.
const QUANTILES: [(&str, f64, (u8, u8, u8)); 4] = [
    ("p50", 0.50, GREEN),
    ("p95", 0.95, BLUE),
    ("p99", 0.99, PURPLE),
    ("max", 1.0, BLACK),
];

/// Per time slice: (slice middle s, [p50, p95, p99, max] in ms) of the latencies invoked in
/// it. Nearest-rank quantiles, exact (every latency of the slice is sorted).
pub(crate) fn quantiles_over_time(
    points: &[&LatencyPoint],
    (x_lo, x_hi): (f64, f64),
    slices: usize,
) -> Vec<(f64, [f64; 4])> {
    let slices = slices.max(1);
    let width = ((x_hi - x_lo) / slices as f64).max(1e-9);
    let mut by_slice: Vec<Vec<u64>> = vec![Vec::new(); slices];
    for p in points {
        let t = p.invoke_ns as f64 / 1e9;
        if t < x_lo {
            continue;
        }
        let s = (((t - x_lo) / width) as usize).min(slices - 1);
        by_slice[s].push(p.latency_ns);
    }
    by_slice
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(i, mut v)| {
            v.sort_unstable();
            let q = QUANTILES
                .map(|(_, p, _)| crate::scan::history::percentile(&v, p).unwrap_or(0) as f64 / 1e6);
            (x_lo + (i as f64 + 0.5) * width, q)
        })
        .collect()
}

pub(super) fn quantiles_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let (x_lo, x_hi) = ctx.x_range_s;
    let slices = ((x_hi - x_lo).ceil() as usize).clamp(1, QUANTILE_SLICES_MAX);
    let mut by_f: BTreeMap<&str, Vec<&LatencyPoint>> = BTreeMap::new();
    for ((f, _), points) in &ctx.scan.latencies {
        by_f.entry(f.as_str()).or_default().extend(points.iter());
    }
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for (f, points) in &by_f {
        let q = quantiles_over_time(points, ctx.x_range_s, slices);
        for (n, (name, _, rgb)) in QUANTILES.iter().enumerate() {
            let series: Vec<(f64, f64)> = q.iter().map(|(t, v)| (*t, v[n].max(0.001))).collect();
            for &(_, y) in &series {
                lo = lo.min(y);
                hi = hi.max(y);
            }
            let stroke = Stroke {
                rgb: *rgb,
                dash: dash_of(f),
                width_px: 1.5,
            };
            lines.push(Line {
                stroke,
                segments: vec![series],
                title: format!("{f} {name}"),
            });
            entries.push((format!("{f} {name}"), stroke));
        }
    }
    let width_s = (x_hi - x_lo) / slices as f64;
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-latency-quantiles",
        y_label: "latency (ms, log)",
        x_range_s: ctx.x_range_s,
        y_range: log_range(lo, hi),
        y_log: true,
        y_integer: false,
        bands: &ctx.bands,
        lines,
        points: Vec::new(),
    })?;
    Ok(super::figure(
        "plot-latency-quantiles",
        "Latency quantiles over time",
        &svg,
        &(legend_lines(&entries) + &bands.legend(Vec::new())),
        &format!(
            "Per {width_s:.2} s slice of invocation time, the median, 95th and 99th percentile \
             and the maximum latency of every completed operation of each kind (ok, fail and \
             info alike: what clients waited). Sends solid, polls dashed. A fault shows as the \
             upper lines climbing to the client timeout. {}",
            bands.text
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_exact_per_slice() {
        let points: Vec<LatencyPoint> = (1..=100)
            .map(|i| LatencyPoint {
                invoke_ns: 500_000_000,
                latency_ns: i * 1_000_000,
            })
            .chain([LatencyPoint {
                invoke_ns: 1_500_000_000,
                latency_ns: 7_000_000,
            }])
            .collect();
        let refs: Vec<&LatencyPoint> = points.iter().collect();
        let q = quantiles_over_time(&refs, (0.0, 2.0), 2);
        assert_eq!(q, vec![(0.5, [50.0, 95.0, 99.0, 100.0]), (1.5, [7.0; 4])]);
    }
}
