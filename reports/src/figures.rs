//! The plots of a run report: each figure is an inline SVG chart, a legend and a caption
//! that says how to read it (docs/reports.md describes them for users).

use crate::downsample::{min_max_per_bucket, rate_per_bucket, steps, BUCKETS_DEFAULT};
use crate::error::ReportError;
use crate::examples;
use crate::history_scan::Outcome;
use crate::html::{esc, legend};
use crate::plots::{self, band_legend, Line, LostRow, Points, Rgb, Shape, TimeChart};
use crate::report::Ctx;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use tidewater_workloads::results::CheckResults;

/// Partitions drawn per per-partition chart; more would make unreadable colours.
pub const PARTITIONS_DRAWN_MAX: usize = 32;
/// Regression marks drawn at most.
const MARKS_DRAWN_MAX: usize = 2000;

/// The id of every chart in a report, in page order.
pub const PLOT_IDS: [&str; 6] = [
    "plot-latency",
    "plot-throughput",
    "plot-hw",
    "plot-lost-writes",
    "plot-unseen",
    "plot-isr",
];

/// Charts drawn only for a consumer-group run (results with `stats.rebalances`).
pub const GROUP_PLOT_IDS: [&str; 1] = ["plot-rebalances"];

const OK_RGB: Rgb = (31, 119, 180);
const FAIL_RGB: Rgb = (200, 30, 30);
const INFO_RGB: Rgb = (255, 127, 14);
const LOST_RGB: Rgb = (200, 30, 30);
const MIN_ISR_RGB: Rgb = (90, 90, 90);
const PALETTE: [Rgb; 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (200, 30, 30),
    (148, 103, 189),
    (140, 86, 75),
    (60, 60, 60),
    (188, 189, 34),
    (0, 90, 60),
    (120, 0, 160),
];

fn outcome_rgb(o: Outcome) -> Rgb {
    match o {
        Outcome::Ok => OK_RGB,
        Outcome::Fail => FAIL_RGB,
        Outcome::Info => INFO_RGB,
    }
}

/// A figure: the chart, its legend and a caption saying how to read it.
fn figure(id: &str, title: &str, svg: &str, legend_html: &str, caption: &str) -> String {
    format!(
        "<figure id=\"{id}\"><h3>{}</h3>{svg}{legend_html}<figcaption>{caption}</figcaption></figure>",
        esc(title)
    )
}

/// Op `i` as a link when the report lists it (ops named by examples), else as plain text:
/// the regressions found while drawing are not known before the history is read.
fn op_ref(ctx: &Ctx, i: u64) -> String {
    if ctx.scan.referenced.contains_key(&i) {
        examples::op_link(i)
    } else {
        format!("#{i}")
    }
}

/// The plots section of a report.
pub(crate) fn plots_section(ctx: &Ctx) -> Result<String, ReportError> {
    let mut out = String::from("<section id=\"plots\"><h2>Plots</h2>");
    let bands = band_legend(&ctx.faults.kinds());
    let band_note = if bands.is_empty() {
        "No fault was injected."
    } else {
        "Shaded bands: fault windows."
    };
    out.push_str(&latency_figure(ctx, &bands, band_note)?);
    out.push_str(&throughput_figure(ctx, &bands, band_note)?);
    out.push_str(&hw_figure(ctx, &bands, band_note)?);
    out.push_str(&lost_writes_figure(ctx)?);
    out.push_str(&unseen_figure(ctx, &bands, band_note)?);
    out.push_str(&isr_figure(ctx, &bands, band_note)?);
    if let Some(rebalances) = rebalance_figure(ctx, &bands, band_note)? {
        out.push_str(&rebalances);
    }
    out.push_str("</section>");
    Ok(out)
}

fn shape_of(f: &str) -> (Shape, &'static str) {
    match f {
        "send" => (Shape::Circle, "●"),
        "poll" => (Shape::Triangle, "▲"),
        _ => (Shape::Cross, "✕"),
    }
}

fn latency_figure(
    ctx: &Ctx,
    bands: &[(String, Rgb)],
    band_note: &str,
) -> Result<String, ReportError> {
    let x_max = ctx.x_max_s;
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
            points: min_max_per_bucket(&raw, 0.0, x_max, BUCKETS_DEFAULT),
        });
    }
    // Put fail and info on top of ok: they are rarer and matter more.
    series.sort_by_key(|s| s.rgb == OK_RGB);
    series.reverse();
    let y_range = if hi > 0.0 {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil()).max(lo * 10.0),
        )
    } else {
        (0.1, 1000.0)
    };
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-latency",
        y_label: "latency (ms, log)",
        x_max_s: x_max,
        y_range,
        y_log: true,
        y_integer: false,
        bands: &ctx.faults.windows,
        lines: Vec::new(),
        points: series,
    })?;
    let mut entries: Vec<(String, Rgb)> = Outcome::ALL
        .iter()
        .map(|o| (o.as_str().to_string(), outcome_rgb(*o)))
        .collect();
    entries.extend_from_slice(bands);
    let shape_text: Vec<String> = shapes
        .iter()
        .map(|(f, g)| format!("{g} {}", esc(f)))
        .collect();
    Ok(figure(
        "plot-latency",
        "Latency over time",
        &svg,
        &format!("{}<div class=\"legend\">{}</div>", legend(&entries), shape_text.join(" &nbsp; ")),
        &format!(
            "One mark per completed operation at its invocation time: colour is the outcome, shape \
             the operation. Per series and time slice only the fastest and slowest are drawn. {band_note}"
        ),
    ))
}

fn throughput_figure(
    ctx: &Ctx,
    bands: &[(String, Rgb)],
    band_note: &str,
) -> Result<String, ReportError> {
    let x_max = ctx.x_max_s;
    let buckets = ((x_max / 1.0).ceil() as usize).clamp(1, 300);
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    let mut width_s = x_max;
    let functions: Vec<String> = ctx.scan.functions().into_iter().collect();
    for ((f, outcome), points) in &ctx.scan.latencies {
        // Colour says the outcome, as in the latency plot; shades tell the operations apart.
        let f_number = functions.iter().position(|x| x == f).unwrap_or(0);
        let rgb = plots::shade(outcome_rgb(*outcome), f_number);
        let times = points
            .iter()
            .map(|p| (p.invoke_ns + p.latency_ns) as f64 / 1e9);
        let (width, rates) = rate_per_bucket(times, x_max, buckets);
        width_s = width;
        y_max = rates.iter().map(|p| p.1).fold(y_max, f64::max);
        lines.push(Line {
            rgb,
            points: rates,
            stroke_px: 1,
        });
        entries.push((format!("{f} {}", outcome.as_str()), rgb));
    }
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-throughput",
        y_label: "completions per second",
        x_max_s: x_max,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.faults.windows,
        lines,
        points: Vec::new(),
    })?;
    entries.extend_from_slice(bands);
    Ok(figure(
        "plot-throughput",
        "Throughput over time",
        &svg,
        &legend(&entries),
        &format!(
            "Completed operations per second by operation and outcome, counted in {width_s:.2} s \
             slices at completion time. {band_note}"
        ),
    ))
}

/// Partitions to draw: the first [`PARTITIONS_DRAWN_MAX`] in name order.
fn drawn_keys<'k>(keys: impl IntoIterator<Item = &'k String>) -> (Vec<String>, usize) {
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

fn omitted_note(drawn: usize, total: usize) -> String {
    if total > drawn {
        format!(" Only the first {drawn} of {total} partitions are drawn.")
    } else {
        String::new()
    }
}

fn hw_figure(ctx: &Ctx, bands: &[(String, Rgb)], band_note: &str) -> Result<String, ReportError> {
    let x_max = ctx.x_max_s;
    let sample_keys = ctx
        .files
        .samples
        .iter()
        .filter(|s| s.high_watermark.is_some())
        .map(|s| &s.key);
    let (keys, total) = drawn_keys(ctx.scan.watermarks.keys().chain(sample_keys));
    let mut lines = Vec::new();
    let mut points = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    for (n, key) in keys.iter().enumerate() {
        let rgb = PALETTE[n % PALETTE.len()];
        entries.push((key.clone(), rgb));
        if let Some(marks) = ctx.scan.watermarks.get(key) {
            let raw: Vec<(f64, f64)> = marks
                .points
                .iter()
                .map(|&(t, hw)| (t as f64 / 1e9, hw as f64))
                .collect();
            y_max = raw.iter().map(|p| p.1).fold(y_max, f64::max);
            lines.push(Line {
                rgb,
                points: min_max_per_bucket(&raw, 0.0, x_max, BUCKETS_DEFAULT),
                stroke_px: 1,
            });
        }
        let sampled: Vec<(f64, f64)> = ctx
            .leader_samples(key)
            .filter_map(|s| s.high_watermark.map(|hw| (s.time as f64 / 1e9, hw as f64)))
            .collect();
        y_max = sampled.iter().map(|p| p.1).fold(y_max, f64::max);
        points.push(Points {
            rgb,
            shape: Shape::Circle,
            size_px: 1,
            points: min_max_per_bucket(&sampled, 0.0, x_max, BUCKETS_DEFAULT),
        });
    }
    let regressions = &ctx.scan.hw_regressions;
    let stride = regressions.len().div_ceil(MARKS_DRAWN_MAX).max(1);
    points.push(Points {
        rgb: LOST_RGB,
        shape: Shape::Cross,
        size_px: 5,
        points: regressions
            .iter()
            .step_by(stride)
            .map(|r| (r.time_ns as f64 / 1e9, r.hw as f64))
            .collect(),
    });
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-hw",
        y_label: "high watermark (offset)",
        x_max_s: x_max,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.faults.windows,
        lines,
        points,
    })?;
    entries.push(("✕ regression".to_string(), LOST_RGB));
    entries.extend_from_slice(bands);
    let examples: Vec<String> = regressions
        .iter()
        .take(5)
        .map(|r| {
            format!(
                "{} at op {} saw HW {} after op {} had seen {}",
                esc(&r.key),
                op_ref(ctx, r.index),
                r.hw,
                op_ref(ctx, r.prior_index),
                r.prior_hw
            )
        })
        .collect();
    let regression_text = if ctx.scan.hw_regressions_count == 0 {
        "No client saw the high watermark go back.".to_string()
    } else {
        format!(
            "{} observations went back (red crosses), e.g. {}.",
            ctx.scan.hw_regressions_count,
            examples.join("; ")
        )
    };
    Ok(figure(
        "plot-hw",
        "High watermark over time per partition",
        &svg,
        &legend(&entries),
        &format!(
            "Lines: the high watermark each ok operation observed (its completion's \
             high_watermarks). Dots: the leader's high watermark sampled from the status route. \
             A cross marks an ok operation that observed a lower watermark than one that had \
             completed before it began (a regression: visible to consumers). {regression_text}{} {band_note}",
            omitted_note(keys.len(), total)
        ),
    ))
}

/// (key, offset) of lost-write examples shaped `{"key", "offset", "value", ...}`.
fn lost_offsets(results: Option<&CheckResults>) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let examples = results
        .and_then(|r| r.anomalies.get("lost-write"))
        .map(|a| a.examples.as_slice())
        .unwrap_or_default();
    for e in examples {
        let key = e.get("key").and_then(Value::as_str);
        let offset = e.get("offset").and_then(Value::as_u64);
        if let (Some(key), Some(offset)) = (key, offset) {
            out.entry(key.to_string()).or_default().push(offset);
        }
    }
    out
}

fn lost_writes_figure(ctx: &Ctx) -> Result<String, ReportError> {
    let results = ctx.files.results.as_ref();
    let lost = lost_offsets(results);
    let (keys, total) = drawn_keys(lost.keys());
    let rows: Vec<LostRow> = keys
        .iter()
        .map(|key| LostRow {
            key: key.clone(),
            offset_max: ctx
                .scan
                .watermarks
                .get(key)
                .and_then(|m| m.points.iter().map(|p| p.1).max()),
            lost_offsets: lost[key].clone(),
        })
        .collect();
    let svg = plots::draw_lost_writes("plot-lost-writes", &rows, LOST_RGB)?;
    let count = results
        .and_then(|r| r.anomalies.get("lost-write"))
        .map_or(0, |a| a.count);
    let drawn: usize = rows.iter().map(|r| r.lost_offsets.len()).sum();
    let summary = if count == 0 {
        "No acknowledged write was lost.".to_string()
    } else {
        format!("{count} lost acknowledged writes; the {drawn} with examples are drawn.")
    };
    Ok(figure(
        "plot-lost-writes",
        "Lost writes by offset per partition",
        &svg,
        &legend(&[
            ("✕ lost acknowledged write".to_string(), LOST_RGB),
            (
                "highest high watermark observed".to_string(),
                (190, 190, 190),
            ),
        ]),
        &format!(
            "One row per partition with lost writes; a cross at the offset the broker had \
             acknowledged. Crosses inside the grey bar are holes in the log. {summary}{}",
            omitted_note(keys.len(), total)
        ),
    ))
}

/// `stats.unseen_series` as (s, count).
pub(crate) fn unseen_series(results: Option<&CheckResults>) -> Vec<(f64, f64)> {
    let series = results
        .and_then(|r| r.stats.get("unseen_series"))
        .and_then(Value::as_array);
    series
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let t = p.get(0)?.as_f64()?;
            let n = p.get(1)?.as_f64()?;
            Some((t / 1e9, n))
        })
        .collect()
}

fn unseen_figure(
    ctx: &Ctx,
    bands: &[(String, Rgb)],
    band_note: &str,
) -> Result<String, ReportError> {
    let x_max = ctx.x_max_s;
    let series = unseen_series(ctx.files.results.as_ref());
    let y_max = series.iter().map(|p| p.1).fold(1.0, f64::max);
    let drawn = steps(&min_max_per_bucket(&series, 0.0, x_max, BUCKETS_DEFAULT));
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-unseen",
        y_label: "acknowledged, not yet read",
        x_max_s: x_max,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.faults.windows,
        lines: vec![Line {
            rgb: OK_RGB,
            points: drawn,
            stroke_px: 1,
        }],
        points: Vec::new(),
    })?;
    let note = if series.is_empty() {
        " The results hold no unseen series."
    } else {
        ""
    };
    let mut entries = vec![("unseen".to_string(), OK_RGB)];
    entries.extend_from_slice(bands);
    Ok(figure(
        "plot-unseen",
        "Unseen acknowledged writes over time",
        &svg,
        &legend(&entries),
        &format!(
            "How many acknowledged writes no read had returned yet. It rises while consumers \
             lag or a partition is unavailable; if it does not return to zero after the faults \
             heal, writes may be lost (see lost-write).{note} {band_note}"
        ),
    ))
}

fn isr_figure(ctx: &Ctx, bands: &[(String, Rgb)], band_note: &str) -> Result<String, ReportError> {
    let x_max = ctx.x_max_s;
    let samples = &ctx.files.samples;
    let (keys, total) = drawn_keys(samples.iter().filter(|s| s.isr.is_some()).map(|s| &s.key));
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    for (n, key) in keys.iter().enumerate() {
        let rgb = PALETTE[n % PALETTE.len()];
        let raw: Vec<(f64, f64)> = ctx
            .leader_samples(key)
            .filter_map(|s| {
                s.isr
                    .as_ref()
                    .map(|isr| (s.time as f64 / 1e9, isr.len() as f64))
            })
            .collect();
        y_max = raw.iter().map(|p| p.1).fold(y_max, f64::max);
        // Offset each partition a little so equal sizes do not hide each other.
        let lift = n as f64 * 0.03;
        let drawn = steps(&min_max_per_bucket(&raw, 0.0, x_max, BUCKETS_DEFAULT));
        lines.push(Line {
            rgb,
            points: drawn.into_iter().map(|(x, y)| (x, y + lift)).collect(),
            stroke_px: 1,
        });
        entries.push((key.clone(), rgb));
    }
    // The line that matters for acks=all: below it, sends are refused.
    let min_isr = ctx
        .files
        .settings()
        .get("min.insync.replicas")
        .and_then(|v| v.parse::<f64>().ok());
    if let Some(min_isr) = min_isr {
        lines.insert(
            0,
            Line {
                rgb: MIN_ISR_RGB,
                points: vec![(0.0, min_isr), (x_max, min_isr)],
                stroke_px: 3,
            },
        );
        entries.push((format!("min.insync.replicas = {min_isr}"), MIN_ISR_RGB));
        y_max = y_max.max(min_isr);
    }
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-isr",
        y_label: "in-sync replicas",
        x_max_s: x_max,
        y_range: (0.0, y_max + 0.5),
        y_log: false,
        y_integer: true,
        bands: &ctx.faults.windows,
        lines,
        points: Vec::new(),
    })?;
    entries.extend_from_slice(bands);
    let note = if samples.is_empty() {
        " No samples.jsonl in this run."
    } else {
        ""
    };
    Ok(figure(
        "plot-isr",
        "ISR size per partition over time",
        &svg,
        &legend(&entries),
        &format!(
            "Size of each partition's ISR as its leader reported it (sampled from the brokers' \
             status routes). Below min.insync.replicas, acks=all sends fail with \
             NOT_ENOUGH_REPLICAS.{note}{} {band_note}",
            omitted_note(keys.len(), total)
        ),
    ))
}

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
fn rebalance_figure(
    ctx: &Ctx,
    bands: &[(String, Rgb)],
    band_note: &str,
) -> Result<Option<String>, ReportError> {
    let Some(stats) = ctx.files.results.as_ref().map(|r| &r.stats) else {
        return Ok(None);
    };
    let rebalances = &stats["rebalances"];
    let Some(count) = rebalances["count"].as_u64().filter(|&n| n > 0) else {
        return Ok(None);
    };
    let series = rebalance_series(rebalances);
    let y_max = series.iter().map(|p| p.1).fold(1.0, f64::max);
    let svg = plots::draw_time_chart(&TimeChart {
        id: "plot-rebalances",
        y_label: "rebalance duration (ms)",
        x_max_s: ctx
            .x_max_s
            .max(series.iter().map(|p| p.0).fold(0.0, f64::max)),
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.faults.windows,
        lines: Vec::new(),
        points: vec![Points {
            rgb: OK_RGB,
            shape: Shape::Circle,
            size_px: 3,
            points: series.clone(),
        }],
    })?;
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let redeliveries = &stats["redeliveries"];
    let thinned = if (series.len() as u64) < count {
        format!(" {} of them are drawn (evenly thinned).", series.len())
    } else {
        String::new()
    };
    let mut entries = vec![("rebalance".to_string(), OK_RGB)];
    entries.extend_from_slice(bands);
    Ok(Some(figure(
        "plot-rebalances",
        "Rebalances",
        &svg,
        &legend(&entries),
        &format!(
            "Each dot is one rebalance (a member's join and sync) at the time it ended; its \
             height is how long it took. Rebalances: {count} ({} ok, {} failed, {} \
             indeterminate), mean {:.0} ms, longest {} ms.{thinned} Redeliveries: {} \
             deliveries of {} records that their group had already been given, out of {} \
             records delivered (at-least-once: what a member processed but had not committed \
             before a rebalance or crash is delivered again). {band_note}",
            n(&rebalances["ok"]),
            n(&rebalances["fail"]),
            n(&rebalances["info"]),
            rebalances["duration_ms_mean"].as_f64().unwrap_or(0.0),
            n(&rebalances["duration_ms_max"]),
            n(&redeliveries["redeliveries"]),
            n(&redeliveries["redelivered_records"]),
            n(&redeliveries["delivered"]),
        ),
    )))
}
