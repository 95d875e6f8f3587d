//! `plot-isr` (ISR size per partition, broken where the partition was offline, offline
//! periods marked) and `plot-leaders` (which node led each partition, and when none did).

use super::{drawn_keys, omitted_note, BandNote};
use crate::draw::chart::{
    self, draw_row_chart, legend_lines, Line, RowBar, RowChart, Stroke, TimeChart,
};
use crate::draw::chart::{GREY, SERIES_RGB, VERMILLION};
use crate::draw::downsample::{min_max_per_bucket, steps, BUCKETS_DEFAULT};
use crate::error::ReportError;
use crate::pages::report::context::Ctx;
use crate::scan::fault_windows::natural_key;
use crate::scan::replica_states::KeyReplicas;
use std::collections::BTreeSet;

/// The pieces of a partition's ISR line: one per stretch with a leader, each holding its last
/// value until the partition went offline (or the last sample).
fn isr_segments(
    k: &KeyReplicas,
    interval_ns: u64,
    lift: f64,
    x: (f64, f64),
) -> Vec<Vec<(f64, f64)>> {
    let mut segments = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    let mut offline = k.offline.iter().peekable();
    let mut last_ns = 0;
    for p in &k.points {
        let Some(isr) = p.isr_len else { continue };
        // An offline period between the previous point and this one ends the piece.
        while let Some(&&(off_start, _)) = offline.peek() {
            if off_start > p.time_ns {
                break;
            }
            offline.next();
            if let Some(&(_, y)) = current.last() {
                current.push((off_start as f64 / 1e9, y));
            }
            segments.push(std::mem::take(&mut current));
        }
        current.push((p.time_ns as f64 / 1e9, isr as f64 + lift));
        last_ns = p.time_ns;
    }
    if let Some(&(_, y)) = current.last() {
        current.push(((last_ns + interval_ns) as f64 / 1e9, y));
    }
    segments.push(current);
    segments
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(|s| steps(&min_max_per_bucket(&s, x.0, x.1, BUCKETS_DEFAULT)))
        .collect()
}

fn offline_text(key: &str, (a, b): (u64, u64)) -> String {
    format!(
        "{key} offline: no leader answered from {:.1} s to {:.1} s ({:.1} s)",
        a as f64 / 1e9,
        b as f64 / 1e9,
        (b - a) as f64 / 1e9
    )
}

pub(super) fn isr_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let replicas = ctx.replicas;
    let (keys, total) = drawn_keys(replicas.by_key.keys());
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    let mut offline_count = 0;
    for (n, key) in keys.iter().enumerate() {
        let k = &replicas.by_key[key];
        let stroke = Stroke::nth(n);
        // Lift each partition a little so that equal sizes do not hide each other.
        let lift = n as f64 * 0.03;
        y_max = k
            .points
            .iter()
            .filter_map(|p| p.isr_len)
            .fold(y_max, |m, v| m.max(v as f64));
        lines.push(Line {
            stroke,
            segments: isr_segments(k, replicas.interval_ns, lift, ctx.x_range_s),
            title: format!("{key}: ISR size reported by its leader"),
        });
        entries.push((key.clone(), stroke));
        for &period in &k.offline {
            offline_count += 1;
            lines.push(Line {
                stroke: Stroke::solid(VERMILLION, 5.0),
                segments: vec![vec![
                    (period.0 as f64 / 1e9, lift),
                    (period.1 as f64 / 1e9, lift),
                ]],
                title: offline_text(key, period),
            });
        }
    }
    if offline_count > 0 {
        entries.push((
            "offline: no leader".to_string(),
            Stroke::solid(VERMILLION, 5.0),
        ));
    }
    // The line that matters for acks=all: below it, sends are refused.
    let min_isr = ctx
        .files
        .settings()
        .get("min.insync.replicas")
        .and_then(|v| v.parse::<f64>().ok());
    if let Some(min_isr) = min_isr {
        let stroke = Stroke {
            rgb: GREY,
            dash: "6 4",
            width_px: 2.5,
        };
        lines.insert(
            0,
            Line {
                stroke,
                segments: vec![vec![(ctx.x_range_s.0, min_isr), (ctx.x_range_s.1, min_isr)]],
                title: format!("min.insync.replicas = {min_isr}"),
            },
        );
        entries.push((format!("min.insync.replicas = {min_isr}"), stroke));
        y_max = y_max.max(min_isr);
    }
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-isr",
        y_label: "in-sync replicas",
        x_range_s: ctx.x_range_s,
        y_range: (-0.2, y_max + 0.5),
        y_log: false,
        y_integer: true,
        bands: &ctx.bands,
        lines,
        points: Vec::new(),
    })?;
    let note = no_samples_note(ctx);
    // No interval without two samples: say nothing rather than "every 0.0 s".
    let sampled = if replicas.interval_ns > 0 {
        format!(", sampled every {:.1} s", replicas.interval_ns as f64 / 1e9)
    } else {
        String::new()
    };
    Ok(super::figure(
        "plot-isr",
        "ISR size per partition over time",
        &svg,
        &(legend_lines(&entries) + &bands.legend(Vec::new())),
        &format!(
            "Size of each partition's ISR as its leader reported it (the brokers' status \
             routes{sampled}). The line stops where no leader answered: those periods are \
             drawn as thick red bars at zero ({offline_count} in all), because a partition \
             without a leader is offline, whatever its last ISR was. Below min.insync.replicas, \
             acks=all sends fail with NOT_ENOUGH_REPLICAS; with acks=1 it is when an unclean or \
             truncating failover can lose acknowledged writes.{note}{} {}",
            omitted_note(keys.len(), total),
            bands.text
        ),
    ))
}

pub(super) fn leaders_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let replicas = ctx.replicas;
    let (keys, total) = drawn_keys(replicas.by_key.keys());
    let mut nodes: Vec<String> = keys
        .iter()
        .flat_map(|k| {
            replicas.by_key[k]
                .points
                .iter()
                .filter_map(|p| p.leader.clone())
        })
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    nodes.sort_by_key(|a| natural_key(a));
    let colour = |node: &str| {
        let i = nodes.iter().position(|n| n == node).unwrap_or(0);
        SERIES_RGB[i % SERIES_RGB.len()]
    };
    let mut bars = Vec::new();
    let mut changes_total = 0;
    for (row, key) in keys.iter().enumerate() {
        let k = &replicas.by_key[key];
        // Stretches of one leader: (leader, epoch, start, end).
        let mut stretches: Vec<(String, Option<u64>, u64, u64)> = Vec::new();
        for p in &k.points {
            let leader = p.leader.clone().unwrap_or_else(|| "?".into());
            let end = p.time_ns + replicas.interval_ns;
            let offline_between =
                |from: u64| k.offline.iter().any(|&(a, _)| from < a && a <= p.time_ns);
            match stretches.last_mut() {
                Some(s) if s.0 == leader && s.1 == p.leader_epoch && !offline_between(s.3) => {
                    s.3 = end
                }
                _ => stretches.push((leader, p.leader_epoch, p.time_ns, end)),
            }
        }
        changes_total += stretches.len().saturating_sub(1);
        for (leader, epoch, a, b) in stretches {
            bars.push(RowBar {
                row,
                x0: a as f64 / 1e9,
                x1: b as f64 / 1e9,
                rgb: colour(&leader),
                height: 0.6,
                title: format!(
                    "{key} led by {leader}{} from {:.1} s to {:.1} s",
                    epoch
                        .map(|e| format!(" (leader epoch {e})"))
                        .unwrap_or_default(),
                    a as f64 / 1e9,
                    b as f64 / 1e9
                ),
            });
        }
        for &period in &k.offline {
            bars.push(RowBar {
                row,
                x0: period.0 as f64 / 1e9,
                x1: period.1 as f64 / 1e9,
                rgb: VERMILLION,
                height: 0.9,
                title: offline_text(key, period),
            });
        }
    }
    let svg = draw_row_chart(&RowChart {
        id: "plot-leaders",
        x_label: "time since the test started (s)",
        x_range: ctx.x_range_s,
        rows: keys.clone(),
        bands: &ctx.bands,
        bars,
    })?;
    let mut entries: Vec<(String, (u8, u8, u8))> = nodes
        .iter()
        .map(|n| (format!("led by {n}"), colour(n)))
        .collect();
    entries.push(("offline: no leader".to_string(), VERMILLION));
    Ok(super::figure(
        "plot-leaders",
        "Leader of each partition over time",
        &svg,
        &bands.legend(entries),
        &format!(
            "One row per partition: which node answered as its leader, a new bar at every \
             leader or epoch change ({changes_total} changes in all), red where no leader \
             answered.{}{} {}",
            no_samples_note(ctx),
            omitted_note(keys.len(), total),
            bands.text
        ),
    ))
}

/// Said under the figures drawn from `samples.jsonl` when the run has none. (Runs against
/// Apache Kafka have samples from its Metadata and its leaders' own offsets.)
pub(super) fn no_samples_note(ctx: &Ctx) -> &'static str {
    if ctx.files.samples.is_empty() {
        " No replica samples in this run: samples.jsonl is missing or empty (the sampler \
         reached no broker, or the run predates it)."
    } else {
        ""
    }
}
